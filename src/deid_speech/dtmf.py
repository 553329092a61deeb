"""Keypad tones (DTMF) in a call: where they are, so that ``redact`` beeps them.

A caller who keys a card number, an account, an NRIC or a PIN on the phone's keypad
leaves a pair of tones per key in the recording. The recogniser writes no words for them
and the detectors see nothing, yet anyone can read the digits back from the audio with a
few lines of code. So every keypad tone is beeped, whatever the system, and its time (never
its key) is listed in the report (``keypad_tones``).

The detector reads the 16 kHz track in 32 ms frames every 10 ms and measures, with a
Hann-windowed DFT at exactly those frequencies, the eight DTMF tones (rows 697, 770, 852,
941 Hz; columns 1209, 1336, 1477, 1633 Hz) and their second harmonics. A frame holds a key
when (the usual rules of DTMF receivers, ITU-T Q.24, made lenient for codecs and noise):

- the strongest row tone and the strongest column tone carry at least :data:`MIN_SHARE`
  of the frame's power (speech spreads its power over many frequencies: this is what keeps
  voices from being read as keys);
- each is :data:`MIN_LEAD_DB` above the other tones of its group;
- the two lie within :data:`MAX_TWIST_DB` of each other, each at least :data:`MIN_DBFS`;
- neither has a second harmonic within :data:`MIN_HARMONIC_DB` of it (voiced speech has).

A key is :data:`MIN_FRAMES` or more frames in a row that hold the same key (about 40 ms of
tone, the shortest ITU-T Q.24 asks a receiver to accept). Within :data:`NEAR_S` of such a
key, keys a voice talks over count too: there the two tones need carry only
:data:`NEAR_SHARE` of the power (speech alone has never passed the full rules, so this
looser rule never starts a number on its own). Its region is the span of those
frames' windows; keys less than :data:`JOIN_S` apart are one region (a number keyed in),
so the short pauses between keys are beeped with them.
"""
from __future__ import annotations

import numpy as np

RATE = 16000
FRAME = 512  # 32 ms: the rows' tones (73 Hz apart at the closest) fall outside each other's main lobe
HOP = 160  # 10 ms
ROWS = (697.0, 770.0, 852.0, 941.0)
COLS = (1209.0, 1336.0, 1477.0, 1633.0)
KEYS = ("123A", "456B", "789C", "*0#D")  # KEYS[row][col]; A-D (1633 Hz) are measured, never keys
MIN_SHARE = 0.6  # of the frame's power in the two tones
MIN_LEAD_DB = 10.0  # over the other tones of the same group
MAX_TWIST_DB = 10.0  # between the row tone and the column tone
MIN_DBFS = -50.0  # each tone's rms level (a sine of amplitude a: 20 log10(a / sqrt 2))
MIN_HARMONIC_DB = 6.0  # a tone's second harmonic stays this far below it (a row tone's
# second harmonic lies 40-60 Hz from a column tone: a stricter rule refuses keys 1.5 % off)
MIN_FRAMES = 3
NEAR_S = 2.0  # around a key found by every rule, ...
NEAR_SHARE = 0.1  # ... a key whose tones carry this much of the power counts too (talked over)
JOIN_S = 0.6
BLOCK_FRAMES = 4096  # frames analysed at a time (about 41 s): memory stays flat in call length

_FREQS = np.array(ROWS + COLS + tuple(2 * f for f in ROWS + COLS))
_WINDOW = np.hanning(FRAME).astype(np.float32)
# a sine of amplitude a at one of these frequencies gives |X| = a / 2 * sum(w): its power a^2 / 2 is
# 2 |X|^2 / sum(w)^2; the frame's power is sum((w x)^2) / sum(w^2)
_BASIS = (np.exp(-2j * np.pi * np.outer(np.arange(FRAME), _FREQS) / RATE) * _WINDOW[:, None]).astype(np.complex64)
_TONE_SCALE = 2.0 / float(_WINDOW.sum()) ** 2
_FRAME_SCALE = 1.0 / float((_WINDOW.astype(np.float64) ** 2).sum())


def frame_keys(x: np.ndarray, min_share: float = MIN_SHARE) -> np.ndarray:
    """The key each 10 ms frame of 16 kHz mono ``x`` holds ("" for none), its two tones
    carrying at least ``min_share`` of its power: frame ``i`` covers samples
    ``[i * HOP, i * HOP + FRAME)``."""
    keys, share = _analysed(x)
    return np.where(share >= min_share, keys, "")


def _analysed(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per frame: the key it holds by every rule but the share of power (or ""), and the
    share of its power that key's two tones carry."""
    x = np.asarray(x, dtype=np.float32)
    n = 0 if len(x) < FRAME else 1 + (len(x) - FRAME) // HOP
    keys, share = np.full(n, "", dtype="<U1"), np.zeros(n)
    for i in range(0, n, BLOCK_FRAMES):
        m = min(BLOCK_FRAMES, n - i)
        frames = np.lib.stride_tricks.sliding_window_view(x[i * HOP: (i + m - 1) * HOP + FRAME], FRAME)[::HOP]
        keys[i:i + m], share[i:i + m] = _keys(frames)
    return keys, share


def _keys(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    total = ((frames * _WINDOW) ** 2).sum(axis=1, dtype=np.float64) * _FRAME_SCALE
    power = (np.abs(frames @ _BASIS) ** 2).astype(np.float64) * _TONE_SCALE  # (frames, 16): 8 tones, 8 harmonics
    rows, cols, harmonics = power[:, :4], power[:, 4:8], power[:, 8:]
    r, c = rows.argmax(axis=1), cols.argmax(axis=1)
    idx = np.arange(len(frames))
    pr, pc = rows[idx, r], cols[idx, c]
    tiny = 1e-20
    lead_r = pr / (np.sort(rows, axis=1)[:, -2] + tiny)
    lead_c = pc / (np.sort(cols, axis=1)[:, -2] + tiny)
    lead = 10 ** (MIN_LEAD_DB / 10)
    twist = 10 ** (MAX_TWIST_DB / 10)
    floor = 10 ** (MIN_DBFS / 10)  # a sine's power a^2 / 2 is its rms squared
    harm = 10 ** (-MIN_HARMONIC_DB / 10)
    ok = ((lead_r >= lead) & (lead_c >= lead)
          & (pr <= twist * pc) & (pc <= twist * pr) & (np.minimum(pr, pc) >= floor)
          & (harmonics[idx, r] <= harm * pr) & (harmonics[idx, 4 + c] <= harm * pc))
    table = np.array([list(k) for k in KEYS])
    keys = np.where(ok & (c < 3), table[r, c], "")  # no phone has the fourth column's keys (A-D)
    return keys, (pr + pc) / np.maximum(total, tiny)


def _runs(keys: np.ndarray) -> list[tuple[int, int, str]]:
    """``(first frame, last frame + 1, key)`` of each run of at least :data:`MIN_FRAMES` frames
    that hold the same key."""
    runs, i, n = [], 0, len(keys)
    while i < n:
        j = i
        while j < n and keys[j] == keys[i]:
            j += 1
        if keys[i] and j - i >= MIN_FRAMES:
            runs.append((i, j, str(keys[i])))
        i = j
    return runs


def key_runs(x: np.ndarray) -> list[tuple[float, float, str]]:
    """``(start, end, key)`` of each key pressed in 16 kHz mono ``x``: runs of at least
    :data:`MIN_FRAMES` frames holding the same key, from the first window's start to the
    last one's end. Within :data:`NEAR_S` of such a key, a key under a voice counts too: its
    tones need carry only :data:`NEAR_SHARE` of the power (a caller who talks while keying)."""
    keys, share = _analysed(x)
    sure = _runs(np.where(share >= MIN_SHARE, keys, ""))
    near = int(NEAR_S * RATE / HOP)
    found = list(sure)
    for i, j, k in _runs(np.where(share >= NEAR_SHARE, keys, "")):
        if any(i < b + near and j > a - near for a, b, _ in sure) and not any(i < b and j > a for a, b, _ in found):
            found.append((i, j, k))
    return [(i * HOP / RATE, ((j - 1) * HOP + FRAME) / RATE, k) for i, j, k in sorted(found)]


def keypad_tones(x: np.ndarray) -> list[tuple[float, float]]:
    """The regions of 16 kHz mono ``x`` that hold keypad tones, keys less than
    :data:`JOIN_S` apart joined: what ``redact`` beeps (no key is named)."""
    out: list[list[float]] = []
    for a, b, _ in key_runs(x):
        if out and a - out[-1][1] < JOIN_S:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def key_tone(key: str, seconds: float, sr: int = RATE, dbfs: float = -20.0, twist_db: float = 0.0,
             detune: float = 0.0) -> np.ndarray:
    """The tone pair of keypad key ``key`` ("0"-"9", "*", "#", "A"-"D"): ``seconds`` long at
    ``sr``, each tone at ``dbfs`` rms, the column tone ``twist_db`` louder than the row tone,
    both frequencies off by the fraction ``detune`` (test signals and benchmarks)."""
    row = next((i for i, keys in enumerate(KEYS) if key in keys), None)
    if row is None or len(key) != 1:
        raise ValueError(f"no keypad key {key!r}")
    col = KEYS[row].index(key)
    t = np.arange(int(round(seconds * sr))) / sr
    a = np.sqrt(2) * 10 ** (dbfs / 20)
    low = np.sin(2 * np.pi * ROWS[row] * (1 + detune) * t)
    high = 10 ** (twist_db / 20) * np.sin(2 * np.pi * COLS[col] * (1 + detune) * t)
    return (a * (low + high)).astype(np.float32)
