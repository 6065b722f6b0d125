"""vLLM's block tables, as the targets that look slots up in them (docs/CONTRACT.md §6, §7)
draw them: the block sizes, the table's width, the largest ids whose slots fit in int32."""

from __future__ import annotations

from math import gcd

from ..generation.strategies import INT32_MAX, cdiv

MAX_POSITION = 1 << 40
MAX_BLOCK_SIZE = 1024
MAX_TABLE = 1 << 15
"""Most block-table elements a generated case holds (rows x width)."""
BLOCK_SIZES = (16, 1, 2, 4, 8, 32, 64, 128, 256, 3, 48, 528, 1024)
"""vLLM's powers of two (its warm-up covers 1 .. 256), a hybrid model's multiple of 16 (528),
and others the contract defines just as well."""


def max_block_id(block_size: int) -> int:
    """Largest block id whose slots all fit in int32 (``id * bs + bs - 1 <= 2**31 - 1``)."""
    return (INT32_MAX - block_size + 1) // block_size


def table_width(max_model_len: int, block_size: int) -> int:
    """vLLM's block-table width: ``cdiv(max_model_len, block_size)`` rounded up to a multiple
    of ``128 / gcd(128, block_size)`` blocks (``get_block_table_width``)."""
    align = 128 // gcd(128, block_size)
    return cdiv(cdiv(max_model_len, block_size), align) * align
