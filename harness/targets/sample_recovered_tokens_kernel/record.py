"""``sample_recovered_tokens_kernel``: docs/CONTRACT.md §13.

For each draft token, the token emitted if that draft is rejected: the first index of the
largest ``p_v * inv_q[r, v]`` over the vocabulary, ``p`` the residual ``max(target - draft,
0)`` (or the target with the draft id masked, ``NO_DRAFT_PROBS``), in tiles of ``BLOCK_SIZE``.
Launched as vLLM's dispatcher ``_sample_recovered_tokens`` launches it (grid ``(B,
max_spec_len)``, ``BLOCK_SIZE = 8192``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import MAX_NUM_SEQS
from ...targetkit.base import ContractViolation, TritonTarget, numpy_and_numba
from ...targetkit.draft_rows import (
    MAX_VOCAB,
    DraftRowMoves,
    Rows,
    check_array,
    check_draft_counts,
    check_int,
)
from ...targetkit.scale import past_limit
from . import edges
from .layout import BLOCK_SIZE, F32, F64, I32, NAME, PER_REQUEST, PER_TOKEN

MODULE = "vllm/v1/sample/rejection_sampler.py"
MAX_V = 1 << 20


def _bs(case: Case) -> int:
    b = case.launch.get("block_size")
    return BLOCK_SIZE if b is None else int(b)


SCORE_CHUNK = 1 << 25
"""Score elements :func:`score_chunks` computes at once (a production-scale case has tables of
more than 2**31 elements: its scores are never held whole)."""


def processed_tokens(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """``(t, r)``: every processed token (position ``j < max_spec_len``, §13.1) and its request."""
    rows = Rows.of(case.arrays["cu_num_draft_tokens"])
    L = case.scalars["max_spec_len"]
    owner = rows.owner()
    pos = np.arange(owner.size, dtype=np.int64) - np.repeat(rows.s, np.maximum(rows.d, 0))
    t = np.flatnonzero(pos < L)
    return t, owner[t]


def score_chunks(case: Case) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The scores ``s_v`` of the processed tokens (§13.1), float32 or float64 as the kernel
    computes them: ``(tokens, scores)`` a chunk of rows at a time, in token order."""
    a = case.arrays
    V = case.scalars["vocab_size"]
    t_all, r_all = processed_tokens(case)
    step = max(1, SCORE_CHUNK // max(V, 1))
    for c in range(0, t_all.size, step):
        t, r = t_all[c : c + step], r_all[c : c + step]
        target = a["target_probs"][t]
        with np.errstate(all="ignore"):
            if "draft_probs" in a:
                p = np.fmax(target - a["draft_probs"][t], np.float32(0)).astype(F32)
            else:
                p = target
                did = a["draft_token_ids"][t].astype(np.int64)
                inside = (did >= 0) & (did < V)
                p[np.flatnonzero(inside), did[inside]] = 0
            iq = a["inv_q"][r]
            yield t, (p.astype(iq.dtype) * iq).astype(iq.dtype)


def _finite(a: np.ndarray) -> bool:
    flat = a.reshape(-1)
    return all(np.isfinite(flat[i : i + SCORE_CHUNK]).all() for i in range(0, flat.size, SCORE_CHUNK))


def _no_nan_score(arrays: Mapping[str, np.ndarray]) -> bool:
    """Whether no score can be NaN, without computing any: finite tables and a positive, finite
    ``inv_q`` (a finite ``p`` or ``fmax`` of a finite difference, times a positive finite
    factor, is a number or an infinity, never NaN). A production-scale case is checked this way."""
    iq = arrays["inv_q"].reshape(-1)
    positive = all((iq[i : i + SCORE_CHUNK] > 0).all() for i in range(0, iq.size, SCORE_CHUNK))
    return positive and _finite(iq) and all(_finite(arrays[n]) for n in ("target_probs", "draft_probs") if n in arrays)


def scores(case: Case) -> np.ndarray:
    """The scores ``s_v`` of every processed token (rows in token order, §13.1), float32 or
    float64 as the kernel computes them (small cases: :func:`score_chunks` holds no more than
    a chunk)."""
    parts = [sc for _, sc in score_chunks(case)]
    if parts:
        return np.concatenate(parts)
    return np.zeros((0, case.scalars["vocab_size"]), dtype=case.arrays["inv_q"].dtype)


def scale_features_of(case: Case) -> frozenset[str]:
    """The production-scale features of ``case`` (docs/CONTRACT.md §13.2): a processed token's
    table row, or its request's noise row, reaching past flat index ``2**31``."""
    V = case.scalars["vocab_size"]
    t, r = processed_tokens(case)
    f = set()
    if t.size and past_limit(int(t.max()) * V + V - 1):
        f.add("table_rows_past_2_31")
    if r.size and past_limit(int(r.max()) * V + V - 1):
        f.add("noise_rows_past_2_31")
    return frozenset(f)


class SampleRecovered(DraftRowMoves, TritonTarget):
    name = NAME
    runner = "V1"
    function = NAME
    section = 13
    module = MODULE
    parameters = (
        "output_token_ids_ptr",
        "cu_num_draft_tokens_ptr",
        "draft_token_ids_ptr",
        "draft_probs_ptr",
        "target_probs_ptr",
        "inv_q_ptr",
        "vocab_size",
        "BLOCK_SIZE",
        "NO_DRAFT_PROBS",
        "USE_FP64_GUMBEL",
    )
    inputs = {"cu_num_draft_tokens": I32, "draft_token_ids": I32, "target_probs": F32, "inv_q": F32}
    features = {
        "no_draft_probs": "draft_probs is None (NO_DRAFT_PROBS: the draft id masked out)",
        "draft_probs": "draft_probs given (the residual max(target - draft, 0))",
        "fp64_gumbel": "inv_q is float64 (USE_FP64_GUMBEL)",
        "all_zero_scores": "a token whose scores are all 0 (0 is written)",
        "tied_max": "a token whose largest score occurs more than once (the first index wins)",
        "later_tile": "a token whose winner is past its first tile",
        "tie_across_tiles": "a token whose largest score occurs in two tiles (the earlier tile wins)",
        "partial_last_tile": "vocab_size not a multiple of BLOCK_SIZE, the winner in the last tile",
        "other_block_size": "BLOCK_SIZE other than vLLM's 8192",
        "masked_draft_was_max": "NO_DRAFT_PROBS: the draft id holds the target's largest probability",
        "minus_one_draft": "NO_DRAFT_PROBS with a -1 draft (nothing masked)",
        "wider_rows": "max_spec_len larger than every request's draft count (idle programs)",
        "ragged": "requests with different draft counts",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests",
        "sixteen_drafts": "a request with 16 drafts (num_speculative_tokens = 16)",
        "vocab_262144": "a vocabulary of 262144 (32 tiles of 8192)",
        "winner_past_32767": "a recovered id past 32767",
        "tie_at_8192_boundary": "a largest score tied across a boundary of vLLM's 8192-token tiles",
        # production scale (docs/CONTRACT.md §13.2; only where tables of 8 GiB fit: targetkit/scale.py)
        "table_rows_past_2_31": "a processed token's table row reaches past flat index 2**31 (t*V + v)",
        "noise_rows_past_2_31": "a processed request's noise row reaches past flat index 2**31 (r*V + v)",
    }
    extremes = ("beyond_1024_requests", "sixteen_drafts", "vocab_262144", "winner_past_32767", "tie_at_8192_boundary")
    scale_features = ("table_rows_past_2_31", "noise_rows_past_2_31")

    oracle_functions = numpy_and_numba("sample_recovered_tokens")

    # -- contract ---------------------------------------------------------------------

    def production_rules(self, case: Case) -> None:
        a = case.arrays
        rows, L = check_draft_counts(case)
        B, N = rows.B, rows.N
        V = check_int(case.scalars, "vocab_size", 1, MAX_V)
        check_array(a, "draft_token_ids", (I32,), (N,))
        check_array(a, "target_probs", (F32,), (N, V))
        check_array(a, "draft_probs", (F32,), (N, V), optional=True)
        check_array(a, "inv_q", (F32, F64), (B, V))
        extra = sorted(set(a) - {*self.inputs, "draft_probs"})
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        b = case.launch.get("block_size")
        if b is not None and (not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= BLOCK_SIZE or b & (b - 1)):
            raise ContractViolation("launch.block_size", "must be null (vLLM's 8192) or a power of two from 1 to 8192")
        if not _no_nan_score(a) and any(np.isnan(sc).any() for _, sc in score_chunks(case)):
            raise ContractViolation("arrays.target_probs", "no score p * inv_q may be NaN (§13.4: the result is not fixed)")

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        rows = Rows.of(a["cu_num_draft_tokens"])
        V, bs = case.scalars["vocab_size"], _bs(case)
        f: set[str] = set()
        tile_of = np.arange(V) // bs
        for _, sc in score_chunks(case):
            mx = sc.max(axis=1)
            win = sc.argmax(axis=1)
            ties = sc == mx[:, None]
            count = ties.sum(axis=1)
            f |= {"all_zero_scores"} if np.any(mx == 0) else set()
            f |= {"tied_max"} if np.any(count > 1) else set()
            f |= {"later_tile"} if np.any(win >= bs) else set()
            last = V - 1 - np.argmax(ties[:, ::-1], axis=1)  # the last lane of the maximum
            if np.any((count > 1) & (tile_of[win] != tile_of[last])):  # tied lanes in two tiles or more
                f.add("tie_across_tiles")
                if bs == BLOCK_SIZE:
                    f.add("tie_at_8192_boundary")
            if V % bs and np.any(win // bs == (V - 1) // bs) and V > bs:
                f.add("partial_last_tile")
            if np.any(win > 32767):
                f.add("winner_past_32767")
        f |= scale_features_of(case)
        if "draft_probs" not in a and rows.N:
            did = a["draft_token_ids"]
            inside = (did >= 0) & (did < V)
            t = np.flatnonzero(inside)
            if t.size and any(np.any(a["target_probs"][c, did[c]] == a["target_probs"][c].max(axis=1))
                              for c in np.array_split(t, -(-t.size * V // SCORE_CHUNK))):
                f.add("masked_draft_was_max")
            if np.any(did < 0):
                f.add("minus_one_draft")
        checks = {
            "no_draft_probs": "draft_probs" not in a,
            "draft_probs": "draft_probs" in a,
            "fp64_gumbel": a["inv_q"].dtype == F64,
            "other_block_size": case.launch.get("block_size") is not None,
            "wider_rows": case.scalars["max_spec_len"] > rows.longest,
            "ragged": len(set(rows.d.tolist())) > 1,
            "several_requests": rows.B > 1,
            "many_requests": rows.B > 64,
            "beyond_1024_requests": rows.B > MAX_NUM_SEQS,
            "sixteen_drafts": rows.longest >= 16,
            "vocab_262144": V >= MAX_VOCAB,
        }
        return frozenset(f | {k for k, v in checks.items() if v})

    # -- running ----------------------------------------------------------------------

    grid_field = "scalars.max_spec_len"

    def programs(self, case: Case) -> int:
        return len(case.arrays["cu_num_draft_tokens"]) * case.scalars["max_spec_len"]

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {"output_token_ids": (I32, (len(case.arrays["draft_token_ids"]),))}

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        """As ``_sample_recovered_tokens`` (vLLM 0.33.0): grid ``(B, max_spec_len)``,
        ``vocab_size = target_probs.shape[1]``, ``BLOCK_SIZE = 8192`` (or the case's),
        ``NO_DRAFT_PROBS = draft_probs is None``, ``USE_FP64_GUMBEL = inv_q is float64``."""
        from ....kernels.launchers import launch_sample_recovered_tokens

        launch_sample_recovered_tokens(
            kernel, output_token_ids=tensors["output_token_ids"], cu_num_draft_tokens=tensors["cu_num_draft_tokens"],
            draft_token_ids=tensors["draft_token_ids"], draft_probs=tensors.get("draft_probs"),
            target_probs=tensors["target_probs"], inv_q=tensors["inv_q"], max_spec_len=case.scalars["max_spec_len"],
            vocab_size=case.scalars["vocab_size"], block_size=_bs(case),
        )  # fmt: skip

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> None:
        a = case.arrays
        oracle(
            output_token_ids=outputs["output_token_ids"], cu_num_draft_tokens=a["cu_num_draft_tokens"],
            draft_token_ids=a["draft_token_ids"], draft_probs=a.get("draft_probs"), target_probs=a["target_probs"],
            inv_q=a["inv_q"], vocab_size=case.scalars["vocab_size"], max_spec_len=case.scalars["max_spec_len"],
            BLOCK_SIZE=_bs(case),
        )  # fmt: skip

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        rows = Rows.of(case.arrays["cu_num_draft_tokens"])
        r = int(np.searchsorted(rows.cu, index, side="right"))
        return r, f"draft position {index - int(rows.s[r])} of {int(rows.d[r])}"

    per_request, per_token = PER_REQUEST, PER_TOKEN  # DraftRowMoves: split, join, max_spec_len

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        yield from super().shrink_moves(case)
        if case.launch.get("block_size") is not None:
            yield case.replace(launch={"block_size": None})


    # -- extended tier (docs/CONTRACT.md §13.4): edges.py ----------------------------------

    def extended_rules(self, case: Case) -> None:
        edges.validate(case, dict(self.inputs))


TARGET = SampleRecovered()
