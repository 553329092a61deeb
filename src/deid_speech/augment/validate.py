"""Strict validation of LLM output lines: a line is accepted only if it carries exactly the
requested tags, balanced, with no numbering or bullets, no ``<placeholder>`` left from the
prompt's schema, no bracket or parenthesis or double quote left in the words, no digit outside the tagged values (numbers are
spoken, as in the seed corpus), no value other than a name opening the line without a comma after it
(a fragment), within length bounds, and is new. Safe repairs (numbering, tag spelling,
a misnamed closing tag, a lone tag as a slot) are applied before, by :mod:`deid_speech.augment.repair`.

``check_line`` returns ``(parsed, None)`` or ``(None, reason)``; reasons are counted in
the augmentation summary.
"""
from __future__ import annotations

import re
from collections import Counter

from deid_speech.types import EntitySpan, parse_tagged

REASONS = ("empty", "bullet", "meta", "placeholder", "unbalanced", "bracket", "quote", "fragment", "wrong_tags",
           "too_short", "too_long", "untagged_pii", "no_number", "digits", "duplicate")
MIN_WORDS, MAX_WORDS = 4, 60
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.):]|\(\d+\)|[a-z][.)]\s)")
_META = re.compile(r"^(?:here are|sure[,!]|certainly|note:|output:|sentences?:|"
                   r"[A-Za-z ]{1,20}\d{1,2}\s*:)|"  # "Sentence 2:", "Premise 1:"
                   r"\b(?:NER|tags?|prompt|sentences|generate|the example)\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d|\b(?:zero|oh|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                     r"twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand)\b", re.IGNORECASE)


def normalise(text: str) -> str:
    """Key for de-duplication: lower case, letters and spaces only."""
    return " ".join(re.sub(r"[^a-z ]", " ", text.lower()).split())


def check_line(line: str, tags: Counter, seen: set[str]) -> tuple[tuple[str, list[EntitySpan]] | None, str | None]:
    """Validate one output line against the requested tag multiset ``tags``."""
    line = line.strip().strip('"').strip()
    if not line:
        return None, "empty"
    if _BULLET.match(line):
        return None, "bullet"
    if _META.search(line):
        return None, "meta"
    if "<" in line or ">" in line:
        return None, "placeholder"  # a copy of the prompt's line schema ("<words> [PHONE] <...> [PHONE]")
    try:
        text, ents = parse_tagged(line)
    except ValueError:
        return None, "unbalanced"
    if re.search(r"[][()]", text):
        return None, "bracket"  # a bracket left in the words ("[none: ...]" copied from the no-PII prompt,
        # "(uh)", "(The person means ...)": the seed corpus has none)
    if '"' in text:
        return None, "quote"  # a quoted sentence with a comment after it ('... documents." (um)'); the seed has none
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
