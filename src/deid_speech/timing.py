"""Where the time goes: code marks its stages (``with timing.stage("decoding"):``) and a
caller that wants the split (``bench/speed.py``) collects them (``with timing.collect() as
t:``). Stages nest; each second is counted once, in the innermost stage running then
(unless an outer one absorbs them).
Without a collector a stage costs a context-variable lookup."""
from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar

STAGES = ("reading", "loading", "vad", "decoding", "detectors", "verification", "alignment", "writing")


class Timings:
    """Seconds per stage (exclusive of the stages nested in it)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[list] = []  # [name, start of its current stretch, absorbs nested stages]

    def absorbing(self) -> bool:
        return bool(self._stack) and self._stack[-1][2]

    def enter(self, name: str, absorb: bool = False) -> None:
        now = time.perf_counter()
        if self._stack:
            outer = self._stack[-1]
            self.seconds[outer[0]] = self.seconds.get(outer[0], 0.0) + now - outer[1]
        self._stack.append([name, now, absorb])

    def leave(self) -> None:
        now = time.perf_counter()
        name, start, _ = self._stack.pop()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - start
        if self._stack:
            self._stack[-1][1] = now


_current: ContextVar[Timings | None] = ContextVar("deid_speech_timings", default=None)


@contextmanager
def stage(name: str, absorb: bool = False):
    """Time the block as ``name``; ``absorb``: stages nested in it count as this one
    (the verification pass's own decoding is verification)."""
    t = _current.get()
    if t is None or t.absorbing():
        yield
        return
    t.enter(name, absorb)
    try:
        yield
    finally:
        t.leave()


@contextmanager
def collect():
    """Collect the stages run inside the block (this thread) into a :class:`Timings`."""
    t = Timings()
    token = _current.set(t)
    try:
        yield t
    finally:
        _current.reset(token)
