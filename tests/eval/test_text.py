import math

import pytest

from deid_speech.eval.text import (
    PARTIAL_WEIGHTS,
    RISK_WEIGHTS,
    SPrivCounts,
    TextSpanScore,
    entity_leaks,
    entity_risk,
    normalize_for_wer,
    residual_risk,
    risk_summary,
    score_text_spans,
    spriv,
    wer,
)
from deid_speech.redact import redact_text
from deid_speech.types import LABELS, EntitySpan, Span, parse_tagged
from factories import make_transcript


def E(a, b, label="PHONE"):
    return EntitySpan(a, b, label)


# --- span-correct / label-exact ----------------------------------------------------------

def test_exact_match_scores_one_everywhere():
    _, truth = parse_tagged("call [PHONE] nine one two three [PHONE] ok")
    sc = score_text_spans(truth, list(truth))
    for c in (sc.span_correct, sc.label_exact):
        assert (c.precision, c.recall) == (1.0, 1.0)
    assert sc.mislabels == 0


def test_partial_overlap_counts_and_touching_spans_do_not():
    sc = score_text_spans([E(5, 15)], [E(10, 20)])
    assert sc.span_correct.recall == 1.0 and sc.span_correct.precision == 1.0
    touching = score_text_spans([E(5, 15)], [E(15, 20)])
    assert touching.span_correct.recall == 0.0 and touching.span_correct.precision == 0.0


def test_one_prediction_covering_two_entities_hits_both():
    truth = [E(0, 4), E(6, 10), E(30, 35)]
    sc = score_text_spans(truth, [E(2, 8)])
    c = sc.span_correct
    assert (c.tp_true, c.n_true, c.tp_pred, c.n_pred) == (2, 3, 1, 1)
    assert c.recall == pytest.approx(2 / 3) and c.precision == 1.0


def test_label_mismatch_is_span_correct_but_not_label_exact():
    sc = score_text_spans([E(0, 9, "NRIC"), E(20, 30, "PHONE")],
                          [E(0, 9, "PASSPORT_NUM"), E(20, 30, "PHONE")])
    assert sc.span_correct.recall == 1.0 and sc.span_correct.precision == 1.0
    assert sc.label_exact.recall == 0.5 and sc.label_exact.precision == 0.5
    assert sc.mislabels == 1
    assert sc.per_label["NRIC"].recall == 0.0 and sc.per_label["PASSPORT_NUM"].precision == 0.0
    assert sc.per_label["PHONE"].recall == 1.0


def test_empty_predictions_and_zero_true_entities():
    none_found = score_text_spans([E(0, 5)], [])
    assert none_found.span_correct.recall == 0.0 and none_found.span_correct.precision == 1.0
    nothing_true = score_text_spans([], [E(0, 5)])
    assert nothing_true.label_exact.recall == 1.0 and nothing_true.label_exact.precision == 0.0
    empty = score_text_spans([], [])
    assert empty.span_correct.recall == empty.span_correct.precision == 1.0


def test_scores_accumulate_across_files():
    total = TextSpanScore()
    total += score_text_spans([E(0, 5)], [E(0, 5)])
    total += score_text_spans([E(0, 5, "DATE")], [E(0, 5, "PERSON"), E(10, 12)])
    assert (total.span_correct.tp_true, total.span_correct.n_true) == (2, 2)
    assert (total.label_exact.tp_pred, total.label_exact.n_pred) == (1, 3)
    d = total.as_dict()
    assert d["label_exact"]["recall"] == 0.5 and d["mislabels"] == 1
    assert d["span_correct"]["precision"] == round(2 / 3, 4)


# --- SPriV ---------------------------------------------------------------------------------

def test_spriv_redacted_string_leaking_one_of_two_values():
    text, truth = parse_tagged("my number is [PHONE] nine one two three [PHONE] "
                               "and I am [PERSON] Tan [PERSON] thanks")
    redacted = "my number is [PHONE_1] and I am Tan thanks"
    c = spriv(text, truth, redacted)
    # 9 output tokens; the 4 phone tokens are masked, "Tan" survives
    assert (c.leaked, c.n_output, c.n_pii) == (1, 9, 5)
    assert c.spriv == pytest.approx(1 / 9) and c.pii_leak_rate == pytest.approx(0.2)
    assert (c.n_entities, c.full, c.partial) == (2, 1, 0)
    assert entity_leaks(text, truth, redacted) == [("PHONE", 0.0, "9123"), ("PERSON", 1.0, "tan")]


def test_spriv_partial_leak_and_non_pii_repeat_not_counted():
    # "one" also occurs outside the entity; only the PII position counts
    text, truth = parse_tagged("one moment, it is [PHONE] nine one two three [PHONE]")
    c = spriv(text, truth, "one moment, it is [PHONE_1] three")
    assert (c.leaked, c.n_output, c.partial, c.full) == (1, 6, 1, 0)
    (label, frac, _), = entity_leaks(text, truth, "one moment, it is [PHONE_1] three")
    assert label == "PHONE" and frac == 0.25


def test_spriv_with_redact_text_output_and_empty_cases():
    tr = make_transcript("call me at nine one two three okay")
    truth = [E(11, 29, "PHONE")]
    assert tr.text[11:29] == "nine one two three"
    redacted = redact_text(tr, [Span(1.5, 3.4, "PHONE", text="nine one two three")])
    assert redacted == "call me at [PHONE_1] okay"
    assert spriv(tr.text, truth, redacted).spriv == 0.0
    assert spriv(tr.text, truth, tr.text).spriv == pytest.approx(4 / 8)
    empty = spriv("", [], "")
    assert empty.spriv == 0.0 and empty.pii_leak_rate == 0.0
    total = SPrivCounts()
    total += spriv(tr.text, truth, redacted)
    total += spriv(tr.text, truth, tr.text)
    assert total.as_dict()["spriv"] == round(4 / 13, 4)


# --- WER -----------------------------------------------------------------------------------

def test_wer_one_substitution_in_four_words():
    assert wer(["the cat sat down"], ["the bat sat down"]) == 0.25
    assert wer(["The cat, sat down."], ["the CAT sat down"]) == 0.0  # normalised
    assert normalize_for_wer("Don't, [PHONE_1]!") == "dont phone 1"


def test_wer_pools_over_pairs_and_handles_empty_references():
    assert wer(["a b c d", "x y"], ["a q c d", "x y z"]) == pytest.approx(2 / 6)
    assert wer(["", "a b"], ["oops", "a b"]) == 0.5  # empty ref: its words are insertions
    assert wer([""], [""]) == 0.0
    assert wer([], []) == 0.0
    assert wer(["", "  ..."], ["hello", ""]) == 1.0
    with pytest.raises(ValueError):
        wer(["a"], [])


# --- residual risk --------------------------------------------------------------------------

def test_weights_cover_every_label_and_partials_follow_the_paper():
    assert set(RISK_WEIGHTS) == set(LABELS) == set(PARTIAL_WEIGHTS)
    assert PARTIAL_WEIGHTS["PERSON"] == 3  # ceil(5/2)
    assert PARTIAL_WEIGHTS["PHONE"] == 2 and PARTIAL_WEIGHTS["DATE"] == 1  # floor
    assert entity_risk("NRIC", 0.0) == 0 and entity_risk("NRIC", 1.0) == 5
    assert entity_risk("NRIC", 0.4) == 2


def test_residual_risk_full_plus_partial():
    # full PHONE (4) + partial PERSON (3) + redacted NRIC (0) + full DATE (3)
    assert residual_risk([("PHONE", 1.0), ("PERSON", 0.5), ("NRIC", 0.0), ("DATE", 1.0)]) == 10
    assert residual_risk([]) == 0


def test_residual_risk_counts_a_repeated_value_once():
    # paper: four mentions of a partially leaked "Marc" score 3, not 12
    assert residual_risk([("PERSON", 0.5, "marc")] * 4) == 3
    assert residual_risk([("PERSON", 0.5, "marc"), ("PERSON", 1.0, "marc"),
                          ("PERSON", 1.0, "lim")]) == 10
    text, truth = parse_tagged("[PERSON] Marc [PERSON] here, yes [PERSON] Marc [PERSON]")
    assert residual_risk(entity_leaks(text, truth, text)) == 5


def test_risk_summary_mu_plus_sigma_criterion():
    s = risk_summary([0, 0, 2, 2])  # mean 1, population std 1
    assert (s.mean, s.std, s.passed) == (1.0, 1.0, True)
    bad = risk_summary([0, 10])  # mean 5, std 5
    assert not bad.passed and bad.as_dict()["mean_plus_std"] == 10.0
    edge = risk_summary([4, 4, 4, 6])  # mean 4.5, std sqrt(0.75) ~ 0.866 -> 5.37
    assert not edge.passed
    assert risk_summary([0, 2], ddof=1).std == pytest.approx(math.sqrt(2))
    assert risk_summary([]).passed and risk_summary([]).n == 0


def test_wer_reads_spoken_and_written_numbers_alike() -> None:
    from deid_speech.eval.text import canonical_numbers

    assert canonical_numbers("call me at nine double eight seven oh one two three okay") == \
        canonical_numbers("call me at 98870123 okay") == "call me at 9 8 8 7 0 1 2 3 okay"
    assert wer(["my IC is S one two three D lah"], ["My IC is S123D, lah."]) == 0.0
    assert wer(["call nine one two"], ["call 913"]) == pytest.approx(1 / 4)


def test_wer_keeps_a_letter_spelled_with_a_word_as_words() -> None:
    from deid_speech.eval.text import canonical_numbers

    # the detectors read "D for delta" as the letter D; WER counts the words that were said
    assert canonical_numbers("S one two three D for delta okay") == "s 1 2 3 d for delta okay"
    assert wer(["S one two three D for delta"], ["S123D for Delta."]) == 0.0
    assert wer(["S one two three D for delta"], ["S123D"]) == pytest.approx(2 / 7)
