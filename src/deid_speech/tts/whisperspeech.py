"""WhisperSpeech backend (T2S + S2A transformers, Vocos vocoder) run from local weights only.

Install: ``pip install whisperspeech`` (0.8.9's source read). WhisperSpeech fetches its weights
from the Hugging Face hub at run time; this backend never does. It looks in
``$DEID_SPEECH_WHISPERSPEECH_DIR`` (default ``~/.cache/deid-speech/whisperspeech``) for
``t2s-small-en+pl.model``, ``s2a-q4-small-en+pl.model`` (else any ``t2s-*``/``s2a-*.model``),
``vocos-encodec-24khz/{config.yaml,pytorch_model.bin}``, ``encodec_24khz-d7cc33bc.th`` (also
in ``$TORCH_HOME/hub/checkpoints``) and, for a ``speaker`` clip only, ``spkrec-ecapa-voxceleb/``
(the ``ECAPA_FILES``). Each can be passed instead (``t2s_ref``, ``s2a_ref``, ``vocos_dir``,
``encodec_path``, ``speaker_encoder_dir``); Vocos and ECAPA are also found in the hub cache.
Downloads asked for while the pipeline is built are answered from these files or refused.
Sampling is seeded per call (``seed``), so a text gives the same audio on one machine.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from deid_speech.tts.base import BackendUnavailable, Synthesizer, register

_INSTALL = "pip install whisperspeech"
T2S_FILE, S2A_FILE = "t2s-small-en+pl.model", "s2a-q4-small-en+pl.model"
ENCODEC_FILE = "encodec_24khz-d7cc33bc.th"  # loaded by Vocos through torch.hub
VOCOS_REPO, VOCOS_FILES = "charactr/vocos-encodec-24khz", ("config.yaml", "pytorch_model.bin")
ECAPA_REPO = "speechbrain/spkrec-ecapa-voxceleb"
ECAPA_FILES = ("hyperparams.yaml", "embedding_model.ckpt", "mean_var_norm_emb.ckpt", "classifier.ckpt",
               "label_encoder.txt")
SAMPLE_RATE = 24000  # Vocos (EnCodec 24 kHz) output rate
Ref = str | Path | None


def _cache(env: str, sub: str) -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME", "~/.cache")
    return Path(os.environ.get(env) or os.path.join(xdg, sub)).expanduser()


def default_dir() -> Path:
    """``$DEID_SPEECH_WHISPERSPEECH_DIR``, else ``<deid-speech cache>/whisperspeech``."""
    env = os.environ.get("DEID_SPEECH_WHISPERSPEECH_DIR")
    return Path(env).expanduser() if env else _cache("DEID_SPEECH_CACHE", "deid-speech") / "whisperspeech"


def _hf_snapshot(repo: str, filename: str) -> Path | None:
    """The hub-cache folder of ``repo`` if it holds ``filename`` (never downloads)."""
    from huggingface_hub import try_to_load_from_cache  # a whisperspeech dependency

    hit = try_to_load_from_cache(repo, filename)
    return Path(hit).parent if isinstance(hit, str) else None


class Weights(NamedTuple):
    t2s: Path
    s2a: Path
    vocos: Path
    encodec: Path
    ecapa: Path | None


def resolve_weights(t2s_ref: Ref = None, s2a_ref: Ref = None, vocos_dir: Ref = None,
                    encodec_path: Ref = None, speaker_encoder_dir: Ref = None,
                    weights_dir: Ref = None, need_ecapa: bool = False) -> Weights:
    """Local weight paths; BackendUnavailable naming every missing piece and where it looked."""
    root = Path(weights_dir).expanduser() if weights_dir else default_dir()
    missing: list[str] = []

    def pick(what: str, given: Ref, cands: list[Any], files: tuple[str, ...] = ()) -> Path:
        paths = [Path(c).expanduser() for c in ([given] if given else cands) if c]
        for p in paths:
            if all((p / f).is_file() for f in files) if files else p.is_file():
                return p
        missing.append(f"{what} (looked in: {', '.join(map(str, paths)) or 'hub cache'})")
        return Path()

    def model(kind: str, ref: Ref, name: str) -> Path:
        base = Path(ref).expanduser() if ref else root
        cands = [base] if ref and not base.is_dir() else [base / name, *sorted(base.glob(f"{kind}-*.model"))]
        path = pick(f"{kind} model {name}", None, cands)
        if ":" in str(path):
            raise ValueError(f"{path}: WhisperSpeech reads a path with ':' as a hub reference; rename it")
        return path

    t2s, s2a = model("t2s", t2s_ref, T2S_FILE), model("s2a", s2a_ref, S2A_FILE)
    vocos = pick(f"Vocos {'/'.join(VOCOS_FILES)}", vocos_dir,
                 [root / "vocos-encodec-24khz", _hf_snapshot(VOCOS_REPO, VOCOS_FILES[0])], VOCOS_FILES)
    encodec = pick(f"EnCodec {ENCODEC_FILE}", encodec_path,
                   [root / ENCODEC_FILE, _cache("TORCH_HOME", "torch") / "hub" / "checkpoints" / ENCODEC_FILE])
    ecapa = pick(f"speaker encoder {ECAPA_REPO}", speaker_encoder_dir,
                 [root / "spkrec-ecapa-voxceleb", _hf_snapshot(ECAPA_REPO, ECAPA_FILES[0])],
                 ECAPA_FILES) if need_ecapa else None
    if missing:
        raise BackendUnavailable(f"WhisperSpeech weights not found: {'; '.join(missing)}; put them in "
                                 f"{root} or set DEID_SPEECH_WHISPERSPEECH_DIR")
    return Weights(t2s, s2a, vocos, encodec, ecapa)


@contextlib.contextmanager
def _offline(w: Weights) -> Iterator[None]:
    """Answer Vocos' hub downloads and EnCodec's torch.hub download from ``w``; refuse any other."""
    import torch
    import vocos.pretrained as vp

    def hub(repo_id: str, filename: str, **_: Any) -> str:
        if repo_id != VOCOS_REPO or filename not in VOCOS_FILES:
            raise BackendUnavailable(f"offline: WhisperSpeech asked for {repo_id}/{filename}")
        return str(w.vocos / filename)

    def url(u: str, *_: Any, map_location: Any = "cpu", **__: Any) -> Any:
        if u.rsplit("/", 1)[-1] != ENCODEC_FILE:
            raise BackendUnavailable(f"offline: WhisperSpeech asked to download {u}")
        return torch.load(w.encodec, map_location=map_location)

    saved = vp.hf_hub_download, torch.hub.load_state_dict_from_url
    vp.hf_hub_download, torch.hub.load_state_dict_from_url = hub, url
    try:
        yield
    finally:
        vp.hf_hub_download, torch.hub.load_state_dict_from_url = saved


@register("whisperspeech")
class WhisperSpeechSynthesizer(Synthesizer):
    """WhisperSpeech at 24 kHz; ``speaker`` (an audio clip) clones that voice, ``cps`` sets the pace."""

    def __init__(self, speaker: Ref = None, cps: float = 15.0, lang: str = "en", seed: int | None = 0,
                 t2s_ref: Ref = None, s2a_ref: Ref = None, vocos_dir: Ref = None, encodec_path: Ref = None,
                 speaker_encoder_dir: Ref = None, weights_dir: Ref = None, device: str | None = None,
                 optimize: bool = True) -> None:
        if not 5 <= cps <= 30:
            raise ValueError(f"whisperspeech cps (characters per second) must be 5..30, got {cps}")
        if speaker is not None and not Path(speaker).expanduser().is_file():
            raise ValueError(f"speaker clip not found: {speaker}")
        if importlib.util.find_spec("whisperspeech") is None:  # cheap: imports nothing
            raise BackendUnavailable(f"whisperspeech not installed; run: {_INSTALL}")
        self.weights = w = resolve_weights(t2s_ref, s2a_ref, vocos_dir, encodec_path, speaker_encoder_dir,
                                           weights_dir, need_ecapa=speaker is not None)
        from whisperspeech.pipeline import Pipeline

        with _offline(w):
            self._pipe = Pipeline(t2s_ref=str(w.t2s), s2a_ref=str(w.s2a), optimize=optimize, device=device)
        if not (hasattr(self._pipe, "t2s") and hasattr(self._pipe, "s2a")):  # Pipeline prints and goes on
            raise RuntimeError(f"WhisperSpeech could not load {w.t2s} / {w.s2a} (traceback above)")
        self._speaker = None
        if speaker is not None:  # embed the clip once, with the local ECAPA model, not per segment
            from speechbrain.pretrained import EncoderClassifier

            with tempfile.TemporaryDirectory(prefix="deid-ecapa-") as tmp:  # weights dir may be read-only
                self._pipe.encoder = EncoderClassifier.from_hparams(
                    source=str(w.ecapa), savedir=tmp, overrides={"pretrained_path": str(w.ecapa)},
                    run_opts={"device": "cpu" if self._pipe.device == "mps" else self._pipe.device})
            self._speaker = self._pipe.extract_spk_emb(str(Path(speaker).expanduser()))
        self.speaker, self.cps, self.lang, self.seed = speaker, float(cps), lang, seed
        self.sample_rate = SAMPLE_RATE
        self.name = (f"whisperspeech-{Path(speaker).stem if speaker else 'default'}"
                     + ("" if cps == 15 else f"-c{cps:g}"))

    def synthesize(self, text: str) -> np.ndarray:
        text = " ".join(text.split())
        if not text:
            return np.zeros(0, dtype=np.float32)
        import torch

        if self.seed is not None:
            torch.manual_seed(self.seed)
        out = self._pipe.generate(text, speaker=self._speaker, lang=self.lang, cps=self.cps)
        audio = np.squeeze(out.detach().float().cpu().numpy() if hasattr(out, "detach") else np.asarray(out))
        if audio.ndim != 1:
            raise RuntimeError(f"WhisperSpeech returned audio of shape {audio.shape}, expected mono")
        return np.clip(audio.astype(np.float32), -1.0, 1.0)
