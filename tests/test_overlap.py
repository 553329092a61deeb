from deid_speech.eval.overlap import OverlapScore
from deid_speech.types import Span


def S(a, b, label="PHONE"):
    return Span(a, b, label)


def test_overlap_recall_precision_with_split_and_merged_predictions():
    truth = [S(1, 2), S(3, 4, "NRIC"), S(6, 7)]
    pred = [S(1.5, 3.5, "PHONE"),  # covers two entities (one of another label)
            S(6.0, 6.2), S(6.5, 7.0),  # split prediction: both hit
            S(9, 10, "EMAIL")]  # false positive
    sc = OverlapScore()
    sc.add(truth, pred)
    o = sc.overall
    assert (o.tp_true, o.n_true, o.tp_pred, o.n_pred) == (3, 3, 3, 4)
    assert o.recall == 1.0 and o.precision == 0.75
    exact = OverlapScore()
    exact.add(truth, pred, label_exact=True)
    assert exact.overall.tp_true == 2 and exact.per_label["NRIC"].recall == 0.0


def test_touching_spans_do_not_match_and_empty_cases_are_defined():
    sc = OverlapScore()
    sc.add([S(1, 2)], [S(2, 3)])
    assert sc.overall.recall == 0.0 and sc.overall.precision == 0.0
    empty = OverlapScore()
    empty.add([], [])
    assert empty.overall.recall == 1.0 and empty.overall.precision == 1.0
    miss = OverlapScore()
    miss.add([S(0, 1)], [])
    assert miss.overall.recall == 0.0 and miss.overall.f1 == 0.0


def test_counts_accumulate_over_files():
    sc = OverlapScore()
    sc.add([S(0, 1)], [S(0, 1)])
    sc.add([S(0, 1), S(2, 3)], [])
    assert sc.overall.n_true == 3 and abs(sc.overall.recall - 1 / 3) < 1e-9
