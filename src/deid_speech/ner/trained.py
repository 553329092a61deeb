"""A spaCy NER trained on our nine labels (``deid-speech train ner``) as a cascade detector.

It reads the Whisper transcript as written and reports every entity whose label is one
of ours, at one ``score`` for all (spaCy's NER gives no per-entity probability). The
score (0.6) sits below the pattern detectors' shape and validated scores (0.75, 0.95), so
where both find a region the merge step keeps their label, and the NER mainly adds what
they missed. Not reported, since the model tags ordinary speech too (read prose above all):
* a number-like hit with fewer symbols than its label needs ("8502" as PHONE, "3 -5 -30" as
  BANK_ACCOUNT: times, seats and bus numbers);
* a DATE that names no calendar day or year ("the sixth office": the spaCy detector's
  ``calendar_date``);
* a PERSON holding a word that is no name in call-centre speech ("Merlin Bank"), or made of
  such words and function words alone that the recogniser was sure of ("and I'm", "But thou";
  not "he's a", heard in doubt for "Ethan Loh").
"""
from __future__ import annotations

from pathlib import Path

from deid_speech.errors import DeidError
from deid_speech.ner.base import register, span_from_chars
from deid_speech.ner.spacy_ner import load_spacy
from deid_speech.types import LABELS, Span, Transcript

# fewest digits/letters (read as the normalizer reads them) a hit of the label must hold
MIN_SYMBOLS = {"NRIC": 5, "PASSPORT_NUM": 5, "PHONE": 6, "CREDIT_CARD": 8, "BANK_ACCOUNT": 6,
               "CAR_PLATE": 4}
# closed-class words that the NOT_NAMES list of the spaCy detector leaves out (it keeps "and" for
# name slots): a PERSON made of these and NOT_NAMES alone, all heard for sure, is none ("and I'm")
# ("or", "nor", "than" and "thee" are names or surnames here: Or Kim Peow, Nor Aishah)
FUNCTION_WORDS = frozenset("and but yet if as of by you're you'll you've you'd we're we'll we've "
                           "they're they'll he's she's it's there's that's thou thy".split())


def _words(text: str) -> list[str]:
    return [w.strip(".,!?;:'\"").lower().replace("\u2019", "'") for w in text.split()]


def function_words_heard(transcript: Transcript, a: int, b: int) -> bool:
    """Whether ``transcript.text[a:b]`` is function words alone (:data:`FUNCTION_WORDS` and the
    spaCy detector's NOT_NAMES), each heard for sure (probability at least the spaCy detector's
    SURE): "and I'm", "But thou". A doubted one may be a garbled name ("he's a" for "Ethan Loh",
    probabilities 0.15 and 0.58)."""
    from deid_speech.ner.spacy_ner import NOT_NAMES, SURE

    words = [w for w in transcript.words if w.char_end > a and w.char_start < b]
    return bool(words) and all(t in NOT_NAMES or t in FUNCTION_WORDS for w in words for t in _words(w.text)) \
        and all(w.prob >= SURE for w in words)


def symbol_count(text: str) -> int:
    """Digits and spelled letters in ``text`` ("S -9 -7" -> 3, "four five" -> 2)."""
    from deid_speech.spoken import normalize_tokens

    return sum(len(sym.text) for _, _, sym in normalize_tokens(text.split()))


def plausible(label: str, text: str) -> bool:
    """Enough symbols for a number-like label; a PERSON without words that are not names
    in call-centre speech ("Merlin Bank", "okay", the lists of the spaCy detector); a DATE
    that names a calendar day or year (the spaCy detector's rule: "10 of clubs" is none)."""
    if label == "PERSON":
        from deid_speech.ner.spacy_ner import NOT_NAME_WORDS, NOT_NAMES

        words = _words(text)
        return not any(w in NOT_NAME_WORDS for w in words) and not all(w in NOT_NAMES for w in words)
    if label == "DATE":
        from deid_speech.ner.spacy_ner import calendar_date

        return calendar_date(text)
    need = MIN_SYMBOLS.get(label)
    return need is None or symbol_count(text) >= need


DEFAULT = "default"  # the shipped model; "none" turns the trained NER off


def resolve_ner_model(value: str | None) -> str | None:
    """An ``--ner-model`` value as a folder: ``default`` is the shipped ``models/ner``,
    ``none`` (or None) means no trained NER. A missing shipped model is an error, not a
    quiet fallback: the cascade would find less than the user expects."""
    if value is None or value.lower() == "none":
        return None
    if value == DEFAULT:
        from deid_speech import models

        return str(models.path("ner"))  # checked; a missing or changed shipped model is a DeidError
    return value


class TrainedNerDetector:
    name = "ner"

    @classmethod
    def from_config(cls, config) -> TrainedNerDetector | None:
        """The config's ``ner_model`` (``default``: the shipped one; None/"none": no NER)."""
        folder = resolve_ner_model(config.ner_model)
        return cls(folder) if folder else None

    def __init__(self, model: str | Path, score: float = 0.6):
        path = Path(model)
        if not (path / "meta.json").is_file():
            raise DeidError(f"{model}: not a trained NER folder (no meta.json); train one with "
                            "`deid-speech train ner`")
        if (path / "dev_examples.jsonl").is_file() and not (path / "training.json").is_file():  # see ner.train
            raise DeidError(f"{model}: its training did not finish; rerun the same `deid-speech train ner` command")
        self.nlp = load_spacy(str(path.resolve()))
        if "ner" not in self.nlp.pipe_names or not set(self.nlp.get_pipe("ner").labels) & set(LABELS):
            raise DeidError(f"{model}: this spaCy pipeline has no NER for the labels {', '.join(LABELS)}")
        self.score = score

    def detect(self, transcript: Transcript) -> list[Span]:
        out = []
        for ent in self.nlp(transcript.text).ents:
            if ent.label_ in LABELS and plausible(ent.label_, ent.text) and not (
                    ent.label_ == "PERSON" and function_words_heard(transcript, ent.start_char, ent.end_char)):
                s = span_from_chars(transcript, ent.start_char, ent.end_char, ent.label_, self.score, self.name)
                if s is not None:
                    out.append(s)
        return out


register("ner")(TrainedNerDetector)
