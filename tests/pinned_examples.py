"""Expectations no oracle computed: per target, cases whose outputs are worked by hand from
docs/CONTRACT.md, run through the record as a fuzz run runs a case.

Each :class:`Pinned` holds a production-tier case and its hand-worked outputs. The outputs become
an *implementation* (:func:`implementation`): for a kernel, an object launched as vLLM launches
the kernel (``kernel[grid](...)``, through the record's ``launch``, i.e. kernels/launchers.py)
that writes exactly the hand-worked elements into the buffers it is given (checking each
buffer's dtype first) and leaves every other element untouched; for a Python function, a function that returns (or writes
in place) the hand-worked result. ``Target.check`` then runs both oracles through the record's
wiring (``call_oracle``, ``expected``) and compares them with it by the same comparison as a fuzz
run (guard bands, sentinels, dtypes): an oracle, a record or a comparison that is wrong makes the
check report a difference or an oracle disagreement.

``U`` marks an element the contract leaves untouched; elements past a list's end are untouched
too (the record chooses how long a buffer is; the contract only says what is written).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eaglefuzz.harness.core.case import Case


class _Untouched:
    def __repr__(self) -> str:
        return "U"


U: Any = _Untouched()
"""An element the contract leaves untouched (it must keep its sentinel)."""

I32, I64, F32, F64, BOOL = np.int32, np.int64, np.float32, np.float64, np.bool_


def i32(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int32)


def i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def f32(*v: float) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def f64(*v: float) -> np.ndarray:
    return np.array(v, dtype=np.float64)


def b(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.bool_)


@dataclass(frozen=True)
class Pinned:
    """One hand-worked case of one target."""

    name: str
    case: Case
    work: str
    """The working, from the contract's section: how each output follows from the inputs."""
    expect: Mapping[str, tuple[Any, Sequence[Any]]] = field(default_factory=dict)
    """A kernel's outputs (by the record's output name; an input updated in place by its own
    name): ``(dtype, values)``, ``U`` where the element stays untouched."""
    params: Mapping[str, str] = field(default_factory=dict)
    """Output name -> the kernel parameter it is passed as, where that is not ``NAME_ptr``."""
    function: Callable[..., Any] | None = None
    """A Python function's hand-worked result, as the function under test would give it."""
    tier: str = "production"
    """The case's domain tier (docs/CONTRACT.md N.2, N.4): production unless it pins the
    reference where only the extended tier goes (a division window, §11.3)."""

    @property
    def id(self) -> str:
        return f"{self.case.kernel}-{self.name}"


class HandWorkedKernel:
    """A kernel whose outputs are the hand-worked ones: ``kernel[grid](*args, **constexprs)``
    binds the arguments to the target's parameter names, and for each expected output writes
    every element that is not ``U`` into the buffer passed for it, after checking its dtype and
    that it is long enough (a wrong buffer is an error: the check reports a crash)."""

    def __init__(self, pinned: Pinned, parameters: Sequence[str]) -> None:
        self.pinned = pinned
        self.parameters = tuple(parameters)

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def launch(*args: Any, **kwargs: Any) -> None:
            import torch

            bound = dict(zip(self.parameters, args, strict=False)) | kwargs
            for out, (dtype, values) in self.pinned.expect.items():
                param = self.pinned.params.get(out) or (out if out in bound else f"{out}_ptr")
                t = bound.get(param)
                if not isinstance(t, torch.Tensor):
                    raise TypeError(f"no tensor passed for {out} (parameter {param})")
                want = torch.from_numpy(np.zeros(0, dtype=dtype)).dtype
                if t.dtype != want:
                    raise TypeError(f"{out}: the launch passes a {t.dtype} buffer, the contract's is {want}")
                flat = t.view(-1)
                if flat.numel() < len(values):
                    raise IndexError(f"{out}: a buffer of {flat.numel()} elements, {len(values)} written")
                for i, v in enumerate(values):
                    if v is not U:
                        flat[i] = v

        return launch


def implementation(p: Pinned, target: Any) -> Any:
    """What the check of ``p`` runs as the implementation under test."""
    if p.function is not None:
        return p.function
    return HandWorkedKernel(p, target.parameters)


def _tensor(values: Sequence[int], dtype: Any, like: Any) -> Any:
    import torch

    return torch.tensor(list(values), dtype={I32: torch.int32, I64: torch.int64}[dtype], device=like.device)


# -- §1 copy_and_expand_eagle_inputs_kernel ---------------------------------------------------

CE = "copy_and_expand_eagle_inputs_kernel"


def _ce(tokens, positions, nxt, qsl, qel, *, P, shift, par) -> Case:  # noqa: ANN001
    return Case(CE, {"target_token_ids": tokens, "target_positions": positions, "next_token_ids": nxt,
                     "query_start_loc": qsl, "query_end_loc": qel},
                {"num_padding_slots_per_request": P, "padding_token_id": 0, "parallel_drafting_token_id": par,
                 "shift_input_ids": shift, "total_input_tokens": len(tokens)},
                {"block_size_tokens": None, "num_blocks": None})


PINNED: list[Pinned] = [
    Pinned(
        "shift_off_p1_rejected_token",
        _ce(i32(10, 11, 12, 13, 14), i64(100, 101, 102, 200, 201), i32(50, 60), i32(0, 3, 5), i32(1, 4),
            P=1, shift=False, par=0),
        """§1.1, shift off, P = 1, T = 5. r0: qs 0, qe 1 (one rejected), nqs 3: nv = qe - qs + 1 = 2,
        out_start = qs + r*P = 0, total = nv + P + (nqs - qe - 1) = 4, p0 = 100: slots 0, 1 valid
        (ids 10, 11, positions 100, 101), slot 2 bonus (50, 102; new-token index 0 -> 2), slot 3
        rejected (padding 0, position 0, rejected mask). r1: qs 3, qe 4, nqs 5: nv 2, out_start
        3 + 1 = 4, total 3, p0 = 200: slots 4, 5 valid (13, 14), slot 6 bonus (60, 202; index 1 -> 6).
        T + R*P = 7 slots written; the hidden-state mapping is not touched without shift.""",
        {"out_input_ids": (I32, [10, 11, 50, 0, 13, 14, 60]),
         "out_positions": (I64, [100, 101, 102, 0, 200, 201, 202]),
         "out_is_rejected_token_mask": (BOOL, [False, False, False, True, False, False, False]),
         "out_is_masked_token_mask": (BOOL, [False] * 7),
         "out_new_token_indices": (I32, [2, 6]),
         "out_hidden_state_mapping": (I32, [U] * 5)},
    ),
    Pinned(
        "shift_on_p3_parallel_slots",
        _ce(i32(10, 11, 12, 13, 14, 15), i64(100, 101, 102, 103, 200, 201), i32(50, 60), i32(0, 4, 6), i32(2, 5),
            P=3, shift=True, par=99),
        """§1.1, shift on, P = 3, T = 6. r0: qs 0, qe 2, nqs 4: nv = qe - qs = 2 reading tokens
        qs + 1 + j (11, 12), out_start 0, total = 2 + 3 + (4 - 2 - 1) = 6, p0 = 100 (not shifted):
        slots 0, 1 valid (positions 100, 101), 2 bonus 50 (102), 3, 4 parallel 99 (103, 104,
        masked), 5 rejected (0, 0); new-token indices 0..2 -> 2, 3, 4; mapping[0..3] = 0..3.
        r1: qs 4, qe 5, nqs 6: nv 1 (token 15), out_start = 4 + 1*(P - 1) = 6, total 4, p0 = 200:
        slot 6 valid, 7 bonus 60 (201), 8, 9 parallel (202, 203); indices 3..5 -> 7, 8, 9;
        mapping[4], [5] = 6, 7. T + R*(P - 1) = 10 slots written.""",
        {"out_input_ids": (I32, [11, 12, 50, 99, 99, 0, 15, 60, 99, 99]),
         "out_positions": (I64, [100, 101, 102, 103, 104, 0, 200, 201, 202, 203]),
         "out_is_rejected_token_mask": (BOOL, [False] * 5 + [True] + [False] * 4),
         "out_is_masked_token_mask": (BOOL, [False, False, False, True, True, False, False, False, True, True]),
         "out_new_token_indices": (I32, [2, 3, 4, 7, 8, 9]),
         "out_hidden_state_mapping": (I32, [0, 1, 2, 3, 6, 7])},
    ),
]

# -- §2 eagle_prepare_inputs_padded_kernel ----------------------------------------------------

PI = "eagle_prepare_inputs_padded_kernel"


def _pi(cu, valid, qsl) -> Case:  # noqa: ANN001
    return Case(PI, {"cu_num_draft_tokens": cu, "valid_sampled_tokens_count": valid, "query_start_loc": qsl},
                {"num_reqs": len(cu)}, {"grid_size": None})


PINNED += [
    Pinned(
        "drafts_and_a_prefill",
        _pi(i32(2, 2, 5), i32(2, 0, 4), i32(0, 3, 4, 8)),
        """§2.1: cu is inclusive, so d = [2, 0, 3]. r0: rejected = d + 1 - valid = 2 + 1 - 2 = 1,
        index = qsl[1] - 1 - 1 = 1. r1 (d = 0, a prefill): rejected 0, index = qsl[2] - 1 = 3.
        r2: rejected = 3 + 1 - 4 = 0, index = qsl[3] - 1 = 7.""",
        {"token_indices_to_sample": (I32, [1, 3, 7]), "num_rejected_tokens": (I32, [1, 0, 0])},
        params={"num_rejected_tokens": "num_rejected_tokens_gpu_ptr"},
    ),
    Pinned(
        "every_draft_rejected",
        _pi(i32(3, 3), i32(1, 1), i32(0, 5, 7)),
        """§2.1: d = [3, 0]. r0 keeps only the recovered token (valid 1): rejected = 3 + 1 - 1 = 3,
        index = qsl[1] - 1 - 3 = 1. r1 (a prefill with its sampled token): rejected 0, index 6.""",
        {"token_indices_to_sample": (I32, [1, 6]), "num_rejected_tokens": (I32, [3, 0])},
        params={"num_rejected_tokens": "num_rejected_tokens_gpu_ptr"},
    ),
]

# -- §3 eagle_prepare_next_token_padded_kernel ------------------------------------------------

NT = "eagle_prepare_next_token_padded_kernel"


def _nt(sampled, discard, backup, vocab) -> Case:  # noqa: ANN001
    return Case(NT, {"sampled_token_ids": sampled, "discard_request_mask": discard, "backup_next_token_ids": backup},
                {"num_reqs": sampled.shape[0], "num_sampled_tokens_per_req": sampled.shape[1], "vocab_size": vocab},
                {"block_size_tokens": None, "grid_size": None})


PINNED += [
    Pinned(
        "prefix_rows_and_a_discarded_one",
        _nt(i32(5, 9, -1, -1, 1, 2, -1, -1, 7, 8, 3, 4).reshape(3, 4), b(0, 1, 0, 0), i32(60, 61, 62, 63), 100),
        """§3.1, vocab 100, S = 4. r0 [5, 9, -1, -1]: two valid columns, the last valid id 9.
        r1 discarded: the backup 61, count 0 (the row is not read). r2 [7, 8, 3, 4]: four valid,
        the last 4. Elements past num_reqs stay untouched.""",
        {"next_token_ids": (I32, [9, 61, 4]), "valid_sampled_tokens_count": (I32, [2, 0, 4])},
    ),
    Pinned(
        "one_column_rows",
        _nt(i32(17, 0).reshape(2, 1), b(0, 0, 1), i32(40, 41, 42), 32000),
        """§3.1, S = 1 (no drafts): each row's only id is valid (0 is a vocabulary id, not -1):
        next = [17, 0], count = [1, 1]; no backup used.""",
        {"next_token_ids": (I32, [17, 0]), "valid_sampled_tokens_count": (I32, [1, 1])},
    ),
]

# -- §6 eagle_step_slot_mapping_metadata_kernel -----------------------------------------------

ST = "eagle_step_slot_mapping_metadata_kernel"


def _st(positions, table, seq, *, bs, M, nb, ib, aliased) -> Case:  # noqa: ANN001
    return Case(ST, {"positions": positions, "block_table": table, "seq_lens": seq},
                {"block_size": bs, "max_model_len": M, "n_blocks_per_req": nb},
                {"aliased_positions": aliased, "input_batch_size": ib})


PINNED += [
    Pinned(
        "padding_programs",
        _st(i64(2, 5), i32(5, 6, 7, 8, 9, 10).reshape(2, 3), i32(3, 6), bs=4, M=10, nb=3, ib=4, aliased=False),
        """§6.1, bs 4, M 10, 4 programs for 2 requests. r0: p = 2 + 1 = 3 < M, column
        min(3 // 4, 2) = 0, slot 5*4 + 3 = 23, seq_lens min(3 + 1, 10) = 4. r1: p = 6, column 1
        (block 9), slot 9*4 + 2 = 38, seq_lens 7. Programs 2, 3 pad: slot PAD_ID -1; nothing else.""",
        {"out_clamped_positions": (I64, [3, 6]), "out_slot_mapping": (I64, [23, 38, -1, -1]),
         "seq_lens": (I32, [4, 7])},
    ),
    Pinned(
        "aliased_positions_later_columns",
        _st(i64(6, 0), i32(10, 11, 12, 13, 20, 21, 22, 23).reshape(2, 4), i32(7, 1), bs=2, M=8, nb=4, ib=2, aliased=True),
        """§6.1 with out_clamped_positions = positions (vLLM's later draft steps). r0: p = 7 < 8,
        column 7 // 2 = 3, slot 13*2 + 1 = 27, seq_lens min(7 + 1, 8) = 8. r1: p = 1, column 0,
        slot 20*2 + 1 = 41, seq_lens 2. The positions buffer ends up holding [7, 1].""",
        {"out_clamped_positions": (I64, [7, 1]), "out_slot_mapping": (I64, [27, 41]), "seq_lens": (I32, [8, 2])},
    ),
]

# -- §9 copy_and_expand_dflash_inputs_kernel --------------------------------------------------

DF = "copy_and_expand_dflash_inputs_kernel"


def _df(nxt, positions, qsl, table, rej, *, K, bs, par, has_rej=True) -> Case:  # noqa: ANN001
    arrays = {"next_token_ids": nxt, "target_positions": positions, "query_start_loc": qsl, "block_table": table}
    if has_rej:
        arrays["num_rejected_tokens"] = rej
    return Case(DF, arrays,
                {"block_size": bs, "has_num_rejected": has_rej, "num_query_per_req": K + 1, "num_speculative_tokens": K,
                 "parallel_drafting_token_id": par, "total_input_tokens": len(positions)},
                {"buffer_spare": None, "max_tokens_per_req": None, "triton_block_size": None})


PINNED += [
    Pinned(
        "rejected_token_and_block_crossings",
        _df(i32(50, 60), i64(0, 1, 2, 4, 5), i32(0, 3, 5), i32(7, 8, 0, 9, 10, 11).reshape(2, 3), i32(1, 0),
            K=2, bs=4, par=99),
        """§9.1, K = 2 (Q = 3), bs 4, W 3, slot(r, p) = table[r, min(p // 4, 2)]*4 + p % 4.
        Context: r0 positions 0, 1, 2 -> slots 28, 29, 30; r1 positions 4, 5 -> column 1 (10):
        40, 41. Query: r0 continues after its last accepted token nqs - rej - 1 = 1 (position 1):
        positions 2, 3, 4 -> slots 30, 31, 8*4 + 0 = 32; r1 after token 4 (position 5): 6, 7, 8
        -> 42, 43, 11*4 + 0 = 44. Ids per query slot: bonus then mask 99. Token indices
        r*K + q - 1 hold r*Q + q: 1, 2, 4, 5.""",
        {"out_context_positions": (I64, [0, 1, 2, 4, 5]), "out_context_slot_mapping": (I64, [28, 29, 30, 40, 41]),
         "out_query_positions": (I64, [2, 3, 4, 6, 7, 8]), "out_query_slot_mapping": (I64, [30, 31, 32, 42, 43, 44]),
         "out_input_ids": (I32, [50, 99, 99, 60, 99, 99]), "out_token_indices": (I32, [1, 2, 4, 5])},
    ),
    Pinned(
        "without_num_rejected",
        _df(i32(70), i64(16, 17), i32(0, 2), i32(3, 4).reshape(1, 2), None, K=1, bs=16, par=5, has_rej=False),
        """§9.1 with HAS_NUM_REJECTED off (rej = 0), K = 1 (Q = 2), bs 16. Context positions 16, 17
        -> column 1 (block 4): slots 64, 65. Query after token 1 (position 17): 18, 19 -> 66, 67;
        ids [70, 5]; one token index: element 0 holds 0*2 + 1 = 1.""",
        {"out_context_positions": (I64, [16, 17]), "out_context_slot_mapping": (I64, [64, 65]),
         "out_query_positions": (I64, [18, 19]), "out_query_slot_mapping": (I64, [66, 67]),
         "out_input_ids": (I32, [70, 5]), "out_token_indices": (I32, [1])},
    ),
]

# -- §10 rejection_greedy_sample_kernel -------------------------------------------------------

GR = "rejection_greedy_sample_kernel"


def _gr(cu, draft, argmax, bonus, L, is_greedy=None) -> Case:  # noqa: ANN001
    arrays = {"cu_num_draft_tokens": cu, "draft_token_ids": draft, "target_argmax": argmax,
              "bonus_token_ids": bonus.reshape(-1, 1)}
    if is_greedy is not None:
        arrays["is_greedy"] = is_greedy
    return Case(GR, arrays, {"max_spec_len": L}, {})


PINNED += [
    Pinned(
        "all_greedy_ragged",
        _gr(i32(3, 3, 5), i32(5, 6, 7, 9, 9), i64(5, 6, 8, 9, 1), i32(100, 101, 102), 3),
        """§10.1, is_greedy None, L = 3 (rows of 4). r0 (d 3): 5 = 5, 6 = 6 accepted, 7 != 8:
        the argmax 8 in slot 2, then nothing. r1 (d 0): the bonus 101 in slot 0. r2 (d 2): 9
        accepted, 9 != 1: 1 in slot 1. Every other slot untouched.""",
        {"output_token_ids": (I32, [5, 6, 8, U, 101, U, U, U, 9, 1, U, U])},
    ),
    Pinned(
        "mixed_batch_random_row_untouched",
        _gr(i32(2, 3), i32(4, 5, 6), i64(4, 5, 7), i32(30, 31), 2, is_greedy=b(1, 0)),
        """§10.1 with is_greedy a tensor: r0 greedy, both drafts equal the argmax: 4, 5, then the
        bonus 30 in slot 2. r1 is a random request: its row is not read or written.""",
        {"output_token_ids": (I32, [4, 5, 30, U, U, U])},
    ),
]

# -- §11 rejection_random_sample_kernel -------------------------------------------------------

RR = "rejection_random_sample_kernel"
_P32, _Q32 = np.float32(0.3), np.float32(0.7)
_BETWEEN = np.nextafter(np.float64(_P32) / np.float64(_Q32), np.inf)
"""A uniform above the exact quotient 0.3f / 0.7f but not above its float32 rounding."""


def _rr(cu, draft, target, draft_probs, uniform, recovered, bonus, L, is_greedy) -> Case:  # noqa: ANN001
    arrays = {"cu_num_draft_tokens": cu, "draft_token_ids": draft, "target_probs": target,
              "bonus_token_ids": bonus.reshape(-1, 1), "recovered_token_ids": recovered, "uniform_probs": uniform,
              "is_greedy": is_greedy}
    if draft_probs is not None:
        arrays["draft_probs"] = draft_probs
    return Case(RR, arrays, {"max_spec_len": L, "vocab_size": target.shape[1]}, {})


PINNED += [
    Pinned(
        "float32_quotient_at_the_boundary",
        _rr(i32(2), i32(1, 0), f32(0.7, 0.3, 0.6, 0.4).reshape(2, 2), f32(0.3, 0.7, 0.3, 0.7).reshape(2, 2),
            np.array([_BETWEEN, 0.5]), i32(77, 78), i32(50), 2, b(0)),
        """§11.1 (extended tier: the uniform lies in §11.3's division window, where a compiled
        division may decide either way; the reference, and the interpreter, divide exactly): t0 draft 1, p = 0.3f, q = 0.7f; the float32 quotient rounds up (0.42857146) and u
        lies just above the exact quotient: p / q >= u in float32 accepts (a float64 division
        would reject and write the recovered 77). t1 draft 0, p 0.6f, q 0.3f: quotient 2 >= 0.5,
        accepted. Every draft accepted: the bonus 50 in slot 2.""",
        {"output_token_ids": (I32, [1, 0, 50])},
        tier="extended",
    ),
    Pinned(
        "greedy_row_untouched_and_a_rejection",
        _rr(i32(0, 0, 2), i32(0, 1), f32(0.6, 0.4, 0.8, 0.2).reshape(2, 2), f32(0.3, 0.7, 0.2, 0.8).reshape(2, 2),
            f64(0.9, 0.5), i32(71, 72), i32(50, 61, 62), 2, b(1, 0, 0)),
        """§11.1: r0 greedy: untouched. r1 no drafts: the bonus 61 in slot 0. r2: t0 draft 0,
        0.6 / 0.3 = 2 >= 0.9 accepted (0); t1 draft 1, 0.2 / 0.8 = 0.25 < 0.5 rejected: the
        recovered 72 in slot 1, no bonus.""",
        {"output_token_ids": (I32, [U, U, U, 61, U, U, 0, 72, U])},
    ),
]

# -- §12 expand_kernel ------------------------------------------------------------------------

EX = "expand_kernel"


def _ex(x, cu, frm, to) -> Case:  # noqa: ANN001
    return Case(EX, {"input": x, "cu_num_tokens": cu},
                {"num_tokens": int(cu[-1]), "replace_from": frm, "replace_to": to}, {"max_num_tokens": None})


PINNED += [
    Pinned(
        "temperature_zero_replaced",
        _ex(f32(0.0, 0.7, 1.5), i32(2, 2, 5), 0, 1),
        """§12.1: n = [2, 0, 3]. r0 x = 0.0 == float32(0): replaced by 1.0, written twice; r1
        writes nothing; r2 1.5 three times.""",
        {"output": (F32, [1.0, 1.0, 1.5, 1.5, 1.5])},
    ),
    Pinned(
        "int_values_kept",
        _ex(i32(0, 50), i32(1, 3), 0, 32000),
        """§12.1 on int32 values: r0 0 == replace_from: 32000 once; r1 50 kept, twice.""",
        {"output": (I32, [32000, 50, 50])},
    ),
]

# -- §13 sample_recovered_tokens_kernel -------------------------------------------------------

SR = "sample_recovered_tokens_kernel"


def _sr(cu, draft, target, draft_probs, inv_q) -> Case:  # noqa: ANN001
    arrays = {"cu_num_draft_tokens": cu, "draft_token_ids": draft, "target_probs": target, "inv_q": inv_q}
    if draft_probs is not None:
        arrays["draft_probs"] = draft_probs
    d = np.diff(np.concatenate([[0], cu]))
    return Case(SR, arrays, {"max_spec_len": int(d.max()), "vocab_size": target.shape[1]}, {"block_size": None})


PINNED += [
    Pinned(
        "residual_scores",
        _sr(i32(1, 3), i32(2, 0, 3),
            f32(0.125, 0.25, 0.5, 0.125, 0.25, 0.5, 0.25, 0.0, 0.25, 0.25, 0.25, 0.25).reshape(3, 4),
            f32(0.125, 0.125, 0.25, 0.5, 0.25, 0.25, 0.0, 0.5, 0.25, 0.25, 0.25, 0.25).reshape(3, 4),
            f32(1, 4, 1, 1, 1, 1, 2, 1).reshape(2, 4)),
        """§13.1 with draft probs: p = max(target - draft, 0), scores p * inv_q[row of the
        request] (exact dyadic values). t0 (r0): p = [0, 0.125, 0.25, 0] * [1, 4, 1, 1] =
        [0, 0.5, 0.25, 0]: 1. t1 (r1): p = [0, 0.25, 0.25, 0] * [1, 1, 2, 1]: 2. t2 (r1): every
        p is 0, every score 0: token 0.""",
        {"output_token_ids": (I32, [1, 2, 0])},
    ),
    Pinned(
        "no_draft_probs_removes_the_draft",
        _sr(i32(2), i32(1, 3), f32(0.25, 0.5, 0.125, 0.125, 0.5, 0.125, 0.125, 0.25).reshape(2, 4), None,
            f32(1, 1, 4, 1).reshape(1, 4)),
        """§13.1 without draft probs: the draft's own probability is 0. t0 (draft 1): [0.25, 0,
        0.125, 0.125] * [1, 1, 4, 1] = [0.25, 0, 0.5, 0.125]: 2. t1 (draft 3): [0.5, 0.125,
        0.125, 0] * [1, 1, 4, 1] = [0.5, 0.125, 0.5, 0]: a tie, the first index 0.""",
        {"output_token_ids": (I32, [2, 0])},
    ),
]

# -- §4 extend_all_queries_by_N (a Python function: the hand-worked result is returned) ------

EA = "extend_all_queries_by_N"


def _ea(qsl, seq, N, arange, slot_mapping, new_slot_mapping, table, max_seq_len) -> Case:  # noqa: ANN001
    return Case(EA, {"query_start_loc": qsl, "seq_lens": seq, "arange": arange, "block_table": table,
                     "slot_mapping": slot_mapping, "new_slot_mapping": new_slot_mapping},
                {"N": N, "causal": True, "device_copies_on_device": True, "max_query_len": int(np.diff(qsl).max()),
                 "max_seq_len": max_seq_len, "num_actual_tokens": int(qsl[-1]), "num_reqs": len(seq),
                 "optional_fields": False}, {})


def _extended(qsl: list[int], seq: list[int], actual: int, max_query: int, max_seq: int) -> Callable[..., Any]:
    """extend_all_queries_by_N as the contract's table says, with the values worked by hand."""

    def extend(cad: Any, N: int, arange: Any, new_slot_mapping: Any) -> Any:
        import torch

        return dataclasses.replace(
            cad, query_start_loc=_tensor(qsl, I32, cad.query_start_loc),
            query_start_loc_cpu=torch.tensor(qsl, dtype=torch.int32), seq_lens=_tensor(seq, I32, cad.seq_lens),
            num_actual_tokens=actual, max_query_len=max_query, max_seq_len=max_seq, slot_mapping=new_slot_mapping)

    return extend


PINNED += [
    Pinned(
        "two_requests_by_2",
        _ea(i32(0, 3, 5), i32(10, 7), 2, i32(0, 1, 2, 3), i64(40, 41, 42, 70, 71),
            i64(40, 41, 42, 43, 44, 70, 71, 72, 73), i32(2, 3, 4, 4).reshape(2, 2), 12),
        """§4.1, N = 2, two requests: query_start_loc[i] + i*N = [0, 3 + 2, 5 + 4] = [0, 5, 9] (the
        CPU copy too); seq_lens + 2 = [12, 9]; num_actual_tokens 5 + 2*2 = 9; max_query_len
        3 + 2 = 5; max_seq_len 12 + 2 = 14 (an upper bound, extended as given); slot_mapping is
        new_slot_mapping itself. Every other field keeps its value; no input is modified.""",
        function=_extended([0, 5, 9], [12, 9], 9, 5, 14),
    ),
    Pinned(
        "one_request_by_1",
        _ea(i32(0, 4), i32(4), 1, i32(0, 1), i64(8, 9, 10, 11), i64(8, 9, 10, 11, -1), i32(1).reshape(1, 1), 4),
        """§4.1, N = 1, one request of 4 tokens: query_start_loc [0, 4 + 1] = [0, 5]; seq_lens
        [5]; num_actual_tokens 4 + 1 = 5; max_query_len 5; max_seq_len 5; slot_mapping the new
        one (a padding slot -1 included).""",
        function=_extended([0, 5], [5], 5, 5, 5),
    ),
]

# -- §5 create_vllm_config_for_draft_model ----------------------------------------------------

CF = "create_vllm_config_for_draft_model"


def _cf(**changes: Any) -> Case:
    side = {"dtype": 1, "enforce_eager": False, "max_logprobs": 20, "max_model_len": 4096, "model": 0,
            "quantization": None, "seed": 0, "trust_remote_code": False}
    par = {"data_parallel_rank": 0, "data_parallel_size": 1, "decode_context_parallel_size": 1,
           "distributed_executor_backend": None, "enable_expert_parallel": False, "pipeline_parallel_size": 1,
           "rank": 0, "tensor_parallel_size": 2, "world_size": 2}
    s = {f"target_model.{k}": v for k, v in side.items()} | {f"draft_model.{k}": v for k, v in side.items()}
    s |= {f"target_parallel.{k}": v for k, v in par.items()} | {f"draft_parallel.{k}": v for k, v in par.items()}
    s |= {"additional_config": None, "cache.block_size": 16, "compilation.mode": 0, "device": 0, "instance_id": None,
          "quant.method": 0, "quant.weight_bits": 8, "quant_config_present": False, "scheduler.max_num_batched_tokens": 8192,
          "scheduler.max_num_seqs": 256, "spec.method": 2, "spec.num_speculative_tokens": 3, "spec.parallel_drafting": False,
          "speculative_config_present": True}
    return Case(CF, {}, s | changes, {})


def _draft_config(model: dict[str, Any], parallel: dict[str, Any]) -> Callable[..., Any]:
    """The draft's VllmConfig as §5.1 builds it: the target's, with no quant_config, the model
    and parallel configs given here field by field (worked by hand from the case)."""

    def create(target: Any) -> Any:
        types = sys.modules[type(target).__module__]
        return dataclasses.replace(target, quant_config=None, model_config=types.ModelConfig(**model),
                                   parallel_config=types.ParallelConfig(**parallel))

    return create


PINNED += [
    Pinned(
        "quantized_target_rank_3",
        _cf(**{"quant_config_present": True, "quant.method": 1, "target_model.quantization": 1,
               "target_parallel.rank": 3, "target_parallel.world_size": 4, "draft_parallel.rank": 0,
               "draft_model.model": 7, "draft_model.max_model_len": 2048, "draft_model.seed": 11,
               "draft_model.dtype": 2}),
        """§5.1: quant_config becomes None (the target's is awq); model_config is the draft's model
        config (org/model-7, bfloat16, seed 11, max_model_len 2048, the rest as the case gives);
        parallel_config is the draft's parallel config with the target's rank 3 (the draft's own is
        0; its world size stays 2). Every other field is the target's.""",
        function=_draft_config(
            {"model": "org/model-7", "dtype": "bfloat16", "seed": 11, "max_model_len": 2048, "quantization": None,
             "trust_remote_code": False, "enforce_eager": False, "max_logprobs": 20},
            {"pipeline_parallel_size": 1, "tensor_parallel_size": 2, "data_parallel_size": 1, "data_parallel_rank": 0,
             "decode_context_parallel_size": 1, "enable_expert_parallel": False, "world_size": 2, "rank": 3,
             "distributed_executor_backend": None}),
    ),
    Pinned(
        "quantized_draft_model",
        _cf(**{"draft_model.quantization": 0, "draft_model.enforce_eager": True, "target_parallel.rank": 1,
               "draft_parallel.rank": 5, "draft_parallel.distributed_executor_backend": 0}),
        """§5.1: no quant_config on the target (None stays None); the draft model's own
        quantization fp8 travels in its model config (enforce_eager true); the draft's parallel
        config (executor mp) takes the target's rank 1 in place of its 5.""",
        function=_draft_config(
            {"model": "org/model-0", "dtype": "float16", "seed": 0, "max_model_len": 4096, "quantization": "fp8",
             "trust_remote_code": False, "enforce_eager": True, "max_logprobs": 20},
            {"pipeline_parallel_size": 1, "tensor_parallel_size": 2, "data_parallel_size": 1, "data_parallel_rank": 0,
             "decode_context_parallel_size": 1, "enable_expert_parallel": False, "world_size": 2, "rank": 1,
             "distributed_executor_backend": "mp"}),
    ),
]

# -- §7 compute_new_slot_mapping --------------------------------------------------------------

NS = "compute_new_slot_mapping"


def _ns(qsl, seq, table, positions, rejected, *, N, bs, M) -> Case:  # noqa: ANN001
    return Case(NS, {"query_start_loc": qsl, "block_table": table, "seq_lens": seq,
                     "slot_mapping": np.arange(int(qsl[-1]), dtype=np.int64), "new_positions": positions,
                     "is_rejected_token_mask": rejected},
                {"block_size": bs, "max_model_len": M, "num_new_tokens": N}, {"views": True})


def _slots(values: list[int]) -> Callable[..., Any]:
    def compute(cad: Any, new_positions: Any, is_rejected_token_mask: Any, block_size: int, num_new_tokens: int,
                max_model_len: int) -> Any:
        return _tensor(values, I64, new_positions)

    return compute


PINNED += [
    Pinned(
        "two_requests_rejected_last",
        _ns(i32(0, 2, 3), i32(8, 2), i32(10, 11, 12, 13, 20, 21, 22, 23).reshape(2, 4),
            i64(5, 6, 7, 0, 0, 1, 0), b(0, 0, 0, 1, 0, 0, 1), N=2, bs=4, M=16),
        """§7.1, N = 2, bs 4: r0 owns tokens 0-3 (qlen 2 + 2), r1 tokens 4-6 (qlen 1 + 2). r0:
        positions 5, 6, 7 in column 1 (block 11): 45, 46, 47; token 3 rejected (position 0, as
        §1 writes it): -1. r1: positions 0, 1 in column 0 (block 20): 80, 81; token 6 rejected: -1.""",
        function=_slots([45, 46, 47, -1, 80, 81, -1]),
    ),
    Pinned(
        "one_request_block_size_1",
        _ns(i32(0, 3), i32(5), i32(7, 3, 9, 4, 6, 2, 8, 1).reshape(1, 8), i64(3, 4, 5, 6), b(0, 0, 0, 0),
            N=1, bs=1, M=8),
        """§7.1, bs 1: the slot of position p is block_table[0, p]: positions 3, 4, 5, 6 give
        4, 6, 2, 8.""",
        function=_slots([4, 6, 2, 8]),
    ),
]

# -- §8 update_num_computed_tokens_for_batch_change -------------------------------------------

BC = "update_num_computed_tokens_for_batch_change"


def _bc(nct, nacc, prev_positions, valid, prev_drafts, cpu) -> Case:  # noqa: ANN001
    return Case(BC, {"num_computed_tokens": nct, "num_accepted_tokens": nacc, "prev_positions": prev_positions,
                     "valid_sampled_token_count": valid, "prev_num_draft_tokens": prev_drafts,
                     "cpu_num_computed_tokens": cpu}, {}, {"mode": "eager"})


def _updated(nct: list[int], nacc: list[int]) -> Callable[..., Any]:
    """Writes the hand-worked counts in place, as the function does (and returns None)."""

    def update(num_computed_tokens: Any, num_accepted_tokens: Any, *rest: Any) -> None:
        num_computed_tokens[: len(nct)] = _tensor(nct, I32, num_computed_tokens)
        num_accepted_tokens[: len(nacc)] = _tensor(nacc, I32, num_accepted_tokens)

    return update


PINNED += [
    Pinned(
        "reordered_rows_read_before_written",
        _bc(i32(100, 200, 300, 400), i32(1, 1, 1), i64(1, -1, 2), i32(1, 2, 2, 1), i32(0, 4, 1, 0), i32(7, 8, 9)),
        """§8.1, n = 3, every value read before anything is written. Row 0: g = 1, 4 drafts: the
        previous count of row 1 (200, not the 8 row 1 gets) + valid 2 = 202, accepted 2. Row 1:
        a new request (prev_position -1): the CPU's 8, accepted unchanged. Row 2: g = 2, 1
        draft: 300 + 2 = 302, accepted 2. Row 3 (past n) untouched.""",
        function=_updated([202, 8, 302, 400], [2, 1, 2]),
    ),
    Pinned(
        "previous_row_without_drafts",
        _bc(i32(50, 60), i32(3, 3), i64(1, 0), i32(1, 3), i32(0, 2), i32(11, 12)),
        """§8.1: row 0 reads row 1 (2 drafts): 60 + 3 = 63, accepted 3. Row 1 reads row 0, which
        had no drafts: not participating, the CPU's 12, accepted unchanged (3).""",
        function=_updated([63, 12], [3, 3]),
    ),
]
