"""extend_all_queries_by_N: the CPU copy of query_start_loc is left as it was

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
    # BUG: query_start_loc_cpu is not extended
    new_cad = cad.replace(
        query_start_loc=new_query_start_loc,
        seq_lens=cad.seq_lens + N,
        num_actual_tokens=cad.num_actual_tokens + cad.batch_size() * N,
        max_query_len=cad.max_query_len + N,
        max_seq_len=cad.max_seq_len + N,
        slot_mapping=new_slot_mapping,
    )
    return new_cad
