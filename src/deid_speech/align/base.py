"""The aligner protocol: known text + 16 kHz mono audio -> a Transcript of that text with word times.

Three aligners share it (a registry by name, like the detectors):

* ``pocketsphinx`` (default, :mod:`deid_speech.align.sphinx`): forced alignment with the
  CMU en-us model shipped on PyPI;
* ``vosk`` (:mod:`deid_speech.align.vosk`): the paper's aligner, Kaldi recognition with
  word times from any user-supplied model folder;
* ``whisper`` (:mod:`deid_speech.align.whisper`): Whisper word timestamps.

Recognisers (Vosk, Whisper) return *their* words; :func:`project_words` carries those
times onto the reference words through a word-level edit alignment, so every aligner
returns exactly the reference text's words, in order, each with a time.
"""
from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from deid_speech.types import Transcript

SAMPLE_RATE = 16000
_MODULES = {"pocketsphinx": "sphinx", "vosk": "vosk", "whisper": "whisper"}
_NORM = re.compile(r"[^\w']+")


class Aligner(Protocol):
    name: str

    def align(self, audio: np.ndarray, text: str) -> Transcript:
        """Word times for ``text`` spoken in ``audio`` (16 kHz mono float32)."""


ALIGNERS: dict[str, Callable[..., Aligner]] = {}


def register(name: str):
    def wrap(factory):
        ALIGNERS[name] = factory
        return factory
    return wrap


def get_aligner(name: str, **kwargs) -> Aligner:
    """Build the aligner registered as ``name`` (pocketsphinx, vosk, whisper)."""
    if name not in ALIGNERS and name in _MODULES:
        importlib.import_module(f"deid_speech.align.{_MODULES[name]}")
    if name not in ALIGNERS:
        raise KeyError(f"unknown aligner {name!r}; known: {', '.join(sorted(_MODULES))}")
    return ALIGNERS[name](**kwargs)


def norm_word(w: str) -> str:
    """Lower case, punctuation dropped (apostrophes kept): the form words are compared in."""
    return _NORM.sub("", w.lower())


def project_words(text: str, hyp: Sequence[tuple[str, float, float]],
                  duration: float | None = None) -> Transcript:
    """The words of ``text`` with times taken from recognised words ``hyp``.

    Reference and hypothesis words are matched by a longest-common-subsequence edit
    alignment on normalised forms. A matched reference word takes its hypothesis word's
    times; a run of unmatched reference words shares the time between its matched
    neighbours (the substituted hypothesis words there, when there are some),
    split in proportion to word length. ``duration`` bounds a trailing run.
    """
    ref = text.split()
    if not ref:
        return Transcript.from_words([])
    hyp = [(w, float(s), float(e)) for w, s, e in hyp if norm_word(w)]
    end_all = duration if duration is not None else (hyp[-1][2] if hyp else 0.0)
    times: list[tuple[float, float] | None] = [None] * len(ref)
    sm = difflib.SequenceMatcher(a=[norm_word(w) for w in ref], b=[norm_word(h[0]) for h in hyp],
                                 autojunk=False)
    for a, b, n in sm.get_matching_blocks():
        for k in range(n):
            times[a + k] = hyp[b + k][1:]
    i = 0
    while i < len(ref):
        if times[i] is not None:
            i += 1
            continue
        j = i
        while j < len(ref) and times[j] is None:
            j += 1
        lo = times[i - 1][1] if i else 0.0
        hi = times[j][0] if j < len(ref) else max(end_all, lo)
        # recognised words that fall in the gap say where the speech really is
        inside = [h for h in hyp if h[1] >= lo - 1e-6 and h[2] <= hi + 1e-6]
        if inside:
            lo, hi = inside[0][1], inside[-1][2]
        weights = np.array([len(w) + 1 for w in ref[i:j]], dtype=float)
        edges = lo + (hi - lo) * np.concatenate([[0.0], np.cumsum(weights) / weights.sum()])
        for k in range(i, j):
            times[k] = (float(edges[k - i]), float(edges[k - i + 1]))
        i = j
    return Transcript.from_words([(w, *t) for w, t in zip(ref, times)])
