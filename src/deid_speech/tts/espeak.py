"""espeak-ng backend: formant synthesis through the ``espeak-ng`` command.

Install: ``apt-get install -y espeak-ng`` (Debian package; 1.51 tested). Output is
deterministic. English variants: ``en-us``, ``en-gb``, ``en-029`` (Caribbean),
``en-gb-scotland``, ...; voice variants are appended as ``+m1``..``+m7``,
``+f1``..``+f5`` etc. (e.g. ``en-gb+f3``).
"""
from __future__ import annotations

import io
import subprocess

import numpy as np
import soundfile as sf

from deid_speech.tts.base import Synthesizer, register, require_binary

_INSTALL = "apt-get install -y espeak-ng"


def espeak_binary() -> str:
    """Path of the espeak-ng executable; raises BackendUnavailable if absent."""
    return require_binary("espeak-ng", _INSTALL)


@register("espeak")
class EspeakSynthesizer(Synthesizer):
    """espeak-ng voice ``language[+variant]`` at ``speed`` wpm and ``pitch`` 0-99.

    ``word_gap`` adds pauses between words in units of 10 ms (espeak ``-g``).
    """

    def __init__(self, voice: str = "en-us", variant: str | None = "m3", speed: int = 160,
                 pitch: int = 50, word_gap: int = 0, amplitude: int = 100) -> None:
        if not 80 <= speed <= 500:
            raise ValueError(f"espeak speed must be 80..500 wpm, got {speed}")
        if not 0 <= pitch <= 99:
            raise ValueError(f"espeak pitch must be 0..99, got {pitch}")
        self.binary = espeak_binary()
        self.voice = voice + (f"+{variant}" if variant else "")
        self.speed = int(speed)
        self.pitch = int(pitch)
        self.word_gap = int(word_gap)
        self.amplitude = int(amplitude)
        self.sample_rate = 22050  # espeak-ng's fixed output rate; checked per call
        self.name = f"espeak-{self.voice}-s{self.speed}-p{self.pitch}"

    def command(self) -> list[str]:
        """The espeak-ng command line (text is fed on stdin)."""
        return [self.binary, "-v", self.voice, "-s", str(self.speed), "-p", str(self.pitch),
                "-g", str(self.word_gap), "-a", str(self.amplitude), "--stdin", "--stdout"]

    def synthesize(self, text: str) -> np.ndarray:
        text = " ".join(text.split())
        if not text:
            return np.zeros(0, dtype=np.float32)
        proc = subprocess.run(self.command(), input=text.encode("utf-8"),
                              capture_output=True, check=False, timeout=120)
        if proc.returncode != 0 or not proc.stdout:
            err = proc.stderr.decode("utf-8", "replace").strip()
            raise RuntimeError(f"espeak-ng failed (voice {self.voice!r}): {err or proc.returncode}")
        audio, sr = sf.read(io.BytesIO(proc.stdout), dtype="float32", always_2d=True)
        if sr != self.sample_rate:
            raise RuntimeError(f"espeak-ng returned {sr} Hz, expected {self.sample_rate}")
        return audio.mean(axis=1).astype(np.float32)
