"""The lenient tag parser: malformed tags widen the entity, never drop it."""
import json
from pathlib import Path

import pytest

from deid_speech import models as shipped
from deid_speech.e2e.tags import TagMark, pair_tags, parse_tags, sentence_bounds, strip_tags
from deid_speech.types import parse_tagged

ROOT = Path(__file__).resolve().parents[2]


def ents(tagged, **kw):
    text, spans = parse_tags(tagged, **kw)
    return [(text[e.char_start:e.char_end], e.label) for e in spans]


def test_well_formed_pair_is_one_entity():
    assert ents("can call me at [PHONE] nine eight seven six [PHONE] lah") == [("nine eight seven six", "PHONE")]


def test_well_formed_input_agrees_with_strict_parser_on_the_seed_data():
    n = 0
    for f in sorted((shipped.path("seed")).glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            tagged = json.loads(line)["tagged"]
            assert parse_tags(tagged) == parse_tagged(tagged), tagged
            n += 1
    assert n > 50


def test_two_entities_and_trailing_punctuation():
    assert ents("My name is [PERSON] Jason Lim [PERSON]. I C [NRIC] S eight four G [NRIC], ok") == [
        ("Jason Lim", "PERSON"), ("S eight four G", "NRIC")]


def test_unclosed_tag_runs_to_the_end_of_its_sentence():
    assert ents("call me at [PHONE] nine eight seven six. Anytime can lah.") == [
        ("nine eight seven six", "PHONE")]


def test_unclosed_tag_at_the_end_of_the_text_runs_to_the_end():
    assert ents("my card is [CREDIT_CARD] four five three two, one one") == [
        ("four five three two, one one", "CREDIT_CARD")]


def test_stray_closing_tag_opens_back_to_the_sentence_start():
    assert ents("Okay. nine eight seven six [PHONE]. Thanks.") == [("nine eight seven six", "PHONE")]


def test_stray_closing_tag_opens_back_to_the_previous_pause():
    text, marks = strip_tags("the number is nine eight seven six [PHONE]")
    pause = text.index("nine")
    spans = pair_tags(text, marks, pauses=[pause])
    assert [(text[e.char_start:e.char_end], e.label) for e in spans] == [("nine eight seven six", "PHONE")]


def test_stray_closing_tag_after_a_closed_pair_does_not_reach_into_it():
    assert ents("[PHONE] nine eight [PHONE] seven six [PHONE]") == [
        ("nine eight", "PHONE"), ("seven six", "PHONE")]


def test_different_tag_inside_an_open_one_closes_the_first():
    assert ents("is [PHONE] nine eight [NRIC] S one two G [NRIC] ok") == [
        ("nine eight", "PHONE"), ("S one two G", "NRIC")]


def test_different_tag_left_open_runs_to_the_sentence_end():
    assert ents("[PERSON] Jason Lim [EMAIL] jason at gmail dot com. Bye.") == [
        ("Jason Lim", "PERSON"), ("jason at gmail dot com", "EMAIL")]


def test_open_tag_does_not_cross_a_sentence_end():
    assert ents("Call [PHONE] nine eight. Then my name [PERSON] Tan [PERSON].") == [
        ("nine eight", "PHONE"), ("Tan", "PERSON")]


def test_pair_across_a_period_is_kept_whole():
    assert ents("on [DATE] the twelfth. [DATE] ok") == [("the twelfth", "DATE")]


def test_segment_stop_ends_an_open_tag():
    text, marks = strip_tags("my number [PHONE] nine eight seven six ok thanks")
    stop = text.index("ok")
    spans = pair_tags(text, marks, stops=[stop])
    assert [(text[e.char_start:e.char_end], e.label) for e in spans] == [("nine eight seven six", "PHONE")]


def test_empty_pair_covers_the_neighbouring_words():
    assert ents("call me at [PHONE] [PHONE] lah") == [("at lah", "PHONE")]


def test_empty_pair_at_the_start_covers_the_next_word():
    assert ents("[DATE] [DATE] tomorrow can") == [("tomorrow", "DATE")]


def test_lone_tag_alone_is_no_entity_but_no_error():
    assert ents("[PHONE]") == []
    assert ents("") == []


def test_tag_case_and_spacing_are_tolerated_and_unknown_brackets_stay_text():
    text, spans = parse_tags("call [ phone ] nine eight [Phone] [inaudible] ok")
    assert text == "call nine eight [inaudible] ok"
    assert [(text[e.char_start:e.char_end], e.label) for e in spans] == [("nine eight", "PHONE")]


def test_tags_glued_to_words_are_split():
    assert ents("at[PHONE]nine eight[PHONE]lah") == [("nine eight", "PHONE")]


def test_overlapping_widened_entities_merge():
    text = "a b c d"
    spans = pair_tags(text, [TagMark(2, "PHONE"), TagMark(5, "PHONE"), TagMark(3, "DATE")])
    assert all(x.char_end <= y.char_start for x, y in zip(spans, spans[1:]))


@pytest.mark.parametrize("title", ["Mr.", "Dr.", "Mrs."])
def test_titles_do_not_end_a_sentence(title):
    assert ents(f"this is [PERSON] {title} Tan Ah Kow. Bye") == [(f"{title} Tan Ah Kow", "PERSON")]


def test_sentence_bounds_split_after_stops_and_at_extra_stops():
    text = "Hi there. How are you? Fine"
    assert [text[a:b].strip() for a, b in sentence_bounds(text)] == ["Hi there.", "How are you?", "Fine"]
    assert len(sentence_bounds("a b c", stops=[2])) == 2


def test_email_dots_do_not_end_a_sentence():
    assert ents("it is [EMAIL] jason.lim@yahoo.com [EMAIL] ok") == [("jason.lim@yahoo.com", "EMAIL")]
