"""Safe repairs before validation: each fixes what it claims, and none lets a line through
that the validator must reject (wrong tags, untagged PII, a second mismatch, ambiguity)."""
from collections import Counter

import pytest

from deid_speech.augment.llm import cut_at_repeat, loop_key
from deid_speech.augment.repair import (
    fill_slots,
    fix_tag_balance,
    fix_tag_spelling,
    repair_line,
    strip_bullet,
    strip_comment,
    strip_header_tag,
)
from deid_speech.augment.validate import check_line

PHONE = Counter({"PHONE": 1})
TWO = Counter({"PHONE": 1, "PERSON": 1})
GOOD = "hi [PERSON] Tan Wei Ming [PERSON] here, call me at [PHONE] nine one two three four five six seven [PHONE] lah"


def accepted(line, tags):
    fixed, done = repair_line(line, tags)
    parsed, why = check_line(fixed, tags, set())
    return why, done


@pytest.mark.parametrize("marker", ["1. ", "12) ", "3: ", "(4) ", "- ", "* ", "• ", "  2.  "])
def test_numbering_and_bullets_are_stripped_and_the_line_accepted(marker):
    assert check_line(marker + GOOD, TWO, set()) == (None, "bullet")  # the validator alone rejects it
    assert accepted(marker + GOOD, TWO) == (None, ["bullet"])


def test_a_marker_without_a_space_is_not_a_bullet_to_strip():
    assert strip_bullet("1:30 pm can or not") == "1:30 pm can or not"
    assert strip_bullet("2.5 kilo of rice lah") == "2.5 kilo of rice lah"
    assert accepted("1:30 [PHONE] nine one two three four five six seven [PHONE] call me ok", PHONE)[0] == "bullet"


@pytest.mark.parametrize("line", [
    "call me at [phone] nine one two three four five six seven [phone] lah",
    "call me at [ PHONE ] nine one two three four five six seven [ PHONE ] lah",
    "call me at [Phone] nine one two three four five six seven [/PHONE] lah",
    "call me at [phone number] nine one two three four five six seven [Phone-Number] lah",
])
def test_tag_spelling_is_normalised(line):
    assert check_line(line, PHONE, set())[1] is not None
    assert accepted(line, PHONE) == (None, ["tag_spelling"])


def test_a_synonym_maps_only_to_a_requested_label_and_ambiguous_words_never():
    name = "hi [name] Tan Wei Ming [NAME] here, call me at [PHONE] nine one two three four five six seven [PHONE] lah"
    assert accepted(name, TWO) == (None, ["tag_spelling"])
    assert fix_tag_spelling(name, PHONE) == name  # PERSON not requested: left alone
    assert accepted(name, PHONE)[0] == "unbalanced"
    for word in ("NUMBER", "ID", "CARD", "ACCOUNT"):
        line = f"my [{word}] nine one two three four five six seven [{word}] lah ok"
        assert fix_tag_spelling(line, Counter({"PHONE": 1, "NRIC": 1, "CREDIT_CARD": 1, "BANK_ACCOUNT": 1})) == line


def test_a_misnamed_closing_tag_is_renamed_when_unambiguous():
    line = "call the hotline [PHONE] six two three four five six seven eight [NRIC] can"
    assert check_line(line, PHONE, set()) == (None, "unbalanced")
    assert accepted(line, PHONE) == (None, ["tag_balance"])
    two = "hi [PERSON] Tan Wei Ming [PERSON] here, call me at [PHONE] nine one two three four five six seven [EMAIL] lah"
    assert accepted(two, TWO) == (None, ["tag_balance"])


@pytest.mark.parametrize("line,tags", [
    # the closing label was requested: it may open the second entity, so which was meant is unclear
    ("hi [PERSON] Tan Wei Ming [PHONE] nine one two three four five six seven [PHONE] lah", TWO),
    # the open label was not requested
    ("call me at [NRIC] nine one two three four five six seven [PHONE] lah", PHONE),
    # two mismatches
    ("a [PHONE] nine one two three [NRIC] b [PHONE] four five six seven [EMAIL] ok", Counter({"PHONE": 2})),
])
def test_tag_balance_leaves_ambiguous_lines_alone(line, tags):
    assert fix_tag_balance(line, tags) == line
    assert accepted(line, tags)[0] == "unbalanced"


@pytest.mark.parametrize("line,tags", [
    ('"Hey, can you please call me at [PHONE] to book the clinic tomorrow morning?"', PHONE),
    ("Eh the delivery uncle say must call [PHONE] before three pm lah", PHONE),
    ("Hi I'm [PERSON], can you call me back at [PHONE] after lunch?", TWO),
    ("[PERSON] will call you back later to confirm the booking", Counter({"PERSON": 1})),
    ("Sorry ah. [PERSON] says the car is ready, can collect tomorrow", Counter({"PERSON": 1})),
])
def test_a_lone_tag_is_a_slot_filled_with_a_placeholder_value(line, tags):
    assert check_line(line, tags, set())[1] == "unbalanced"
    assert accepted(line, tags) == (None, ["slot"])
    text, ents = check_line(repair_line(line, tags)[0], tags, set())[0]
    assert sorted(text[e.char_start:e.char_end] for e in ents) == sorted(t.lower() for t in tags)


@pytest.mark.parametrize("line,tags", [
    # the tag used as a noun after a determiner or possessive: no value fits there
    ("I need to call the [PHONE] for an appointment with my doctor tomorrow", PHONE),
    ("Can you check if my [PHONE] is still working after the update", PHONE),
    # a label asked for twice: a lone tag and a pair cannot be told apart
    ("Call [PHONE] or [PHONE] nine one two three four five six seven [PHONE] lah", Counter({"PHONE": 2})),
    # a tag that was not asked for
    ("Send it to [EMAIL] before five pm can or not", PHONE),
    # an entity the model opened and never closed, or closed and never opened: a value next to the tag
    ("I'm going to the family group chat on [DATE] twenty third April, bring along your documents", Counter({"DATE": 1})),
    ("Eh my number is [PHONE] nine one two three four five six seven, call me", PHONE),
    ("Eh my number is nine one two three four five six seven [PHONE], call me ok", PHONE),
    ("Please ask for [PERSON] Tan Wei Ming at the counter later", Counter({"PERSON": 1})),
    ("Please ask for Madam Siti [PERSON] at the counter later", Counter({"PERSON": 1})),
    ("Send the form to [EMAIL] at gmail dot com before Friday", Counter({"EMAIL": 1})),
    # one tag is a proper pair, the other lone: not every tag is a slot
    ("Hi I'm [PERSON] Tan Wei Ming [PERSON], call me at [PHONE] after lunch", TWO),
])
def test_a_lone_tag_is_not_filled_where_it_is_a_noun_or_ambiguous(line, tags):
    assert fill_slots(line, tags) == line
    assert check_line(repair_line(line, tags)[0], tags, set())[1] in ("unbalanced", "wrong_tags")


@pytest.mark.parametrize("line,tags,reason", [
    # fixed spelling, but a PII number left outside the tags: still rejected
    ("1. call [phone] nine one two three four [phone] or nine eight seven six five four three two ok", PHONE,
     "untagged_pii"),
    ("call [PHONE] nine one two three four [NRIC] or nine eight seven six five four three two ok", PHONE, "untagged_pii"),
    # fixed spelling, wrong tag set: still rejected
    ("- my IC [nric] S one two three four five six seven D [nric] ok lah", PHONE, "wrong_tags"),
    ("my [PHONE] nine one two three four five six seven [PHONE] and [email] a at b dot com [email] ok", PHONE,
     "wrong_tags"),
    # a stripped bullet that leaves meta talk
    ("1. Here are the sentences with [PHONE] nine one [PHONE] tags", PHONE, "meta"),
])
def test_repaired_lines_still_face_every_check(line, tags, reason):
    assert accepted(line, tags)[0] == reason


def test_label_prefixes_and_copied_schemas_are_rejected():
    assert check_line("Sentence 2: I have been working with the company for 5 years.", Counter(), set()) == (
        None, "meta")
    assert check_line("<words> [PHONE] <a phone number in words> [PHONE] <words>", PHONE, set()) == (
        None, "placeholder")


def test_a_looping_completion_is_cut_at_its_first_repeat():
    a = "call [PHONE] nine one two three [PHONE] lah"
    b = "call [PHONE] eight eight one two [PHONE] lah"  # same frame, other value: a loop
    pieces = ["first line ok\nsecond ", "line\n", a + "\n", b + "\n", "never read\n"]
    lines, cut = cut_at_repeat(iter(pieces), limit=20)
    assert lines == ["first line ok", "second line", a, b] and cut
    assert loop_key(a) == loop_key(b) != loop_key("call me lah")
    assert cut_at_repeat(iter(["x one\n", "x two\n", "x three\n"]), limit=2) == (["x one", "x two"], True)
    assert cut_at_repeat(iter(["x one\n\n", "x two"]), limit=9) == (["x one", "x two"], False)


PLATE = Counter({"CAR_PLATE": 1, "PERSON": 1})
QUOTED = ('"the car [CAR_PLATE] S K P double two nine seven D [CAR_PLATE] is registered under [PERSON] Ang Li Ting '
          '[PERSON], you are the owner or not"')


@pytest.mark.parametrize("comment", [" (uh, leh)", " (uh)", "  (meh, lah).", "(um)"])
def test_a_comment_after_a_quoted_sentence_is_dropped(comment):
    assert check_line("2. " + QUOTED + comment, PLATE, set())[1] in ("bullet", "bracket")
    assert accepted("2. " + QUOTED + comment, PLATE) == (None, ["bullet", "comment"])
    assert strip_comment(QUOTED + comment) == QUOTED.strip('"')


@pytest.mark.parametrize("line", [
    QUOTED + " (call [PHONE] nine one [PHONE])",  # a tag in the comment
    QUOTED + " (nine 1 two)",  # a digit in the comment
    QUOTED + " he said (uh)",  # words outside the quotes besides the comment
    QUOTED + " (uh) (leh)",  # two comments
    '"the car is mine" or "the car is not mine" (uh)',  # two quoted sentences
    QUOTED,  # no comment: the validator strips the quotes itself
])
def test_only_a_lone_comment_after_one_quoted_sentence_is_dropped(line):
    assert strip_comment(line) == line


def test_a_comment_dropped_leaves_an_untagged_value_rejected():
    line = '"the car under my brother Hafiz, plate S D N three three two R, he not around" (uh)'
    assert accepted(line, PLATE) == ("wrong_tags", ["comment"])


@pytest.mark.parametrize("line", [
    "[PHONE] Can I update my phone number to [PHONE] eight nine oh two seven five five three [PHONE] because I switch telco",
    "[PHONE] Walao my boss keep calling from [PHONE] nine two double eight three seven one five [PHONE] on my day off.",
    "[phone] The last time I call [PHONE] six two two oh nine eight one four [PHONE] the hotline keep me on hold sia",
    "1. [PHONE] My mother's number ah [PHONE] six four five two triple one eight [PHONE] that one is the house phone",
])
def test_a_tag_heading_the_line_is_dropped(line):
    why, done = accepted(line, PHONE)
    assert why is None and "header_tag" in done
    assert check_line(line, PHONE, set())[0] is None  # rejected without the repair


@pytest.mark.parametrize("line,tags", [
    ("[PHONE] nine one two three call [PHONE] eight eight one two three four five six [PHONE] ok", PHONE),  # unclosed value
    ("[PHONE] S one two call me at [PHONE] eight eight one two three four five six [PHONE] ok", PHONE),  # a letter
    ("[PHONE] Call Mr Tan at [PHONE] eight eight one two three four five six [PHONE] ok", PHONE),  # a capitalised word
    ("[EMAIL] John dot tan at gmail dot com [EMAIL] is my email [EMAIL] ok", Counter({"EMAIL": 1})),  # dot, at
    ("[PERSON] Tan said to call [PERSON] Lim Wei Ming [PERSON] ok", Counter({"PERSON": 1})),  # never for PERSON
    ("[PHONE] call me at [PHONE] eight eight one two three four five six [PHONE] ok", PHONE),  # no capital
    ("[PHONE] Call me at [PHONE] eight eight one two [PHONE] or [PHONE] nine one [PHONE]", PHONE),  # even count
    ("[PHONE] Call me now [PHONE] eight eight one two [NRIC] ok", PHONE),  # does not parse without it
])
def test_a_heading_tag_stays_where_it_may_open_a_value(line, tags):
    assert strip_header_tag(fix_tag_spelling(line, tags)) == fix_tag_spelling(line, tags)
