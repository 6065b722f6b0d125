"""Torch oracles of Model Runner V2's verification (docs/CONTRACT.md §28-§35), written from the
contract, to run on the GPU beside the kernel where a case is too large for the host: the
production-scale cases of the device campaign's scale lane (a table past ``2**31`` elements,
8 GiB and more), checked a block of rows at a time so that no whole table is copied.

Each oracle takes a block of rows as the contract reads them and returns, for that block, the
expected values and each element's bound (float64; ``0`` where the contract fixes the element
bit for bit): the caller compares ``abs(actual - expected) <= bound`` on the device, exactly
where the bound is 0.
"""

from __future__ import annotations

import torch

__all__ = ["temperature_rows"]


def temperature_rows(logits: torch.Tensor, temperature: torch.Tensor, vocab_size: int | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """§28.1 for a block of rows: ``logits`` float32 ``[rows, W]`` as given (before the kernel),
    ``temperature`` float32 ``[rows]`` (each row's ``T_s``, gathered through
    ``expanded_idx_mapping``). A row of ``T = 0`` or ``T = 1`` is untouched; another row's
    columns ``v < V`` become ``float32(logits[t, v]) / T``, the correctly rounded float32
    quotient, within 2 ulp of it (a compiled division, §28.1); columns at and past ``V`` stay.
    Returns the expected rows and each element's bound (float64)."""
    W = logits.shape[1]
    V = W if vocab_size is None else min(int(vocab_size), W)
    t = temperature.to(torch.float32)[:, None]
    divided = ((t != 0) & (t != 1)).expand(-1, W).clone()
    divided[:, V:] = False
    q = logits.to(torch.float32) / torch.where(divided, t, torch.ones_like(t))  # IEEE: correctly rounded
    expected = torch.where(divided, q, logits)
    up = torch.nextafter(q, torch.full_like(q, float("inf")))
    ulp = (up - q).abs().to(torch.float64)  # one float32 step at the quotient
    ulp = torch.where(torch.isfinite(ulp), ulp, torch.zeros_like(ulp))
    bound = torch.where(divided, 2 * ulp, torch.zeros_like(ulp))
    return expected, bound
