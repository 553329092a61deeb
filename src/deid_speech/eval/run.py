"""Score systems on a voiced manifest: the paper's timestamp-overlap P/R/F1, audio leak
metrics, text metrics on the transcript (PRvL span scores, SPriV), WER and residual risk.

Reference entities carry times in the manifest (``deid-speech tts`` writes them); a
record without times gets them from an aligner (pocketsphinx by default) over its text.
Every system goes through the same Whisper transcript: the ASR runs once per file and
each detector set (``cascade``, ``presidio``, ``spacy``) reads that transcript, so the
comparison isolates detection. Saved ``redact`` outputs are scored the same way
(:func:`predictions_from_dir`).
"""
from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from deid_speech.errors import DeidError
from deid_speech.eval.leak import LeakCounts
from deid_speech.eval.overlap import OverlapScore
from deid_speech.eval.text import SPrivCounts, TextSpanScore, error_rate, residual_risk, risk_summary, spriv, word_errors
from deid_speech.redact import RedactOptions, padded, redaction_regions
from deid_speech.systems import RECOGNISER, VERIFIER, VERIFY_PASSES
from deid_speech.types import EntitySpan, Span, Transcript, Word


@dataclass
class Item:
    """One manifest record: audio, reference text, entities with times, reference words."""

    id: str
    audio: Path
    text: str
    entities: list[Span]
    entity_chars: list[EntitySpan]
    words: list[Word] = field(default_factory=list)
    duration: float | None = None  # seconds: the audio file's, or the record's where the file is not here


@dataclass
class Prediction:
    spans: list[Span]
    transcript: Transcript
    redacted_transcript: str
    options: RedactOptions = field(default_factory=RedactOptions)  # its padding and merge gap, as applied
    blanked: list[tuple[float, float]] = field(default_factory=list)  # beeped too: speech no word covered
    keypad: list[tuple[float, float]] = field(default_factory=list)  # beeped too: keypad tones (redact's, always)


TIME_TOLERANCE_S = 0.1  # a time this far past the end of the audio, or a duration this far off, is an error


def _audio_duration(path: Path, where: str) -> float | None:
    """The length of the audio file, from its header where it has one; None where the file is
    not here (saved outputs can be scored without it)."""
    from deid_speech.audio import AudioFile, load

    if not path.exists():
        return None
    try:
        f = AudioFile.open(path)
        return f.duration if f is not None else load(path).duration
    except DeidError as exc:
        raise DeidError(f"{where}: {exc}") from None


def _said_duration(d: dict, where) -> float | None:
    """The ``duration`` a record or a report states (None: it states none); a one-line
    DeidError where it is not a number of seconds."""
    said = d.get("duration")
    if said is not None and (isinstance(said, bool) or not isinstance(said, (int, float))):
        raise DeidError(f"{where}: 'duration' is not a number of seconds")
    return said


def _checked_duration(r, where: str) -> float | None:
    """The record's audio length (the file's, else its ``duration``), its ``duration`` checked
    against the file, and every entity and word time checked to lie within it."""
    real = _audio_duration(r.audio, where)
    said = _said_duration(r.raw, where)
    if said is not None and real is not None and abs(said - real) > TIME_TOLERANCE_S:
        raise DeidError(f"{where}: 'duration' {said:g} s, but {r.audio.name} is {real:.3f} s long")
    duration = real if real is not None else said
    if duration is not None:
        times = [(f"entity {e.label}", e.end) for e in r.entities if e.timed]
        times += [(f"word {w.get('text', '')!r}", w.get("end")) for w in r.words]
        for what, t in times:
            if isinstance(t, (int, float)) and t > duration + TIME_TOLERANCE_S:
                raise DeidError(f"{where}: {what} ends at {t:g} s, past the end of the audio ({duration:.3f} s)")
    return duration


def load_manifest(path: Path, aligner_name: str = "pocketsphinx", limit: int | None = None) -> list[Item]:
    """Items of a manifest; entities lacking times are timed by aligning the text. A record
    needs its ``entities`` (``[]``: none) or a ``tagged`` text they are read from; times must
    lie within its audio (see :func:`_checked_duration`)."""
    from deid_speech import manifest
    from deid_speech.audio import load

    path = Path(path)
    if not path.is_file():
        raise DeidError(f"{path}: no such manifest")
    aligner = None
    items = []
    for r in manifest.read(path, need=("text", "audio"), limit=limit, check_audio=False, line_ids=False):
        audio, text, ents = r.audio, r.text, r.entities
        manifest.check_entities(r)
        duration = _checked_duration(r, r.where)
        chars = [EntitySpan(e.char_start, e.char_end, e.label) for e in ents]
        try:
            words = [Word(w["text"], float(w["start"]), float(w["end"]), int(w.get("char_start", 0)),
                          int(w.get("char_end", 0))) for w in r.words if "start" in w]
        except (KeyError, TypeError, ValueError):
            raise DeidError(f"{r.where}: a word needs text, start and end") from None
        if all(e.timed for e in ents):
            spans = [Span(e.start, e.end, e.label) for e in ents]
        else:
            if aligner is None:
                from deid_speech.align.base import get_aligner

                aligner = get_aligner(aligner_name)
            try:
                tr = aligner.align(load(audio).mono16k(), text)
            except DeidError as exc:
                raise DeidError(f"{r.where}: {exc}") from None
            words = list(tr.words)
            spans = []
            for c in chars:
                t = tr.char_span_to_time(c.char_start, c.char_end)
                if t is None:
                    raise DeidError(f"{r.where}: entity {c} is not on any word of the text")
                spans.append(Span(t[0], t[1], c.label))
        items.append(Item(r.id or audio.stem, audio, text, spans, chars, words, duration))
    return items


def _chars_at(transcript: Transcript, span: Span, label: str) -> EntitySpan | None:
    """The transcript characters whose words overlap ``span`` in time."""
    ws = transcript.words_during(span.start, span.end)
    return EntitySpan(ws[0].char_start, ws[-1].char_end, label) if ws else None


def over_redaction_causes(truth: list[Span], pred: Prediction,
                          regions: list[tuple[float, float]]) -> list[tuple[str, list[tuple[float, float]]]]:
    """Why each redacted second was redacted, in the order :meth:`LeakCounts.add` assigns them:
    ``overshoot`` (inside a detected span that overlaps a true entity), ``padding`` (the padding
    of such a span), ``false alarm LABEL`` (a span, padding included, that overlaps no true
    entity), ``uncovered speech`` (speech no word covered, beeped), ``keypad tones`` (what the
    keypad-tone detector beeped), ``merge gap`` (a pause between two close regions, redacted
    with them)."""
    hits, pads, alarms = [], [], {}
    for s in pred.spans:
        if any(s.overlaps(t) for t in truth):
            hits.append((s.start, s.end))
            pads.append(padded(s, pred.options))
        else:
            alarms.setdefault(f"false alarm {s.label or 'unlabelled'}", []).append(padded(s, pred.options))
    blanks = _blank_spans(pred)  # with the default operator's padding, as in redact
    return [("overshoot", hits), ("padding", pads), *sorted(alarms.items()),
            ("uncovered speech", [padded(s, pred.options) for s in blanks if s.source == "uncovered"]),
            ("keypad tones", [padded(s, pred.options) for s in blanks if s.source == "keypad"]),
            ("merge gap", regions)]


def _blank_spans(pred: Prediction) -> list[Span]:
    return ([Span(a, b, source="uncovered") for a, b in pred.blanked if b > a]
            + [Span(a, b, source="keypad") for a, b in pred.keypad if b > a])


@dataclass
class SystemScore:
    """Everything measured for one system over the corpus."""

    agnostic: OverlapScore = field(default_factory=OverlapScore)
    exact: OverlapScore = field(default_factory=OverlapScore)
    leak: LeakCounts = field(default_factory=LeakCounts)
    text: TextSpanScore = field(default_factory=TextSpanScore)
    spriv: SPrivCounts = field(default_factory=SPrivCounts)
    word_errors: int = 0  # summed over files (corpus WER = word_errors / ref_words)
    ref_words: int = 0
    risks: list[int] = field(default_factory=list)
    per_file: list[dict] = field(default_factory=list)

    def add(self, item: Item, pred: Prediction, duration: float) -> None:
        self.agnostic.add(item.entities, pred.spans)
        self.exact.add(item.entities, pred.spans, label_exact=True)
        # what redact beeps: the spans and the speech no word covered, padded and merged alike
        regions = [(a, min(duration, b)) for a, b, _ in redaction_regions(pred.spans + _blank_spans(pred), pred.options)]
        speech = [(w.start, w.end) for w in (item.words or pred.transcript.words)]
        file_leak = self.leak.add(item.entities, regions, speech,
                                  causes=over_redaction_causes(item.entities, pred, regions))
        tr = pred.transcript
        truth = [c for c in (_chars_at(tr, s, s.label) for s in item.entities) if c]
        found = [c for c in (_chars_at(tr, s, s.label) for s in pred.spans) if c]
        self.text.add(truth, found)
        self.spriv += spriv(tr.text, truth, pred.redacted_transcript)
        risk = residual_risk(file_leak.fractions)
        self.risks.append(risk)
        errors, n_ref = word_errors(item.text, tr.text)
        self.word_errors += errors
        self.ref_words += n_ref
        self.per_file.append({"id": item.id, "n_true": len(item.entities), "n_pred": len(pred.spans),
                              "leaked_s": round(file_leak.leaked_s, 3), "residual_risk": risk,
                              "ref_words": n_ref, "word_errors": errors})

    def as_dict(self) -> dict:
        return {"timestamp_overlap": self.agnostic.as_dict(), "timestamp_overlap_label_exact": self.exact.as_dict(),
                "audio_leak": self.leak.as_dict(), "text_spans": self.text.as_dict(),
                "spriv": self.spriv.as_dict(), "wer": round(error_rate(self.word_errors, self.ref_words), 4),
                "residual_risk": risk_summary(self.risks).as_dict()}


def system_predictions(names: list[str], items: list[Item], asr_model: str = RECOGNISER, asr=None,
                       options: RedactOptions = RedactOptions(), ner_model: str | None = "default",
                       e2e_model: str | None = None,
                       e2e=None, verifier: str = VERIFIER, verifier_asr=None, uncovered: str = "beep",
                       verify_passes: int = VERIFY_PASSES) -> Iterator[tuple[Item, float, dict[str, Prediction]]]:
    """Transcribe each item once, run every system's detectors on the transcript
    (``ner_model``: the cascade's trained NER, as ``redact --ner-model`` takes it: by default
    the shipped one, as ``redact`` and ``eval`` run it; None: the cascade without one). Systems ``e2e`` and
    ``e2e+patterns`` are their own ASR: one end-to-end model (``e2e_model``, default the
    shipped one; or a ready ``e2e`` tagger) writes one tagged transcript of each item, which
    ``e2e+patterns`` also runs the pattern detectors over. ``cascade+verify``'s second decoder
    is the e2e model, or the Whisper model ``verifier`` (``verifier_asr``: a ready one),
    decoding the audio ``verify_passes`` times as redact does.
    ``uncovered="beep"`` (``redact``'s default): speech that no word of a system's transcript
    covers is beeped too (:attr:`Prediction.blanked`), as ``redact`` beeps it; ``"warn"``:
    the spans alone."""
    from deid_speech import systems
    from deid_speech.asr.whisper import speech_regions
    from deid_speech.audio import for_recognition, load
    from deid_speech.dtmf import keypad_tones
    from deid_speech.pipeline import UNCOVERED_ACTIONS, RedactConfig, Redactor, unchecked_speech
    from deid_speech.redact import redact_text

    if uncovered not in ("beep", "warn"):
        raise DeidError(f"uncovered must be beep or warn in an evaluation (redact knows {', '.join(UNCOVERED_ACTIONS)})")
    redactors = {}
    verifying = None  # cascade+verify: the cascade's spans, then the e2e model's second opinion
    for s in names:  # one ASR model, shared by the transcript-reading systems; one e2e tagger
        spec = systems.get(s)
        if spec.verify:
            verifying = Redactor(RedactConfig(asr_model=asr_model, ner_model=ner_model, e2e_model=e2e_model,
                                              redact=options, verify=True, verifier=verifier,
                                              verify_passes=verify_passes), asr=asr,
                                 verifier=e2e if verifier == "e2e" else verifier_asr)
            asr = verifying.asr
            if verifier == "e2e":
                e2e = verifying.verifier
            continue
        if spec.recognizer == "e2e":
            redactors[s] = Redactor(RedactConfig(system=s, e2e_model=e2e_model, redact=options), asr=e2e)
            e2e = redactors[s].asr
            continue
        cfg = RedactConfig(system=s, asr_model=asr_model, min_score=spec.min_score, redact=options,
                           ner_model=ner_model if s == "cascade" else None, verify=False)  # cascade: alone
        redactors[s] = Redactor(cfg, asr=asr)
        asr = redactors[s].asr
    tagging = {s for s, r in redactors.items() if r.system.recognizer == "e2e"}
    shared = next((r for s, r in redactors.items() if s not in tagging), verifying)
    tagger = e2e if tagging else None  # a tagger handed in but unused: idle
    for item in items:
        try:
            audio = load(item.audio)
        except DeidError as exc:
            raise DeidError(f"{item.id}: {exc}") from None
        mono = for_recognition(audio.mono16k())  # as redact hears it
        heard = verifying.listen(mono) if verifying is not None else None  # a helper starts now, as in redact
        tr = shared.asr.recognize(mono).transcript if shared is not None else None
        tagged = tagger.recognize(mono) if tagger is not None else None
        # what redact beeps because no word of the transcript covers it (one VAD pass for both)
        regions = speech_regions(mono) if uncovered == "beep" else None
        blank_tr = unchecked_speech(mono, tr.words, regions) if regions is not None and tr is not None else []
        blank_tag = (unchecked_speech(mono, tagged.transcript.words, regions)
                     if regions is not None and tagged is not None else [])
        keypad = keypad_tones(mono)  # beeped by every system, as in redact
        out = {}
        for name, r in redactors.items():
            t, spans = (tagged.transcript, r.detect(tagged.transcript, tagged.spans)) if name in tagging else (
                tr, r.detect(tr))
            out[name] = Prediction(spans, t, redact_text(t, spans), options, blank_tag if name in tagging else blank_tr,
                                   keypad)
        if verifying is not None:
            first = out["cascade"].spans if "cascade" in out else verifying.detect(tr)
            spans = sorted(verifying.verify(mono, first, heard, tr).applied(first))
            out["cascade+verify"] = Prediction(spans, tr, redact_text(tr, spans), options, blank_tr, keypad)
        yield item, audio.duration, out


def predictions_from_dir(folder: Path, items: list[Item]) -> Iterator[tuple[Item, float, dict[str, Prediction]]]:
    """Saved ``redact`` outputs (``<stem>.redacted.json``, and ``<stem>.pii.json`` where
    written), matched to items by audio stem. Times need only the redacted report; the text
    metrics (WER, SPriV) read the clear transcript from the ``.pii.json``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DeidError(f"{folder}: no such folder of redact outputs")
    found = {p.name[: -len(".redacted.json")]: p for p in folder.rglob("*.redacted.json")}
    missing = [it.id for it in items if it.audio.stem not in found]
    if missing:
        raise DeidError(f"{folder}: no redact output for {len(missing)} manifest record(s), e.g. "
                        f"{missing[0]}.redacted.json; score a manifest subset or redact them first")
    for item in items:
        path = found[item.audio.stem]
        d = _report(path)
        duration = _saved_duration(d, item, path)
        pii = path.with_name(path.name[: -len(".redacted.json")] + ".pii.json")
        try:
            if pii.is_file():  # the clear report (--unredacted-report): text metrics on the real transcript
                clear = _report(pii)
                tr = Transcript.from_dict({"text": clear["transcript"], "words": clear["words"]})
                spans = _saved_spans(clear, duration, pii)
            else:  # the shared report only: the redacted words stand in for the transcript
                tr = Transcript.from_words((w["text"], w["start"], w["end"]) for w in d.get("words", []))
                spans = _saved_spans(d, duration, path)
            blanked = [(float(a), float(b)) for a, b in d.get("uncovered_speech", [])] \
                if d.get("uncovered_action") == "beep" else []
            keypad = [(float(a), float(b)) for a, b in d.get("keypad_tones", [])]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DeidError(f"{pii if pii.is_file() else path}: not a redact report ({type(exc).__name__}: {exc})") from None
        pred = Prediction(spans, tr, d.get("redacted_transcript", ""), _saved_options(d, path), blanked, keypad)
        yield item, duration, {str(d.get("system", "saved")): pred}


def _report(path: Path) -> dict:
    """A saved report's JSON object (a one-line error naming the file otherwise)."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DeidError(f"{path}: not a redact report ({exc})") from None
    if not isinstance(d, dict):
        raise DeidError(f"{path}: not a redact report (not a JSON object)")
    return d


def _saved_duration(d: dict, item: Item, path: Path) -> float:
    """The report's audio length, which must be the manifest record's: a report of another
    recording (its ``file`` another name, its ``duration`` another length) is an error."""
    file = d.get("file")
    if file is not None and Path(str(file)).stem != item.audio.stem:
        raise DeidError(f"{path}: a report of {file}, not of {item.audio.name} (manifest record {item.id})")
    said = _said_duration(d, path)
    if said is not None and item.duration is not None and abs(said - item.duration) > TIME_TOLERANCE_S:
        raise DeidError(f"{path}: a report of {said:g} s of audio, but {item.audio.name} (manifest record "
                        f"{item.id}) is {item.duration:.3f} s: a report of another recording?")
    duration = said if said is not None else item.duration
    if duration is None:
        raise DeidError(f"{path}: no 'duration', and the manifest's audio {item.audio} is not here to measure")
    return float(duration)


def _saved_spans(d: dict, duration: float, path: Path) -> list[Span]:
    """A report's spans: labelled, in order, within the audio."""
    from deid_speech.types import LABELS

    if not isinstance(d.get("spans"), list):
        raise DeidError(f"{path}: not a redact report (no 'spans' list)")
    spans = [Span.from_dict(s) for s in d["spans"]]
    for s in spans:
        if s.label not in LABELS:
            raise DeidError(f"{path}: span {s.start:g}-{s.end:g} s has an unknown label {s.label!r} "
                            f"(known: {', '.join(LABELS)})")
        if not 0 <= s.start <= s.end or s.end > duration + TIME_TOLERANCE_S:
            raise DeidError(f"{path}: span {s.label} {s.start:g}-{s.end:g} s is not within the "
                            f"{duration:.3f} s of audio")
    return spans


def _saved_options(d: dict, path: Path) -> RedactOptions:
    """The padding and merge gap a saved report was redacted with (schema 3: its
    operators; earlier: one symmetric padding). Text operators do not matter here."""
    ops = d.get("operators")
    if ops is None:
        return RedactOptions.uniform(pad=float(d.get("padding", 0.0)), merge_gap=0.0)
    try:
        def times(table: dict) -> dict:
            return {k: v for k, v in table.items() if k in ("audio", "pad_before", "pad_after")}

        return RedactOptions.from_settings({"default": times(ops["default"]), "merge_gap": ops["merge_gap"],
                                            "labels": {k: times(v) for k, v in ops.get("labels", {}).items()}})
    except (KeyError, TypeError, AttributeError, DeidError) as e:
        raise DeidError(f"{path}: unreadable operators in the report ({e})") from None


def evaluate(items: list[Item], predictions: Iterator[tuple[Item, float, dict[str, Prediction]]],
             progress: Callable[[int], None] | None = None) -> dict:
    """Accumulate every system's scores over ``predictions``; return the results dict."""
    scores: dict[str, SystemScore] = defaultdict(SystemScore)
    t0 = time.perf_counter()
    audio_s = 0.0
    for k, (item, duration, preds) in enumerate(predictions, 1):
        audio_s += duration
        for name, pred in preds.items():
            scores[name].add(item, pred, duration)
        if progress:
            progress(k)
    return {"n_files": len(items), "audio_s": round(audio_s, 2), "wall_s": round(time.perf_counter() - t0, 1),
            "n_entities": sum(len(i.entities) for i in items),
            "systems": {name: s.as_dict() for name, s in scores.items()},
            "per_file": {name: s.per_file for name, s in scores.items()}}

