"""The cascade's trained NER: the shipped model by default, off with "none", and a missing
shipped model is an error rather than a quietly weaker cascade."""
from __future__ import annotations

import pytest

from deid_speech.errors import DeidError
from deid_speech.ner import trained
from deid_speech.pipeline import RedactConfig


def test_default_is_the_shipped_model_and_none_turns_it_off() -> None:
    assert RedactConfig().ner_model == "default"
    from deid_speech import models

    assert trained.resolve_ner_model("default") == str(models.path("ner"))
    assert (models.path("ner") / "meta.json").is_file()
    assert trained.resolve_ner_model("none") is None and trained.resolve_ner_model(None) is None
    assert trained.resolve_ner_model("/some/folder") == "/some/folder"


def test_missing_shipped_model_is_an_error(monkeypatch, tmp_path) -> None:
    from deid_speech import models

    monkeypatch.setitem(models.SHIPPED, "ner", tmp_path / "gone")
    monkeypatch.setattr(models, "_verified", {})
    with pytest.raises(DeidError, match="not in this installation"):
        trained.resolve_ner_model("default")


@pytest.mark.parametrize("label,text,ok", [
    ("DATE", "10 of clubs", False), ("DATE", "seven of hearts", False),
    ("DATE", "twelfth of March", True), ("DATE", "1987", True), ("DATE", "3/12/1987", True),
    ("BANK_ACCOUNT", "33 -4 -692", True), ("PHONE", "nine one", False),
    # an ordinal that qualifies the next word is no day of a month
    ("DATE", "the fourteenth floor,", False), ("DATE", "the sixth office", False), ("DATE", "the 3rd floor", False),
    ("DATE", "first time", False), ("DATE", "the twenty first century", False), ("DATE", "the second room", False),
    ("DATE", "the tenth of", True), ("DATE", "the seventh two three", True), ("DATE", "17th,", True),
    ("DATE", "the fourteenth, at nine", True), ("DATE", "twenty first of March", True),
    ("DATE", "the fifth floor on the third of May", True), ("DATE", "the fifth floor on the third", True),
    # an address needs a sign of one, or enough symbols to be some identifier
    ("EMAIL", "thy sweet self,", False), ("EMAIL", "cheryl makes waste", False), ("EMAIL", "l", False),
    ("EMAIL", "my sweet self", False), ("EMAIL", "S68140270.", True), ("EMAIL", "tan at gmail dot com", True),
    ("EMAIL", "jason.tay@x.com", True), ("EMAIL", "JasonTayasgmail .com", True), ("EMAIL", "bernadette dot x", True),
    ("EMAIL", "w k loh seventy seven outlook", True), ("EMAIL", "jane.my", True),
])
def test_trained_ner_hits_must_be_plausible_for_their_label(label, text, ok):
    from deid_speech.ner.trained import plausible

    assert plausible(label, text) is ok


@pytest.mark.model
def test_the_shipped_model_tags_prose_that_the_detector_does_not_report():
    """The shipped NER calls ordinary words an EMAIL or a DATE (read prose, a floor); the rules
    of :func:`plausible` keep them out, and a real address and date in the same call stay."""
    from deid_speech.ner.trained import TrainedNerDetector
    from deid_speech.types import Transcript

    det = TrainedNerDetector(trained.resolve_ner_model("default"))

    def transcript(text):
        return Transcript.from_words((w, k * 0.3, k * 0.3 + 0.25) for k, w in enumerate(text.split()))

    prose = ["making a famine where abundance lies, thyself thy foe, to thy sweet self, too cruel.",
             "so this is the sixth office, I have a code so I apply something",
             "go up to the fourteenth floor, the clinic is on the left"]
    raw = [(e.label_, e.text) for t in prose for e in det.nlp(t).ents]
    assert ("EMAIL", "thy sweet self") in raw and ("DATE", "the sixth office") in raw, raw  # what is filtered
    assert ("DATE", "the fourteenth floor") in raw, raw
    assert [s for t in prose for s in det.detect(transcript(t)) if s.label in ("EMAIL", "DATE")] == []
    kept = det.detect(transcript("my email is tan at gmail dot com and my birthday is the twelfth of March 1987"))
    assert {s.label for s in kept} >= {"EMAIL", "DATE"}, kept
