"""Tests for deid_speech.values: every generated value is valid and values vary.

Validity is checked with oracles written here, independently of deid_speech.validators:
the NRIC rule in ICA's "P = 11 - remainder" form, Luhn with a doubling lookup table, and
the plate rule in SgWiki's "(1 - sum) mod 19" form.
"""
from __future__ import annotations

import datetime
import random
import re

import pytest

from deid_speech.types import LABELS
from deid_speech.validators import BANK_ACCOUNT_FORMATS
from deid_speech.values import (
    GENERATORS,
    NAME_POOLS,
    gen_bank_account,
    gen_card,
    gen_date,
    gen_email,
    gen_nric,
    gen_passport,
    gen_person,
    gen_phone,
    gen_plate,
)

N = 2000

# --- independent oracles ----------------------------------------------------------------

# prefix -> (constant added to the sum, letters for P = 1..11 where P = 11 - sum % 11)
_ICA_TABLES = {
    "S": (0, "ABCDEFGHIZJ"), "T": (4, "ABCDEFGHIZJ"),
    "F": (0, "KLMNPQRTUWX"), "G": (4, "KLMNPQRTUWX"),
    "M": (3, "KLJNPQRTUWX"),
}


def _nric_ok(nric: str) -> bool:
    if not re.fullmatch(r"[STFGM]\d{7}[A-Z]", nric):
        return False
    constant, letters = _ICA_TABLES[nric[0]]
    s1 = constant + sum(int(d) * w for d, w in zip(nric[1:8], (2, 7, 6, 5, 4, 3, 2)))
    p = 11 - s1 % 11
    return letters[p - 1] == nric[8]


_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)  # digit sum of 2*d


def _luhn_ok(number: str) -> bool:
    odd = sum(int(d) for d in number[::-2])               # rightmost, then every second one
    even = sum(_DOUBLED[int(d)] for d in number[-2::-2])  # the ones in between, doubled
    return (odd + even) % 10 == 0


def _plate_ok(plate: str) -> bool:
    m = re.fullmatch(r"([A-Z]{1,3})([1-9]\d{0,3})([A-Z])", plate)
    if m is None:
        return False
    letters, number, check = m.groups()
    a, b = ([0] + [ord(c) - 64 for c in letters])[-2:]
    n1, n2, n3, n4 = (int(d) for d in number.zfill(4))
    total = 9 * a + 4 * b + 5 * n1 + 4 * n2 + 3 * n3 + 2 * n4
    return "ZABCDEGHJKLMPRSTUXY"[(1 - total) % 19] == check


def test_oracles_agree_with_published_examples():
    assert _nric_ok("S1234567D") and _nric_ok("M1234567K") and not _nric_ok("M1234567L")
    assert _luhn_ok("4111111111111111") and not _luhn_ok("4111111111111112")
    assert _plate_ok("SBS3240E") and _plate_ok("SG5999Z") and _plate_ok("E115B")


def _many(gen, seed: int = 1234, n: int = N) -> list:
    rng = random.Random(seed)
    return [gen(rng) for _ in range(n)]


# --- checksummed values -----------------------------------------------------------------


def test_generated_nrics_have_correct_check_letter():
    values = _many(gen_nric)
    assert all(_nric_ok(v) for v in values)
    assert {v[0] for v in values} == set("STFGM")
    assert len(set(values)) > 0.99 * N


@pytest.mark.parametrize("prefix", ["S", "T", "F", "G", "M", "g"])
def test_generated_nrics_keep_the_requested_prefix(prefix):
    rng = random.Random(7)
    values = [gen_nric(rng, prefix=prefix) for _ in range(200)]
    assert all(v[0] == prefix.upper() and _nric_ok(v) for v in values)


def test_generated_s_and_t_nrics_start_with_a_plausible_birth_year():
    rng = random.Random(3)
    s_heads = {gen_nric(rng, "S")[1:3] for _ in range(500)}
    assert all(head >= "68" or head[0] in "0123" for head in s_heads)
    t_years = {int(gen_nric(rng, "T")[1:3]) for _ in range(500)}
    assert max(t_years) <= datetime.date.today().year - 2000


def test_generated_cards_pass_luhn_with_real_issuer_prefixes():
    values = _many(gen_card)
    assert all(re.fullmatch(r"[3-6]\d{12,18}", v) and _luhn_ok(v) for v in values)
    amex = [v for v in values if v[:2] in ("34", "37")]
    assert amex and all(len(v) == 15 for v in amex)
    assert {v[0] for v in values} == set("3456")
    assert len(set(values)) == N


def test_generated_plates_have_correct_check_letter():
    values = _many(gen_plate)
    assert all(_plate_ok(v) for v in values)
    private = [v for v in values if re.fullmatch(r"S[A-Z]{2}\d+[A-Z]", v)]
    assert len(private) > N // 2
    assert not any(c in "IO" for v in private for c in v[1:3])
    assert len({re.match(r"[A-Z]+", v)[0] for v in values}) > 50  # many prefixes
    assert len(set(values)) > 0.95 * N


# --- shaped values ----------------------------------------------------------------------


def test_generated_passports_are_k_or_e_seven_digits_and_a_letter():
    values = _many(gen_passport)
    assert all(re.fullmatch(r"[KE]\d{7}[A-Z]", v) for v in values)
    assert len(set(values)) == N


def test_generated_phones_are_singapore_numbers():
    values = _many(gen_phone)
    assert all(re.fullmatch(r"[689]\d{7}", v) for v in values)
    assert {v[0] for v in values} == set("689")
    assert len(set(values)) > 0.99 * N
    rng = random.Random(5)
    assert all(re.fullmatch(r"\+65[689]\d{7}", gen_phone(rng, plus65=True)) for _ in range(100))


def test_generated_bank_accounts_follow_their_bank_format():
    pairs = _many(gen_bank_account)
    assert all(d.isdigit() and len(d) == sum(BANK_ACCOUNT_FORMATS[bank]) for d, bank in pairs)
    assert {bank for _, bank in pairs} == set(BANK_ACCOUNT_FORMATS)
    assert len({d for d, _ in pairs}) == N


def test_generated_emails_are_well_formed_and_varied():
    values = _many(gen_email)
    pattern = r"[a-z0-9_]+(?:\.[a-z0-9_]+)*@(?:[a-z0-9-]+\.)+[a-z]{2,}"
    assert all(re.fullmatch(pattern, v) for v in values)
    assert len(set(values)) > 0.9 * N
    assert len({v.split("@")[1] for v in values}) >= 10
    assert any(".sg" in v.split("@")[1] for v in values)


def test_email_from_a_given_name_uses_that_name():
    rng = random.Random(11)
    values = [gen_email(rng, name="Nur Aisyah binte Ismail") for _ in range(50)]
    assert all(re.match(r"[a-z._]*(nur|aisyah|ismail)", v) for v in values)
    assert not any("binte" in v for v in values)
    assert re.fullmatch(r"\w+(?:[._]\w+)*@[\w.-]+", gen_email(rng, name="Cher"))


# --- names and dates --------------------------------------------------------------------


def test_name_pools_have_enough_names_per_community():
    assert set(NAME_POOLS) == {"chinese", "malay", "indian", "eurasian", "western"}
    for pool in NAME_POOLS.values():
        assert len(set(pool.male) | set(pool.female)) >= 40
        assert len(set(pool.family)) >= 25


def test_generated_people_cover_singapore_naming_conventions():
    values = _many(gen_person)
    assert all(re.fullmatch(r"[A-Z][A-Za-z'/ ]+", v) and "  " not in v for v in values)
    assert all(2 <= len(v.split()) <= 6 for v in values)
    for marker in (" bin ", " binte ", " s/o ", " d/o "):
        assert any(marker in v for v in values), marker
    assert any(v.startswith(("Muhammad ", "Mohd ", "Mohamed ", "Ahmad ")) for v in values)
    assert any(v.startswith(("Nur ", "Siti ", "Nurul ")) for v in values)
    assert len(set(values)) > 0.7 * N


def test_generated_dates_fall_in_the_requested_years():
    values = _many(gen_date)
    assert all(datetime.date(1940, 1, 1) <= d <= datetime.date(2015, 12, 31) for d in values)
    assert len({d.year for d in values}) > 60
    rng = random.Random(2)
    assert all(gen_date(rng, 2000, 2000).year == 2000 for _ in range(100))


# --- registry ---------------------------------------------------------------------------


def test_registry_covers_every_label_with_written_strings():
    assert set(GENERATORS) == set(LABELS)
    rng = random.Random(0)
    for label, gen in GENERATORS.items():
        values = [gen(rng) for _ in range(200)]
        assert all(isinstance(v, str) and v == v.strip() and v for v in values), label
        assert len(set(values)) > 150, label
    assert all(_nric_ok(GENERATORS["NRIC"](rng)) for _ in range(200))
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", GENERATORS["DATE"](rng)) for _ in range(200))


def test_generators_are_reproducible_with_the_same_seed():
    for gen in GENERATORS.values():
        assert _many(gen, seed=99, n=50) == _many(gen, seed=99, n=50)
