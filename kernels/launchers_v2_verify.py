"""Launch Model Runner V2's verification kernels (docs/CONTRACT.md §28-§35) the way vLLM's
wrappers do: ``apply_temperature`` and ``gumbel_sample`` (``sample/gumbel.py``) and
``rejection_sample`` (``spec_decode/rejection_sampler_utils.py``).

vLLM's own code is not here: each launcher takes the kernel (vLLM's, from a release wheel, an
installed vLLM or a user's file) as its first argument and passes it what the wrapper passes
(grids, strides, ``constexpr`` values and ``num_warps``), with the keyword names of the oracles
of ``oracles/vectorized_v2_verify.py``. Launch parameters default to vLLM's choice. Tensors given
for outputs are written in place; the launchers allocate nothing a kernel writes.
:func:`launch_rejection_sample` chains the six kernels of §30-§35 as ``rejection_sample`` does
(``kernels`` maps their vLLM names to the kernels) and allocates the intermediate buffers as it
does, filled with a sentinel instead of left uninitialised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton

Kernel = Any  # anything indexable as kernel[grid](*args, **constexprs)

VOCAB_BLOCK_SIZE = 8192
"""``rejection_sample``'s block of the statistics and residual-mass kernels (§30, §32)."""
RESAMPLE_BLOCK_SIZE = 1024
"""``rejection_sample``'s block of the resampling kernel (§34) and ``gumbel_sample``'s (§29)."""
TEMPERATURE_BLOCK_SIZE = 8192
"""``apply_temperature``'s block (§28)."""


def _stride0(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.stride(0)


def launch_temperature(kernel: Kernel, *, logits: torch.Tensor, expanded_idx_mapping: torch.Tensor,
                       temperature: torch.Tensor, num_tokens: int | None = None, vocab_size: int | None = None,
                       BLOCK_SIZE: int = TEMPERATURE_BLOCK_SIZE) -> None:  # fmt: skip
    """As ``apply_temperature``: grid ``(num_tokens, cdiv(vocab_size, 8192))``."""
    T = logits.shape[0] if num_tokens is None else num_tokens
    V = logits.shape[1] if vocab_size is None else vocab_size
    kernel[(T, triton.cdiv(V, BLOCK_SIZE))](
        logits, logits.stride(0), expanded_idx_mapping, temperature, V, BLOCK_SIZE=BLOCK_SIZE,
    )  # fmt: skip


def launch_gumbel_sample(kernel: Kernel, *, local_argmax: torch.Tensor, local_max: torch.Tensor,
                         logits: torch.Tensor, expanded_idx_mapping: torch.Tensor, seeds: torch.Tensor,
                         pos: torch.Tensor, temperature: torch.Tensor, apply_temperature: bool, is_drafting: bool,
                         use_fp64: bool = False, logits_cache: torch.Tensor | None = None,
                         logits_cache_col: torch.Tensor | None = None,
                         logits_cache_source: torch.Tensor | None = None, num_tokens: int | None = None,
                         vocab_size: int | None = None, BLOCK_SIZE: int = RESAMPLE_BLOCK_SIZE) -> None:  # fmt: skip
    """As ``gumbel_sample``: grid ``(num_tokens, cdiv(vocab_size, 1024))``, the cache source the
    logits themselves unless given, ``PER_TOKEN_COL`` when the column is a tensor of rank 1.
    ``local_argmax`` (int64) and ``local_max`` (float32, float64 with ``use_fp64``) are the
    per-block results ``gumbel_sample`` reduces with ``argmax`` and ``gather``."""
    T = logits.shape[0] if num_tokens is None else num_tokens
    V = logits.shape[1] if vocab_size is None else vocab_size
    if logits_cache is not None and logits_cache_source is None:
        logits_cache_source = logits
    per_token_col = logits_cache_col is not None and logits_cache_col.dim() > 0
    kernel[(T, triton.cdiv(V, BLOCK_SIZE))](
        local_argmax, local_argmax.stride(0), local_max, local_max.stride(0),
        logits_cache, logits_cache.stride(0) if logits_cache is not None else 0,
        logits_cache.stride(1) if logits_cache is not None else 0, logits_cache_col, logits_cache_source,
        _stride0(logits_cache_source), logits, logits.stride(0), expanded_idx_mapping, seeds, pos, temperature, V,
        BLOCK_SIZE=BLOCK_SIZE, IS_DRAFTING=is_drafting, APPLY_TEMPERATURE=apply_temperature, USE_FP64=use_fp64,
        PER_TOKEN_COL=per_token_col,
    )  # fmt: skip


def _draft_strides(draft_logits: torch.Tensor | None) -> tuple[int, int]:
    return (0, 0) if draft_logits is None else (draft_logits.stride(0), draft_logits.stride(1))


def launch_compute_local_logits_stats(
    kernel: Kernel, *, target_local_argmax: torch.Tensor, target_local_max: torch.Tensor,
    target_local_sumexp: torch.Tensor, draft_local_max: torch.Tensor, draft_local_sumexp: torch.Tensor,
    target_logits: torch.Tensor, draft_logits: torch.Tensor | None, expanded_idx_mapping: torch.Tensor,
    expanded_local_pos: torch.Tensor, temperature: torch.Tensor, num_logits: int | None = None,
    vocab_size: int | None = None, BLOCK_SIZE: int = VOCAB_BLOCK_SIZE,
) -> None:  # fmt: skip
    """As ``rejection_sample``: grid ``(num_logits, cdiv(vocab_size, 8192))``."""
    n = target_logits.shape[0] if num_logits is None else num_logits
    V = target_logits.shape[1] if vocab_size is None else vocab_size
    d0, d1 = _draft_strides(draft_logits)
    kernel[(n, triton.cdiv(V, BLOCK_SIZE))](
        target_local_argmax, target_local_argmax.stride(0), target_local_max, target_local_max.stride(0),
        target_local_sumexp, target_local_sumexp.stride(0), draft_local_max, draft_local_max.stride(0),
        draft_local_sumexp, draft_local_sumexp.stride(0), target_logits, target_logits.stride(0), draft_logits, d0, d1,
        expanded_idx_mapping, expanded_local_pos, temperature, V, n,
        BLOCK_SIZE=BLOCK_SIZE, HAS_DRAFT_LOGITS=draft_logits is not None,
    )  # fmt: skip


def launch_compute_cumulative_log_p(
    kernel: Kernel, *, cumulative_log_p: torch.Tensor, target_logits: torch.Tensor, target_local_max: torch.Tensor,
    target_local_sumexp: torch.Tensor, draft_sampled: torch.Tensor, draft_logits: torch.Tensor | None,
    draft_local_max: torch.Tensor, draft_local_sumexp: torch.Tensor, cu_num_logits: torch.Tensor,
    idx_mapping: torch.Tensor, temperature: torch.Tensor, vocab_num_blocks: int, num_reqs: int | None = None,
    PADDED_VOCAB_NUM_BLOCKS: int | None = None,
) -> None:  # fmt: skip
    """As ``rejection_sample``: grid ``(num_reqs,)``, ``num_warps=1``."""
    B = cu_num_logits.shape[0] - 1 if num_reqs is None else num_reqs
    d0, d1 = _draft_strides(draft_logits)
    padded = triton.next_power_of_2(vocab_num_blocks) if PADDED_VOCAB_NUM_BLOCKS is None else PADDED_VOCAB_NUM_BLOCKS
    kernel[(B,)](
        cumulative_log_p, target_logits, target_logits.stride(0), target_local_max, target_local_max.stride(0),
        target_local_sumexp, target_local_sumexp.stride(0), draft_sampled, draft_logits, d0, d1, draft_local_max,
        draft_local_max.stride(0), draft_local_sumexp, draft_local_sumexp.stride(0), cu_num_logits, idx_mapping,
        temperature, vocab_num_blocks,
        PADDED_VOCAB_NUM_BLOCKS=padded, HAS_DRAFT_LOGITS=draft_logits is not None, num_warps=1,
    )  # fmt: skip


def launch_compute_local_residual_mass(
    kernel: Kernel, *, local_residual_mass: torch.Tensor, cumulative_log_p: torch.Tensor,
    target_logits: torch.Tensor, target_local_max: torch.Tensor, target_local_sumexp: torch.Tensor,
    draft_logits: torch.Tensor, draft_local_max: torch.Tensor, draft_local_sumexp: torch.Tensor,
    draft_sampled: torch.Tensor, expanded_idx_mapping: torch.Tensor, expanded_local_pos: torch.Tensor,
    temperature: torch.Tensor, vocab_num_blocks: int | None = None, num_logits: int | None = None,
    vocab_size: int | None = None, BLOCK_SIZE: int = VOCAB_BLOCK_SIZE, PADDED_VOCAB_NUM_BLOCKS: int | None = None,
) -> None:  # fmt: skip
    """As ``rejection_sample`` (block verification with draft logits): grid
    ``(num_logits, vocab_num_blocks)``."""
    n = target_logits.shape[0] if num_logits is None else num_logits
    V = target_logits.shape[1] if vocab_size is None else vocab_size
    nb = triton.cdiv(V, BLOCK_SIZE) if vocab_num_blocks is None else vocab_num_blocks
    padded = triton.next_power_of_2(nb) if PADDED_VOCAB_NUM_BLOCKS is None else PADDED_VOCAB_NUM_BLOCKS
    d0, d1 = _draft_strides(draft_logits)
    kernel[(n, nb)](
        local_residual_mass, local_residual_mass.stride(0), cumulative_log_p, target_logits, target_logits.stride(0),
        target_local_max, target_local_max.stride(0), target_local_sumexp, target_local_sumexp.stride(0),
        draft_logits, d0, d1, draft_local_max, draft_local_max.stride(0), draft_local_sumexp,
        draft_local_sumexp.stride(0), draft_sampled, expanded_idx_mapping, expanded_local_pos, temperature, V, n, nb,
        BLOCK_SIZE=BLOCK_SIZE, PADDED_VOCAB_NUM_BLOCKS=padded,
    )  # fmt: skip


def launch_rejection(
    kernel: Kernel, *, sampled: torch.Tensor, num_sampled: torch.Tensor, target_rejected_logsumexp: torch.Tensor,
    draft_rejected_logsumexp: torch.Tensor, target_logits: torch.Tensor, target_local_argmax: torch.Tensor,
    target_local_max: torch.Tensor, target_local_sumexp: torch.Tensor, draft_sampled: torch.Tensor,
    draft_logits: torch.Tensor | None, draft_local_max: torch.Tensor, draft_local_sumexp: torch.Tensor,
    cu_num_logits: torch.Tensor, idx_mapping: torch.Tensor, temperature: torch.Tensor, seed: torch.Tensor,
    pos: torch.Tensor, vocab_num_blocks: int, synthetic_conditional_rates: torch.Tensor | None = None,
    cumulative_log_p: torch.Tensor | None = None, local_residual_mass: torch.Tensor | None = None,
    fly_entropy: torch.Tensor | None = None, fly_entropy_threshold: float = 0.3, use_block_verification: bool = False,
    fly_window_size: int = 0, num_reqs: int | None = None, PADDED_VOCAB_NUM_BLOCKS: int | None = None,
) -> None:  # fmt: skip
    """As ``rejection_sample``: grid ``(num_reqs,)``, ``num_warps=1``; the constexprs follow
    from which optional inputs are given."""
    B = cu_num_logits.shape[0] - 1 if num_reqs is None else num_reqs
    d0, d1 = _draft_strides(draft_logits)
    padded = triton.next_power_of_2(vocab_num_blocks) if PADDED_VOCAB_NUM_BLOCKS is None else PADDED_VOCAB_NUM_BLOCKS
    kernel[(B,)](
        sampled, sampled.stride(0), num_sampled, target_rejected_logsumexp, draft_rejected_logsumexp, target_logits,
        target_logits.stride(0), target_local_argmax, target_local_argmax.stride(0), target_local_max,
        target_local_max.stride(0), target_local_sumexp, target_local_sumexp.stride(0), draft_sampled, draft_logits,
        d0, d1, draft_local_max, draft_local_max.stride(0), draft_local_sumexp, draft_local_sumexp.stride(0),
        cu_num_logits, idx_mapping, temperature, seed, pos, synthetic_conditional_rates, cumulative_log_p,
        local_residual_mass, _stride0(local_residual_mass), fly_entropy, fly_entropy_threshold, vocab_num_blocks,
        PADDED_VOCAB_NUM_BLOCKS=padded, HAS_DRAFT_LOGITS=draft_logits is not None,
        SYNTHETIC_MODE=synthetic_conditional_rates is not None, USE_BLOCK_VERIFICATION=use_block_verification,
        FLY_WINDOW_SIZE=fly_window_size, num_warps=1,
    )  # fmt: skip


def launch_resample(
    kernel: Kernel, *, resampled_local_argmax: torch.Tensor, resampled_local_max: torch.Tensor,
    target_logits: torch.Tensor, target_rejected_logsumexp: torch.Tensor, draft_logits: torch.Tensor | None,
    draft_rejected_logsumexp: torch.Tensor, rejected_step: torch.Tensor, cu_num_logits: torch.Tensor,
    expanded_idx_mapping: torch.Tensor, draft_sampled: torch.Tensor, temperature: torch.Tensor, seed: torch.Tensor,
    pos: torch.Tensor, cumulative_log_p: torch.Tensor | None = None, use_fp64: bool = False,
    use_block_verification: bool = False, num_reqs: int | None = None, vocab_size: int | None = None,
    BLOCK_SIZE: int = RESAMPLE_BLOCK_SIZE,
) -> None:  # fmt: skip
    """As ``rejection_sample`` without watermarking: grid ``(num_reqs, cdiv(vocab_size, 1024))``,
    ``WATERMARK`` and ``DEDUPLICATE_CONTEXTS`` off, ``CONTEXT_WIDTH = 1``."""
    B = cu_num_logits.shape[0] - 1 if num_reqs is None else num_reqs
    V = target_logits.shape[1] if vocab_size is None else vocab_size
    d0, d1 = _draft_strides(draft_logits)
    kernel[(B, triton.cdiv(V, BLOCK_SIZE))](
        resampled_local_argmax, resampled_local_argmax.stride(0), resampled_local_max, resampled_local_max.stride(0),
        target_logits, target_logits.stride(0), target_rejected_logsumexp, draft_logits, d0, d1,
        draft_rejected_logsumexp, rejected_step, cu_num_logits, expanded_idx_mapping, draft_sampled, temperature, seed,
        pos, cumulative_log_p, None, 0, None, None, 0, 0, V,
        BLOCK_SIZE=BLOCK_SIZE, HAS_DRAFT_LOGITS=draft_logits is not None, USE_FP64=use_fp64,
        USE_BLOCK_VERIFICATION=use_block_verification, CONTEXT_WIDTH=1, WATERMARK=False, DEDUPLICATE_CONTEXTS=False,
    )  # fmt: skip


def launch_insert_resampled(
    kernel: Kernel, *, sampled: torch.Tensor, num_sampled: torch.Tensor, resampled_local_argmax: torch.Tensor,
    resampled_local_max: torch.Tensor, cu_num_logits: torch.Tensor, expanded_idx_mapping: torch.Tensor,
    temperature: torch.Tensor, resample_num_blocks: int, num_reqs: int | None = None,
    PADDED_RESAMPLE_NUM_BLOCKS: int | None = None,
) -> None:  # fmt: skip
    """As ``rejection_sample``: grid ``(num_reqs,)``."""
    B = cu_num_logits.shape[0] - 1 if num_reqs is None else num_reqs
    padded = (triton.next_power_of_2(resample_num_blocks) if PADDED_RESAMPLE_NUM_BLOCKS is None
              else PADDED_RESAMPLE_NUM_BLOCKS)  # fmt: skip
    kernel[(B,)](
        sampled, sampled.stride(0), num_sampled, resampled_local_argmax, resampled_local_argmax.stride(0),
        resampled_local_max, resampled_local_max.stride(0), resample_num_blocks, cu_num_logits, expanded_idx_mapping,
        temperature, PADDED_RESAMPLE_NUM_BLOCKS=padded,
    )  # fmt: skip


SENTINEL_INT = -4242
SENTINEL_FLOAT = -4242.5


def launch_rejection_sample(
    kernels: Mapping[str, Kernel], *, target_logits: torch.Tensor, draft_logits: torch.Tensor | None,
    draft_sampled: torch.Tensor, cu_num_logits: torch.Tensor, pos: torch.Tensor, idx_mapping: torch.Tensor,
    expanded_idx_mapping: torch.Tensor, expanded_local_pos: torch.Tensor, temperature: torch.Tensor,
    seed: torch.Tensor, num_speculative_steps: int, synthetic_conditional_rates: torch.Tensor | None = None,
    use_fp64: bool = False, use_block_verification: bool = False, fly_entropy: torch.Tensor | None = None,
    fly_window_size: int = 0, fly_entropy_threshold: float = 0.3,
) -> dict[str, torch.Tensor]:  # fmt: skip
    """``rejection_sample`` (without watermarking): §30-§35 chained as it chains them, the
    vocabulary cut to the draft's width when it is narrower. ``fly_entropy`` is given (vLLM
    computes it with ``compute_fly_entropy`` from the target logits). Returns every buffer: the
    result (``sampled``, ``num_sampled``) and the intermediates, each allocated as vLLM does and
    filled with :data:`SENTINEL_INT` or :data:`SENTINEL_FLOAT`."""
    B = cu_num_logits.shape[0] - 1
    n, V = target_logits.shape
    if draft_logits is not None:
        V = min(V, draft_logits.shape[-1])
    nb = triton.cdiv(V, VOCAB_BLOCK_SIZE)

    def f32(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.full(shape, SENTINEL_FLOAT, dtype=dtype)

    def i64(*shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
        return torch.full(shape, SENTINEL_INT, dtype=dtype)

    b: dict[str, torch.Tensor] = dict(
        target_local_argmax=i64(n, nb), target_local_max=f32(n, nb), target_local_sumexp=f32(n, nb),
        draft_local_max=f32(n, nb), draft_local_sumexp=f32(n, nb),
    )  # fmt: skip
    launch_compute_local_logits_stats(
        kernels["_compute_local_logits_stats_kernel"], **b, target_logits=target_logits, draft_logits=draft_logits,
        expanded_idx_mapping=expanded_idx_mapping, expanded_local_pos=expanded_local_pos, temperature=temperature,
        vocab_size=V,
    )  # fmt: skip
    stats = {k: b[k] for k in ("target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp")}
    clp = rm = None
    if use_block_verification:
        clp = b["cumulative_log_p"] = f32(n)
        launch_compute_cumulative_log_p(
            kernels["_compute_cumulative_log_p_kernel"], cumulative_log_p=clp, target_logits=target_logits,
            draft_sampled=draft_sampled, draft_logits=draft_logits, cu_num_logits=cu_num_logits,
            idx_mapping=idx_mapping, temperature=temperature, vocab_num_blocks=nb, **stats,
        )  # fmt: skip
        if draft_logits is not None:
            rm = b["local_residual_mass"] = f32(n, nb)
            launch_compute_local_residual_mass(
                kernels["_compute_local_residual_mass_kernel"], local_residual_mass=rm, cumulative_log_p=clp,
                target_logits=target_logits, draft_logits=draft_logits, draft_sampled=draft_sampled,
                expanded_idx_mapping=expanded_idx_mapping, expanded_local_pos=expanded_local_pos,
                temperature=temperature, vocab_num_blocks=nb, vocab_size=V, **stats,
            )  # fmt: skip
    b.update(sampled=i64(B, num_speculative_steps + 1), num_sampled=i64(B, dtype=torch.int32),
             target_rejected_logsumexp=f32(B), draft_rejected_logsumexp=f32(B))  # fmt: skip
    launch_rejection(
        kernels["_rejection_kernel"], sampled=b["sampled"], num_sampled=b["num_sampled"],
        target_rejected_logsumexp=b["target_rejected_logsumexp"], draft_rejected_logsumexp=b["draft_rejected_logsumexp"],
        target_logits=target_logits, target_local_argmax=b["target_local_argmax"], draft_sampled=draft_sampled,
        draft_logits=draft_logits, cu_num_logits=cu_num_logits, idx_mapping=idx_mapping, temperature=temperature,
        seed=seed, pos=pos, vocab_num_blocks=nb, synthetic_conditional_rates=synthetic_conditional_rates,
        cumulative_log_p=clp, local_residual_mass=rm, fly_entropy=fly_entropy,
        fly_entropy_threshold=fly_entropy_threshold, use_block_verification=use_block_verification,
        fly_window_size=fly_window_size, **stats,
    )  # fmt: skip
    rnb = triton.cdiv(V, RESAMPLE_BLOCK_SIZE)
    b.update(resampled_local_argmax=i64(B, rnb),
             resampled_local_max=f32(B, rnb, dtype=torch.float64 if use_fp64 else torch.float32))  # fmt: skip
    launch_resample(
        kernels["_resample_kernel"], resampled_local_argmax=b["resampled_local_argmax"],
        resampled_local_max=b["resampled_local_max"], target_logits=target_logits,
        target_rejected_logsumexp=b["target_rejected_logsumexp"], draft_logits=draft_logits,
        draft_rejected_logsumexp=b["draft_rejected_logsumexp"], rejected_step=b["num_sampled"],
        cu_num_logits=cu_num_logits, expanded_idx_mapping=expanded_idx_mapping, draft_sampled=draft_sampled,
        temperature=temperature, seed=seed, pos=pos, cumulative_log_p=clp, use_fp64=use_fp64,
        use_block_verification=use_block_verification, vocab_size=V,
    )  # fmt: skip
    b["num_sampled_before_insert"] = b["num_sampled"].clone()
    launch_insert_resampled(
        kernels["_insert_resampled_kernel"], sampled=b["sampled"], num_sampled=b["num_sampled"],
        resampled_local_argmax=b["resampled_local_argmax"], resampled_local_max=b["resampled_local_max"],
        cu_num_logits=cu_num_logits, expanded_idx_mapping=expanded_idx_mapping, temperature=temperature,
        resample_num_blocks=rnb,
    )  # fmt: skip
    return b
