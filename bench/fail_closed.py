"""The fail-closed probe cases, each built here from the shipped example and run through
`deid-speech redact`; prints one row per case: exit status, spans, what was written.

    .venv/bin/python bench/fail_closed.py [--cli "python -m deid_speech"] [--out bench/results/fail_closed.json]

``--cli`` lets the same cases run against another checkout's command (before/after).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

from deid_speech import models as shipped

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = shipped.path("example")


def build(tmp: Path) -> dict[str, tuple[Path, list[str]]]:
    """Case name -> (its own folder, the redact arguments for it)."""
    x, sr = sf.read(EXAMPLE, dtype="float32")
    cases: dict[str, list[str]] = {}
    d = tmp / "cancel"
    d.mkdir()
    sf.write(d / "cancel.wav", np.stack([x, -x], 1), sr)
    cases["stereo, right = -left"] = (d, [str(d / "cancel.wav")])
    d = tmp / "quiet"
    d.mkdir()
    sf.write(d / "quiet.wav", x * 10 ** (-70 / 20), sr, subtype="FLOAT")
    cases["speech at -70 dB (float WAV)"] = (d, [str(d / "quiet.wav")])
    for name, off, val, fmt in (("header claims 129 channels", 22, 129, "<H"),
                                ("header claims 1,000,003 Hz", 24, 1000003, "<I")):
        d = tmp / name.split()[2].replace(",", "")
        d.mkdir()
        sf.write(d / "lie.wav", x[: sr * 5], sr, subtype="PCM_16")
        b = bytearray((d / "lie.wav").read_bytes())
        b[off:off + struct.calcsize(fmt)] = struct.pack(fmt, val)
        (d / "lie.wav").write_bytes(bytes(b))
        cases[name] = (d, [str(d / "lie.wav")])
    d = tmp / "twice"
    d.mkdir()
    sf.write(d / "a.flac", x[: sr * 10], sr)
    sf.write(d / "b.flac", x[sr * 10: sr * 20], sr)
    cases["redact *.flac, then again over the outputs"] = (d, ["@twice", str(d / "a.flac"), str(d / "b.flac")])
    d = tmp / "same"
    for sub in ("a", "b"):
        (d / sub).mkdir(parents=True)
        sf.write(d / sub / "call.wav", x[: sr * 8], sr)
    cases["a/call.wav and b/call.wav into one --out-dir"] = (d, [str(d / "a/call.wav"), str(d / "b/call.wav"),
                                                                  "--out-dir", str(d / "out")])
    d = tmp / "names"
    d.mkdir()
    with open(os.fsencode(str(d)) + b"/caf\xe9.wav", "wb") as fh:
        sf.write(fh, x[: sr * 8], sr, format="WAV", subtype="PCM_16")
    cases["a file name that is not UTF-8"] = (d, [str(d)])
    d = tmp / "flac0"
    d.mkdir()
    sf.write(d / "z.flac", x[: sr * 8], sr, subtype="PCM_16")
    b = bytearray((d / "z.flac").read_bytes())
    b[21] &= 0xF0
    b[22:26] = b"\0\0\0\0"
    (d / "z.flac").write_bytes(bytes(b))
    cases["FLAC of unknown length"] = (d, [str(d / "z.flac")])
    d = tmp / "outfile"
    d.mkdir()
    (d / "out").write_text("x")
    cases["--out-dir is a file"] = (d, [str(EXAMPLE), "--out-dir", str(d / "out")])
    d = tmp / "nomodel"
    d.mkdir()
    cases["--asr-model ./does-not-exist"] = (d, [str(EXAMPLE), "--asr-model", "./does-not-exist", "--out-dir",
                                                 str(d / "out")])
    return cases


def run(cli: list[str], args: list[str], cwd: Path) -> dict:
    twice = args[:1] == ["@twice"]
    args = args[1:] if twice else args
    r = subprocess.run(cli + ["redact", *args, "--progress", "off"], capture_output=True, text=True,
                       errors="backslashreplace", cwd=cwd)
    if twice:  # the shell's *.flac now also matches the outputs
        files = sorted(str(p) for p in Path(args[0]).parent.glob("*.flac"))
        r = subprocess.run(cli + ["redact", *files, "--progress", "off"], capture_output=True, text=True,
                           errors="backslashreplace", cwd=cwd)
    spans = []
    for j in Path(cwd).rglob("*.redacted.json"):
        spans.append(len(json.loads(j.read_text(encoding="utf-8", errors="replace")).get("spans", [])))
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    return {"exit": r.returncode, "spans": spans, "traceback": "Traceback" in r.stderr,
            "outputs": sorted(p.name.encode("utf-8", "backslashreplace").decode() for p in Path(cwd).rglob("*redacted*")),
            "inputs_left": sorted(p.name.encode("utf-8", "backslashreplace").decode() for p in Path(cwd).rglob("*")
                                  if p.is_file() and "redacted" not in p.name),
            "stderr": err[-1][:160] if err else ""}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default=f"{sys.executable} -m deid_speech")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cli = shlex.split(args.cli)
    rows = {}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for name, (case_dir, case_args) in build(tmp).items():
            rows[name] = run(cli, case_args, case_dir)
            print(f"{name}: {json.dumps(rows[name], ensure_ascii=False)}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
