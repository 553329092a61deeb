"""Tests for deid_speech.surrogates: surrogates are valid, of the original's type and form,
consistent per value (and per key across instances and processes), and never the original.

Cards are also checked with python-stdnum's Luhn and phones with libphonenumber where those
packages are installed (they are test-only extras, not project dependencies).
"""
from __future__ import annotations

import datetime
import os
import random
import re
import subprocess
import sys
import time

import pytest

import deid_speech.surrogates as surrogates_module
from deid_speech.augment.replace import spoken_value
from deid_speech.redact import value_key
from deid_speech.spoken import MONTH_NAMES, verbalize
from deid_speech.surrogates import Surrogates
from deid_speech.types import LABELS
from deid_speech.validators import (
    BANK_ACCOUNT_FORMATS,
    is_plausible_bank_account,
    is_valid_card,
    is_valid_email,
    is_valid_nric,
    is_valid_passport,
    is_valid_plate,
    is_valid_sg_phone,
    luhn_check_digit,
)
from deid_speech.values import NAME_POOLS, gen_nric, gen_person, gen_phone

try:
    from stdnum import luhn as stdnum_luhn
except ImportError:  # optional extra oracle
    stdnum_luhn = None
try:
    import phonenumbers
except ImportError:
    phonenumbers = None

N = 300
NUMBER_LABELS = ("NRIC", "PASSPORT_NUM", "PHONE", "CREDIT_CARD", "CAR_PLATE", "BANK_ACCOUNT")


def _phone_ok(symbols: str) -> bool:
    if not is_valid_sg_phone(symbols):
        return False
    return phonenumbers is None or phonenumbers.is_valid_number(phonenumbers.parse(symbols[-8:], "SG"))


def _card_ok(card: str) -> bool:
    symbols = re.sub(r"[ -]", "", card)
    return is_valid_card(symbols) and (stdnum_luhn is None or stdnum_luhn.is_valid(symbols))


VALID = {
    "NRIC": is_valid_nric,
    "PASSPORT_NUM": is_valid_passport,
    "PHONE": _phone_ok,
    "CREDIT_CARD": _card_ok,
    "CAR_PLATE": is_valid_plate,
    "BANK_ACCOUNT": is_plausible_bank_account,
}


def has_digit(s: str) -> bool:
    return re.search(r"[0-9]", s) is not None


def skeleton(s: str) -> str:
    """The layout of a written value: digits -> 9, upper letters -> A, lower -> a."""
    return re.sub(r"[a-z]", "a", re.sub(r"[A-Z]", "A", re.sub(r"[0-9]", "9", s)))


def layouts(value: str, rng: random.Random) -> list[str]:
    """Written renderings of one value: compact, spelled out with spaces, dashed pairs,
    lower case, and a random separator between any two symbols."""
    sep = "".join(c + rng.choice(["", "", " ", "-"]) for c in value).rstrip(" -")
    return [value, " ".join(value), "-".join(value[k:k + 2] for k in range(0, len(value), 2)),
            value.lower(), sep]


def originals(label: str, seed: int = 0):
    """(original, form, value) triples: values.py values written in several layouts and
    spoken."""
    rng = random.Random(seed)
    for _ in range(N):
        written, spoken = spoken_value(label, rng)
        yield spoken, "spoken", written
        for w in layouts(written, rng):
            yield w, "written", written


# --- validity, type and form ------------------------------------------------------------


@pytest.mark.parametrize("label", NUMBER_LABELS)
def test_number_surrogates_are_valid_new_and_keep_form_and_layout(label):
    s = Surrogates(key=b"test")
    n_layout = 0
    for orig, form, value in originals(label):
        out = s.replace(label, orig)
        symbols = value_key(label, out)
        assert VALID[label](symbols), (orig, out, symbols)
        assert symbols != value_key(label, orig), (orig, out)
        assert has_digit(out) == (form == "written"), (orig, out)
        # a spelled-out final "O" reads as zero: then the original's symbols are not its value
        if form == "written" and value_key(label, orig) == value.lstrip("+"):
            same_shape = skeleton(value_key(label, orig)) == skeleton(symbols)
            if label != "CAR_PLATE":  # other labels always keep the original's shape
                assert same_shape, (orig, out)
            if same_shape:
                assert skeleton(out) == skeleton(orig), (orig, out)
                n_layout += 1
    assert n_layout >= 0.9 * 5 * N


def test_plates_keep_prefix_length_and_number_of_digits():
    s = Surrogates(key=b"plates")
    # (value_key reads a spaced lower-case prefix, "sh 123 a", as "123A": not a plate)
    for orig in ["SBS 3240 E", "SKV6201B", "SH 123 A", "GX 55 C", "fba1234k", "PA 9 B"]:
        out = s.replace("CAR_PLATE", orig)
        assert is_valid_plate(out) and skeleton(out) == skeleton(orig), (orig, out)


def test_nric_keeps_its_prefix_letter_written_and_spoken():
    rng = random.Random(1)
    s = Surrogates(rng=random.Random(2))
    for prefix in "STFGM":
        for _ in range(50):
            nric = gen_nric(rng, prefix)
            for orig in (nric, " ".join(nric), nric.lower(), verbalize(nric, rng)):
                out = s.replace("NRIC", orig)
                assert value_key("NRIC", out)[0] == prefix and is_valid_nric(value_key("NRIC", out)), (orig, out)


def test_phone_keeps_fixed_line_or_mobile_and_its_country_code():
    rng = random.Random(3)
    s = Surrogates(key=b"phones")
    for _ in range(200):
        number = gen_phone(rng)
        for orig in (number, f"{number[:4]} {number[4:]}", f"+65 {number[:4]} {number[4:]}",
                     f"65{number}", f"+65-{number}"):
            out = s.replace("PHONE", orig)
            assert _phone_ok(value_key("PHONE", out)), (orig, out)
            local = re.sub(r"\D", "", out)[-8:]
            assert (local[0] == "6") == (number[0] == "6"), (orig, out)
            assert out.startswith(orig[:orig.index(number[0]) if orig.startswith(("+", "65")) else 0])
            assert skeleton(out) == skeleton(orig), (orig, out)


def test_spoken_phone_with_plus_keeps_plus():
    out = Surrogates(key=b"k").replace("PHONE", "plus six five nine one two three four five six seven")
    assert out.startswith("plus six five ") and not has_digit(out)
    assert _phone_ok(value_key("PHONE", out))


@pytest.mark.parametrize("length", range(13, 20))
def test_card_keeps_length_13_to_19(length):
    rng = random.Random(length)
    s = Surrogates(key=b"cards")
    for _ in range(100):
        body = rng.choice("3456") + "".join(rng.choice("0123456789") for _ in range(length - 2))
        card = body + luhn_check_digit(body)
        out = s.replace("CREDIT_CARD", card)
        assert len(out) == length and _card_ok(out) and out != card


@pytest.mark.parametrize("orig", ["4111 1111 1111", "41", "4111111111111111111111"])
def test_card_of_an_impossible_length_gets_16_digits(orig):
    out = Surrogates(key=b"cards").replace("CREDIT_CARD", orig)
    assert len(re.sub(r"\D", "", out)) == 16 and _card_ok(out)


def test_bank_account_keeps_a_real_bank_length():
    rng = random.Random(4)
    s = Surrogates(key=b"banks")
    for groups in BANK_ACCOUNT_FORMATS.values():
        for _ in range(30):
            digits = "".join(rng.choice("0123456789") for _ in range(sum(groups)))
            out = s.replace("BANK_ACCOUNT", digits)
            assert len(out) == len(digits) and out.isdigit() and out != digits


def test_email_surrogates_are_valid_and_keep_form():
    s = Surrogates(key=b"mail")
    for orig, form, value in originals("EMAIL"):
        if form == "written" and orig != value:  # layouts() mangles emails
            continue
        out = s.replace("EMAIL", orig)
        if "@" in orig:
            assert is_valid_email(out), (orig, out)
        else:
            assert "@" not in out and " at " in f" {out} " and " dot " in f" {out} ", (orig, out)
            assert is_valid_email(value_key("EMAIL", out)), (orig, out)
        assert value_key("EMAIL", out) != value_key("EMAIL", orig)
    assert "@" in s.replace("EMAIL", "john dot tan at gmail.com")  # ".com": written


DATE_FORMATS = ["%d %B %Y", "%B %d, %Y", "%d/%m/%Y", "%Y-%m-%d", "%d %b %Y", "%A, %d %B %Y",
                "%d.%m.%y", "%d %B", "%B %Y"]


@pytest.mark.parametrize("fmt", DATE_FORMATS)
def test_written_dates_keep_their_format_and_are_real_dates(fmt):
    rng = random.Random(5)
    s = Surrogates(key=b"dates")
    for _ in range(N):
        d = datetime.date.fromordinal(rng.randint(datetime.date(1930, 1, 1).toordinal(),
                                                  datetime.date(2030, 12, 31).toordinal()))
        orig = d.strftime(fmt)
        out = s.replace("DATE", orig)
        f = fmt
        if d.month == 5:  # "May": full name or abbreviation, either reading is right
            f = fmt.replace("%B", "%b") if " May " in f" {out} " else fmt.replace("%b", "%B")
        new = datetime.datetime.strptime(out, f).date()  # same format, a real date
        if "%Y" in fmt and "%d" in fmt:
            assert new != d, (orig, out)
        else:
            assert out != orig, (orig, out)
        if "%A" in fmt:
            assert out.startswith(new.strftime("%A"))  # the weekday follows the new date


def test_date_ordinals_case_and_us_order():
    s = Surrogates(key=b"dates")
    out = s.replace("DATE", "21st of MARCH 1999")
    assert re.fullmatch(r"\d{1,2}(st|nd|rd|th) of [A-Z]+ \d{4}", out), out
    day = int(re.match(r"\d+", out)[0])
    assert out[len(str(day)):].startswith({1: "st", 2: "nd", 3: "rd", 21: "st", 22: "nd", 23: "rd", 31: "st"}.get(day, "th"))
    datetime.datetime.strptime(re.sub(r"(?<=\d)(st|nd|rd|th)", "", out).title(), "%d of %B %Y")
    us = s.replace("DATE", "03/25/2001")  # 25 cannot be a month: month first
    datetime.datetime.strptime(us, "%m/%d/%Y")


def test_spoken_dates_stay_spoken():
    rng = random.Random(6)
    s = Surrogates(key=b"dates")
    months = {m.lower() for m in MONTH_NAMES}
    for _ in range(N):
        _, spoken = spoken_value("DATE", rng)
        out = s.replace("DATE", spoken)
        assert not has_digit(out) and months & set(out.lower().split()), (spoken, out)
        assert value_key("DATE", out) != value_key("DATE", spoken)


# --- PERSON -----------------------------------------------------------------------------

COMMUNITY_OF = {w.lower(): c for c, pool in NAME_POOLS.items()
                for e in pool.male + pool.female + pool.family for w in e.split()}


def communities(name: str) -> set[str]:
    return {COMMUNITY_OF[w] for w in name.lower().split() if w in COMMUNITY_OF}


def pool_name(community: str, rng: random.Random) -> str:
    """A name from one community's pool only (no English given name, no bin/s/o)."""
    pool = NAME_POOLS[community]
    given, family = rng.choice(pool.male + pool.female), rng.choice(pool.family)
    return f"{family} {given}" if community == "chinese" else f"{given} {family}"


@pytest.mark.parametrize("community", list(NAME_POOLS))
def test_person_keeps_community_and_word_count(community):
    rng = random.Random(7)
    s = Surrogates(key=b"people")
    for _ in range(200):
        orig = pool_name(community, rng)
        for words in (orig.split(), orig.split()[:1], orig.split()[-1:]):
            o = " ".join(words)
            out = s.replace("PERSON", o)
            assert len(out.split()) == len(words), (o, out)
            found = communities(out)
            # Chinese names may carry an English given name; Malay ones "Muhammad", "bin"
            allowed = {community, "western"} if community == "chinese" else {community}
            assert community in found and found <= allowed, (o, out)
            assert value_key("PERSON", out) != value_key("PERSON", o)


def test_person_from_gen_person_keeps_word_count_and_case():
    rng = random.Random(8)
    s = Surrogates(key=b"people")
    for _ in range(N):
        orig = gen_person(rng)
        for o in (orig, orig.lower(), orig.upper()):
            out = s.replace("PERSON", o)
            assert len(out.split()) == len(o.split()), (o, out)
            assert out != o and value_key("PERSON", out) != value_key("PERSON", o)
            if o == o.lower():
                assert out == out.lower()
            if o == o.upper():
                assert out == out.upper()


def test_person_single_word_and_titles():
    s = Surrogates(key=b"people")
    assert s.replace("PERSON", "Tan") in NAME_POOLS["chinese"].family
    assert s.replace("PERSON", "Samantha") in NAME_POOLS["western"].female
    out = s.replace("PERSON", "Mr Tan")
    assert out.startswith("Mr ") and out[3:] in NAME_POOLS["chinese"].family and out != "Mr Tan"
    out = s.replace("PERSON", "Faizal bin Rahman")
    assert out.split()[1] in ("bin", "binte") and len(out.split()) == 3


# --- consistency and keys --------------------------------------------------------------


def sample(label: str, n: int = 100, seed: int = 9) -> list[str]:
    rng = random.Random(seed)
    return [spoken_value(label, rng)[rng.random() < 0.5] for _ in range(n)]


@pytest.mark.parametrize("label", LABELS)
def test_same_value_same_surrogate_within_an_instance(label):
    for s in (Surrogates(), Surrogates(key=b"k")):
        values = sample(label)
        first = [s.replace(label, v) for v in values]
        assert [s.replace(label, v) for v in reversed(values)] == first[::-1]


def test_mentions_of_one_value_in_two_forms_share_the_surrogate_value():
    s = Surrogates()
    written = s.replace("PHONE", "9123 4567")
    spoken = s.replace("PHONE", "nine one two three four five six seven")
    assert value_key("PHONE", written) == value_key("PHONE", spoken)
    assert has_digit(written) and not has_digit(spoken)
    assert s.replace("PERSON", "Tan Boon Huat") == s.replace("PERSON", "tan boon huat").title()


@pytest.mark.parametrize("label", LABELS)
def test_keyed_surrogates_agree_across_instances_and_differ_across_keys(label):
    values = sample(label)
    a = [Surrogates(key=b"secret").replace(label, v) for v in values]
    b = [Surrogates(key=b"secret", rng=random.Random(1)).replace(label, v) for v in reversed(values)]
    c = [Surrogates(key=b"other").replace(label, v) for v in values]
    assert a == b[::-1]
    assert sum(x != y for x, y in zip(a, c)) >= 0.9 * len(values)


@pytest.mark.parametrize("label", LABELS)
def test_unkeyed_instances_differ_and_rng_reproduces(label):
    values = sample(label)
    a = [Surrogates().replace(label, v) for v in values]
    b = [Surrogates().replace(label, v) for v in values]
    assert sum(x != y for x, y in zip(a, b)) >= 0.9 * len(values)
    c = Surrogates(rng=random.Random(42))
    d = Surrogates(rng=random.Random(42))
    assert [c.replace(label, v) for v in values] == [d.replace(label, v) for v in values]


def test_keyed_surrogates_agree_across_processes():
    code = ("import sys; from deid_speech.surrogates import Surrogates; s = Surrogates(key=b'x'); "
            "print([s.replace(l, t) for l, t in [('PERSON', 'Tan Boon Huat'), ('NRIC', 'S1234567D'), "
            "('PHONE', 'nine one two three four five six seven'), ('DATE', '12 March 1985'), "
            "('EMAIL', 'john.tan@gmail.com'), ('CAR_PLATE', 'SBS 3240 E')]])")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1


# --- never the original, garbled input, errors ----------------------------------------


def test_redraws_when_the_generator_returns_the_original(monkeypatch):
    real = surrogates_module.gen_phone
    calls = iter(["91234567"] * 3)
    monkeypatch.setattr(surrogates_module, "gen_phone", lambda rng, **kw: next(calls, None) or real(rng))
    assert value_key("PHONE", Surrogates(key=b"k").replace("PHONE", "9123 4567")) != "91234567"
    names = iter(["Tan Wei Ming"] * 3)
    real_person = surrogates_module.gen_person
    monkeypatch.setattr(surrogates_module, "gen_person", lambda rng: next(names, None) or real_person(rng))
    assert Surrogates(key=b"k").replace("PERSON", "tan wei ming") != "tan wei ming"


GARBLED = ["", " ", "my IC is", "ate great to one", "???", "12", "S", "uh huh lah", "!!!",
           "S1234", "Ｓ１２３", "é ü ß 漢字", "double", "plus", "at dot", "0" * 40, "31/02/2020",
           "99 99 99", "the of", "Mr", "s/o", "-", "\n\t"]


@pytest.mark.parametrize("label", LABELS)
def test_garbled_originals_get_a_valid_value_in_the_implied_form(label):
    s = Surrogates(key=b"garbled")
    for orig in GARBLED:
        out = s.replace(label, orig)
        assert out.strip(), (orig, out)
        if label in VALID:
            assert VALID[label](value_key(label, out)), (orig, out)
            assert has_digit(out) == has_digit(orig), (orig, out)
        elif label == "EMAIL":
            assert is_valid_email(value_key("EMAIL", out)), (orig, out)


def test_punctuation_around_the_span_is_kept():
    s = Surrogates(key=b"k")
    assert s.replace("NRIC", "S1234567D.").endswith(".")
    out = s.replace("PHONE", "(9123 4567),")
    assert out.startswith("(") and out.endswith("),") and skeleton(out) == "(9999 9999),"


def test_unknown_label_raises():
    with pytest.raises(ValueError):
        Surrogates().replace("ADDRESS", "1 Raffles Place")


def test_fast():
    values = [(label, v) for label in LABELS for v in sample(label, 50, seed=10)]
    s = Surrogates(key=b"speed")
    t = time.perf_counter()
    for label, v in values:
        s.replace(label, v)
    assert (time.perf_counter() - t) / len(values) < 1e-3


def test_a_surrogate_is_never_another_real_value_of_the_call():
    """With few names to choose from, a surrogate for one real name would often be another
    real name said in the same call: those are avoided (found in CI: "Chan Hong" -> "Rachel
    Tan" while Rachel Tan was the caller)."""
    from deid_speech.redact import Operator, RedactOptions, TextRedactor
    from deid_speech.types import Span

    real = ["Rachel Tan", "Chan Hong", "Tan Wei Ming", "Siti Nurhaliza", "Rajesh Kumar"]
    spans = [Span(i, i + 0.5, "PERSON", 1.0, "t", name) for i, name in enumerate(real)]
    for seed in range(200):
        tr = TextRedactor(RedactOptions(Operator(text="surrogate"), key=f"a-key-of-16-chars-{seed}".encode()))
        tr.avoid(spans)
        out = {tr.replacement(s).lower() for s in spans}
        assert not out & {n.lower() for n in real}, (seed, out)


def test_a_secret_gets_fresh_digits_of_its_length_and_keeps_none_of_its_words():
    s = Surrogates(key=b"k")
    pin = s.replace("SECRET", "four four nine one")
    assert not has_digit(pin) and len(value_key("SECRET", pin)) == 4 and value_key("SECRET", pin) != "4491"
    otp = s.replace("SECRET", "482913")
    assert re.fullmatch(r"\d{6}", otp) and otp != "482913"
    password = s.replace("SECRET", "sunshine one two three")
    assert "sunshine" not in password and len(value_key("SECRET", password)) == 4
