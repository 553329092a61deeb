import random

import pytest

from deid_speech.spoken import normalize_tokens, verbalize, verbalize_digits, verbalize_email


def symbols(text: str) -> list[str]:
    return [s.text for _, _, s in normalize_tokens(text.split())]


@pytest.mark.parametrize("spoken,written", [
    ("nine eight seven six five four three two", "98765432"),
    ("nine eight double seven six five four three", "98776543"),
    ("six triple zero one two three four", "60001234"),
    ("nine oh one two three four five six", "90123456"),
    ("ninety eight seventy six fifty four thirty two", "98765432"),
    ("9123 4567", "91234567"),
    ("9123-4567", "91234567"),
    ("S one two three four five six seven D", "S1234567D"),
    ("S1234567D.", "S1234567D"),
    ("S -1 -2 -3 -4 -5 -6 -7 -D", "S1234567D"),
    ("S K B nine zero one two C", "SKB9012C"),
    ("SKB 9012C", "SKB9012C"),
    ("plus six five nine one two three four five six seven", "6591234567"),
    ("+65 9123 4567", "6591234567"),
    ("nineteen eighty seven", "1987"),
    ("two thousand and one", "2001"),
    ("eighty eight thousand four hundred", "88400"),
    ("eighty eight thousand four hundred and twenty five", "88425"),
    ("five thousand one hundred twenty three", "5123"),
    ("two hundred forty three", "243"),
    ("two thousand twenty four", "2024"),
    ("nine eight hundred", "9800"),
    ("oh one two dash three four five six seven dash eight", "012345678"),
    ("nine eight, uh, seven six", "9876"),
])
def test_normalizer_reads_spoken_forms(spoken, written):
    assert written in symbols(spoken)


@pytest.mark.parametrize("spoken,pairs", [
    ("eighty six", True),
    ("eighty, six", False),
    ("ninety. Six", False),
    ("was it twenty? five", False),  # a question mark ends the pair too, as in cue_runs
    ("twenty! five", False),
    ("thirty- two", False),
    ("eighty oh", False),  # "oh" is no unit: eighty, then zero
])
def test_a_tens_word_pairs_with_the_unit_after_it_unless_punctuation_ends_it(spoken, pairs):
    from deid_speech.spoken import digit_pair

    tens, unit = spoken.rsplit(" ", 1)
    assert digit_pair(tens.split()[-1], unit) is pairs
    digits = "".join(symbols(spoken))
    assert (len(digits) == 2 and digits[1] != "0") is pairs


def test_normalizer_maps_each_symbol_to_its_token():
    runs = normalize_tokens("my number is nine double eight 7".split())
    first, last, sym = runs[0]
    assert (first, last, sym.text) == (3, 6, "9887")
    assert sym.owner == (3, 5, 5, 6)


def test_ordinary_words_that_sound_like_letters_do_not_start_runs():
    assert symbols("oh I see you are there") == []
    assert symbols("can you call me") == []


@pytest.mark.parametrize("value", ["S1234567D", "91234567", "4111111111111111", "SKB9012C", "K7654321Z",
                                   "0123456789", "+6598770012", "60001234"])
def test_verbalizer_and_normalizer_round_trip(value):
    expect = value.lstrip("+")
    for seed in range(12):
        spoken = verbalize(value, random.Random(seed))
        assert expect in symbols(spoken), (value, spoken)


@pytest.mark.parametrize("style", ["single", "oh", "repeat", "pairs"])
def test_every_digit_style_round_trips(style):
    rng = random.Random(3)
    for _ in range(200):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(7, 16)))
        spoken = verbalize_digits(digits, rng, style)
        assert symbols(spoken) == [digits], (digits, spoken)


def test_email_verbalizer_speaks_at_and_dot():
    assert verbalize_email("tan.wm88@gmail.com", random.Random(0)).endswith("at gmail dot com")
    assert "underscore" in verbalize_email("remy_lee@yahoo.com.sg")


@pytest.mark.parametrize("spoken,not_read", [
    ("eighty eight thousand four hundred", "8800400"),  # a mileage, not seven digits
    ("two hundred forty three hundred", "2004300"),
    ("twelve thousand three hundred and five", "12000300"),
])
def test_spoken_quantities_are_numbers_not_digit_strings(spoken, not_read):
    assert symbols(spoken) and all(not_read not in s and len(s) <= 5 for s in symbols(spoken))


@pytest.mark.parametrize("text,expected", [
    ("S nine eight seven six five four three D for David", ["S9876543D"]),
    ("S nine eight seven six five four three, D for delta.", ["S9876543D"]),
    ("T zero one two three four five six G as in golf", ["T0123456G"]),
    ("ess for Sugar K for king B for boy nine zero one two Z for zebra", ["SKB9012Z"]),
    ("sierra kilo bravo nine zero one two zulu", ["SKB9012Z"]),  # the spelling alphabet
    ("passport K one two three four five six seven, E for echo", ["K1234567E"]),
    ("see for Charlie", ["C"]),  # a letter name spelled
    ("S double you B one two three four C", ["SWB1234C"]),  # W's name, not "UU"
])
def test_a_letter_spelled_with_a_word_is_that_letter(text, expected):
    assert symbols(text) == expected


def test_a_spelled_letter_runs_from_the_letter_to_the_word_that_spells_it():
    (first, last, sym), = normalize_tokens("S nine one D for David".split())
    assert (first, last, sym.text, sym.owner[-1], sym.last(3)) == (0, 5, "S91D", 3, 5)
    (first, last, sym), = normalize_tokens("ess for Sugar K for king nine one".split())
    assert (first, last, sym.text, sym.owner[:2], sym.last(0), sym.last(1)) == (0, 7, "SK91", (0, 3), 2, 5)
    # the recogniser's "T4" for "T for", and a short word heard for a letter before "for alpha"
    (first, last, sym), = normalize_tokens("spelled T4 tango the for alpha nine".split())
    assert (first, last, sym.text) == (1, 6, "TA9")


@pytest.mark.parametrize("text,expected", [
    ("K seven five two nine oh eight three B for me", ["K7529083B"]),  # "for" is a preposition there
    ("passport K five oh six six V for the booking", ["K5066V"]),
    ("I for instance think so", []),
    ("S for small, M for medium", ["S", "M"]),  # sizes
    ("we played golf at the hotel", []),  # a spelling-alphabet word alone is a weak letter
    ("this is Victor speaking", []),
    ("A for a while", []),
])
def test_look_alikes_of_a_spelled_letter_are_read_as_before(text, expected):
    assert symbols(text) == expected
