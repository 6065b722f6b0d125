"""What a caller of ``rejection_greedy_sample_kernel`` relies on (docs/CONTRACT.md §10): the
properties ``eaglefuzz audit`` checks on one implementation's outputs (:mod:`...checking.audit`).

``RejectionSampler.parse_output`` reads a row as its ids up to the first ``-1``
(``PLACEHOLDER_TOKEN_ID``): a processed row must be a prefix of accepted drafts, then one id,
then nothing written; no written id may be ``-1``; an unprocessed row is not written
(:mod:`...targetkit.output_rows`; processed here: the greedy requests)."""

from __future__ import annotations

from ...core.case import Case
from ...targetkit import output_rows
from ...targetkit.properties import Audit, Observation, Property
from .layout import processed


def row_is_prefix(case: Case, o: Observation) -> str | None:
    return output_rows.row_is_prefix(case, o, processed(case))


PROPERTIES: tuple[Property, ...] = (
    Property("row_is_accepted_prefix", "a processed row is its accepted drafts, then one id, then nothing written; "
             "an unprocessed row is not written", row_is_prefix),
    Property("no_placeholder_written", "no written slot holds -1 (PLACEHOLDER_TOKEN_ID ends a row)",
             output_rows.no_placeholder_written),
)
"""The properties, in the order the audit reports them."""


AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
