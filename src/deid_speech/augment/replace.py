"""Tag replacement: fill every tag of a tagged sentence with a fresh, valid value in
spoken form, so no LLM (or seed writer) has to invent a valid NRIC.

``fill_tags("call [PHONE] anything [PHONE] lah", rng)`` ->
``"call [PHONE] nine one two three four five six seven [PHONE] lah"``.
"""
from __future__ import annotations

import random

from deid_speech.spoken import verbalize, verbalize_date, verbalize_email
from deid_speech.types import LABELS, EntitySpan, parse_tagged, render_tagged
from deid_speech.validators import BANK_ACCOUNT_FORMATS
from deid_speech.values import (
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


def _grouped(digits: str, groups: tuple[int, ...]) -> str:
    out, k = [], 0
    for g in groups:
        out.append(digits[k:k + g])
        k += g
    return " ".join(x for x in out if x)


def spoken_value(label: str, rng: random.Random) -> tuple[str, str]:
    """A fresh value for ``label``: (written form, spoken form)."""
    if label == "PERSON":
        name = gen_person(rng)
        return name, name
    if label == "NRIC":
        v = gen_nric(rng)
        return v, verbalize(v, rng)
    if label == "PASSPORT_NUM":
        v = gen_passport(rng)
        return v, verbalize(v, rng)
    if label == "PHONE":
        v = gen_phone(rng, plus65=rng.random() < 0.15)
        local = v[-8:]
        spoken = verbalize((v[:-8] + " " if v.startswith("+") else "") + local[:4] + " " + local[4:], rng)
        return v, spoken
    if label == "EMAIL":
        v = gen_email(rng, gen_person(rng) if rng.random() < 0.5 else None)
        return v, verbalize_email(v, rng)
    if label == "CREDIT_CARD":
        v = gen_card(rng)
        groups = (4, 6, 5) if len(v) == 15 else (4,) * (len(v) // 4) + ((len(v) % 4,) if len(v) % 4 else ())
        return v, verbalize(_grouped(v, groups), rng)
    if label == "CAR_PLATE":
        v = gen_plate(rng)
        return v, verbalize(v, rng)
    if label == "BANK_ACCOUNT":
        v, bank = gen_bank_account(rng)
        return v, verbalize(_grouped(v, BANK_ACCOUNT_FORMATS[bank]), rng)
    if label == "DATE":
        d = gen_date(rng)
        return d.isoformat(), verbalize_date(d, rng)
    if label == "SECRET":
        v = gen_secret(rng)
        return v, verbalize(v, rng)
    raise ValueError(f"unknown label {label!r}; expected one of {LABELS}")


def fill_tags(tagged: str, rng: random.Random) -> tuple[str, list[str]]:
    """Replace each entity's text by a fresh spoken value. Returns the new tagged text and
    the written values, in order."""
    text, ents = parse_tagged(tagged)
    pieces, new_ents, written = [], [], []
    pos = 0
    out_len = 0
    for e in sorted(ents):
        before = text[pos:e.char_start]
        w, spoken = spoken_value(e.label, rng)
        written.append(w)
        pieces.append(before)
        out_len += len(before)
        new_ents.append(EntitySpan(out_len, out_len + len(spoken), e.label))
        pieces.append(spoken)
        out_len += len(spoken)
        pos = e.char_end
    pieces.append(text[pos:])
    return render_tagged("".join(pieces), new_ents), written

