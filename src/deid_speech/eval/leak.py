"""How much PII audio a redaction still leaks, and how much other speech it destroys.

Per file, from the true entity spans, the redacted regions (the detected spans widened
by the redaction padding, exactly what the audio redactor overwrote) and the speech
(word spans of the reference):

* ``leaked_duration``  = true-entity seconds not covered by any redacted region,
  over all true-entity seconds;
* ``leaky_entities``   = share of true entities with any uncovered part longer than
  ``tolerance`` (a sliver at an edge shorter than that is a timing detail, not a leak);
* ``over_redaction``   = share of non-PII speech (word time outside every true entity)
  that was redacted;
* ``over_redaction_by_cause`` = those over-redacted seconds split by why they were beeped,
  when the caller names the causes (an ordered list of (cause, intervals): a second goes to
  the first cause whose intervals hold it, the rest to ``other``); eval names padding,
  overshoot, false alarms per label, the merge gap and speech no word covered.

Counts add up across files (``+=``) into a corpus figure. Each entity's leaked fraction
is kept for the residual-risk score (:mod:`deid_speech.eval.text`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from deid_speech.intervals import Interval, covered, intersect, subtract, union  # noqa: F401  (re-exported)
from deid_speech.types import Span


@dataclass
class LeakCounts:
    entity_s: float = 0.0
    leaked_s: float = 0.0
    n_entities: int = 0
    n_leaky: int = 0
    other_speech_s: float = 0.0
    over_redacted_s: float = 0.0
    fractions: list[tuple[str, float]] = field(default_factory=list)  # (label, leaked share) per entity
    by_label: dict[str, list[float]] = field(default_factory=dict)  # label -> [entity s, leaked s]
    by_cause: dict[str, float] = field(default_factory=dict)  # cause -> over-redacted s

    def add(self, truth: Sequence[Span], redacted: Sequence[Interval], speech: Sequence[Interval],
            tolerance: float = 0.05, causes: Sequence[tuple[str, Sequence[Interval]]] = ()) -> LeakCounts:
        """Score one file; return the counts of this file alone (also added to self).
        ``causes``: why regions were redacted, first cause first (see the module doc)."""
        mine = LeakCounts()
        regions = union(redacted)
        for t in truth:
            gap = t.duration - covered(t.start, t.end, regions)
            mine.entity_s += t.duration
            mine.leaked_s += gap
            mine.n_entities += 1
            mine.n_leaky += gap > tolerance
            mine.fractions.append((t.label, gap / t.duration if t.duration and gap > tolerance else 0.0))
            acc = mine.by_label.setdefault(t.label, [0.0, 0.0])
            acc[0] += t.duration
            acc[1] += gap
        other = subtract(speech, [(t.start, t.end) for t in truth])
        mine.other_speech_s = sum(b - a for a, b in other)
        mine.over_redacted_s = sum(covered(a, b, regions) for a, b in other)
        if causes:
            left = intersect(other, regions)  # the over-redacted speech itself
            for cause, intervals in causes:
                inside = intersect(left, intervals)
                if (s := sum(b - a for a, b in inside)) > 1e-9:
                    mine.by_cause[cause] = mine.by_cause.get(cause, 0.0) + s
                left = subtract(left, intervals)
            if (s := sum(b - a for a, b in left)) > 1e-9:
                mine.by_cause["other"] = s
        self += mine
        return mine

    def __iadd__(self, o: LeakCounts) -> LeakCounts:
        self.entity_s += o.entity_s
        self.leaked_s += o.leaked_s
        self.n_entities += o.n_entities
        self.n_leaky += o.n_leaky
        self.other_speech_s += o.other_speech_s
        self.over_redacted_s += o.over_redacted_s
        self.fractions += o.fractions
        for label, (e, g) in o.by_label.items():
            acc = self.by_label.setdefault(label, [0.0, 0.0])
            acc[0] += e
            acc[1] += g
        for cause, sec in o.by_cause.items():
            self.by_cause[cause] = self.by_cause.get(cause, 0.0) + sec
        return self

    @property
    def leaked_duration(self) -> float:
        return self.leaked_s / self.entity_s if self.entity_s else 0.0

    @property
    def leaky_entities(self) -> float:
        return self.n_leaky / self.n_entities if self.n_entities else 0.0

    @property
    def over_redaction(self) -> float:
        return self.over_redacted_s / self.other_speech_s if self.other_speech_s else 0.0

    def as_dict(self) -> dict:
        return {"leaked_duration": round(self.leaked_duration, 4), "leaky_entities": round(self.leaky_entities, 4),
                "over_redaction": round(self.over_redaction, 4), "entity_s": round(self.entity_s, 2),
                "leaked_s": round(self.leaked_s, 2), "n_entities": self.n_entities, "n_leaky": self.n_leaky,
                "other_speech_s": round(self.other_speech_s, 2), "over_redacted_s": round(self.over_redacted_s, 2),
                "per_label": {k: round(g / e, 4) if e else 0.0 for k, (e, g) in sorted(self.by_label.items())},
                **({"over_redaction_by_cause": {  # share of the other speech, per cause; they add up to over_redaction
                    k: round(v / self.other_speech_s, 4) if self.other_speech_s else 0.0
                    for k, v in sorted(self.by_cause.items(), key=lambda kv: -kv[1])}} if self.by_cause else {})}
