"""Voice catalogue: ``backend:voice[@options]`` names -> synthesizers, and held-out voices.

Names (options are comma-separated; a bare number sets the backend's rate knob):

* ``piper:joe``, ``piper:joe@0.9`` - Piper en_US-joe-medium; the number is
  ``length_scale`` (<1 faster), ``p1.1`` sets ``pitch`` (a higher, different speaker).
* ``espeak:en-us+m3@s150,p40`` - espeak-ng language ``+variant``; ``s`` speed (wpm,
  also the bare number), ``p`` pitch 0-99, ``g`` word gap (10 ms units).
* ``flite:rms``, ``flite:slt@1.1`` - a Flite voice; the number is the duration
  stretch (>1 slower), ``f120`` sets the mean F0 in Hz.
* ``festival:ked``, ``festival:ked@1.1`` - a Festival voice (text2wave); the number is
  the duration stretch. Only the unseen-voice benchmark uses one.
* ``whisperspeech:default``, ``whisperspeech:/path/to/ref.wav@12`` - WhisperSpeech's
  default speaker or a clone of the clip's voice; the number is characters per second.
  Needs local weights (:mod:`deid_speech.tts.whisperspeech`), so never a default voice.

Options equal to the backend default are dropped from the canonical name, so
``piper:joe@1`` and ``piper:joe`` are the same voice. Dev and test splits are voiced
only with held-out voices and train never with one (:func:`voices_for_split`); both that
and the benchmark's reservation compare speakers (:func:`speaker`), not names, so a rate
or pitch variant of a held-out or benchmark voice is held out or reserved too.
"""
from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from deid_speech.errors import DeidError
from deid_speech.tts.base import Synthesizer, get_synthesizer

# backend -> ((letter, kwarg, type, default), ...); a bare number sets the first entry
_OPTIONS: dict[str, tuple[tuple[str, str, type, float | int | None], ...]] = {
    "piper": (("", "length_scale", float, 1.0), ("p", "pitch", float, 1.0)),
    "espeak": (("s", "speed", int, 160), ("p", "pitch", int, 50), ("g", "word_gap", int, 0)),
    "flite": (("", "stretch", float, 1.0), ("f", "f0_mean", float, None)),
    "festival": (("", "stretch", float, 1.0),),
    "whisperspeech": (("", "cps", float, 15.0),),
}
# options that make another speaker (all others change only rate or pitch): Piper has one voice
# installed, and the catalogue holds out a pitch-shifted Joe (DEFAULT_HELD_OUT) as its own speaker
_SPEAKER_OPTIONS: dict[str, tuple[str, ...]] = {"piper": ("pitch",)}
PIPER_VOICES: tuple[str, ...] = ("joe",)
HELD_OUT_SPLITS: tuple[str, ...] = ("dev", "test")
_NAME_RE = re.compile(r"^(?P<backend>[a-z]+):(?P<voice>[^@\s]+)(?:@(?P<opts>[^@]+))?$")
_VOICE_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")  # a voice name; whisperspeech also takes a clip path
_OPT_RE = re.compile(r"^(?P<key>[a-z]?)(?P<value>\d+(?:\.\d+)?)$")

DEFAULT_VOICES: tuple[str, ...] = (
    "piper:joe", "piper:joe@0.9", "piper:joe@1.1,p0.9",
    "flite:rms", "flite:slt", "flite:kal16", "flite:rms@0.9", "flite:awb",
    "espeak:en-us+m3@s150", "espeak:en-gb+f3@s150,p60", "espeak:en-gb-scotland+m2@s145,p40",
    "espeak:en-029+m1@s150",
)
DEFAULT_HELD_OUT: tuple[str, ...] = ("piper:joe@1.1,p0.9", "flite:awb", "espeak:en-029+m1@s150")
# The unseen-voice benchmark (:mod:`deid_speech.tts.benchmark`): voices and settings that no
# training, dev or test split uses, a dev part to tune on and a test part to quote, with no
# voice in common. Festival's KED diphone voice is a speaker no other data has; flite's 8 kHz
# kal diphone voice is the kal speaker at a rate and pitch training never uses. Kokoro voices
# (and hibari-tts, whose only offline voice is distilled from Kokoro's af_heart) are reserved
# for independent evaluation and used nowhere.
BENCHMARK_VOICES: dict[str, tuple[str, ...]] = {
    "dev": ("espeak:en-gb-x-gbclan+m7@s150,p35", "espeak:en-us+klatt4@s145", "flite:kal@1.1,f150"),
    "test": ("festival:ked", "festival:ked@1.12", "espeak:en-us-nyc+m5@s165,p45",
             "espeak:en-gb-x-rp+f2@s155,p65", "espeak:en-gb-x-gbcwmd+f4@s140,p55"),
    # a second test part (session 43), new sentences by authors who saw neither dev nor test, and
    # espeak-ng speakers (variants) that no other data uses, in the test part's accents
    "test2": ("espeak:en-us-nyc+Annie@s155,p60", "espeak:en-gb-x-rp+Lee@s165,p45",
              "espeak:en-gb-x-gbcwmd+Andy@s150,p40", "festival:ked@0.92"),
    # a third test part (session 56): new sentences and calls by two more authors who saw no other
    # part, and espeak-ng speakers that no other data uses, with KED at a rate of its own
    "test3": ("espeak:en-us+Michael@s150,p50", "espeak:en-gb-x-rp+steph@s160,p60",
              "espeak:en-us-nyc+caleb@s145,p40", "espeak:en-gb-x-gbcwmd+Alicia@s155,p55", "festival:ked@1.05"),
    # dev's calls again (tts.benchmark.CALLS_AGAIN), dev's speakers faster, all on the phone line
    "dev-fast": ("espeak:en-gb-x-gbclan+m7@s180,p35", "espeak:en-us+klatt4@s175", "flite:kal@0.9,f150"),
}


class UnknownVoice(DeidError, ValueError):
    """A voice name that does not parse or does not exist here."""


class HeldOutVoiceError(DeidError, ValueError):
    """A held-out voice asked to voice train, or a training voice asked to voice dev/test."""


@dataclass(frozen=True)
class VoiceSpec:
    """A parsed voice: backend, voice within it, and non-default options as kwargs."""

    backend: str
    voice: str
    options: tuple[tuple[str, float | int], ...] = ()

    @property
    def name(self) -> str:
        """Canonical ``backend:voice[@opts]`` name."""
        keys = {kw: letter for letter, kw, _, _ in _OPTIONS[self.backend]}
        opts = ",".join(f"{keys[kw]}{value:g}" for kw, value in self.options)
        return f"{self.backend}:{self.voice}" + (f"@{opts}" if opts else "")

    def build(self) -> Synthesizer:
        """Construct the synthesizer; UnknownVoice if the voice is not installed here.

        A missing backend raises :class:`~deid_speech.tts.base.BackendUnavailable`.
        """
        kwargs = dict(self.options)
        try:
            if self.backend == "piper":
                return get_synthesizer("piper", **kwargs)
            if self.backend in ("flite", "festival"):
                return get_synthesizer(self.backend, voice=self.voice, **kwargs)
            if self.backend == "whisperspeech":
                speaker = None if self.voice == "default" else self.voice
                return get_synthesizer("whisperspeech", speaker=speaker, **kwargs)
            language, _, variant = self.voice.partition("+")
            synth = get_synthesizer("espeak", voice=language, variant=variant or None, **kwargs)
            _check_espeak(language, variant, synth.binary)  # espeak-ng falls back silently
            return synth
        except ValueError as exc:
            raise UnknownVoice(f"voice {self.name!r}: {exc}") from None


def parse_voice(name: str) -> VoiceSpec:
    """Parse a voice name (see module docstring); raise UnknownVoice on bad syntax."""
    m = _NAME_RE.match(name.strip())
    if not m or m["backend"] not in _OPTIONS or (m["backend"] != "whisperspeech"
                                                 and not _VOICE_RE.match(m["voice"])):
        raise UnknownVoice(f"unknown voice {name!r}; expected backend:voice[@options] with backend "
                           f"one of {', '.join(_OPTIONS)} (e.g. flite:slt@1.1, espeak:en-us+m3@s150)")
    backend, voice = m["backend"], m["voice"]
    if backend == "piper" and voice not in PIPER_VOICES:
        raise UnknownVoice(f"unknown piper voice {voice!r} in {name!r}; installed: {', '.join(PIPER_VOICES)}")
    table = _OPTIONS[backend]
    values: dict[str, float | int] = {}
    for opt in filter(None, (m["opts"] or "").split(",")):
        om = _OPT_RE.match(opt.strip())
        entry = None
        if om:
            entry = table[0] if not om["key"] else next((e for e in table if e[0] == om["key"]), None)
        if entry is None or (entry[2] is int and not float(om["value"]).is_integer()):
            raise UnknownVoice(f"bad option {opt!r} in voice {name!r}; {backend} takes "
                               + ", ".join(f"{e[0] or '<number>'} ({e[1]})" for e in table))
        values[entry[1]] = entry[2](float(om["value"]))
    options = tuple((kw, values[kw]) for _, kw, _, default in table
                    if kw in values and values[kw] != default)
    return VoiceSpec(backend, voice, options)


def split_voice_list(value: str) -> list[str]:
    """Split ``"flite:rms,espeak:en-us+m3@s150,p40"`` at commas that start a new voice."""
    return [v.strip() for v in re.split(r",(?=\s*[a-z]+:)", value) if v.strip()]


def canonical(names: Iterable[str]) -> list[str]:
    """Canonical names, first occurrence kept, order preserved."""
    return list(dict.fromkeys(parse_voice(n).name for n in names))


def default_voices() -> list[str]:
    """Twelve varied voices (3 Piper, 5 Flite, 4 espeak-ng) shipped with this setup."""
    return list(DEFAULT_VOICES)


def speaker(name: str) -> str:
    """The speaker a voice is: ``backend:voice`` without its rate and pitch options
    (``flite:awb@0.9`` -> ``flite:awb``), but with a Piper pitch (see ``_SPEAKER_OPTIONS``)."""
    spec = parse_voice(name)
    keep = _SPEAKER_OPTIONS.get(spec.backend, ())
    return VoiceSpec(spec.backend, spec.voice, tuple(o for o in spec.options if o[0] in keep)).name


def split_voices(voices: Sequence[str], held_out: Sequence[str]) -> tuple[list[str], list[str]]:
    """Partition ``voices`` into (train voices, held-out voices), canonical names; a voice is
    held out when its speaker is a held-out voice's (any rate or pitch of it)."""
    held = {speaker(v) for v in held_out}
    names = canonical(voices)
    return [v for v in names if speaker(v) not in held], [v for v in names if speaker(v) in held]


def voices_for_split(voices: Sequence[str] | None, split: str,
                     held_out: Sequence[str] = DEFAULT_HELD_OUT) -> list[str]:
    """Voices that may voice ``split``: train never uses a held-out voice, dev/test only them.

    ``voices=None`` takes the allowed part of :func:`default_voices`. An explicit list
    containing a voice on the wrong side raises :class:`HeldOutVoiceError`.
    """
    bench = {speaker(v) for part in BENCHMARK_VOICES.values() for v in part}
    if split.startswith("benchmark-"):
        part = split.removeprefix("benchmark-")
        allowed = canonical(BENCHMARK_VOICES.get(part, ()))
        chosen = allowed if voices is None else canonical(voices)
        wrong = [v for v in chosen if v not in allowed]
        if wrong or not chosen:
            raise HeldOutVoiceError(f"the {split} split is voiced only by {', '.join(allowed) or 'no voice'}"
                                    + (f", not {', '.join(wrong)}" if wrong else ""))
        return chosen
    if voices is not None and (taken := [v for v in canonical(voices) if speaker(v) in bench]):
        raise HeldOutVoiceError(f"voice(s) {', '.join(taken)} are speakers of the unseen-voice benchmark: "
                                f"no {split} data may use them, at any rate or pitch")
    held_split = split in HELD_OUT_SPLITS
    if voices is None:
        train, held = split_voices(default_voices(), held_out)
        chosen = held if held_split else train
    else:
        train, held = split_voices(voices, held_out)
        wrong = train if held_split else held
        if wrong:
            raise HeldOutVoiceError(
                f"voice(s) {', '.join(wrong)} cannot voice the {split} split: "
                + ("dev/test use only held-out voices (--held-out)" if held_split
                   else "their speakers are held out for dev/test (at any rate or pitch)"))
        chosen = held if held_split else train
    if not chosen:
        raise HeldOutVoiceError(f"no voice left for the {split} split (held out: {', '.join(held_out)})")
    return chosen


@functools.lru_cache(maxsize=2)
def _espeak_names(binary: str) -> tuple[frozenset[str], frozenset[str]]:
    """(languages, variants) that ``espeak-ng --voices`` lists."""
    def column(args: list[str], col: int) -> frozenset[str]:
        out = subprocess.run([binary, *args], capture_output=True, text=True, check=False,
                             timeout=30).stdout
        return frozenset(ln.split()[col] for ln in out.splitlines()[1:] if len(ln.split()) > col)

    variants = frozenset(v.rsplit("/", 1)[-1] for v in column(["--voices=variant"], 4))
    return column(["--voices"], 1), variants


def _check_espeak(language: str, variant: str, binary: str) -> None:
    languages, variants = _espeak_names(binary)
    if language not in languages:
        raise ValueError(f"espeak-ng has no language {language!r}")
    if variant and variant not in variants:
        raise ValueError(f"espeak-ng has no variant {variant!r} (try m1..m8, f1..f5)")
