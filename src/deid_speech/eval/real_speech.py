"""A small regression set of real human speech for PII redaction, built from the test
recordings in the ``pocketsphinx==5.1.1`` source package on PyPI.

    python -m deid_speech.eval.real_speech --out out/real
    deid-speech eval --manifest out/real/manifest.jsonl --system cascade,e2e --out-dir out/real-eval

Licences: the five "Sense and Sensibility" utterances are LibriVox recordings (public
domain); the card sequences and ``goforward`` / ``numbers`` / ``something`` ship as test
data of pocketsphinx (BSD-style licence, Carnegie Mellon University). The sdist's TIDIGITS
utterance is LDC-licensed and is never extracted (it is not in :data:`RECORDINGS`).

Transcripts are the sdist's own (``librivox/transcription``, ``cards/cards.transcription``;
the build checks they still match) or, for the three that have none, what is said, checked
against Whisper tiny.en and pocketsphinx decoding. Word and entity times are data, not run
time output: pocketsphinx forced alignment (the project's aligner, which reproduces the
sdist's own reference alignment of the LibriVox files), cross-checked against Whisper
word times (about 0.1 s later on median) and corrected by hand against the frame energy
where a word ran into a pause or the end of the file. Only ``librivox-0870`` names a person
("mister john dashwood", title included); the cards, numbers and commands are look-alikes
that must stay audible.
"""
from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deid_speech.errors import DeidError
from deid_speech.models import sha256
from deid_speech.types import Transcript

REQUIREMENT = "pocketsphinx==5.1.1"
SDIST = "pocketsphinx-5.1.1.tar.gz"
SDIST_SHA256 = "675778b309a22dfc9b7d37f7621976bba491d2a5f8c59696bd77fd6d07271355"  # PyPI's digest
DATA = "pocketsphinx-5.1.1/test/data/"
RATE = 16000
_TIMED = re.compile(r"(\S+) (\d+\.\d+)-(\d+\.\d+)")


@dataclass(frozen=True)
class Recording:
    """One utterance: where it is in the sdist, what is said and when (``timed``:
    ``word start-end`` per word, seconds), and its entities ``(label, phrase, start, end)``."""

    id: str
    member: str  # under DATA
    kind: str  # names | lookalike | other
    duration: float  # seconds, from the sample count
    timed: str
    entities: tuple[tuple[str, str, float, float], ...] = ()
    transcript: str | None = None  # the sdist's transcription file, if it has one
    origin: str = "pocketsphinx test data (BSD)"

    @property
    def words(self) -> list[tuple[str, float, float]]:
        return [(w, float(a), float(b)) for w, a, b in _TIMED.findall(self.timed)]

    @property
    def text(self) -> str:
        return " ".join(w for w, _, _ in self.words)


_SAS = "librivox/sense_and_sensibility_01_austen_64kb-"
_LV = "LibriVox, Sense and Sensibility ch. 1 (public domain)"
RECORDINGS = (
    Recording("librivox-0870", _SAS + "0870.wav", "names", 7.1,
              "and 0.20-0.37 mister 0.37-0.63 john 0.63-1.02 dashwood 1.02-1.58 had 1.58-1.84 "
              "then 1.84-2.25 leisure 2.25-2.71 to 2.71-2.89 consider 2.89-3.44 how 3.44-3.95 "
              "much 4.00-4.33 there 4.33-4.52 might 4.52-4.79 be 4.79-4.94 prudently 4.94-5.46 "
              "in 5.46-5.56 his 5.56-5.75 power 5.75-6.04 to 6.04-6.14 do 6.14-6.35 for 6.35-6.61 "
              "them 6.61-6.79",
              (("PERSON", "mister john dashwood", 0.37, 1.58),), "librivox/transcription", _LV),
    Recording("librivox-0880", _SAS + "0880.wav", "other", 2.99,
              "he 0.21-0.34 was 0.34-0.56 not 0.56-0.99 an 1.13-1.30 ill 1.30-1.48 disposed 1.48-2.11 "
              "young 2.11-2.33 man 2.33-2.74", (), "librivox/transcription", _LV),
    Recording("librivox-0890", _SAS + "0890.wav", "other", 5.3,
              "unless 0.27-0.59 to 0.59-0.70 be 0.70-0.86 rather 0.86-1.22 cold 1.22-1.74 "
              "hearted 1.74-2.22 and 2.22-2.39 rather 2.39-2.78 selfish 2.78-3.63 is 3.63-3.88 "
              "to 3.88-3.98 be 3.98-4.16 ill 4.16-4.37 disposed 4.37-5.07", (), "librivox/transcription", _LV),
    Recording("librivox-0920", _SAS + "0920.wav", "other", 6.05,  # "a more a amiable": the sdist's text
              "had 0.22-0.44 he 0.44-0.54 married 0.54-0.98 a 0.98-1.03 more 1.03-1.41 a 1.41-1.46 "
              "amiable 1.46-2.01 woman 2.01-2.49 he 2.49-2.71 might 2.71-3.00 have 3.00-3.19 "
              "been 3.19-3.36 made 3.36-3.69 still 3.69-4.07 more 4.07-4.25 respectable 4.25-5.00 "
              "than 5.00-5.13 he 5.13-5.21 was 5.21-5.83", (), "librivox/transcription", _LV),
    Recording("librivox-0930", _SAS + "0930.wav", "other", 3.29,
              "he 0.21-0.38 might 0.38-0.64 even 0.64-0.92 have 0.92-1.07 been 1.07-1.33 made 1.33-1.70 "
              "amiable 1.70-2.27 himself 2.27-2.88", (), "librivox/transcription", _LV),
    Recording("cards-001", "cards/001.wav", "lookalike", 1.095375,
              "ten 0.16-0.34 of 0.34-0.45 clubs 0.45-0.96", (), "cards/cards.transcription"),
    Recording("cards-002", "cards/002.wav", "lookalike", 1.96025,
              "four 0.00-0.67 queen 0.77-1.04 of 1.04-1.19 clubs 1.19-1.72", (), "cards/cards.transcription"),
    Recording("cards-003", "cards/003.wav", "lookalike", 1.5381875,
              "seven 0.06-0.57 of 0.57-0.70 clubs 0.70-1.29", (), "cards/cards.transcription"),
    Recording("cards-004", "cards/004.wav", "lookalike", 1.554,
              "five 0.11-0.83 five 0.83-1.24", (), "cards/cards.transcription"),
    Recording("cards-005", "cards/005.wav", "lookalike", 3.5025,
              "eight 0.19-0.42 of 0.42-0.53 spades 0.53-1.13 four 1.25-1.54 of 1.54-1.64 clubs 1.64-2.15 "
              "seven 2.22-2.63 of 2.63-2.74 hearts 2.74-3.26", (), "cards/cards.transcription"),
    Recording("goforward", "goforward.raw", "lookalike", 2.78625,
              "go 0.46-0.64 forward 0.64-1.17 ten 1.17-1.53 meters 1.53-2.12"),
    Recording("numbers", "numbers.raw", "lookalike", 4.0231875,
              "thirty 0.39-0.74 three 0.74-1.19 four 1.19-1.93 six 1.93-2.38 ninety 2.38-2.68 two 2.68-3.26"),
    Recording("something", "something.raw", "lookalike", 2.9986875,
              "go 0.43-0.63 somewhere 0.63-1.18 and 1.18-1.35 do 1.35-1.53 something 1.53-2.12"),
)


def record(rec: Recording, audio: str) -> dict:
    """The manifest line of ``rec`` (``audio``: its path relative to the manifest)."""
    tr = Transcript.from_words(rec.words)
    ents = []
    for label, phrase, start, end in rec.entities:
        at = f" {rec.text} ".index(f" {phrase} ")  # a whole-word match; ValueError if absent
        ents.append({"label": label, "text": phrase, "char_start": at, "char_end": at + len(phrase),
                     "start": start, "end": end})
    return {"id": rec.id, "audio": audio, "duration": rec.duration, "text": tr.text, "entities": ents,
            "words": [{k: v for k, v in w.to_dict().items() if k != "prob"} for w in tr.words],
            "kind": rec.kind, "source": f"{SDIST}:{DATA}{rec.member} ({rec.origin})"}


def fetch_sdist(cache: Path | None = None) -> Path:
    """The verified sdist: the cached copy, else ``pip download`` into ``cache`` (default:
    the project's cache folder, :func:`deid_speech.asr.models.cache_dir`)."""
    from deid_speech.asr.models import cache_dir

    path = Path(cache or cache_dir()) / SDIST
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   REQUIREMENT, "-d", tmp, "-q"]
            try:
                run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise DeidError(f"cannot download {REQUIREMENT}: {exc}") from None
            got = Path(tmp) / SDIST
            if run.returncode or not got.is_file():
                why = (run.stderr.strip().splitlines() or ["pip wrote no sdist"])[-1]
                raise DeidError(f"cannot download {REQUIREMENT} (no network?): {why}")
            shutil.move(str(got), path)
    digest = sha256(path)
    if digest != SDIST_SHA256:
        raise DeidError(f"{path}: SHA-256 {digest} is not the recorded {SDIST_SHA256}; delete it and retry")
    return path


def _transcripts(tar: tarfile.TarFile, member: str) -> dict[str, str]:
    """fileid -> text of a Sphinx transcription file (``<s> text </s> (fileid)`` lines)."""
    out = {}
    for line in tar.extractfile(DATA + member).read().decode().splitlines():
        m = re.match(r"\s*(?:<s>)?(.*?)(?:</s>)?\s*\(([^)]+)\)\s*$", line)
        if m:
            out[m.group(2)] = " ".join(m.group(1).split())
    return out


def _samples(tar: tarfile.TarFile, rec: Recording) -> np.ndarray:
    import soundfile as sf

    data = tar.extractfile(DATA + rec.member).read()
    if rec.member.endswith(".raw"):
        x, sr = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0, RATE
    else:
        x, sr = sf.read(io.BytesIO(data), dtype="float32")
    if sr != RATE or x.ndim != 1 or abs(len(x) / RATE - rec.duration) > 1e-3:
        raise DeidError(f"{rec.member}: not the {rec.duration} s of 16 kHz mono the table records")
    return x


def build(out: Path, sdist: Path) -> Path:
    """Extract the table's recordings from ``sdist`` into ``out/audio/*.flac`` and write
    ``out/manifest.jsonl``; return the manifest path."""
    import soundfile as sf

    out = Path(out)
    (out / "audio").mkdir(parents=True, exist_ok=True)
    rows = []
    with tarfile.open(sdist, "r:gz") as tar:
        said = {m: _transcripts(tar, m) for m in {r.transcript for r in RECORDINGS if r.transcript}}
        for rec in RECORDINGS:
            if rec.transcript and said[rec.transcript].get(Path(rec.member).stem) != rec.text:
                raise DeidError(f"{rec.id}: the table's text is not the sdist's transcript")
            sf.write(out / "audio" / f"{rec.id}.flac", _samples(tar, rec), RATE, format="FLAC", subtype="PCM_16")
            rows.append(record(rec, f"audio/{rec.id}.flac"))
    manifest = out / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m deid_speech.eval.real_speech", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for manifest.jsonl and audio/")
    p.add_argument("--cache", type=Path, default=None,
                   help="where the sdist is kept (default: $DEID_SPEECH_CACHE or ~/.cache/deid-speech)")
    args = p.parse_args(argv)
    try:
        manifest = build(args.out, fetch_sdist(args.cache))
    except DeidError as exc:
        print(f"real_speech: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {manifest} ({len(RECORDINGS)} recordings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
