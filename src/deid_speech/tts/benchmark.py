"""The unseen-voice benchmark: new hand-written sentences and calls, voiced only by voices
and settings that no training, dev or test data uses, about half through a noisy phone line.

    python -m deid_speech.tts.benchmark --out out/benchmark            # every part
    deid-speech eval --manifest out/benchmark/test/utterances/manifest.jsonl --system cascade ...

Sources, in the repo (``data/benchmark/``; see its README):

* ``utterances/{dev,test,test2,test3}.txt``: one tagged sentence a line (``#`` comments);
* ``calls/{dev,test,test2,test3}/*.txt``: one turn a line, ``A: ...`` (agent) or ``B: ...`` (caller).

Output per part (``dev`` to tune on, ``test`` to quote, ``test2`` a second test part written in
session 43 after ``test`` had been scored many times, ``test3`` a third written in session 56 after
``test2`` had been; their voices differ, see
:data:`~deid_speech.tts.voices.BENCHMARK_VOICES`): ``OUT/<part>/utterances/`` and
``OUT/<part>/calls/``, each a ``manifest.jsonl`` with exact entity times and per-word
reference times, plus ``manifest-clean.jsonl`` / ``manifest-telephone.jsonl`` (the same
records split by channel). ``dev-fast`` (:data:`CALLS_AGAIN`) has calls only: dev's, voiced
again. Utterances go through :func:`~deid_speech.tts.dataset.voice_manifest` (resumable); each
call gets two different voices of its part and one channel for the whole call. The output is a
pure function of the sources and ``--seed``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from deid_speech.audio import Audio, save, write_text_atomic
from deid_speech.errors import DeidError
from deid_speech.manifest import JsonlWriter, read_resumable
from deid_speech.tts.base import TARGET_SR
from deid_speech.tts.channel import AugmentSpec, normalize_loudness
from deid_speech.tts.dataset import MANIFEST, synth_for, voice_call, voice_manifest
from deid_speech.tts.voices import voices_for_split
from deid_speech.types import parse_tagged

PARTS = ("dev", "test", "test2", "test3", "dev-fast")
# parts that voice another part's calls again, with voices of their own, every call on the noisy
# phone line, and no utterances: dev-fast (session 44), dev's speakers faster, where test2's
# telephone calls leaked (its faster KED voice) and dev's calls did not (docs/results.md §0aq)
CALLS_AGAIN = {"dev-fast": "dev"}


def _source() -> Path:
    from deid_speech import models

    return models.path("benchmark")


SOURCE = _source()
SPEAKERS = {"A": "agent", "B": "caller"}


def read_utterances(path: Path) -> list[str]:
    """Tagged lines of an utterance file (every line parsed; ``#`` lines skipped)."""
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            parse_tagged(line)
        except ValueError as exc:
            raise DeidError(f"{path}:{i}: {exc}") from None
        out.append(line)
    return out


def read_call(path: Path) -> list[tuple[str, str]]:
    """(speaker, tagged text) turns of a call file."""
    turns = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        who, sep, text = line.partition(":")
        if not sep or who.strip() not in SPEAKERS:
            raise DeidError(f"{path}:{i}: a turn starts with 'A:' (agent) or 'B:' (caller)")
        try:
            parse_tagged(text.strip())
        except ValueError as exc:
            raise DeidError(f"{path}:{i}: {exc}") from None
        turns.append((SPEAKERS[who.strip()], text.strip()))
    if not turns:
        raise DeidError(f"{path}: no turns")
    return turns


def _rng(seed: int, key: str) -> np.random.Generator:
    return np.random.default_rng([seed, int.from_bytes(hashlib.sha1(key.encode()).digest()[:8], "big")])


def split_by_channel(folder: Path) -> dict[str, int]:
    """Write ``manifest-clean.jsonl`` and ``manifest-telephone.jsonl`` beside the manifest."""
    rows = read_resumable(folder / MANIFEST)
    counts = {}
    for name, tel in (("clean", False), ("telephone", True)):
        part = [r for r in rows if bool(r["augment"]["telephone"]) == tel]
        write_text_atomic(folder / f"manifest-{name}.jsonl",
                          "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part))
        counts[name] = len(part)
    return counts


def build_utterances(part: str, out: Path, seed: int, workers: int, source: Path = SOURCE) -> dict:
    lines = read_utterances(source / "utterances" / f"{part}.txt")
    out.mkdir(parents=True, exist_ok=True)
    records = out / "input.jsonl"
    write_text_atomic(records, "".join(json.dumps({"id": f"u-{part}-{i:03d}", "tagged": t}, ensure_ascii=False) + "\n"
                                       for i, t in enumerate(lines, 1)))
    summary = voice_manifest(records, out, augment="benchmark", seed=seed, workers=workers,
                             split=f"benchmark-{part}")
    if summary["failed"]:
        raise DeidError(f"{part} utterances: {len(summary['failed'])} failed to voice, e.g. "
                        + next(iter(summary["failed"].values())))
    return {**summary, "by_channel": split_by_channel(out)}


def build_calls(part: str, out: Path, seed: int, source: Path = SOURCE) -> dict:
    texts = CALLS_AGAIN.get(part, part)
    files = sorted((source / "calls" / texts).glob("*.txt"))
    if not files:
        raise DeidError(f"{source / 'calls' / texts}: no call files")
    voices = voices_for_split(None, f"benchmark-{part}")
    out.mkdir(parents=True, exist_ok=True)
    writer = JsonlWriter(out / MANIFEST)
    done = writer.done
    with writer:
        for k, path in enumerate(files):
            cid = f"c-{part}-{path.stem}"
            if cid in done:
                continue
            rng = _rng(seed, cid)
            agent, caller = rng.choice(len(voices), size=2, replace=False)
            synths = {"agent": synth_for(voices[agent]), "caller": synth_for(voices[caller])}
            audio, truth = voice_call(read_call(path), synths, rng, with_words=True)
            # one channel for the whole call: every other call on the phone line, with noise
            gain = round(float(rng.uniform(-6, 3)), 1)
            spec = AugmentSpec.phone_call(rng, gain) if k % 2 or part in CALLS_AGAIN else AugmentSpec(gain_db=gain)
            audio, _ = spec.apply(normalize_loudness(audio))  # no speed change: times stay
            rel = f"audio/{cid}.flac"
            save(Audio(audio[:, None], TARGET_SR, "FLAC", "PCM_16"), out / rel)
            rec = {"id": cid, "audio": rel, **truth, "voices": [voices[agent], voices[caller]],
                   "augment": spec.to_dict(), "source": f"calls/{texts}/{path.name}"}
            writer.write(rec)
    rows = read_resumable(out / MANIFEST)
    return {"manifest": str(out / MANIFEST), "n": len(rows), "audio_s": round(sum(r["duration"] for r in rows), 1),
            "by_channel": split_by_channel(out)}


def build(out_dir: Path, parts: tuple[str, ...] = PARTS, seed: int = 0, workers: int = 1,
          source: Path = SOURCE) -> dict:
    """Voice the benchmark's parts into ``out_dir``; return a summary per part."""
    return {part: {**({} if part in CALLS_AGAIN else
                      {"utterances": build_utterances(part, out_dir / part / "utterances", seed, workers, source)}),
                   "calls": build_calls(part, out_dir / part / "calls", seed, source)} for part in parts}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("out/benchmark"))
    ap.add_argument("--parts", default=",".join(PARTS), help=f"{','.join(PARTS)} (default all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args(argv)
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    try:
        if not parts or any(p not in PARTS for p in parts):
            raise DeidError(f"--parts takes {', '.join(PARTS)}")
        summary = build(args.out, parts, args.seed, args.workers)
    except DeidError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
