"""The two peer baselines, "presidio" and "spacy-plain": labels mapped onto ours, word times,
the documented blind spots (spoken digits), and loud failure when a package is missing."""
import socket
import subprocess
import sys

import pytest

from deid_speech.errors import DeidError
from deid_speech.ner.base import REGISTRY
from deid_speech.ner.presidio import PRESIDIO_TO_LABEL, PresidioDetector
from deid_speech.ner.spacy_plain import SPACY_TO_LABEL, PlainSpacyDetector
from deid_speech.types import LABELS, Transcript
from deid_speech.validators import nric_check_letter

NRIC = "S1234567" + nric_check_letter("S", "1234567")


def transcript(text: str) -> Transcript:
    """Word i spans 0.3 + 0.7*i .. 0.8 + 0.7*i s (not the factory spacing: times come from words)."""
    return Transcript.from_words([(w, 0.3 + 0.7 * i, 0.8 + 0.7 * i) for i, w in enumerate(text.split())])


def times(text: str, phrase: str) -> tuple[float, float]:
    """Expected (start, end) of the words that ``phrase`` covers in ``text``."""
    a = text[:text.index(phrase)].count(" ")
    b = a + phrase.count(" ")
    return round(0.3 + 0.7 * a, 6), round(0.8 + 0.7 * b, 6)


def hits(det, text: str) -> list[tuple[str, str, tuple[float, float]]]:
    spans = det.detect(transcript(text))
    assert all(s.label in LABELS and s.source == det.name for s in spans), spans
    return [(s.label, s.text, (round(s.start, 6), round(s.end, 6))) for s in spans]


def test_both_baselines_are_registered():
    assert REGISTRY["presidio"] is PresidioDetector
    assert REGISTRY["spacy-plain"] is PlainSpacyDetector
    assert set(PRESIDIO_TO_LABEL.values()) <= set(LABELS)
    assert SPACY_TO_LABEL == {"PERSON": "PERSON", "DATE": "DATE"}


# --- presidio -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def presidio():
    return PresidioDetector()


@pytest.mark.model
def test_presidio_finds_written_nric_email_phone_at_their_word_times(presidio):
    text = f"my nric is {NRIC} and email john.tan@gmail.com call me at 91234567"
    got = hits(presidio, text)
    assert ("NRIC", NRIC, times(text, NRIC)) in got
    assert ("EMAIL", "john.tan@gmail.com", times(text, "john.tan@gmail.com")) in got
    assert ("PHONE", "91234567", times(text, "91234567")) in got


@pytest.mark.model
def test_presidio_finds_person_date_and_card(presidio):
    text = "My name is Tan Wei Ming, born on 3 March 1987, card 4111 1111 1111 1111"
    got = hits(presidio, text)
    assert ("PERSON", "Tan Wei Ming", times(text, "Tan Wei Ming")) in got
    assert ("DATE", "3 March 1987", times(text, "3 March 1987")) in got
    assert ("CREDIT_CARD", "4111 1111 1111 1111", times(text, "4111 1111 1111 1111")) in got


@pytest.mark.model
@pytest.mark.parametrize("text", [
    "my number is nine one two three four five six seven",
    "my IC is S one two three four five six seven D",
    "email john dot tan at gmail dot com",
])
def test_presidio_misses_spoken_form_pii(presidio, text):
    """The baseline's known blind spot: ASR writes digits and symbols as words."""
    assert [lab for lab, _, _ in hits(presidio, text) if lab in ("PHONE", "NRIC", "EMAIL")] == []


@pytest.mark.model
def test_presidio_types_without_a_label_are_dropped(presidio):
    text = "visit www.example.com from 192.168.1.1 in Paris"
    raw = {r.entity_type for r in presidio.analyzer.analyze(text, language="en", score_threshold=0.35)}
    assert {"URL", "IP_ADDRESS", "LOCATION"} <= raw
    got = hits(presidio, text)
    assert not any(t in ("www.example.com", "Paris") for _, t, _ in got), got
    assert [lab for lab, t, _ in got if t == "192.168.1.1"] == ["DATE"]  # spaCy's DATE_TIME, kept


@pytest.mark.model
def test_singapore_recognizers_are_active(presidio):
    names = {r.name for r in presidio.analyzer.registry.recognizers}
    assert {"SgFinRecognizer", "SgUenRecognizer"} <= names
    phone = next(r for r in presidio.analyzer.registry.recognizers if r.name == "PhoneRecognizer")
    assert "SG" in phone.supported_regions


@pytest.mark.model
def test_without_the_sg_phone_region_local_numbers_are_not_phones():
    det = PresidioDetector(phone_regions=("US", "GB"))
    assert [h for h in hits(det, "call me at 91234567") if h[0] == "PHONE"] == []


@pytest.mark.model
def test_score_threshold_option(presidio):
    text = "call me at 91234567"
    assert [lab for lab, _, _ in hits(presidio, text)].count("BANK_ACCOUNT") == 0
    low = PresidioDetector(score_threshold=0.0)  # presidio's own default
    assert "BANK_ACCOUNT" in [lab for lab, _, _ in hits(low, text)]  # UsBankRecognizer, 0.05
    high = PresidioDetector(score_threshold=0.99)
    assert hits(high, "My name is Tan Wei Ming") == []  # spaCy PERSON scores 0.85


@pytest.mark.model
def test_presidio_never_touches_the_network(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("network access")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    det = PresidioDetector()  # a fresh one: its email check has not run yet
    assert [lab for lab, _, _ in hits(det, "email mary.lim@outlook.com.sg ok")] == ["EMAIL"]


# --- spacy-plain --------------------------------------------------------------------


@pytest.fixture(scope="module")
def plain():
    return PlainSpacyDetector()


@pytest.mark.model
def test_plain_spacy_keeps_person_and_every_date(plain):
    text = "My name is Tan Wei Ming, born on 3 March 1987 and I have 2 cats"
    got = hits(plain, text)
    assert ("PERSON", "Tan Wei Ming", times(text, "Tan Wei Ming")) in got
    assert ("DATE", "3 March 1987", times(text, "3 March 1987")) in got
    assert {lab for lab, _, _ in got} <= {"PERSON", "DATE"}  # "2" is CARDINAL: dropped
    # no calendar filter: relative dates are kept (the "spacy" detector drops them)
    assert [t for _, t, _ in hits(plain, "I'll call you back tomorrow, next week can?")] == ["tomorrow", "next week"]


@pytest.mark.model
def test_plain_spacy_has_no_cues_for_lower_case_names(plain):
    assert hits(plain, "my name is siti nurhaliza") == []


@pytest.mark.model
def test_loading_spacy_keeps_torch_and_transformers_out():
    """spacy.load imports every spaCy entry point, presidio's Hugging Face pipe included;
    unblocked, that pulls in transformers and torch (~10 s) for every spaCy detector."""
    code = ("import sys\n"
            "from deid_speech.ner.spacy_plain import PlainSpacyDetector\n"
            "from deid_speech.ner.presidio import PresidioDetector\n"
            "PlainSpacyDetector(); PresidioDetector()\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr


# --- missing packages fail loudly ---------------------------------------------------


def test_missing_presidio_raises(monkeypatch):
    monkeypatch.setitem(sys.modules, "presidio_analyzer", None)
    with pytest.raises(DeidError, match="presidio"):
        PresidioDetector()


@pytest.mark.parametrize("factory", [PresidioDetector, PlainSpacyDetector])
def test_missing_spacy_raises(monkeypatch, factory):
    monkeypatch.setitem(sys.modules, "spacy", None)
    with pytest.raises(DeidError, match="spaCy"):
        factory(model="not_cached_model_for_this_test")


@pytest.mark.model
@pytest.mark.parametrize("factory", [PresidioDetector, PlainSpacyDetector])
def test_missing_spacy_model_raises(factory):
    with pytest.raises(DeidError, match="no_such_spacy_model"):
        factory(model="no_such_spacy_model")
