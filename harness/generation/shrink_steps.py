"""Pure steps of shrinking, shared by the targets' shrink moves and the shrinking engine.

:func:`keep_lists` orders request drops as delta debugging does; :func:`shorter` gives the
lengths a request is cut to, biggest cut first. Neither knows a case or a target.
"""

from __future__ import annotations

from collections.abc import Iterator


def keep_lists(n: int) -> Iterator[list[int]]:
    """Which of ``n`` requests to keep, in delta-debugging order, for a plain candidate list.

    Drop each half; then, per granularity (quarters, eighths, ... single requests), keep each
    chunk alone, then drop each chunk. No list is empty or keeps all ``n``; none repeats.
    """
    if n < 2:
        return
    seen: set[tuple[int, ...]] = set()
    k = 2
    while True:
        size = -(-n // k)
        chunks = [list(range(i, min(i + size, n))) for i in range(0, n, size)]
        candidates = ([] if k == 2 else chunks) + [
            [i for i in range(n) if not c[0] <= i <= c[-1]] for c in chunks
        ]
        for keep in candidates:
            key = tuple(keep)
            if 0 < len(keep) < n and key not in seen:
                seen.add(key)
                yield keep
        if size == 1:
            return
        k *= 2


def shorter(n: int) -> list[int]:
    """Shorter lengths for a request of ``n`` tokens, the biggest cut first: 1, n/2, 3n/4,
    7n/8, ..., n - 1 (a length that must stay long converges in a logarithmic number of steps)."""
    out: list[int] = []
    for m in [1, n // 2] + [n - n // (1 << k) for k in range(2, 64) if n // (1 << k) >= 1] + [n - 1]:
        if 1 <= m < n and m not in out:
            out.append(m)
    return out
