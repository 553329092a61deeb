"""Tests for deid_speech.validators against published examples and literal tables.

Expected values are written out literally (worked out independently of the module, with
the ICA "P = 11 - remainder" form of the NRIC rule and SgWiki's form of the plate rule),
so a bug in validators.py cannot hide by agreeing with itself.
"""
from __future__ import annotations

import string

import pytest

from deid_speech.validators import (
    BANK_ACCOUNT_FORMATS,
    is_nric_shaped,
    is_plate_shaped,
    is_plausible_bank_account,
    is_valid_card,
    is_valid_email,
    is_valid_nric,
    is_valid_passport,
    is_valid_plate,
    is_valid_sg_phone,
    luhn_check_digit,
    luhn_ok,
    nric_check_letter,
    plate_check_letter,
)

# --- NRIC / FIN -------------------------------------------------------------------------

# Digit strings whose weighted sums leave every remainder 0..10 (before the prefix offset):
# "000000d" gives 2d (0,2,4,6,8,10,1,3,5,7) and "0000030" gives 9.
_ALL_REMAINDER_DIGITS = [f"000000{d}" for d in range(10)] + ["0000030"]
_EXPECTED_LETTERS = {  # check letter for each entry of _ALL_REMAINDER_DIGITS, in order
    "S": "JIGECAZHFDB",
    "T": "GECAZHFDBJI",
    "F": "XURPMKWTQNL",
    "G": "RPMKWTQNLXU",
    "M": "TQNLXURPJKW",
}


@pytest.mark.parametrize("prefix", sorted(_EXPECTED_LETTERS))
def test_nric_check_letter_matches_the_full_table_for_every_remainder(prefix):
    got = "".join(nric_check_letter(prefix, d) for d in _ALL_REMAINDER_DIGITS)
    assert got == _EXPECTED_LETTERS[prefix]


@pytest.mark.parametrize("nric", [
    "S1234567D", "T1234567J", "F1234567N", "G1234567X", "S0000001I",
    "M1234567K",  # opengovsg/FormSG's M-series test fixture
    "s1234567d", "S 1234567 D", "s-1234567-d", "  T1234567J ",
])
def test_known_good_nrics_validate(nric):
    assert is_valid_nric(nric)
    assert is_nric_shaped(nric)


@pytest.mark.parametrize("nric", [
    "S1234567A",   # wrong check letter
    "M1234567L",   # FormSG's invalid M-series fixture
    "M1234567X",   # what indexing "KLJNPQRTUWX" by the remainder would wrongly give
    "S123456D", "S12345678D", "S1234567", "1234567D", "",
    "A1234567D", "X1234567D",  # unknown prefixes
    "SI234567D",  # letter I instead of digit 1
    "S１234567D",  # full-width digit
])
def test_known_bad_nrics_do_not_validate(nric):
    assert not is_valid_nric(nric)


def test_nric_shape_accepts_any_final_letter_but_not_bad_prefixes():
    assert is_nric_shaped("S1234567A") and is_nric_shaped("m7654321z")
    assert not is_nric_shaped("K1234567A") and not is_nric_shaped("S1234567")


def test_exactly_one_check_letter_validates_each_nric_body():
    for prefix in "STFGM":
        good = [c for c in string.ascii_uppercase if is_valid_nric(f"{prefix}8712345{c}")]
        assert len(good) == 1


@pytest.mark.parametrize("prefix,digits", [("A", "1234567"), ("S", "123456"), ("S", "12345a7")])
def test_nric_check_letter_rejects_bad_input(prefix, digits):
    with pytest.raises(ValueError):
        nric_check_letter(prefix, digits)


# --- Luhn and cards ---------------------------------------------------------------------


def test_luhn_check_digit_matches_published_examples():
    assert luhn_check_digit("7992739871") == "3"  # Wikipedia's worked example
    assert luhn_check_digit("411111111111111") == "1"
    assert luhn_ok("79927398713") and not luhn_ok("79927398710")


def test_luhn_catches_every_single_digit_error():
    number = "4012888888881881"
    for i, c in enumerate(number):
        for wrong in set(string.digits) - {c}:
            assert not luhn_ok(number[:i] + wrong + number[i + 1:])


@pytest.mark.parametrize("card", [
    "4111111111111111", "4012888888881881", "4222222222222",     # Visa (16 and 13 digits)
    "5555555555554444", "5105105105105100",                      # Mastercard
    "378282246310005", "371449635398431",                        # American Express
    "6011111111111117", "6011000990139424",                      # Discover
    "3530111333300000", "3566002020360505",                      # JCB
    "6200000000000005", "6205500000000000004",                   # UnionPay (16 and 19)
    "4111 1111 1111 1111", "4111-1111-1111-1111",
])
def test_published_test_card_numbers_validate(card):
    assert is_valid_card(card)


@pytest.mark.parametrize("card", [
    "4111111111111112",      # Luhn fails
    "2223003122003222",      # Luhn ok, but Mastercard 2-series is outside 3/4/5/6
    "7000000000000005",      # Luhn ok, first digit 7
    "411111111117",          # Luhn ok, 12 digits
    "41111111111111111115",  # Luhn ok, 20 digits
    "4111111111111111x", "",
])
def test_bad_card_numbers_do_not_validate(card):
    assert not is_valid_card(card)


# --- vehicle plates ---------------------------------------------------------------------


@pytest.mark.parametrize("plate", [
    "SBS3240E", "SG5999Z",  # SgWiki "Vehicle Checksum Formula" worked examples
    "SKV6201B",             # Wikipedia's format example
    "E115B", "E75H", "EL1A", "GY55C", "GY8822C", "PA9707R", "EA4254T",
    "SGF2306R", "SJK6655U", "SHA9587P", "SBS9683X", "XD3634X",
    "skv 6201 b", "SKV-6201-B",
])
def test_published_plates_validate(plate):
    assert is_valid_plate(plate)
    assert is_plate_shaped(plate)


@pytest.mark.parametrize("plate", [
    "SBS3229Z",   # the real check letter is P
    "SKV6201C", "SKV0621B", "SKV12345B", "SKVA6201B", "6201B", "SKV6201", "SKV0B", "",
])
def test_bad_plates_do_not_validate(plate):
    assert not is_valid_plate(plate)


def test_plate_check_letter_worked_examples():
    assert plate_check_letter("SBS", 3229) == "P"
    assert plate_check_letter("sbs", 3240) == "E"
    assert plate_check_letter("E", 25) == "C"
    assert plate_check_letter("E", 115) == "B"


def test_plate_check_letter_ignores_the_first_of_three_prefix_letters():
    assert all(plate_check_letter("SGF", n) == plate_check_letter("XGF", n) for n in range(1, 500))


def test_plate_check_letters_never_use_f_i_n_o_q_v_w():
    letters = {plate_check_letter("SKV", n) for n in range(1, 10000)}
    assert letters == set("ABCDEGHJKLMPRSTUXYZ")


@pytest.mark.parametrize("prefix,number", [("SKV", 0), ("SKV", 10000), ("", 1), ("SKVA", 1)])
def test_plate_check_letter_rejects_bad_input(prefix, number):
    with pytest.raises(ValueError):
        plate_check_letter(prefix, number)


def test_plate_shape_does_not_check_the_letter():
    assert is_plate_shaped("SKV6201Z") and is_plate_shaped("S1Z")
    assert not is_plate_shaped("SKV6201") and not is_plate_shaped("SKVA6201B")


# --- phone, passport, bank account, email -----------------------------------------------


@pytest.mark.parametrize("phone,ok", [
    ("91234567", True), ("81234567", True), ("61234567", True), ("+6591234567", True),
    ("6591234567", True), ("+65 9123 4567", True), ("9123-4567", True),
    ("71234567", False), ("51234567", False), ("9123456", False), ("912345678", False),
    ("+6571234567", False), ("+6691234567", False), ("9123456a", False), ("", False),
])
def test_sg_phone_numbers(phone, ok):
    assert is_valid_sg_phone(phone) is ok


@pytest.mark.parametrize("passport,ok", [
    ("K1234567A", True), ("E1234567B", True), ("k1234567a", True), ("K 1234567 A", True),
    ("S1234567A", False), ("K123456A", False), ("K12345678A", False), ("K1234567", False),
    ("KK234567A", False),
])
def test_passport_numbers(passport, ok):
    assert is_valid_passport(passport) is ok


def test_bank_account_formats_have_the_documented_lengths():
    lengths = {bank: sum(groups) for bank, groups in BANK_ACCOUNT_FORMATS.items()}
    assert lengths["DBS"] == 10 and lengths["POSB"] == 9 and lengths["UOB"] == 10
    assert lengths["OCBC"] == 12 and lengths["Standard Chartered"] == 10
    assert {"Maybank", "HSBC", "Citibank"} <= set(lengths)


@pytest.mark.parametrize("account,ok", [
    ("0052312891", True), ("005-2-312891", True), ("084102395", True),
    ("146172002492", True), ("910 203 101 2", True),
    ("12345678", False), ("1234567890123", False), ("00523128a1", False), ("", False),
])
def test_plausible_bank_accounts(account, ok):
    assert is_plausible_bank_account(account) is ok


@pytest.mark.parametrize("email,ok", [
    ("tan.weiming@gmail.com", True), ("Jason_Tan87@yahoo.com.sg", True), ("a@b.co", True),
    ("priya+work@starhub.net.sg", True), ("wm-tan@acme-trading.com.sg", True),
    (" x@y.com ", True),
    ("tan.weiming@gmail", False), ("@gmail.com", False), ("tan@", False),
    ("tan..wm@gmail.com", False), (".tan@gmail.com", False), ("tan wm@gmail.com", False),
    ("tan@gmail.c0m", False), ("tan@@gmail.com", False), ("tan@-gmail.com", False),
])
def test_emails(email, ok):
    assert is_valid_email(email) is ok
