"""Whisper word timestamps as an aligner: transcribe, then carry the times onto the text.

Whisper writes digits and names its own way ("S1234567D", "Syafiq" for "sya fiq"), so its
words are matched to the reference words by :func:`~deid_speech.align.base.project_words`;
reference words Whisper did not write share the time of what it wrote in their place.
"""
from __future__ import annotations

import numpy as np

from deid_speech.align.base import SAMPLE_RATE, project_words, register
from deid_speech.types import Transcript


class WhisperAligner:
    name = "whisper"

    def __init__(self, model: str = "tiny.en", transcriber=None) -> None:
        """``transcriber``: anything with ``transcribe(audio16k) -> Transcript`` (tests pass a
        fake); by default the project's windowed faster-whisper Transcriber for ``model``."""
        if transcriber is None:
            from deid_speech.asr.whisper import AsrOptions, Transcriber

            transcriber = Transcriber(AsrOptions(model=model))
        self.transcriber = transcriber

    def align(self, audio: np.ndarray, text: str) -> Transcript:
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        hyp = self.transcriber.transcribe(audio)
        return project_words(text, [(w.text, w.start, w.end) for w in hyp.words],
                             duration=len(audio) / SAMPLE_RATE)


register("whisper")(WhisperAligner)
