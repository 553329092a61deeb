"""bench/speed.py's MemorySampler: the largest memory a process tree holds at one moment,
resident sets summed and proportional set sizes summed (a page two processes share counts
once in the second sum, twice in the first)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("speed", ROOT / "bench" / "speed.py")
speed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(speed)

pytestmark = pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="Linux /proc only")

# a child that maps FILE shared, touches every page, starts a grandchild that does the same, and
# holds both for a while: 64 MiB of the same file pages resident in two processes
SHARER = r"""
import mmap, subprocess, sys, time
with open(sys.argv[1], "rb") as fh:
    m = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
total = sum(m[i] for i in range(0, len(m), 4096))
if len(sys.argv) > 2:
    kid = subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[1]])
    time.sleep(1.5)
    kid.wait()
else:
    time.sleep(1.2)
"""


def test_shared_pages_count_once_in_the_pss_sum_and_twice_in_the_rss_sum(tmp_path: Path) -> None:
    data = tmp_path / "shared.bin"
    data.write_bytes(b"\1" * (64 << 20))
    proc = subprocess.Popen([sys.executable, "-c", SHARER, str(data), SHARER])
    sampler = speed.MemorySampler(proc.pid, every=0.05)
    proc.wait()
    got = sampler.stop()
    assert got["largest_rss_sum_mb"] >= 2 * 64  # both processes hold the 64 MiB of file pages
    assert got["largest_pss_sum_mb"] >= 64  # ... which the machine holds once
    assert got["largest_rss_sum_mb"] - got["largest_pss_sum_mb"] >= 50


def test_a_process_that_is_gone_at_once_gives_nothing_not_zero() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    sampler = speed.MemorySampler(proc.pid, every=0.05)
    got = sampler.stop()
    # a finished (reaped) process has no /proc entry: no sample, rather than one of 0 MB, which
    # would read as "no memory"
    assert got == {}
