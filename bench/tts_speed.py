"""Voicing speed: seconds of audio per wall second, per voice, on dev seed sentences.

    .venv/bin/python bench/tts_speed.py [--n 10] [--voices piper:joe,flite:rms,...]
        [--out bench/results/tts_speed.json]

Times :func:`voice_tagged` (synthesis of every segment, resampling, trimming) on the
first ``--n`` sentences of data/seed/dev.jsonl, one process, after building the voice
(load time reported apart), and the "full" channel augmentation on the same audio.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from deid_speech import models as shipped

ROOT = Path(__file__).resolve().parents[1]
VOICES = "piper:joe,flite:rms,flite:slt,espeak:en-us+m3@s150"


def bench_voice(name: str, tagged: list[str]) -> dict:
    """Build ``name`` and voice every sentence; return timings."""
    from deid_speech.tts.base import voice_tagged
    from deid_speech.tts.channel import AugmentSpec
    from deid_speech.tts.voices import parse_voice

    t0 = time.perf_counter()
    synth = parse_voice(name).build()
    load = time.perf_counter() - t0
    audio_s = wall = aug_wall = 0.0
    for k, t in enumerate(tagged):
        t0 = time.perf_counter()
        utt = voice_tagged(t, synth, np.random.default_rng(k))
        wall += time.perf_counter() - t0
        audio_s += utt.duration
        spec = AugmentSpec.sample(np.random.default_rng(k), "full")
        t0 = time.perf_counter()
        spec.apply(utt.audio, utt.entities)
        aug_wall += time.perf_counter() - t0
    return {"voice": name, "load_s": round(load, 2), "sentences": len(tagged),
            "audio_s": round(audio_s, 2), "wall_s": round(wall, 2),
            "audio_s_per_wall_s": round(audio_s / wall, 1),
            "augment_full_audio_s_per_wall_s": round(audio_s / aug_wall, 1)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--voices", default=VOICES)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/tts_speed.json")
    args = ap.parse_args()

    from deid_speech.augment.seed import load_split
    from deid_speech.tts.voices import split_voice_list

    tagged = [r["tagged"] for r in load_split(shipped.path("seed") / "dev.jsonl")[:args.n]]
    rows = [bench_voice(v, tagged) for v in split_voice_list(args.voices)]
    results = {"input": f"data/seed/dev.jsonl[:{len(tagged)}]", "cpus": os.cpu_count(),
               "load_avg_1m": round(os.getloadavg()[0], 2), "python": platform.python_version(),
               "voices": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for r in rows:
        print(f"{r['voice']:<28} {r['audio_s']:6.1f} s audio in {r['wall_s']:5.2f} s "
              f"= {r['audio_s_per_wall_s']:5.1f} x real time (load {r['load_s']} s; "
              f"full augmentation {r['augment_full_audio_s_per_wall_s']} x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
