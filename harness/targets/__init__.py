"""The registry: one entry per kernel or function under test, keyed by its vLLM name.

Adding a target is one small module here that defines ``TARGET`` and one line below.
"""

from __future__ import annotations

from ..targetkit.base import ContractViolation, Outcome, Target
from .batch_change import TARGET as _batch_change
from .copy_and_expand import TARGET as _copy_and_expand
from .copy_and_expand_dflash import TARGET as _copy_and_expand_dflash
from .draft_config import TARGET as _draft_config
from .eagle_step import TARGET as _eagle_step
from .extend_all_queries import TARGET as _extend_all_queries
from .new_slot_mapping import TARGET as _new_slot_mapping
from .prepare_inputs_padded import TARGET as _prepare_inputs_padded
from .prepare_next_token_padded import TARGET as _prepare_next_token_padded

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        _copy_and_expand,
        _prepare_inputs_padded,
        _prepare_next_token_padded,
        _extend_all_queries,
        _draft_config,
        _copy_and_expand_dflash,
        _eagle_step,
        _new_slot_mapping,
        _batch_change,
    )
}

__all__ = ["TARGETS", "ContractViolation", "Outcome", "Target"]
