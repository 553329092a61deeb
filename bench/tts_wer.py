"""Which voices are intelligible enough to train on: Whisper WER per voice and channel.

    .venv/bin/python bench/tts_wer.py [--n 8] [--asr-model tiny.en] [--voices default]
        [--out bench/results/tts_wer.json]

Voices the first ``--n`` dev seed sentences (fresh values, so every label is heard) with
every catalogue voice, through three channels (clean; telephone: 8 kHz mu-law; noise:
pink noise at 10 dB SNR), transcribes each with Whisper, and reports the word error
rate (deid_speech.eval.text.wer: lower case, punctuation dropped) per voice x channel,
plus how often pocketsphinx could align the words (``aligned``) and the entity-word
error rate (WER over the entity words only, the part that matters for redaction).
Numbers are compared as symbols: Whisper writes "98765432" for "nine double eight ...",
so both sides go through the project's spoken-form normaliser first
(:func:`deid_speech.eval.text.canonical_numbers`, part of the WER normalisation).
"""
from __future__ import annotations

import argparse
import json
import platform
import random
import time
from pathlib import Path

import numpy as np

from deid_speech import models as shipped

ROOT = Path(__file__).resolve().parents[1]
CHANNELS = {"clean": {}, "telephone": {"telephone": True}, "noise10": {"snr_db": 10.0, "noise": "pink"}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--asr-model", default="tiny.en")
    ap.add_argument("--voices", default="default")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "tts_wer.json")
    args = ap.parse_args()

    from deid_speech.asr.whisper import AsrOptions, Transcriber
    from deid_speech.augment.replace import fill_tags
    from deid_speech.augment.seed import load_split
    from deid_speech.eval.text import wer
    from deid_speech.tts.base import voice_tagged
    from deid_speech.tts.channel import AugmentSpec, normalize_loudness
    from deid_speech.tts.dataset import segment_words, synth_for
    from deid_speech.tts.voices import default_voices, split_voice_list
    from deid_speech.types import parse_tagged

    voices = default_voices() if args.voices == "default" else split_voice_list(args.voices)
    rng = random.Random(0)
    tagged = [fill_tags(r["tagged"], rng)[0] for r in load_split(shipped.path("seed") / "dev.jsonl")[:args.n]]
    asr = Transcriber(AsrOptions(model=args.asr_model))
    rows = []
    t_start = time.perf_counter()
    for voice in voices:
        synth = synth_for(voice)
        utts = [voice_tagged(t, synth, np.random.default_rng(k)) for k, t in enumerate(tagged)]
        aligned = sum(segment_words(u)[1] == "pocketsphinx" for u in utts)
        for channel, kw in CHANNELS.items():
            spec = AugmentSpec(**kw)
            refs, hyps, ent_refs, ent_hyps = [], [], [], []
            for u in utts:
                audio, _ = spec.apply(normalize_loudness(u.audio))
                tr = asr.transcribe(audio)
                refs.append(u.text)
                hyps.append(tr.text)
                _, ents = parse_tagged(u.tagged)
                for e, span in zip(ents, u.entities):  # entity words vs what Whisper wrote there
                    ent_refs.append(u.text[e.char_start:e.char_end])
                    ent_hyps.append(" ".join(w.text for w in tr.words
                                             if w.start < span.end and span.start < w.end))
            rows.append({"voice": voice, "channel": channel, "wer": round(wer(refs, hyps), 3),
                         "entity_wer": round(wer(ent_refs, ent_hyps), 3),
                         "aligned": f"{aligned}/{len(utts)}"})
            print(json.dumps(rows[-1]), flush=True)
    result = {"command": f"bench/tts_wer.py --n {args.n} --asr-model {args.asr_model}",
              "machine": f"{platform.machine()} {__import__('os').cpu_count()} cores",
              "sentences": len(tagged), "wall_s": round(time.perf_counter() - t_start, 1), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
