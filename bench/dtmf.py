"""Keypad tones (DTMF): what ``redact`` lets through of a number keyed in on the phone, and
how often it hears a key in speech.

    .venv/bin/python bench/dtmf.py --trials 40 --out bench/results/dtmf.json

**Keyed numbers.** Each trial keys 6-16 random keys (0-9, *, #; tones of 45-150 ms, pauses of
40-400 ms, each tone at -10 to -35 dBFS, twist up to 4 dB, both tones up to 1 % off) between
two stretches of speech (dev utterances of the unseen-voice benchmark: an agent's prompt
before, the caller after), then sends it through a channel: clean, the 8 kHz mu-law phone line
with noise (20 dB SNR), or a codec (AMR-NB 7.95 kbit/s, G.726 16 kbit/s, Opus 8 kbit/s, MP3 16
kbit/s); ``talk-over`` mixes a third utterance over the keys at the tones' own level. Each
trial's audio goes through ``for_recognition`` and :func:`deid_speech.dtmf.keypad_tones` as in
``redact``, whose regions are padded and beeped as ``redact`` beeps them. Reported per
channel: keys read (the right key over the tone), **tone leak** (the share of tone time left
audible) and **keys read back from the beeped audio** by the same detector.

**Talk-off.** Over the given manifests (default: the benchmark's dev part, dev-fast, and the
real-speech sets when built), key runs found in speech that holds no keypad tone, per hour,
and the seconds they beep. The detector's thresholds were chosen on those dev sets and the
ASR training data (``out/datasets/asr/train``), never on a test part.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from common import refuse_test_part, report  # noqa: E402
from deid_speech import dtmf, manifest  # noqa: E402
from deid_speech.audio import for_recognition, load  # noqa: E402
from deid_speech.intervals import covered, union  # noqa: E402
from deid_speech.redact import RedactOptions, redaction_regions  # noqa: E402
from deid_speech.types import Span  # noqa: E402

SR = dtmf.RATE
KEYS = "0123456789*#"
CHANNELS = ("clean", "telephone", "amr", "g726", "opus", "mp3", "talk-over")
TALK_OFF = ("out/benchmark/dev/utterances/manifest.jsonl", "out/benchmark/dev/calls/manifest.jsonl",
            "out/benchmark/dev-fast/calls/manifest.jsonl", "out/real-more/manifest.jsonl",
            "out/real-more-phone/manifest.jsonl")


def _speech(path: Path) -> list[np.ndarray]:
    """The 16 kHz audio of every record of a manifest."""
    return [load(r.audio).mono16k() for r in manifest.read(path, need=("audio",), check_audio=False, line_ids=False)]


def _at(x: np.ndarray, dbfs: float) -> np.ndarray:
    return (x * 10 ** (dbfs / 20) / max(float(np.sqrt(np.mean(x ** 2))), 1e-9)).astype(np.float32)


def trial(rng: np.random.Generator, speech: list[np.ndarray], channel: str) -> tuple[np.ndarray, list[tuple]]:
    """One keyed number between two utterances, through ``channel``: (16 kHz audio, [(start, end, key)])."""
    from deid_speech.tts.channel import add_noise, codec, telephone

    before, after, over = (speech[i] for i in rng.choice(len(speech), 3, replace=False))
    level = float(rng.uniform(-35, -10))
    parts, keys, t = [_at(before, -20.0), np.zeros(int(rng.uniform(0.2, 1.0) * SR), np.float32)], [], 0.0
    t = sum(len(p) for p in parts) / SR
    for _ in range(int(rng.integers(6, 17))):
        k, dur, gap = KEYS[int(rng.integers(len(KEYS)))], float(rng.uniform(0.045, 0.15)), float(rng.uniform(0.04, 0.4))
        parts += [dtmf.key_tone(k, dur, SR, dbfs=level + float(rng.uniform(-2, 2)), twist_db=float(rng.uniform(-4, 4)),
                                detune=float(rng.uniform(-0.01, 0.01))), np.zeros(int(gap * SR), np.float32)]
        keys.append((t, t + dur, k))
        t += dur + int(gap * SR) / SR
    parts += [np.zeros(int(rng.uniform(0.2, 1.0) * SR), np.float32), _at(after, -20.0)]
    x = np.concatenate(parts)
    if channel == "talk-over":  # a voice over the keys, at the tones' own level
        a = int(keys[0][0] * SR)
        v = _at(over, level + 3.0)[: int((keys[-1][1] - keys[0][0]) * SR)]
        x[a:a + len(v)] += v
    elif channel == "telephone":
        x = telephone(add_noise(x, 20.0, rng))
    elif channel != "clean":
        x = codec(x, channel)
    return x.astype(np.float32), keys


def keyed(trials: int, speech: list[np.ndarray], seed: int) -> dict:
    options = RedactOptions()
    out = {}
    for channel in CHANNELS:
        rng = np.random.default_rng(seed)
        n = read = still = 0
        tone_s = left_s = 0.0
        for _ in range(trials):
            x, keys = trial(rng, speech, channel)
            mono = for_recognition(x)
            runs = dtmf.key_runs(mono)
            beeped = union([(a, b) for a, b, _ in redaction_regions(
                [Span(a, b, source="keypad") for a, b in dtmf.keypad_tones(mono)], options)])
            for s, e, k in keys:
                n += 1
                read += any(a < e and b > s and key == k for a, b, key in runs)
                tone_s += e - s
                left_s += (e - s) - covered(s, e, beeped)
            y = mono.copy()
            for a, b in beeped:  # silence stands in for the beep: what a decoder could read around it
                y[int(a * SR): int(b * SR)] = 0.0
            still += len(dtmf.key_runs(y))
        out[channel] = {"keys": n, "keys_read": round(read / n, 4), "tone_leak_pct": round(100 * left_s / tone_s, 3),
                        "keys_read_back_after_beeping": still}
        print(channel, out[channel], file=sys.stderr, flush=True)
    return out


def talk_off(manifests: list[Path]) -> dict:
    out = {}
    for m in manifests:
        hours = beeped = 0.0
        runs = 0
        for x in _speech(m):
            mono = for_recognition(x)
            hours += len(mono) / SR / 3600
            runs += len(dtmf.key_runs(mono))
            beeped += sum(b - a for a, b in dtmf.keypad_tones(mono))
        out[str(m)] = {"hours": round(hours, 3), "key_runs": runs, "per_hour": round(runs / max(hours, 1e-9), 2),
                       "beeped_s": round(beeped, 3)}
        print(m, out[str(m)], file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=40, help="keyed numbers per channel")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--speech", type=Path, default=ROOT / "out/benchmark/dev/utterances/manifest.jsonl",
                    help="utterances around and over the keys (a dev part)")
    ap.add_argument("--talk-off", type=Path, action="append", default=None,
                    help="a manifest of speech with no keypad tone (repeatable; default: the dev sets)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    refuse_test_part(a.speech.parent, "dtmf.py")
    if not a.speech.is_file():
        sys.exit(f"dtmf.py: no {a.speech}; run `make benchmark` first")
    manifests = a.talk_off or [ROOT / m for m in TALK_OFF if (ROOT / m).is_file()]
    t0 = time.perf_counter()
    result = {"command": "python bench/dtmf.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "keyed": keyed(a.trials, _speech(a.speech), a.seed), "talk_off": talk_off(manifests)}
    result["seconds"] = round(time.perf_counter() - t0, 1)
    report(result, a.out)


if __name__ == "__main__":
    main()
