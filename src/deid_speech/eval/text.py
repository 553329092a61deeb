"""Text-side metrics: span scores on character offsets, SPriV leakage, WER, residual risk.

* Span-correct / label-exact precision and recall (PRvL, Sec. V-A) on :class:`EntitySpan`
  character offsets of one transcript.
* SPriV leakage (PRvL, Sec. V-C) of a redacted transcript against the true entities, plus
  per-entity leak fractions that feed the residual-risk score.
* Corpus WER through jiwer after a light normalisation.
* Residual risk per call and the corpus criterion mu + sigma < 5 (residual-risk paper,
  Sec. 4.2-4.3 and Table 6).

Counts add up across files with ``+=``; ``as_dict()`` gives rounded figures.
"""
from __future__ import annotations

import difflib
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from deid_speech.errors import DeidError
from deid_speech.eval.overlap import OverlapCounts
from deid_speech.redact import value_key
from deid_speech.types import EntitySpan

# --- span-correct / label-exact ----------------------------------------------------------

def _hits(a: EntitySpan, b: EntitySpan, label_exact: bool) -> bool:
    """Half-open character ranges share at least one character (and labels agree)."""
    overlap = a.char_start < b.char_end and b.char_start < a.char_end
    return overlap and (not label_exact or a.label == b.label)


@dataclass
class TextSpanScore:
    """PRvL's two settings (Sec. V-A) on character offsets, accumulated over transcripts.

    PRvL aligns masked outputs by edit distance: a PII span left unmasked is a false
    negative, a non-PII span masked is a false positive, a PII span masked with the wrong
    tag is a mislabel. On character offsets that becomes:

    * **span-correct** (label ignored): recall = true entities sharing a character with at
      least one prediction / true entities; precision = predictions sharing a character
      with at least one true entity / predictions.
    * **label-exact**: the same, but the overlapping pair must also carry the same label,
      so a mislabel is a miss on the truth side and a false alarm on the prediction side.
    * ``mislabels``: true entities hit under span-correct but not under label-exact.

    One prediction covering two entities hits both; a split prediction counts each part.
    Empty denominators give 1.0 (as :mod:`deid_speech.eval.overlap`). ``per_label`` holds
    label-exact counts: recall by true label, precision by predicted label.
    """

    span_correct: OverlapCounts = field(default_factory=OverlapCounts)
    label_exact: OverlapCounts = field(default_factory=OverlapCounts)
    mislabels: int = 0
    per_label: dict[str, OverlapCounts] = field(default_factory=lambda: defaultdict(OverlapCounts))

    def add(self, truth: Sequence[EntitySpan], pred: Sequence[EntitySpan]) -> TextSpanScore:
        """Score one transcript's predictions against its true entities; returns self."""
        for t in truth:
            loose = any(_hits(t, p, False) for p in pred)
            exact = any(_hits(t, p, True) for p in pred)
            self.span_correct.n_true += 1
            self.span_correct.tp_true += loose
            for c in (self.label_exact, self.per_label[t.label]):
                c.n_true += 1
                c.tp_true += exact
            self.mislabels += loose and not exact
        for p in pred:
            self.span_correct.n_pred += 1
            self.span_correct.tp_pred += any(_hits(p, t, False) for t in truth)
            exact = any(_hits(p, t, True) for t in truth)
            for c in (self.label_exact, self.per_label[p.label]):
                c.n_pred += 1
                c.tp_pred += exact
        return self

    def __iadd__(self, o: TextSpanScore) -> TextSpanScore:
        self.span_correct += o.span_correct
        self.label_exact += o.label_exact
        self.mislabels += o.mislabels
        for k, v in o.per_label.items():
            self.per_label[k] += v
        return self

    def as_dict(self) -> dict:
        return {"span_correct": self.span_correct.as_dict(),
                "label_exact": self.label_exact.as_dict(), "mislabels": self.mislabels,
                "per_label": {k: v.as_dict() for k, v in sorted(self.per_label.items())}}


def score_text_spans(truth: Sequence[EntitySpan], pred: Sequence[EntitySpan]) -> TextSpanScore:
    """:class:`TextSpanScore` of one transcript."""
    return TextSpanScore().add(truth, pred)


# --- SPriV leakage -----------------------------------------------------------------------

# A masked output token: "[PHONE_1]", "[PHONE]", "<NAME>" or "****", with edge punctuation.
_MASK_RE = re.compile(r"^\W*(?:\[[A-Z][A-Z_]*\d*\]|<[A-Z][A-Z_]*\d*>|[*#█]+)\W*$")
_MASKED = "\x00masked"  # never equal to a normalised source token


def _norm(tok: str) -> str:
    return re.sub(r"^\W+|\W+$", "", tok.lower())


def _leaks(text: str, truth: Sequence[EntitySpan], redacted: str):
    """Align source and output tokens; return (per-entity source token indices,
    source indices that survive unmasked in the output, output token count)."""
    src = list(re.finditer(r"\S+", text))
    out = [_MASKED if _MASK_RE.match(t) else _norm(t) for t in redacted.split()]
    owned = [[i for i, m in enumerate(src) if m.start() < e.char_end and e.char_start < m.end()
              and _norm(m.group())] for e in truth]
    sm = difflib.SequenceMatcher(None, [_norm(m.group()) for m in src], out, autojunk=False)
    kept = {b.a + k for b in sm.get_matching_blocks() for k in range(b.size)}
    return owned, kept, len(out)


@dataclass
class SPrivCounts:
    """SPriV (PRvL Sec. V-C): with G the output tokens and T the positions of ground-truth
    PII tokens, m_i = 1 when i in T and g_i is not masked; SPriV = sum(m_i) / |G|.

    Adaptation: G is the redacted transcript split on whitespace; a token is masked when it
    is a placeholder (``[LABEL_n]``, ``[LABEL]``, ``<LABEL>``, ``***``). T is found by
    aligning the source transcript's tokens (lower-cased, edge punctuation stripped) to G
    with a longest-matching-blocks alignment (difflib): an output token counts as leaked
    (m_i = 1) when it is aligned, verbatim, to a source token overlapping a true entity.
    The corpus figure pools counts (leaked / output tokens summed over files).

    Also kept: ``pii_leak_rate`` = leaked PII tokens / true PII tokens (the share of the
    PII still readable), and per-entity ``full`` / ``partial`` leak counts. Empty
    denominators give 0.0 (nothing to leak).
    """

    leaked: int = 0
    n_output: int = 0
    n_pii: int = 0
    n_entities: int = 0
    full: int = 0
    partial: int = 0

    def __iadd__(self, o: SPrivCounts) -> SPrivCounts:
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(o, k))
        return self

    @property
    def spriv(self) -> float:
        return self.leaked / self.n_output if self.n_output else 0.0

    @property
    def pii_leak_rate(self) -> float:
        return self.leaked / self.n_pii if self.n_pii else 0.0

    def as_dict(self) -> dict:
        return {"spriv": round(self.spriv, 4), "pii_leak_rate": round(self.pii_leak_rate, 4),
                "leaked": self.leaked, "n_output": self.n_output, "n_pii": self.n_pii,
                "n_entities": self.n_entities, "full": self.full, "partial": self.partial}


def spriv(text: str, truth: Sequence[EntitySpan], redacted: str) -> SPrivCounts:
    """SPriV counts of one redacted transcript (see :class:`SPrivCounts`)."""
    owned, kept, n_out = _leaks(text, truth, redacted)
    pii = set().union(*owned) if owned else set()
    fracs = [sum(i in kept for i in ix) / len(ix) for ix in owned if ix]
    return SPrivCounts(leaked=len(pii & kept), n_output=n_out, n_pii=len(pii),
                       n_entities=len(fracs), full=sum(f == 1.0 for f in fracs),
                       partial=sum(0.0 < f < 1.0 for f in fracs))


def entity_leaks(text: str, truth: Sequence[EntitySpan], redacted: str) -> list[tuple[str, float, str]]:
    """(label, leaked fraction, value key) per true entity, for :func:`residual_risk`.

    The fraction is the share of the entity's tokens that survive unmasked (aligned as in
    :class:`SPrivCounts`): 0 = fully redacted, 1 = fully leaked. The key is
    :func:`deid_speech.redact.value_key`, so repeated mentions of one value count once.
    """
    owned, kept, _ = _leaks(text, truth, redacted)
    return [(e.label, sum(i in kept for i in ix) / len(ix) if ix else 0.0,
             value_key(e.label, text[e.char_start:e.char_end])) for e, ix in zip(truth, owned)]


# --- WER -----------------------------------------------------------------------------------

def canonical_numbers(text: str) -> str:
    """Spoken and written numbers in one form: every run of spoken or written digits (with
    any letters in it: "nine double eight", "988", "S1234567D") becomes its symbols one by one, so a
    TTS reading style and Whisper's digits do not count as recognition errors."""
    from deid_speech.spoken import normalize_tokens

    toks = text.replace("@", " at ").split()
    out, k = [], 0
    for a, b, sym in normalize_tokens(toks, spelled=False):  # "D for David" stays three words
        if not any(c.isdigit() for c in sym.text):
            continue  # letters alone ("IC", "CAT") stay words
        out += toks[k:a] + list(sym.text.lower())
        k = b + 1
    return " ".join(out + toks[k:])


def normalize_for_wer(text: str) -> str:
    """:func:`canonical_numbers`, lower case, drop apostrophes ("don't" -> "dont"), other
    punctuation -> space."""
    t = re.sub(r"['’]", "", canonical_numbers(text).lower())
    return " ".join(re.sub(r"[^\w\s]|_", " ", t).split())


def wer(refs: Sequence[str], hyps: Sequence[str]) -> float:
    """Corpus WER = (substitutions + deletions + insertions) / reference words, summed over
    pairs, after :func:`normalize_for_wer` (:func:`word_errors`). With no reference words at
    all, WER is 0.0 when the hypotheses are empty too, else 1.0."""
    return error_rate(*word_errors(refs, hyps))


def error_rate(errors: int, n_ref: int) -> float:
    """WER from summed :func:`word_errors` counts (no reference words: 0.0 with no errors, else 1.0)."""
    if not n_ref:
        return 0.0 if not errors else 1.0
    return errors / n_ref


def word_errors(refs: Sequence[str] | str, hyps: Sequence[str] | str) -> tuple[int, int]:
    """(substitutions + deletions + insertions, reference words), summed over pairs, after
    :func:`normalize_for_wer`; a pair with an empty reference adds its hypothesis words as
    insertions."""
    if isinstance(refs, str) or isinstance(hyps, str):
        refs, hyps = [refs], [hyps]  # type: ignore[list-item]
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    pairs = [(normalize_for_wer(r), normalize_for_wer(h)) for r, h in zip(refs, hyps)]
    errors = sum(len(h.split()) for r, h in pairs if not r)
    full = [(r, h) for r, h in pairs if r]
    n_ref = sum(len(r.split()) for r, _ in full)
    if full:
        try:
            import jiwer
        except ImportError:
            raise DeidError("WER needs jiwer: pip install 'deid-speech[eval]'") from None
        o = jiwer.process_words([r for r, _ in full], [h for _, h in full])
        errors += o.substitutions + o.deletions + o.insertions
    return errors, n_ref


# --- residual risk ------------------------------------------------------------------------

# Table 6 of the residual-risk paper (integer scores 0-5), mapped onto our labels.
RISK_WEIGHTS: dict[str, int] = {
    "PERSON": 5,        # PERSON_NAME 5
    "NRIC": 5,          # SSN 5 (national identity number)
    "PASSPORT_NUM": 5,  # PASSPORT 5
    "PHONE": 4,         # PHONE_NUMBER 4
    "EMAIL": 4,         # EMAIL_ADDRESS 4 (Sec. 4.2's worked example uses 3; Table 6 says 4)
    "CREDIT_CARD": 5,   # CREDIT_CARD_NUMBER 5
    "CAR_PLATE": 5,     # VEHICLE_IDENTIFICATION_NUMBER 5 (nearest vehicle identifier)
    "BANK_ACCOUNT": 5,  # IBAN_CODE 5 (an account number; ROUTING_NUMBER 3 names only the bank)
    "DATE": 3,          # DATE_OF_BIRTH 3 (our DATE entities are birth dates)
    "SECRET": 5,        # not in Table 6: a PIN or a one-time password opens the account itself
}
# Sec. 4.2: a partial leak scores half, rounded up for PERSON_NAME (ceil(5/2) = 3), down
# otherwise (the email example: floor(3/2) = 1).
PARTIAL_WEIGHTS: dict[str, int] = {k: (math.ceil(w / 2) if k == "PERSON" else w // 2)
                                   for k, w in RISK_WEIGHTS.items()}


def entity_risk(label: str, leaked_fraction: float) -> int:
    """Score of one entity: 0 when fully redacted (fraction <= 0), the Table 6 weight when
    fully leaked (fraction >= 1), the partial weight in between."""
    if leaked_fraction <= 0:
        return 0
    return RISK_WEIGHTS[label] if leaked_fraction >= 1 else PARTIAL_WEIGHTS[label]


def residual_risk(entities: Iterable[tuple[str, float] | tuple[str, float, str]]) -> int:
    """Residual risk of one call (Sec. 4.2): the sum of :func:`entity_risk` over its
    entities. Entities given with a third item, a value key, count once per
    (label, key) at their highest score: repeated mentions of one value are not summed."""
    total, seen = 0, {}
    for item in entities:
        score = entity_risk(item[0], item[1])
        if len(item) > 2:
            k = (item[0], item[2])
            seen[k] = max(seen.get(k, 0), score)
        else:
            total += score
    return total + sum(seen.values())


@dataclass
class RiskSummary:
    """Corpus residual risk (Sec. 4.3): mean and std of per-call scores and the success
    criterion mean + std < threshold (5, the score of one leaked direct identifier). The
    paper does not say which std; ours is the population std (ddof=0) unless asked.
    An empty corpus gives zeros (and passes)."""

    n: int
    mean: float
    std: float
    threshold: float = 5.0

    @property
    def passed(self) -> bool:
        return self.mean + self.std < self.threshold

    def as_dict(self) -> dict:
        return {"n": self.n, "mean": round(self.mean, 4), "std": round(self.std, 4),
                "mean_plus_std": round(self.mean + self.std, 4), "threshold": self.threshold,
                "passed": self.passed}


def risk_summary(scores: Sequence[float], threshold: float = 5.0, ddof: int = 0) -> RiskSummary:
    """:class:`RiskSummary` of per-call residual risk scores."""
    n = len(scores)
    if n == 0:
        return RiskSummary(0, 0.0, 0.0, threshold)
    mean = sum(scores) / n
    var = sum((s - mean) ** 2 for s in scores) / (n - ddof) if n > ddof else 0.0
    return RiskSummary(n, mean, math.sqrt(var), threshold)
