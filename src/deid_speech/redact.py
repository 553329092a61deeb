"""Redaction operators, per label (Presidio's model: a default and per-label overrides).

* audio: ``beep`` (a tone at speech level), ``silence``, or ``noise`` (speech-band noise at
  speech level, drawn from a fixed seed, never derived from the audio under it). Each
  REPLACES the audio under the span; nothing of the original is mixed in.
* padding: ``pad_before`` and ``pad_after`` seconds around each span (recognisers time
  names and numbers late: :data:`PAD_BEFORE` and :data:`PAD_AFTER` come from
  ``bench/onset_offsets.py``); redactions closer than ``merge_gap`` are joined, so no
  syllable survives between two beeps.
* text: ``placeholder`` (``[PHONE_1]``, numbered per distinct value within the call),
  ``mask`` (every letter and digit becomes ``*``: keeps the length), ``hash``
  (``[PHONE:9f2c41d07a3b]``, HMAC-SHA256 under a secret key, so one value links across calls
  without revealing it) or ``surrogate`` (a fresh, valid value of the same type and form,
  :mod:`deid_speech.surrogates`; the same across calls when a key is given).

Detection is elsewhere; this module only acts on Spans. A span whose timing looks
implausible (too short for what was said) is widened to the plausibly timed words around
it, within its ASR segment, never dropped.
"""
from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field

import numpy as np

from deid_speech.audio import Audio, frame_rms
from deid_speech.errors import DeidError
from deid_speech.spoken import clean_token, common_word, normalize_tokens
from deid_speech.types import LABELS, Span, Transcript

AUDIO_OPS = ("beep", "silence", "noise")
TEXT_OPS = ("placeholder", "mask", "hash", "surrogate")
KEY_ENV = "DEID_SPEECH_KEY"  # the secret of the hash operator (and of cross-call surrogates)
PAD_BEFORE = 0.2  # seconds: p90 of how much earlier an entity starts than its detection (bench/onset_offsets.py, dev part)
PAD_AFTER = 0.15  # p90 of how much later it ends (the same measurement)
MERGE_GAP = 0.3  # redactions closer than this are joined
# the share of the padding that a span takes when the first decoder and every verifier pass
# found it (pipeline.agreed_spans): the union of four decodings' times already holds the
# timing error the padding is for (docs/results.md §0an)
AGREED_PAD = 0.0
MAX_PAD = 2.0
MAX_MERGE_GAP = 5.0
MIN_SECONDS_PER_CHAR = 0.03  # fast speech is ~15 chars/s; below half that, distrust the times
GAP_REACH_BEFORE = 0.3  # seconds a span may grow back into the pause before it (see reach_gaps)
GAP_REACH_AFTER = 0.3  # ... and forward into the pause after it


@dataclass(frozen=True)
class Operator:
    """What is done to one label's spans: in the audio, in the text, and how much padding."""

    audio: str = "beep"
    text: str = "placeholder"
    pad_before: float = PAD_BEFORE
    pad_after: float = PAD_AFTER

    def __post_init__(self) -> None:
        if self.audio not in AUDIO_OPS:
            raise DeidError(f"audio operator must be one of {', '.join(AUDIO_OPS)}, not {self.audio!r}")
        if self.text not in TEXT_OPS:
            raise DeidError(f"text operator must be one of {', '.join(TEXT_OPS)}, not {self.text!r}")
        for name in ("pad_before", "pad_after"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0 <= v <= MAX_PAD:
                raise DeidError(f"{name} must be between 0 and {MAX_PAD:g} seconds, not {v!r}")

    def to_dict(self) -> dict:
        return {"audio": self.audio, "text": self.text, "pad_before": self.pad_before, "pad_after": self.pad_after}


@dataclass(frozen=True)
class RedactOptions:
    """The default operator, per-label overrides, the merge gap, and the key of the hash
    (and cross-call surrogate) operators. The key is never written anywhere."""

    default: Operator = field(default_factory=Operator)
    labels: tuple[tuple[str, Operator], ...] = ()  # (label, its operator), overriding the default
    merge_gap: float = MERGE_GAP
    key: bytes | None = field(default=None, repr=False)
    beep_hz: float = 1000.0
    fade: float = 0.005

    def __post_init__(self) -> None:
        bad = [label for label, _ in self.labels if label not in LABELS]
        if bad:
            raise DeidError(f"unknown label(s) {', '.join(bad)} in the operators; choose from {', '.join(LABELS)}")
        if not 0 <= self.merge_gap <= MAX_MERGE_GAP:
            raise DeidError(f"merge gap must be between 0 and {MAX_MERGE_GAP:g} seconds, not {self.merge_gap!r}")
        if self.key is None and "hash" in {op.text for op in (self.default, *(o for _, o in self.labels))}:
            raise DeidError(f"the hash operator needs a secret key: set {KEY_ENV} (at least 16 characters)")
        if self.key is not None and len(self.key) < 16:
            raise DeidError(f"{KEY_ENV} is too short: use at least 16 characters")

    @classmethod
    def uniform(cls, audio: str = "beep", pad: float = PAD_BEFORE, **kw) -> RedactOptions:
        """Every label alike: one audio operator and the same padding on both sides."""
        return cls(Operator(audio=audio, pad_before=pad, pad_after=pad), **kw)

    @classmethod
    def from_settings(cls, settings: dict, key: bytes | None = None) -> RedactOptions:
        """From a mapping shaped like ``redact.toml``: ``merge_gap``, ``[default]`` and
        ``[labels.LABEL]`` tables of operator fields (audio, text, pad_before, pad_after).
        A label's table overrides only the fields it names; the rest come from the default.
        Unknown keys are errors, not ignored."""
        from dataclasses import fields, replace

        known = {f.name for f in fields(Operator)}
        extra = set(settings) - {"merge_gap", "default", "labels"}
        if extra:
            raise DeidError(f"unknown setting(s) {', '.join(sorted(extra))}; expected merge_gap, [default], [labels.LABEL]")

        def operator(base: Operator, table, where: str) -> Operator:
            if not isinstance(table, dict):
                raise DeidError(f"{where} must be a table of {', '.join(sorted(known))}")
            bad = set(table) - known
            if bad:
                raise DeidError(f"unknown key(s) {', '.join(sorted(bad))} in {where}; expected {', '.join(sorted(known))}")
            return replace(base, **table)

        default = operator(Operator(), settings.get("default", {}), "[default]")
        labels = settings.get("labels", {})
        if not isinstance(labels, dict):
            raise DeidError("[labels] must hold one table per label, e.g. [labels.PERSON]")
        per = tuple((label, operator(default, table, f"[labels.{label}]")) for label, table in labels.items())
        gap = settings.get("merge_gap", MERGE_GAP)
        if not isinstance(gap, (int, float)) or isinstance(gap, bool):
            raise DeidError(f"merge_gap must be a number of seconds, not {gap!r}")
        return cls(default, per, float(gap), key)

    def operator(self, label: str) -> Operator:
        return dict(self.labels).get(label, self.default)

    def to_dict(self) -> dict:
        """For the report: every operator (the key is not in it)."""
        return {"default": self.default.to_dict(), "labels": {k: v.to_dict() for k, v in self.labels},
                "merge_gap": self.merge_gap, "keyed": self.key is not None}


def place_spans(spans: list[Span], transcript: Transcript) -> list[Span]:
    """Widen spans whose time is implausibly short for their text (:func:`_widen_short`),
    then let every span reach across the pauses to its neighbouring words
    (:func:`reach_gaps`)."""
    return reach_gaps(_widen_short(spans, transcript), transcript)


def reach_gaps(spans: list[Span], transcript: Transcript, before: float | None = None,
               after: float | None = None) -> list[Span]:
    """Extend each span's start back to the end of the word before it, by at most ``before``
    seconds (:data:`GAP_REACH_BEFORE`), and its end forward to the start of the word after
    it, by at most ``after`` (:data:`GAP_REACH_AFTER`). The defaults are read at call time.

    Whisper's word times start late on names and numbers (tiny.en put "Samantha" 0.24 s
    after its onset on synthetic speech), so the first syllable of an entity can escape a
    span plus the usual padding. The pause between two recognised words holds no other
    recognised speech, so beeping it costs little. Word ends are late too (dev utterances:
    a median +0.11 s, docs/results.md §0z), and reaching forward beeps the start of the next
    word, but no forward reach (with padding 0.25 / 0.1 s), chosen on the benchmark's dev
    part (``bench/pad_grid.py``: the same leak, 3.2 / 1.9 points less over-redaction), let
    more through on its test part (leak 3.6 -> 3.9 % on utterances, 6.9 -> 7.8 % on calls;
    docs/results.md §0aa), and neither did 0.25 / 0.15 s, chosen on the doubled dev part
    (leak 3.48 -> 3.62 % on the test utterances; §0ad), so the span still reaches forward.
    """
    before = GAP_REACH_BEFORE if before is None else before
    after = GAP_REACH_AFTER if after is None else after
    out = []
    for s in spans:
        ends = [w.end for w in transcript.words if w.end <= s.start]
        starts = [w.start for w in transcript.words if w.start >= s.end]
        start = max(max(ends, default=0.0), s.start - before)
        end = min(min(starts, default=s.end + after), s.end + after)
        out.append(Span(min(start, s.start), max(end, s.end), s.label, s.score, s.source, s.text))
    return out


# capitalised words a name span may hold that are not names (titles, sentence starts)
NOT_NAMES = frozenset("the and but this that you your yes yeah okay ok hello hi mrs miss mdm madam sir uncle auntie "
                      "aunty name call speaking thank thanks sorry please".split())


def repeat_mentions(spans: list[Span], transcript: Transcript) -> list[Span]:
    """Every other mention, in ``transcript``, of a value the detectors found: the same
    words (case and punctuation aside, at least 3 letters or digits in all), and for a name
    each of its capitalised words said alone, capitalised ("Jason Lim" ... "Mr Lim"). A
    value caught once ("ask for Qma ... Qma") is not let through where it is said again.
    A value of one everyday word (:func:`~deid_speech.spoken.common_word` or
    :data:`NOT_NAMES`: "One", "You're", which the trained NER sometimes takes for a name) is
    not looked for again: it is said all through a call (dev calls: its repeats beeped 0.5 %
    of the other speech); the span itself stays.
    Returns only mentions no span overlaps yet, labelled like the span they repeat."""
    keys = [clean_token(w.text) for w in transcript.words]
    out: list[Span] = []
    for s in spans:
        for part in s.text.split(" | "):
            words = [w for w in part.split() if clean_token(w)]
            targets = [words] + ([[w] for w in words if w[:1].isupper() and len(clean_token(w)) >= 3
                                  and clean_token(w) not in NOT_NAMES] if s.label == "PERSON" and len(words) > 1 else [])
            for target in targets:
                want = [clean_token(w) for w in target]
                n = len(want)
                if len("".join(want)) < 3 or (n == 1 and common_word(target[0], also=NOT_NAMES)):
                    continue
                for i in range(len(keys) - n + 1):
                    if keys[i:i + n] != want or (n == 1 and len(words) > 1 and not transcript.words[i].text[:1].isupper()):
                        continue
                    a, b = transcript.words[i].start, transcript.words[i + n - 1].end
                    if any(x.start < b and a < x.end for x in spans + out):
                        continue
                    out.append(Span(a, b, s.label, s.score, s.source + "+repeat",
                                    " ".join(w.text for w in transcript.words[i:i + n])))
    return out


def _needed(text: str) -> float:
    """The least time ``text`` takes to say (see MIN_SECONDS_PER_CHAR)."""
    return MIN_SECONDS_PER_CHAR * len(re.sub(r"\W", "", text))


def _widen_short(spans: list[Span], transcript: Transcript) -> list[Span]:
    """A span too short for its text has words Whisper mistimed. Its audio lies between the
    nearest words around it whose own timing is plausible: widen it to that stretch, within
    its ASR segment(s) (a whole segment can run 20 s, so it is the bound, not the target);
    a side with no such word takes the segment's edge, or, with no segment either, half
    the shortfall. A stretch still too short grows by the shortfall on both sides."""
    good = [w for w in transcript.words if w.end - w.start >= _needed(w.text)]
    out: list[Span] = []
    for s in spans:
        need = _needed(s.text)
        if s.duration >= need:
            out.append(s)
            continue
        mid = (s.start + s.end) / 2
        segs = [g for g in transcript.segments if g.start <= mid <= g.end] or \
               [g for g in transcript.segments if g.overlaps(s)]
        short = (need - s.duration) / 2
        lo = min((g.start for g in segs), default=max(0.0, s.start - short))
        hi = max((g.end for g in segs), default=s.end + short)
        start = max([lo] + [w.end for w in good if w.end <= s.start])
        end = min([hi] + [w.start for w in good if w.start >= s.end])
        start, end = min(start, s.start), max(end, s.end)
        if end - start < need:
            grow = (need - (end - start)) / 2
            start, end = max(0.0, start - grow), end + grow
        out.append(Span(start, end, s.label, s.score, s.source + "+widened", s.text))
    return out


def speech_level(x: np.ndarray, sr: int) -> float:
    """RMS of the active (speech) frames of a signal (a 2-D one mixed down): the loudest
    50% of 20 ms frames."""
    rms = frame_rms(x, sr, 0.02)
    if rms.size == 0:
        mono = np.asarray(x, dtype=np.float64)
        mono = mono.mean(axis=1) if mono.ndim == 2 else mono
        return float(np.sqrt(np.mean(mono ** 2))) if len(mono) else 0.0
    return level_from_frames(rms)


def level_from_frames(rms: np.ndarray) -> float:
    """The speech level from 20 ms frame RMS values: the RMS of the loudest half."""
    if rms.size == 0:
        return 0.0
    active = rms[rms >= np.median(rms)]
    return float(np.sqrt(np.mean(active.astype(np.float64) ** 2))) if active.size else 0.0


def padded(span: Span, options: RedactOptions) -> tuple[float, float]:
    """``span`` widened by its label's padding (no label: the default operator's); a span
    that every decoding found (source tag ``agreed``) by :data:`AGREED_PAD` of it."""
    from deid_speech.ner.base import AGREED

    op = options.operator(span.label)
    k = AGREED_PAD if AGREED in span.source.split("+") else 1.0
    return max(0.0, span.start - k * op.pad_before), span.end + k * op.pad_after


def redaction_regions(spans: list[Span], options: RedactOptions) -> list[tuple[float, float, Operator]]:
    """Each span widened by its label's padding (a span with no label, such as speech no
    word covered, takes the default operator), sorted by start; a region that ends less
    than ``merge_gap`` before the next begins is stretched to it, so the pause between two
    redactions is redacted too."""
    regions = sorted(((*padded(s, options), options.operator(s.label)) for s in spans), key=lambda r: (r[0], r[1]))
    out: list[tuple[float, float, Operator]] = []
    last = -1  # the region reaching furthest so far
    for a, b, op in regions:
        if last >= 0:
            la, lb, lop = out[last]
            if lb < a < lb + options.merge_gap:
                out[last] = (la, a, lop)
        out.append((a, b, op))
        if last < 0 or b > out[last][1]:
            last = len(out) - 1
    return out


def _band_noise(n: int, sr: int, rms: float) -> np.ndarray:
    """Noise in the speech band (300-3400 Hz) at the given RMS, from a fixed seed: it
    carries nothing of the audio it replaces."""
    from scipy.signal import butter, sosfilt

    x = np.random.default_rng(0).standard_normal(n)
    if sr > 8000:
        x = sosfilt(butter(4, [300, min(3400, 0.45 * sr)], btype="bandpass", fs=sr, output="sos"), x)
    return (x * (rms / max(float(np.sqrt(np.mean(x ** 2))), 1e-9))).astype(np.float32)


def region_fills(spans: list[Span], options: RedactOptions, sr: int, n: int, level: float):
    """``(a, b, fill)`` for every redaction region (sample indices, clipped to ``n``
    samples): ``fill`` is the mono replacement (a beep or noise at ``level`` with faded
    edges), or ``None`` for silence. Computed one region at a time."""
    for start, end, op in redaction_regions(spans, options):
        a = max(0, int(np.floor(start * sr)))
        b = min(n, int(np.ceil(end * sr)))
        if b <= a:
            continue
        if op.audio == "silence":
            yield a, b, None
            continue
        if op.audio == "noise":
            fill = _band_noise(b - a, sr, min(0.6, level))
        else:
            t = np.arange(a, b) / sr
            fill = (min(0.9, level * np.sqrt(2.0)) * np.sin(2 * np.pi * options.beep_hz * t)).astype(np.float32)
        k = min(int(options.fade * sr), (b - a) // 2)
        if k > 0:
            ramp = np.linspace(0.0, 1.0, k, dtype=np.float32)
            fill[:k] *= ramp
            fill[-k:] *= ramp[::-1]
        yield a, b, fill


def redact_audio(audio: Audio, spans: list[Span], options: RedactOptions = RedactOptions(),
                 in_place: bool = False, level: float | None = None) -> Audio:
    """Replace every span (plus its label's padding, gaps under ``merge_gap`` joined) in
    every channel by its label's audio operator: a beep or noise at speech level, or
    silence. The original under a region is overwritten, never mixed in.

    Length, rate and channel count are kept; the input array is not modified unless
    ``in_place`` (the caller owns it: a long call is not copied). ``level``: the speech
    level, if known (:func:`speech_level` of the samples otherwise).
    """
    sr = audio.sample_rate
    level = max(speech_level(audio.samples, sr) if level is None else level, 0.01)
    out = audio.samples if in_place else audio.samples.copy()
    for a, b, fill in region_fills(spans, options, sr, out.shape[0], level):
        out[a:b, :] = 0.0 if fill is None else fill[:, None]
    return Audio(out, sr, audio.format, audio.subtype)


def value_key(label: str, text: str) -> str:
    """A normal form of a mention, so two mentions of one value get one placeholder.

    Structured values compare by their symbols ("nine one two three" == "9123");
    names and dates by their lower-cased words.
    """
    if label in ("PERSON", "DATE"):
        return " ".join(clean_token(t) for t in text.split())
    if label == "EMAIL":
        t = text.lower().replace(" at ", "@").replace(" dot ", ".")
        return re.sub(r"\s+", "", t)
    runs = normalize_tokens(text.split())
    return "".join(r[2].text for r in runs) or text.lower()


def _covers(s: Span, w) -> bool:
    """A word belongs to a span when its midpoint, or most of it, lies inside the span."""
    if s.start <= (w.start + w.end) / 2 <= s.end:
        return True
    inside = min(w.end, s.end) - max(w.start, s.start)
    return w.end > w.start and inside >= 0.5 * (w.end - w.start)


class TextRedactor:
    """What each span's words become in the redacted transcript, by its label's text
    operator. One per call: placeholders are numbered per distinct value (in order of first
    mention) and surrogates stay the same for every mention, across all its channels."""

    def __init__(self, options: RedactOptions = RedactOptions()):
        self.options = options
        self._numbering: dict[tuple[str, str], int] = {}
        self._counts: dict[str, int] = {}
        self._surrogates = None

    def avoid(self, spans: list[Span]) -> None:
        """The real values of the call: no surrogate may be one of them."""
        if not any(self.options.operator(s.label).text == "surrogate" for s in spans):
            return
        if self._surrogates is None:
            from deid_speech.surrogates import Surrogates

            self._surrogates = Surrogates(key=self.options.key)
        for s in spans:
            if s.text:
                self._surrogates.avoid(s.label, s.text)

    def replacement(self, span: Span) -> str:
        op = self.options.operator(span.label).text
        value = value_key(span.label, span.text)
        if op == "mask":
            return re.sub(r"[^\W_]", "*", span.text) or "*"
        if op == "hash":
            digest = hmac.new(self.options.key, f"{span.label}\x00{value}".encode(), hashlib.sha256).hexdigest()
            return f"[{span.label}:{digest[:12]}]"
        if op == "surrogate":
            if self._surrogates is None:
                from deid_speech.surrogates import Surrogates

                self._surrogates = Surrogates(key=self.options.key)
            return self._surrogates.replace(span.label, span.text)
        key = (span.label, value)
        if key not in self._numbering:
            self._counts[span.label] = self._counts.get(span.label, 0) + 1
            self._numbering[key] = self._counts[span.label]
        return f"[{span.label}_{self._numbering[key]}]"


def redact_transcript(transcript: Transcript, spans: list[Span], text: TextRedactor | None = None) -> Transcript:
    """The transcript with each span's words replaced (:class:`TextRedactor`): a run of
    words under one span becomes one word (its times span the run), so neither the number
    nor the timing of the hidden words shows; a trailing punctuation mark of the run's
    last word is kept. Segment times are kept."""
    text = text or TextRedactor()
    ordered = sorted(spans)
    text.avoid(ordered)
    owner: list[int | None] = [None] * len(transcript.words)
    for k, s in enumerate(ordered):
        for i, w in enumerate(transcript.words):
            if owner[i] is None and _covers(s, w):
                owner[i] = k
    items: list[tuple[str, float, float]] = []
    run: tuple[int, str] | None = None  # (span, replacement) of the run the last word belongs to
    for i, w in enumerate(transcript.words):
        k = owner[i]
        if k is None:
            items.append((w.text, w.start, w.end))
            run = None
            continue
        trail = re.search(r"[.,!?;:]+$", w.text)
        trail = trail.group() if trail else ""
        rep = run[1] if run is not None and run[0] == k else text.replacement(ordered[k])
        if run is not None and run[1] == rep:
            items[-1] = (rep + trail, items[-1][1], w.end)
            continue
        run = (k, rep)
        items.append((rep + trail, w.start, w.end))
    return Transcript.from_words(items, segments=[Span(g.start, g.end) for g in transcript.segments])


def redact_text(transcript: Transcript, spans: list[Span], text: TextRedactor | None = None) -> str:
    """The redacted transcript's text (:func:`redact_transcript`)."""
    return redact_transcript(transcript, spans, text).text


def redacted_words(redacted: Transcript) -> list[dict]:
    """A redacted transcript's words for the report: text and times only (character
    offsets and probabilities dropped: they would tell the PII's length)."""
    return [{"text": w.text, "start": round(w.start, 3), "end": round(w.end, 3)} for w in redacted.words]
