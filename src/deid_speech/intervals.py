"""Time intervals in seconds: union, intersection, coverage and difference. The redaction (what a
second opinion must still check) and the leak metric (what stayed audible) both use them."""
from __future__ import annotations

from collections.abc import Sequence

Interval = tuple[float, float]


def union(intervals: Sequence[Interval]) -> list[Interval]:
    """Sorted, merged intervals (touching ones join)."""
    out: list[list[float]] = []
    for a, b in sorted((float(a), float(b)) for a, b in intervals if b > a):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def intersect(intervals: Sequence[Interval], other: Sequence[Interval]) -> list[Interval]:
    """The parts of ``intervals`` inside ``other``, sorted; one pass over each :func:`union`."""
    a_s, b_s = union(intervals), union(other)
    out: list[Interval] = []
    i = j = 0
    while i < len(a_s) and j < len(b_s):
        (a, b), (c, d) = a_s[i], b_s[j]
        if max(a, c) < min(b, d):
            out.append((max(a, c), min(b, d)))
        if b < d:
            i += 1
        else:
            j += 1
    return out


def covered(a: float, b: float, regions: Sequence[Interval]) -> float:
    """Seconds of [a, b) inside ``regions`` (which must be a :func:`union`)."""
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in regions)


def subtract(intervals: Sequence[Interval], minus: Sequence[Interval]) -> list[Interval]:
    """``intervals`` with every part inside ``minus`` cut out."""
    out: list[Interval] = []
    cuts = union(minus)
    for a, b in union(intervals):
        pos = a
        for x, y in cuts:
            if y <= pos or x >= b:
                continue
            if x > pos:
                out.append((pos, x))
            pos = max(pos, y)
        if pos < b:
            out.append((pos, b))
    return out
