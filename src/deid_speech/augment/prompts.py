"""The paper's two augmentation prompts (Dhingra et al. 2025, Fig. 3 and Fig. 4), adapted so
the model returns tagged sentences in our format, one per line.

*Similar* shows example seed sentences carrying the same tag set and asks for sentences that
follow their structure (paper: temperature 0.3). *Diverse* gives the tags only and asks for
varied contexts and themes (paper: temperature 0.6).
"""
from __future__ import annotations

from collections import Counter

STRATEGIES = ("similar", "diverse")
DEFAULT_TEMPERATURE = {"similar": 0.3, "diverse": 0.6}
PER_REQUEST = 20

_HEAD = """You are given a set of named entity recognition (NER) tags. Your task is to generate a set of {n} new sentences that contain exactly the same NER tags as given to you. Each new sentence should:
1. Use exactly the same NER tags in appropriate contexts without adding any new NER tags.
2. Reflect spoken language, as if someone is speaking to another person, in Singapore English (Singlish): particles like lah, lor, leh, meh, "can or not", fillers like uh and um.
3. {third}

The format for the input will be such that you will get the NER tags in close brackets. Each tag appears twice, around the words of the entity: [LABEL] the entity's words [LABEL]. Write numbers, letters and emails the way they are spoken, and never copy a given sentence.
Given this kind of input, you need to now generate {n} more sentences that contain exactly the same NER tags as given in the prompt, one sentence per line. DO NOT ADD BULLET NUMBERS IN THE OUTPUT."""

_SIMILAR_THIRD = "Follow the structure of the example sentences given below."
_DIVERSE_THIRD = ("Be as creative and diverse as you can with the structure of sentences you come up "
                  "with. Talk about the NER tag in different contexts and themes.")


def tag_list(tags: Counter) -> str:
    """``Counter({'PHONE': 1, 'PERSON': 2})`` -> ``[PERSON] [PERSON] [PHONE]``."""
    return " ".join(f"[{t}]" for t in sorted(tags.elements()))


def build_prompt(strategy: str, tags: Counter, examples: list[str], n: int = PER_REQUEST) -> list[dict]:
    """Chat messages for one request."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}")
    third = _SIMILAR_THIRD if strategy == "similar" else _DIVERSE_THIRD
    system = _HEAD.format(n=n, third=third)
    user = f"NER tags: {tag_list(tags) if tags else '(none: sentences with no personal data)'}"
    if strategy == "similar" and examples:
        user += "\n\nExample sentences:\n" + "\n".join(examples)
    user += f"\n\nNow write {n} new sentences, one per line."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
