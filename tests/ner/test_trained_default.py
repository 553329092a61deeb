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
    ("DATE", "the fifth lah", True), ("DATE", "the seventeenth at nine", True),   # only listed nouns qualify
    ("DATE", "the fifteenth this month", True), ("DATE", "the 3rd floor, room 3", False), ("DATE", "3rd", True),
    # a month names a day only with a day beside it; a sum is no year; a count of years no day
    ("DATE", "May", False), ("DATE", "June,", False), ("DATE", "the end of April", False),
    ("DATE", "the month of January", False), ("DATE", "5 June", True), ("DATE", "March the fourth", True),
    ("DATE", "last five March", True), ("DATE", "March 1987", True), ("DATE", "the first day of March", True),
    ("DATE", "the first three years", False), ("DATE", "about the second two months", False),
    ("DATE", "the first day", True), ("DATE", "two thousand one hundred", False),
    ("DATE", "two thousand and one", True), ("DATE", "two thousand and five hundred", False),
    ("DATE", "two thousand or fifteen dollars", False), ("DATE", "two thousand, fifteen March", True),
    ("DATE", "of nineteen", False), ("DATE", "nineteen eighty seven", True), ("DATE", "nineteen oh five", True),
    # an EMAIL is never dropped: the model tags garbled names and identifiers EMAIL ("nerf our
    # hannabinti snail", "2 .0 also"), so a rule that drops ordinary words ("thy sweet self") leaked
    ("EMAIL", "thy sweet self,", True), ("EMAIL", "nerf our hannabinti snail", True),
])
def test_trained_ner_hits_must_be_plausible_for_their_label(label, text, ok):
    from deid_speech.ner.trained import plausible

    assert plausible(label, text) is ok


@pytest.mark.model
def test_the_shipped_model_tags_prose_that_the_detector_does_not_report():
    """The shipped NER calls ordinary words a DATE (an office, a floor); the rules of
    :func:`plausible` keep them out, and a real address and date in the same call stay."""
    from deid_speech.ner.trained import TrainedNerDetector
    from deid_speech.types import Transcript

    det = TrainedNerDetector(trained.resolve_ner_model("default"))

    def transcript(text):
        return Transcript.from_words((w, k * 0.3, k * 0.3 + 0.25) for k, w in enumerate(text.split()))

    prose = ["making a famine where abundance lies, thyself thy foe, to thy sweet self, too cruel.",
             "so this is the sixth office, I have a code so I apply something",
             "go up to the fourteenth floor, the clinic is on the left"]
    raw = [(e.label_, e.text) for t in prose for e in det.nlp(t).ents]
    assert ("DATE", "the sixth office") in raw, raw  # what is filtered
    assert ("DATE", "the fourteenth floor") in raw, raw
    assert [s for t in prose for s in det.detect(transcript(t)) if s.label == "DATE"] == []
    kept = det.detect(transcript("my email is tan at gmail dot com and my birthday is the twelfth of March 1987"))
    assert {s.label for s in kept} >= {"EMAIL", "DATE"}, kept


@pytest.mark.parametrize("words,dropped", [
    ([("and", 0.9), ("I'm", 0.99)], True),            # function words heard for sure: no name
    ([("But", 0.94), ("thou,", 0.95)], True),
    ([("I\u2019m", 0.99)], True),                       # a curly apostrophe reads as a straight one
    ([("he's", 0.15), ("a", 0.58)], False),            # doubted: a garbled name ("Ethan Loh")
    ([("You're", 0.57), ("a", 0.96)], False),
    ([("and", 0.9), ("Wai", 0.9), ("Jie", 0.9)], False),  # a name among them
    ([("you", 0.95), ("lean,", 0.99)], False),         # not function words alone ("Jolene")
    ([("Nor", 0.95)], False),                          # a Malay given name (Nor Aishah), and "Or" a surname
    ([("Or", 0.95)], False),
])
def test_a_person_of_function_words_heard_for_sure_is_no_name(words, dropped):
    from deid_speech.ner.trained import function_words_heard
    from deid_speech.types import Transcript

    tr = Transcript.from_words([("so", 0.0, 0.2, 0.9)] + [(w, 0.3 * (k + 1), 0.3 * (k + 1) + 0.25, p)
                                                          for k, (w, p) in enumerate(words)] + [("ok", 3.0, 3.2, 0.9)])
    a = tr.words[1].char_start
    b = tr.words[len(words)].char_end
    assert function_words_heard(tr, a, b) is dropped


@pytest.mark.model
def test_the_detector_drops_a_person_of_sure_function_words_but_keeps_a_doubted_one():
    from deid_speech.ner.trained import TrainedNerDetector
    from deid_speech.types import Transcript

    det = TrainedNerDetector(trained.resolve_ner_model("default"))
    text = "But thou, contracted to thine own bright eyes, feed'st thy light's flame with self-substantial fuel"
    assert ("PERSON", "But thou") in [(e.label_, e.text) for e in det.nlp(text).ents]  # what the model says

    def persons(prob):
        tr = Transcript.from_words((w, k * 0.3, k * 0.3 + 0.25, prob) for k, w in enumerate(text.split()))
        return [s.text for s in det.detect(tr) if s.label == "PERSON"]

    assert persons(0.95) == []
    assert persons(0.3) == ["But thou"]
