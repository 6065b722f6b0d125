"""``rejection_greedy_sample_kernel`` on the device (docs/CONTRACT.md §10): steps of up to 1024
requests (a quarter up to 4096), up to 16 drafts each, ``-1`` padding, vocabularies up to
262144, all-greedy (``is_greedy`` None) and mixed batches, synthetic mode in one step in five
(uniforms at their rates in some).
Checked on the host: no probability table, a few thousand elements; the expected writes come
from the torch oracle run on the host (cross-checked against the NumPy and Numba oracles on a
share), only the launch runs on the device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ...generation.strategies import MAX_NUM_SEQS
from ...targetkit.device import DeviceCase, DeviceTarget
from ...targetkit.device_draws import draw_step, greedy_mask, synthetic_rates

MAX_REQUESTS = 1024
AT_RATE = 0.3
"""The share of synthetic steps with some uniforms exactly at their position's rate where that
is a value vLLM's float64 ``torch.rand`` can give (a multiple of ``2**-53`` below 1), as the
record's body draws them: the acceptance test ``u < c`` at its edge (``uniform_at_rate``)."""


class GreedyDevice(DeviceTarget):
    name = "rejection_greedy_sample_kernel"
    launch_names = ()  # a case of this target has no launch fields
    checked_on = "host"
    oracle_name = "torch oracle (oracles/tensor_ops.py), on the host"

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        step = draw_step(rng, max_requests, max_requests != MAX_REQUESTS, tables=False)
        argmax = rng.integers(0, step.V, size=step.N).astype(np.int64)
        match = float(rng.choice([0.0, 0.5, 0.9, 1.0]))
        other = (argmax + 1 + rng.integers(0, max(step.V - 1, 1), size=step.N)) % step.V
        drafts = np.where(rng.random(step.N) < match, argmax, other).astype(np.int32)
        pad = (rng.random(step.N) < 0.05) & (rng.random() < 0.25)
        drafts[pad] = -1
        inputs: dict[str, np.ndarray] = {
            "cu_num_draft_tokens": step.cu,
            "draft_token_ids": drafts,
            "target_argmax": argmax,
            "bonus_token_ids": rng.integers(0, step.V, size=(step.B, 1)).astype(np.int32),
        }
        synthetic = rng.random() < 0.2
        mode = rng.integers(3)  # is_greedy None (all greedy), mixed, a tensor all true
        if mode == 1:
            inputs["is_greedy"] = greedy_mask(rng, step.B)
        elif mode == 2:
            inputs["is_greedy"] = np.ones(step.B, dtype=np.bool_)
        if synthetic or mode == 1:
            inputs["uniform_probs"] = rng.random(step.N)
        if synthetic:
            rates = inputs["synthetic_conditional_rates"] = synthetic_rates(rng, step.L)
            if rng.random() < AT_RATE and step.N:  # u == c: u < c is strict
                c = rates[np.arange(step.N) - np.repeat(step.cu - step.d, step.d)].astype(np.float64)
                at = (rng.random(step.N) < 0.1) & (c < 1) & (c * 2.0**53 == np.floor(c * 2.0**53))  # a torch.rand value
                inputs["uniform_probs"][at] = c[at]
        outputs = {"output_token_ids": (torch.int32, step.B * (step.L + 1))}
        return DeviceCase(inputs, outputs, {"max_spec_len": step.L})

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        a = {n: torch.from_numpy(v) for n, v in dc.inputs.items()}
        writes = tensor_ops.rejection_greedy_sample(
            cu_num_draft_tokens=a["cu_num_draft_tokens"], draft_token_ids=a["draft_token_ids"],
            target_argmax=a["target_argmax"], bonus_token_ids=a["bonus_token_ids"], is_greedy=a.get("is_greedy"),
            max_spec_len=dc.scalars["max_spec_len"], uniform_probs=a.get("uniform_probs"),
            synthetic_conditional_rates=a.get("synthetic_conditional_rates"),
        )
        return {n: (i.numpy(), v.numpy()) for n, (i, v) in writes.items()}

    def oracle_many(self, dcs: list[DeviceCase]) -> list[dict[str, tuple[np.ndarray, np.ndarray]]]:
        """The torch oracle once per ``max_spec_len`` over the concatenation of that width's
        cases outside synthetic mode (each request's writes depend on its own drafts, argmax,
        bonus and greediness alone; ``is_greedy`` None is every request greedy, as an all-true
        mask), split back per case (case ``k``'s rows after the earlier cases' rows); a
        synthetic case (its own rates) alone. Each case gets :meth:`oracle`'s writes on it (the
        same elements and values; the order of a case's writes may differ)."""
        out: list[dict | None] = [None] * len(dcs)
        widths: dict[int, list[int]] = {}
        for k, dc in enumerate(dcs):
            if "synthetic_conditional_rates" in dc.inputs:
                out[k] = self.oracle(dc)
            else:
                widths.setdefault(dc.scalars["max_spec_len"], []).append(k)
        for L, ks in widths.items():
            a = [dcs[k].inputs for k in ks]
            B = np.array([x["cu_num_draft_tokens"].size for x in a], dtype=np.int64)
            N = np.array([int(x["cu_num_draft_tokens"][-1]) if x["cu_num_draft_tokens"].size else 0 for x in a], dtype=np.int64)
            cat = {
                "cu_num_draft_tokens": np.concatenate([x["cu_num_draft_tokens"].astype(np.int64) + o
                                                       for x, o in zip(a, np.cumsum(N) - N, strict=True)]),
                "draft_token_ids": np.concatenate([x["draft_token_ids"] for x in a]),
                "target_argmax": np.concatenate([x["target_argmax"] for x in a]),
                "bonus_token_ids": np.concatenate([x["bonus_token_ids"].reshape(-1) for x in a]),
                "is_greedy": np.concatenate([x["is_greedy"] if "is_greedy" in x else np.ones(b, dtype=np.bool_)
                                             for x, b in zip(a, B, strict=True)]),
            }
            t = {n: torch.from_numpy(v) for n, v in cat.items()}
            index, value = tensor_ops.rejection_greedy_sample(**t, max_spec_len=L)["output_token_ids"]
            index, value = index.numpy(), value.numpy()
            # the writes are two runs, each ascending: the visited drafts, then the bonus slots
            drop = np.flatnonzero(index[1:] < index[:-1])
            runs = [slice(0, int(drop[0]) + 1), slice(int(drop[0]) + 1, index.size)] if drop.size else [slice(0, index.size)]
            start = (np.cumsum(B) - B) * (L + 1)
            bounds = np.append(start, start[-1] + B[-1] * (L + 1))
            cuts = [np.searchsorted(index[r], bounds) + r.start for r in runs]
            for j, k in enumerate(ks):
                pieces = [slice(int(c[j]), int(c[j + 1])) for c in cuts]
                out[k] = {"output_token_ids": (np.concatenate([index[p] for p in pieces]) - start[j],
                                               np.concatenate([value[p] for p in pieces]))}
        return out

    def host_features(self, dc: DeviceCase, writes: dict[str, tuple[np.ndarray, np.ndarray]]) -> frozenset[str]:
        """The record's ``features_of`` of a drawn case (production: ``cu`` non-decreasing from
        0, ``N = cu[-1]`` drafts), from the oracle's ``writes`` instead of a second oracle run
        and without the record's loop over requests: one pass over the draft tokens."""
        a, L = dc.inputs, dc.scalars["max_spec_len"]
        cu = a["cu_num_draft_tokens"].astype(np.int64)
        B = cu.size
        d = cu - np.concatenate([[0], cu[:-1]])
        N = int(cu[-1]) if B else 0
        longest = int(d.max()) if B else 0
        r = np.repeat(np.arange(B), d)
        j = np.arange(N) - (cu - d)[r]
        did = a["draft_token_ids"][:N].astype(np.int64)
        rates = a.get("synthetic_conditional_rates")
        if rates is not None:
            u = a["uniform_probs"].astype(np.float64)
            ok = (u[:N] < rates[j].astype(np.float64)) & (did >= 0)
            at_rate = bool(np.any(u == rates[j].astype(np.float64)))
        else:
            ok = did == a["target_argmax"][:N].astype(np.int64).astype(np.int32)
            at_rate = False
        greedy = a.get("is_greedy")
        processed = np.ones(B, dtype=bool) if greedy is None else greedy.astype(bool)
        first = np.full(B, -1, dtype=np.int64)
        rr = r[~ok]
        lead = np.concatenate([[True], rr[1:] != rr[:-1]]) if rr.size else np.zeros(0, dtype=bool)
        first[rr[lead]] = j[~ok][lead]  # r ascending, j ascending within it: each request's first
        last = np.where(processed, np.where(first < 0, d - 1, first), -1)
        checks = {
            "all_greedy": greedy is None,
            "mixed_batch": greedy is not None and bool(greedy.any()) and not bool(greedy.all()),
            "greedy_tensor_all_true": greedy is not None and bool(greedy.all()),
            "synthetic_mode": rates is not None,
            "no_drafts_row": bool(np.any(processed & (d == 0))),
            "all_accepted": bool(np.any(processed & (first < 0) & (d > 0))),
            "first_rejected": bool(np.any(processed & (first == 0))),
            "later_rejected": bool(np.any(processed & (first > 0))),
            "minus_one_draft": bool(np.any((did == -1) & (j <= last[r]))),
            "wider_rows": L > longest,
            "ragged": B > 0 and int(d.min()) != longest,
            "several_requests": B > 1,
            "many_requests": B > 64,
            "uniform_at_rate": at_rate,
            "beyond_1024_requests": B > MAX_NUM_SEQS,
            "sixteen_drafts": longest >= 16,
            "ids_past_32767": bool(np.any(writes["output_token_ids"][1] > 32767)),
        }
        return frozenset(k for k, v in checks.items() if v)

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        """As vLLM's ``_rejection_greedy_sample`` launches it (the record's launch, without a
        :class:`~...core.case.Case` made per launch)."""
        from ....kernels.launchers import launch_rejection_greedy_sample

        out = views["output_token_ids"]
        launch_rejection_greedy_sample(
            impl, output_token_ids=out.view(-1, dc.scalars["max_spec_len"] + 1),
            cu_num_draft_tokens=views["cu_num_draft_tokens"], draft_token_ids=views["draft_token_ids"],
            target_argmax=views["target_argmax"], bonus_token_ids=views["bonus_token_ids"],
            is_greedy=views.get("is_greedy"), max_spec_len=dc.scalars["max_spec_len"],
            uniform_probs=views.get("uniform_probs"), synthetic_conditional_rates=views.get("synthetic_conditional_rates"),
        )


DEVICE = GreedyDevice()
"""This target's device mode (``--mode device``)."""
