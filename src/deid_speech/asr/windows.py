"""Call-like training windows for the recogniser fine-tune (``train asr``).

The cascade decodes a call in windows of up to 27 s with several sentences each, in
Whisper's timestamp mode, over telephone lines, codecs, rooms and background talk. Single
clean TTS sentences padded to 30 s look nothing like that, and cost a whole encoder pass
each. :func:`pack` lays voiced utterances (``deid-speech tts`` / ``make-dataset``
records) end to end into windows of at most ``max_s`` seconds and puts each window through
one channel drawn for it (:func:`draw_channel`):

* room: none, or a synthetic room of RT60 0.2-0.8 s (:func:`~deid_speech.tts.channel.reverb`);
* background: none, white/pink noise at 5-25 dB SNR, or 2-4 other talkers of the same
  set at 8-20 dB (:func:`~deid_speech.tts.channel.add_babble`);
* line: none, the 8 kHz mu-law phone line, or a codec round trip (AMR-NB, G.726, Opus, MP3:
  :data:`~deid_speech.tts.channel.CODECS`);
* level: -6..+3 dB.

Every window's record has ``text`` (the sentences joined), ``tagged`` and ``entities``
(the sentences' tagged texts joined and their entity times in the window, when every
sentence has them: the end-to-end model's target) and ``timed``: the target in
Whisper's timestamp format, one segment per sentence, times relative to the window on
Whisper's 0.02 s grid (``<|0.48|> my IC is S one two<|3.10|><|3.80|> ok<|4.20|>``), taken
from the sentences' word times. About one window in six holds a single sentence (short
files exist too). The output is a pure function of the input records and ``seed``;
a rerun skips windows whose audio is already written.

    python -m deid_speech.asr.windows --manifest out/datasets/asr/train/manifest.jsonl \\
        --out out/datasets/asr/train-windows --seed 0

Training only: nothing in inference imports this module.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from deid_speech.errors import DeidError

SR = 16000
TIME_STEP = 0.02  # Whisper's timestamp tokens
LINES = ("none", "telephone", *("amr", "g726", "opus", "mp3"))
_LINE_WEIGHTS = (0.35, 0.2, 0.15, 0.1, 0.1, 0.1)


def draw_channel(rng: random.Random) -> dict:
    """One window's channel (see the module docstring), as a JSON-able dict."""
    from deid_speech.tts.channel import CODECS

    room = round(rng.uniform(0.2, 0.8), 2) if rng.random() < 0.3 else None
    r = rng.random()
    if r < 0.3:
        background = {"kind": "noise", "colour": rng.choice(("white", "pink")), "snr_db": round(rng.uniform(5, 25), 1)}
    elif r < 0.55:
        background = {"kind": "babble", "talkers": rng.randint(2, 4), "snr_db": round(rng.uniform(8, 20), 1)}
    else:
        background = None
    line = rng.choices(LINES, weights=_LINE_WEIGHTS)[0]
    bit_rate = rng.choice(CODECS[line][3]) if line in CODECS else None
    return {"room_rt60": room, "background": background, "line": line, "bit_rate": bit_rate,
            "gain_db": round(rng.uniform(-6, 3), 1), "seed": rng.randrange(2**31)}


def apply_channel(audio: np.ndarray, ch: dict, others: Sequence[np.ndarray] = ()) -> np.ndarray:
    """``audio`` (16 kHz mono) through channel ``ch`` (:func:`draw_channel`); ``others``
    are the babble talkers. The timeline is kept sample for sample."""
    from deid_speech.tts import channel as c

    rng = np.random.default_rng(ch["seed"])
    x = np.asarray(audio, dtype=np.float32)
    if ch["room_rt60"]:
        x = c.reverb(x, ch["room_rt60"], rng)
    bg = ch["background"]
    if bg and bg["kind"] == "noise":
        x = c.add_noise(x, bg["snr_db"], rng, bg["colour"])
    elif bg and bg["kind"] == "babble":
        x = c.add_babble(x, others, bg["snr_db"], rng)
    if ch["line"] == "telephone":
        x = c.telephone(x)
    elif ch["line"] != "none":
        x = c.codec(x, ch["line"], ch["bit_rate"])
    return c.apply_gain(x, ch["gain_db"])


def _extent(rec: dict, duration: float) -> tuple[float, float]:
    """(first word start, last word end) of a record, or the whole clip without words."""
    words = [w for w in rec.get("words") or () if w.get("start") is not None and w.get("end") is not None]
    if not words:
        return 0.0, duration
    return max(0.0, float(words[0]["start"])), min(duration, float(words[-1]["end"]))


def _grid(t: float) -> float:
    return round(round(t / TIME_STEP) * TIME_STEP, 2)


def timed_target(segments: Sequence[tuple[float, float, str]]) -> str:
    """Whisper's timestamp format for ``(start, end, text)`` segments (seconds in the
    window, on the 0.02 s grid, each end after its start)."""
    out = []
    for start, end, text in segments:
        a, b = _grid(start), _grid(end)
        if b <= a:
            b = round(a + TIME_STEP, 2)
        out.append(f"<|{a:.2f}|> {text.strip()}<|{b:.2f}|>")
    return "".join(out)


def plan(durations: Sequence[float], seed: int, max_s: float = 28.0, single_share: float = 1 / 6
         ) -> list[list[tuple[int, float]]]:
    """Windows as lists of ``(record index, offset in the window)``: records shuffled
    (seeded), laid end to end with 0.2-1.0 s gaps after a 0-0.5 s lead, at most ``max_s``
    long; a record longer than ``max_s`` is left out."""
    rng = random.Random(f"windows-{seed}")
    order = [i for i in range(len(durations)) if durations[i] <= max_s - 0.6]
    rng.shuffle(order)
    windows: list[list[tuple[int, float]]] = []
    cur: list[tuple[int, float]] = []
    t = 0.0
    single = False
    for i in order:
        gap = rng.uniform(0.2, 1.0) if cur else rng.uniform(0.0, 0.5)
        if cur and (single or t + gap + durations[i] > max_s):
            windows.append(cur)
            cur, t = [], 0.0
            gap = rng.uniform(0.0, 0.5)
        if not cur:
            single = rng.random() < single_share
        cur.append((i, t + gap))
        t += gap + durations[i]
    if cur:
        windows.append(cur)
    return windows


def _window_entities(records: Sequence[dict], win: Sequence[tuple[int, float]], length: float) -> list[dict]:
    """The sentences' entities in a window: times shifted by the sentence's offset, character
    offsets into the joined ``text``; an entity whose time or offsets are missing, or that
    starts after the window's end, is left out."""
    out, base = [], 0
    for i, off in win:
        text = records[i]["text"]
        lead = len(text) - len(text.lstrip())
        for e in records[i].get("entities", []):
            if "start" in e and "char_start" in e and off + float(e["start"]) < length:
                a, b = base + int(e["char_start"]) - lead, base + int(e["char_end"]) - lead
                out.append({"label": e["label"], "text": e.get("text", text[e["char_start"]:e["char_end"]]),
                            "char_start": a, "char_end": b,
                            "start": round(off + float(e["start"]), 3), "end": round(off + float(e["end"]), 3)})
        base += len(text.strip()) + 1
    return out


def pack(records: Sequence[dict], out_dir: str | Path, seed: int = 0, max_s: float = 28.0,
         progress: bool = False) -> dict:
    """Write the windows of ``records`` (dicts with absolute ``audio``, ``text``,
    ``duration``, optional ``words``) as FLAC files and ``OUT/manifest.jsonl``; return a summary."""
    from deid_speech.asr.hf import load_audio
    from deid_speech.audio import Audio, save, write_text_atomic

    out = Path(out_dir)
    (out / "audio").mkdir(parents=True, exist_ok=True)
    records = [r for r in records if r.get("text", "").strip()]
    if not records:
        raise DeidError("no records with text to pack")
    durations = [float(r.get("duration") or 0) for r in records]
    windows = plan(durations, seed, max_s)
    rng = random.Random(f"channels-{seed}")
    rows = []
    for k, win in enumerate(windows):
        ch = draw_channel(rng)
        talkers = [rng.randrange(len(records)) for _ in range((ch["background"] or {}).get("talkers", 0))]
        wid = f"w{seed}-{k:05d}"
        path = out / "audio" / f"{wid}.flac"
        segments, length = [], 0.0
        for i, off in win:
            a, b = _extent(records[i], durations[i])
            segments.append((off + a, off + b, records[i]["text"]))
            length = off + durations[i]
        length = min(max_s, length + rng.uniform(0.1, 0.6))
        if not path.is_file():
            mix = np.zeros(int(round(length * SR)) + 1, dtype=np.float32)
            for i, off in win:
                clip = load_audio(records[i]["audio"])
                s = int(round(off * SR))
                n = min(len(clip), len(mix) - s)
                mix[s:s + n] += clip[:n]
            noisy = apply_channel(mix, ch, [load_audio(records[j]["audio"]) for j in talkers])
            save(Audio(noisy[:, None], SR, "FLAC", "PCM_16"), path)
        row = {"id": wid, "audio": f"audio/{wid}.flac", "duration": round(length, 3),
               "text": " ".join(records[i]["text"].strip() for i, _ in win),
               "timed": timed_target(segments), "channel": ch,
               "parts": [records[i]["id"] for i, _ in win],
               "voices": sorted({str(records[i].get("voice", "")) for i, _ in win})}
        if all("tagged" in records[i] for i, _ in win):  # the e2e model's target (train e2e)
            row["tagged"] = " ".join(records[i]["tagged"].strip() for i, _ in win)
            row["entities"] = _window_entities(records, win, length)
        rows.append(row)
        if progress:
            print(f"\rwindows {k + 1}/{len(windows)}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    write_text_atomic(out / "manifest.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    summary = {"records": len(records), "windows": len(rows), "seed": seed, "max_s": max_s,
               "audio_s": round(sum(r["duration"] for r in rows), 1),
               "single_sentence_windows": sum(len(w) == 1 for w in windows),
               "lines": {x: sum(r["channel"]["line"] == x for r in rows) for x in LINES},
               "rooms": sum(bool(r["channel"]["room_rt60"]) for r in rows),
               "backgrounds": {x: sum((r["channel"]["background"] or {}).get("kind") == x for r in rows)
                               for x in ("noise", "babble")}}
    write_text_atomic(out / "windows.json", json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m deid_speech.asr.windows",
                                description="Pack voiced utterances into call-like training windows.")
    p.add_argument("--manifest", type=Path, required=True, help="a deid-speech tts manifest.jsonl (or its folder)")
    p.add_argument("--out", type=Path, required=True, help="output folder (audio/, manifest.jsonl, windows.json)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=28.0)
    args = p.parse_args(argv)
    try:
        from deid_speech.asr.train_data import load_records

        if args.max_seconds <= 1 or args.max_seconds > 30:
            raise DeidError("--max-seconds must be in (1, 30]")
        summary = pack(load_records(args.manifest), args.out, args.seed, args.max_seconds,
                       progress=sys.stderr.isatty())
    except DeidError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
