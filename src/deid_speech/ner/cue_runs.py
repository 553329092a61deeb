"""Cue-anchored capture: what follows a PII cue is redacted when it could be the entity,
even when no shape matches because the recogniser garbled it.

A caller who says "my IC is S eight one..." has announced an NRIC; the recogniser may
then write "S902 for nearly 4 -1 -k" or "K3 to 7, one zero four F", which no validator
accepts. The cue is the strongest signal left, so this detector trusts it.

Rules (tests in tests/ner/test_cue_runs.py hold them):

1. **Cues** are the label cue words of :data:`deid_speech.ner.patterns.CUES` ("IC",
   "passport", "card", "plate", "account", "phone", "PayNow" or "pay now", "number", ...)
   and "email". The run
   must start within :data:`MAX_LEAD` tokens after the cue; only glue words ("is", "my",
   "number", "no", "it's", "uh", ...) and other cue words ("bank account") may stand
   between.
2. A **run** is a stretch of tokens each of which could belong to a spoken identifier:
   a digit or letter, spoken, written or glued ("K3", "4", "-1", "S902", "ess"); a tens
   word with its unit word after it, a digit pair's first half ("eighty six, sixty six",
   not "twenty" alone); a homophone of a digit or letter ("to"/"too" 2, "for" 4, "won" 1,
   "ate" 8, "tree"/"free" 3, "fife" 5, "sex" 6, "heaven" 7, "nein" 9, "why"/"wide" Y, "see"
   C, "are" R, "you" U, "ex" X, "oh" 0); a letter spelled with a word ("D for David", "S as in
   Sugar": one letter, its words with it) or a word of the spelling alphabet ("sierra kilo");
   "double"/"triple"; a joiner ("dash", "uh"); or a word the recogniser itself doubted
   (probability under :data:`LOW_PROB`). One other word may stand inside a run when
   identifier tokens follow it ("81 is the one 47": two words at most, and then only
   between symbols). A word that is a symbol only by its sound ("I", "to",
   "for", "a") after such a word does not renew that budget, and ends no run: "card six
   nine seven seven the rest I don't want to say" holds only "six nine seven seven". A run
   does not start with a word that is a symbol only by its sound ("I", "you", "for", "it")
   when a plain word follows it ("the card I use is four eight ..." starts at "four").
3. A run ends at a clause boundary: a token ending in ".", "?" or "!" (Whisper's dotted
   digit groups such as ".1" do not end it), a comma followed by a non-identifier word,
   a stop word ("and" before a non-identifier, "then", "thanks", "okay", "but", "so", ...),
   another cue word (it announces an entity of its own: "transfer I need your DBS account",
   "A, Mastercard ending ..."), or after :data:`MAX_RUN` tokens. Once it holds a whole
   entity of its label (:data:`MAX_SYMBOLS`: plate 8, NRIC 9, phone 10, ...), a stray or
   doubted word ends it too: "S K V four one two seven X, registered for Saturday ..." is
   no longer one plate. "one" after "the", "that" or "this" at the run's end, with at most
   one symbol after it, is a pronoun: the run ends before it ("... five is the one for",
   "... three, that one for my"). A unit or time word ("pm", "dollars") ends it, and the digits
   just before it are no part of it when other words separate them from the run ("... X
   registered for Saturday six pm" ends at "X").
4. The run is reported under the cue's label when it holds at least
   :data:`MIN_SYMBOLS` symbols for that label (phone 4, card 6, account 5, NRIC,
   passport and plate 3; a glued token such as "L864" counts each of its symbols), at
   :data:`SCORE` (above the default threshold 0.5, below a shape match). A bare "number"
   takes the label of the nearest specific cue in the eight tokens before it ("IC ...
   number"), else the label the run's shape suggests. Look-alike context (a price, a time,
   an order or block number: the pattern detector's ``NON_PII_BEFORE``/``NON_PII_AFTER``
   words) vetoes a run, and such a word inside a run ends it.
5. A self-correction ("sorry", "no wait", "I mean") and words the recogniser doubted do
   not end a run and use none of its stray-word budget.
6. **Without a cue**, two shapes are identifiers all the same: a single token that glues
   letters and at least four digits ("M955722", "9240K", "Pio2548078"; decades, ordinals
   and units such as "1980s", "15th", "5km" aside), and digit groups that one stray word
   or a self-correction splits but that hold at least eight digits together ("4933, 7275,
   47736, I'm 777"). Both at :data:`UNCUED_SCORE`.
7. **Dates of birth**: after "born", "birth", "birthday" or "DOB", the words up to the
   clause end (at most eight) when they hold a month, an ordinal or a year.
8. **Emails**: after an "email" cue, the words from the first non-glue word to the last
   domain ending (".com", "dot com", ".sg", "x@y.com"), or to the provider or "at" when no
   ending was heard. Without a cue, a provider name glued to a local part
   ("JasonTayasgmail") or a provider or dotted word followed by a dotted top-level domain
   ("iCloud .com", ".tanandsonsmotors .com") anchors an address that extends back over up
   to three words of local part.
9. **A card's security code or expiry**: after "CVV", "CVC", "security code", "card code",
   "(three) digits at the back" or "behind", "expiry", "expires", "valid thru", a run of 3-4
   symbols with at least 3 digits is the card's data, redacted as CREDIT_CARD (a card's
   security code must never be kept, PCI DSS; the card number itself is rule 4's).
10. **Secrets said aloud** (SECRET): after "PIN", "OTP", "TAC", "passcode", "password", or a
   "code" that no look-alike's word names (:data:`CODE_LOOKALIKE`: "promo code", "postal
   code"; "OTP code", "verification code", "the code I got"), up to :data:`SECRET_LEAD`
   other words may come before the value ("the OTP sent to my phone is ..."); the value is
   a run of 4-8 symbols with at least 3 digits (a PIN, a one-time code), redacted at
   :data:`SECRET_SCORE`, above a number label's shape score, so an OTP is no "phone". No
   look-alike word vetoes it (the cue names what follows), but a count does ("the six digit
   code", "eight characters"). After a password or passcode, the value may be words
   ("my password is kopi peng seven seven", "I changed my password to ..."): up to the
   clause end or a stop word, at most :data:`PASSWORD_WORDS` words, ending at its last
   symbol if it holds one, and none when its first word describes the password rather than
   gives it ("is wrong", "is not working", "must be ...", "is case sensitive"). The value
   may also come first: "seven seven two oh, that is my card PIN", "blue tiger four four
   nine, that one is my password". The cue may be spelled ("my card P I N") or written as
   the recogniser hears it ("the tack", "oh tp", "card bin"). A value elsewhere in the cue's
   sentence, within :data:`SECRET_CONTEXT` words before or after it, is one too, at
   :data:`CONTEXT_SCORE`, unless another entity's cue or a look-alike's word stands right
   before it ("is it two four six eight or two four eight six ah, my debit card PIN"; a value
   found anchors the next: "the older one ..., the new one ..."); after "SMS" only up to
   :data:`SMS_SYMBOLS` symbols (eight digits there are a phone). A run that plain words part
   is the values they part when each is one ("not six eight four oh two, is six eight four oh
   two two"). A value keyed in needs no name: after "key in", "typed", "entered", 4 to
   :data:`ENTRY_SYMBOLS` symbols ("I key in double one double two three four"), unless "the
   amount" or a look-alike's word follows the verb.
"""
from __future__ import annotations

import re

from deid_speech.ner.base import register, span_from_words
from deid_speech.ner.patterns import CUE_WORDS as _LABEL_CUE_WORDS
from deid_speech.ner.patterns import (
    CUES,
    MAIL_PROVIDERS,
    NON_PII_AFTER,
    NON_PII_BEFORE,
    PROVIDERS,
    SECRET_CODE,
    SECRET_CUES,
    SECURITY_CODE,
    cue_label,
    id_label,
)
from deid_speech.ner.spacy_ner import MONTHS, ORDINAL_WORDS
from deid_speech.spoken import JOINERS as SPOKEN_JOINERS
from deid_speech.spoken import (
    REPEAT_WORDS,
    SPELLING_ALPHABET,
    TENS_WORDS,
    WEAK_WORDS,
    clean_token,
    digit_pair,
    spelled_letter,
    token_symbols,
)
from deid_speech.types import Span, Transcript, Word

SCORE = 0.6
UNCUED_SCORE = 0.55
LOW_PROB = 0.35
MAX_LEAD = 5
MAX_RUN = 24
MAX_INSIDE = 2
MIN_SYMBOLS = {"PHONE": 4, "CREDIT_CARD": 6, "BANK_ACCOUNT": 5, "NRIC": 3, "PASSPORT_NUM": 3,
               "CAR_PLATE": 3, "CARD_CODE": 3, "?": 4}
# the most symbols one entity of a label holds ("+65 9123 4567"; 19-digit cards; "SKV4127X"; a
# security code or an expiry "0827")
MAX_SYMBOLS = {"PHONE": 10, "CREDIT_CARD": 19, "BANK_ACCOUNT": 16, "NRIC": 9, "PASSPORT_NUM": 9,
               "CAR_PLATE": 8, "CARD_CODE": 4, "?": 19}
# a card's security code or expiry (rule 9): redacted as CREDIT_CARD, the card's data
CARD_CODE_CUES = frozenset("cvv cvv2 cvc cvc2 csc expiry expiration expires expire exp".split())
CARD_CODE_NAMES = frozenset("digits digit numbers number card cvv cvc code".split())  # "... at the back"
CARD_CODE_LEAD = frozenset("date again at the back of card".split())  # between such a cue and its digits
CARD_CODE_BEFORE = {"code": tuple(SECURITY_CODE), "back": ("at", "the"), "behind": ("digits", "numbers"),
                    "thru": ("valid",), "through": ("valid",), "till": ("valid",), "until": ("valid",)}
# the symbols of a whole entity of the labels whose entities all have one length (NRIC "S1234567D",
# passport "K1234567R"): a run that holds fewer may end in words the recogniser made of the rest
# (see _rest; phones too bought nothing on the dev part), each at most SYMBOL_S seconds of speech
FULL = {"NRIC": 9, "PASSPORT_NUM": 9}
SYMBOL_S = 0.5
# homophones of digits and letter names heard in a number read over a phone line, beyond the
# ones the shared normalizer reads everywhere (spoken.DIGIT_HOMOPHONES, spoken.LETTER_NAMES:
# "to", "for", "ate", "why", "see", "ess", ...); only inside a cue-anchored run (elsewhere
# they are ordinary words)
HOMOPHONES = {
    "fore": "4", "tree": "3", "free": "3", "fife": "5", "sex": "6", "sick": "6", "heaven": "7", "nein": "9",
    "niner": "9", "wide": "Y", "eggs": "X", "es": "S", "it": "8",
}
JOINERS = SPOKEN_JOINERS | {"slash"}
FILLERS = frozenset("uh um er erm ah hmm".split())  # skipped when looking for a look-alike's context word
GLUE = frozenset("is was my the number numbers no no. num it's its it is that's that be will i a an of "
                 "uh um er erm ah hmm like ya yeah yes ok is: number: you want here his her our their "
                 "passbook savings current joint card account bank details vehicle car registration plate "
                 "mobile contact handphone hp visa mastercard amex credit debit ic nric fin passport "
                 "new old last full".split())
# a self-correction inside a run does not end it ("five six, no wait, five oh nine")
CORRECTIONS = frozenset("sorry wait no mean actually correction i i'm".split())
STOPS = frozenset("then thanks thank okay ok but because cause please yes yeah right "
                  "can could would should will what when where which who how also".split())
# a bare "number" is a cue whose label the nearest specific cue before it gives, else the shape
GENERIC_CUES = frozenset("number no. numbers".split())
EMAIL_CUES = frozenset("email e-mail emails mail -mail".split())
DOMAIN_WORDS = frozenset("com sg net org edu gov co my io biz info".split())
DATE_CUES = frozenset("born birth birthday dob".split())
_CALENDAR = frozenset(MONTHS) - {"may", "mar"}  # a secret's run holding a month is a date
_DATE_WORDS = frozenset(MONTHS) | frozenset(ORDINAL_WORDS) | {"nineteen", "thousand"}
# the words that announce an entity: inside a run they end it (the entity they announce is
# another one: "transfer I need your DBS account", "IC, a Mastercard ending ..."); before it
# they are glue, unless they read as symbols ("IC" may be a garbled plate's letters)
CUE_WORDS = _LABEL_CUE_WORDS | EMAIL_CUES | DATE_CUES | CARD_CODE_CUES
# rule 10: words that name a value near a secret's cue as something else ("my number is ...",
# "postal ...") when they stand in the three words before it; "SMS" and "text" say where a code came
NEARBY_NAMERS = (_LABEL_CUE_WORDS | GENERIC_CUES | NON_PII_BEFORE) - SECRET_CUES - {"sms", "text"}
# rule 10: secrets
SECRET_SCORE = 0.8
SECRET_SYMBOLS = (4, 8)  # a PIN's 4 digits to an 8-digit one-time code
SECRET_LEAD = 6  # words between the cue and the value: "the OTP sent to my phone is ..."
PASSWORD_CUES = frozenset("password passwords passwd passcode passcodes".split())
SECRET_CONTEXT = 12  # words between a secret's cue and a value elsewhere in its sentence
# "the older one five zero ...", "the new one two eight ...": "one" is a pronoun there
PRONOUN_ONE = frozenset("the that this new old newer older first second last latest other next another same".split())
SPELLED_SECRET = frozenset({("p", "i", "n"), ("o", "t", "p"), ("t", "a", "c")})  # "my card P I N"
# how the recogniser writes a secret's name: "the tack", "oh tp"; "PIN" after a card or ATM as
# "bin", "pen", "ping" ("that is my card bin")
HEARD_SECRET = frozenset({("the", "tack"), ("oh", "tp"), ("o", "tp")})
HEARD_PIN = frozenset("bin pen ping pinto".split())
PIN_OWNERS = frozenset("card atm debit credit banking app".split())
# a value keyed in is a secret: "I key in double one double two three four", "I typed P A S S ..."
ENTRY_VERBS = {"key": "in", "keyed": "in", "keying": "in", "type": "in", "typed": None, "entered": None}
ENTRY_SYMBOLS = 16  # a password typed letter by letter
SMS_SYMBOLS = 6  # the longest value that "SMS" alone makes a one-time code
CONTEXT_SCORE = 0.7  # such a value: below a value right at its cue, above another label's cue-run
PASSWORD_WORDS = 14  # "capital P, a, s, s, w, o, r, d, nine nine"
# cue words of other labels that may stand between a secret's cue and its value: where it was
# sent, what it opens ("the OTP sent to my phone is ...", "the PIN for my card is ...")
SECRET_VIA = frozenset("phone mobile handphone hp sms text card account bank".split())
# "code" is a secret's after a word of patterns.SECRET_CODE ("OTP code") or before one of these
# ("the code I got is ..."), never after a look-alike's word ("promo code", "intercom code")
CODE_SENT = frozenset("got get received receive came sent send".split())
CODE_SENT_BY = frozenset("that which i you they we".split())
CODE_LOOKALIKE = frozenset("promo promotion promotional discount coupon referral postal zip post area country "
                           "dialling dialing error product dress qr bar source tax course module colour "
                           "color style branch bank swift morse intercom door gate lift locker".split())
# a value's first word that describes a password instead of giving it ("my password is wrong")
PASSWORD_NOT = frozenset("wrong incorrect invalid not correct right expired locked blocked changed reset same too "
                         "very still already case different weak strong okay ok fine working required needed "
                         "supposed forgotten lost missing gone empty long short easy hard difficult secure safe "
                         "a an the what something this that it in on sent being been also just login log sign "
                         "access open enter use change get at least more less only lah lor leh meh hor sia "
                         "mah my your his her their our its".split())
# a count after a number: "six digits", "eight characters", "three tries"
COUNT_NOUNS = frozenset("digit digits character characters letter letters number numbers times tries attempts "
                        "minutes mins minute seconds hours days".split())
# words between a value said first and its cue: "..., that one is my card PIN"
BACK_GLUE = frozenset("that that's thats this is was my the it's its be card app atm bank banking phone "
                      "portal login new old one".split())


SOUND_ONLY = WEAK_WORDS | frozenset(HOMOPHONES)
DEICTIC = frozenset("the that this".split())  # "the one", "that one": a pronoun


def _symbol(word: Word, nxt: Word | None = None) -> str | None:
    """The symbols a token could stand for inside a cue-anchored run, or None; a tens word
    is one only as a digit pair's first half, with its unit word ``nxt`` right after it
    ("eighty six, sixty six": "8", then "6"), not alone ("hundred and twenty gig")."""
    t = clean_token(word.text).lstrip("-–")
    sym = token_symbols(word.text, word.text)
    if sym is not None:
        return sym
    if t in TENS_WORDS:
        pair = nxt is not None and digit_pair(word.text, nxt.text)
        return TENS_WORDS[t] if pair else None
    return HOMOPHONES.get(t) or SPELLING_ALPHABET.get(t)  # after a cue, "sierra" is S


def _ends_clause(word: Word) -> bool:
    raw = word.text.strip()
    return raw.endswith(("?", "!")) or (raw.endswith(".") and not raw.startswith(".") and len(raw) > 2)


def _stem(t: str) -> str:
    return re.sub(r"(?<=[a-z]{4})(?:ed|s)$", "", t)  # "accounted", "cards" -> the cue word


def _cue_at(tokens: list[str], k: int) -> str | None:
    t = tokens[k]
    if t == "now" and k > 0 and tokens[k - 1] == "pay":
        t = "paynow"  # Whisper's "pay now" for PayNow, paid to a phone number
    if t in EMAIL_CUES:
        return "EMAIL"
    if t in DATE_CUES:
        return "DATE"
    if t in CARD_CODE_CUES or _card_code_phrase(tokens, k):
        return "CARD_CODE"
    if _secret_name(tokens, k):
        return "SECRET"
    for label, words in CUES.items():
        if (t in words or _stem(t) in words) and label in MIN_SYMBOLS:
            return label
    if t in GENERIC_CUES:
        for j in range(k - 1, max(-1, k - 9), -1):  # "IC number", "your account ... number"
            label = _cue_at(tokens, j) if tokens[j] not in GENERIC_CUES else None
            if label in MIN_SYMBOLS:
                return label
            if label == "SECRET":
                return None  # "TAC number": the secret's own cue finds its value (rule 10)
        return "?"
    return None


def _secret_name(tokens: list[str], k: int) -> bool:
    """Whether ``tokens[k]`` names a secret (rule 10): "PIN", "OTP", "password", ...; a secret's
    "code" (:func:`_secret_code`); "P I N" spelled; the recogniser's "the tack", "oh tp", or
    "bin" after "card" or "ATM"."""
    t = tokens[k]
    return (t in SECRET_CUES or (t == "code" and _secret_code(tokens, k))
            or tuple(tokens[max(0, k - 2):k + 1]) in SPELLED_SECRET or tuple(tokens[max(0, k - 1):k + 1]) in HEARD_SECRET
            or (t in HEARD_PIN and k > 0 and tokens[k - 1] in PIN_OWNERS))


def _secret_code(tokens: list[str], k: int) -> bool:
    """Whether the "code" at ``k`` is a secret's: a word of :data:`SECRET_CODE` in the three
    before it ("OTP code", "verification code", "for the card activation the code"), one that
    says it was sent in the two after it ("the code I got", "the code that came by SMS"), or
    "is" right after it ("the code is ..."); never a look-alike's ("promo code", "intercom
    code", "order code")."""
    before = tokens[max(0, k - 3):k]
    return tokens[k - 1] not in CODE_LOOKALIKE | NON_PII_BEFORE if k > 0 and (
        set(before) & SECRET_CODE or tokens[k + 1:k + 2] == ["is"] or _sent(tokens[k + 1:k + 3])) else False


def _sent(after: list[str]) -> bool:
    """Whether the words after "code" say it was sent: "got", "I got", "that came", "they send"."""
    return bool(after) and (after[0] in CODE_SENT or (len(after) > 1 and after[0] in CODE_SENT_BY and after[1] in CODE_SENT))


def _card_code_phrase(tokens: list[str], k: int) -> bool:
    """Whether ``tokens[k]`` ends a phrase that announces a card's security code or expiry:
    "security code", "card code", "(the three) digits at the back", "digits behind", "valid
    thru"."""
    before = CARD_CODE_BEFORE.get(tokens[k])
    if before is None or k == 0 or tokens[k - 1] not in before:
        return False
    if tokens[k] == "back":  # "... digits at the back", "CVV at the back of the card", not "call me back"
        return (any(t in CARD_CODE_NAMES for t in tokens[max(0, k - 5): k])
                or tokens[k + 1: k + 4] == ["of", "the", "card"])
    return True


def _is_symbolic(w: Word, nxt: Word | None = None) -> bool:
    return _symbol(w, nxt) is not None or clean_token(w.text) in REPEAT_WORDS


def _next(words, k: int) -> Word | None:
    return words[k + 1] if k + 1 < len(words) else None


def _read(words: tuple[Word, ...], k: int, repeat: int) -> tuple[str, int]:
    """The symbols word ``k`` adds to a run after a "double"/"triple" that left ``repeat``, and
    the repeat it leaves: a symbol's first character comes ``repeat`` times ("triple seven
    four" is 7774); "double"/"triple" set the repeat, a joiner ("dash") resets it, and any
    other word (a stray "uh") leaves it for the symbol after it."""
    sym = _symbol(words[k], _next(words, k))
    t = clean_token(words[k].text)
    if sym:
        return sym[:1] * (repeat - 1) + sym, 1
    if t in REPEAT_WORDS:
        return "", REPEAT_WORDS[t]
    return "", 1 if sym is not None or t in JOINERS else repeat


def _run(words: tuple[Word, ...], start: int, max_inside: int = MAX_INSIDE,
         max_symbols: int = MAX_SYMBOLS["?"]) -> tuple[int, int, str] | None:
    """(first, last, symbols) of the identifier run starting at or after ``start``; once it
    holds ``max_symbols`` (a whole entity of its label), only symbols and self-corrections
    continue it."""
    n = len(words)
    k = start
    lead = 0
    while k < n and lead <= MAX_LEAD:  # skip glue words to the run's first symbol
        t = clean_token(words[k].text)
        if _is_symbolic(words[k], _next(words, k)):  # even a cue word: "joint IC C six six" may be a garbled plate
            break
        if (t not in GLUE and t not in CUE_WORDS) or _ends_clause(words[k]):
            return None
        k += 1
        lead += 1
    if k >= n or lead > MAX_LEAD:
        return None
    first = last = k
    parts: list[tuple[int, str]] = []  # (token, the symbols it added)
    inside, repeat, group = 0, 1, k  # group: where the symbols just before k began
    texts = [w.text for w in words]
    while k < n and k - first < MAX_RUN:
        w = words[k]
        t = clean_token(w.text)
        held = sum(len(x) for _, x in parts)
        if t in CUE_WORDS and k > first:
            break  # another cue: what follows is the entity it announces
        spelled = spelled_letter(texts, k)
        # "D for David": one letter, with the words that spell it ("and for November" only inside a run)
        if spelled is not None and spelled[1] > k and (not spelled[2] or parts):
            if not parts or parts[-1][0] != k - 1:
                group = k
            k = spelled[1]
            w = words[k]
            parts.append((k, spelled[0] * repeat))
            repeat, inside = 1, 0
            if _ends_clause(w) or (w.text.rstrip().endswith(",") and not _goes_on(words, k + 1)):
                break
            k += 1
            continue
        if t in NON_PII_AFTER:  # "six pm", "two dollars": the number before it is no part of the run
            if parts and parts[-1][0] == k - 1 and any(j < group for j, _ in parts):
                parts = [(j, x) for j, x in parts if j < group]
            break
        if _is_symbolic(w, _next(words, k)) or (t in JOINERS and parts):
            if not parts or parts[-1][0] != k - 1:
                group = k
            said, repeat = _read(words, k, repeat)
            parts.append((k, said))
            if not (inside and t in SOUND_ONLY):  # "the rest I don't": "I" renews no stray budget
                inside = 0
        elif t in STOPS or t in NON_PII_BEFORE or not t:
            break  # a look-alike's context word ("unit", "postal") starts something else
        elif t in CORRECTIONS:
            pass  # "no wait": inside the run, no budget used
        elif held >= max_symbols:
            break  # a whole entity already: what follows is something else
        elif w.prob < LOW_PROB:
            pass  # a doubted word: inside the run, no budget used
        elif inside >= max_inside:
            break
        else:
            inside += 1  # a stray word: kept only if symbols follow
        # a clause ends the run; so does a comma unless the next two words go on with symbols
        if _ends_clause(w) or (w.text.rstrip().endswith(",") and not _goes_on(words, k + 1)):
            break
        k += 1
    # a symbol only by its sound after a stray word, at the run's end, is the stray words'
    # sentence going on ("six nine seven seven the rest I don't ..."), not the entity
    # and a joiner or "double" at the end joins nothing ("... double oh ah er" ends at "oh");
    # either may bare the other ("... the rest for uh")
    while parts and (not parts[-1][1] or (
            len(parts) > 1 and clean_token(words[parts[-1][0]].text) in SOUND_ONLY
            and not _is_symbolic(words[parts[-1][0] - 1]) and clean_token(words[parts[-1][0] - 1].text) not in JOINERS)):
        parts.pop()
    # "... five is the one for", "... three, that one for my": "one" after "the", "that" or
    # "this" is a pronoun, and a symbol right after it the sentence going on
    tail = [j for j, _ in parts[-2:]]
    one = next((j for j in tail if clean_token(words[j].text) == "one"), None)
    if one is not None and one > first and clean_token(words[one - 1].text) in DEICTIC and tail[-1] - one <= 1:
        parts = [(j, x) for j, x in parts if j < one]
    if not parts:
        return None
    last = parts[-1][0]
    symbols = "".join(x for _, x in parts)
    # a run does not start with a word that is a symbol only by its sound ("I", "you", "for",
    # "it") when a plain word follows it: "the card I use is four eight ..." starts at "four"
    while first < last and clean_token(words[first].text) in SOUND_ONLY and not _is_symbolic(words[first + 1]):
        nxt = next((j for j in range(first + 1, last + 1) if _is_symbolic(words[j])), None)
        if nxt is None:
            break
        symbols = symbols[len(_symbol(words[first]) or ""):]
        first = nxt
    return first, last, symbols


def _rest(words: tuple[Word, ...], tokens: list[str], last: int, missing: int) -> int:
    """The last word of a run that holds ``missing`` fewer symbols than its label's entities
    do: the recogniser may have turned the rest into words ("my passport, K815, time for
    tomorrow," for "K oh eight one five, five four two R"). The run takes in the words after
    it up to the clause end (a comma counts here), at most ``missing`` of them, starting
    within ``missing`` times :data:`SYMBOL_S` seconds, when one of them could be a symbol
    ("for") and none is a stop, a cue, a look-alike's context word, "and" or "my"."""
    if missing <= 0 or _ends_clause(words[last]):
        return last
    limit = words[last].end + missing * SYMBOL_S
    k = last
    while k + 1 < len(words) and k - last < missing and words[k + 1].start < limit:
        t = tokens[k + 1]
        if t in STOPS or t in CUE_WORDS or t in NON_PII_BEFORE or t in NON_PII_AFTER or t in ("and", "my"):
            break
        k += 1
        if _ends_clause(words[k]) or words[k].text.rstrip().endswith(","):  # the clause ends here
            return k if any(_is_symbolic(w) for w in words[last + 1:k + 1]) else last
    return last


def _goes_on(words: tuple[Word, ...], k: int) -> bool:
    """Whether symbols follow at ``k`` within two words, self-corrections not counted."""
    seen = 0
    while k < len(words) and seen < 2:
        if _is_symbolic(words[k]):
            return True
        seen += clean_token(words[k].text) not in CORRECTIONS
        k += 1
    return False


def _guess_label(symbols: str) -> str:
    """The label a run's shape suggests when its cue is only "number"."""
    digits = sum(c.isdigit() for c in symbols)
    if symbols[:1].isalpha():
        return "PASSPORT_NUM" if symbols[0] in "KE" and digits >= 6 else "NRIC" if digits >= 6 else "CAR_PLATE"
    if digits >= 13:
        return "CREDIT_CARD"
    return "PHONE" if 7 <= digits <= 8 and symbols[0] in "689" else "BANK_ACCOUNT"


def _vetoed(tokens: list[str], first: int, last: int) -> bool:
    return bool(set(tokens[max(0, first - 3): first]) & NON_PII_BEFORE) or _unit_after(tokens, last)


def _words_after(tokens: list[str], last: int, window: int, n: int) -> set[str]:
    """The first ``n`` words after ``last`` that are no filler, among the ``window`` tokens after it."""
    return set([t for t in tokens[last + 1: last + 1 + window] if t not in FILLERS][:n])


def _unit_after(tokens: list[str], last: int) -> bool:
    """Whether a unit or time word ("dollars", "pm") follows the run that ends at ``last``."""
    return bool(_words_after(tokens, last, 5, 2) & NON_PII_AFTER)  # "six uh er dollars"


def _email_after_cue(words: tuple[Word, ...], tokens: list[str], k: int) -> tuple[int, int] | None:
    """The address after an email cue: from the first word after the glue to its last
    domain ending (".com", "dot sg", "x@y.com"), or to its provider ("at hotmail") when no
    ending was heard; None if nothing before the clause end looks like an address."""
    first = k
    while first < len(words) and tokens[first] in GLUE | {"address", "id"}:
        first += 1
    end = provider = None
    for j in range(first, min(len(words), first + 14)):
        t = tokens[j]
        if t in STOPS or t in ("my", "name"):
            break
        if t.lstrip(".") in DOMAIN_WORDS or re.search(r"[a-z0-9][.@][a-z0-9-]+\.(com|sg|net|org|edu|gov)$", t):
            end = j
        elif t in ("at", "@") or any(p in t for p in PROVIDERS):
            provider = j
        if _ends_clause(words[j]):
            break
    last = end if end is not None else provider
    return (first, last) if last is not None and first <= last else None


def _date_after_cue(words: tuple[Word, ...], tokens: list[str], k: int) -> tuple[int, int] | None:
    """After "born", "birth", "birthday", "DOB": the words up to the clause end (at most
    eight) when they hold a month name, an ordinal or a year-like number."""
    first = k
    while first < len(words) and tokens[first] in GLUE | {"on", "date", "in", "of"}:
        first += 1
    last = None
    for j in range(first, min(len(words), first + 8)):
        t = tokens[j]
        if t in STOPS:
            break
        if t in _DATE_WORDS or re.fullmatch(r"\d{1,2}(?:st|nd|rd|th)|(?:19|20)\d\d|\d{1,2}[/.-]\d{1,2}(?:[/.-]\d{2,4})?", t):
            last = j
        if _ends_clause(words[j]):
            break
    return (first, last) if last is not None else None


def _anchored_emails(words: tuple[Word, ...], tokens: list[str]) -> list[tuple[int, int]]:
    """Addresses anchored on a provider or a dotted TLD, without any cue: "JasonTayasgmail
    .com", "MELLDA and an iCloud .com", "bookings .tanandsonsmotors .com .sg"."""
    out = []
    for k, t in enumerate(tokens):
        glued = any(p in t and t != p and len(t) > len(p) + 1 for p in MAIL_PROVIDERS)
        provider = t in MAIL_PROVIDERS
        tld_next = k + 1 < len(tokens) and words[k + 1].text.strip().startswith(".") \
            and tokens[k + 1].lstrip(".") in DOMAIN_WORDS
        dotted_self = words[k].text.strip().startswith(".") and t.lstrip(".") not in DOMAIN_WORDS \
            and tld_next
        if not (glued or ((provider or dotted_self) and tld_next)):
            continue
        first = k
        back = 0
        while first - 1 >= 0 and back < 3:  # the local part: up to three words back
            prev = words[first - 1].text.rstrip()
            if prev.endswith((",", "?", "!")) or (prev.endswith(".") and not prev.startswith(".")) \
                    or tokens[first - 1] in STOPS or tokens[first - 1] in ("my", "is", "email", "to", "the"):
                break
            first -= 1
            back += 1
        last = k
        while last + 1 < len(tokens) and words[last + 1].text.strip().startswith(".") \
                and tokens[last + 1].lstrip(".") in DOMAIN_WORDS:
            last += 1
        out.append((first, last))
    return out


def _secret_value(symbols: str) -> bool:
    lo, hi = SECRET_SYMBOLS
    return lo <= len(symbols) <= hi and sum(c.isdigit() for c in symbols) >= 3


def _counted(tokens: list[str], last: int) -> bool:
    """Whether a count noun follows the run that ends at ``last`` ("six digits")."""
    return bool(_words_after(tokens, last, 3, 1) & COUNT_NOUNS)


def _secret_after(words: tuple[Word, ...], tokens: list[str], k: int) -> list[tuple[int, int]]:
    """Rule 10: the values after the secret's cue at ``k``: a run of :data:`SECRET_SYMBOLS`
    symbols within :data:`SECRET_LEAD` words (a longer run is the values that its plain words
    part: "not six eight four oh two, is six eight four oh two two"), or, after a password,
    its words (:func:`_password_after`) and the symbols that run on from them."""
    password = _password_after(words, tokens, k) if tokens[k] in PASSWORD_CUES else None
    values = _symbols_after(words, tokens, k)
    if password is None:
        return values
    first, last = password
    for a, b in values:
        if a <= last + 1 and b > last:
            last = b  # "my password is abc, one two three four": the symbols run on from its words
    return [(first, last)] + [(a, b) for a, b in values if b < first or a > last]


def _symbols_after(words: tuple[Word, ...], tokens: list[str], k: int) -> list[tuple[int, int]]:
    start = k + 1
    while start < len(words) and start - k - 1 < SECRET_LEAD:
        w, t = words[start], tokens[start]
        if t in CUE_WORDS and t not in SECRET_VIA:
            return []  # another entity's cue: "my PIN and my IC ..."
        # a symbol starts the value, unless it is one only by its sound before a plain word
        # ("the code I got"), or names where the secret came ("SMS")
        if t not in SECRET_VIA and _is_symbolic(w, _next(words, start)) and not (
                t in SOUND_ONLY and start + 1 < len(words) and not _is_symbolic(words[start + 1])):
            break
        if _ends_clause(w) or t in STOPS or t in ("and", "or"):
            return []
        start += 1
    run = _run(words, start, max_symbols=SECRET_SYMBOLS[1])
    return _secret_values(words, tokens, run) if run else []


def _secret_values(words: tuple[Word, ...], tokens: list[str], run: tuple[int, int, str],
                   most: int = SECRET_SYMBOLS[1]) -> list[tuple[int, int]]:
    """The secrets a run holds. Its stretches between plain words, each when every one of them
    holds :data:`SECRET_SYMBOLS` symbols (at most ``most``: "is it two four six eight or two
    four eight six"); else the run whole when it holds that many ("five two seven, no, five two
    seven one"); else the stretches that do. A leading "one" after "the", "new", "older", ... is
    a pronoun ("the new one two eight ..."). None is a rule's count ("at least eight
    characters"), a date (a month inside: "on twelve March twenty twenty four")
    or followed by a unit or a count ("six digits")."""
    first, last, symbols = run
    if any(_counted(tokens, j) for j in range(first, last + 1)):
        return []  # "at least eight characters, with one capital letter": a rule, no value
    if any(tokens[j] in _CALENDAR for j in range(first, last + 1)):
        return []  # "I reset my password on twelve March twenty twenty four": a date

    def value(a: int, b: int) -> bool:
        sym, repeat = "", 1
        for j in range(a, b + 1):  # as _run reads them
            said, repeat = _read(words, j, repeat)
            sym += said
        return _secret_value(sym) and len(sym) <= most

    groups, cur = [], []
    for j in range(first, last + 2):
        if j <= last and (_is_symbolic(words[j], _next(words, j)) or tokens[j] in REPEAT_WORDS):
            cur.append(j)
        elif cur:
            groups.append((cur[0], cur[-1]))
            cur = []
    groups = [(a + 1 if tokens[a] == "one" and a > 0 and tokens[a - 1] in PRONOUN_ONE and a < b else a, b)
              for a, b in groups]
    if not (len(groups) > 1 and all(value(a, b) for a, b in groups)):
        groups = [(groups[0][0], groups[-1][1])] if groups and value(groups[0][0], groups[-1][1]) \
            else [(a, b) for a, b in groups if value(a, b)]
    out = []
    for a, b in groups:
        if _unit_after(tokens, b):  # a count anywhere in the run was refused above
            continue
        while b > a and tokens[b] in SOUND_ONLY and not (_symbol(words[b]) or "0").isdigit() \
                and b + 1 < len(words) and not _is_symbolic(words[b + 1]):
            b -= 1  # "... four seven six two I always mix": a letter by its sound ("I") begins the next clause
        out.append((a, b))
    return out


def _password_after(words: tuple[Word, ...], tokens: list[str], k: int) -> tuple[int, int] | None:
    """The words of a password after its cue at ``k`` and a copula ("is", "was", "to" after
    "changed"), or right after the cue: to the clause end or a stop word, at most
    :data:`PASSWORD_WORDS`, ending at the last symbol they hold, else at most three; none
    when the first describes the password (:data:`PASSWORD_NOT`)."""
    j = k + 1
    while j < len(words) and tokens[j] in FILLERS:
        j += 1
    copula = next((i for i in range(j, min(len(words), j + 5))
                   if tokens[i] in ("is", "was", "it's", "be", "are")
                   or (tokens[i] == "to" and any(t in ("changed", "change", "set", "reset", "updated")
                                                 for t in tokens[max(0, k - 4):k]))), None)
    if copula is not None and any(_ends_clause(w) or w.text.rstrip().endswith(",") or tokens[i] in STOPS | CUE_WORDS
                                  for i, w in enumerate(words[j:copula], j)):
        copula = None  # "password already, the IC is ...": the copula is another clause's
    first = copula + 1 if copula is not None else j
    while first < len(words) and tokens[first] in FILLERS:
        first += 1
    if first >= len(words) or tokens[first] in PASSWORD_NOT or tokens[first] in STOPS:
        return None
    if copula is None and (tokens[first] in SOUND_ONLY or not _is_symbolic(words[first])):
        # no copula: the value must start at once, or after one garbled word ("password ah, and Y, capital S")
        if first + 1 >= len(words) or not _is_symbolic(words[first + 1]) or tokens[first + 1] in SOUND_ONLY:
            return None
    last = None
    for i in range(first, min(len(words), first + PASSWORD_WORDS)):
        if tokens[i] in STOPS or tokens[i] in CUE_WORDS or tokens[i] in ("and", "but", "so", "because"):
            break
        last = i
        if _ends_clause(words[i]) or (words[i].text.rstrip().endswith(",") and not _goes_on(words, i + 1)):
            break  # "S er, admin Tan, speaking": a comma ends it unless spelling goes on ("P, a, s, s")
    if last is None:
        return None
    symbolic = [i for i in range(first, last + 1) if _is_symbolic(words[i]) and tokens[i] not in SOUND_ONLY]
    last = symbolic[-1] if symbolic else min(last, first + 2)
    plain = [i for i in range(first, last + 1) if not _is_symbolic(words[i]) and tokens[i] not in FILLERS]
    symbols = "".join(_symbol(w) or "" for w in words[first:last + 1])
    if _counted(tokens, last) or ((not plain or copula is None) and len(symbols) < 3):
        return None  # "password is S, er, ...": one letter is no password
    return first, last


def _secret_nearby(words: tuple[Word, ...], tokens: list[str], cues: list[int],
                   most: int = SECRET_SYMBOLS[1]) -> list[tuple[int, int]]:
    """Rule 10, a value elsewhere in the sentence of a secret's cue (``cues``: their indices):
    a run of :data:`SECRET_SYMBOLS` symbols that starts with a digit or a letter (not a word
    that only sounds like one), within :data:`SECRET_CONTEXT` words of a cue before or after
    it with no sentence end between, and with no other entity's cue or look-alike's word in
    the three words before it ("is it two four six eight or two four eight six ah, my debit
    card PIN", "my PIN was one two one two, then I changed it to seven seven three five",
    "got two OTP leh, the older one ..., the new one ...": a value found counts as a cue for
    the next). After "SMS" (``most``
    :data:`SMS_SYMBOLS`) only a one-time code's length: eight digits there are a phone."""
    out: list[tuple[int, int]] = []
    k = 0 if cues else len(words)  # nothing to do without a cue
    while k < len(words):
        if tokens[k] in SOUND_ONLY or tokens[k] in CUE_WORDS or token_symbols(words[k].text, words[k].text) is None:
            k += 1
            continue
        run = _run(words, k, max_inside=1, max_symbols=SECRET_SYMBOLS[1])
        if run is None:
            k += 1
            continue
        first, last = run[0], run[1]
        k = last + 1
        near = any((0 < first - c <= SECRET_CONTEXT and not any(_ends_clause(words[j]) for j in range(c, first)))
                   or (0 < c - last <= SECRET_CONTEXT and not any(_ends_clause(words[j]) for j in range(last, c)))
                   for c in cues)
        named = set(tokens[max(0, first - 3):first]) & NEARBY_NAMERS
        if near and not named:
            found = _secret_values(words, tokens, run, most)
            out += found
            cues = cues + [b for _, b in found]  # a second value near the first: "the older one ..., the new one ..."
    return out


def _entered(words: tuple[Word, ...], tokens: list[str]) -> list[tuple[int, int]]:
    """Rule 10, a value keyed in: after "key in", "keyed in", "type in", "typed" or "entered"
    (and "my", "the", "in" after them), a run of 4 to :data:`ENTRY_SYMBOLS` symbols with at
    least 3 digits or 4 letters ("I key in double one double two three four for the
    verification", "I typed P, A, S, S, W, O, R, D, one two three"), unless a look-alike's or
    another entity's word names it ("key in the amount", "key in your postal code")."""
    out = []
    for k, t in enumerate(tokens):
        if t not in ENTRY_VERBS or (ENTRY_VERBS[t] and tokens[k + 1:k + 2] != [ENTRY_VERBS[t]]):
            continue
        start = k + 1 + bool(ENTRY_VERBS[t])
        while start < len(words) and tokens[start] in ("my", "the", "in", "it", "uh", "um", "er"):
            start += 1
        if start >= len(words) or tokens[start] in CUE_WORDS | NON_PII_BEFORE | {"amount"} \
                or not _is_symbolic(words[start], _next(words, start)):
            continue
        run = _run(words, start, max_inside=1, max_symbols=ENTRY_SYMBOLS)
        if run is None or run[0] != start:
            continue
        symbols = run[2]
        last = run[1]
        while last > start and tokens[last] in SOUND_ONLY and last + 1 < len(words) and not _is_symbolic(words[last + 1]):
            last -= 1  # "... three four for the verification": "for" begins what follows
            symbols = symbols[:len(symbols) - len(_symbol(words[last + 1]) or "")]
        digits = sum(c.isdigit() for c in symbols)
        if 4 <= len(symbols) <= ENTRY_SYMBOLS and (digits >= 3 or len(symbols) - digits >= 4) \
                and not _unit_after(tokens, last) \
                and not any(_counted(tokens, j) or tokens[j] in _CALENDAR for j in range(start, last + 1)):
            out.append((start, last))
    return out


def _secret_before(words: tuple[Word, ...], tokens: list[str], k: int) -> tuple[int, int] | None:
    """Rule 10, the value said first: "seven seven two oh, that is my card PIN", "blue tiger four
    four nine, that one is my password"."""
    j = k - 1
    while j >= 0 and k - j <= 5 and tokens[j] in BACK_GLUE:
        j -= 1
    if j < 0 or k - j > 5 or j == k - 1 or not _is_symbolic(words[j]) or _ends_clause(words[j]):
        return None
    first = j
    while first - 1 >= 0 and j - first < 10 and (_is_symbolic(words[first - 1]) or tokens[first - 1] in REPEAT_WORDS
                                                 or tokens[first - 1] in JOINERS) \
            and not _ends_clause(words[first - 1]):
        first -= 1
    run = _run(words, first, max_symbols=SECRET_SYMBOLS[1])
    password = tokens[k] in PASSWORD_CUES
    if run is None or run[1] != j or not (_secret_value(run[2]) or (password and len(run[2]) >= 3)):
        return None
    first = run[0]
    if password:  # the password's words before its symbols, back to the clause start
        while first - 1 >= 0 and run[0] - first < 3 and tokens[first - 1] not in STOPS | FILLERS \
                and not words[first - 1].text.rstrip().endswith((",", ".", "?", "!")):
            first -= 1
    return first, j


def _glued_id(t: str) -> bool:
    """A token that glues letters and at least four digits ("M955722", "9240k", "pio2548078"):
    no word of speech looks like that (decades and ordinals aside)."""
    return (bool(re.fullmatch(r"[a-z0-9]+", t)) and sum(c.isdigit() for c in t) >= 4 and any(c.isalpha() for c in t)
            and not re.fullmatch(r"\d+(?:s|st|nd|rd|th|am|pm|km|kg|sqft|mb|gb)", t))


@register("cue-runs")
class CueRunDetector:
    """Runs after PII cues that could be the announced entity, and provider-anchored emails."""

    name = "cue-runs"

    def detect(self, transcript: Transcript) -> list[Span]:
        words = transcript.words
        tokens = [clean_token(w.text) for w in words]
        out: list[Span] = []
        secret_ends: list[int] = []  # the last words of the secrets found at their cues
        labels = [_cue_at(tokens, k) for k in range(len(words))]
        for k in range(len(words)):
            label = labels[k]
            if label is None:
                continue
            if label == "EMAIL":
                r = _email_after_cue(words, tokens, k + 1)
                if r:
                    out.append(span_from_words(transcript, list(words[r[0]:r[1] + 1]), "EMAIL", SCORE, self.name))
                continue
            if label == "DATE":
                r = _date_after_cue(words, tokens, k + 1)
                if r:
                    out.append(span_from_words(transcript, list(words[r[0]:r[1] + 1]), "DATE", SCORE, self.name))
                continue
            if label == "SECRET":
                before = _secret_before(words, tokens, k)
                for a, b in _secret_after(words, tokens, k) + ([before] if before else []):
                    out.append(span_from_words(transcript, list(words[a:b + 1]), "SECRET", SECRET_SCORE, self.name))
                    secret_ends.append(b)
                continue
            start = k + 1
            while label == "CARD_CODE" and start < len(tokens) and tokens[start] in CARD_CODE_LEAD:
                start += 1  # "expiry date is", "the card code again, ...", "at the back of the card"
            run = _run(words, start, max_symbols=MAX_SYMBOLS[label])
            if run is None:
                continue
            first, last, symbols = run
            label = _guess_label(symbols) if label == "?" and symbols else label
            if label == "CARD_CODE":  # "security code": the cue's own "code" is no look-alike's context word
                context = [t for j, t in enumerate(tokens[max(0, k - 5): first], max(0, k - 5)) if j != k]
                if len(symbols) >= MIN_SYMBOLS[label] and sum(c.isdigit() for c in symbols) >= 3 \
                        and not set(context) & NON_PII_BEFORE and not _unit_after(tokens, last):
                    out.append(span_from_words(transcript, list(words[first:last + 1]), "CREDIT_CARD", SCORE, self.name))
                continue
            if label != "?" and len(symbols) >= MIN_SYMBOLS[label] and not _vetoed(tokens, first, last):
                last = _rest(words, tokens, last, FULL.get(label, 0) - len(symbols))
                out.append(span_from_words(transcript, list(words[first:last + 1]), label, SCORE, self.name))
        secret_cues = sorted([k for k, label in enumerate(labels) if label == "SECRET"] + secret_ends)
        sms = [k for k, t in enumerate(tokens) if t == "sms"]
        for a, b in _secret_nearby(words, tokens, secret_cues) + _secret_nearby(words, tokens, sms, SMS_SYMBOLS) \
                + _entered(words, tokens):
            span = span_from_words(transcript, list(words[a:b + 1]), "SECRET", CONTEXT_SCORE, self.name)
            if not any(o.label == "SECRET" and o.overlaps(span) for o in out):  # found at its cue already
                out.append(span)
        out += self._uncued(transcript, tokens)
        for first, last in _anchored_emails(words, tokens):
            out.append(span_from_words(transcript, list(words[first:last + 1]), "EMAIL", SCORE, self.name))
        return out

    def _uncued(self, transcript: Transcript, tokens: list[str]) -> list[Span]:
        """Without a cue: identifier tokens glued into one word, and digit groups that a
        stray word or a self-correction splits ("4933, 7275, 47736, I'm 777") but that
        together hold at least eight digits."""
        words = transcript.words
        text_tokens = [w.text for w in words]
        out: list[Span] = [span_from_words(transcript, [words[k]], id_label(t.upper(), cue_label(text_tokens, k)),
                                           UNCUED_SCORE, self.name)
                           for k, t in enumerate(tokens) if _glued_id(t) and not _vetoed(tokens, k, k)]
        k = 0
        while k < len(words):
            if not _is_symbolic(words[k]) or tokens[k] in CUE_WORDS:  # no cue: "DBS", "IC" start nothing
                k += 1
                continue
            run = _run(words, k, max_inside=1)
            if run is None:  # "a.m.": a unit, not a symbol
                k += 1
                continue
            first, last, symbols = run
            digits = sum(c.isdigit() for c in symbols)
            bridged = any(not _is_symbolic(w) for w in words[first:last + 1])
            if digits >= 8 and bridged and not _vetoed(tokens, first, last):
                out.append(span_from_words(transcript, list(words[first:last + 1]), _guess_label(symbols),
                                           UNCUED_SCORE, self.name))
            k = last + 1
        return out
