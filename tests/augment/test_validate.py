from collections import Counter

import pytest

from deid_speech.augment.prompts import build_prompt, tag_list
from deid_speech.augment.validate import check_line, frame_key, normalise, prompt_key

TAGS = Counter({"PHONE": 1, "PERSON": 1})
GOOD = "hi [PERSON] Tan Wei Ming [PERSON] here, call me at [PHONE] nine one two three four five six seven [PHONE] lah"


def test_a_well_formed_line_is_accepted_once():
    seen: set = set()
    parsed, why = check_line(GOOD, TAGS, seen)
    assert why is None and parsed[0].startswith("hi Tan Wei Ming here")
    # the same frame with other values is a duplicate
    other = GOOD.replace("Tan Wei Ming", "Siti Aminah").replace("nine one", "eight two")
    assert check_line(other, TAGS, seen) == (None, "duplicate")


@pytest.mark.parametrize("line,reason", [
    ("", "empty"),
    ("1. " + GOOD, "bullet"),
    ("- " + GOOD, "bullet"),
    ("* " + GOOD, "bullet"),
    ("(3) " + GOOD, "bullet"),
    ("Here are 20 sentences:", "meta"),
    ("hi [PERSON] Tan Wei Ming here, call me at [PHONE] nine one [PHONE] lah", "unbalanced"),
    ("hi [PERSON] Tan [PERSON] call [PHONE] nine [PHONE] and [PHONE] eight [PHONE]", "wrong_tags"),  # extra tag
    ("hi [PERSON] Tan Wei Ming [PERSON] here, call me later lah", "wrong_tags"),  # missing tag
    ("hi [PERSON] Tan [PERSON] at [EMAIL] a at b dot com [EMAIL]", "wrong_tags"),  # wrong tag
    ("[PERSON] Tan [PERSON] [PHONE] nine [PHONE]", "too_short"),
    ("hi [NAME] Bob [NAME] call [PHONE] nine [PHONE] please ok", "unbalanced"),  # unknown tag
    (GOOD + " ok" * 60, "too_long"),
])
def test_malformed_llm_lines_are_rejected_with_a_reason(line, reason):
    assert check_line(line, TAGS, set()) == (None, reason)


def test_frame_key_ignores_values_and_punctuation():
    assert frame_key("Call [PHONE] nine [PHONE], ok!") == frame_key("call [PHONE] eight two [PHONE] ok")


def test_prompts_follow_the_paper_and_carry_the_tags():
    sim = build_prompt("similar", TAGS, ["ex one [PHONE] x [PHONE]"], 20)
    div = build_prompt("diverse", TAGS, ["ex one [PHONE] x [PHONE]"], 20)
    for msgs in (sim, div):
        text = msgs[0]["content"] + msgs[1]["content"]
        assert "generate a set of 20 new sentences" in text and "DO NOT ADD BULLET NUMBERS" in text
        assert tag_list(TAGS) in text
    assert '"ex one [PHONE] x [PHONE]"' in sim[1]["content"] and "Follow the structure" in sim[0]["content"]
    assert "ex one" not in div[1]["content"] and "creative and diverse" in div[0]["content"]


@pytest.mark.parametrize("line,tags,reason", [
    ("You are given a set of NER tags and must generate sentences", Counter(), "meta"),
    ("Your task is to write twenty sentences with the tags", Counter(), "meta"),
    ("I love creative writing and expressing myself every day", Counter(), "no_number"),
    ("the car S F V nine seven J, twenty fifteen model, mileage eighty thousand", Counter(), "untagged_pii"),
    ("hi [PERSON] Tan [PERSON] my other number is nine one two three four five six seven lah",
     Counter({"PERSON": 1}), "untagged_pii"),
    # numbers are spoken in the seed corpus; digits outside the values are another writing
    ("You need to pay for a new car. The car costs $30,000 over five years.", Counter(), "digits"),
    ("The police said the person was last seen at 3:00 PM at the park.", Counter(), "digits"),
    ("hi [PERSON] Tan [PERSON] the appointment is at 3 pm, see you lah", Counter({"PERSON": 1}), "digits"),
])
def test_lines_with_meta_talk_untagged_pii_or_no_numbers_are_rejected(line, tags, reason):
    assert check_line(line, tags, set()) == (None, reason)


def test_a_no_pii_line_with_confusable_numbers_is_accepted():
    parsed, why = check_line("the bill is forty nine ninety, bus one nine oh can reach", Counter(), set())
    assert why is None


def test_digits_inside_a_tagged_value_are_accepted():
    # the value is replaced by a fresh spoken one (augment.replace.fill_tags)
    parsed, why = check_line("hi [PERSON] Tan Wei Ming [PERSON] here, call me at [PHONE] 91234567 [PHONE] lah",
                             TAGS, set())
    assert why is None


def test_prompts_show_a_schema_not_a_sentence_and_diverse_lists_scenarios():
    sim = build_prompt("similar", TAGS, ["ex one [PHONE] x [PHONE]"], 20)[1]["content"]
    assert "[PERSON] <a full name> [PERSON] <words> [PHONE] <a phone number in words> [PHONE]" in sim
    assert "a bank hotline; a clinic appointment" in sim  # Similar asks for other situations too
    d0 = build_prompt("diverse", TAGS, [], 20, offset=0)[1]["content"]
    d1 = build_prompt("diverse", TAGS, [], 20, offset=1)[1]["content"]
    assert "a bank hotline; a clinic appointment" in d0 and "a family group chat" in d0
    assert d0 != d1 and "a clinic appointment; a parcel delivery" in d1
    none = build_prompt("diverse", Counter(), [], 5)[1]["content"]
    assert "no personal data" in none and "<" not in none


@pytest.mark.parametrize("tags", [TAGS, Counter()])
def test_similar_quotes_its_examples_inline_and_marks_them_taken(tags):
    # Qwen2.5-Coder-1.5B copied examples listed one per line as its first output lines
    ex = ["ok noted so the number is [PHONE] nine one [PHONE] lah", "my name [PERSON] Tan [PERSON] one"]
    user = build_prompt("similar", tags, ex, 20)[1]["content"]
    assert '"ok noted so the number is [PHONE] nine one [PHONE] lah" or "my name [PERSON] Tan [PERSON] one"' in user
    assert not any(line.strip() in ex for line in user.splitlines())  # no example stands on a line of its own
    assert "do NOT repeat them" in user and user.rstrip().endswith("numbers spelled out in words.")


def test_a_copied_seed_sentence_is_still_a_duplicate():
    seed = "ok noted ma'am, so the alternate number is [PHONE] nine five one three four [PHONE] and preferred time is morning"
    seen = {frame_key(seed)}
    assert check_line(seed, Counter({"PHONE": 1}), seen) == (None, "duplicate")
    other_value = seed.replace("nine five one three four", "eight eight two oh one")
    assert check_line(other_value, Counter({"PHONE": 1}), seen) == (None, "duplicate")


@pytest.mark.parametrize("line,tags", [
    ("[none: A family group chat about a trip, the hotel is two hundred dollars a night]", Counter()),
    ("call [PHONE] nine one two three [PHONE] or the [hotline] at eight pm", Counter({"PHONE": 1})),
])
def test_a_bracket_left_in_the_words_is_rejected(line, tags):
    # Qwen2.5-Coder-1.5B wrapped a no-PII line in "[none: ...]", copied from the prompt
    assert check_line(line, tags, set()) == (None, "bracket")


@pytest.mark.parametrize("line,reason", [
    ('The appointment is on [DATE] twenty first August nineteen eighty [DATE], bring along the documents." (um)',
     "bracket"),
    ("My accident was on [DATE] the second of May [DATE] (The accident happened on a specific day.)", "bracket"),
    ('The appointment is on [DATE] twenty first August nineteen eighty [DATE]," she said, bring the documents',
     "quote"),
])
def test_comments_in_parentheses_or_after_a_quote_are_rejected(line, reason):
    from collections import Counter as C

    assert check_line(line, C({"DATE": 1}), set()) == (None, reason)
    # the same sentence without the comment passes
    clean = line.split('"')[0].split(" (")[0] + " lah"
    assert check_line(clean, C({"DATE": 1}), set())[1] is None, clean


def test_a_value_then_a_clause_about_it_is_a_fragment_but_the_seed_style_is_not():
    from collections import Counter as C

    email = C({"EMAIL": 1})
    frag = "[EMAIL] tan wei at gmail dot com [EMAIL] the manager at the school office is asking for it"
    assert check_line(frag, email, set()) == (None, "fragment")
    assert check_line(frag.replace("[EMAIL] the", "[EMAIL], the"), email, set())[1] is None
    assert check_line("[PERSON] Hui Min [PERSON] ah, you coming for the makan tonight or not",
                      C({"PERSON": 1}), set())[1] is None


def test_no_seed_sentence_is_rejected_by_the_style_rules():
    from collections import Counter as C

    from deid_speech import models
    from deid_speech.augment.seed import load_split

    for split in ("train", "dev", "test"):
        for r in load_split(models.path("seed") / f"{split}.jsonl"):
            from deid_speech.types import parse_tagged

            tags = C(e.label for e in parse_tagged(r["tagged"])[1])
            # (one seed line opens with "sure," and is "meta": the older rule, kept)
            assert check_line(r["tagged"], tags, set())[1] not in (
                "bracket", "quote", "fragment", "digits", "value", "determiner", "placeholder"), r["tagged"]


C1 = Counter


@pytest.mark.parametrize("line,tags", [
    # a clause inside the tags (what a small model writes at temperature 0.6)
    ("please let [PHONE] know if you have any urgent issues [PHONE] ok lah", C1({"PHONE": 1})),
    ("the number is [PHONE] nine one two three [PHONE] can call anytime", C1({"PHONE": 1})),  # too few digits
    ("so my IC is [NRIC] my IC number [NRIC] can check or not", C1({"NRIC": 1})),
    ("send it to [EMAIL] my office mail [EMAIL] before five can", C1({"EMAIL": 1})),
    ("send it to [EMAIL] tan wei at gmail [EMAIL] before five can", C1({"EMAIL": 1})),  # no dot
    ("you can ask [PERSON] the manager [PERSON] about it tomorrow", C1({"PERSON": 1})),
    ("you can ask [PERSON] Agent Seven [PERSON] about it tomorrow", C1({"PERSON": 1})),
    ("the appointment is on [DATE] the day after my exam [DATE] right", C1({"DATE": 1})),
    ("my card [CREDIT_CARD] the blue one from the bank [CREDIT_CARD] got declined leh", C1({"CREDIT_CARD": 1})),
])
def test_a_value_that_does_not_read_as_its_label_is_rejected(line, tags):
    assert check_line(line, tags, set()) == (None, "value")


@pytest.mark.parametrize("line,tags", [
    ("call [PHONE] plus six five nine one two three four five six seven [PHONE] lah", C1({"PHONE": 1})),
    ("my IC [NRIC] S one two three double four five six D [NRIC] ok", C1({"NRIC": 1})),
    ("email [EMAIL] siti underscore nabilah at hotmail dot com [EMAIL] can", C1({"EMAIL": 1})),
    ("ask for [PERSON] Muhammad Hafiz bin Osman [PERSON] at the counter", C1({"PERSON": 1})),
    ("ask for [PERSON] Kavitha d/o Muthu [PERSON] at the counter", C1({"PERSON": 1})),
    ("born on [DATE] twenty ninth of September two thousand and fifteen [DATE] one", C1({"DATE": 1})),
    ("the van [CAR_PLATE] S G X two three eight H [CAR_PLATE] parked outside", C1({"CAR_PLATE": 1})),
    # the slot repair's placeholder is the label itself, replaced later
    ("please call me at [PHONE] phone [PHONE] after lunch can", C1({"PHONE": 1})),
])
def test_values_in_their_spoken_shape_are_accepted(line, tags):
    line = line.replace("call me", "call me, ma'am,")  # an apostrophe is no quote
    assert check_line(line, tags, set())[1] is None


@pytest.mark.parametrize("line", [
    "the operator asked for a [PHONE] nine one two three four five six seven [PHONE] to connect you",
    "could you give me your [PHONE] nine one two three four five six seven [PHONE] number please",
])
def test_a_value_after_an_article_or_a_possessive_is_rejected(line):
    assert check_line(line, C1({"PHONE": 1}), set()) == (None, "determiner")


@pytest.mark.parametrize("line,reason", [
    ("My phone number is xxxxxxxx, please call [PHONE] nine one two three four five six seven [PHONE] ok",
     "placeholder"),
    ("I'm sorry, but as an AI I will say [PHONE] nine one two three four five six seven [PHONE] ok", "meta"),
    ("I can't assist with that, [PHONE] nine one two three four five six seven [PHONE] is not valid", "meta"),
    # a quotation in single quotes (what the grammar's ban on double quotes led to); apostrophes stay
    ("The clerk explained, 'the number is [PHONE] nine one two three four five six seven [PHONE]. '", "quote"),
])
def test_placeholders_and_refusals_are_rejected(line, reason):
    assert check_line(line, C1({"PHONE": 1}), set()) == (None, reason)


@pytest.mark.parametrize("strategy", ["similar", "diverse"])
def test_a_line_copied_from_the_prompt_is_an_echo(strategy):
    # Gemma-3-270M gave back the no-PII instruction, and it reads as a PII-free sentence with numbers
    messages = build_prompt(strategy, Counter(), [], 20, 0)
    copied = ("Every line is one plain sentence with no names and no ID, phone or card numbers, but with "
              "other numbers such as prices, times, bus numbers or amounts, in words.")
    assert copied in messages[1]["content"]
    assert check_line(copied, Counter(), set())[1] is None
    assert check_line(copied, Counter(), set(), prompt_key(messages)) == (None, "echo")
    # a new sentence that shares the prompt's words is no echo
    new = "eh the bus number is one seven four, and it comes at nine thirty lah"
    assert check_line(new, Counter(), set(), prompt_key(messages))[1] is None


def test_a_quoted_example_said_again_is_no_echo_of_the_instructions():
    # the Similar prompt quotes seed sentences; the template backend re-voices them: those lines are
    # judged as duplicates by their frame, not rejected as instructions given back
    example = "call me at [PHONE] nine one two three four five six seven [PHONE] ok"
    messages = build_prompt("similar", Counter({"PHONE": 1}), [example], 20, 0)
    assert example in messages[1]["content"]
    key = prompt_key(messages, [example])
    assert check_line("call me at [PHONE] nine one two three four five six seven [PHONE]", Counter({"PHONE": 1}),
                      set(), key)[1] is None
    assert normalise(example) not in key and "do not repeat them" in key  # the instructions stay
