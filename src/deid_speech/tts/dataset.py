"""Voice a JSONL of tagged sentences into FLAC files plus a manifest with entity times.

:func:`voice_manifest` reads records with ``tagged`` (seed or augmentation JSONL), and
for each picks a voice and an :class:`~deid_speech.tts.channel.AugmentSpec` from
``(seed, record id)`` alone, voices it with :func:`~deid_speech.tts.base.voice_tagged`,
levels and augments it, writes ``out_dir/audio/<id>.flac`` (16 kHz mono PCM16) and
appends one line to ``out_dir/manifest.jsonl``. Lines follow input order, so the
manifest is byte-identical for any worker count. A rerun skips ids already in the
manifest (a line cut by an interruption is dropped first) and voices again those whose
FLAC is gone; it refuses an input whose tagged text for a voiced id changed, and
``tts_config.json`` guards against resuming with different settings.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from deid_speech import manifest
from deid_speech.audio import Audio, save, write_text_atomic
from deid_speech.errors import DeidError
from deid_speech.tts.base import TARGET_SR, Synthesizer, Utterance, voice_tagged
from deid_speech.tts.channel import POLICIES, AugmentSpec, normalize_loudness
from deid_speech.tts.voices import DEFAULT_HELD_OUT, canonical, parse_voice, voices_for_split
from deid_speech.types import Word, parse_tagged

MANIFEST = "manifest.jsonl"
CONFIG = "tts_config.json"
BAD_TAGS = "bad tagged text"  # how a record that no rerun can voice starts its 'failed' reason
_SYNTHS: dict[str, Synthesizer] = {}  # per process: voice name -> built synthesizer
_ALIGNER: list = []  # per process: the pocketsphinx aligner, built on first use

Job = tuple[str, str, tuple[str, ...], str, int, str]  # id, tagged, voices, augment, seed, out_dir


def synth_for(voice: str) -> Synthesizer:
    """The synthesizer for a canonical voice name, built once per process."""
    if voice not in _SYNTHS:
        _SYNTHS[voice] = parse_voice(voice).build()
    return _SYNTHS[voice]


def segment_words(utt: Utterance) -> tuple[list[Word], str]:
    """Per-word times for an utterance, and how they were found.

    Each speech segment (its times are exact by construction) is force-aligned on its
    own with pocketsphinx, so an error cannot spill across an entity boundary. A
    segment the aligner cannot place has its words spread over it in proportion to
    their length (``how`` then says ``pocketsphinx+proportional``). Character offsets
    point into ``utt.text``.
    """
    from deid_speech.align.base import project_words
    from deid_speech.align.sphinx import SphinxAligner

    if not _ALIGNER:
        _ALIGNER.append(SphinxAligner())
    out: list[Word] = []
    how = "pocketsphinx"
    pos = 0
    for seg in (p for p in utt.parts if p.source == "speech"):
        at = utt.text.find(seg.text, pos)
        at = pos if at < 0 else at
        pos = at + len(seg.text)
        a, b = int(round(seg.start * TARGET_SR)), int(round(seg.end * TARGET_SR))
        try:
            tr = _ALIGNER[0].align(utt.audio[a:b], seg.text)
        except DeidError:
            tr = project_words(seg.text, [], duration=seg.duration)
            how = "pocketsphinx+proportional"
        last = len(tr.words) - 1
        for i, w in enumerate(tr.words):  # the segment is trimmed speech: its edges are word edges
            out.append(Word(w.text, seg.start if i == 0 else seg.start + w.start,
                            seg.end if i == last else min(seg.end, seg.start + w.end),
                            at + w.char_start, at + w.char_end))
    return out, how


def level_speech(utt: Utterance, target_rms: float = 0.08, peak: float = 0.95) -> np.ndarray:
    """Scale an utterance so its speech has ``target_rms`` (voices differ in loudness)."""
    speech = np.concatenate([utt.audio[int(p.start * TARGET_SR):int(p.end * TARGET_SR)]
                             for p in utt.parts if p.source == "speech"])
    gain = target_rms / max(float(np.sqrt(np.mean(speech**2))), 1e-6)
    gain = min(gain, peak / max(float(np.abs(utt.audio).max()), 1e-6))
    return (utt.audio * gain).astype(np.float32)


def voice_call(turns: Sequence[tuple[str, str]], synths: dict[str, Synthesizer], rng: np.random.Generator,
               gap_range: tuple[float, float] = (0.1, 0.35), with_words: bool = False) -> tuple[np.ndarray, dict]:
    """Voice a multi-turn call: ``turns`` are (speaker, tagged text), ``synths`` a voice per
    speaker. Each turn is voiced with :func:`voice_tagged`, levelled, and joined to the
    next with a gap drawn from ``gap_range``. Returns 16 kHz audio and a truth dict: the
    joined ``text``/``tagged``, ``entities`` (label, start, end, text, char_start,
    char_end), ``turns`` (speaker, voice, start, end, text) and, ``with_words``, every
    word's time and offsets (:func:`segment_words`, per turn)."""
    tagged = " ".join(t for _, t in turns)
    text, ents = parse_tagged(tagged)
    chunks: list[np.ndarray] = []
    entities: list[dict] = []
    out_turns: list[dict] = []
    words: list[dict] = []
    pos = 0  # samples
    at = 0  # the turn's offset in the joined text
    for k, (speaker, turn_tagged) in enumerate(turns):
        if k:
            gap = np.zeros(int(round(rng.uniform(*gap_range) * TARGET_SR)), dtype=np.float32)
            chunks.append(gap)
            pos += len(gap)
        utt = voice_tagged(turn_tagged, synths[speaker], rng)
        off = pos / TARGET_SR
        at = text.index(utt.text, at)
        speech = [p for p in utt.parts if p.source == "speech"]
        out_turns.append({"speaker": speaker, "voice": synths[speaker].name,
                          "start": round(off + speech[0].start, 3),
                          "end": round(off + speech[-1].end, 3), "text": utt.text})
        for span in utt.entities:
            entities.append({"label": span.label, "start": round(off + span.start, 3),
                             "end": round(off + span.end, 3), "text": span.text})
        if with_words:
            words += [{"text": w.text, "start": round(off + w.start, 3), "end": round(off + w.end, 3),
                       "char_start": at + w.char_start, "char_end": at + w.char_end}
                      for w in segment_words(utt)[0]]
        chunks.append(level_speech(utt))
        pos += len(utt.audio)
        at += len(utt.text)
    if len(entities) != len(ents):
        raise RuntimeError("entity count mismatch between turns and the joined text")
    for d, e in zip(entities, ents):
        if text[e.char_start:e.char_end] != d["text"] or e.label != d["label"]:
            raise RuntimeError(f"entity offsets disagree: {d} vs {e}")
        d["char_start"], d["char_end"] = e.char_start, e.char_end
    audio = np.concatenate(chunks)
    truth = {"duration": round(len(audio) / TARGET_SR, 3), "sample_rate": TARGET_SR, "tagged": tagged,
             "text": text, "entities": entities, "turns": out_turns}
    if with_words:
        truth["words"] = words
    return audio, truth


def record_rngs(seed: int, rid: str) -> list[np.random.Generator]:
    """Three independent generators (voice pick, augmentation, pauses) for one record."""
    key = int.from_bytes(hashlib.sha1(rid.encode("utf-8")).digest()[:8], "big")
    return [np.random.default_rng(s) for s in np.random.SeedSequence([seed, key]).spawn(3)]


def voice_record(job: Job) -> dict:
    """Voice one record, write its FLAC, return its manifest record."""
    rid, tagged, voices, augment, seed, out_dir = job
    pick, aug, pauses = record_rngs(seed, rid)
    voice = voices[int(pick.integers(len(voices)))]
    spec = AugmentSpec.sample(aug, augment)
    utt = voice_tagged(tagged, synth_for(voice), pauses)
    words, how = segment_words(utt)
    audio, spans = spec.apply(normalize_loudness(utt.audio), [*utt.entities, *words])
    ents, words = spans[:len(utt.entities)], spans[len(utt.entities):]
    rel = f"audio/{rid}.flac"
    save(Audio(audio[:, None], TARGET_SR, "FLAC", "PCM_16"), Path(out_dir) / rel)
    return {
        "id": rid, "audio": rel, "duration": round(len(audio) / TARGET_SR, 3),
        "text": utt.text, "tagged": tagged,
        "entities": [{"label": c.label, "start": round(s.start, 3), "end": round(s.end, 3),
                      "char_start": c.char_start, "char_end": c.char_end}
                     for s, c in zip(ents, utt.entity_chars)],
        "words": [{k: v for k, v in w.to_dict().items() if k != "prob"} for w in words],
        "word_times": how, "voice": voice, "augment": spec.to_dict(),
    }


def _work(job: Job) -> tuple[dict | None, str | None]:
    try:
        return voice_record(job), None
    except (ValueError, RuntimeError, OSError, DeidError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _results(jobs: list[Job], workers: int) -> Iterator[tuple[dict | None, str | None]]:
    """Results in job order; ``workers`` > 1 runs in spawned processes."""
    if workers <= 1 or len(jobs) <= 1:
        yield from map(_work, jobs)
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        yield from pool.map(_work, jobs)


def read_records(path: Path, limit: int | None = None) -> list[dict]:
    """Input records with ``tagged`` and a file-safe, unique ``id`` (made from the text if absent)."""
    out, seen = [], set()
    for r in manifest.read(path, need=("tagged",), limit=limit, check_audio=False, line_ids=False,
                           nonempty=True):
        rid = r.id or "rec-" + hashlib.sha1(r.tagged.encode("utf-8")).hexdigest()[:12]
        if not manifest.SAFE_ID.match(rid) or rid in seen:
            raise DeidError(f"{r.where}: id {rid!r} is " + ("repeated" if rid in seen else
                            "not usable as a file name (letters, digits, . _ - only)"))
        seen.add(rid)
        out.append({"id": rid, "tagged": r.tagged})
    return out


def _check_config(out_dir: Path, config: dict) -> None:
    path = out_dir / CONFIG
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old != config:
            diff = ", ".join(k for k in config if old.get(k) != config[k])
            raise DeidError(f"{out_dir} was voiced with other settings ({diff}); use a new --out-dir")
    else:
        write_text_atomic(path, json.dumps(config, indent=2) + "\n")


def _resumable(out: Path, records: list[dict]) -> None:
    """Refuse records whose tagged text differs from what ``out`` voiced for their id; drop
    from the manifest the records whose FLAC is gone, so that they are voiced again."""
    old = {str(r.get("id")): r for r in manifest.read_resumable(out / MANIFEST)}
    if changed := [r["id"] for r in records if r["id"] in old and old[r["id"]].get("tagged") != r["tagged"]]:
        raise DeidError(f"{out}: the tagged text of {', '.join(changed[:3])}{' ...' * (len(changed) > 3)} "
                        "differs from what was voiced for that id; use a new --out-dir")
    if gone := [i for i, r in old.items() if not (out / str(r.get("audio", ""))).is_file()]:
        manifest.write(out / MANIFEST, [r for i, r in old.items() if i not in gone])


def voice_manifest(in_jsonl: str | Path, out_dir: str | Path, voices: Sequence[str] | None = None,
                   augment: str = "light", seed: int = 0, workers: int = 1,
                   held_out: Sequence[str] = DEFAULT_HELD_OUT, split: str = "train",
                   limit: int | None = None, progress: bool | None = None) -> dict:
    """Voice the first ``limit`` records of ``in_jsonl`` into ``out_dir``; return a summary.

    ``voices=None`` uses the default catalogue's voices allowed for ``split`` (see
    :func:`~deid_speech.tts.voices.voices_for_split`, which also raises when a
    held-out voice is asked to voice train). Every voice is built before any work, so
    an unknown voice or missing backend fails at once. ``progress=None`` shows a tqdm
    bar only when stderr is a TTY. Records that fail to voice are reported in
    ``failed`` and retried by the next run; those with bad tags (``BAD_TAGS``) need the
    input fixed first. An empty input is an error.
    """
    if augment not in POLICIES:
        raise DeidError(f"augment must be one of {', '.join(POLICIES)}, got {augment!r}")
    records = read_records(Path(in_jsonl), limit)
    pool = tuple(voices_for_split(voices, split, held_out))
    for v in pool:
        synth_for(v)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _check_config(out, {"seed": seed, "augment": augment, "split": split, "voices": list(pool),
                        "held_out": canonical(held_out)})
    _resumable(out, records)
    writer = manifest.JsonlWriter(out / MANIFEST)
    existing, done = list(writer.rows), writer.done
    failed: dict[str, str] = {}
    for r in records:
        try:
            parse_tagged(r["tagged"])
        except ValueError as exc:
            failed[r["id"]] = f"{BAD_TAGS} ({exc}): fix it in the input"
    jobs: list[Job] = [(r["id"], r["tagged"], pool, augment, seed, str(out))
                       for r in records if r["id"] not in done and r["id"] not in failed]
    from tqdm import tqdm

    show = sys.stderr.isatty() if progress is None else progress
    new: list[dict] = []
    t0 = time.perf_counter()
    with writer, tqdm(total=len(jobs), unit="utt", disable=not show, file=sys.stderr) as bar:
        for job, (rec, err) in zip(jobs, _results(jobs, workers)):
            if rec is None:
                failed[job[0]] = err or "unknown error"
            else:
                writer.write(rec)
                new.append(rec)
            bar.update(1)
    wall = time.perf_counter() - t0
    rows = existing + new
    new_s = sum(r["duration"] for r in new)
    return {"manifest": str(out / MANIFEST), "n": len(rows), "new": len(new),
            "skipped": len(records) - len(jobs) - len(failed), "failed": failed,
            "audio_s": round(sum(r["duration"] for r in rows), 2), "new_audio_s": round(new_s, 2),
            "wall_s": round(wall, 2), "audio_s_per_wall_s": round(new_s / wall, 2) if new else None,
            "per_voice": dict(sorted(Counter(r["voice"] for r in rows).items()))}
