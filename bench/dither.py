"""The spread of a score: the same code on the same data, decoded again from audio that an
inaudible dither (Gaussian, amplitude 1e-4, about -60 dB under the speech) has changed.

Whisper's decoding of noisy telephone audio is chaotic: such a change decides which windows
loop and which fall back, and with them the transcripts and the redaction. One score is
one draw; this script gives several, and their mean and standard deviation, for
``cascade`` and ``cascade+verify`` (both decoders read the dithered audio), and of the
recogniser's WER where the manifest has reference words. Draw 0 is the
audio itself (no dither), so it equals ``deid-speech eval`` with the same options.

    .venv/bin/python bench/dither.py --manifest out/benchmark/dev/calls/manifest.jsonl \\
        [--draws 4] [--asr-model MODEL] [--verifier MODEL] \\
        [--asr-option KEY=VALUE ...] [--verifier-option KEY=VALUE ...] \\
        [--ner-model DIR] [--asr-cache out/asr-cache.jsonl] [--out bench/results/dither-dev-calls.json]

Transcripts go to ``--asr-cache`` (keyed by the dithered audio), so a run that is stopped
resumes where it stopped, and a second variant of the verifier re-decodes only the verifier.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import report  # noqa: E402
from deid_speech.audio import DITHER, dither  # noqa: E402


class Dithered:
    """A recogniser that hears ``audio`` plus draw ``draw``'s dither (none for draw 0)."""

    def __init__(self, inner, draw: int):
        self.inner, self.draw = inner, draw

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def transcribe(self, audio: np.ndarray, progress=None):
        if self.draw:
            audio = dither(audio, self.draw + len(audio))
        return self.inner.transcribe(audio, progress)

    def recognize(self, audio: np.ndarray, progress=None):
        from deid_speech.types import Recognition

        return Recognition(self.transcribe(audio, progress))


def main(argv: list[str] | None = None) -> dict:
    from deid_speech.asr.whisper import AsrOptions, transcriber
    from deid_speech.cli import parse_passes
    from deid_speech.eval.cli import asr_overrides
    from deid_speech.eval.run import evaluate, load_manifest, system_predictions
    from deid_speech.pipeline import ByPass, turns, verifier_transcriber
    from deid_speech.systems import RECOGNISER, VERIFIER, VERIFY_PASSES

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--manifest", type=Path, required=True)
    p.add_argument("--draws", type=int, default=4, help="draw 0 (the audio itself) and draws-1 dithered ones")
    p.add_argument("--asr-model", default=RECOGNISER, help=f"the recogniser (default: {RECOGNISER})")
    p.add_argument("--verifier", default=VERIFIER, help=f"the second opinion's model (default: {VERIFIER})")
    p.add_argument("--asr-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--verifier-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--verify-passes", type=parse_passes, default=VERIFY_PASSES,
                   help=f"how often the verifier decodes each file, as redact --verify-passes (default {VERIFY_PASSES})")
    p.add_argument("--uncovered", choices=("beep", "warn"), default="beep",
                   help="speech no word covers: beeped as redact does (beep), or not (warn)")
    p.add_argument("--ner-model", default="default",
                   help="the cascade's trained NER, as redact --ner-model (default: the shipped one)")
    p.add_argument("--asr-cache", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.draws < 1:
        p.error("--draws must be at least 1")
    first_extra = asr_overrides(args.asr_option)
    second_extra = asr_overrides(args.verifier_option, "--verifier-option")
    first_opts = AsrOptions(model=args.asr_model, **first_extra)
    first = transcriber(first_opts, args.asr_cache)
    seconds = turns(verifier_transcriber(args.verifier, args.asr_cache, **second_extra))  # "A,B": turns by pass
    items = load_manifest(args.manifest)
    draws = []
    for d in range(args.draws):
        r = evaluate(items, system_predictions(["cascade", "cascade+verify"], items, asr=Dithered(first, d),
                                               ner_model=args.ner_model,
                                               verifier_asr=ByPass([Dithered(t, d) for t in seconds]),
                                               uncovered=args.uncovered, verify_passes=args.verify_passes))
        row = {s: {"leak": round(100 * v["audio_leak"]["leaked_duration"], 2),
                   "over_redaction": round(100 * v["audio_leak"]["over_redaction"], 2),
                   "recall": round(v["timestamp_overlap"]["overall"]["recall"], 3),
                   **({"wer": round(100 * v["wer"], 2)} if v.get("wer") is not None else {})}
               for s, v in r["systems"].items()}
        draws.append(row)
        print(f"draw {d}: " + ", ".join(f"{s} leak {v['leak']} over {v['over_redaction']}" for s, v in row.items()),
              flush=True)
    summary = {}
    for s in draws[0]:
        summary[s] = {}
        for k in ("leak", "over_redaction", "recall", "wer"):
            xs = [row[s][k] for row in draws if k in row[s]]
            if not xs:
                continue
            summary[s][k] = {"mean": round(statistics.mean(xs), 3),
                             "sd": round(statistics.stdev(xs), 3) if len(xs) > 1 else 0.0, "draws": xs}
    result = {"manifest": str(args.manifest), "draws": args.draws, "amplitude": DITHER,
              "verify_passes": args.verify_passes,
              "asr_model": first_opts.model, "verifier": args.verifier,
              "ner_model": args.ner_model, "asr_options": first_extra, "verifier_options": second_extra,
              "uncovered": args.uncovered,
              "command": "python bench/dither.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "summary": summary}
    report(result, args.out)
    return result


if __name__ == "__main__":
    main()
