import json

import pytest

from deid_speech.types import EntitySpan, Span, Transcript, Word, parse_tagged, render_tagged


def test_span_json_round_trip_and_ordering():
    a = Span(1.0, 2.5, "PHONE", 0.9, "patterns", "nine one")
    b = Span(0.5, 0.7, "PERSON")
    assert Span.from_dict(json.loads(json.dumps(a.to_dict()))) == a
    assert sorted([a, b]) == [b, a]
    assert a.overlaps(Span(2.4, 3.0)) and not a.overlaps(Span(2.5, 3.0))


def test_span_rejects_negative_or_reversed_times():
    with pytest.raises(ValueError):
        Span(2.0, 1.0)
    with pytest.raises(ValueError):
        Span(-0.1, 1.0)


def test_transcript_records_character_offsets_and_maps_chars_to_time():
    t = Transcript.from_words([(" Hello,", 0.0, 0.4), (" my", 0.5, 0.6), (" name", 0.7, 0.9), ("is", 1.0, 1.1)])
    assert t.text == "Hello, my name is"
    for w in t.words:
        assert t.text[w.char_start:w.char_end] == w.text
    assert t.char_span_to_time(7, 14) == (0.5, 0.9)
    assert t.char_span_to_time(100, 120) is None
    assert Transcript.from_dict(json.loads(json.dumps(t.to_dict()))) == t


def test_word_round_trip():
    w = Word("nine", 1.0, 1.2, 4, 8, 0.75)
    assert Word.from_dict(w.to_dict()) == w


@pytest.mark.parametrize("tagged", [
    "call me at [PHONE] nine eight seven six five four three two [PHONE] after six lah",
    "[PERSON] Tan Wei Ming [PERSON] here, my IC [NRIC] S one two three four five six seven D [NRIC].",
    "no pii here, just block four five six",
    "email [EMAIL] remy at outlook dot sg [EMAIL], [DATE] twelfth of March [DATE]!",
])
def test_tagged_format_round_trips(tagged):
    text, ents = parse_tagged(tagged)
    assert "[" not in text
    assert render_tagged(text, ents) == " ".join(tagged.split())
    assert parse_tagged(render_tagged(text, ents)) == (text, ents)


def test_tagged_entity_offsets_point_at_the_value():
    text, ents = parse_tagged("my IC [NRIC] S one two D [NRIC] ok")
    assert [(e.label, text[e.char_start:e.char_end]) for e in ents] == [("NRIC", "S one two D")]


@pytest.mark.parametrize("bad", ["[PHONE] one two", "[PHONE] [PHONE]", "[PHONE] a [NRIC] b [NRIC] [PHONE]",
                                 "[PHONE] one [NRIC]", "hello [NAME] Bob [NAME]"])
def test_malformed_tags_raise(bad):
    with pytest.raises(ValueError):
        parse_tagged(bad)


def test_entity_span_validation_and_json():
    e = EntitySpan(3, 9, "EMAIL")
    assert EntitySpan.from_dict(e.to_dict()) == e
    with pytest.raises(ValueError):
        EntitySpan(5, 5, "EMAIL")


def test_import_does_not_pull_torch():
    import subprocess
    import sys

    code = "import sys, deid_speech, deid_speech.cli, deid_speech.pipeline; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
