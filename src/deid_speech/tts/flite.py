"""Flite backend: CMU Flite 2.2 through the ``flite`` command.

Install: ``apt-get install -y flite`` (Debian package ``flite`` 2.2). Built-in voices:
``kal`` (diphone, 8 kHz), ``kal16`` (diphone, 16 kHz), ``awb``, ``rms``, ``slt``
(clustergen, 16 kHz); a path to a ``.flitevox`` file also works. Output is
deterministic.
"""
from __future__ import annotations

import functools
import os
import subprocess

from deid_speech.tts.base import CommandSynthesizer, register, require_binary

_INSTALL = "apt-get install -y flite"
VOICES: tuple[str, ...] = ("kal", "kal16", "awb", "rms", "slt")


def flite_binary() -> str:
    """Path of the flite executable; raises BackendUnavailable if absent."""
    return require_binary("flite", _INSTALL)


@functools.lru_cache(maxsize=2)
def available_voices(binary: str | None = None) -> tuple[str, ...]:
    """Voice names the installed flite lists with ``-lv``."""
    out = subprocess.run([binary or flite_binary(), "-lv"], capture_output=True, text=True,
                         check=False, timeout=30).stdout
    return tuple(out.split(":", 1)[-1].split())


@register("flite")
class FliteSynthesizer(CommandSynthesizer):
    """Flite voice; ``stretch`` > 1 speaks slower, ``f0_mean`` (Hz) shifts pitch.

    Flite silently falls back to its default voice for an unknown name, so the name
    is checked against ``flite -lv`` here and a ValueError raised instead.
    """

    def __init__(self, voice: str = "slt", stretch: float = 1.0,
                 f0_mean: float | None = None) -> None:
        self.binary = flite_binary()
        if voice not in available_voices(self.binary) and not os.path.isfile(voice):
            raise ValueError(f"flite voice {voice!r} not available; installed: "
                             f"{', '.join(available_voices(self.binary))}")
        if stretch <= 0:
            raise ValueError(f"stretch must be > 0, got {stretch}")
        self.voice = voice
        self.stretch = float(stretch)
        self.f0_mean = f0_mean
        self.sample_rate = 0
        self.sample_rate = self._run("a")[1]  # kal: 8 kHz, the rest 16 kHz; probe to be sure
        self.name = f"flite-{os.path.basename(voice)}" + (
            "" if stretch == 1.0 else f"-x{stretch:g}")

    def command(self, text_file: str, wav_file: str) -> list[str]:
        """The flite command line reading ``text_file`` and writing ``wav_file``."""
        cmd = [self.binary, "-voice", self.voice, "--setf", f"duration_stretch={self.stretch}"]
        if self.f0_mean is not None:
            cmd += ["--setf", f"int_f0_target_mean={self.f0_mean}"]
        return cmd + ["-f", text_file, "-o", wav_file]
