"""Validators for Singapore PII in its WRITTEN form (``S1234567D``, ``SBS3240E``, ...).

Pure Python, no dependencies. Every ``is_*`` function accepts lowercase input and ignores
spaces and dashes (``"s123-4567 d"`` is read as ``S1234567D``); the email check only trims
surrounding whitespace, since dashes are legal inside email addresses.

Sources of truth for the check-character algorithms:

* NRIC/FIN (S, T, F, G): weights 2,7,6,5,4,3,2; add 4 for T and G; remainder r = sum % 11;
  S/T -> ``"JZIHGFEDCBA"[r]``, F/G -> ``"XWUTRQPNMLK"[r]``. This is the long-published
  ICA rule (see the reference cited in opengovsg/FormSG ``shared/utils/nric-validation.ts``).
* FIN M series (issued from 1 Jan 2022): same weights, add 3, r = sum % 11,
  P = 11 - r, letter = ``"KLJNPQRTUWX"[P - 1]``, i.e. ``"XWUTRQPNJLK"[r]``. Source:
  opengovsg/FormSG ``isMFinSeriesValid``, whose test fixes ``M1234567K`` as valid and
  ``M1234567L`` as invalid. ``"KLJNPQRTUWX"`` indexed directly by r is *wrong*
  (it gives ``M1234567X``). Caveat: this is the government's own open-source form
  validator, but not an ICA publication; we found no real M-series number to check it on.
* Vehicle plates (LTA): the last two prefix letters (A=1..Z=26; a one-letter prefix is
  padded on the left with 0) and the number padded to 4 digits, weights 9,4,5,4,3,2,
  sum % 19 indexes ``"AZYXUTSRPMLKJHGEDCB"``. Checked against SgWiki's "Vehicle Checksum
  Formula" examples SBS 3240 E and SG 5999 Z, and against published plates such as
  E 115 B and GY 55 C. (SBS 3229 gives P, not Z.)
* Cards: Luhn (ISO/IEC 7812-1).

Passport and bank-account numbers carry no published check digit, so those checks only
look at the shape.
"""
from __future__ import annotations

import re

_NRIC_SERIES: dict[str, tuple[int, str]] = {
    # prefix: (offset added to the weighted sum, check letters indexed by sum % 11)
    "S": (0, "JZIHGFEDCBA"),
    "T": (4, "JZIHGFEDCBA"),
    "F": (0, "XWUTRQPNMLK"),
    "G": (4, "XWUTRQPNMLK"),
    "M": (3, "XWUTRQPNJLK"),
}
_NRIC_WEIGHTS = (2, 7, 6, 5, 4, 3, 2)

_PLATE_WEIGHTS = (9, 4, 5, 4, 3, 2)
_PLATE_LETTERS = "AZYXUTSRPMLKJHGEDCB"

_NRIC_RE = re.compile(r"([STFGM])([0-9]{7})([A-Z])")
_PLATE_SHAPE_RE = re.compile(r"[A-Z]{1,3}[0-9]{1,4}[A-Z]")
_PLATE_RE = re.compile(r"([A-Z]{1,3})([1-9][0-9]{0,3})([A-Z])")
_PHONE_RE = re.compile(r"(?:\+?65)?[689][0-9]{7}")
_PASSPORT_RE = re.compile(r"[KE][0-9]{7}[A-Z]")
_CARD_RE = re.compile(r"[3-6][0-9]{12,18}")
_EMAIL_RE = re.compile(
    r"[a-z0-9_%+-]+(?:\.[a-z0-9_%+-]+)*"  # local part: no leading/trailing/double dots
    r"@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}",  # domain labels + alphabetic TLD
    re.IGNORECASE,
)

# Digit-group layout of personal (savings/current) account numbers as printed on
# statements. Lengths are well attested (bank payout guides list DBS 10, POSB 9, UOB 10,
# Standard Chartered 10, OCBC branch+account, HSBC branch+account); the grouping within a
# number is best knowledge and only matters for how numbers are written or read aloud.
BANK_ACCOUNT_FORMATS: dict[str, tuple[int, ...]] = {
    "DBS": (3, 1, 6),                 # 10 digits, e.g. 005-2-312891 (first 3 = branch)
    "POSB": (3, 5, 1),                # 9 digits, e.g. 084-10239-5 (POSB Savings)
    "OCBC": (3, 6, 3),                # 12 digits, e.g. 601-234567-001 (older ones: 10)
    "UOB": (3, 3, 3, 1),              # 10 digits, e.g. 910-203-101-2
    "Standard Chartered": (2, 1, 6, 1),  # 10 digits, e.g. 18-0-364585-2
    "Maybank": (4, 4, 3),             # 11 digits (grouping least certain)
    "HSBC": (3, 6, 3),                # 12 digits: 3-digit branch + 9, e.g. 146-172002-492
    "Citibank": (10,),                # 10 digits, usually written ungrouped
}
_BANK_ACCOUNT_LENGTHS = frozenset(sum(groups) for groups in BANK_ACCOUNT_FORMATS.values())


def _compact(s: str) -> str:
    """Uppercase and drop whitespace and dashes: the canonical written form."""
    return re.sub(r"[\s\-]", "", s).upper()


def _is_digits(s: str) -> bool:
    """ASCII digits only (``str.isdigit`` also accepts e.g. superscripts)."""
    return bool(s) and all("0" <= c <= "9" for c in s)


# --- NRIC / FIN ---------------------------------------------------------------------


def nric_check_letter(prefix: str, digits: str) -> str:
    """Check letter of the NRIC/FIN ``prefix + digits`` (prefix in S, T, F, G, M).

    >>> nric_check_letter("S", "1234567")
    'D'

    Raises ValueError for an unknown prefix or if ``digits`` is not 7 ASCII digits.
    The M-series rule follows opengovsg/FormSG (see the module docstring); it has not been
    checked against a real M-series number.
    """
    series = _NRIC_SERIES.get(prefix.upper())
    if series is None:
        raise ValueError(f"NRIC prefix must be one of {''.join(_NRIC_SERIES)}, got {prefix!r}")
    if len(digits) != 7 or not _is_digits(digits):
        raise ValueError(f"NRIC needs exactly 7 digits, got {digits!r}")
    offset, letters = series
    total = offset + sum(w * int(d) for w, d in zip(_NRIC_WEIGHTS, digits))
    return letters[total % 11]


def is_nric_shaped(s: str) -> bool:
    """Prefix S/T/F/G/M, 7 digits and any final letter (check letter not verified)."""
    return _NRIC_RE.fullmatch(_compact(s)) is not None


def is_valid_nric(s: str) -> bool:
    """NRIC/FIN shape with the correct check letter, e.g. ``S1234567D``."""
    m = _NRIC_RE.fullmatch(_compact(s))
    return m is not None and nric_check_letter(m[1], m[2]) == m[3]


# --- Luhn and payment cards ---------------------------------------------------------


def luhn_check_digit(partial: str) -> str:
    """The digit that makes ``partial + digit`` pass the Luhn check.

    >>> luhn_check_digit("7992739871")
    '3'
    """
    if not _is_digits(partial):
        raise ValueError(f"Luhn needs digits, got {partial!r}")
    total = 0
    # Once the check digit is appended, the rightmost digit of ``partial`` is doubled.
    for i, c in enumerate(reversed(partial)):
        d = int(c)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return str(-total % 10)


def luhn_ok(digits: str) -> bool:
    """Whether a digit string (at least 2 digits) passes the Luhn check."""
    digits = _compact(digits)
    return len(digits) >= 2 and _is_digits(digits) and luhn_check_digit(digits[:-1]) == digits[-1]


def is_valid_card(s: str) -> bool:
    """13-19 digits, first digit 3/4/5/6 (Amex/JCB, Visa, Mastercard, Discover/UnionPay), Luhn."""
    digits = _compact(s)
    return _CARD_RE.fullmatch(digits) is not None and luhn_ok(digits)


# --- vehicle plates -----------------------------------------------------------------


def plate_check_letter(prefix: str, number: int) -> str:
    """LTA check letter for plate ``prefix number``, e.g. ``("SBS", 3240) -> "E"``.

    ``prefix`` is 1-3 letters; ``number`` is 1..9999. Only the last two prefix letters
    count, and a one-letter prefix counts as (0, letter).
    """
    prefix = prefix.upper()
    if not (1 <= len(prefix) <= 3 and all("A" <= c <= "Z" for c in prefix)):
        raise ValueError(f"plate prefix must be 1-3 letters, got {prefix!r}")
    if not 1 <= number <= 9999:
        raise ValueError(f"plate number must be 1..9999, got {number}")
    letter_values = [ord(c) - ord("A") + 1 for c in prefix[-2:]]
    values = [0] * (2 - len(letter_values)) + letter_values + [int(d) for d in f"{number:04d}"]
    total = sum(w * v for w, v in zip(_PLATE_WEIGHTS, values))
    return _PLATE_LETTERS[total % 19]


def is_plate_shaped(s: str) -> bool:
    """1-3 letters, 1-4 digits, one letter (check letter not verified)."""
    return _PLATE_SHAPE_RE.fullmatch(_compact(s)) is not None


def is_valid_plate(s: str) -> bool:
    """Plate shape (number without leading zeros) with the correct LTA check letter."""
    m = _PLATE_RE.fullmatch(_compact(s))
    return m is not None and plate_check_letter(m[1], int(m[2])) == m[3]


# --- phone, passport, bank account, email -------------------------------------------


def is_valid_sg_phone(s: str) -> bool:
    """8 digits starting 6 (fixed line), 8 or 9 (mobile), with optional ``+65``/``65``."""
    return _PHONE_RE.fullmatch(_compact(s)) is not None


def is_valid_passport(s: str) -> bool:
    """Singapore passport: K (or the newer E) + 7 digits + letter. No check letter is
    published, so the final letter is not verified."""
    return _PASSPORT_RE.fullmatch(_compact(s)) is not None


def is_plausible_bank_account(s: str) -> bool:
    """Digits only, with the length of one of :data:`BANK_ACCOUNT_FORMATS` (9-12)."""
    digits = _compact(s)
    return _is_digits(digits) and len(digits) in _BANK_ACCOUNT_LENGTHS


def is_valid_email(s: str) -> bool:
    """Simple ``local@domain.tld`` check (no quoted local parts, no IP-literal domains)."""
    return _EMAIL_RE.fullmatch(s.strip()) is not None
