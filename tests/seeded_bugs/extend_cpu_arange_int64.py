"""extend_all_queries_by_N: the CPU offsets come from an int64 arange, so query_start_loc_cpu turns int64

Seeded bug: a copy of ``extend_all_queries_by_N`` from kernels/spec_decode_utils.py with one
change. tests/test_seeded_bugs.py checks that the fuzzer finds it.
"""

import torch

from eaglefuzz.kernels.vllm_types import CommonAttentionMetadata


def extend_all_queries_by_N(
    common_attn_metadata: CommonAttentionMetadata,
    N: int,
    arange: torch.Tensor,
    new_slot_mapping: torch.Tensor,
) -> CommonAttentionMetadata:
    cad = common_attn_metadata
    new_query_start_loc = cad.query_start_loc + N * arange[: len(cad.query_start_loc)]
    new_query_start_loc_cpu = cad.query_start_loc_cpu + N * torch.arange(
        len(cad.query_start_loc_cpu)  # BUG: no dtype, so int64
    )
    new_cad = cad.replace(
        query_start_loc=new_query_start_loc,
        query_start_loc_cpu=new_query_start_loc_cpu,
        seq_lens=cad.seq_lens + N,
        num_actual_tokens=cad.num_actual_tokens + cad.batch_size() * N,
        max_query_len=cad.max_query_len + N,
        max_seq_len=cad.max_seq_len + N,
        slot_mapping=new_slot_mapping,
    )
    return new_cad
