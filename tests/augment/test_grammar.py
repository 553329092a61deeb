"""The augmentation grammar's construction (its effect on a real model is tested in
test_llm_backends.py)."""
from collections import Counter

from deid_speech.augment.grammar import line_grammar


def test_every_order_of_the_tags_is_one_alternative_and_only_names_open_a_line():
    g = line_grammar(Counter({"PERSON": 2, "DATE": 1}))
    line = next(r for r in g.splitlines() if r.startswith("line ::="))
    alts = line.removeprefix("line ::= ").split(" | ")
    assert sorted(alts) == sorted(["w e-date w0 e-person w0 e-person w0", "w0 e-person w0 e-date w0 e-person w0",
                                   "w0 e-person w0 e-person w0 e-date w0"])
    assert '"[DATE] "' in g and '" [DATE]"' in g and "e-phone" not in g


def test_no_tags_means_plain_lines():
    g = line_grammar(Counter())
    assert "line ::= c+" in g and "[" not in g.split("c ::=")[0].replace("[0-9]", "")
