"""A spaCy NER trained on our nine labels (``deid-speech train ner``) as a cascade detector.

It reads the Whisper transcript as written and reports every entity whose label is one
of ours, at one ``score`` for all (spaCy's NER gives no per-entity probability). The
score (0.6) sits below the pattern detectors' shape and validated scores (0.75, 0.95), so
where both find a region the merge step keeps their label, and the NER mainly adds what
they missed. Not reported, since the model tags ordinary speech too (read prose above all):
* a number-like hit with fewer symbols than its label needs ("8502" as PHONE, "3 -5 -30" as
  BANK_ACCOUNT: times, seats and bus numbers);
* an EMAIL with no sign of an address ("at", "dot", "@", "underscore", a provider or a domain),
  no digit or spelled letter, and no cue for one ("email", "address", ...) in the 60 characters
  before it ("thy sweet self");
* a DATE that names no calendar day or year ("the sixth office": the spaCy detector's
  ``calendar_date``);
* a PERSON holding a word that is no name in call-centre speech ("Merlin Bank"), or made of
  such words and function words alone that the recogniser was sure of ("and I'm", "But thou";
  not "he's a", heard in doubt for "Ethan Loh").
"""
from __future__ import annotations

import re
from functools import lru_cache
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
# an EMAIL without a sign of an address still counts with a digit or a spelled letter in it: the
# recogniser's garbled identifier ("S68140270.", "2 .0 also" for "two two L")
EMAIL_MIN_SYMBOLS = 1
# words before an EMAIL that say an address follows, whatever the recogniser made of it ("my email is tanweiming")
EMAIL_CUE_RX = re.compile(r"\b(?:e-?mail|mail|address|gmail|hotmail|outlook|yahoo)\b", re.IGNORECASE)
EMAIL_CUE_CHARS = 60  # how far back a cue counts


@lru_cache(maxsize=1)
def _email_sign() -> re.Pattern:
    """``at``, ``dot``, ``@``, ``_``, underscore, dash, a domain word or a provider: what an address
    spoken or written holds."""
    from deid_speech.ner.cue_runs import DOMAIN_WORDS, PROVIDERS

    said = sorted(DOMAIN_WORDS - {"my", "co", "io", "info", "biz"})  # a domain said alone ("gmail dot com"), not "my"
    return re.compile(r"[@_]|\b(?:at|dot|underscore|dash|hyphen)\b|\.(?:" + "|".join(sorted(DOMAIN_WORDS)) + r")\b|\b(?:"
                      + "|".join(said) + r")\b|" + "|".join(PROVIDERS), re.IGNORECASE)


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


def plausible(label: str, text: str, before: str = "") -> bool:
    """Enough symbols for a number-like label; a PERSON without words that are not names
    in call-centre speech ("Merlin Bank", "okay", the lists of the spaCy detector); a DATE
    that names a calendar day or year (the spaCy detector's rule: "10 of clubs" is none); an
    EMAIL with a sign of an address, enough symbols, or a cue for one in the text ``before`` it."""
    if label == "PERSON":
        from deid_speech.ner.spacy_ner import NOT_NAME_WORDS, NOT_NAMES

        words = _words(text)
        return not any(w in NOT_NAME_WORDS for w in words) and not all(w in NOT_NAMES for w in words)
    if label == "DATE":
        from deid_speech.ner.spacy_ner import calendar_date

        return calendar_date(text)
    if label == "EMAIL":
        return (bool(_email_sign().search(text)) or symbol_count(text) >= EMAIL_MIN_SYMBOLS
                or bool(EMAIL_CUE_RX.search(before[-EMAIL_CUE_CHARS:])))
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
        self.nlp = load_spacy(str(path.resolve()))
        if "ner" not in self.nlp.pipe_names or not set(self.nlp.get_pipe("ner").labels) & set(LABELS):
            raise DeidError(f"{model}: this spaCy pipeline has no NER for the labels {', '.join(LABELS)}")
        self.score = score

    def detect(self, transcript: Transcript) -> list[Span]:
        out = []
        for ent in self.nlp(transcript.text).ents:
            if ent.label_ in LABELS and plausible(ent.label_, ent.text, transcript.text[:ent.start_char]) and not (
                    ent.label_ == "PERSON" and function_words_heard(transcript, ent.start_char, ent.end_char)):
                s = span_from_chars(transcript, ent.start_char, ent.end_char, ent.label_, self.score, self.name)
                if s is not None:
                    out.append(s)
        return out


register("ner")(TrainedNerDetector)
