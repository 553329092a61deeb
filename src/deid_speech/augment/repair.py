"""Safe repairs of LLM output lines, applied before the strict validation of
:mod:`deid_speech.augment.validate` (which stays unchanged: a repaired line must still pass
every check).

Six repairs, each reported by name so the summary shows how many lines each touched:

``bullet``
    strip one leading list marker ("1.", "2)", "3:", "(4)", "-", "*", "•", "·") followed by a
    space. A marker not followed by a space ("1:30 pm ...") is left alone, so the validator
    still rejects such a line as a bullet.
``comment``
    ``"the car [CAR_PLATE] ... [CAR_PLATE] is under [PERSON] ... [PERSON], you the owner or not" (uh, leh)``
    -> the quoted sentence alone: a line that is one quoted sentence followed by one
    parenthetical comment without a tag or a digit (the fillers the model was asked to use,
    listed after the sentence instead of in it). The sentence is what the model wrote,
    every word and tag of it kept; a line with text outside the quotes other than that one
    comment is left alone.
``header_tag``
    ``[PHONE] Can I update my number to [PHONE] eight nine ... [PHONE] because ...`` -> without
    the first tag: a line that opens with a tag naming it (the label as a heading), when that
    label occurs an odd number of times, the line parses once the first is gone, the word
    after it starts a sentence (a capital letter) and no word up to the next tag could be a
    value (a number word, a digit, a single letter other than "I", a month, an ordinal, "at",
    "dot", a capitalised word after the first): "[PHONE] nine one ..." or "[EMAIL] John dot
    tan ..." is an entity left unclosed, and is left alone. Never for PERSON, whose value is
    capitalised words like a sentence's first.
``tag_spelling``
    ``[phone]``, ``[ PHONE ]``, ``[Phone-Number]``, ``[/PHONE]`` -> ``[PHONE]``: the case,
    inner spaces, hyphens and a closing slash of a known label are normalised; a synonym
    (``[NAME]`` -> ``[PERSON]``) is mapped only when it names one label without doubt *and*
    that label was requested. Ambiguous words (``[NUMBER]``, ``[ID]``, ``[CARD]``) are
    never mapped.
``tag_balance``
    ``call [PHONE] nine one [NRIC] lah`` asked for ``{PHONE}`` -> ``[PHONE] ... [PHONE]``:
    a tag closed with the wrong name is renamed to the open one, only when the line has
    exactly one such mismatch, the open label was requested, and the closing label was not
    (so it cannot be the start of a wanted entity).

``slot``
    ``call me at [PHONE] to book`` asked for ``{PHONE}`` -> ``call me at [PHONE] phone [PHONE] to
    book``: a tag the model wrote once, as a slot to fill, gets a placeholder value, which tag
    replacement then swaps for a fresh one (as it swaps every value). Only when every tag in the
    line is such a lone slot, each requested label is asked for once and written once, and no
    slot follows a determiner or possessive ("call the [PHONE] for ...", "my [PERSON] is ...":
    the tag used as a noun, which a value would not fit), and no slot has a value-like word
    next to it (a number word, a digit, a single letter, a month, "plus", "at", "dot", an
    ordinal, a capitalised word other than a sentence's first): ``on [DATE] twenty third
    April`` is an entity the model opened and never closed, and a placeholder there would
    leave its words outside the tags.

No repair moves a tag or a word, only ``slot`` adds any (a closing tag and a placeholder
value right after a lone tag), and the only ones removed are a comment outside the quoted
sentence and a heading tag before a sentence's first word, so a line whose PII lies
outside its tags still has it outside and is still rejected as ``untagged_pii``.
"""
from __future__ import annotations

import re
from collections import Counter

from deid_speech.augment.validate import MONTHS, NUMBER_WORDS, ORDINALS
from deid_speech.types import LABELS, parse_tagged

REPAIRS = ("bullet", "comment", "tag_spelling", "header_tag", "tag_balance", "slot")

_LEADING_MARKER = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.):]|\(\d{1,3}\))\s+(?=\S)")
_BRACKET = re.compile(r"\[\s*(/?)\s*([A-Za-z][A-Za-z _-]{0,30}?)\s*\]")
_TAG = re.compile(r"\[(" + "|".join(LABELS) + r")\]")

# synonym -> label; only words that cannot mean another label
SYNONYMS = {
    "NAME": "PERSON", "FULL_NAME": "PERSON", "PERSON_NAME": "PERSON",
    "NRIC_NUMBER": "NRIC", "NRIC_NO": "NRIC", "IC_NUMBER": "NRIC", "NRIC_NUM": "NRIC",
    "PASSPORT": "PASSPORT_NUM", "PASSPORT_NUMBER": "PASSPORT_NUM", "PASSPORT_NO": "PASSPORT_NUM",
    "PHONE_NUMBER": "PHONE", "PHONE_NUM": "PHONE", "PHONE_NO": "PHONE", "TELEPHONE": "PHONE",
    "MOBILE_NUMBER": "PHONE", "HANDPHONE": "PHONE",
    "EMAIL_ADDRESS": "EMAIL", "E_MAIL": "EMAIL",
    "CREDIT_CARD_NUMBER": "CREDIT_CARD", "CREDIT_CARD_NUM": "CREDIT_CARD", "CREDIT_CARD_NO": "CREDIT_CARD",
    "CAR_PLATE_NUMBER": "CAR_PLATE", "LICENSE_PLATE": "CAR_PLATE", "LICENCE_PLATE": "CAR_PLATE",
    "NUMBER_PLATE": "CAR_PLATE", "VEHICLE_PLATE": "CAR_PLATE",
    "BANK_ACCOUNT_NUMBER": "BANK_ACCOUNT", "BANK_ACCOUNT_NO": "BANK_ACCOUNT", "BANK_ACCOUNT_NUM": "BANK_ACCOUNT",
    "DATE_OF_BIRTH": "DATE",
}
assert set(SYNONYMS.values()) <= set(LABELS)


def strip_bullet(line: str) -> str:
    return _LEADING_MARKER.sub("", line, count=1)


_QUOTED_WITH_COMMENT = re.compile(r'^\s*"([^"]+)"\s*\(([^()\[\]"\d]*)\)\s*\.?\s*$')


def strip_comment(line: str) -> str:
    """The quoted sentence of ``"sentence" (comment)`` (see the module doc); the line otherwise."""
    m = _QUOTED_WITH_COMMENT.match(line)
    return m.group(1).strip() if m else line


def strip_header_tag(line: str) -> str:
    """A line without the tag that heads it (see the module doc); the line unchanged otherwise."""
    m = re.match(r"\s*\[(" + "|".join(LABELS) + r")\]\s*", line)
    if not m or m.group(1) == "PERSON" or line.count(m.group(0).strip()) % 2 == 0:
        return line
    rest = line[m.end():]
    lead = rest.split("[", 1)[0].split()  # the words up to the next tag
    if not lead or not lead[0][:1].isupper() or any(
            _value_like(w, first=i == 0) and w.strip(".,;:!?").split("'")[0] != "I" for i, w in enumerate(lead)):
        return line
    try:
        parse_tagged(rest)
    except ValueError:
        return line
    return rest


def fix_tag_spelling(line: str, tags: Counter) -> str:
    def norm(m: re.Match) -> str:
        word = re.sub(r"[ -]+", "_", m.group(2).strip()).upper()
        if word in LABELS:
            return f"[{word}]"
        if SYNONYMS.get(word) in tags:
            return f"[{SYNONYMS[word]}]"
        return m.group(0)
    return _BRACKET.sub(norm, line)


def fix_tag_balance(line: str, tags: Counter) -> str:
    """Rename a wrongly named closing tag (see the module doc); the line unchanged otherwise."""
    open_label, fix, mismatches = None, None, 0
    for m in _TAG.finditer(line):
        label = m.group(1)
        if open_label is None:
            open_label = label
        elif label == open_label:
            open_label = None
        else:
            mismatches += 1
            if open_label in tags and label not in tags:
                fix = (m.start(), m.end(), open_label)
            open_label = None  # treat it as the closer; a second mismatch disqualifies the line
    if mismatches != 1 or fix is None:
        return line
    a, b, label = fix
    return f"{line[:a]}[{label}]{line[b:]}"


# the validator's number, ordinal and month words, and the words inside a read-out email
_VALUE_WORDS = frozenset({*NUMBER_WORDS, *ORDINALS, *(m.lower() for m in MONTHS), "plus", "at", "dot"})


def _value_like(word: str, first: bool, before: bool = False) -> bool:
    w = word.strip(".,;:!?\"'()")
    if not w or (before and w.lower() == "at"):  # "call me at [PHONE]": "at" is an email's only after it
        return False
    low = w.lower()
    value = (w[0].isdigit() or (len(w) == 1 and w.isalpha()) or low in _VALUE_WORDS
             or (low.endswith("teen") and len(low) > 4) or (low.endswith("th") and len(low) > 2))  # "sixteen", "fifth"
    return value or (w[0].isupper() and not first and w.split("'")[0] != "I")


_DETERMINER = re.compile(r"\b(?:the|a|an|this|that|these|those|our|their|its|my|your|his|her)\W*$", re.IGNORECASE)


def fill_slots(line: str, tags: Counter) -> str:
    """Close each lone tag with a placeholder value (see the module doc); the line unchanged otherwise."""
    found = list(_TAG.finditer(line))
    if (not found or any(n != 1 for n in tags.values())
            or Counter(m.group(1) for m in found) != tags):
        return line
    out, pos = [], 0
    for m in found:
        before, after = line[:m.start()].split(), line[m.end():].split()
        if (_DETERMINER.search(line[:m.start()]) or (after and _value_like(after[0], False))
                or (before and _value_like(before[-1], len(before) == 1 or before[-2][-1:] in ".?!", True))):
            return line
        label = m.group(1)
        out += [line[pos:m.end()], f" {label.lower()} [{label}]"]
        pos = m.end()
    return "".join(out) + line[pos:]


def repair_line(line: str, tags: Counter) -> tuple[str, list[str]]:
    """Apply the repairs in order; return the line and the names of those that changed it."""
    done = []
    for name, fn in (("bullet", strip_bullet), ("comment", strip_comment),
                     ("tag_spelling", lambda x: fix_tag_spelling(x, tags)), ("header_tag", strip_header_tag),
                     ("tag_balance", lambda x: fix_tag_balance(x, tags)), ("slot", lambda x: fill_slots(x, tags))):
        new = fn(line)
        if new != line:
            done.append(name)
            line = new
    return line, done
