"""deid_speech.heap: the memory a decoding freed goes back to the system."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from deid_speech import heap

GLIBC = (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")

# A decoder's pattern: buffers of a few MiB taken from the heap (glibc's mmap threshold above
# them, as glibc raises it after a large buffer is freed), then every other one freed while its
# neighbours stay, so the freed ones are holes glibc keeps resident. Printed: the resident MiB
# beyond the buffers kept, before and after give_back. (Holes made by small blocks placed between
# the buffers were not reliable: on a fresh checkout's first run, compiling the imports had left
# free blocks earlier in the heap, the small blocks went there, and the buffers freed into the top.)
PATTERN = """
import numpy as np
from deid_speech.heap import give_back
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
import ctypes
assert ctypes.CDLL(None).mallopt(-3, 16 << 20) == 1  # M_MMAP_THRESHOLD (glibc takes up to 32 MiB)
before = rss()
held = [np.ones(2 << 20, np.uint8) for _ in range(100)]
kept = held[1::2]  # 100 MiB in use
del held  # the other 100 MiB freed, each between two kept buffers
print(rss() - before - 100, give_back(), rss() - before - 100)
"""


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_freed_buffers_are_given_back() -> None:
    out = subprocess.run([sys.executable, "-c", PATTERN], capture_output=True, text=True, check=True).stdout.split()
    left, done, after = int(out[0]), out[1], int(out[2])
    assert left >= 75  # glibc keeps the 100 MiB of holes resident
    assert done == "True" and after <= 20


def test_a_decoding_gives_its_memory_back(monkeypatch) -> None:
    """Every decoding ends with give_back, also one that fails."""
    from deid_speech.asr import whisper

    calls = []
    monkeypatch.setattr(heap, "give_back", lambda: calls.append(1) or True)
    from deid_speech import models as shipped
    from deid_speech.audio import load

    t = whisper.Transcriber(whisper.AsrOptions(model="tiny.en"))
    t.transcribe(load(shipped.path("example")).mono16k()[: 16000 * 6])
    n = len(calls)
    assert n >= 1
    monkeypatch.setattr(t, "_decode_unlocked", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        t._decode(np.zeros(16000, np.float32))
    assert len(calls) == n + 1
