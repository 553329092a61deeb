"""Spoken <-> written forms of digits, letters and email addresses.

One set of tables serves both directions:

* the **normalizer** (:func:`normalize_tokens`) turns what a recogniser writes for spoken
  PII ("double eight", "oh", "ninety eight", "S one two", "9123-4567", "at gmail dot com",
  "D for David", "sierra kilo")
  into symbols (digits and capital letters) and keeps, for every symbol, the index of the
  token it came from, so a match maps back to words and so to time;
* the **verbalizer** (:func:`verbalize`) turns a written value ("S1234567D") into one of
  its spoken variants ("S one two three four five six seven D", "double eight", ...).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

DIGIT_WORDS = {
    "zero": "0", "oh": "0", "o": "0", "one": "1", "two": "2", "three": "3", "four": "4",
    "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
}
# a digit pair's second half after a tens word ("eighty six"; "eighty oh" is two numbers)
UNIT_WORDS = frozenset(DIGIT_WORDS) - {"oh", "o", "zero"}
# Whisper sometimes writes homophones for digits in running speech.
DIGIT_HOMOPHONES = {"won": "1", "to": "2", "too": "2", "for": "4", "ate": "8", "nought": "0"}
TEEN_WORDS = {
    "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13", "fourteen": "14",
    "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18", "nineteen": "19",
}
TENS_WORDS = {
    "twenty": "2", "thirty": "3", "forty": "4", "fifty": "5", "sixty": "6", "seventy": "7",
    "eighty": "8", "ninety": "9",
}
REPEAT_WORDS = {"double": 2, "triple": 3}
# Letter names as spoken; the ones that are also common words are "weak" (see below).
LETTER_NAMES = {
    "ay": "A", "bee": "B", "cee": "C", "dee": "D", "ee": "E", "eff": "F", "gee": "G",
    "aitch": "H", "jay": "J", "kay": "K", "el": "L", "ell": "L", "em": "M", "en": "N",
    "pee": "P", "cue": "Q", "ar": "R", "ess": "S", "tee": "T", "vee": "V", "ex": "X",
    "zed": "Z", "zee": "Z",
    # weak: ordinary English words too
    "see": "C", "sea": "C", "be": "B", "you": "U", "are": "R", "why": "Y", "queue": "Q",
    "tea": "T", "pea": "P",
}
WEAK_WORDS = frozenset({"a", "i", "o", "oh", "see", "sea", "be", "you", "are", "why", "queue",
                        "tea", "pea", "to", "too", "for", "won", "ate"})
# A letter spelled with a word ("D for David", "S as in Sugar") or by the spelling alphabet
# ("sierra kilo bravo"): :func:`spelled_letter`
SPELLING_ALPHABET = {
    "alpha": "A", "alfa": "A", "bravo": "B", "charlie": "C", "delta": "D", "echo": "E", "foxtrot": "F",
    "golf": "G", "hotel": "H", "india": "I", "juliet": "J", "juliett": "J", "kilo": "K", "lima": "L",
    "mike": "M", "november": "N", "oscar": "O", "papa": "P", "quebec": "Q", "romeo": "R", "sierra": "S",
    "tango": "T", "uniform": "U", "victor": "V", "whiskey": "W", "whisky": "W", "x-ray": "X", "xray": "X",
    "yankee": "Y", "zulu": "Z",
}
NOT_SPELLING = frozenset({"instance", "example", "small", "medium", "large"})  # "I for instance", "S for small"
JOINERS = frozenset({"dash", "hyphen", "-", "uh", "um", "er", "erm", "ah", "hmm", "space"})
EMAIL_WORDS = {"at": "@", "dot": ".", "underscore": "_", "dash": "-", "hyphen": "-",
               "period": ".", "point": "."}
SPOKEN_DIGITS = {v: k for k, v in DIGIT_WORDS.items() if k not in ("oh", "o")}
SPOKEN_LETTERS = {c: c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}

_STRIP = ".,!?;:\"'()[]{}…"
_INNER_SEP = re.compile(r"(?<=[A-Za-z0-9])[-–./](?=[A-Za-z0-9])")


@dataclass(frozen=True)
class Symbols:
    """Symbols (digits/capital letters) read from a run of tokens.

    ``owner[i]`` is the token index that produced ``text[i]``; ``weak[i]`` says the symbol
    came from a word that is also ordinary English ("you", "oh", "a"); ``reach[i]`` is the
    last token ``text[i]`` spans (``owner[i]`` but for a letter spelled with a word: "D for
    David" is owned by "D" and reaches "David"; empty: the owners).
    """

    text: str
    owner: tuple[int, ...]
    weak: tuple[bool, ...]
    reach: tuple[int, ...] = ()

    def last(self, k: int) -> int:
        """The last token that symbol ``k`` spans."""
        return (self.reach or self.owner)[k]


def clean_token(tok: str) -> str:
    """Lower-case a recogniser token and strip surrounding punctuation."""
    return tok.strip(_STRIP).lower()


_CLITICS = frozenset({"", "re", "m", "s", "ll", "ve", "d", "t"})


def digit_pair(tens: str, unit: str) -> bool:
    """Whether a tens word and the token after it are one digit pair ("eighty six" -> 86): the
    second is a :data:`UNIT_WORDS` word, and no punctuation ends the tens word ("eighty, six"
    and "was it twenty? five" are two numbers)."""
    return tens.strip()[-1:].isalpha() and clean_token(unit) in UNIT_WORDS


def common_word(token: str, also: frozenset[str] = frozenset()) -> bool:
    """An everyday word ("one", "but", "you're", "the"): an English stop word (spaCy's list),
    a number word, or a word of ``also``, with any clitic after an apostrophe."""
    from spacy.lang.en.stop_words import STOP_WORDS

    parts = re.split(r"['’]", clean_token(token))
    return all(p in STOP_WORDS or p in DIGIT_WORDS or p in also or p in _CLITICS for p in parts)


def token_symbols(tok: str, original: str = "") -> str | None:
    """The symbols a single token stands for, or None if it is not a PII-ish token.

    Handles digits ("9123", "9123-4567", "+65"), alphanumerics with a digit ("S1234567D",
    "SKB9012C"), single letters, letter names, digit words and teens. Multi-word forms
    (tens + unit, double/triple, hundred) are handled by :func:`normalize_tokens`.
    """
    t = clean_token(tok).lstrip("+#-–")  # Whisper writes spelled digits as "1 -2 -3"
    if re.fullmatch(r"\$\d{7,}", t):  # no price: a number read back ("That's $9173058")
        t = t[1:]
    if not t:
        return None
    joined = _INNER_SEP.sub("", t)
    if joined.isalnum() and any(c.isdigit() for c in joined) and joined.isascii():
        return joined.upper()
    if t in DIGIT_WORDS:
        return DIGIT_WORDS[t]
    if t in TEEN_WORDS:
        return TEEN_WORDS[t]
    if len(t) == 1 and t.isalpha():
        return t.upper()
    if t in LETTER_NAMES:
        return LETTER_NAMES[t]
    # "S-1-2-3" or "S.K.B." -> letters/digits separated by dashes or dots
    if re.fullmatch(r"(?:[a-z0-9][-.])+[a-z0-9]\.?", t):
        return re.sub(r"[-.]", "", t).upper()
    # all-caps short acronyms written by ASR ("SKB", "SGX") count as spelled letters
    o = original.strip(_STRIP)
    if 2 <= len(o) <= 3 and o.isalpha() and o.isupper() and o.isascii():
        return o
    if t in DIGIT_HOMOPHONES:
        return DIGIT_HOMOPHONES[t]
    return None


def spelled_letter(tokens: list[str], i: int) -> tuple[str, int, bool] | None:
    """A letter spelled at ``tokens[i]`` with a word, as callers spell a check letter, a plate
    or an email: ``(letter, index of its last token, weak)``, or None.

    - A letter, "for" or "as in", then a word that starts with that letter and is no everyday
      word ("D for David", "ess as in Sugar", "T for tango"): that letter, up to the word.
    - A word of the spelling alphabet after "for" (or "four", "4": the recogniser's spelling of
      it) gives the letter ("T four tango", "T4 tango"), also where the letter before it became
      a short word ("and for November", "the four alpha": weak, since "went for golf" is no
      spelling; a spelled run takes it next to other letters).
    - A word of the spelling alphabet alone ("sierra", "kilo"): its letter; weak (an ordinary
      word too: "golf", "hotel", "Victor") unless a word beside it is one as well.
    - "double you" (or "double u"): W, the letter's name, not "UU"."""
    t = clean_token(tokens[i])
    if t == "double" and i + 1 < len(tokens) and clean_token(tokens[i + 1]) in ("you", "u") \
            and not tokens[i].rstrip().endswith((",", ".", "?", "!")):
        return "W", i + 1, False
    if t in SPELLING_ALPHABET:
        beside = any(0 <= k < len(tokens) and clean_token(tokens[k]) in SPELLING_ALPHABET for k in (i - 1, i + 1))
        return SPELLING_ALPHABET[t], i, not beside
    glued = re.fullmatch(r"([a-z])(?:4|for)", t)  # "T4 tango"
    if glued and i + 1 < len(tokens) and SPELLING_ALPHABET.get(clean_token(tokens[i + 1])) == glued[1].upper():
        return glued[1].upper(), i + 1, False
    if i + 2 >= len(tokens):
        return None
    link = [clean_token(x) for x in tokens[i + 1: i + 3]]
    j = i + 2 if link == ["as", "in"] else i + 1 if link[0] in ("for", "four", "4") else None  # the link's last token
    if j is None or j + 1 >= len(tokens):
        return None
    word = clean_token(tokens[j + 1])
    code = SPELLING_ALPHABET.get(word)
    letter = token_symbols(tokens[i], tokens[i])
    if code is not None and letter is None and t.isalpha() and len(t) <= 4 \
            and not tokens[i].rstrip().endswith((".", "?", "!", ",")):
        return code, j + 1, True  # "and for November": the word before is the letter, however heard
    if letter is None or len(letter) != 1 or not letter.isalpha():
        return None
    if code is not None and code == letter:
        return letter, j + 1, False  # "T four tango"
    if link[0] in ("four", "4"):
        return None
    if (len(word) < 2 or not word.replace("-", "").isalpha() or word[0] != letter.lower()
            or word in NOT_SPELLING or common_word(word)):
        return None
    return letter, j + 1, False


def _is_weak(tok: str, original: str) -> bool:
    t = clean_token(tok)
    if t in WEAK_WORDS:
        return True
    # a lone lower-case letter word like "a" or "i" is weak; "I" as pronoun too
    return t in ("a", "i")


def normalize_tokens(tokens: list[str], spelled: bool = True) -> list[tuple[int, int, Symbols]]:
    """Find runs of spoken digits/letters in ``tokens``.

    Returns ``(first_token, last_token, Symbols)`` for each maximal run. Fillers and
    "dash" inside a run are skipped; "double"/"triple" repeat the next symbol; tens words
    combine with a following unit ("ninety eight" -> 98); "hundred"/"thousand" scale; a
    letter spelled with a word ("D for David", "sierra") is that letter
    (:func:`spelled_letter`; not with ``spelled=False``, as for WER, where it stays words).
    """
    runs: list[tuple[int, int, Symbols]] = []
    text: list[str] = []
    owner: list[int] = []
    weak: list[bool] = []
    reach: list[int] = []
    first = last = -1
    repeat = 1

    def flush() -> None:
        nonlocal text, owner, weak, reach, first, last
        # drop weak symbols at the run edges: "call you at nine..." must not start with U
        # ("oh" next to a digit is a zero and stays: "oh one two three")
        while weak and weak[0] and not (text[0] == "0" and len(text) > 1 and text[1].isdigit()):
            text.pop(0), owner.pop(0), weak.pop(0), reach.pop(0)
        while (weak and weak[-1] and len(text) > 1 and not _keeps_weak_tail(text)
               and not (text[-1] == "0" and text[-2].isdigit())):
            text.pop(), owner.pop(), weak.pop(), reach.pop()
        if text:
            runs.append((owner[0], reach[-1], Symbols("".join(text), tuple(owner), tuple(weak), tuple(reach))))
        text, owner, weak, reach = [], [], [], []
        first = last = -1

    def add(sym: str, i: int, is_weak: bool) -> None:
        nonlocal first, last, repeat
        sym = sym * repeat if len(sym) == 1 else sym[0] * (repeat - 1) + sym
        repeat = 1
        for ch in sym:
            text.append(ch)
            owner.append(i)
            weak.append(is_weak)
            reach.append(i)
        if first < 0:
            first = i
        last = i

    i = 0
    n = len(tokens)
    while i < n:
        raw = tokens[i]
        t = clean_token(raw)
        letter_spelled = spelled_letter(tokens, i) if spelled else None
        if letter_spelled is not None:  # "D for David", "sierra": one letter, up to the word that spells it
            letter, end, is_weak = letter_spelled
            add(letter, i, is_weak)
            reach[-1] = end
            i = end + 1
            continue
        if t in REPEAT_WORDS and i + 1 < n and token_symbols(tokens[i + 1], tokens[i + 1]):
            repeat = REPEAT_WORDS[t]
            if first < 0:
                first = i
            i += 1
            continue
        if t in TENS_WORDS:
            if i + 1 < n and digit_pair(raw, tokens[i + 1]):
                add(TENS_WORDS[t] + DIGIT_WORDS[clean_token(tokens[i + 1])], i, False)
                owner[-1] = reach[-1] = i + 1
                i += 2
            else:
                add(TENS_WORDS[t] + "0", i, False)
                i += 1
            continue
        if t in ("hundred", "thousand") and text and text[-1].isdigit():
            zeros = "00" if t == "hundred" else "000"
            # "two thousand and one" -> 2001, "nineteen hundred" -> 1900, "eighty eight
            # thousand four hundred" -> 88400 (a quantity, not the digits 8800400)
            j = i + 1
            if j < n and clean_token(tokens[j]) == "and":
                j += 1
            below = _cardinal_below(tokens, j, len(zeros)) if not raw.endswith((",", ".")) else None
            tail = token_symbols(tokens[j], tokens[j]) if j < n else None
            if below is not None:
                add(below[0], below[1] - 1, False)
                i = below[1]
            elif tail and tail.isdigit() and len(tail) <= len(zeros):
                add(zeros[: len(zeros) - len(tail)] + tail, j, False)
                i = j + 1
            else:
                add(zeros, i, False)
                i += 1
            continue
        sym = token_symbols(raw, raw)
        if sym is not None:
            add(sym, i, _is_weak(raw, raw))
            i += 1
            continue
        if t in JOINERS and text:
            i += 1
            continue
        flush()
        i += 1
    flush()
    return runs


def _cardinal_below(tokens: list[str], j: int, width: int) -> tuple[str, int] | None:
    """The number words at ``j`` that complete a "hundred" (``width`` 2: "forty two") or a
    "thousand" (``width`` 3: "four hundred and twenty"), as ``width`` zero-padded digits and
    the index after them; None unless at least two words make that number (one word is the
    caller's plain tail). A comma ends the number."""
    n = len(tokens)

    def word(k: int) -> str:
        return clean_token(tokens[k]) if k < n else ""

    def unit(k: int) -> str | None:
        w = word(k)
        return DIGIT_WORDS[w] if w in DIGIT_WORDS and w not in ("oh", "o", "zero") else None

    value, k = 0, j
    if width == 3 and unit(k) and word(k + 1) == "hundred" and not tokens[k].endswith(","):
        value, k = 100 * int(unit(k)), k + 2
        if word(k) == "and" and not tokens[k - 1].endswith(","):
            k += 1
    if word(k) in TENS_WORDS and (k == j or not tokens[k - 1].endswith(",")):
        value += 10 * int(TENS_WORDS[word(k)])
        k += 1
        if unit(k) and not tokens[k - 1].endswith(","):
            value += int(unit(k))
            k += 1
    elif word(k) in TEEN_WORDS and k > j and not tokens[k - 1].endswith(","):
        value += int(TEEN_WORDS[word(k)])
        k += 1
    elif unit(k) and k > j and not tokens[k - 1].endswith(","):
        value += int(unit(k))
        k += 1
    if k - j < 2 or value >= 10 ** width:
        return None
    return str(value).zfill(width), k


def _keeps_weak_tail(text: list[str]) -> bool:
    """An NRIC/passport/plate may end in a letter that is also a word ("A", "you")."""
    s = "".join(text)
    return bool(re.fullmatch(r"[A-Z]{1,3}\d{1,7}[A-Z]", s))


# --- verbalizer: written -> spoken ------------------------------------------------------

def verbalize_digits(digits: str, rng: random.Random | None = None, style: str = "auto") -> str:
    """Speak a digit string. Styles: 'single' (nine one two), 'oh' (zero as 'oh'),
    'repeat' (double/triple), 'pairs' (ninety one twenty three), 'auto' (random mix)."""
    rng = rng or random.Random(0)
    if style == "auto":
        style = rng.choice(["single", "single", "oh", "repeat", "repeat", "pairs"])
    if style == "pairs" and len(digits) % 2 == 0 and all(digits[k] != "0" for k in range(0, len(digits), 2)):
        return " ".join(_two_digits(digits[k:k + 2]) for k in range(0, len(digits), 2))
    words: list[str] = []
    k = 0
    while k < len(digits):
        d = digits[k]
        run = 1
        while k + run < len(digits) and digits[k + run] == d and run < 3:
            run += 1
        zero = "oh" if style in ("oh", "repeat") else "zero"
        w = zero if d == "0" else SPOKEN_DIGITS[d]
        if style == "repeat" and run >= 2:
            words.append(("double " if run == 2 else "triple ") + w)
            k += run
        else:
            words.append(w)
            k += 1
    return " ".join(words)


def _two_digits(pair: str) -> str:
    if pair[0] == "1":
        return next(w for w, v in TEEN_WORDS.items() if v == pair)
    tens = next(w for w, v in TENS_WORDS.items() if v == pair[0])
    return tens if pair[1] == "0" else f"{tens} {SPOKEN_DIGITS[pair[1]]}"


def verbalize(value: str, rng: random.Random | None = None, style: str = "auto") -> str:
    """Speak a written alphanumeric value: letters spelled as capitals, digits as words.

    ``S1234567D`` -> ``S one two three four five six seven D``; ``+6591234567`` ->
    ``plus six five nine one ...``; groups separated by spaces/dashes are kept apart.
    """
    rng = rng or random.Random(0)
    out: list[str] = []
    if value.startswith("+"):
        out.append("plus")
        value = value[1:]
    for chunk in re.findall(r"[A-Za-z]+|\d+", value):
        if chunk.isdigit():
            out.append(verbalize_digits(chunk, rng, style))
        else:
            out.append(" ".join(chunk.upper()))
    return " ".join(out)


def verbalize_email(email: str, rng: random.Random | None = None) -> str:
    """``tan.wm88@gmail.com`` -> ``tan dot w m eight eight at gmail dot com``."""
    rng = rng or random.Random(0)
    local, _, domain = email.partition("@")
    sym = {".": "dot", "_": "underscore", "-": "dash"}

    def part(s: str, spell_short: bool) -> list[str]:
        words: list[str] = []
        for piece in re.findall(r"[A-Za-z]+|\d+|[._-]", s):
            if piece in sym:
                words.append(sym[piece])
            elif piece.isdigit():
                words.append(verbalize_digits(piece, rng))
            elif spell_short and len(piece) <= 2:
                words.append(" ".join(piece.lower()))
            else:
                words.append(piece.lower())
        return words

    return " ".join(part(local, True) + ["at"] + part(domain, False))


MONTH_NAMES = ("January February March April May June July August September October November "
               "December").split()
_ORDINALS = ("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
             "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth "
             "twentieth").split()


def ordinal_words(n: int) -> str:
    """1 -> 'first', 23 -> 'twenty third', 30 -> 'thirtieth'."""
    if 1 <= n <= 20:
        return _ORDINALS[n - 1]
    if n == 30:
        return "thirtieth"
    tens = "twenty" if n < 30 else "thirty"
    return f"{tens} {_ORDINALS[n % 10 - 1]}"


def year_words(y: int, rng: random.Random | None = None) -> str:
    """1987 -> 'nineteen eighty seven'; 2001 -> 'two thousand and one'; 2010 -> 'twenty ten'."""
    rng = rng or random.Random(0)
    hi, lo = divmod(y, 100)
    if 2000 <= y < 2010 or (y >= 2010 and rng.random() < 0.4):
        rest = y - 2000
        return "two thousand" + (f" and {_cardinal(rest)}" if rest else "")
    if lo == 0:
        return f"{_cardinal(hi)} hundred"
    return f"{_cardinal(hi)} {'oh ' + SPOKEN_DIGITS[str(lo)] if lo < 10 else _cardinal(lo)}"


def _cardinal(n: int) -> str:
    if n < 10:
        return SPOKEN_DIGITS[str(n)]
    return _two_digits(f"{n:02d}")


def verbalize_date(d, rng: random.Random | None = None) -> str:
    """A ``datetime.date`` spoken: 'twelfth of March nineteen eighty seven',
    'March twelfth nineteen eighty seven', 'the twelfth of March', 'twelve March ...'."""
    rng = rng or random.Random(0)
    month, day, year = MONTH_NAMES[d.month - 1], ordinal_words(d.day), year_words(d.year, rng)
    return rng.choice([
        f"{day} of {month} {year}",
        f"the {day} of {month} {year}",
        f"{month} {day} {year}",
        f"{_cardinal(d.day)} {month} {year}",
        f"{day} {month} {year}",
    ])
