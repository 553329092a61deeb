"""Random, valid, realistic Singapore PII values: the fresh values of data augmentation
and the surrogates of redaction (:mod:`deid_speech.surrogates`).

Every generator takes a :class:`random.Random` (so runs are reproducible) and returns the
WRITTEN form (``S8712345D``, ``91234567``, ``SKV6201B``); checksummed values (NRIC/FIN,
card, plate) always carry the correct check character from :mod:`deid_speech.validators`.
:data:`GENERATORS` maps each label of :data:`deid_speech.types.LABELS` to a ``rng -> str`` function.
"""
from __future__ import annotations

import datetime
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass

from deid_speech.validators import (
    BANK_ACCOUNT_FORMATS,
    luhn_check_digit,
    nric_check_letter,
    plate_check_letter,
)

_PLATE_SERIES_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"  # I and O are never used in a series


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


# --- identity documents ---------------------------------------------------------------


def gen_nric(rng: random.Random, prefix: str | None = None) -> str:
    """NRIC/FIN with a correct check letter.

    S numbers of people born 1968-1999 and T numbers (born 2000+) start with the birth
    year, as real ones do; F/G/M (foreigners) digits are random.
    """
    if prefix is None:
        prefix = rng.choices("STFGM", weights=(55, 15, 5, 15, 10))[0]
    prefix = prefix.upper()
    if prefix == "S" and rng.random() < 0.8:
        digits = str(rng.randint(68, 99)) + _digits(rng, 5)
    elif prefix == "S":  # born before 1968, or became a citizen/PR later
        digits = rng.choice("0123") + _digits(rng, 6)
    elif prefix == "T":
        digits = f"{rng.randint(0, 24):02d}" + _digits(rng, 5)
    else:
        digits = _digits(rng, 7)
    return prefix + digits + nric_check_letter(prefix, digits)


def gen_passport(rng: random.Random) -> str:
    """Singapore passport number: K (mostly) or E + 7 digits + letter (no known checksum)."""
    series = "K" if rng.random() < 0.85 else "E"
    return series + _digits(rng, 7) + rng.choice(string.ascii_uppercase)


def gen_phone(rng: random.Random, plus65: bool = False) -> str:
    """Mobile (8/9...) or fixed-line (6...) number: ``"91234567"`` or ``"+6591234567"``."""
    number = rng.choices("986", weights=(50, 35, 15))[0] + _digits(rng, 7)
    return "+65" + number if plus65 else number


# --- payment and bank -----------------------------------------------------------------

# (issuer prefix, total length); first digits are 3/4/5/6 only, as in the paper's Table 1.
_CARD_ISSUERS: tuple[tuple[str, int], ...] = (
    ("4", 16), ("4", 16), ("4", 16), ("4", 13),            # Visa
    ("51", 16), ("52", 16), ("53", 16), ("54", 16), ("55", 16),  # Mastercard
    ("34", 15), ("37", 15),                                # American Express
    ("3528", 16), ("3589", 16),                            # JCB
    ("6011", 16), ("65", 16),                              # Discover
    ("62", 16), ("62", 19),                                # UnionPay
)


def gen_card(rng: random.Random) -> str:
    """Luhn-valid card number with a real issuer prefix and length."""
    prefix, length = rng.choice(_CARD_ISSUERS)
    body = prefix + _digits(rng, length - len(prefix) - 1)
    return body + luhn_check_digit(body)


def gen_bank_account(rng: random.Random) -> tuple[str, str]:
    """``(digits, bank name)`` with the length of that bank's :data:`BANK_ACCOUNT_FORMATS`."""
    bank = rng.choice(sorted(BANK_ACCOUNT_FORMATS))
    length = sum(BANK_ACCOUNT_FORMATS[bank])
    return _digits(rng, length), bank


# --- vehicle plates -------------------------------------------------------------------

_SPECIAL_PLATE_PREFIXES = (
    "E", "EA", "EJ", "EU", "EY",    # older private cars
    "SH", "SHA", "SHD", "SHX",      # taxis
    "PA", "PC", "PH", "PZ",         # private hire / buses
    "GBA", "GBE", "GX", "GY",       # goods vehicles
    "FB", "FBA", "FBL", "FT",       # motorcycles
    "SBS", "SMB", "SG",             # public buses
)


def gen_plate(rng: random.Random) -> str:
    """Vehicle plate with LTA check letter; mostly private cars ``S`` + 2 series letters."""
    if rng.random() < 0.8:
        prefix = "S" + rng.choice("BCDFGJKLMN") + rng.choice(_PLATE_SERIES_LETTERS)
    else:
        prefix = rng.choice(_SPECIAL_PLATE_PREFIXES)
    n_digits = rng.choices((1, 2, 3, 4), weights=(3, 7, 20, 70))[0]
    number = rng.randint(10 ** (n_digits - 1), 10**n_digits - 1)
    return f"{prefix}{number}{plate_check_letter(prefix, number)}"


# --- people and contact details -------------------------------------------------------


@dataclass(frozen=True)
class NamePool:
    """Given names by gender plus family names (or fathers' names) for one community."""

    male: tuple[str, ...]
    female: tuple[str, ...]
    family: tuple[str, ...]


_WESTERN = NamePool(
    male=("James", "John", "Michael", "David", "Daniel", "Matthew", "Ryan", "Jason", "Kevin",
          "Brandon", "Nicholas", "Benjamin", "Samuel", "Ethan", "Joshua", "Andrew", "Darren",
          "Marcus", "Eugene", "Gabriel", "Timothy", "Justin", "Alvin", "Calvin"),
    female=("Sarah", "Emily", "Jessica", "Rachel", "Michelle", "Jennifer", "Amanda", "Grace",
            "Chloe", "Hannah", "Natalie", "Samantha", "Vanessa", "Rebecca", "Charlotte",
            "Olivia", "Sophie", "Fiona", "Joanne", "Cheryl", "Evelyn", "Irene", "Shirley",
            "Karen"),
    family=("Smith", "Johnson", "Williams", "Brown", "Jones", "Taylor", "Wilson", "Anderson",
            "Thompson", "White", "Harris", "Clarke", "Walker", "Wright", "Robinson", "Hall",
            "Green", "Evans", "Baker", "Turner", "Mitchell", "Campbell", "Cooper", "Morgan",
            "Murphy", "Kelly", "Stewart", "Edwards"),
)

NAME_POOLS: dict[str, NamePool] = {
    "chinese": NamePool(  # given names are unisex-leaning; "male"/"female" is a tendency
        male=("Wei Ming", "Jun Jie", "Zhi Hao", "Jia Wei", "Wei Jie", "Jun Hao", "Kai Wen",
              "Yong Sheng", "Boon Keng", "Chee Keong", "Kok Wai", "Eng Huat", "Hock Seng",
              "Soon Huat", "Kim Seng", "Teck Meng", "Ah Kow", "Guan Hock", "Yi Xiang",
              "Zheng Yang", "Wen Jun", "Rui En", "Jing Xuan", "Hong Wei"),
        female=("Hui Ling", "Jia Hui", "Xin Yi", "Hui Min", "Mei Ling", "Yi Ting", "Shu Fen",
                "Li Ting", "Zi Xuan", "Yu Xuan", "Siew Ling", "Bee Hoon", "Swee Lan",
                "Geok Choo", "Poh Lin", "Lay Hoon", "Ai Ling", "Pei Shan", "Wan Ting",
                "Shi Min", "Kai Xin", "Hui Xian", "Min Yi", "Xiu Ying"),
        family=("Tan", "Lim", "Lee", "Ng", "Ong", "Wong", "Goh", "Chua", "Chan", "Koh", "Teo",
                "Ang", "Yeo", "Tay", "Ho", "Low", "Toh", "Sim", "Chong", "Chia", "Seah", "Foo",
                "Leong", "Soh", "Yap", "Heng", "Quek", "Phua", "Lau", "Neo"),
    ),
    "malay": NamePool(  # family = fathers' names (patronymics after bin/binte)
        male=("Faizal", "Hafiz", "Irfan", "Azlan", "Hakim", "Rizwan", "Syafiq", "Khairul",
              "Firdaus", "Zulkifli", "Hisham", "Iskandar", "Haziq", "Danial", "Aiman",
              "Amirul", "Fadhil", "Saiful", "Shahrul", "Ridhwan", "Nazri", "Hairul", "Afiq",
              "Luqman"),
        female=("Aisyah", "Farah", "Nabila", "Syafiqah", "Amirah", "Hidayah", "Nadia",
                "Liyana", "Aqilah", "Fatimah", "Zarina", "Zulaikha", "Hanis", "Izzati",
                "Shahirah", "Diyana", "Atiqah", "Sakinah", "Huda", "Khadijah", "Mariam",
                "Norhayati", "Rohani", "Salmah"),
        family=("Rahman", "Ismail", "Abdullah", "Hassan", "Hussein", "Osman", "Yusof",
                "Ibrahim", "Ahmad", "Salleh", "Kassim", "Hamid", "Aziz", "Rashid", "Jamal",
                "Omar", "Ali", "Said", "Sulaiman", "Bakar", "Latiff", "Karim", "Razak",
                "Zainal", "Mahmud", "Harun", "Rosli"),
    ),
    "indian": NamePool(  # family = fathers' names (after s/o, d/o) or family surnames
        male=("Rajesh", "Arjun", "Suresh", "Ramesh", "Vijay", "Ganesh", "Prakash", "Karthik",
              "Arun", "Siva", "Ravi", "Anand", "Dinesh", "Mohan", "Sanjay", "Harish",
              "Naveen", "Vikram", "Pradeep", "Sathish", "Bala", "Gopal", "Kannan", "Rahul"),
        female=("Priya", "Lakshmi", "Kavitha", "Deepa", "Anitha", "Meena", "Revathi",
                "Shanthi", "Divya", "Nisha", "Vani", "Sangeetha", "Kalpana", "Malathi",
                "Geetha", "Radha", "Padma", "Uma", "Jayanthi", "Indira", "Saranya", "Pooja",
                "Anjali", "Kamala"),
        family=("Subramaniam", "Kumar", "Krishnan", "Rajoo", "Ramasamy", "Muthu",
                "Govindasamy", "Suppiah", "Arumugam", "Selvaraj", "Nadarajah", "Palaniappan",
                "Rajendran", "Maniam", "Raman", "Sundaram", "Perumal", "Annamalai", "Chandran",
                "Shanmugam", "Murugan", "Kandasamy", "Nair", "Menon", "Pillai", "Sharma",
                "Singh", "Iyer", "Gill"),
    ),
    "eurasian": NamePool(
        male=("Jonathan", "Gerald", "Bernard", "Andre", "Francis", "Joseph", "Anthony",
              "Leonard", "Patrick", "Vincent", "Dominic", "Edmund", "Terence", "Clement",
              "Gregory", "Aloysius", "Desmond", "Ignatius", "Rodney", "Christopher",
              "Stephen", "Mark", "Julian", "Adrian"),
        female=("Mary Anne", "Maria", "Theresa", "Christine", "Bernadette", "Angela", "Monica",
                "Veronica", "Rosalind", "Gloria", "Agnes", "Cecilia", "Yvonne", "Marian",
                "Jacqueline", "Patricia", "Denise", "Valerie", "Geraldine", "Claire",
                "Audrey", "Andrea", "Rosemary", "Josephine"),
        family=("De Souza", "Pereira", "Rozario", "D'Cruz", "Fernandez", "De Silva",
                "Oliveiro", "Sequeira", "Shepherdson", "Scully", "Westerhout", "Aeria",
                "Rodrigues", "Gomes", "Da Costa", "Monteiro", "Theseira", "Conceicao",
                "Minjoot", "Hendricks", "Desker", "Lazaroo", "Nonis", "Pestana", "Xavier",
                "Baptista"),
    ),
    "western": _WESTERN,
}

_COMMUNITY_WEIGHTS = {"chinese": 50, "malay": 18, "indian": 14, "eurasian": 6, "western": 12}
# Indian family surnames, used as "Arjun Nair"; the other Indian family entries are
# fathers' names, used as "Rajesh s/o Kumar" (or without the s/o, d/o).
_MALAY_FIRST_MALE = ("Muhammad", "Mohamed", "Mohd", "Ahmad")  # "Muhammad Faizal"
_MALAY_FIRST_FEMALE = ("Nur", "Siti", "Nurul")  # "Nur Aisyah"
_INDIAN_SURNAMES = frozenset({"Nair", "Menon", "Pillai", "Sharma", "Singh", "Iyer", "Gill"})


def _given(rng: random.Random, pool: NamePool, male: bool) -> str:
    return rng.choice(pool.male if male else pool.female)


def gen_person(rng: random.Random) -> str:
    """A full name following one Singapore community's naming convention."""
    community = rng.choices(list(_COMMUNITY_WEIGHTS), weights=list(_COMMUNITY_WEIGHTS.values()))[0]
    pool = NAME_POOLS[community]
    male = rng.random() < 0.5
    given, family = _given(rng, pool, male), rng.choice(pool.family)
    if community == "chinese":  # surname first, often after an English name
        english = _given(rng, _WESTERN, male)
        return rng.choices((f"{family} {given}", f"{english} {family} {given}",
                            f"{english} {family}"), weights=(55, 35, 10))[0]
    if community == "malay":
        if rng.random() < 0.5:
            given = f"{rng.choice(_MALAY_FIRST_MALE if male else _MALAY_FIRST_FEMALE)} {given}"
        if rng.random() < 0.8:
            return f"{given} {'bin' if male else 'binte'} {family}"
    if community == "indian" and family not in _INDIAN_SURNAMES and rng.random() < 0.7:
        return f"{given} {'s/o' if male else 'd/o'} {family}"
    return f"{given} {family}"


_EMAIL_DOMAINS = (
    "gmail.com", "gmail.com", "gmail.com", "yahoo.com.sg", "yahoo.com", "hotmail.com",
    "outlook.com", "icloud.com", "singnet.com.sg", "starhub.net.sg", "pacific.net.sg",
    "tanlogistics.com.sg", "lionpeak.sg", "marinaholdings.com", "acme-trading.com.sg",
    "orchardtech.io", "u.nus.edu", "e.ntu.edu.sg",
)
_NAME_NOISE = {"bin", "binte", "s/o", "d/o"}


def gen_email(rng: random.Random, name: str | None = None) -> str:
    """Address built from a (given or random) person's name, e.g. ``wm.tan87@gmail.com``."""
    parts = [re.sub(r"[^a-z]", "", w.lower()) for w in (name or gen_person(rng)).split()
             if w.lower() not in _NAME_NOISE]
    parts = [p for p in parts if p] or ["user"]
    first, last = parts[0], parts[-1]
    initials = "".join(p[0] for p in parts[:-1])
    local = first if len(parts) == 1 else rng.choice((
        f"{first}.{last}", f"{first}{last}", f"{first}_{last}", f"{initials}.{last}",
        f"{last}{initials}", first, f"{last}.{first}", "".join(parts),
    ))
    if rng.random() < 0.5:
        local += rng.choice(("", ".", "_")) + rng.choice((str(rng.randint(1, 99)),
                                                          str(rng.randint(1960, 2010))))
    return f"{local}@{rng.choice(_EMAIL_DOMAINS)}"


def gen_date(rng: random.Random, start_year: int = 1940, end_year: int = 2015) -> datetime.date:
    """Uniform random date from 1 Jan ``start_year`` to 31 Dec ``end_year``."""
    lo = datetime.date(start_year, 1, 1).toordinal()
    hi = datetime.date(end_year, 12, 31).toordinal()
    return datetime.date.fromordinal(rng.randint(lo, hi))


def gen_secret(rng: random.Random, n: int | None = None) -> str:
    """A PIN or a one-time code: ``n`` digits, else 4 (a card PIN) or 6 (an OTP, a TAC)."""
    return _digits(rng, n if n is not None else rng.choice((4, 6, 6)))


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "PERSON": gen_person,
    "NRIC": gen_nric,
    "PASSPORT_NUM": gen_passport,
    "PHONE": gen_phone,
    "EMAIL": gen_email,
    "CREDIT_CARD": gen_card,
    "CAR_PLATE": gen_plate,
    "BANK_ACCOUNT": lambda rng: gen_bank_account(rng)[0],
    "DATE": lambda rng: gen_date(rng).isoformat(),
    "SECRET": gen_secret,
}
