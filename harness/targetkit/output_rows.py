"""The output rows of the rejection sampler's greedy and random kernels (docs/CONTRACT.md §10,
§11): ``output_token_ids`` int32 ``[B, max_spec_len + 1]``, request ``r``'s row its accepted
drafts, then one id (the first rejection's, or the bonus), then nothing written.

What the two targets share about them: the output's shape (:func:`output_specs`), where an
element lies (:func:`locate`), what ``RejectionSampler.parse_output`` relies on
(:func:`row_is_prefix`, :func:`no_placeholder_written`: the audit's properties), and the
extended tier's writes past a row or before it (``output_rows`` rows, :func:`edge_features_of`,
:func:`check_writes`, :func:`fewer_output_rows`). ``processed`` is the mask of the requests the
kernel handles (the greedy kernel's greedy requests, the random kernel's random ones).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ..core.case import Case
from ..core.errors import ContractViolation
from .draft_rows import I32, Rows
from .properties import Observation


def output_specs(case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """``output_token_ids``: ``B`` rows of ``max_spec_len + 1`` (the extended tier's
    ``output_rows`` rows where it has more)."""
    B = case.scalars.get("output_rows", len(case.arrays["cu_num_draft_tokens"]))
    return {"output_token_ids": (I32, (B, case.scalars["max_spec_len"] + 1))}


def locate(case: Case, index: int, processed: np.ndarray, other: str) -> tuple[int | None, str]:
    """The request and region of flat output element ``index``; ``other`` names the requests the
    kernel leaves untouched (``"a random request's"``)."""
    width = case.scalars["max_spec_len"] + 1
    r, j = divmod(index, width)
    if r >= len(case.arrays["cu_num_draft_tokens"]):
        return None, f"slot {j} of an output row past the last request (extended tier)"
    if not processed[r]:
        return r, f"slot {j} of {other} row (untouched)"
    d = int(Rows.of(case.arrays["cu_num_draft_tokens"]).d[r])
    return r, f"slot {j} ({'draft position' if j < d else 'bonus slot' if j == d else 'past the row'}, {d} draft{'' if d == 1 else 's'})"


# -- what parse_output relies on (the audit's properties) ------------------------------------


def written_rows(case: Case, o: Observation) -> tuple[np.ndarray, np.ndarray, Rows]:
    """The output as rows, which of its slots are written (both ``[rows, max_spec_len + 1]``), the draft rows."""
    out = o.out["output_token_ids"].reshape(-1, case.scalars["max_spec_len"] + 1)
    wr = o.written["output_token_ids"].reshape(out.shape)
    return out, wr, Rows.of(case.arrays["cu_num_draft_tokens"])


def row_is_prefix(case: Case, o: Observation, processed: np.ndarray) -> str | None:
    """A processed row is its accepted drafts, then one id, then nothing written; an
    unprocessed row is not written."""
    out, wr, rows = written_rows(case, o)
    for r in range(rows.B):
        w = np.flatnonzero(wr[r])
        if not processed[r]:
            if w.size:
                return f"request {r} is not processed here but slot {int(w[0])} of its row is written"
            continue
        if w.size == 0 or not np.array_equal(w, np.arange(w.size)):
            return f"request {r}: the written slots {w.tolist()[:8]} are not a prefix 0 .. k of its row"
        if w.size > int(rows.d[r]) + 1:
            return f"request {r}: {w.size} slots written, more than its {int(rows.d[r])} drafts + 1"
        drafts = case.arrays["draft_token_ids"][int(rows.s[r]) : int(rows.s[r]) + w.size - 1]
        if not np.array_equal(out[r, : w.size - 1], drafts):
            return f"request {r}: the accepted slots {out[r, : w.size - 1].tolist()[:8]} are not its drafts {drafts.tolist()[:8]}"
    return None


def no_placeholder_written(case: Case, o: Observation) -> str | None:
    """No written slot holds ``-1`` (``PLACEHOLDER_TOKEN_ID`` ends a row)."""
    out, wr, _ = written_rows(case, o)
    bad = np.argwhere(wr & (out == -1))
    if bad.size:
        r, j = (int(x) for x in bad[0])
        return f"request {r}: slot {j} is written with -1, which the caller reads as the end of the row"
    return None


# -- the extended tier: writes past the row, or before it ------------------------------------


def edge_features_of(case: Case) -> frozenset[str]:
    """``past_the_row`` (a request with more drafts than ``max_spec_len``) and
    ``decreasing_cu`` (``d_r < 0``)."""
    rows = Rows.of(case.arrays["cu_num_draft_tokens"])
    checks = {"past_the_row": rows.longest > case.scalars["max_spec_len"], "decreasing_cu": bool(np.any(rows.d < 0))}
    return frozenset(k for k, v in checks.items() if v)


def check_output_rows(case: Case, B: int) -> int:  # noqa: N803 - the contract's name
    """The extended tier's ``output_rows`` (``B`` when absent): an int from ``B`` to ``B + 64``."""
    out_rows = case.scalars.get("output_rows", B)
    if not isinstance(out_rows, int) or isinstance(out_rows, bool) or not B <= out_rows <= B + 64:
        raise ContractViolation("scalars.output_rows", "must be an int from B to B + 64")
    return out_rows


def check_writes(w: Sequence[int], out_rows: int, L: int) -> None:  # noqa: N803
    """Every flat output index of ``w`` (the programs' writes) written by one program, inside
    ``out_rows`` rows of ``L + 1``."""
    if len(set(w)) != len(w):
        raise ContractViolation("arrays.cu_num_draft_tokens", "two programs would write one output element")
    if w and (min(w) < 0 or max(w) >= out_rows * (L + 1)):
        raise ContractViolation("scalars.output_rows", "a write would land outside the output")


def fewer_output_rows(case: Case) -> Iterator[Case]:
    """The extended tier's shrink candidate: one output row fewer, down to ``B``."""
    if case.scalars.get("output_rows", 0) > len(case.arrays["cu_num_draft_tokens"]):
        yield case.replace(scalars={"output_rows": case.scalars["output_rows"] - 1})
