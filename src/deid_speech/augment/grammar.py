"""Constrained decoding for the augmentation job: a GBNF grammar (llama.cpp's format) that lets
the model write only lines of the requested shape.

Rules, for a request with tag multiset T:

- every line carries each tag of T as often as T has it, in any order, each value between an
  opening and a closing tag of the same label (``[PHONE] nine one ... [PHONE]``): no line can
  come out unbalanced, with a tag closed under another name, or with a tag missing or added;
- each value has its label's spoken shape, drawn from the validator's own word lists
  (:func:`deid_speech.augment.validate.value_fits`): a phone, card or account number is 7-20,
  12-19 or 8-14 digit words ("oh", "double" and "triple" included), an NRIC a letter, digit
  words and a letter, a passport one or two letters, digit words and a letter, a plate two or
  three letters, two to four digit words and a letter, an email "words at word dot word", a
  name one to four capitalised words (or "bin", "d/o", ...), a date ordinals, months and
  numbers. The model cannot put a clause inside the tags;
- the words around the values are letters and sentence punctuation only: no bracket,
  parenthesis, angle bracket, quote or digit (the validator rejects each; numbers are spoken);
- a line may open with a number ("3. ") and sit in double quotes: Qwen2.5-Coder numbers and
  quotes its lines whatever it is told, and forbidding that derailed it (it refused, or wrote
  prose); the bullet repair and the validator take both off again;
- a line opens with a value only when that value is a name (the validator's ``fragment`` rule);
- a request with no tags gets plain lines.

The grammar fixes the format only. Every line still goes through the same repairs and
validation as an unconstrained one (meta talk, untagged PII, length, de-duplication, value
shape), so a line the grammar pushed into shape but that reads wrong is still rejected. Only
the llama.cpp backend takes a grammar (``augment --grammar``); with another one the job stops
with an error.
"""
from __future__ import annotations

import itertools
from collections import Counter

from deid_speech.augment.validate import DIGIT_WORDS, MONTHS, NAME_PARTICLES, ORDINALS, REPEAT_WORDS

_TEXT = r"[a-zA-Z ,.?!';:-]"  # the words around the values
# one value of each label, in GBNF (rules num, num2, low, cap, part, ord, month below)
_VALUES = {
    "PHONE": '("plus " num " " num " ")? num (" " num){6,19}',  # 7-20 digit words
    "CREDIT_CARD": 'num (" " num){11,18}',  # 12-19
    "BANK_ACCOUNT": 'num (" " num){7,13}',  # 8-14
    "NRIC": '[STFGM] (" " num){6,8} " " [A-Z]',
    "PASSPORT_NUM": '[A-Z] (" " [A-Z])? (" " num){6,8} " " [A-Z]',
    "CAR_PLATE": '[A-Z] (" " [A-Z]){1,2} (" " num){2,4} " " [A-Z]',
    "EMAIL": 'low (" " low){0,3} " at " low " dot " low (" dot " low)?',
    "PERSON": 'cap (" " (cap | part)){0,3}',
    "DATE": '(ord " " ("of " )?)? month (" " num2){0,4} | month " " ord (" " num2){0,4}',
}
_WORDS = "[a-zA-Z' ]{1,60}"  # a label without a shape of its own: words


def _alts(words) -> str:
    return "(" + " | ".join(f'"{w}"' for w in words) + ")"


def line_grammar(tags: Counter) -> str:
    """The GBNF grammar for answers to a request with tag multiset ``tags``."""
    labels = sorted(tags.elements())
    rules = ['root ::= item ("\\n" item)* "\\n"?', 'item ::= ([0-9] [0-9]? ". ")? "\\""? line "\\""?']
    if not labels:
        rules.append("line ::= c+")
    else:
        orders = sorted(set(itertools.permutations(labels)))
        rules.append("line ::= " + " | ".join(
            " ".join([("w0" if o[0] == "PERSON" else "w")] + [f"{_rule(t)} w0" for t in o]) for o in orders))
        for t in sorted(set(labels)):
            rules.append(f'{_rule(t)} ::= "[{t}] " ({_VALUES.get(t, _WORDS)}) " [{t}]"')
    # no length limit on the words: a limit cut sentences in the middle (the validator's
    # word limit and the request's token limit bound a line)
    rules += ["w ::= c+", "w0 ::= c*", f"c ::= {_TEXT}",
              f"num ::= {_alts(DIGIT_WORDS + REPEAT_WORDS)}",
              f"num2 ::= {_alts(DIGIT_WORDS + ('ten', 'eleven', 'twelve', 'nineteen', 'twenty', 'thousand', 'and'))}",
              'low ::= [a-z]{1,12}', 'cap ::= [A-Z] [a-z]{1,11}', f"part ::= {_alts(NAME_PARTICLES)}",
              f"ord ::= {_alts(tuple(f'twenty {o}' for o in ORDINALS[:9]) + ('thirty first',) + ORDINALS)}",
              f"month ::= {_alts(MONTHS)}"]
    return "\n".join(rules) + "\n"


def _rule(label: str) -> str:
    return "e-" + label.lower().replace("_", "-")
