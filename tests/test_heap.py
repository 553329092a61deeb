"""deid_speech.heap: the memory a decoding freed goes back to the system."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from deid_speech import heap

GLIBC = (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")

# A decoder's pattern: with glibc's mmap threshold above them (as glibc raises it after a large
# buffer is freed), buffers of a few MiB are allocated, each followed by a small block that
# stays, and then freed. Printed: the resident MiB they leave behind, before and after give_back.
PATTERN = """
import numpy as np
from deid_speech.heap import give_back
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
import ctypes
ctypes.CDLL(None).mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD: as glibc raises it after a large free
before = rss()
held, keep = [], []
for _ in range(50):
    held.append(np.ones(4 << 20, np.uint8))
    keep.append(bytes(2000))
del held
left = rss() - before
print(left, give_back(), rss() - before)
"""


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_freed_buffers_are_given_back() -> None:
    out = subprocess.run([sys.executable, "-c", PATTERN], capture_output=True, text=True, check=True).stdout.split()
    left, done, after = int(out[0]), out[1], int(out[2])
    assert left >= 150  # glibc keeps the 200 MiB of holes resident
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
