"""The paper's timestamp-overlap scoring: a predicted span matches a true entity when
their times overlap.

* recall    = true entities overlapped by at least one prediction / true entities
* precision = predictions overlapping at least one true entity / predictions
* ``label_exact=True`` requires the labels to agree as well.

Per-file counts accumulate into a corpus figure (:class:`OverlapCounts` adds up).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from deid_speech.types import Span


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class OverlapCounts:
    """tp_true: true entities found; n_true; tp_pred: predictions that hit; n_pred."""

    tp_true: int = 0
    n_true: int = 0
    tp_pred: int = 0
    n_pred: int = 0

    def __iadd__(self, o: OverlapCounts) -> OverlapCounts:
        self.tp_true += o.tp_true
        self.n_true += o.n_true
        self.tp_pred += o.tp_pred
        self.n_pred += o.n_pred
        return self

    @property
    def recall(self) -> float:
        return self.tp_true / self.n_true if self.n_true else 1.0

    @property
    def precision(self) -> float:
        return self.tp_pred / self.n_pred if self.n_pred else 1.0

    @property
    def f1(self) -> float:
        return _f1(self.precision, self.recall)

    def as_dict(self) -> dict:
        return {"precision": round(self.precision, 4), "recall": round(self.recall, 4),
                "f1": round(self.f1, 4), "n_true": self.n_true, "n_pred": self.n_pred,
                "tp_true": self.tp_true, "tp_pred": self.tp_pred}


def _match(a: Span, b: Span, label_exact: bool) -> bool:
    return a.overlaps(b) and (not label_exact or a.label == b.label)


@dataclass
class OverlapScore:
    """Overall and per-label counts. Per label, recall counts true entities of that
    label; precision counts predictions of that label."""

    overall: OverlapCounts = field(default_factory=OverlapCounts)
    per_label: dict[str, OverlapCounts] = field(default_factory=lambda: defaultdict(OverlapCounts))

    def add(self, truth: list[Span], pred: list[Span], label_exact: bool = False) -> None:
        for t in truth:
            hit = any(_match(t, p, label_exact) for p in pred)
            for c in (self.overall, self.per_label[t.label]):
                c.n_true += 1
                c.tp_true += hit
        for p in pred:
            hit = any(_match(p, t, label_exact) for t in truth)
            for c in (self.overall, self.per_label[p.label]):
                c.n_pred += 1
                c.tp_pred += hit

    def as_dict(self) -> dict:
        return {"overall": self.overall.as_dict(),
                "per_label": {k: v.as_dict() for k, v in sorted(self.per_label.items())}}
