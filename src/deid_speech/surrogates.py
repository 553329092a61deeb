"""Surrogates: realistic, valid, type-consistent values that replace detected PII in a
redacted transcript, so it stays readable where ``[PHONE_1]`` placeholders would not.

``Surrogates(key).replace("PHONE", "9123 4567") -> "8456 1290"``. The rules:

* **Valid, same type.** The written value comes from :mod:`deid_speech.values` and passes
  :mod:`deid_speech.validators`. What the original tells is kept where it can be read:
  the NRIC/FIN prefix letter (S/T/F/G/M), the passport series (K/E), the phone's class
  (6 fixed line, 8/9 mobile; libphonenumber's unallocated 99/800/6623/694 blocks are
  avoided) and its ``+65``/``65``, the card length (13-19 digits, else 16), the bank
  account length (one of a real bank's), the plate's prefix length and number of digits.
* **Same form.** An original with no digit is spoken, so the surrogate is spoken
  (:func:`~deid_speech.spoken.verbalize`, ``verbalize_email``, ``verbalize_date``). A
  written one keeps its layout when its symbols match the surrogate's one for one
  (``"S 9 1 2 3 4 5 6 D"``, ``"9123-4567"``, ``"s1234567d"``), else takes a plain grouped
  form. Emails are written when they hold ``@`` or ``.com``-like text, else spoken. Dates
  keep their written format (``12 March 1985``, ``Mar 12, 1985``, ``12/03/85``,
  ``1985-03-12``, weekday names, ordinal suffixes). Punctuation around the span stays.
* **PERSON** keeps the community (from the name pools' tokens, ``bin``, ``s/o``; unknown:
  drawn with the pools' weights), the number of words, leading titles (Mr, Mdm, Dr...) and
  all-lower/all-upper case.
* **Consistent.** One instance maps one ``(label, value_key)`` to one surrogate value; each
  mention is rendered in its own form, deterministically (same text, same output). With a
  ``key`` the value is a function of HMAC-SHA256(key, "surrogate" NUL label NUL value_key)
  (apart from the hash operator's digest of the same value): linked across
  calls and processes, not revealing. Without one, values are drawn from ``rng`` (by
  default seeded from ``os.urandom``: every run differs).
* **Never the original** (by value_key; numbers also by their symbols); a
  garbled original gets a fresh valid value in the form it implies. Unknown label:
  ValueError; any string never raises.
"""
from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import random
import re
from collections.abc import Callable

from deid_speech.spoken import (
    DIGIT_WORDS,
    MONTH_NAMES,
    TEEN_WORDS,
    TENS_WORDS,
    clean_token,
    normalize_tokens,
    ordinal_words,
    verbalize,
    verbalize_date,
    verbalize_email,
)
from deid_speech.types import check_label
from deid_speech.validators import BANK_ACCOUNT_FORMATS, luhn_check_digit, plate_check_letter
from deid_speech.values import (
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
    gen_secret,
)

_TRIES = 40  # bounded redraws: "not the original", a length or shape to match
_NUMBER_LABELS = frozenset({"NRIC", "PASSPORT_NUM", "PHONE", "CREDIT_CARD", "CAR_PLATE", "BANK_ACCOUNT", "SECRET"})
# Blocks libphonenumber's SG metadata does not allocate (no mobile 99, toll-free 800, ...).
_UNALLOCATED_PHONE = ("99", "800", "6623", "694")
_TITLES = frozenset("mr mrs ms miss mdm madam dr prof uncle auntie aunty".split())
# name token -> (community, "male" / "female" / "family"); no token is in two communities
_NAMES = {w.lower(): (c, role) for c, pool in NAME_POOLS.items()
          for role in ("male", "female", "family") for e in getattr(pool, role) for w in e.split()}
_NAMES.update({"bin": ("malay", ""), "binte": ("malay", ""), "s/o": ("indian", ""), "d/o": ("indian", "")})
_CONNECTORS = frozenset({"bin", "binte", "s/o", "d/o"})
_MONTHS = [m.lower() for m in MONTH_NAMES]
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_BANK_LENGTHS = frozenset(sum(groups) for groups in BANK_ACCOUNT_FORMATS.values())
# words of a spoken date ("twelfth of March nineteen eighty five")
_NUMBER_WORDS = frozenset(w for n in range(1, 32) for w in ordinal_words(n).split()) | frozenset(
    [*DIGIT_WORDS, *TEEN_WORDS, *TENS_WORDS, "hundred", "thousand"])
_EMAIL_WRITTEN = re.compile(r"@|\.(?:com|net|org|edu|gov|sg|io|co|my)\b", re.I)


class Surrogates:
    """Replaces PII mentions by surrogates; see the module docstring for the rules."""

    def __init__(self, key: bytes | None = None, rng: random.Random | None = None):
        self._key = key
        self._rng = rng or random.Random(int.from_bytes(os.urandom(32), "big"))
        self._avoid: dict[str, set[str]] = {}
        self._values: dict[tuple[str, str], tuple[object, int]] = {}

    def avoid(self, label: str, text: str) -> None:
        """Never give any mention a surrogate equal to ``text``: a real value said elsewhere
        in the call (a surrogate for one name must not be another real name)."""
        self._avoid.setdefault(label, set()).add(_value_key(label, text))

    def replace(self, label: str, text: str) -> str:
        """The surrogate of one mention ``text`` of a ``label`` entity."""
        check_label(label)
        vk = _value_key(label, text)
        if (label, vk) not in self._values:
            self._values[label, vk] = self._fresh(label, text, vk)
        value, render_seed = self._values[label, vk]
        return _render(label, value, text, random.Random(render_seed))

    def _fresh(self, label: str, text: str, vk: str) -> tuple[object, int]:
        if self._key is not None:
            seed = hmac.new(self._key, f"surrogate\x00{label}\x00{vk}".encode(), hashlib.sha256).digest()
        else:
            seed = self._rng.getrandbits(256).to_bytes(32, "big")
        rng = random.Random(seed)
        for _ in range(_TRIES):
            value, render_seed = _GENERATORS[label](rng, vk), rng.getrandbits(64)
            out = _render(label, value, text, random.Random(render_seed))
            key = _value_key(label, out)
            if key != vk and value != vk and key not in self._avoid.get(label, ()):
                break
        return value, render_seed


def _value_key(label: str, text: str) -> str:
    from deid_speech.redact import value_key  # here: redact may import this module
    return value_key(label, text)


def _symbols(text: str) -> str:
    """Digits and capital letters read from ``text`` (written or spoken), all runs joined."""
    return "".join(s.text for _, _, s in normalize_tokens(text.split()))


def _draw(gen: Callable[[], str], ok: Callable[[str], bool], tries: int = _TRIES) -> str:
    """The first of up to ``tries`` values from ``gen`` that is ``ok``, else the last one."""
    for _ in range(tries):
        value = gen()
        if ok(value):
            break
    return value


# --- values: (rng, value_key of the original) -> written value --------------------------
# The value depends on the value_key alone (for numbers: the symbols; for names: the
# lower-case words), so every mention of one value gets the same surrogate value.


def _nric(rng: random.Random, vk: str) -> str:
    m = re.search(r"([STFGM])\d", vk)
    return gen_nric(rng, m[1] if m else None)


def _passport(rng: random.Random, vk: str) -> str:
    m = re.search(r"([KE])\d", vk)
    value = _draw(lambda: gen_passport(rng), lambda v: v[-1] != "O")  # spoken, a final O reads as zero
    return m[1] + value[1:] if m else value


def _phone(rng: random.Random, vk: str) -> str:
    m = re.fullmatch(r"(65)?([689])\d{7}", vk)
    landline = bool(m) and m[2] == "6"

    def number() -> str:
        n = gen_phone(rng)
        if m and landline != (n[0] == "6"):
            n = ("6" if landline else rng.choice("98")) + n[1:]
        return n

    return (m[1] if m and m[1] else "") + _draw(number, lambda n: not n.startswith(_UNALLOCATED_PHONE))


def _card(rng: random.Random, vk: str) -> str:
    length = len(vk) if vk.isdigit() and 13 <= len(vk) <= 19 else 16
    card = _draw(lambda: gen_card(rng), lambda c: len(c) == length)
    if len(card) != length:  # no issuer drawn with that length: keep the issuer prefix
        body = (card[:-1] + "".join(rng.choice("0123456789") for _ in range(length)))[:length - 1]
        card = body + luhn_check_digit(body)
    return card


def _bank_account(rng: random.Random, vk: str) -> str:
    if not (vk.isdigit() and len(vk) in _BANK_LENGTHS):
        return gen_bank_account(rng)[0]
    return _draw(lambda: gen_bank_account(rng)[0], lambda a: len(a) == len(vk), 200)


def _plate(rng: random.Random, vk: str) -> str:
    m = re.fullmatch(r"([A-Z]{1,3})([1-9]\d{0,3})[A-Z]", vk)
    if not m:
        return gen_plate(rng)
    # same prefix length (2 letters: 12% of draws; 1 letter, "E": under 1%, may fail)
    plate = _draw(lambda: gen_plate(rng), lambda p: len(re.match("[A-Z]+", p)[0]) == len(m[1]), 100)
    prefix, n = re.match("[A-Z]+", plate)[0], len(m[2])
    number = rng.randint(10 ** (n - 1), 10 ** n - 1)
    return f"{prefix}{number}{plate_check_letter(prefix, number)}"


def _split_titles(words: list[str]) -> tuple[list[str], list[str]]:
    k = 0
    while k < len(words) - 1 and clean_token(words[k]) in _TITLES:
        k += 1
    return words[:k], words[k:]


def _community(words: list[str]) -> str | None:
    votes = [_NAMES[w][0] for w in map(clean_token, words) if w in _NAMES]
    order = list(NAME_POOLS)  # ties: the pools' order (Chinese first: "John Tan")
    return min(votes, key=lambda c: (-votes.count(c), order.index(c)), default=None)


def _person(rng: random.Random, vk: str) -> str:
    words = _split_titles(vk.split())[1]
    n, community = max(1, len(words)), _community(words)
    if n == 1:
        if community is None:
            return gen_person(rng).split()[0]
        role = _NAMES.get(clean_token(words[0]), (community, ""))[1]
        pool = NAME_POOLS[community]
        names = getattr(pool, role) if role else pool.male + pool.female
        return rng.choice([w for w in names if " " not in w] or [w for w in pool.family if " " not in w])

    joined = _CONNECTORS & {clean_token(w) for w in words}  # "bin", "s/o": the surrogate says it too

    def ok(name: str) -> bool:
        return len(name.split()) == n and community in (None, _community(name.split())) and \
            bool(joined) == bool(_CONNECTORS & {clean_token(w) for w in name.split()})

    name = _draw(lambda: gen_person(rng), ok)  # gen_person keeps each community's naming
    if ok(name):
        return name
    # a shape gen_person does not make: given names and a family name, n words in all
    pool = NAME_POOLS[community or _community(name.split()) or "chinese"]
    given_names, given = rng.choice((pool.male, pool.female)), []
    while len(given) < n - 1:
        given += rng.choice(given_names).split()
    family = rng.choice([f for f in pool.family if " " not in f])
    return " ".join([family] + given[:n - 1] if community == "chinese" else given[:n - 1] + [family])


def _secret(rng: random.Random, vk: str) -> str:
    """Fresh digits, as many as the secret's symbols (4 if it held fewer than 4): a PIN
    stays a PIN's length; no digit of a password said in words is kept."""
    return gen_secret(rng, max(4, sum(c.isdigit() for c in vk)))


_GENERATORS: dict[str, Callable[[random.Random, str], object]] = {
    "PERSON": _person,
    "NRIC": _nric,
    "PASSPORT_NUM": _passport,
    "PHONE": _phone,
    "EMAIL": lambda rng, vk: gen_email(rng),
    "CREDIT_CARD": _card,
    "CAR_PLATE": _plate,
    "BANK_ACCOUNT": _bank_account,
    "DATE": lambda rng, vk: _no_leap_day(gen_date(rng)),
    "SECRET": _secret,
}


def _no_leap_day(d: datetime.date) -> datetime.date:
    """29 February is valid only with its year, and a format may drop the year."""
    return d.replace(day=28) if (d.month, d.day) == (2, 29) else d


# --- rendering: the value in the original's form ---------------------------------------


def _core(text: str) -> tuple[str, str, str]:
    """(leading punctuation, the entity, trailing punctuation)."""
    m = re.fullmatch(r"([^\w+]*)(.*?)(\W*)", text, re.S)
    return (m[1], m[2], m[3]) if m[2] else ("", text, "")


def _case_like(model: str, s: str) -> str:
    letters = [c for c in model if c.isalpha()]
    if letters and all(c.islower() for c in letters):
        return s.lower()
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return s.upper()
    return s


def _render(label: str, value, text: str, rng: random.Random) -> str:
    lead, core, trail = _core(text)
    written = re.search(r"[0-9]", core) is not None
    if label in _NUMBER_LABELS:
        out = _same_layout(core, value) or _grouped(label, value, core) if written \
            else _spoken(label, value, core, rng)
    elif label == "EMAIL":
        out = value if _EMAIL_WRITTEN.search(core) else verbalize_email(value, rng)
    elif label == "DATE":
        out = _date(value, core, rng)
    else:
        out = " ".join(_split_titles(core.split())[0] + [value])
    return lead + _case_like(core, out) + trail


def _spoken(label: str, value: str, core: str, rng: random.Random) -> str:
    """``value`` in words; digit by digit where a mix of styles would read back otherwise
    ("ninety six seventy" + "one eight..." reads 9671...)."""
    spoken = verbalize(_grouped(label, value, core), rng)
    return spoken if _symbols(spoken) == value else verbalize(_grouped(label, value, core), rng, "single")


def _same_layout(core: str, value: str) -> str | None:
    """``core`` with its symbols replaced one for one by ``value``'s (same case), if ``core``
    is written symbols only and they are as many and of the same kinds as ``value``'s."""
    slots = [i for i, c in enumerate(core) if c.isascii() and c.isalnum()]
    if (len(slots) != len(value) or "".join(core[i] for i in slots).upper() != _symbols(core.upper())
            or any(core[i].isdigit() != v.isdigit() for i, v in zip(slots, value))):
        return None
    out = list(core)
    for i, v in zip(slots, value):
        out[i] = v.lower() if core[i].islower() else v
    return "".join(out)


def _grouped(label: str, value: str, core: str) -> str:
    """The plain written form: phone ``+65 9123 4567``, card in fours, account per bank."""
    def chunks(sizes: tuple[int, ...], sep: str) -> str:
        starts = [sum(sizes[:k]) for k in range(len(sizes))]
        return sep.join(value[s:s + n] for s, n in zip(starts, sizes))

    n = len(value)
    if label == "PHONE":
        plus = "+" if value[:-8] and ("+" in core or "plus" in core.lower().split()) else ""
        return plus + " ".join(x for x in (value[:-8], value[-8:-4], value[-4:]) if x)
    if label == "CREDIT_CARD":
        return chunks((4, 6, 5) if n == 15 else tuple(min(4, n - k) for k in range(0, n, 4)), " ")
    if label == "BANK_ACCOUNT":
        return chunks(next((g for g in BANK_ACCOUNT_FORMATS.values() if sum(g) == n), (n,)), "-")
    return value


def _ordinal_suffix(day: int) -> str:
    return "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _calendar_names(word: str) -> list[str] | None:
    """The month or weekday list a token names, in full or abbreviated ("Mar", "Sept")."""
    w = word.lower()
    return next((names for names in (_MONTHS, _WEEKDAYS)
                 if any(n == w or (3 <= len(w) <= 4 and n.startswith(w)) for n in names)), None)


def _date(d: datetime.date, core: str, rng: random.Random) -> str:
    """``d`` in the format of ``core``: each day, month, year and weekday token of the
    original becomes ``d``'s, in the same style; spoken or unreadable originals are spoken."""
    tokens = list(re.finditer(r"(\d+)(st|nd|rd|th)?|[a-z]+", core, re.I))
    names = {i: _calendar_names(t[0]) for i, t in enumerate(tokens) if not t[1] and _calendar_names(t[0])}
    nums = [i for i, t in enumerate(tokens) if t[1]]
    if not nums and (not names or any(t[0].lower() in _NUMBER_WORDS for t in tokens)):
        return verbalize_date(d, rng)
    stray = [t[0] for i, t in enumerate(tokens) if not t[1] and i not in names
             and t[0].lower() not in ("of", "the", "on") and t[0].lower() not in _NUMBER_WORDS]
    if stray:  # words a date does not hold: a detection that took in other speech; write a plain date
        return f"{d.day} {_MONTHS[d.month - 1].title()} {d.year}"
    month_named = _MONTHS in names.values()
    if month_named:
        order = ["day", "year"]
    elif nums and len(tokens[nums[0]][1]) == 4:
        order = ["year", "month", "day"]  # 1985-03-12
    else:  # 12/03/1985: day first, as in Singapore, unless the second cannot be a month
        us = len(nums) > 1 and int(tokens[nums[0]][1]) <= 12 < int(tokens[nums[1]][1])
        order = ["month", "day", "year"] if us else ["day", "month", "year"]
    out, pos = [], 0
    for i, t in enumerate(tokens):
        if i in names:
            new = _MONTHS[d.month - 1] if names[i] is _MONTHS else _WEEKDAYS[d.weekday()]
            new = _case_like(t[0], (new if t[0].lower() in names[i] else new[:3]).title())
        elif t[1]:
            digits = t[1]
            role = "year" if len(digits) > 2 or int(digits) > 31 else (order or ["day"])[0]
            if role in order:
                order.remove(role)
            n = {"day": d.day, "month": d.month, "year": d.year}[role]
            if role == "year" and len(digits) == 2:
                new = f"{n % 100:02d}"
            else:
                pad = digits.startswith("0") or (len(digits) == 2 and not month_named)
                new = f"{n:0{len(digits)}d}" if pad else str(n)
            if t[2]:
                new += _case_like(t[2], _ordinal_suffix(n))
        else:
            continue
        out.append(core[pos:t.start()] + new)
        pos = t.end()
    return "".join(out) + core[pos:]
