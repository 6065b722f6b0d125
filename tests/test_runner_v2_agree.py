"""Model Runner V2's oracles (docs/CONTRACT.md §14-§27) agree with each other on large random
batches, and with vLLM 0.33.0's kernels (release wheel, Triton interpreter) on small ones.

The draws are the inputs §14.2-§27.2 describe (a few of §N.4's extended ones too: block sizes
cut short, masked rows, counts near the limits), seeded, made with NumPy here: every written
buffer starts full of a sentinel (or holds the state the kernel updates), and after the call
every array, guard tail included, must be equal in both runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from eaglefuzz.oracles import loops_v2, vectorized_v2

S32, S64 = -7777, -5555
I32_MAX = 2**31 - 1


def _npow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _batch(rng: np.random.Generator, B: int, R: int, max_q: int):
    """``B`` rows of distinct state rows out of ``R``, query lengths ``1..max_q``."""
    idx = rng.permutation(R)[:B].astype(np.int64)
    qlen = rng.integers(1, max_q + 1, size=B)
    qsl = np.concatenate([[0], np.cumsum(qlen)]).astype(np.int32)
    return idx, qlen, qsl


def _prefill(rng, B):  # §14
    R, W = B + int(rng.integers(0, 4)), int(rng.integers(4, 40))
    idx, qlen, qsl = _batch(rng, B, R, max(1, W // 3))
    L = rng.integers(1, W + 1, size=R).astype(np.int32)
    c = rng.integers(0, W + 1, size=R).astype(np.int32)
    for b, s in enumerate(idx):  # a prefilling row's chunk stays inside the row
        if rng.random() < 0.7:
            c[s] = rng.integers(0, min(L[s], W - qlen[b] + 1)) if min(L[s], W - qlen[b] + 1) > 0 else L[s]
        else:
            c[s] = rng.integers(L[s], W + 1)
    n = int(rng.integers(1, 5))
    T = int(qsl[-1]) + int(rng.integers(0, 4))
    return dict(input_ids=np.full(T, S32, np.int32), next_prefill_tokens=np.full((n, R), S32, np.int32),
                idx_mapping=idx, query_start_loc=qsl, all_token_ids=rng.integers(0, 1000, (R, W)).astype(np.int32),
                prefill_len=L, num_computed_tokens=c, num_reqs=B, num_lookahead=n,
                LOOKAHEAD_BLOCK=_npow2(n) if rng.random() < 0.8 else max(1, _npow2(n) // 2))


def _pos_seq(rng, B):  # §15
    R = B + int(rng.integers(0, 4))
    idx, qlen, qsl = _batch(rng, B, R, 12)
    big = rng.random() < 0.2
    c = rng.integers(I32_MAX - 40 if big else 0, I32_MAX - 20 if big else 5000, size=R).astype(np.int32)
    return dict(pos=np.full(int(qsl[-1]) + 2, S64, np.int64), seq_lens=np.full(R + 1, S32, np.int32), idx_mapping=idx,
                query_start_loc=qsl, num_computed_tokens=c, max_num_reqs=R, num_reqs=B)


def _combine(rng, B):  # §16
    R, K = B + int(rng.integers(0, 4)), int(rng.integers(1, 6))
    d = rng.integers(0, K + 1, size=B)
    nl = d + 1
    idx = rng.permutation(R)[:B].astype(np.int64)
    qlen = nl + rng.integers(0, 6, size=B)
    qsl = np.concatenate([[0], np.cumsum(qlen)]).astype(np.int32)
    c = rng.integers(0, 50, size=B)
    seq = (c + qlen).astype(np.int32)
    L = rng.integers(1, 60, size=R).astype(np.int32)
    for b, s in enumerate(idx):  # every case: prefill, prompt tail, decode
        L[s] = rng.choice([seq[b] + 1, seq[b], seq[b] - nl[b] + 1, max(1, seq[b] - nl[b] - 3)])
    return dict(input_ids=rng.integers(0, 99, int(qsl[-1]) + 2).astype(np.int32),
                logits_indices=np.full(int(nl.sum()) + 2, S64, np.int64), idx_mapping=idx,
                last_sampled_tokens=rng.integers(0, 2**33, (R, 1)).astype(np.int64), query_start_loc=qsl, seq_lens=seq,
                prefill_len=L, draft_tokens=rng.integers(0, 2**33, (R, K)).astype(np.int64),
                cu_num_logits=np.concatenate([[0], np.cumsum(nl)]).astype(np.int32), num_reqs=B,
                BLOCK_SIZE=_npow2(K + 1) if rng.random() < 0.8 else max(1, _npow2(K + 1) // 2),
                NUM_NEW_SAMPLED_TOKENS=1)


def _expand(rng, B):  # §17
    K = int(rng.integers(1, 6))
    nl = rng.integers(0, K + 2, size=B)
    n = int(nl.sum())
    return dict(idx_mapping=rng.integers(-3, 2000, B).astype(np.int64), expanded_idx_mapping=np.full(n + 2, S64, np.int64),
                expanded_local_pos=np.full(n + 2, S32, np.int32),
                cu_num_logits=np.concatenate([[0], np.cumsum(nl)]).astype(np.int32), num_reqs=B,
                BLOCK_SIZE=_npow2(K + 1) if rng.random() < 0.8 else max(1, _npow2(K + 1) // 2))


def _sampled_rejected(rng, B):  # §18
    R = B + int(rng.integers(0, 4))
    idx = rng.permutation(R)[:B].astype(np.int64)
    nl = rng.integers(1, 6, size=B)
    return dict(num_sampled=rng.integers(1, nl + 1).astype(np.int32), num_rejected=np.full(B + 1, S32, np.int32),
                seq_lens=rng.integers(1, 40, B).astype(np.int32),
                cu_num_logits=np.concatenate([[0], np.cumsum(nl)]).astype(np.int32), idx_mapping=idx,
                prefill_len=rng.integers(1, 40, R).astype(np.int32), num_reqs=B)


def _post_update(rng, B):  # §19
    R, K, W, V = B + int(rng.integers(0, 4)), int(rng.integers(1, 5)), 32, 24
    idx, qlen, qsl = _batch(rng, B, R, K + 2)
    idx[rng.random(B) < 0.15] = -1
    ns = rng.integers(0, K + 2, size=B).astype(np.int32)
    drafts = rng.random() < 0.3
    return dict(idx_mapping=idx, num_computed_tokens=rng.integers(0, 1000, R).astype(np.int32),
                last_sampled_tokens=rng.integers(0, V, (R, 1)).astype(np.int64),
                output_bin_counts=rng.integers(0, 5, (R, V)).astype(np.int32) if rng.random() < 0.7 else None,
                sampled_tokens=rng.integers(0, V, (B, K + 1)).astype(np.int64), num_sampled=ns,
                num_rejected=rng.integers(0, qlen + 1).astype(np.int32),
                query_start_loc=qsl if rng.random() < 0.85 else None,
                all_token_ids=np.full((R, W), S32, np.int32), total_len=rng.integers(0, W - K - 1, R).astype(np.int32),
                draft_tokens=rng.integers(0, V, (B, K)).astype(np.int64) if drafts else None,
                draft_tokens_out=np.full((R, K), S64, np.int64) if drafts else None,
                num_draft_tokens=K if drafts else 0, num_reqs=B)


def _post_update_computed(rng, B):  # §20
    R = B + int(rng.integers(0, 4))
    idx, qlen, qsl = _batch(rng, B, R, 9)
    return dict(idx_mapping=idx, num_computed_tokens=rng.integers(0, I32_MAX, R).astype(np.int32), query_start_loc=qsl,
                num_reqs=B)


def _gather_tables(rng, B):  # §21
    R, G = B + int(rng.integers(0, 4)), int(rng.integers(1, 4))
    widths = [int(rng.integers(1, 9)) for _ in range(G)]
    return dict(idx_mapping=rng.permutation(R)[:B].astype(np.int64),
                src_block_tables=[rng.integers(0, 10**6, (R, w)).astype(np.int32) for w in widths],
                dst_block_tables=[np.full((R, w), S32, np.int32) for w in widths],
                num_blocks=np.stack([rng.integers(0, w + 1, R) for w in widths]).astype(np.int32), num_reqs=B,
                num_rows=int(rng.integers(B, R + 1)), num_computed_tokens=rng.integers(0, 200, R).astype(np.int32),
                sliding_window_reach=rng.choice([0, 0, 5, 40], G).astype(np.int32),
                block_sizes=rng.choice([1, 4, 16], G).astype(np.int32), MASK_SLIDING_WINDOW=bool(rng.random() < 0.6))


def _slot_mappings(rng, B):  # §22
    R, G = B + int(rng.integers(0, 4)), int(rng.integers(1, 4))
    CP = int(rng.choice([1, 1, 2, 4]))
    sizes = [int(rng.choice([4, 8, 16])) for _ in range(G)]
    IL = int(rng.choice([i for i in (1, 2, 4) if all(s % i == 0 for s in sizes)]))
    M = int(rng.integers(1, 200))
    widths = [-(-M // s) + int(rng.integers(0, 3)) for s in sizes]
    idx, qlen, qsl = _batch(rng, B, R, 9)
    idx[rng.random(B) < 0.15] = -1
    T = int(qsl[-1])
    return dict(idx_mapping=idx, query_start_loc=qsl, positions=rng.integers(0, M, T + 1).astype(np.int64),
                block_tables=[rng.integers(0, 10**5, (R, w)).astype(np.int32) for w in widths],
                block_sizes=np.array(sizes, np.int32), slot_mapping_enabled=rng.random(G) < 0.85,
                dcp_sharded=rng.random(G) < 0.7, slot_mappings=np.full((G, T + 5), S64, np.int64),
                cp_rank=int(rng.integers(0, CP)), num_reqs=B, max_num_tokens=T + int(rng.integers(0, 5)),
                CP_SIZE=CP, CP_INTERLEAVE=IL, PAD_ID=-1)


def _gather_draft(rng, B):  # §23
    T, R = int(rng.integers(B, 4 * B + 2)), 6
    n = int(rng.integers(1, B + 2))
    return dict(draft_sampled=np.full(n + 2, S32, np.int32), pos=np.full(n + 2, S64, np.int64),
                input_ids=rng.integers(0, 99, T).astype(np.int32), positions=rng.integers(0, 40, T).astype(np.int64),
                logits_indices=rng.integers(0, T, n).astype(np.int64), expanded_idx_mapping=rng.integers(0, R, n).astype(np.int64),
                expanded_local_pos=rng.integers(0, 4, n).astype(np.int32), prefill_len=rng.integers(1, 40, R).astype(np.int32),
                num_logits=n)


def _flatten(rng, B):  # §24
    K = int(rng.integers(1, 6))
    nl = rng.integers(1, K + 2, size=B)
    return dict(flat_sampled=np.full(int(nl.sum()) + 2, S64, np.int64), sampled=rng.integers(0, 99, (B, K + 1)).astype(np.int64),
                num_sampled=rng.integers(1, nl + 1).astype(np.int32),
                cu_num_logits=np.concatenate([[0], np.cumsum(nl)]).astype(np.int32), num_reqs=B)


def _draft_prefill(rng, B):  # §25
    R = B + int(rng.integers(0, 4))
    idx, qlen, qsl = _batch(rng, B, R, 7)
    T = int(qsl[-1])
    ns = rng.integers(0, 3, B).astype(np.int32)
    nr = np.where(ns > 0, rng.integers(0, qlen), 0).astype(np.int32)
    return dict(last_token_indices=np.full(R + 1, S64, np.int64), draft_current_step=np.array([7], np.int64),
                draft_input_ids=np.full(T + 2, S32, np.int32), draft_positions=np.full(T + 2, S64, np.int64),
                draft_query_start_loc=np.full(R + 2, S32, np.int32), draft_seq_lens=np.full(R + 1, S32, np.int32),
                target_input_ids=rng.integers(0, 99, T).astype(np.int32), target_positions=rng.integers(0, 999, T).astype(np.int64),
                idx_mapping=idx, last_sampled=rng.integers(0, 2**33, (R, 1)).astype(np.int64),
                next_prefill_tokens=rng.integers(0, 99, (2, R)).astype(np.int32), num_sampled=ns, num_rejected=nr,
                query_start_loc=qsl, seq_lens=rng.integers(1, 99, B).astype(np.int32), max_num_reqs=R, num_reqs=B)


def _decode_inputs(rng, B):  # §26
    R, K, M = B + int(rng.integers(0, 4)), int(rng.integers(2, 5)), int(rng.integers(2, 64))
    seq = rng.integers(1, M + 1, B)
    nr = rng.integers(0, 3, B)
    return dict(draft_tokens=rng.integers(0, 2**33, (R, K)).astype(np.int64), target_seq_lens=(seq + nr).astype(np.int32),
                num_rejected=nr.astype(np.int32), input_ids=np.full(R + 1, S32, np.int32),
                positions=np.concatenate([seq - 1, np.full(R + 1 - B, S64)]).astype(np.int64),
                sample_src_positions=np.concatenate([seq, np.full(R + 1 - B, S64)]).astype(np.int64),
                query_start_loc=np.full(R + 2, S32, np.int32), seq_lens=np.full(R + 1, S32, np.int32), max_model_len=M,
                max_num_reqs=R, num_reqs=B, ADVANCE_DRAFT_POSITIONS=bool(rng.random() < 0.7))


def _update_draft(rng, B):  # §27
    R, K, M, H = B + int(rng.integers(0, 4)), int(rng.integers(2, 5)), int(rng.integers(2, 64)), int(rng.integers(1, 9))
    seq = rng.integers(1, M + 1, R)
    return dict(output_draft_tokens=np.full((R, K), S64, np.int64),
                next_input_hidden_states=np.full((R + 1, H + 1), 7.5, np.float32),
                input_ids=np.full(R, S32, np.int32), positions=(seq - 1).astype(np.int64),
                sample_src_positions=seq.astype(np.int64), seq_lens=seq.astype(np.int32),
                draft_tokens=rng.integers(0, 2**33, B).astype(np.int64), current_draft_step=np.array([rng.integers(0, K)], np.int64),
                hidden_states=rng.standard_normal((B + 1, H + int(rng.integers(0, 3)))).astype(np.float32), hidden_size=H,
                max_model_len=M, num_speculative_steps=K, num_reqs=B, ADVANCE_DRAFT_POSITIONS=bool(rng.random() < 0.7))


INPUT_BATCH = "vllm/v1/worker/gpu/input_batch.py"
BLOCK_TABLE = "vllm/v1/worker/gpu/block_table.py"
REJECTION = "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py"
SPECULATOR = "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py"

KERNELS: dict[str, tuple[Callable[[np.random.Generator, int], dict[str, Any]], str, str, str]] = {
    "input_batch_prepare_prefill_inputs_kernel": (_prefill, "input_batch_prepare_prefill_inputs", INPUT_BATCH, "launch_input_batch_prepare_prefill_inputs"),
    "_prepare_pos_seq_lens_kernel": (_pos_seq, "prepare_pos_seq_lens", INPUT_BATCH, "launch_prepare_pos_seq_lens"),
    "_combine_sampled_and_draft_tokens_kernel": (_combine, "combine_sampled_and_draft_tokens", INPUT_BATCH, "launch_combine_sampled_and_draft_tokens"),
    "_expand_idx_mapping_kernel": (_expand, "expand_idx_mapping", INPUT_BATCH, "launch_expand_idx_mapping"),
    "_get_num_sampled_and_rejected_kernel": (_sampled_rejected, "get_num_sampled_and_rejected", INPUT_BATCH, "launch_get_num_sampled_and_rejected"),
    "_post_update_kernel": (_post_update, "post_update", INPUT_BATCH, "launch_post_update"),
    "_post_update_num_computed_tokens_kernel": (_post_update_computed, "post_update_num_computed_tokens", INPUT_BATCH, "launch_post_update_num_computed_tokens"),
    "_gather_block_tables_kernel": (_gather_tables, "gather_block_tables", BLOCK_TABLE, "launch_gather_block_tables"),
    "_compute_slot_mappings_kernel": (_slot_mappings, "compute_slot_mappings", BLOCK_TABLE, "launch_compute_slot_mappings"),
    "_gather_draft_sampled_kernel": (_gather_draft, "gather_draft_sampled", REJECTION, "launch_gather_draft_sampled"),
    "_flatten_sampled_kernel": (_flatten, "flatten_sampled", REJECTION, "launch_flatten_sampled"),
    "target_dependent_ar_prepare_prefill_inputs_kernel": (_draft_prefill, "target_dependent_ar_prepare_prefill_inputs", SPECULATOR, "launch_target_dependent_ar_prepare_prefill_inputs"),
    "_prepare_decode_inputs_kernel": (_decode_inputs, "prepare_decode_inputs", SPECULATOR, "launch_prepare_decode_inputs"),
    "_update_draft_inputs_kernel": (_update_draft, "update_draft_inputs", SPECULATOR, "launch_update_draft_inputs"),
}  # fmt: skip
"""Target name (docs/CONTRACT.md's heading) -> draw, oracle function, vLLM module, launcher."""

FUNCTIONS = {"input_batch_prepare_prefill_inputs_kernel": "_prepare_prefill_inputs_kernel",
             "target_dependent_ar_prepare_prefill_inputs_kernel": "_prepare_prefill_inputs_kernel"}
"""vLLM's function name of a target named otherwise (docs/CONTRACT.md, "Target names")."""


def _copy(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.copy()
    if isinstance(v, list):
        return [_copy(x) for x in v]
    return v


def _arrays(args: dict[str, Any]) -> dict[str, np.ndarray]:
    out = {}
    for k, v in args.items():
        if isinstance(v, np.ndarray):
            out[k] = v
        elif isinstance(v, list):
            out.update({f"{k}[{i}]": x for i, x in enumerate(v)})
    return out


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    found = []
    for k, x in _arrays(a).items():
        y = _arrays(b)[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            found.append(f"{k}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}")
        elif not np.array_equal(x.view(f"u{x.dtype.itemsize}"), y.view(f"u{y.dtype.itemsize}")):
            where = np.flatnonzero(x.reshape(-1).view(f"u{x.dtype.itemsize}") != y.reshape(-1).view(f"u{y.dtype.itemsize}"))
            found.append(f"{k}[{where[:5].tolist()}]: {x.reshape(-1)[where[:5]].tolist()} vs {y.reshape(-1)[where[:5]].tolist()}")
    return found


def _oracle_run(module: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    mine = {k: _copy(v) for k, v in args.items()}
    getattr(module, KERNELS[name][1])(**mine)
    return mine


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_v2_oracles_agree_on_large_random_batches(name):
    rng = np.random.default_rng([30, sorted(KERNELS).index(name)])
    draw = KERNELS[name][0]
    for k in range(12):
        args = draw(rng, int(rng.integers(1, 600 if k % 3 else 8)))
        got = _oracle_run(vectorized_v2, name, args), _oracle_run(loops_v2, name, args)
        assert not _differences(*got), f"draw {k}: {_differences(*got)}"
        assert _differences(got[0], args) or name == "_post_update_kernel", f"draw {k}: nothing written"


@pytest.fixture(scope="module")
def release_modules(needs, backend) -> dict[str, Any]:
    from eaglefuzz.harness.sources import vllm as vsrc
    from eaglefuzz.harness.sources.vllm_shims import RUNNER_V2_MODULES, load_module

    root = needs.release_files(vsrc.PINNED_RELEASE)
    return {m: load_module(root, f"v2agree_{k}", m)[0] for k, m in enumerate(RUNNER_V2_MODULES)}


@pytest.mark.kernel
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_vllm_0_33_0_kernel_agrees_with_the_oracle_on_small_random_batches(name, release_modules, backend):
    if backend.device != "cpu":
        pytest.skip("CPU tensors: run under the Triton interpreter")
    import torch

    from eaglefuzz.kernels import launchers

    draw, _, module, launcher = KERNELS[name]
    kernel = getattr(release_modules[module], FUNCTIONS.get(name, name))
    rng = np.random.default_rng([31, sorted(KERNELS).index(name)])
    for k in range(6):
        args = draw(rng, int(rng.integers(1, 6)))
        expected = _oracle_run(vectorized_v2, name, args)

        def conv(v: Any) -> Any:
            return torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else [conv(x) for x in v] if isinstance(v, list) else v

        tensors = {key: conv(v) for key, v in args.items()}
        getattr(launchers, launcher)(kernel, **tensors)

        def back(v: Any) -> Any:
            return v.numpy() if hasattr(v, "numpy") else [back(x) for x in v] if isinstance(v, list) else v

        got = {key: back(v) for key, v in tensors.items()}
        assert not _differences(got, expected), f"draw {k} ({args}): {_differences(got, expected)}"
