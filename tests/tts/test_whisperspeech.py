"""WhisperSpeech backend: offline weight resolution, clear failures, and the Pipeline wiring.

The real package and weights are not here, so the wiring is checked against a fake
``whisperspeech.pipeline.Pipeline`` (plus fake ``vocos.pretrained`` and
``speechbrain.pretrained``) that makes the same download calls the real Pipeline makes
and records what it was given.
"""
from __future__ import annotations

import importlib.machinery
import sys
import types
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from deid_speech.tts import whisperspeech as ws
from deid_speech.tts.base import (
    TARGET_SR,
    BackendUnavailable,
    get_synthesizer,
    voice_tagged,
)
from deid_speech.tts.voices import UnknownVoice, default_voices, parse_voice

torch = pytest.importorskip("torch")

TAGGED = "ok my number is [PHONE] nine one seven three [PHONE] lah, call me"
CHAR_S = 0.05  # the fake speaks each character for 50 ms


def _touch(path: Path, data: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _layout(root: Path, ecapa: bool = True) -> Path:
    """The documented folder layout, with placeholder files (a real torch file for EnCodec)."""
    _touch(root / ws.T2S_FILE)
    _touch(root / ws.S2A_FILE)
    for f in ws.VOCOS_FILES:
        _touch(root / "vocos-encodec-24khz" / f)
    root.mkdir(parents=True, exist_ok=True)
    torch.save({"codebook": torch.arange(4.0)}, root / ws.ENCODEC_FILE)
    if ecapa:
        for f in ws.ECAPA_FILES:
            _touch(root / "spkrec-ecapa-voxceleb" / f)
    return root


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No real caches: env points into tmp, the hub cache holds nothing."""
    for var in ("DEID_SPEECH_WHISPERSPEECH_DIR", "DEID_SPEECH_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    monkeypatch.setattr(ws, "_hf_snapshot", lambda repo, filename: None)


class FakeEncoder:
    calls: ClassVar[list[dict]] = []

    @classmethod
    def from_hparams(cls, **kwargs: object) -> FakeEncoder:
        source = Path(str(kwargs["source"]))
        assert all((source / f).is_file() for f in ws.ECAPA_FILES)
        cls.calls.append(kwargs)
        return cls()


class FakePipeline:
    """Mimics whisperspeech 0.8.9's Pipeline: the vocoder's downloads happen in __init__."""

    instances: ClassVar[list[FakePipeline]] = []

    def __init__(self, t2s_ref=None, s2a_ref=None, optimize=True, torch_compile=False, device=None):
        self.kwargs = {"t2s_ref": t2s_ref, "s2a_ref": s2a_ref, "optimize": optimize, "device": device}
        self.device = device or "cpu"
        self.t2s, self.s2a, self.encoder = object(), object(), None
        vp = sys.modules["vocos.pretrained"]  # Vocos.from_pretrained -> hf_hub_download
        self.vocos_files = [vp.hf_hub_download(repo_id=ws.VOCOS_REPO, filename=f) for f in ws.VOCOS_FILES]
        self.encodec_state = torch.hub.load_state_dict_from_url(  # EncodecModel.encodec_model_24khz
            "https://dl.fbaipublicfiles.com/encodec/v0/" + ws.ENCODEC_FILE, map_location="cpu", check_hash=True)
        self.embedded: list[str] = []
        self.generated: list[tuple] = []
        FakePipeline.instances.append(self)

    def extract_spk_emb(self, fname):
        assert self.encoder is not None, "would download speechbrain's ECAPA"
        self.embedded.append(fname)
        return torch.full((192,), 0.25)

    def generate(self, text, speaker=None, lang="en", cps=15, step_callback=None):
        self.generated.append((text, speaker, lang, cps))
        sr = ws.SAMPLE_RATE
        n = int(CHAR_S * len(text) * sr)
        tone = 0.4 * torch.sin(2 * torch.pi * 220 * torch.arange(n) / sr) * (0.9 + 0.1 * torch.rand(n))
        return torch.cat([torch.zeros(int(0.2 * sr)), tone, torch.zeros(int(0.1 * sr))])[None]  # (1, T)


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("network download attempted")


@pytest.fixture
def fake_ws(monkeypatch: pytest.MonkeyPatch) -> type[FakePipeline]:
    FakePipeline.instances, FakeEncoder.calls = [], []
    mods = {name: types.ModuleType(name) for name in
            ("whisperspeech", "whisperspeech.pipeline", "vocos", "vocos.pretrained",
             "speechbrain", "speechbrain.pretrained")}
    for name, mod in mods.items():
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
        monkeypatch.setitem(sys.modules, name, mod)
    mods["whisperspeech.pipeline"].Pipeline = FakePipeline
    mods["vocos.pretrained"].hf_hub_download = _never
    mods["vocos"].pretrained = mods["vocos.pretrained"]
    mods["speechbrain.pretrained"].EncoderClassifier = FakeEncoder
    return FakePipeline


# --- failing clearly, before any heavy work ------------------------------------------------


def test_missing_package_names_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "whisperspeech", None)  # as if not installed
    with pytest.raises(BackendUnavailable, match="pip install whisperspeech") as err:
        get_synthesizer("whisperspeech", weights_dir=_layout(tmp_path / "w"))
    assert "\n" not in str(err.value)


def test_missing_weights_names_every_path_looked_in(fake_ws, tmp_path: Path) -> None:
    root = tmp_path / "empty"
    clip = _touch(tmp_path / "ref.wav")
    with pytest.raises(BackendUnavailable) as err:
        get_synthesizer("whisperspeech", weights_dir=root, speaker=clip)
    msg = str(err.value)
    assert "\n" not in msg and "DEID_SPEECH_WHISPERSPEECH_DIR" in msg
    for path in (root / ws.T2S_FILE, root / ws.S2A_FILE, root / "vocos-encodec-24khz",
                 root / ws.ENCODEC_FILE, tmp_path / "torch-home/hub/checkpoints" / ws.ENCODEC_FILE,
                 root / "spkrec-ecapa-voxceleb"):
        assert str(path) in msg
    assert fake_ws.instances == []  # nothing was built


def test_only_the_missing_piece_is_reported(fake_ws, tmp_path: Path) -> None:
    root = _layout(tmp_path / "w", ecapa=False)
    (root / "vocos-encodec-24khz" / "pytorch_model.bin").unlink()  # half a Vocos folder
    with pytest.raises(BackendUnavailable) as err:
        get_synthesizer("whisperspeech", weights_dir=root)
    msg = str(err.value)
    assert "Vocos" in msg and ws.T2S_FILE not in msg and "EnCodec" not in msg
    assert "speaker encoder" not in msg  # no speaker clip, so ECAPA is not needed


# --- where the weights are found -----------------------------------------------------------


def test_default_dir_env_and_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert ws.default_dir() == tmp_path / "xdg" / "deid-speech" / "whisperspeech"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ws.default_dir() == tmp_path / "home/.cache/deid-speech/whisperspeech"
    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path / "c"))
    assert ws.default_dir() == tmp_path / "c" / "whisperspeech"
    monkeypatch.setenv("DEID_SPEECH_WHISPERSPEECH_DIR", str(tmp_path / "ws"))
    assert ws.default_dir() == tmp_path / "ws"


def test_resolve_from_env_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = _layout(tmp_path / "env")
    monkeypatch.setenv("DEID_SPEECH_WHISPERSPEECH_DIR", str(root))
    w = ws.resolve_weights(need_ecapa=True)
    assert w == (root / ws.T2S_FILE, root / ws.S2A_FILE, root / "vocos-encodec-24khz",
                 root / ws.ENCODEC_FILE, root / "spkrec-ecapa-voxceleb")
    assert ws.resolve_weights().ecapa is None


def test_explicit_folder_beats_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DEID_SPEECH_WHISPERSPEECH_DIR", str(_layout(tmp_path / "env")))
    mine = _layout(tmp_path / "mine")
    assert ws.resolve_weights(weights_dir=mine).t2s == mine / ws.T2S_FILE


def test_explicit_files_and_folders(tmp_path: Path) -> None:
    root = _layout(tmp_path / "w")
    t2s = _touch(tmp_path / "elsewhere" / "my-t2s.model")
    s2a_dir = tmp_path / "s2a"
    other = _touch(s2a_dir / "s2a-q4-base-en+pl.model")  # not the default name: found by glob
    enc = _touch(tmp_path / "e.th")
    w = ws.resolve_weights(t2s_ref=t2s, s2a_ref=s2a_dir, encodec_path=enc, weights_dir=root)
    assert (w.t2s, w.s2a, w.encodec, w.vocos) == (t2s, other, enc, root / "vocos-encodec-24khz")
    # an explicit path that is not there is reported as itself, never replaced by the folder's file
    with pytest.raises(BackendUnavailable, match="nope.model") as err:
        ws.resolve_weights(t2s_ref=tmp_path / "nope.model", weights_dir=root)
    assert str(root / ws.T2S_FILE) not in str(err.value)


def test_encodec_found_in_torch_hub_cache(tmp_path: Path) -> None:
    root = _layout(tmp_path / "w")
    (root / ws.ENCODEC_FILE).unlink()
    cached = _touch(tmp_path / "torch-home/hub/checkpoints" / ws.ENCODEC_FILE)
    assert ws.resolve_weights(weights_dir=root).encodec == cached


def test_hub_cache_snapshot_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = _layout(tmp_path / "w", ecapa=False)
    snap = tmp_path / "hub/snapshots/abc"
    for f in ws.ECAPA_FILES:
        _touch(snap / f)
    monkeypatch.setattr(ws, "_hf_snapshot", lambda repo, fn: snap if repo == ws.ECAPA_REPO else None)
    assert ws.resolve_weights(weights_dir=root, need_ecapa=True).ecapa == snap


def test_path_with_colon_is_refused(tmp_path: Path) -> None:
    bad = _touch(tmp_path / "a:b" / "t2s.model")  # whisperspeech would read it as repo:file
    with pytest.raises(ValueError, match="hub reference"):
        ws.resolve_weights(t2s_ref=bad, weights_dir=_layout(tmp_path / "w"))


# --- the pipeline wiring (fake whisperspeech) ------------------------------------------------


def test_local_weights_and_speaker_reach_the_pipeline(fake_ws, tmp_path: Path) -> None:
    root = _layout(tmp_path / "w")
    clip = _touch(tmp_path / "ref.wav")
    saved = torch.hub.load_state_dict_from_url
    synth = get_synthesizer("whisperspeech", weights_dir=root, speaker=clip, cps=12)
    (pipe,) = fake_ws.instances
    assert pipe.kwargs["t2s_ref"] == str(root / ws.T2S_FILE)
    assert pipe.kwargs["s2a_ref"] == str(root / ws.S2A_FILE)
    assert pipe.vocos_files == [str(root / "vocos-encodec-24khz" / f) for f in ws.VOCOS_FILES]
    assert torch.equal(pipe.encodec_state["codebook"], torch.arange(4.0))
    # the download hooks are put back once the pipeline is built
    assert torch.hub.load_state_dict_from_url is saved
    assert sys.modules["vocos.pretrained"].hf_hub_download is _never
    (enc,) = FakeEncoder.calls
    assert enc["source"] == str(root / "spkrec-ecapa-voxceleb")
    assert enc["overrides"] == {"pretrained_path": str(root / "spkrec-ecapa-voxceleb")}
    assert Path(str(enc["savedir"])) != root / "spkrec-ecapa-voxceleb"  # weights dir may be read-only
    synth.synthesize("hello there")
    synth.synthesize("again")
    assert pipe.embedded == [str(clip)]  # the clip is embedded once, not per call
    (text, speaker, lang, cps), _ = pipe.generated
    assert text == "hello there" and lang == "en" and cps == 12.0
    assert torch.equal(speaker, torch.full((192,), 0.25))
    assert synth.name == "whisperspeech-ref-c12"


def test_output_is_mono_float32_at_24k(fake_ws, tmp_path: Path) -> None:
    synth = get_synthesizer("whisperspeech", weights_dir=_layout(tmp_path / "w", ecapa=False))
    audio = synth.synthesize("  nine one  ")
    assert synth.sample_rate == 24000
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert len(audio) == int(0.2 * 24000) + int(CHAR_S * len("nine one") * 24000) + int(0.1 * 24000)
    assert fake_ws.instances[0].generated[0][1] is None  # default speaker
    assert synth.synthesize("   ").size == 0 and len(fake_ws.instances[0].generated) == 1


def test_seed_makes_output_repeatable(fake_ws, tmp_path: Path) -> None:
    root = _layout(tmp_path / "w", ecapa=False)
    seeded = get_synthesizer("whisperspeech", weights_dir=root)
    assert np.array_equal(seeded.synthesize("same text"), seeded.synthesize("same text"))
    free = get_synthesizer("whisperspeech", weights_dir=root, seed=None)
    assert not np.array_equal(free.synthesize("same text"), free.synthesize("same text"))


@pytest.mark.parametrize("asks, what", [
    (lambda: sys.modules["vocos.pretrained"].hf_hub_download(repo_id="someone/else", filename="x.bin"),
     "someone/else"),
    (lambda: torch.hub.load_state_dict_from_url("https://example.org/encodec_48khz-7e698e3e.th"),
     "encodec_48khz"),
])
def test_offline_guard_refuses_other_downloads(fake_ws, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               asks, what: str) -> None:
    saved = torch.hub.load_state_dict_from_url
    monkeypatch.setattr(FakePipeline, "__init__", lambda self, **kwargs: asks())
    with pytest.raises(BackendUnavailable, match=what):
        get_synthesizer("whisperspeech", weights_dir=_layout(tmp_path / "w", ecapa=False))
    assert sys.modules["vocos.pretrained"].hf_hub_download is _never
    assert torch.hub.load_state_dict_from_url is saved


def test_output_is_clipped(fake_ws, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(FakePipeline, "generate", lambda self, text, **kw: torch.tensor([[-3.0, 0.5, 2.0]]))
    synth = get_synthesizer("whisperspeech", weights_dir=_layout(tmp_path / "w", ecapa=False))
    assert synth.synthesize("x").tolist() == [-1.0, 0.5, 1.0]


def test_failed_model_load_is_an_error(fake_ws, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_init = FakePipeline.__init__

    def init_without_t2s(self, **kwargs):  # the real Pipeline prints the traceback and goes on
        real_init(self, **kwargs)
        del self.t2s

    monkeypatch.setattr(FakePipeline, "__init__", init_without_t2s)
    with pytest.raises(RuntimeError, match="could not load"):
        get_synthesizer("whisperspeech", weights_dir=_layout(tmp_path / "w", ecapa=False))


def test_voice_tagged_gets_entity_spans(fake_ws, tmp_path: Path) -> None:
    synth = get_synthesizer("whisperspeech", weights_dir=_layout(tmp_path / "w", ecapa=False))
    utt = voice_tagged(TAGGED, synth, np.random.default_rng(0))
    assert utt.sample_rate == TARGET_SR
    (span,) = utt.entities
    assert span.label == "PHONE" and span.text == "nine one seven three" and span.source == synth.name
    # right length only if 24 kHz was declared (16 kHz would make it 1.5x longer)
    assert abs((span.end - span.start) - CHAR_S * len(span.text)) < 0.04
    seg = utt.audio[int(span.start * TARGET_SR):int(span.end * TARGET_SR)]
    assert np.sqrt(np.mean(seg ** 2)) > 0.1


# --- voice names ---------------------------------------------------------------------------


def test_voice_names(fake_ws, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clip = _touch(tmp_path / "clips" / "spk-1.wav")
    spec = parse_voice(f"whisperspeech:{clip}@12")
    assert (spec.voice, spec.options) == (str(clip), (("cps", 12.0),))
    assert spec.name == f"whisperspeech:{clip}@12"
    assert parse_voice("whisperspeech:default@15").name == "whisperspeech:default"
    monkeypatch.setenv("DEID_SPEECH_WHISPERSPEECH_DIR", str(_layout(tmp_path / "w")))
    synth = spec.build()
    assert fake_ws.instances[-1].embedded == [str(clip)] and synth.cps == 12.0
    parse_voice("whisperspeech:default").build()
    assert fake_ws.instances[-1].embedded == []
    with pytest.raises(UnknownVoice, match="speaker clip not found"):
        parse_voice(f"whisperspeech:{tmp_path / 'missing.wav'}").build()
    with pytest.raises(UnknownVoice):
        parse_voice(f"flite:{clip}")  # paths stay whisperspeech-only
    assert not any(v.startswith("whisperspeech") for v in default_voices())
