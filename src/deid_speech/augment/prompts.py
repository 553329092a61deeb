"""The paper's two augmentation prompts (Dhingra et al. 2025, Fig. 3 and Fig. 4), adapted so
the model returns tagged sentences in our format, one per line.

*Similar* shows example seed sentences carrying the same tag set and asks for sentences that
follow their structure (paper: temperature 0.3). *Diverse* gives the tags only and asks for
varied contexts and themes (paper: temperature 0.6), with an explicit list of everyday
scenarios to vary (small models ignore "be diverse" but follow a list).

The tag format is shown as a schema (``... [PHONE] the phone number in words [PHONE] ...``),
not as a sentence: a small model copies a sentence verbatim. A copied schema keeps its
``<`` ``>`` placeholders and is rejected by the validator.
"""
from __future__ import annotations

from collections import Counter

STRATEGIES = ("similar", "diverse")
DEFAULT_TEMPERATURE = {"similar": 0.3, "diverse": 0.6}
PER_REQUEST = 20

SCENARIOS = ("a bank hotline", "a clinic appointment", "a parcel delivery", "an insurance claim",
             "a telco customer service call", "a government office counter", "a family group chat",
             "a hawker centre", "a condo management office", "a car workshop", "a school office",
             "a taxi booking")

_HINT = {"PERSON": "a full name", "NRIC": "an NRIC spoken letter by letter and digit by digit",
         "PASSPORT_NUM": "a passport number spoken letter by letter and digit by digit",
         "PHONE": "a phone number in words", "EMAIL": "an email address in words",
         "CREDIT_CARD": "a card number in words", "CAR_PLATE": "a car plate spoken letter by letter",
         "BANK_ACCOUNT": "a bank account number in words", "DATE": "a date in words"}

_HEAD = """You are given a set of named entity recognition (NER) tags. Your task is to generate a set of {n} new sentences that contain exactly the same NER tags as given to you. Each new sentence should:
1. Use exactly the same NER tags in appropriate contexts without adding any new NER tags.
2. Reflect spoken language, as if someone is speaking to another person, in Singapore English (Singlish): particles like lah, lor, leh, meh, "can or not", fillers like uh and um.
3. {third}

The format for the input will be such that you will get the NER tags in close brackets. Each tag appears twice, around the words of the entity: [LABEL] the entity's words [LABEL]. Write numbers, letters and emails the way they are spoken, and never copy a given sentence.
Given this kind of input, you need to now generate {n} more sentences that contain exactly the same NER tags as given in the prompt, one sentence per line. DO NOT ADD BULLET NUMBERS IN THE OUTPUT.
Write exactly one sentence per line and nothing else: no numbering, no title, no explanation. Every sentence must be different."""

_SIMILAR_THIRD = "Follow the structure of the example sentences given below."
_DIVERSE_THIRD = ("Be as creative and diverse as you can with the structure of sentences you come up "
                  "with. Talk about the NER tag in different contexts and themes.")


def tag_list(tags: Counter) -> str:
    """``Counter({'PHONE': 1, 'PERSON': 2})`` -> ``[PERSON] [PERSON] [PHONE]``."""
    return " ".join(f"[{t}]" for t in sorted(tags.elements()))


def schema(tags: Counter) -> str:
    """The shape of one output line: ``<words> [PHONE] <a phone number in words> [PHONE] <words>``."""
    parts = ["<words>"]
    for t in sorted(tags.elements()):
        parts += [f"[{t}] <{_HINT.get(t, 'the ' + t.lower() + ' in words')}> [{t}]", "<words>"]
    return " ".join(parts)


def scenarios(offset: int, k: int = 8) -> list[str]:
    """``k`` scenarios, starting at ``offset`` (so successive requests lead with different ones)."""
    return [SCENARIOS[(offset + i) % len(SCENARIOS)] for i in range(min(k, len(SCENARIOS)))]


def build_prompt(strategy: str, tags: Counter, examples: list[str], n: int = PER_REQUEST,
                 offset: int = 0) -> list[dict]:
    """Chat messages for one request (``offset`` rotates the Diverse scenario list)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}")
    third = _SIMILAR_THIRD if strategy == "similar" else _DIVERSE_THIRD
    system = _HEAD.format(n=n, third=third)
    if tags:
        head, shape = f"NER tags: {tag_list(tags)}", f"Every line has this shape: {schema(tags)}"
    else:
        head = "NER tags: (none: sentences with no personal data)"
        shape = ("Every line is one plain sentence with no names and no ID, phone or card numbers, but with "
                 "other numbers such as prices, times, bus numbers or amounts, in words.")
    if strategy == "similar" and examples:
        # Examples quoted inline, not as a list of lines: Qwen2.5-Coder-1.5B began every answer
        # by copying example lines verbatim when they were listed one per line (also when told
        # "do NOT repeat them", with two examples, or with them as an earlier assistant turn).
        user = (f"{head}\n\nPeople in the data already say things like "
                + " or ".join(f'"{e}"' for e in examples)
                + ". Those sentences are taken: do NOT repeat them. Write new ones in the same spoken style and "
                "structure, each in another situation, for example: " + "; ".join(scenarios(offset)) + "."
                f"\n\n{shape}\nNow write {n} new sentences, one per line, numbers spelled out in words.")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]
    user = f"{head}\n{shape}"
    if strategy == "diverse":
        user += ("\n\nUse a different situation for each sentence, for example: "
                 + "; ".join(scenarios(offset)) + ".")
    user += f"\n\nNow write {n} new sentences, one per line."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
