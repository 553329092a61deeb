"""Give the memory freed by a decoding back to the system (glibc), so that a long call's
peak is not the sum of every stage's leftovers.

glibc serves allocations from its heap unless they are larger than its *mmap threshold*,
which it raises after a large block is freed (up to 32 MiB). A decoder allocates and frees
buffers of a few MiB for every window (features, beams, the verifier's 300 s chunks), so
most of them come from the heap, and the pages of the pieces freed between blocks still in
use stay resident: the verifier's decoding of 10 minutes of audio ended 160 MB above where
it started, and 130 MB less with :func:`give_back` after each decoding (docs/results.md §0y).

:func:`give_back` (``malloc_trim(0)``) returns every free page of every arena. It is called
after each decoding, where it costs nothing measurable; a fixed low mmap threshold, which
would return each buffer as it is freed, made the default 7-50 % slower on the 108 s call
(every buffer page-faulted in anew), so the threshold is left to glibc. Elsewhere than
glibc it does nothing. The computation is unchanged: where a buffer lives does not change a
transcript (the benchmark's 108 s and 21-minute calls gave byte-identical outputs, §0y).
"""
from __future__ import annotations

_TRIM = None  # glibc's malloc_trim, once found; False where there is none


def give_back() -> bool:
    """Return the heap's free pages to the system; True where that was done (glibc)."""
    global _TRIM
    if _TRIM is None:
        _TRIM = _find_trim()
    if not _TRIM:
        return False
    _TRIM(0)
    return True


def _find_trim():
    import ctypes
    import os

    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return False
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, ValueError, AttributeError):
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim
