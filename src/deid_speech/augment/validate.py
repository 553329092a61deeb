"""Strict validation of LLM output lines: a line is accepted only if it carries exactly the
requested tags, balanced, with no numbering or bullets, no ``<placeholder>`` left from the
prompt's schema, no bracket or parenthesis or double quote left in the words, no digit outside
the tagged values (numbers are spoken, as in the seed corpus), no value other than a name
opening the line without a comma after it (a fragment), within length bounds, with each value
shaped like its label (a number read out, an email with "at" and "dot", a name in capitals, a
date; :func:`value_fits`), none right after an article or a possessive, is no line of the
request's instructions given back, and is new. Safe
repairs (numbering, tag spelling, a misnamed closing tag, a lone tag as a slot) are applied
before, by :mod:`deid_speech.augment.repair`.

``check_line`` returns ``(parsed, None)`` or ``(None, reason)``; reasons are counted in
the augmentation summary.
"""
from __future__ import annotations

import re
from collections import Counter

from deid_speech.ner.patterns import NUMBER_LABELS
from deid_speech.ner.spacy_ner import ORDINAL_WORDS
from deid_speech.spoken import DIGIT_WORDS as SPOKEN_DIGITS
from deid_speech.spoken import REPEAT_WORDS as SPOKEN_REPEATS
from deid_speech.spoken import TEEN_WORDS, TENS_WORDS
from deid_speech.types import EntitySpan, parse_tagged

REASONS = ("empty", "bullet", "meta", "placeholder", "unbalanced", "bracket", "quote", "fragment", "wrong_tags",
           "too_short", "too_long", "echo", "value", "determiner", "untagged_pii", "no_number", "digits", "duplicate")
MIN_WORDS, MAX_WORDS = 4, 60
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.):]|\(\d+\)|[a-z][.)]\s)")
_META = re.compile(r"^(?:here are|sure[,!]|certainly|note:|output:|sentences?:|"
                   r"[A-Za-z ]{1,20}\d{1,2}\s*:)|"  # "Sentence 2:", "Premise 1:"
                   r"\b(?:NER|tags?|prompt|sentences|generate|the example)\b|"
                   r"\bas an AI\b|\b(?:can'?t|cannot|unable to) (?:assist|help with that|comply)", re.IGNORECASE)
_NUMBER = re.compile(r"\d|\b(?:zero|oh|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                     r"twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand)\b", re.IGNORECASE)


_DET = re.compile(r"\b(?:a|an|your|his|her|our|their)\s*$", re.IGNORECASE)


def normalise(text: str) -> str:
    """Key for de-duplication: lower case, letters and spaces only."""
    return " ".join(re.sub(r"[^a-z ]", " ", text.lower()).split())


def prompt_key(messages: list[dict], examples: list[str] = ()) -> str:
    """A request's instructions as :func:`check_line` looks for a line copied from them: the chat
    messages without the seed sentences they quote as ``examples`` (a copied example is a
    duplicate, judged by its frame; the template backend's lines are examples re-voiced), in
    pieces that no match crosses."""
    pieces = [m["content"] for m in messages]
    for e in examples:
        pieces = [x for p in pieces for x in p.split(e)]
    return "\n".join(f" {normalise(p)} " for p in pieces)


def check_line(line: str, tags: Counter, seen: set[str],
               prompt: str = "") -> tuple[tuple[str, list[EntitySpan]] | None, str | None]:
    """Validate one output line against the requested tag multiset ``tags`` (``prompt``: the
    request's :func:`prompt_key`, so that a line copied from the instructions is rejected)."""
    line = line.strip().strip('"').strip()
    if not line:
        return None, "empty"
    if _BULLET.match(line):
        return None, "bullet"
    if _META.search(line):
        return None, "meta"
    if "<" in line or ">" in line or re.search(r"\b[xX]{3,}\b|_{3,}", line):
        return None, "placeholder"  # a copy of the prompt's line schema ("<words> [PHONE] <...> [PHONE]")
    try:
        text, ents = parse_tagged(line)
    except ValueError:
        return None, "unbalanced"
    if re.search(r"[][()]", text):
        return None, "bracket"  # a bracket left in the words ("[none: ...]" copied from the no-PII prompt,
        # "(uh)", "(The person means ...)": the seed corpus has none)
    if '"' in text or re.search(r"(?:^|\s)'|'(?:\s|$)", text):
        return None, "quote"  # a quoted sentence with a comment after it ('... documents." (um)'), or a
        # quotation in single quotes ("explained, 'the card is ...'"); the seed has neither (tested)
    if Counter(e.label for e in ents) != tags:
        return None, "wrong_tags"
    opener = ents[0] if ents and ents[0].char_start == 0 else None
    if opener and opener.label != "PERSON" and not re.match(r"\s*[,.?!;:]", text[opener.char_end:]):
        return None, "fragment"  # '[EMAIL] ... [EMAIL] the manager is asking ...': a value, then a
        # clause about it; every seed sentence that opens with a number or an email has a comma after it
    n = len(text.split())
    if n < MIN_WORDS:
        return None, "too_short"
    if n > MAX_WORDS:
        return None, "too_long"
    if prompt and (key := normalise(line)) and f" {key} " in prompt:
        return None, "echo"  # an instruction given back (Gemma-3-270M: "Every line is one plain sentence with
        # no names ... prices, times, bus numbers ...", which reads as a sentence with no personal data)
    if not all(value_fits(e.label, text[e.char_start:e.char_end]) for e in ents):
        return None, "value"  # "let [PHONE] know if you have any issues [PHONE]": a clause in the tags
    if any(_DET.search(text[:e.char_start]) for e in ents):
        return None, "determiner"  # "asking for a [PHONE] ... [PHONE]", "your [EMAIL] ... [EMAIL] address": a
        # value where a noun belongs (no seed value follows a/an/your/his/her/our/their)
    if _untagged_pii(text, ents):
        return None, "untagged_pii"
    if not tags and not _NUMBER.search(text):
        return None, "no_number"  # a no-PII training sentence is there for its confusable numbers
    if re.search(r"\d", _without_values(text, ents)):
        return None, "digits"  # "3:00 PM", "$30,000": the seed corpus speaks every number in words,
        # and a transcript target in digits teaches a recogniser and a NER another writing
    key = normalise(_without_values(text, ents))
    if key in seen:
        return None, "duplicate"
    seen.add(key)
    return (text, ents), None


# the spoken-number and ordinal words of the detectors (spoken.py, ner/spacy_ner.py), as the
# grammar's ordered alternatives; "o" is left out: in a value it is a letter
DIGIT_WORDS = tuple(w for w in SPOKEN_DIGITS if w != "o")
REPEAT_WORDS = tuple(SPOKEN_REPEATS)
_TENS = (*TEEN_WORDS, *TENS_WORDS, "hundred", "thousand")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")  # spacy_ner.MONTHS holds abbreviations too, which a written-out value has not
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ORDINALS = tuple(ORDINAL_WORDS)
NAME_PARTICLES = ("bin", "binte", "bte", "d/o", "s/o", "a/l", "a/p", "de", "da", "dos", "van", "von", "al")
NUMBER_WORDS = set(DIGIT_WORDS) | set(REPEAT_WORDS) | set(_TENS)
_DATE = NUMBER_WORDS | {w.lower() for w in MONTHS + _WEEKDAYS} | set(ORDINALS) | {"of", "the", "and", "on"} | {
    "christmas", "eve", "new", "year's", "day"}


def value_fits(label: str, value: str) -> bool:
    """Whether ``value`` reads as a ``label`` value: identification numbers, phones, cards,
    accounts and plates are read out (at least five number words, digits or single letters, and
    nothing else but "plus", "dash", "and"); an email has "at" (or @) and "dot" (or .); a name is
    one to six words in capitals (or "bin", "d/o", ...) with no number; a date is made of
    months, weekdays, ordinals and numbers. The slot repair's placeholder (the label in lower
    case) fits its label. Every seed value fits (tested)."""
    if value.strip().lower() == label.lower():
        return True
    toks = [t for t in (w.strip(",.;:!?") for w in value.split()) if t]
    low = [t.lower() for t in toks]
    if not toks:
        return False
    if label in NUMBER_LABELS:
        units = 0
        for t in low:
            if t in NUMBER_WORDS or (len(t) == 1 and t.isalpha()):
                units += 1
            elif re.fullmatch(r"[a-z]?\d+[a-z]?", t):
                units += sum(c.isdigit() for c in t)
            elif t not in ("plus", "dash", "and", "-"):
                return False
        return units >= 5
    if label == "EMAIL":
        return (("at" in low or "@" in value) and ("dot" in low or "." in value.strip(".")) and len(toks) <= 16)
    if label == "PERSON":
        return (len(toks) <= 6 and not any(t in NUMBER_WORDS for t in low)
                and all(t[0].isupper() or t in NAME_PARTICLES for t in toks))
    if label == "DATE":
        return (len(toks) <= 10 and all(t in _DATE or re.fullmatch(r"\d+(?:st|nd|rd|th)?", t) for t in low)
                and any(t not in ("of", "the", "and", "on") for t in low))
    return True


def _untagged_pii(text: str, ents: list[EntitySpan]) -> bool:
    """True when the spoken-form detectors find PII outside the tagged entities: such a line
    would teach a model that a real phone number or NRIC is not PII."""
    from deid_speech.ner.patterns import PatternDetector
    from deid_speech.types import Transcript

    words = text.split()
    t = Transcript.from_words([(w, float(i), i + 0.5) for i, w in enumerate(words)])
    for s in PatternDetector().detect(t):
        lo, hi = t.words[int(s.start)].char_start, t.words[int(round(s.end - 0.5))].char_end
        if not any(e.char_start < hi and lo < e.char_end for e in ents):
            return True
    return False


def _without_values(text: str, ents: list[EntitySpan]) -> str:
    """The sentence frame: entity values replaced by their labels, so two sentences that
    differ only in a value count as duplicates."""
    out, pos = [], 0
    for e in sorted(ents):
        out += [text[pos:e.char_start], e.label.lower()]
        pos = e.char_end
    out.append(text[pos:])
    return " ".join(out)


def frame_key(tagged: str) -> str:
    text, ents = parse_tagged(tagged)
    return normalise(_without_values(text, ents))
