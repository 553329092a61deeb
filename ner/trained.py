"""A spaCy NER trained on our nine labels (``deid-speech train ner``) as a cascade detector.

It reads the Whisper transcript as written and reports every entity whose label is one
of ours, at the trained model's confidence ``score`` (spaCy's NER gives no per-entity
probability, so one score serves all; the merge step still prefers the pattern
detectors' validated hits, which score higher).
"""
from __future__ import annotations

from pathlib import Path

from deid_speech.errors import DeidError
from deid_speech.ner.base import register, span_from_chars
from deid_speech.ner.spacy_ner import load_spacy
from deid_speech.types import LABELS, Span, Transcript


class TrainedNerDetector:
    name = "ner"

    def __init__(self, model: str | Path, score: float = 0.75):
        path = Path(model)
        if not (path / "meta.json").is_file():
            raise DeidError(f"{model}: not a trained NER folder (no meta.json); train one with "
                            "`deid-speech train ner`")
        self.nlp = load_spacy(str(path.resolve()))
        if "ner" not in self.nlp.pipe_names or not set(self.nlp.get_pipe("ner").labels) & set(LABELS):
            raise DeidError(f"{model}: this spaCy pipeline has no NER for the labels {', '.join(LABELS)}")
        self.score = score

    def detect(self, transcript: Transcript) -> list[Span]:
        out = []
        for ent in self.nlp(transcript.text).ents:
            if ent.label_ in LABELS:
                s = span_from_chars(transcript, ent.start_char, ent.end_char, ent.label_, self.score, self.name)
                if s is not None:
                    out.append(s)
        return out


register("ner")(TrainedNerDetector)
