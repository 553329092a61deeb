"""Spoken-form pattern detectors for the structured labels.

They read what Whisper really writes for spoken PII (digits as words or digits or a mix,
"double eight", "oh", spelled letters, "at ... dot com") through the shared normalizer
in :mod:`deid_speech.spoken`, then classify each run of symbols.

Rules (the written-down policy; tests in tests/ner/test_patterns.py hold them):

1. Shapes first, validators second. A shape match is reported even when its checksum
   fails (NRIC check letter, Luhn, plate check letter): a privacy tool prefers a false
   positive to a leak. A passing validator raises the score.
2. Alphanumeric shapes: NRIC/FIN ``[STFGM] + 7 digits + letter``; passport
   ``[KE] + 7 digits + letter``; car plate ``1-3 letters + 1-4 digits + letter``. Any
   other stretch of 5+ spelled symbols that starts and ends with a letter and holds a
   digit ("SNG97W1U": a plate the recogniser garbled) is reported at a low score under
   the cue's label or the likeliest shape, also when a homophone stands inside it
   ("S 9 to 3 ..."), unless at an edge or as more than a quarter of its symbols. A letter
   + 7 digits whose final letter was lost is an NRIC ([STFGM]) or passport ([KE]); a
   plate's S or G prefix of three letters and 2-4 digits with nothing spelled after them
   is a plate whose check letter was lost ("S J R eight eight thirty"; not "S G D fifty").
   The shapes are searched in what an earlier one left: "E K sixty two M N C four four
   oh nine C" is two identifiers.
3. Digit stretches: 8 digits starting 6/8/9 (or 65 + that) -> PHONE; 13-19 digits
   starting 3-6 -> CREDIT_CARD; 9-12 digits -> BANK_ACCOUNT; any other stretch of 7+
   digits -> the label of the nearest cue word before it, else BANK_ACCOUNT, at a low score.
4. Cue words in the six tokens before a run ("account", "card", "passport", "plate",
   "IC", "born", ...) pick or confirm the label and raise the score. A cue is never part of
   the value: a number span of any detector that took one in starts after it, and a phone,
   card or account ends at its last digit (:func:`trim_to_value`, applied by the redactor:
   "SBC account five five ..." -> "five five ...").
5. Non-PII context: a stretch directly preceded (within 3 tokens) by "order",
   "reference", "tracking", "block", "unit", "bus", "flight", "queue", "lot", "price",
   "$" (but not "$" glued to 7+ digits without cents), ... or followed by "dollars",
   "cents", "pm", "am" is not reported, unless a
   validator passes on a shape that cannot be confused (a valid NRIC, a Luhn-valid
   16-digit card); the same context vetoes the spans of every other detector (the trained
   NER's too: :func:`lookalike`, applied by the redactor, where a run with spelled letters
   is a look-alike too when it is a code: three or more digits and no more letters than
   digits, "tracking S P X S G oh three ..."; with the verifier, a number that one decoding
   heard named so and no decoding heard a PII cue before is dropped from all, see
   ``pipeline.named_lookalike``). Stretches under 7 digits are
   never reported by this detector (prices, times, block/unit/bus numbers, last-four
   mentions); dates are the date detector's job. Spoken quantities are read as numbers:
   "eighty eight thousand four hundred" is 88400, not the digits 8800400.
6. Emails are anchored on a top-level domain ("dot com", ".sg", "gmail.com") and extend
   back over the domain, "at" and the local part, up to six words besides "at" and the
   top-level domain (spelled letters, digits, and the local part's words on either side of
   a "dot" do not count: "diva dot zah bing"); "x@y.com" tokens too.
   With "at" the score is high; without (Whisper glues "kneelingatpacific .net") it is
   lower, raised by an "email" cue. Before a mail provider ("hotmail dot com") the word
   in the place of "at" is taken for it whatever was heard ("day day that's hotmail dot
   com"), and a local part before it makes an address with no cue. A domain that nothing
   of an address precedes (no "at", no cue, no glued "at") is still one, its local part
   garbled past reading ("the husbanding is dot com dot sg" for "adrian dot fernandez at
   singnet dot com dot sg"): the domain and up to three words before it, at a low score;
   not a provider's ("my hotmail dot com" is an account) nor a website's ("www", "website",
   "visit" ... before it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from deid_speech import validators as V
from deid_speech.ner.base import register, span_from_words
from deid_speech.spoken import DIGIT_WORDS, REPEAT_WORDS, Symbols, clean_token, normalize_tokens, token_symbols
from deid_speech.types import Span, Transcript, Word

CUES: dict[str, frozenset[str]] = {
    "PHONE": frozenset("phone call contact hp handphone mobile whatsapp reach text sms tel "
                       "telephone line paynow".split()),
    "BANK_ACCOUNT": frozenset("account acct bank dbs posb ocbc uob savings giro transfer "
                              "maybank hsbc citibank".split()),
    "CREDIT_CARD": frozenset("card visa mastercard amex credit debit".split()),
    "NRIC": frozenset("ic nric fin identity i.c.".split()),
    "PASSPORT_NUM": frozenset("passport".split()),
    "CAR_PLATE": frozenset("plate car vehicle registration carpark parking motorbike lorry van "
                           "taxi".split()),
    "DATE": frozenset("birth born dob birthday".split()),
}
NON_PII_BEFORE = frozenset(
    "order reference ref tracking booking invoice ticket case block blk unit bus flight queue "
    "lot postal price cost costs $ room level floor hash # model serial parcel item receipt "
    "transaction quotation quote voucher promo code policy member membership".split())
NON_PII_AFTER = frozenset("dollars dollar cents bucks pm am percent km kilometres".split())
# words that announce a secret said aloud (SECRET: a PIN, a one-time password or TAC, a
# password; found by deid_speech.ner.cue_runs, rule 10, alone); "code" after SECRET_CODE's words
# ("OTP code", "verification code", "one time code") is one too
SECRET_CUES = frozenset("pin pins otp otps tac passcode passcodes password passwords passwd".split())
SECRET_CODE = frozenset("verification activation authentication access sms otp pin tac login time fa 2fa".split())
CUE_WORDS = frozenset().union(*CUES.values()) | SECRET_CUES  # every label's cue words
KNOWN_TLDS = frozenset("com sg net org edu gov co my io biz info uk au in id hk".split())
# mail providers: "<local part> at hotmail dot com" is an address even where "at" was misheard
# ("day day that's hotmail dot com") and no cue was heard; "mail" alone is too common a word
PROVIDERS = ("gmail", "hotmail", "yahoo", "outlook", "icloud", "singnet", "protonmail", "starhub", "mail")
MAIL_PROVIDERS = frozenset(PROVIDERS[:-1])
# words before a provider that make it an account or a service, not an address ("my hotmail")
OWNERS = frozenset("my your his her our their the a new old use using on in or".split())
# an address's words before its top-level domain, "at" aside: this many at most (spelled letters,
# digits and the local part's words a dot joins do not count); a garbled local part takes more
# words than it was spoken with ("D but not got in date eight" for "deepa dot govind eight
# eight"; 4 until session 39, §0al)
LOCAL_WORDS = 6
# a spoken domain ("dot com dot sg") that nothing of an address precedes: the domain and at most
# this many words before it (the local part, garbled)
BARE_DOMAIN_WORDS = 3
# words that make a domain a website's, not an address's
WEBSITE_WORDS = frozenset("www website web site http https url link portal homepage app visit browse online "
                           "google search".split())
EMAIL_STOP = frozenset(
    "is my email e-mail address the it's its it to me send please can you your mail id and or "
    "was also just use using for".split())

SCORE_VALID = 0.95
SCORE_SHAPE = 0.75
SCORE_WEAK = 0.5


@dataclass(frozen=True)
class _Hit:
    lo: int  # symbol index
    hi: int
    label: str
    score: float


def cue_label(tokens: list[str], start: int, window: int = 6) -> str | None:
    """Label of the nearest cue word in the ``window`` tokens before ``start``."""
    for k in range(start - 1, max(-1, start - window - 1), -1):
        t = clean_token(tokens[k])
        for label, words in CUES.items():
            if t in words:
                return label
    return None


def _non_pii_context(tokens: list[str], first: int, last: int) -> bool:
    before = {clean_token(t) for t in tokens[max(0, first - 3): first]}
    # "$" or "#" in front: a price or a reference, unless the recogniser wrote "$" before
    # seven or more digits with no cents (a read-back phone number: "$9173058")
    before |= {t[:1] for t in tokens[max(0, first - 1): first + 1] if t[:1] in "$#"
               and not re.fullmatch(r"\$\d{7,}\W*", t.strip())}
    after = {clean_token(t) for t in tokens[last + 1: last + 3]}
    return bool(before & NON_PII_BEFORE) or bool(after & NON_PII_AFTER)


# a plate's prefix and number with no check letter after them (:func:`_classify`): S (private
# cars) or G (goods vehicles) and two more letters, never I or O, then 2-4 digits and nothing
# spelled after them; not a currency, a bus operator, a tax or a message ("S G D fifty")
PLATE_NO_CHECK_RX = re.compile(r"(?<![A-Z0-9])([SG][A-HJ-NP-Z]{2})\d{2,4}(?![A-Z0-9])")
PLATE_PREFIX_LOOKALIKES = frozenset("SGD SBS SMS SMU SUV SPF GST GMT".split())
_ALNUM_SHAPES = (
    ("NRIC", re.compile(r"[STFGM]\d{7}[A-Z]"), V.is_valid_nric),
    ("PASSPORT_NUM", re.compile(r"[KE]\d{7}[A-Z]"), V.is_valid_passport),
    ("CAR_PLATE", re.compile(r"(?<![A-Z])[A-Z]{1,3}\d{1,4}[A-Z](?![0-9])"), V.is_valid_plate),
)


def _classify(sym: Symbols, cue: str | None) -> list[_Hit]:
    s = sym.text
    hits: list[_Hit] = []
    taken = [False] * len(s)

    def take(lo: int, hi: int, label: str, score: float) -> None:
        hits.append(_Hit(lo, hi, label, score))
        for k in range(lo, hi):
            taken[k] = True

    for label, rx, valid in _ALNUM_SHAPES:
        for m in rx.finditer(s):
            lo, hi = m.span()
            if any(taken[lo:hi]):
                continue
            weak = sum(sym.weak[lo:hi])
            if label == "CAR_PLATE":
                if valid(m.group()):
                    score = SCORE_VALID if weak == 0 else SCORE_SHAPE
                elif cue == "CAR_PLATE" and weak == 0:
                    score = SCORE_SHAPE
                elif weak == 0 and s[lo] in "SEFGP" and hi - lo >= 5:
                    score = SCORE_WEAK
                else:
                    continue
            else:
                score = SCORE_VALID if valid(m.group()) else SCORE_SHAPE
                if cue == label:
                    score = max(score, 0.9)
            take(lo, hi, label, score)
    # NRIC whose first letter the recogniser dropped: 7 digits + letter
    for m in re.finditer(r"(?<![A-Z0-9])\d{7}[A-Z]", s):
        if not any(taken[m.start():m.end()]) and not any(sym.weak[m.start():m.end()]):
            take(m.start(), m.end(), "NRIC", 0.85 if cue == "NRIC" else SCORE_SHAPE)
    # NRIC or passport whose final letter the recogniser dropped: letter + 7 digits
    for m in re.finditer(r"[STFGMKE]\d{7}(?![0-9])", s):
        label = "PASSPORT_NUM" if s[m.start()] in "KE" else "NRIC"
        if not any(taken[m.start():m.end()]) and cue in (label, None):
            take(m.start(), m.end(), label, 0.7 if cue == label else SCORE_WEAK)

    # a plate whose check letter was lost or not yet said ("S J R eight eight thirty", "S J D
    # seven five oh, wait, S J D seven oh five K"): a private car's or goods vehicle's
    # three-letter prefix and two to four digits, with nothing spelled after them
    for m in PLATE_NO_CHECK_RX.finditer(s):
        lo, hi = m.span()
        weak = sym.weak[lo:hi]  # a homophone among the digits ("seven five oh") is allowed, once
        if not any(taken[lo:hi]) and not any(weak[:3]) and 4 * sum(weak) <= hi - lo \
                and m.group(1) not in PLATE_PREFIX_LOOKALIKES:
            take(lo, hi, "CAR_PLATE", SCORE_SHAPE if cue == "CAR_PLATE" else SCORE_WEAK)
    # anything else that mixes letters and digits like an identifier ("SNG97W1U", "SJ09137Z":
    # a plate or IC the recogniser garbled): report it under the likeliest label; searched in
    # each stretch no shape took, so that a shape at the start does not hide the rest ("E K
    # sixty two M N C four four oh nine C": "EK62M" a plate's shape, "NC4409C" still reported)
    for a, b in _free(taken):
        for m in re.finditer(r"[A-Z]+\d[A-Z0-9]*[A-Z]", s[a:b]):
            lo, hi = a + m.start(), a + m.end()
            # a homophone inside ("S 9 to 3 ...") is allowed, but not at an edge or as a quarter of it
            weak = sym.weak[lo:hi]
            if hi - lo < 5 or weak[0] or weak[-1] or 4 * sum(weak) > hi - lo:
                continue
            take(lo, hi, id_label(m.group(), cue), SCORE_WEAK)

    for m in re.finditer(r"\d+", s):
        lo, hi = m.span()
        if any(taken[lo:hi]):
            continue
        hit = _digit_label(m.group(), cue)
        if hit is not None:
            take(lo, hi, *hit)
    return hits


def _free(taken: list[bool]) -> list[tuple[int, int]]:
    """The stretches ``[a, b)`` of symbols that nothing has taken."""
    out: list[tuple[int, int]] = []
    a = None
    for k, t in enumerate(taken + [True]):
        if not t and a is None:
            a = k
        elif t and a is not None:
            out.append((a, k))
            a = None
    return out


def _spelled_tld(toks: list[str], k: int) -> int:
    """Length of a TLD spelled letter by letter at ``k`` ("s g", "c o m"), else 0."""
    for size in (3, 2):
        letters = toks[k:k + size]
        if len(letters) == size and all(len(t) == 1 and t.isalpha() for t in letters) \
                and "".join(letters) in KNOWN_TLDS:
            return size
    return 0


def id_label(v: str, cue: str | None) -> str:
    if cue in ("NRIC", "PASSPORT_NUM", "CAR_PLATE"):
        return cue
    digits = sum(c.isdigit() for c in v)
    if v[0] in "STFGM" and digits >= 6:
        return "NRIC"
    if v[0] in "KE" and digits >= 6:
        return "PASSPORT_NUM"
    return "CAR_PLATE"


def _digit_label(d: str, cue: str | None) -> tuple[str, float] | None:
    n = len(d)
    if n < 7:
        return None
    if cue == "DATE" and n <= 8:
        return "DATE", 0.8
    if n == 8 and d[0] in "689":
        return "PHONE", 0.95 if cue in ("PHONE", None) else 0.8
    if n == 10 and d.startswith("65") and d[2] in "689":
        return "PHONE", SCORE_VALID
    if 13 <= n <= 19 and d[0] in "3456":
        return "CREDIT_CARD", SCORE_VALID if V.luhn_ok(d) else (0.85 if cue == "CREDIT_CARD" else SCORE_SHAPE)
    if 9 <= n <= 12:
        if cue == "PHONE" and n == 9 and d[0] in "689":
            return "PHONE", SCORE_SHAPE  # one digit too many: a repeated or misheard digit
        return "BANK_ACCOUNT", 0.9 if cue == "BANK_ACCOUNT" else SCORE_SHAPE
    # 7, 8 (not a phone prefix) or 20+ digits: something long and numeric; take the cue's label
    label = cue if cue in ("PHONE", "BANK_ACCOUNT", "CREDIT_CARD", "NRIC", "PASSPORT_NUM") else "BANK_ACCOUNT"
    return label, 0.6 if cue else SCORE_WEAK


def _unmistakable(h: _Hit) -> bool:
    """A shape no look-alike context explains away: a valid NRIC, a Luhn-valid card."""
    return (h.label == "NRIC" and h.score >= SCORE_VALID) or (
        h.label == "CREDIT_CARD" and h.score >= SCORE_VALID and h.hi - h.lo >= 15)


LOOKALIKE_GLUE = frozenset("number no num is was it's code id".split())
LOOKALIKE_CODE_DIGITS = 3  # a run with letters is a look-alike code only with this many digits (lookalike)
NUMBER_LABELS = frozenset({"PHONE", "NRIC", "PASSPORT_NUM", "CREDIT_CARD", "CAR_PLATE", "BANK_ACCOUNT"})


def lookalike(span: Span, transcript: Transcript) -> bool:
    """Whether a span of any detector (the trained NER's too) is a look-alike by rule 5: an
    identifier label in non-PII context ("case reference number is two zero two four ...",
    "... dollars") whose words hold no unmistakable shape. Stricter than the pattern
    detector's own rule: a context word before the span counts only when nothing but
    "number", "is", "code", ... stands between them ("please block it, thanks, S double
    eight ..." is no block number). Names, emails and dates are never look-alikes here."""
    if span.label not in NUMBER_LABELS:
        return False
    idx = [k for k, w in enumerate(transcript.words) if w.start < span.end and span.start < w.end]
    if not idx:
        return False
    tokens = [w.text for w in transcript.words]
    before = [clean_token(t) for t in tokens[max(0, idx[0] - 3): idx[0]]]
    after = {clean_token(t) for t in tokens[idx[-1] + 1: idx[-1] + 3]}
    named = [j for j, t in enumerate(before) if t in NON_PII_BEFORE and not security_code(before, j)]
    # the context word names this number ("reference number is ...", "code 1234"), not some
    # other thing said before it ("please block it, thanks, double eight ...")
    if not (after & NON_PII_AFTER) and not (named and all(t in LOOKALIKE_GLUE for t in before[named[-1] + 1:])):
        return False
    runs = [sym for _, _, sym in normalize_tokens(tokens[idx[0]: idx[-1] + 1])]
    # spelled letters may be a misheard name or ID after a misheard context word ("the
    # receipt is E A eight C A eight" for "... is M E H T A"): letters are a look-alike only in
    # a code, at least LOOKALIKE_CODE_DIGITS digits and no more letters than digits ("tracking
    # S P X S G oh three one eight eight seven two", "quotation number Q R seven seven one")
    text = "".join(sym.text for sym in runs)
    digits = sum(c.isdigit() for c in text)
    code = digits == len(text) or (digits >= LOOKALIKE_CODE_DIGITS and 2 * digits >= len(text))
    return code and not any(_unmistakable(h) for sym in runs for h in _classify(sym, None))


def pii_cue_before(span: Span, transcript: Transcript, window: int = 3) -> bool:
    """Whether the context word nearest before ``span`` (within ``window`` words) is a cue of
    a PII label ("IC", "card", "account"; :data:`CUES`) rather than a look-alike's
    (:data:`NON_PII_BEFORE`): "my IC S ..." is, "order number, S G ..." is not. A word that
    begins before ``span`` is before it, though its end reaches in: the recogniser stretches
    a cue over the pause after it ("POSB" until the account's first digit)."""
    idx = [k for k, w in enumerate(transcript.words) if w.start < span.end and span.start < w.end]
    tokens = [clean_token(w.text) for w in transcript.words]
    if not idx:
        return False
    first = next((k for k in idx if transcript.words[k].start >= span.start), idx[-1] + 1)
    for k in range(first - 1, max(-1, first - window - 1), -1):
        t = tokens[k]
        if security_code(tokens, k):
            return True
        if t in NON_PII_BEFORE:
            return False
        if t in CUE_WORDS:
            return True
    return False


SECURITY_CODE = frozenset("security card".split())  # "security code": a card's, no promo code


def security_code(tokens: list[str], k: int) -> bool:
    """Whether ``tokens[k]`` is the "code" of a card's security code ("security code", "card
    code") or of a secret (:data:`SECRET_CODE`: "OTP code", "verification code"): a PII cue,
    not a look-alike's context word."""
    return tokens[k] == "code" and k > 0 and tokens[k - 1] in SECURITY_CODE | SECRET_CODE


# words that may stand between a cue and the number it announces ("account number is ...");
# none reads as a symbol ("a" is the letter A, "for" the digit 4)
CUE_GLUE = frozenset("number no num is was it's my his her their your our the its of".split())
DIGIT_LABELS = frozenset({"PHONE", "CREDIT_CARD", "BANK_ACCOUNT"})  # values of digits alone
TAIL_SURE = 0.35  # a trailing word heard at least this surely is no garbled digit (cue_runs.LOW_PROB)


_TLD_WORDS = frozenset("in my id co io info".split())  # top-level domains that are everyday words too


def _address_word(token: str) -> bool:
    """A word of an email address ("at", "dot", "com", "gmail", ".sg", "x@y"): after digits it
    says the value is an address the recogniser misread, not that the value has ended."""
    t = clean_token(token)
    return t in ("at", "dot") or t in KNOWN_TLDS - _TLD_WORDS or t in PROVIDERS or "@" in token \
        or "." in token.strip(".,!?")


# values that carry a check letter or digit, and the check of a whole value
CHECKED_VALUES = {"NRIC": V.is_valid_nric, "CREDIT_CARD": V.is_valid_card, "CAR_PLATE": V.is_valid_plate}
AFTER_CHECKED = 3  # a value's symbols after a checked value: a correction or another number, kept


def _checked_value_end(label: str, words: list[Word]) -> int | None:
    """The number of ``words`` up to the word that completes a checked value at their start: an
    NRIC/FIN whose check letter is right, a card of 15 or 16 digits that passes Luhn, a plate
    whose check letter is right. None where no such value starts them, or where
    :data:`AFTER_CHECKED` or more symbols follow it (a correction, or a second number)."""
    runs = normalize_tokens([w.text for w in words])
    if not runs or runs[0][0] != 0:
        return None
    _, _, sym = runs[0]
    text = sym.text
    ends = {"NRIC": (9,), "CREDIT_CARD": (16 if text[:2] not in ("34", "37") else 15,),
            "CAR_PLATE": (4, 5, 6, 7, 8)}[label]  # 15 digits: an Amex
    for n in ends:
        if len(text) >= n and CHECKED_VALUES[label](text[:n]):
            break
    else:
        return None
    end = sym.last(n - 1) + 1
    after = sum(len(r[2].text) for r in runs) - n
    return end if after < AFTER_CHECKED and end < len(words) else None


def trim_to_value(span: Span, transcript: Transcript) -> Span:
    """``span`` cut to the value it holds, where a detector (the trained NER, the cue-anchored
    runs, the patterns) took in words around it. Only number-like labels (:data:`NUMBER_LABELS`):
    * **the cue**: a span that holds a cue word (:data:`CUE_WORDS`) before the first word that
      reads as a digit or letter starts after the last such cue word and the glue words after
      it (:data:`CUE_GLUE`): "SBC account five five three ..." -> "five five three ...",
      "account, three eight ..." -> "three eight ...". Other words before the number stay
      ("account, free date, 3 -4 ...": "free date" may be its garbled start), and so does a
      cue after the first digit (a misheard part of the number);
    * **the tail** of a value of digits alone (:data:`DIGIT_LABELS`: phone, card, account):
      it ends at its last word that reads as a symbol; words after it that the recogniser
      was sure of (probability at least :data:`TAIL_SURE`) and that read as none ("...
      seven three six together", "... four, please double") are dropped, and a "double" or
      "triple" with no digit after it. A doubted word stays (it may be a garbled digit, as
      the cue-anchored runs take it), and so does a word of an email address ("two K dot
      seven seven oh seven dot com dot sg": an address the passes read as an account) and
      any word after an NRIC, passport or plate, whose check letter the recogniser often
      turns into a word;
    * **a checked value's tail** (:data:`CHECKED_VALUES`): where the symbols at the start of an
      NRIC/FIN, card or plate span make a value whose check letter or Luhn digit is right ("S
      nine five five seven two two five A, the F one"), the value is complete and the words after
      it are cut off, unless :data:`AFTER_CHECKED` or more symbols follow (a correction or a
      second number stays). A wrong check symbol says the value may go on: the tail stays.
    The cue is no part of the value, and beeping it (with what was heard before it) only
    hides the context a listener needs."""
    if span.label not in NUMBER_LABELS:
        return span
    words = transcript.words_during(span.start, span.end)
    first, last = 0, len(words)
    cut = None
    for k, w in enumerate(words):
        t = clean_token(w.text)
        if t in CUE_WORDS:
            cut = k
        elif t not in CUE_GLUE and token_symbols(w.text) is not None:
            break
    if cut is not None:
        first = cut + 1
        while first < last and clean_token(words[first].text) in CUE_GLUE:
            first += 1
    if span.label in DIGIT_LABELS:
        while last - 1 > first and (clean_token(words[last - 1].text) in REPEAT_WORDS or (
                token_symbols(words[last - 1].text) is None and words[last - 1].prob >= TAIL_SURE
                and not _address_word(words[last - 1].text))):
            last -= 1
    if span.label in CHECKED_VALUES and (end := _checked_value_end(span.label, words[first:last])) is not None:
        last = first + end
    if first >= last or (first, last) == (0, len(words)):
        return span
    start = max(span.start, words[first].start)
    end = min(span.end, words[last - 1].end) if last < len(words) else span.end  # a kept tail keeps its end
    text = transcript.text[words[first].char_start: words[last - 1].char_end].strip(".,!?;:\"' ")
    return Span(start, end, span.label, span.score, span.source, text)


@register("patterns")
class PatternDetector:
    """Phones, NRIC/FIN, passports, cards, plates, bank accounts and emails in spoken form."""

    name = "patterns"

    def detect(self, transcript: Transcript) -> list[Span]:
        words = transcript.words
        tokens = [w.text for w in words]
        spans: list[Span] = []
        for first, last, sym in normalize_tokens(tokens):
            cue = cue_label(tokens, first)
            non_pii = _non_pii_context(tokens, first, last)
            for h in _classify(sym, cue):
                if non_pii and not _unmistakable(h):
                    continue
                lo = sym.owner[h.lo]
                if h.label == "PHONE" and lo > 0 and clean_token(tokens[lo - 1]) in ("plus", "+"):
                    lo -= 1  # "plus six five ..." belongs to the number
                ws = list(words[lo: sym.last(h.hi - 1) + 1])  # a spelled letter reaches its word ("D for David")
                spans.append(span_from_words(transcript, ws, h.label, h.score, self.name))
        spans.extend(self._emails(transcript))
        return spans

    def _emails(self, transcript: Transcript) -> list[Span]:
        """Emails, anchored on their top-level domain: "... at gmail dot com", "x@y.com",
        and what Whisper makes of spoken ones ("kneelingatpacific .net .sg",
        "charwood dot min at iclod .com")."""
        words = transcript.words
        toks = [clean_token(w.text).lstrip("-") for w in words]
        dotted = [w.text.strip().startswith(".") for w in words]
        n = len(toks)

        def is_dot(k: int) -> bool:
            return toks[k] in ("dot", "period", "point")

        def is_tld(k: int) -> bool:
            if toks[k] in KNOWN_TLDS and (dotted[k] or (k > 0 and is_dot(k - 1))):
                return True
            return bool(re.search(r"[a-z0-9]\.(?:" + "|".join(KNOWN_TLDS) + r")$", toks[k]))

        def dot_joined(k: int) -> bool:
            return is_dot(k + 1) or (k > 0 and is_dot(k - 1))

        def website(k: int) -> bool:  # "www dot dbs dot com", "the website is shopee dot sg"
            return any(t in WEBSITE_WORDS for t in toks[max(0, k - 8):k])

        out: list[Span] = []
        k = 0
        while k < n:
            if "@" in toks[k] and re.search(r"[a-z0-9]@[a-z0-9-]+\.", toks[k]):
                out.append(span_from_words(transcript, [words[k]], "EMAIL", SCORE_VALID, self.name))
                k += 1
                continue
            end = k
            if not is_tld(k):
                spelled = _spelled_tld(toks, k) if k > 0 and is_dot(k - 1) else 0
                if not spelled:
                    k += 1
                    continue
                end = k + spelled - 1  # "dot s g"
            # extend over further ".sg" / "dot sg"
            while end + 1 < n and (is_tld(end + 1) or (is_dot(end + 1) and end + 2 < n and is_tld(end + 2))):
                end += 1 if is_tld(end + 1) else 2
            # "hotmail dot com", "hotmail .com": the word before the provider is "at", as heard or not
            provider = next((j for j in (k - 2 if k >= 2 and is_dot(k - 1) else None, k - 1 if dotted[k] else None)
                             if j is not None and j >= 0 and toks[j] in MAIL_PROVIDERS), None)
            start, budget, has_at, slot = k, LOCAL_WORDS, False, False
            while start - 1 >= 0:
                j = start - 1
                t = toks[j]
                glue = is_dot(j) or dotted[j] or t in ("underscore", "dash", "hyphen")
                if t in ("at", "@"):
                    if has_at:
                        break
                    has_at = True
                elif glue:
                    pass
                elif provider is not None and j == provider - 1 and t not in OWNERS and t.replace("'", "").isalpha() \
                        and not words[j].text.rstrip().endswith((",", "?", "!", ".")):
                    slot = True  # "that's hotmail", "and gmail": a misheard "at"
                elif t in EMAIL_STOP or not t or words[j].text.rstrip().endswith((",", "?", "!")) \
                        or (words[j].text.rstrip().endswith(".") and not dotted[j + 1] and not is_dot(j + 1)):
                    break
                elif not (len(t) == 1 or t in DIGIT_WORDS or ((has_at or slot) and dot_joined(j))):
                    # the local part's words that a dot joins ("diva dot zah") are free
                    if budget == 0:
                        break
                    budget -= 1
                start = j
            cue = any(t in ("email", "e-mail", "mail", "emails") for t in toks[max(0, start - 8):start])
            glued = any(re.search(r"[a-z]at[a-z]", t) for t in toks[start:k])  # "kneelingatpacific"
            local = slot and start < provider - 1  # a local part before "(at) hotmail"
            if not (has_at or cue or glued or local) and provider is None and not website(k):
                # a domain with nothing of an address heard before it, no mail provider's ("my
                # hotmail dot com" is an account) and no website's: the local part was garbled
                # past reading ("the husbanding is dot com dot sg"): the domain and the few words
                # before it, up to a clause's end
                start = k - 1 if k > 0 and is_dot(k - 1) else k
                for _ in range(BARE_DOMAIN_WORDS):
                    j = start - 1
                    if j < 0 or not toks[j] or words[j].text.rstrip().endswith((",", "?", "!", ".")):
                        break
                    start = j
                out.append(span_from_words(transcript, list(words[start:end + 1]), "EMAIL", SCORE_WEAK, self.name))
                k = end + 1
                continue
            if (start == k and not re.search(r"[a-z0-9]\.", toks[k])) or not (has_at or cue or glued or local):
                k = end + 1
                continue
            score = SCORE_VALID if has_at else (SCORE_SHAPE if cue or local else SCORE_WEAK)
            out.append(span_from_words(transcript, list(words[start:end + 1]), "EMAIL", score, self.name))
            k = end + 1
        return out
