"""Shared factories for tests (no models needed); importable as `factories` (pythonpath)."""
from __future__ import annotations

import numpy as np

from deid_speech.types import Transcript


def make_transcript(text: str, word_dur: float = 0.4, gap: float = 0.1, t0: float = 0.0) -> Transcript:
    """A Transcript whose words are spaced evenly in time (word i at t0 + i*(dur+gap))."""
    step = word_dur + gap
    return Transcript.from_words([(w, t0 + i * step, t0 + i * step + word_dur)
                                  for i, w in enumerate(text.split())])


def tone(seconds: float, sr: int = 16000, hz: float = 220.0, amp: float = 0.3, channels: int = 1) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    x = (amp * np.sin(2 * np.pi * hz * t)).astype(np.float32)
    return np.repeat(x[:, None], channels, axis=1)
