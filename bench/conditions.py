"""What the default lets through when the recording itself is poor: the same dev utterances
under conditions the unseen-voice benchmark does not hold (a room, a loud caller clipped,
call-centre babble, music under the speech, a low-rate mobile codec, a quiet recording).

    .venv/bin/python bench/conditions.py --manifest out/benchmark/dev/utterances/manifest.jsonl \\
        --work out/conditions --out bench/results/conditions.json

The clean records of ``--manifest`` (those that did not go through the telephone line, or all
with ``--telephone``; every ``--every``-th of them) are written again under each condition into
``WORK/<condition>/`` (FLAC, with the manifest's words and entities: every condition keeps the
times), and each set is scored by ``bench/dither.py --draws 1`` (draw 0: ``deid-speech eval``
of ``cascade`` and ``cascade+verify``). Its transcripts are kept in
``WORK/<condition>/asr-cache.jsonl``, so a run that is stopped resumes; every run scores every
set again, with the code as it is. Dev parts only: the thresholds of any fix are chosen here.

Conditions (``--conditions``): ``clean`` (the records as they are), ``room`` (reverberation,
RT60 0.7 s), ``clipped`` (20 dB of gain, clipped at full scale), ``babble`` (four other dev
utterances mixed in at 5 dB SNR), ``music`` (chords, 10 dB under the speech), ``amr`` (AMR-NB at
7.95 kbit/s), ``quiet`` (the whole recording 30 dB down); for a calls manifest, ``caller-20`` and
``caller-28`` (every turn but the agent's 20 or 28 dB down: a far end recorded quieter than the
near end; ``audio.quiet_stretches`` raises a passage 15 dB or more under the call's level).

    .venv/bin/python bench/conditions.py --manifest out/benchmark/dev/calls/manifest.jsonl --telephone \\
        --every 1 --conditions clean caller-20 caller-28 --work out/conditions-calls --out bench/results/conditions-calls.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from common import refuse_test_part, report  # noqa: E402

CONDITIONS = ("clean", "room", "clipped", "babble", "music", "amr", "quiet", "caller-20", "caller-28")
SR = 16000


def _music(n: int, rng: np.random.Generator) -> np.ndarray:
    """Chords of three sine tones and their octaves, a new chord every 0.5 s, each note faded in
    and out: a stand-in for hold music (no recording is shipped)."""
    t = np.arange(n) / SR
    out = np.zeros(n)
    step = SR // 2
    fade = np.hanning(step)
    for k in range(0, n, step):
        root = 110 * 2 ** (rng.integers(0, 12) / 12)
        m = min(step, n - k)
        for ratio in (1.0, 1.26, 1.5, 2.0, 2.52):
            out[k:k + m] += np.sin(2 * np.pi * root * ratio * t[k:k + m] + rng.uniform(0, 6.3)) * fade[:m]
    return out.astype(np.float32)


def condition(x: np.ndarray, name: str, rng: np.random.Generator, others: list[np.ndarray],
              turns: list[dict] | None = None) -> np.ndarray:
    from deid_speech.tts import channel

    if name == "clean":
        return x
    if name == "room":
        return channel.reverb(x, 0.7, rng)
    if name == "clipped":
        return np.clip(x * np.float32(10.0), -1.0, 1.0).astype(np.float32)
    if name == "babble":
        return channel.add_babble(x, [others[int(i)] for i in rng.choice(len(others), 4, replace=False)], 5.0, rng)
    if name == "music":
        return channel._mix(x, _music(len(x), rng), 10.0, SR)
    if name == "amr":
        return channel.codec(x, "amr", 7950)
    if name == "quiet":
        return (x * np.float32(10 ** (-30 / 20))).astype(np.float32)
    if name.startswith("caller-"):
        if not turns:
            raise ValueError(f"{name} needs a call's turns (a calls manifest)")
        y = x.copy()
        for t in turns:
            if t["speaker"] != "agent":
                a, b = max(0, int((t["start"] - 0.05) * SR)), int((t["end"] + 0.05) * SR)
                y[a:b] *= np.float32(10 ** (-int(name.split("-")[1]) / 20))
        return y
    raise ValueError(name)


def build(manifest: Path, work: Path, names: list[str], every: int, telephone: bool = False) -> dict[str, Path]:
    import soundfile as sf

    from deid_speech.audio import load

    rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    clean = [r for r in rows if telephone or not (r.get("augment") or {}).get("telephone")][::every]
    audio = {r["id"]: load(manifest.parent / r["audio"]).mono16k() for r in clean}
    others = [load(manifest.parent / r["audio"]).mono16k() for r in rows if r["id"] not in audio][:40]
    out = {}
    for name in names:
        d = work / name
        m = d / "manifest.jsonl"
        out[name] = m
        if m.is_file():
            continue
        (d / "audio").mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(CONDITIONS.index(name) + 1)
        lines = []
        for r in clean:
            y = condition(audio[r["id"]], name, rng, others, r.get("turns"))
            sf.write(d / "audio" / f"{r['id']}.flac", y, SR, subtype="PCM_16")
            lines.append(json.dumps({**r, "audio": f"audio/{r['id']}.flac", "condition": name}))
        tmp = m.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(m)
        print(f"{name}: {len(clean)} records -> {m}", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", type=Path, required=True, help="a dev manifest of the unseen-voice benchmark")
    ap.add_argument("--work", type=Path, required=True, help="where the condition sets and their transcripts go")
    ap.add_argument("--conditions", nargs="+", choices=CONDITIONS,
                    default=[c for c in CONDITIONS if not c.startswith("caller-")])
    ap.add_argument("--every", type=int, default=2, help="every N-th clean record (default 2)")
    ap.add_argument("--telephone", action="store_true", help="the records that went through the telephone line too")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    refuse_test_part(args.manifest.parent, "conditions")
    if not args.manifest.is_file():
        sys.exit(f"conditions: no {args.manifest}; run `make benchmark` first")
    if args.every < 1:
        sys.exit("conditions: --every must be at least 1")
    sets = build(args.manifest, args.work, args.conditions, args.every, args.telephone)
    results = {}
    for name, m in sets.items():
        scored = m.parent / "scores.json"  # scored again each run, by this code: the decodings are cached
        subprocess.run([sys.executable, str(ROOT / "bench" / "dither.py"), "--manifest", str(m), "--draws", "1",
                        "--asr-cache", str(m.parent / "asr-cache.jsonl"), "--out", str(scored)], check=True,
                       stdout=subprocess.DEVNULL)
        summary = json.loads(scored.read_text())["summary"]
        results[name] = {system: {k: summary[system][k]["mean"] for k in ("leak", "over_redaction", "recall")}
                         for system in summary if system.startswith("cascade")}
        print(name, json.dumps(results[name]), file=sys.stderr)
    report({"command": " ".join(["bench/conditions.py", *sys.argv[1:]]), "manifest": str(args.manifest),
            "results": results}, args.out)


if __name__ == "__main__":
    main()
