"""Festival backend: the Festival 2.5 speech synthesis system through ``text2wave``.

Install: ``apt-get install -y festival festvox-kdlpc16k`` (Debian packages; the voice
``ked`` is the CMU KED diphone voice, an American English male, 16 kHz). Festival's
voices are named by their Scheme function ``voice_<name>_diphone`` (or ``voice_<name>``);
any installed one works. This voice is used by no training or tuning data: it voices
the unseen-voice benchmark (:mod:`deid_speech.tts.benchmark`). Output is deterministic.
"""
from __future__ import annotations

import functools
import os

from deid_speech.tts.base import CommandSynthesizer, register, require_binary

_INSTALL = "apt-get install -y festival festvox-kdlpc16k"
_VOICE_ROOT = "/usr/share/festival/voices"


def text2wave_binary() -> str:
    """Path of the text2wave executable; raises BackendUnavailable if absent."""
    return require_binary("text2wave", _INSTALL)


@functools.lru_cache(maxsize=1)
def available_voices() -> tuple[str, ...]:
    """Installed voice folders (``ked_diphone``, ...) under Festival's voice root."""
    if not os.path.isdir(_VOICE_ROOT):
        return ()
    return tuple(sorted(v for lang in os.listdir(_VOICE_ROOT)
                        for v in os.listdir(os.path.join(_VOICE_ROOT, lang))))


@register("festival")
class FestivalSynthesizer(CommandSynthesizer):
    """A Festival voice; ``stretch`` > 1 speaks slower (Festival's Duration_Stretch)."""

    def __init__(self, voice: str = "ked", stretch: float = 1.0) -> None:
        self.binary = text2wave_binary()
        folder = next((v for v in available_voices() if v in (voice, f"{voice}_diphone")), None)
        if folder is None:
            raise ValueError(f"festival voice {voice!r} not installed; installed: "
                             f"{', '.join(available_voices()) or 'none'} ({_INSTALL})")
        if stretch <= 0:
            raise ValueError(f"stretch must be > 0, got {stretch}")
        self.voice, self.folder, self.stretch = voice, folder, float(stretch)
        self.sample_rate = self._run("a")[1]
        self.name = f"festival-{voice}" + ("" if stretch == 1.0 else f"-x{stretch:g}")

    def command(self, text_file: str, wav_file: str) -> list[str]:
        return [self.binary, "-eval", f"(voice_{self.folder})",
                "-eval", f"(Parameter.set 'Duration_Stretch {self.stretch})", text_file, "-o", wav_file]
