"""``_gumbel_sample_kernel``: docs/CONTRACT.md §29.

``gumbel_sample`` (``vllm/v1/worker/gpu/sample/gumbel.py``): per row and 1024-wide vocabulary
block, the Gumbel-max winner and its perturbed value, the noise a pure function of (seed,
position, token id); the drafter's call also caches the pre-temperature logits for verification
and salts its stream (``_DRAFT_NOISE_SALT``). Launched as ``gumbel_sample`` launches it (grid
``(num_tokens, cdiv(V, 1024))``); the winners are exact, the values within their bounds, a block
whose leading values lie within them (a window) is the extended tier's and takes the run's
winner among the candidates.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...core.case import Case
from ...core.errors import ContractViolation
from ...targetkit.base import Tier
from ...targetkit.runner_v2_verify import (
    F32,
    F64,
    GUMBEL,
    I64,
    SAMPLE_BLOCK,
    VerifyTarget,
    cdiv,
    verify_oracles,
)
from ...targetkit.scale import past_limit
from . import edges
from .layout import NAME, arguments, keep_rows, mode_of

_CHUNK = 1 << 22
"""Elements of the logits a feature test reads at a time (a scale case's table is 8 GiB)."""


def _any_row(x: np.ndarray, keep: np.ndarray, test: Callable[[np.ndarray], np.ndarray]) -> bool:
    """Whether ``test`` (per row of a block of rows: a bool per row) holds for a row of ``x``
    that ``keep`` keeps, a block of rows at a time (never a copy of the whole table)."""
    step = max(1, _CHUNK // max(1, x.shape[1]))
    for i in range(0, x.shape[0], step):
        k = keep[i : i + step]
        if k.any() and bool(test(x[i : i + step][k]).any()):
            return True
    return False


class GumbelSample(VerifyTarget):
    state_index = ("expanded_idx_mapping",)
    per_state = ("temperature", "seeds", "logits_cache")
    name = NAME
    runner = "V2"
    module = GUMBEL
    function = NAME
    section = 29
    launcher = "launch_gumbel_sample"
    parameters = ("local_argmax_ptr", "local_argmax_stride", "local_max_ptr", "local_max_stride", "logits_cache_ptr",
                  "logits_cache_stride_0", "logits_cache_stride_1", "logits_cache_col_ptr", "logits_cache_source_ptr",
                  "logits_cache_source_stride", "logits_ptr", "logits_stride", "expanded_idx_mapping_ptr",
                  "seeds_ptr", "pos_ptr", "temp_ptr", "vocab_size", "BLOCK_SIZE", "IS_DRAFTING",
                  "APPLY_TEMPERATURE", "USE_FP64", "PER_TOKEN_COL")
    inputs = {"logits_cache": F32, "logits_cache_cols": I64, "logits_cache_source": F32, "logits": F32,
              "expanded_idx_mapping": I64, "seeds": I64, "pos": I64, "temperature": F32}
    inout = frozenset({"logits_cache"})
    optional = ("logits_cache", "logits_cache_cols", "logits_cache_source")
    scalar_names = ("apply_temperature", "is_drafting", "use_fp64", "cache_col")
    features = {
        "target_sampling": "the target's sampling (Sampler._sample_random: no temperature applied, no cache)",
        "drafting": "the drafter's (temperature applied, the logits cached at the step's column, the stream salted)",
        "per_token_columns": "the watermarking drafter's: a cache column per token, the raw logits as its source",
        "greedy_row": "a row of temperature 0 (a plain argmax: exact)",
        "random_row": "a row with Gumbel noise",
        "unit_temperature": "a random row of temperature 1",
        "padded_row": "a drafter row of state row -1 (greedy, nothing cached)",
        "fp64_noise": "the float64 noise path (use_fp64)",
        "masked_logits": "-inf logits of a random row (top-k/top-p)",
        "several_blocks": "more than one 1024-wide block",
        "partial_last_block": "a last block cut by the vocabulary",
        "negative_row": "a row whose logits are all negative (a lane past the vocabulary, read as 0, would win)",
        "untouched_cache_rows": "cache rows no row writes",
        "seed_at_int64_limit": "a seed at the int64 minimum or maximum",
        # production extremes
        "vocab_past_131072": "a vocabulary of more than 131072 ids (the noise offset's high bits)",
        "positions_past_65535": "a position past 65535 (a long context)",
        # production scale
        "row_offset_past_2_31": "a row whose offset token_idx * logits_stride lies past 2**31 elements",
    }
    extremes = ("vocab_past_131072", "positions_past_65535")
    scale_features = ("row_offset_past_2_31",)
    oracle_functions = verify_oracles("gumbel_sample")

    def arguments(self, arrays, case):  # noqa: ANN001, ANN201 - V2Target's
        return arguments(dict(arrays), case)

    def rules(self, case: Case, tier: Tier) -> None:
        """§29.2 (the extended tier: §29.4): the mode's arrays; state rows (``-1``: a padded
        drafter row), finite temperatures ``>= 0``, positions below ``max_model_len``, finite
        logits (a random row of the target's keeps one: ``-inf`` where masked), a cache as wide
        as the vocabulary and columns inside it."""
        extra = sorted(set(case.arrays) - set(self.inputs))
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        edges.check(case, extended=tier == "extended")

    def windows_of(self, case: Case) -> list:
        from .layout import windows

        return windows(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        T, V = a["logits"].shape
        rows = a["expanded_idx_mapping"]
        t = np.where(rows >= 0, a["temperature"][np.maximum(rows, 0)], 0)
        mode = mode_of(case)
        seeds = a["seeds"][rows[rows >= 0]]
        checks = {
            "target_sampling": mode == "target",
            "drafting": mode == "drafter",
            "per_token_columns": mode == "watermark",
            "greedy_row": bool(np.any(t == 0)),
            "random_row": bool(np.any(t != 0)),
            "unit_temperature": bool(np.any(t == 1)),
            "padded_row": bool(np.any(rows < 0)),
            "fp64_noise": bool(case.scalars.get("use_fp64")) and bool(np.any(t != 0)),
            "masked_logits": _any_row(a["logits"], t != 0, lambda x: np.isneginf(x).any(axis=1)),
            "several_blocks": V > SAMPLE_BLOCK,
            "partial_last_block": V > SAMPLE_BLOCK and V % SAMPLE_BLOCK != 0,
            "negative_row": V % SAMPLE_BLOCK != 0 and _any_row(a["logits"], rows >= 0,
                                                               lambda x: x.max(axis=1, initial=-np.inf) < 0),
            "untouched_cache_rows": "logits_cache" in a and a["logits_cache"].shape[0] > len(np.unique(rows[rows >= 0])),
            "seed_at_int64_limit": bool(np.any((seeds == np.iinfo(np.int64).min) | (seeds == np.iinfo(np.int64).max))),
            "vocab_past_131072": V > 1 << 17,
            "positions_past_65535": bool(np.any(a["pos"] > 0xFFFF)),
            "row_offset_past_2_31": past_limit((T - 1) * V),
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        T, V = case.arrays["logits"].shape
        nb = cdiv(V, SAMPLE_BLOCK)
        return {"local_argmax": (I64, (T, nb)), "local_max": (F64 if case.scalars.get("use_fp64") else F32, (T, nb))}

    def decided(self, case: Case, windows: list, written: dict) -> dict:
        """A window's winner is the run's ``local_argmax`` of its row and block."""
        T, V = case.arrays["logits"].shape
        la = written["local_argmax"].reshape(T, cdiv(V, SAMPLE_BLOCK))
        return {w.key: int(la[w.key[1], w.key[3]]) for w in windows if w.key[0] == "row"}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        T, V = case.arrays["logits"].shape
        if array == "logits_cache":
            K, W = case.arrays["logits_cache"].shape[1:]
            s, rest = divmod(index, K * W)
            return None, f"cache of state row {s}, column {rest // W}, token {rest % W}"
        t, b = divmod(index, cdiv(V, SAMPLE_BLOCK))
        return t, f"row {t}, block {b}"

    def programs(self, case: Case) -> int:
        T, V = case.arrays["logits"].shape
        return T * cdiv(V, SAMPLE_BLOCK)

    def split_requests(self, case: Case) -> list[int] | None:
        return list(range(case.arrays["logits"].shape[0]))

    def join_requests(self, case: Case, pieces: list[int]) -> Case:
        return keep_rows(case, list(pieces))


TARGET = GumbelSample()
