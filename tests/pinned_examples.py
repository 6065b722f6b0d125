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
                if param.endswith("]"):  # "ptrs[g]": the g-th address of a table of pointers (V2's block tables)
                    _write_at(bound, param, dtype, values)
                    continue
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


def _write_at(bound: Mapping[str, Any], param: str, dtype: Any, values: Sequence[Any]) -> None:
    """Write ``values`` (not ``U``) at the address that element ``g`` of the uint64 pointer table
    ``param`` = ``"name[g]"`` holds (on the host, as the check of a pinned case runs): the buffer
    of a KV-cache group's table, which a Model Runner V2 launch passes by its ``data_ptr()``."""
    import ctypes

    import torch

    name, _, g = param[:-1].partition("[")
    table = bound.get(name)
    if not isinstance(table, torch.Tensor) or table.dtype != torch.uint64 or table.device.type != "cpu":
        raise TypeError(f"no host table of pointers passed as {name}")
    address = int(table[int(g)].item())
    size = np.dtype(dtype).itemsize
    for i, v in enumerate(values):
        if v is not U:
            data = np.asarray([v], dtype=dtype).tobytes()
            ctypes.memmove(address + i * size, data, size)


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


# -- §14-§27 Model Runner V2 (vllm/v1/worker/gpu/) --------------------------------------------
#
# Cases built with each target's layout; the hand-worked numbers follow tests/test_runner_v2_examples.py
# (worked from docs/CONTRACT.md there), made production cases where they were not (token ids of a
# vocabulary, vLLM's launch parameters, finite hidden states). An input the kernel updates in
# place is expected as a whole (U: it keeps its value).


def _v2(name: str, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, Any], launch: Mapping[str, Any] | None = None) -> Case:
    return Case(name, dict(arrays), dict(scalars), dict(launch or {}))


PP14 = "input_batch_prepare_prefill_inputs_kernel"
_ATOK = np.array([[10 + j for j in range(8)], [20 + j for j in range(8)], [30 + j for j in range(8)],
                  [40 + j for j in range(8)]], dtype=np.int32)
PINNED += [
    Pinned(
        "prefilling_rows_and_lookahead",
        _v2(PP14, {"idx_mapping": i64(0, 1, 3), "query_start_loc": i32(0, 3, 5, 9), "all_token_ids": _ATOK,
                   "prefill_len": i32(6, 3, 8, 5), "num_computed_tokens": i32(2, 3, 4, 0)},
            {"num_reqs": 3, "num_lookahead": 2}, {"LOOKAHEAD_BLOCK": None, "BLOCK_SIZE": None}),
        """§14.1: row 0 (state 0, c 2 < L 6) copies tokens 2..4 of its row (12, 13, 14) to ids 0..2,
        its lookahead positions 5 (< 6: 15) and 6 (past the prompt: 0) to next_prefill_tokens[k, 0];
        row 1 (state 1, c 3 >= L 3) decodes: nothing; row 2 (state 3, c 0 < L 5) copies 40..43 to ids
        5..8, lookahead 4 (44) and 5 (0) to column 3. Columns 1, 2 untouched.""",
        {"input_ids": (I32, [12, 13, 14, U, U, 40, 41, 42, 43]),
         "next_prefill_tokens": (I32, [15, U, U, 44, 0, U, U, 0])},
    ),
    Pinned(
        "last_chunk_lookahead_past_prompt",
        _v2(PP14, {"idx_mapping": i64(0), "query_start_loc": i32(0, 2), "all_token_ids": i32(7, 8, 9, 0).reshape(1, 4),
                   "prefill_len": i32(2), "num_computed_tokens": i32(0)},
            {"num_reqs": 1, "num_lookahead": 3}, {"LOOKAHEAD_BLOCK": None, "BLOCK_SIZE": None}),
        """§14.1: one row's whole prompt (c 0, qlen 2 = L): ids 7, 8; every lookahead position (2, 3, 4)
        is past the prompt: 0, 0, 0 (LOOKAHEAD_BLOCK 4: the fourth lane masked).""",
        {"input_ids": (I32, [7, 8]), "next_prefill_tokens": (I32, [0, 0, 0])},
    ),
]

PS15 = "_prepare_pos_seq_lens_kernel"
PINNED += [
    Pinned(
        "positions_and_padding",
        _v2(PS15, {"idx_mapping": i64(2, 0), "query_start_loc": i32(0, 3, 4), "num_computed_tokens": i32(5, 0, 7, 2)},
            {"num_reqs": 2, "max_num_reqs": 4}, {"BLOCK_SIZE": None}),
        """§15.1: row 0 (state 2, c 7): positions 7, 8, 9, length 10; row 1 (state 0, c 5): position 5,
        length 6; the last program zeroes lengths 2 and 3 (max_num_reqs 4).""",
        {"pos": (I64, [7, 8, 9, 5]), "seq_lens": (I32, [10, 6, 0, 0])},
    ),
    Pinned(
        "one_row_no_padding",
        _v2(PS15, {"idx_mapping": i64(0), "query_start_loc": i32(0, 2), "num_computed_tokens": i32(0)},
            {"num_reqs": 1, "max_num_reqs": 1}, {"BLOCK_SIZE": None}),
        """§15.1: a first chunk of two tokens: positions 0, 1, length 2; max_num_reqs = B: no padding.""",
        {"pos": (I64, [0, 1]), "seq_lens": (I32, [2])},
    ),
]

CS16 = "_combine_sampled_and_draft_tokens_kernel"
PINNED += [
    Pinned(
        "bonus_drafts_prompt_end_and_tail",
        _v2(CS16, {"idx_mapping": i64(2, 0, 1), "last_sampled_tokens": i64(101, 102, 103).reshape(3, 1),
                   "query_start_loc": i32(0, 3, 4, 9), "seq_lens": i32(10, 4, 11), "prefill_len": i32(4, 10, 2),
                   "draft_tokens": i64(11, 12, 13, 21, 22, 23, 31, 32, 33).reshape(3, 3),
                   "cu_num_logits": i32(0, 3, 4, 6)},
            {"num_reqs": 3}, {"BLOCK_SIZE": None, "NUM_NEW_SAMPLED_TOKENS": None}),
        """§16.1, NEW 1, K 3 (BLOCK_SIZE 4). Row 0 (state 2): nl 3, d 2, ls = 3 - 3 = 0; logits 0, 1, 2;
        seq 10 > L 2, first logit 7 >= 2: ids[0] = last[2] = 103, drafts 31, 32 at 1, 2. Row 1 (state
        0): nl 1, logits index 3; seq 4 <= L 4: nothing more. Row 2 (state 1): nl 2, d 1, ls 7,
        logits 7, 8; seq 11 > L 10 but its first logit (9) is in the prompt: no bonus; draft 21 at 8.""",
        {"input_ids": (I32, [103, 31, 32, U, U, U, U, U, 21]), "logits_indices": (I64, [0, 1, 2, 3, 7, 8])},
    ),
    Pinned(
        "decode_without_drafts",
        _v2(CS16, {"idx_mapping": i64(0), "last_sampled_tokens": i64(5).reshape(1, 1), "query_start_loc": i32(0, 1),
                   "seq_lens": i32(8), "prefill_len": i32(3), "draft_tokens": i64(0).reshape(1, 1),
                   "cu_num_logits": i32(0, 1)},
            {"num_reqs": 1}, {"BLOCK_SIZE": None, "NUM_NEW_SAMPLED_TOKENS": None}),
        """§16.1: one decoding row without drafts: logits index 0, its last sampled token 5 at id 0.""",
        {"input_ids": (I32, [5]), "logits_indices": (I64, [0])},
    ),
]

EI17 = "_expand_idx_mapping_kernel"
PINNED += [
    Pinned(
        "three_rows",
        _v2(EI17, {"idx_mapping": i64(5, 2, 7), "cu_num_logits": i32(0, 2, 3, 6)}, {"num_reqs": 3, "max_expand_len": 3},
            {"BLOCK_SIZE": None}),
        """§17.1 (BLOCK_SIZE 4): row 0's two logits rows name state 5 (local 0, 1), row 1's one state 2
        (0), row 2's three state 7 (0, 1, 2).""",
        {"expanded_idx_mapping": (I64, [5, 5, 2, 7, 7, 7]), "expanded_local_pos": (I32, [0, 1, 0, 0, 1, 2])},
    ),
    Pinned(
        "one_logit",
        _v2(EI17, {"idx_mapping": i64(0), "cu_num_logits": i32(0, 1)}, {"num_reqs": 1, "max_expand_len": 2},
            {"BLOCK_SIZE": None}),
        """§17.1: one row, one logit: state 0, local position 0.""",
        {"expanded_idx_mapping": (I64, [0]), "expanded_local_pos": (I32, [0])},
    ),
]

GS18 = "_get_num_sampled_and_rejected_kernel"
PINNED += [
    Pinned(
        "chunked_prompt_end_and_rejected",
        _v2(GS18, {"num_sampled": i32(2, 1, 3), "seq_lens": i32(7, 8, 6), "cu_num_logits": i32(0, 4, 5, 8),
                   "idx_mapping": i64(1, 0, 2), "prefill_len": i32(10, 3, 6)}, {"num_reqs": 3}),
        """§18.1: row 0 (state 1, seq 7 >= L 3): sampled 2 of 4 logits, rejected 2; row 1 (state 0, seq
        8 < L 10): chunked, both 0; row 2 (state 2, seq 6 = L 6): not chunked, sampled 3 of 3, rejected 0.""",
        {"num_sampled": (I32, [2, 0, 3]), "num_rejected": (I32, [2, 0, 0])},
    ),
    Pinned(
        "sampler_batch",
        _v2(GS18, {"num_sampled": i32(1, 1), "seq_lens": i32(5, 2), "cu_num_logits": i32(0, 1, 2),
                   "idx_mapping": i64(0, 1), "prefill_len": i32(4, 9)}, {"num_reqs": 2}),
        """§18.1, the plain sampler (one logit a row): row 0 past its prompt keeps 1, rejects 0; row 1
        (seq 2 < L 9) is chunked: 0 and 0.""",
        {"num_sampled": (I32, [1, 0]), "num_rejected": (I32, [0, 0])},
    ),
]

PU19 = "_post_update_kernel"
_BINS = np.zeros((3, 16), dtype=np.int32)
_BINS[2, 11] = 5
PINNED += [
    Pinned(
        "last_rank_counts_and_masked_row",
        _v2(PU19, {"idx_mapping": i64(2, -1, 0), "num_computed_tokens": i32(5, 6, 7),
                   "sampled_tokens": i64(11, 11, 13, 99, 99, 99, 14, 0, 0).reshape(3, 3), "num_sampled": i32(2, 3, 1),
                   "num_rejected": i32(1, 0, 1), "all_token_ids": np.full((3, 8), -9, np.int32),
                   "total_len": i32(2, 3, 4), "query_start_loc": i32(0, 3, 4, 6), "output_bin_counts": _BINS},
            {"num_reqs": 3, "num_draft_tokens": 0}),
        """§19.1. Row 0 (state 2, t 4): sampled 11, 11: last 11, history [4], [5] = 11, length 6,
        count 11 += 2 (5 -> 7); its count 7 + (3 - 1) = 9. Row 1 masked (-1): nothing. Row 2 (state 0,
        t 2): sampled 14: last 14, history [2] = 14, length 3, count 14 = 1; its count 5 + (2 - 1) = 6.""",
        {"num_computed_tokens": (I32, [6, U, 9]), "last_sampled_tokens": (I64, [14, U, 11]),
         "all_token_ids": (I32, [U, U, 14] + [U] * 17 + [11, 11]), "total_len": (I32, [3, U, 6]),
         "output_bin_counts": (I32, [U] * 14 + [1] + [U] * 28 + [7])},
    ),
    Pinned(
        "pipeline_rank_drafts",
        _v2(PU19, {"idx_mapping": i64(1, 0), "num_computed_tokens": i32(5, 6, 7),
                   "sampled_tokens": i64(1, 2, 3, 4).reshape(2, 2), "num_sampled": i32(0, 2), "num_rejected": i32(0, 1),
                   "all_token_ids": np.full((3, 8), -9, np.int32), "total_len": i32(2, 3, 4),
                   "draft_tokens": i64(7, 8, 9, 10).reshape(2, 2)},
            {"num_reqs": 2, "num_draft_tokens": 2}),
        """§19.1, a non-last pipeline rank (no query_start_loc: qlen 0, no counts). Row 0 (state 1):
        drafts 7, 8 to its state row; nothing sampled, delta 0. Row 1 (state 0, t 2): drafts 9, 10;
        sampled 3, 4: last 4, history [2], [3], length 4; delta = 0 - 1: count 5 -> 4.""",
        {"num_computed_tokens": (I32, [4, U, U]), "last_sampled_tokens": (I64, [4, U, U]),
         "all_token_ids": (I32, [U, U, 3, 4]), "total_len": (I32, [4, U, U]),
         "draft_tokens_out": (I64, [9, 10, 7, 8])},
    ),
]

PC20 = "_post_update_num_computed_tokens_kernel"
PINNED += [
    Pinned(
        "counts_grow_by_queries",
        _v2(PC20, {"idx_mapping": i64(3, 1), "query_start_loc": i32(0, 5, 6), "num_computed_tokens": i32(1, 2, 3, 40)},
            {"num_reqs": 2}),
        """§20.1: state 3 grows by 5 (40 -> 45), state 1 by 1 (2 -> 3); states 0, 2 keep theirs.""",
        {"num_computed_tokens": (I32, [U, 3, U, 45])},
    ),
    Pinned(
        "one_decode",
        _v2(PC20, {"idx_mapping": i64(0), "query_start_loc": i32(0, 1), "num_computed_tokens": i32(7)}, {"num_reqs": 1}),
        """§20.1: one token: 7 -> 8.""",
        {"num_computed_tokens": (I32, [8])},
    ),
]

GB21 = "_gather_block_tables_kernel"
PINNED += [
    Pinned(
        "groups_window_padding_row",
        _v2(GB21, {"idx_mapping": i64(2, 0),
                   "src_block_table_0": i32(100, 101, 102, 103, 110, 111, 112, 113, 120, 121, 122, 123).reshape(3, 4),
                   "src_block_table_1": i32(200, 201, 202, 210, 211, 212, 220, 221, 222).reshape(3, 3),
                   "num_blocks": i32(2, 4, 1, 3, 2, 3).reshape(2, 3), "num_computed_tokens": i32(13, 0, 9),
                   "sliding_window_reach": i32(0, 6), "block_sizes": i32(16, 4)},
            {"num_reqs": 2, "num_rows": 3, "MASK_SLIDING_WINDOW": True}, {"BLOCK_SIZE": None}),
        """§21.1. Group 0 (no window): row 0 (state 2, 1 block) 120; row 1 (state 0, 2 blocks) 100, 101.
        Group 1 (reach 6, block 4): row 0 (state 2, first position 9: null = max(9 - 6, 0) // 4 = 0):
        220, 221, 222; row 1 (state 0, 13: null = 7 // 4 = 1): 0, 201, 202. Row 2 (past B = 2, inside
        num_rows 3) zeroed in both.""",
        {"dst_block_table_0": (I32, [120, U, U, U, 100, 101, U, U, 0, 0, 0, 0]),
         "dst_block_table_1": (I32, [220, 221, 222, 0, 201, 202, 0, 0, 0])},
        params={"dst_block_table_0": "dst_block_table_ptrs[0]", "dst_block_table_1": "dst_block_table_ptrs[1]"},
    ),
    Pinned(
        "one_row_no_window",
        _v2(GB21, {"idx_mapping": i64(0), "src_block_table_0": i32(5, 6, 7).reshape(1, 3), "num_blocks": i32(2).reshape(1, 1),
                   "num_computed_tokens": i32(0), "sliding_window_reach": i32(0), "block_sizes": i32(16)},
            {"num_reqs": 1, "num_rows": 1, "MASK_SLIDING_WINDOW": False}, {"BLOCK_SIZE": None}),
        """§21.1: one row of two blocks: 5, 6; the third entry untouched.""",
        {"dst_block_table_0": (I32, [5, 6, U])},
        params={"dst_block_table_0": "dst_block_table_ptrs[0]"},
    ),
]

SM22 = "_compute_slot_mappings_kernel"
PINNED += [
    Pinned(
        "groups_dummy_row_padding",
        _v2(SM22, {"idx_mapping": i64(1, -1, 0), "query_start_loc": i32(0, 3, 4, 6), "positions": i64(0, 4, 9, 3, 7, 8),
                   "block_table_0": i32(5, 6, 7, 8, 9, 10, 11, 12, 13).reshape(3, 3),
                   "block_table_1": i32(1, 2, 3, 4, 5, 6).reshape(3, 2), "block_sizes": i32(4, 8),
                   "slot_mapping_enabled": b(1, 0), "dcp_sharded": b(1, 1)},
            {"num_reqs": 3, "max_num_tokens": 8, "cp_rank": 0, "CP_SIZE": 1, "CP_INTERLEAVE": 1},
            {"PAD_ID": None, "TRITON_BLOCK_SIZE": None}),
        """§22.1, group 0 (block 4): row 0 (state 1: blocks 8, 9, 10) positions 0, 4, 9 -> 8*4 + 0, 9*4 + 0,
        10*4 + 1 = 32, 36, 41; row 1 (-1) PAD; row 2 (state 0: 5, 6, 7) positions 7, 8 -> 27, 28; slots 6,
        7 (past the 6 tokens) PAD. Group 1 is disabled: all PAD.""",
        {"slot_mappings": (I64, [32, 36, 41, -1, 27, 28, -1, -1] + [-1] * 8)},
    ),
    Pinned(
        "context_parallel_interleave_2",
        _v2(SM22, {"idx_mapping": i64(0), "query_start_loc": i32(0, 4), "positions": i64(2, 3, 6, 15),
                   "block_table_0": i32(5, 6, 7, 8, 9, 10).reshape(2, 3), "block_table_1": i32(1, 2, 3, 4, 5, 6, 7, 8).reshape(2, 4),
                   "block_sizes": i32(4, 4), "slot_mapping_enabled": b(1, 1), "dcp_sharded": b(1, 0)},
            {"num_reqs": 1, "max_num_tokens": 5, "cp_rank": 1, "CP_SIZE": 2, "CP_INTERLEAVE": 2},
            {"PAD_ID": None, "TRITON_BLOCK_SIZE": None}),
        """§22.1, 2 ranks, this one rank 1, interleave 2 (V = 8): rank 1 holds offsets 2-3 and 6-7 of every
        8. Sharded group 0: p 2 -> lp 0*4 + 0*2 + 0 = 0, slot 5*4 + 0 = 20; p 3 -> lp 1, 21; p 6 -> lp 2, 22;
        p 15 (vo 7) -> lp 4 + 2 + 1 = 7: block 1 (6), 6*4 + 3 = 27. Unsharded group 1 (blocks 1..4 of
        row 0): p 2 -> 1*4 + 2 = 6, 3 -> 7, 6 -> 2*4 + 2 = 10, 15 -> 4*4 + 3 = 19. Slot 4: PAD.""",
        {"slot_mappings": (I64, [20, 21, 22, 27, -1, 6, 7, 10, 19, -1])},
    ),
]

GD23 = "_gather_draft_sampled_kernel"


def _gd(rows: list[tuple[int, int, int, int]], ids: np.ndarray, prefill: np.ndarray) -> Case:
    q = np.cumsum([0] + [r[2] for r in rows])
    pos = np.concatenate([c + np.arange(n) for _, c, n, _ in rows]).astype(np.int64)
    idx = np.concatenate([q[k + 1] - nl + np.arange(nl) for k, (_, _, _, nl) in enumerate(rows)]).astype(np.int64)
    return _v2(GD23, {"input_ids": ids, "positions": pos, "logits_indices": idx,
                      "expanded_idx_mapping": np.concatenate([np.full(r[3], r[0]) for r in rows]).astype(np.int64),
                      "expanded_local_pos": np.concatenate([np.arange(r[3]) for r in rows]).astype(np.int32),
                      "prefill_len": prefill}, {"num_logits": int(idx.size)}, {"BLOCK_SIZE": None})


PINNED += [
    Pinned(
        "step_inside_the_prompt",
        _gd([(0, 10, 3, 3), (1, 3, 3, 2)], i32(50, 51, 52, 53, 54, 55), i32(12, 4)),
        """§23.1. Request 0 (state 0, positions 10-12, 3 logits, prompt 12): its first logit 50 (local 0)
        at 10; its drafts (local 1, 2: 11 - 1 = 10 and 12 - 2 = 10 < 12) are placeholders -1 at 11, 12.
        Request 1 (state 1, positions 3-5, logits at tokens 4, 5, prompt 4): 54 at 4; local 1: 5 - 1 =
        4, not < 4: 55 at 5.""",
        {"draft_sampled": (I32, [50, -1, -1, 54, 55]), "pos": (I64, [10, 11, 12, 4, 5])},
    ),
    Pinned(
        "prefill_row_and_decode",
        _gd([(0, 0, 4, 1), (1, 20, 2, 2)], i32(60, 61, 62, 63, 64, 65), i32(9, 3)),
        """§23.1: a prefill chunk's one logit (token 3, position 3): 63; a decoding row (positions 20, 21,
        prompt 3): 64 at 20, its draft 65 at 21 (21 - 1 = 20, not < 3).""",
        {"draft_sampled": (I32, [63, 64, 65]), "pos": (I64, [3, 20, 21])},
    ),
]

FS24 = "_flatten_sampled_kernel"
PINNED += [
    Pinned(
        "rows_to_logits_rows",
        _v2(FS24, {"sampled": i64(1, 2, 3, 4, 5, 6, 7, 8, 9).reshape(3, 3), "num_sampled": i32(2, 1, 3),
                   "cu_num_logits": i32(0, 3, 4, 7)}, {"num_reqs": 3}),
        """§24.1: row 0 (logits 0-2) sampled 1, 2 (logits row 2 untouched); row 1 (3) 4; row 2 (4-6) 7, 8, 9.""",
        {"flat_sampled": (I64, [1, 2, U, 4, 7, 8, 9])},
    ),
    Pinned(
        "one_row_all_kept",
        _v2(FS24, {"sampled": i64(5, 6).reshape(1, 2), "num_sampled": i32(2), "cu_num_logits": i32(0, 2)}, {"num_reqs": 1}),
        """§24.1: a draft kept and the bonus: 5, 6.""",
        {"flat_sampled": (I64, [5, 6])},
    ),
]

DP25 = "target_dependent_ar_prepare_prefill_inputs_kernel"
PINNED += [
    Pinned(
        "shift_next_token_padding",
        _v2(DP25, {"target_input_ids": i32(10, 11, 12, 13, 20, 21, 22), "target_positions": i64(5, 6, 7, 8, 0, 1, 2),
                   "idx_mapping": i64(3, 1), "last_sampled": i64(0, 0, 0, 77).reshape(4, 1),
                   "next_prefill_tokens": i32(0, 66, 0, 0).reshape(1, 4), "num_sampled": i32(2, 0),
                   "num_rejected": i32(1, 0), "query_start_loc": i32(0, 4, 7), "seq_lens": i32(9, 3)},
            {"max_num_reqs": 4, "num_reqs": 2}, {"BLOCK_SIZE": None}),
        """§25.1. Row 0 (state 3, qs 0, qlen 4, 1 rejected: q = 3, lti = 2): ids 11, 12 shifted to 0, 1,
        its last sampled 77 at 2; positions 5, 6, 7; slot 3 (rejected) untouched. Row 1 (state 1,
        chunked: next prompt token 66; qs 4, q 3, lti 6): 21, 22 at 4, 5, 66 at 6; positions 0, 1, 2.
        The last program: step 0, query starts 7 at 2..4, lengths and indices 0 at 2, 3.""",
        {"last_token_indices": (I64, [2, 6, 0, 0]), "draft_current_step": (I64, [0]),
         "draft_input_ids": (I32, [11, 12, 77, U, 21, 22, 66]), "draft_positions": (I64, [5, 6, 7, U, 0, 1, 2]),
         "draft_query_start_loc": (I32, [0, 4, 7, 7, 7]), "draft_seq_lens": (I32, [9, 3, 0, 0])},
    ),
    Pinned(
        "one_row_nothing_rejected",
        _v2(DP25, {"target_input_ids": i32(30, 31), "target_positions": i64(4, 5), "idx_mapping": i64(0),
                   "last_sampled": i64(88).reshape(1, 1), "next_prefill_tokens": i32(0).reshape(1, 1),
                   "num_sampled": i32(1), "num_rejected": i32(0), "query_start_loc": i32(0, 2), "seq_lens": i32(6)},
            {"max_num_reqs": 1, "num_reqs": 1}, {"BLOCK_SIZE": None}),
        """§25.1: q = 2, lti 1: 31 shifted to 0, 88 at 1; positions 4, 5; query starts 0, 2; length 6.""",
        {"last_token_indices": (I64, [1]), "draft_current_step": (I64, [0]), "draft_input_ids": (I32, [31, 88]),
         "draft_positions": (I64, [4, 5]), "draft_query_start_loc": (I32, [0, 2]), "draft_seq_lens": (I32, [6])},
    ),
]

DD26 = "_prepare_decode_inputs_kernel"


def _dd(advance: bool) -> Case:
    return _v2(DD26, {"draft_tokens": i64(41, 0, 42, 0, 43, 0).reshape(3, 2), "target_seq_lens": i32(9, 10),
                      "num_rejected": i32(1, 0), "positions": i64(7, 9, 0, 0), "sample_src_positions": i64(8, 10, 0)},
               {"max_model_len": 10, "max_num_reqs": 3, "num_reqs": 2, "ADVANCE_DRAFT_POSITIONS": advance},
               {"BLOCK_SIZE": None})


PINNED += [
    Pinned(
        "advance_and_clamp",
        _dd(True),
        """§26.1, M 10. Row 0: input 41, key 8 -> 9, seq = 9 - 1 = 8, position 7 -> 8, length 9. Row 1 (at
        the model's length): input 42, key 11, position min(10, 9) = 9, length min(11, 10) = 10. The
        last program: query starts 0, 1, 2, 2 (up to max_num_reqs 3), length 2 zeroed.""",
        {"input_ids": (I32, [41, 42]), "positions": (I64, [8, 9, U, U]), "sample_src_positions": (I64, [9, 11, U]),
         "query_start_loc": (I32, [0, 1, 2, 2]), "seq_lens": (I32, [9, 10, 0])},
    ),
    Pinned(
        "constant_positions",
        _dd(False),
        """§26.1 without ADVANCE_DRAFT_POSITIONS (Gemma4's MTP): positions untouched, lengths 8, 10 (not
        advanced); inputs and keys as with it.""",
        {"input_ids": (I32, [41, 42]), "positions": (I64, [U, U, U, U]), "sample_src_positions": (I64, [9, 11, U]),
         "query_start_loc": (I32, [0, 1, 2, 2]), "seq_lens": (I32, [8, 10, 0])},
    ),
]

UD27 = "_update_draft_inputs_kernel"
_HS = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
_HS[1, 0] = -0.0


def _ud(step: int) -> Case:
    return _v2(UD27, {"draft_tokens": i64(61, 62), "current_draft_step": i64(step), "hidden_states": _HS,
                      "positions": i64(6, 9, 0), "sample_src_positions": i64(5, 9, 0), "seq_lens": i32(7, 10, 0)},
               {"max_model_len": 10, "num_speculative_steps": 3, "num_reqs": 2, "ADVANCE_DRAFT_POSITIONS": True},
               {"hidden_size": None, "BLOCK_SIZE": None})


PINNED += [
    Pinned(
        "middle_step",
        _ud(1),
        """§27.1, step 1 of 3, M 10: drafts 61, 62 in column 1; inputs 61, 62; hidden rows copied bit for
        bit (-0.0 kept); keys 6, 10; positions 7 and min(10, 9) = 9; lengths 8 and min(11, 10) = 10.""",
        {"output_draft_tokens": (I64, [U, 61, U, U, 62, U]), "next_input_hidden_states": (F32, [1, 2, 3, 4, -0.0, 6, 7, 8]),
         "input_ids": (I32, [61, 62]), "positions": (I64, [7, 9, U]), "sample_src_positions": (I64, [6, 10, U]),
         "seq_lens": (I32, [8, 10, U])},
    ),
    Pinned(
        "last_step",
        _ud(2),
        """§27.1, step 2 of 3 (the last): only the drafts, in column 2; nothing else written.""",
        {"output_draft_tokens": (I64, [U, U, 61, U, U, 62])},
    ),
]


# -- §28-§35 Model Runner V2's verification (vllm/v1/worker/gpu/sample/gumbel.py, spec_decode/
# rejection_sampler_utils.py) ------------------------------------------------------------------
#
# Cases whose outputs follow from docs/CONTRACT.md without the noise: greedy rows (no noise),
# random rows whose decisions no uniform can change (a probability of 0 or 1), sums of exp(0)
# and of plain fractions. Steps are made by hand; the inputs a kernel takes from the kernels
# before it in rejection_sample come from the chain (targetkit/runner_v2_verify.chain), as vLLM
# hands them over: the hand-worked part is each case's own outputs.


def _step(tl_: np.ndarray, cu: list[int], idx: list[int], temp: list[float], *, ds: list[int], K: int,
          dl: np.ndarray | None = None, pos: list[int] | None = None, seed: list[int] | None = None,
          method: str = "standard") -> Any:  # fmt: skip
    from eaglefuzz.harness.targetkit.runner_v2_verify import Step

    n = tl_.shape[0]
    return Step(np.asarray(tl_, np.float32), dl, i32(*ds), i32(*cu), i64(*(pos or range(10, 10 + n))), i64(*idx),
                f32(*temp), i64(*(seed or [5] * len(temp))), K, method)  # fmt: skip


def _chained(layout: Any, step: Any) -> Case:
    from eaglefuzz.harness.targetkit.runner_v2_verify import chain

    return layout.build(step, chain(step))


NEG = -np.inf
TE28 = "_temperature_kernel"


def _te(logits: list[list[float]], rows: list[int], temp: list[float]) -> Case:
    from eaglefuzz.harness.targets._temperature_kernel.layout import build

    return build(np.array(logits, np.float32), rows, temp)


PINNED += [
    Pinned(
        "scaled_greedy_and_unit_rows",
        _te([[1, -3, 0.5, 7], [1, 2, 3, 4], [5, 6, 7, 8]], [2, 0, 1], [1.0, 0.0, 2.0]),
        """§28.1: row 0 (state 2, T 2) becomes [0.5, -1.5, 0.25, 3.5] (exact halves); row 1 (state 0,
        T 1) and row 2 (state 1, T 0) are not written.""",
        {"logits": (F32, [0.5, -1.5, 0.25, 3.5, U, U, U, U, U, U, U, U])},
    ),
    Pinned(
        "low_temperature",
        _te([[3, -1.5], [7, 9]], [0, 0], [0.25]),
        """§28.1: both rows read state 0 (T 0.25): every logit times 4, exactly: [12, -6], [28, 36].""",
        {"logits": (F32, [12, -6, 28, 36])},
    ),
]

GS29 = "_gumbel_sample_kernel"


def _gs(mode: str) -> Case:
    from eaglefuzz.harness.targets._gumbel_sample_kernel.layout import build

    if mode == "target":
        x = np.zeros((2, 1500), np.float32)
        x[0, [7, 1100, 1101]] = 9.0
        x[1] = 1.0
        return build(x, [1, 0], [5, 6], [11, -3], [0.0, 0.0], "target")
    x = np.array([[1, 3, 3, 2], [0.5, 0.25, 0.5, -1]], np.float32)
    return build(x, [1, -1], [5, 6], [11, 22], [0.7, 0.0], "drafter", cache=np.full((2, 2, 4), -7, np.float32), col=1)


PINNED += [
    Pinned(
        "greedy_rows_two_blocks",
        _gs("target"),
        """§29.1, the target's sampling, both rows greedy (T 0: no noise, exact): row 0's blocks of
        1024 are won by 7 (9.0; the first of the block) and 1100 (9.0 at 1100 and 1101: the
        first); row 1, all ones, by the first lanes 0 and 1024.""",
        {"local_argmax": (I64, [7, 1100, 0, 1024]), "local_max": (F32, [9, 9, 1, 1])},
    ),
    Pinned(
        "drafter_cache_and_padded_row",
        _gs("drafter"),
        """§29.1, the drafter's (cache column 1): row 0 (state 1, T 0: greedy) wins lane 1 (3, the
        first of the two 3s) and copies its raw logits to logits_cache[1, 1]; row 1 (state -1:
        padded, greedy, no cache write) wins lane 0 (0.5, the first of the two).""",
        {"local_argmax": (I64, [1, 0]), "local_max": (F32, [3, 0.5]),
         "logits_cache": (F32, [U] * 12 + [1, 3, 3, 2])},
    ),
]

LS30 = "_compute_local_logits_stats_kernel"


def _ls(draft: bool) -> Case:
    """r0 (state 2, greedy): rows 0-1; r1 (state 0, T 0.5): rows 2-4 (4 the bonus)."""
    from eaglefuzz.harness.targets._compute_local_logits_stats_kernel.layout import build

    tl_ = np.zeros((5, 10), np.float32)
    tl_[0, [2, 5]] = 4.0
    tl_[2] = NEG
    tl_[2, [0, 1]] = [0.0, np.log(3.0)]
    tl_[3] = NEG
    tl_[3, 9] = 1.0
    dl = None
    if draft:
        dl = np.zeros((3, 2, 10), np.float32)
        dl[0, 0, :2] = [1.0, 2.0]
    return build(_step(tl_, [0, 2, 5], [2, 0], [0.5, 1.0, 0.0], ds=[0, 2, 0, 1, 9], K=2, dl=dl))


PINNED += [
    Pinned(
        "greedy_and_random_rows_one_hot",
        _ls(False),
        """§30.1: row 0 (greedy): argmax 2 (4.0 at 2 and 5: the first), max 4; row 2 (random): max
        float32(log 3), sum exp(-log 3) + 1 = 4/3; row 3: max 1, sum 1; the bonus rows 1 and 4
        and the draft statistics (no draft logits) untouched.""",
        {"target_local_argmax": (I64, [2, U, U, U, U]), "target_local_max": (F32, [4, U, np.log(3.0), 1, U]),
         "target_local_sumexp": (F32, [U, U, 4 / 3, 1, U]), "draft_local_max": (F32, [U] * 5),
         "draft_local_sumexp": (F32, [U] * 5)},
    ),
    Pinned(
        "draft_statistics_over_the_temperature",
        _ls(True),
        """§30.1 with draft logits: row 2 (state 0, step 0) reads [1, 2, 0 x 8] / 0.5 = [2, 4, 0 x 8]:
        max 4, sum exp(-2) + 1 + 8 exp(-4); row 3 (step 1) reads zeros: max 0, sum 10; the target's
        as without; the greedy row's draft statistics untouched.""",
        {"target_local_argmax": (I64, [2, U, U, U, U]), "target_local_max": (F32, [4, U, np.log(3.0), 1, U]),
         "target_local_sumexp": (F32, [U, U, 4 / 3, 1, U]), "draft_local_max": (F32, [U, U, 4, 0, U]),
         "draft_local_sumexp": (F32, [U, U, np.exp(-2) + 1 + 8 * np.exp(-4), 10, U])},
    ),
]

CL31 = "_compute_cumulative_log_p_kernel"
L7 = np.float32(np.log(7.0))


def _cl(draft: bool) -> Case:
    """Target rows uniform over tokens 0 and 1 of 4; with draft logits [log 7, 0, 0, 0] (q = 0.7,
    0.1, 0.1, 0.1)."""
    from eaglefuzz.harness.targets._compute_cumulative_log_p_kernel import layout

    if not draft:  # r0 (state 0, T 1): drafts 1, -1, 0; r1 (state 1, greedy): one draft
        tl_ = np.full((6, 4), NEG, np.float32)
        tl_[:4, :2] = 0.0
        tl_[4:] = [[1, 2, 3, 4], [4, 3, 2, 1]]
        return _chained(layout, _step(tl_, [0, 4, 6], [0, 1], [1.0, 0.0], ds=[0, 1, -1, 0, 0, 3], K=3, method="block"))
    tl_ = np.full((3, 4), NEG, np.float32)
    tl_[:, :2] = 0.0
    dl = np.zeros((1, 2, 4), np.float32)
    dl[0, :, 0] = L7
    return _chained(layout, _step(tl_, [0, 3], [0], [1.0], ds=[0, 0, 1], K=2, dl=dl, method="block"))


PINNED += [
    Pinned(
        "one_hot_drafts_and_a_placeholder",
        _cl(False),
        """§31.1, one-hot drafts (lp_d = 0), lp_t = -log 2 for tokens 0 and 1: L = -log 2 after draft
        1, carried over the -1 draft, -2 log 2 after draft 0; the bonus row and the greedy request
        untouched.""",
        {"cumulative_log_p": (F32, [-np.log(2), -np.log(2), -2 * np.log(2), U, U, U])},
    ),
    Pinned(
        "draft_logits_clamped_at_zero",
        _cl(True),
        """§31.1 with draft logits: draft 0 has p 0.5, q 0.7: L = log(5/7); draft 1 has p 0.5, q 0.1:
        L = min(log(5/7) + log 5, 0) = 0; the bonus row untouched.""",
        {"cumulative_log_p": (F32, [np.log(5 / 7), 0.0, U])},
    ),
]

RM32 = "_compute_local_residual_mass_kernel"


def _rm(placeholder: bool) -> Case:
    """One random request (T 1) over targets uniform on tokens 0, 1 of 4 and drafts q = [0.7,
    0.1, 0.1, 0.1] at every step; block verification."""
    from eaglefuzz.harness.targets._compute_local_residual_mass_kernel import layout

    d = 3 if placeholder else 2
    tl_ = np.full((d + 1, 4), NEG, np.float32)
    tl_[:, :2] = 0.0
    dl = np.zeros((1, d, 4), np.float32)
    dl[0, :, 0] = L7
    ds = [0, 0, -1, 1] if placeholder else [0, 0, 1]
    return _chained(layout, _step(tl_, [0, d + 1], [0], [1.0], ds=ds, K=d, dl=dl, method="block"))


PINNED += [
    Pinned(
        "residual_of_the_second_draft",
        _rm(False),
        """§32.1: row 0 (its request's first) and the bonus row 2 write nothing; row 1 (next draft 1)
        with p = exp(§31's log(5/7)) = 5/7: lanes max(5/7 * 0.5 - 0.7, 0) = 0, 5/7 * 0.5 - 0.1,
        max(0 - 0.1, 0) twice: 5/14 - 1/10 = 9/35.""",
        {"local_residual_mass": (F32, [U, 9 / 35, U])},
    ),
    Pinned(
        "placeholder_skipped_and_carried",
        _rm(True),
        """§32.1: row 1's next draft is -1: nothing; row 2 (next draft 1) reads §31's value of row 1,
        log(5/7) carried over the -1: 9/35 as before; rows 0 and 3 nothing.""",
        {"local_residual_mass": (F32, [U, U, 9 / 35, U])},
    ),
]

RJ33 = "_rejection_kernel"


def _rj() -> Case:
    """r0 (state 1, greedy): drafts 3, 5 against argmaxes 3, 4; r1 (state 0, T 1, one-hot
    drafts): draft 2 has probability 1, draft 1 probability 0."""
    from eaglefuzz.harness.targets._rejection_kernel import layout

    tl_ = np.zeros((6, 8), np.float32)
    tl_[0, 3] = tl_[1, 4] = tl_[2, 0] = 1.0
    tl_[3:] = NEG
    tl_[3, 2] = 0.0
    tl_[4, [0, 6]] = [0.0, 1.0]
    tl_[5, 5] = 2.0
    return _chained(layout, _step(tl_, [0, 3, 6], [1, 0], [1.0, 0.0], ds=[0, 3, 5, 7, 2, 1], K=3,
                                  pos=[10, 11, 12, 40, 41, 42], seed=[-5, 77]))


def _rj_greedy() -> Case:
    """Two greedy requests: every draft the argmax (2 drafts), and none (no drafts)."""
    from eaglefuzz.harness.targets._rejection_kernel import layout

    tl_ = np.zeros((4, 5), np.float32)
    tl_[0, 4] = tl_[1, 1] = tl_[2, 2] = tl_[3, 3] = 2.0
    return _chained(layout, _step(tl_, [0, 3, 4], [0, 1], [0.0, 0.0], ds=[0, 4, 1, 0], K=2))


PINNED += [
    Pinned(
        "greedy_correction_and_certain_random_decisions",
        _rj(),
        """§33.1: r0 accepts 3 (the argmax) and rejects 5 (argmax 4): sampled [3, 4], count 1, its
        log-sum-exps 0; r1 accepts 2 (lp_t = 0 > log u for every u < 1) and rejects 1 (lp_t = -inf):
        sampled [2, 1], count 1, lse_t of row 4 = log(1 + e), lse_d 0 (one-hot). Slots 2, 3 untouched.""",
        {"sampled": (I64, [3, 4, U, U, 2, 1, U, U]), "num_sampled": (I32, [1, 1]),
         "target_rejected_logsumexp": (F32, [0, np.log(1 + np.e)]), "draft_rejected_logsumexp": (F32, [0, 0])},
        params={"num_sampled": "rejected_steps_ptr"},
    ),
    Pinned(
        "greedy_all_accepted_and_no_drafts",
        _rj_greedy(),
        """§33.1: r0's drafts 4 and 1 are the argmaxes of rows 0 and 1: both accepted, count 2; r1 has
        no drafts: count 0, nothing sampled; log-sum-exps 0.""",
        {"sampled": (I64, [4, 1, U, U, U, U]), "num_sampled": (I32, [2, 0]),
         "target_rejected_logsumexp": (F32, [0, 0]), "draft_rejected_logsumexp": (F32, [0, 0])},
        params={"num_sampled": "rejected_steps_ptr"},
    ),
]

RS34 = "_resample_kernel"
M32 = 0xFFFFFFFF


def _gumbel32(seed: int, pos: int, offset: int) -> float:
    """The float32 path's Gumbel noise of the preface (docs/CONTRACT.md §28-§35, "Noise"), worked
    from its text in plain Python integers: MurmurHash3_x86_32 of (lo32(seed), hi32(seed),
    lo32(pos), offset) with seed 0, the uniform u32, then -log(-L(u))."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & M32

    h = 0
    for k in (seed & M32, (seed >> 32) & M32, pos & M32, offset & M32):
        k = rotl((k * 0xCC9E2D51) & M32, 15) * 0x1B873593 & M32
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) & M32
    h ^= 16
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & M32
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & M32
    h ^= h >> 16
    u = float(np.float32((h >> 16) * 2.0**-16 + ((h & 0xFFFF) + 0.5) * 2.0**-32))
    if u < 0.25:
        poly = 0.125
        for k in (7, 6, 5, 4, 3, 2):
            poly = float(np.float32(1 / k)) + u * poly
        L = -u * (1 + u * poly)
    else:
        L = np.log(max(1 - u, 2.0**-24))
    return float(-np.log(-L))



def _rs() -> Case:
    """After _rj's verification: r0 (greedy) rejected before its bonus; r1 (random) at its
    rejected draft 1 of row 4, whose residual (one-hot) is the target less token 1: tokens 0 and 6."""
    from eaglefuzz.harness.targets._resample_kernel import layout

    tl_ = np.zeros((6, 8), np.float32)
    tl_[0, 3] = tl_[1, 4] = tl_[2, 0] = 1.0
    tl_[3:] = NEG
    tl_[3, 2] = 0.0
    tl_[4, 6] = 1.0
    tl_[5, 5] = 2.0
    return _chained(layout, _step(tl_, [0, 3, 6], [1, 0], [1.0, 0.0], ds=[0, 3, 5, 7, 2, 1], K=3,
                                  pos=[10, 11, 12, 40, 41, 42], seed=[-5, 77]))


def _rs_greedy_bonus() -> Case:
    """A greedy request whose two drafts are accepted: its bonus row 2 over 1500 tokens."""
    from eaglefuzz.harness.targets._resample_kernel import layout

    tl_ = np.zeros((3, 1500), np.float32)
    tl_[0, 4] = tl_[1, 1] = 2.0
    tl_[2, [30, 1400]] = [5.0, 6.0]
    return _chained(layout, _step(tl_, [0, 3], [0], [0.0], ds=[0, 4, 1], K=2))


PINNED += [
    Pinned(
        "one_finite_residual_lane_and_greedy_skipped",
        _rs(),
        """§34.1: r0 is greedy and not at its bonus: nothing. r1 (k 1, row 4, y = 1, one-hot): z = the
        target less token 1: only token 6 is finite (1.0), so it wins the block whatever the noise:
        winner 6, value 1 + n(u(seed -5, position 41, offset 6)) (the noise worked in _gumbel32).""",
        {"resampled_local_argmax": (I64, [U, 6]), "resampled_local_max": (F32, [U, 1 + _gumbel32(-5, 41, 6)])},
    ),
    Pinned(
        "greedy_bonus_two_blocks",
        _rs_greedy_bonus(),
        """§34.1: the greedy request's bonus (k 2 = d): the plain argmax per block of 1024, exact:
        block 0's 5.0 at 30, block 1's 6.0 at 1400.""",
        {"resampled_local_argmax": (I64, [30, 1400]), "resampled_local_max": (F32, [5, 6])},
    ),
]

IR35 = "_insert_resampled_kernel"


def _ir(arrays: Mapping[str, np.ndarray], nb: int) -> Case:
    return _v2(IR35, arrays, {"resample_num_blocks": nb})


PINNED += [
    Pinned(
        "greatest_block_and_greedy_skipped",
        _ir({"sampled": np.array([[3, 4, -1], [2, 1, -1], [-1, -1, -1]], np.int64), "num_sampled": i32(1, 1, 0),
             "resampled_local_argmax": np.array([[-1, -1, -1], [5, 1030, 2050], [7, 1100, 2048]], np.int64),
             "resampled_local_max": np.array([[NEG, NEG, NEG], [1.5, 4.0, 4.0], [2.0, NEG, 1.0]], np.float32),
             "cu_num_logits": i32(0, 3, 6, 7), "expanded_idx_mapping": i64(1, 1, 1, 0, 0, 0, 2),
             "temperature": f32(1.0, 0.0, 0.8)}, 3),
        """§35.1: r0 (state 1, greedy, k 1 < 2 drafts): count 2, nothing written; r1 (random, k 1):
        blocks 1 and 2 tie at 4.0, the first wins: 1030 at slot 1, count 2; r2 (no drafts, k 0, its
        bonus): block 0 (2.0): 7 at slot 0, count 1.""",
        {"sampled": (I64, [U, U, U, U, 1030, U, 7, U, U]), "num_sampled": (I32, [2, 2, 1])},
    ),
    Pinned(
        "greedy_bonus_inserted",
        _ir({"sampled": np.array([[6, 8]], np.int64), "num_sampled": i32(1),
             "resampled_local_argmax": np.array([[9, 1024]], np.int64),
             "resampled_local_max": np.array([[3.0, 2.5]], np.float32),
             "cu_num_logits": i32(0, 2), "expanded_idx_mapping": i64(0, 0), "temperature": f32(0.0)}, 2),
        """§35.1: a greedy request at its bonus (k 1 = d): the greater block 0 (3.0): token 9 at
        slot 1 (over the 8 there), count 2.""",
        {"sampled": (I64, [U, 9]), "num_sampled": (I32, [2])},
    ),
]
