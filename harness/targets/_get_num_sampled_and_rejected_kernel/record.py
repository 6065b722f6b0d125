"""``_get_num_sampled_and_rejected_kernel``: docs/CONTRACT.md §18.

After sampling, Model Runner V2 counts per batch row the tokens it sampled and the logits it
rejected: a row still prefilling in chunks samples and rejects nothing (its count is zeroed in
place); any other row rejects the logits it did not keep. Launched as vLLM's
``get_num_sampled_and_rejected`` launches it (grid ``(B,)``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    I32,
    I64,
    INPUT_BATCH,
    V2Target,
    check_batch,
    check_cu,
    need,
    only,
    v2_oracles,
)
from . import edges
from .layout import NAME


class GetNumSampledAndRejected(V2Target):
    state_index = ("idx_mapping",)
    per_state = ("prefill_len",)
    name = NAME
    runner = "V2"
    module = INPUT_BATCH
    function = NAME
    section = 18
    launcher = "launch_get_num_sampled_and_rejected"
    parameters = ("num_sampled_ptr", "num_rejected_ptr", "seq_lens_ptr", "cu_num_logits_ptr", "idx_mapping_ptr",
                  "prefill_len_ptr")
    inputs = {"num_sampled": I32, "seq_lens": I32, "cu_num_logits": I32, "idx_mapping": I64, "prefill_len": I32}
    inout = frozenset({"num_sampled"})
    scalar_names = ("num_reqs",)
    per_row = {"num_sampled": 0, "seq_lens": 0, "cu_num_logits": 1, "idx_mapping": 0}
    features = {
        "chunked_row": "a row still prefilling in chunks (seq_len < prefill_len): both counts 0",
        "prompt_end_row": "a row at its prompt's end (seq_len = prefill_len): not chunked, it samples",
        "decode_row": "a row past its prompt",
        "all_accepted": "a row with drafts that kept every logit (nothing rejected)",
        "some_rejected": "a row that rejected logits",
        "sampler_batch": "the plain sampler's batch: one logit per row (cu_num_logits = arange)",
        "permuted_state_rows": "a batch row whose state row is not its own index",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "seq_lens_past_32767": "a sequence past 32767 tokens (max_model_len of 32k and more)",
        "prompts_past_32767": "a row still prefilling a prompt of more than 32767 tokens",
    }
    extremes = ("seq_lens_past_32767", "prompts_past_32767")
    oracle_functions = v2_oracles("get_num_sampled_and_rejected")

    def production_rules(self, case: Case) -> None:
        """§18.2: ``1 <= num_sampled <= nl_b`` (the rejection sampler's counts), sequences of at
        least the row's logits, prompt lengths ``>= 1``."""
        a = case.arrays
        only(a, set(self.inputs))
        prefill = need(a, "prefill_len", I32, ndim=1)
        batch = check_batch(case, prefill.shape[0], qsl=False)
        nl = check_cu(case, batch.B, 1, 1 << 10)
        ns = need(a, "num_sampled", I32, (batch.B,)).astype(np.int64)
        seq = need(a, "seq_lens", I32, (batch.B,)).astype(np.int64)
        if np.any(ns < 1) or np.any(ns > nl):
            raise ContractViolation("arrays.num_sampled", "must be in [1, the row's logits] (rejection_sample)")
        if np.any(seq < nl):
            raise ContractViolation("arrays.seq_lens", "must be at least the row's logits (its query holds them)")
        if np.any(prefill < 1):
            raise ContractViolation("arrays.prefill_len", "must be >= 1 (a prompt of one token or more)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        s = a["idx_mapping"]
        nl = np.diff(a["cu_num_logits"].astype(np.int64))
        ns = a["num_sampled"].astype(np.int64)
        seq = a["seq_lens"].astype(np.int64)
        L = a["prefill_len"].astype(np.int64)[s]
        chunked = seq < L
        B = len(s)
        checks = {
            "chunked_row": bool(chunked.any()),
            "prompt_end_row": bool(np.any(seq == L)),
            "decode_row": bool(np.any(seq > L)),
            "all_accepted": bool(np.any(~chunked & (nl > 1) & (ns == nl))),
            "some_rejected": bool(np.any(~chunked & (ns < nl))),
            "sampler_batch": bool(np.all(nl == 1)),
            "permuted_state_rows": bool(np.any(s != np.arange(B))),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "seq_lens_past_32767": bool(np.any(seq > INT16_MAX)),
            "prompts_past_32767": bool(np.any(chunked & (L > INT16_MAX))),
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {"num_rejected": (I32, (int(case.scalars["num_reqs"]),))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        return index, "the row's count"

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """Plain counts: one logit, one token per row; the state rows no request names dropped."""
        B = int(case.scalars["num_reqs"])
        if np.any(case.arrays["num_sampled"] != 1) or case.arrays["cu_num_logits"][-1] != B:
            yield case.replace(arrays={"num_sampled": np.ones(B, np.int32),
                                       "cu_num_logits": np.arange(B + 1, dtype=np.int32)})
        yield from super().shrink_moves(case)


TARGET = GetNumSampledAndRejected()
