"""The shipped recogniser's format: a CTranslate2 model.bin writer, and an int8 delta over
the base model.bin that rebuilds the fine-tuned weights with numpy alone."""
import json

import numpy as np
import pytest

from deid_speech.asr.convert import read_model_bin, write_model_bin
from deid_speech.errors import DeidError


def _model(rng: np.random.Generator) -> dict:
    variables = {
        "decoder/activation": np.array(3, np.int8),  # scalars, as CTranslate2 stores flags
        "decoder/num_heads": np.array(6, np.int16),
        "decoder/embeddings/weight": rng.normal(0, 0.05, (40, 8)).astype(np.float16),
        "decoder/layer_0/ffn/linear_0/weight": rng.normal(0, 0.05, (16, 8)).astype(np.float16),
        "decoder/layer_0/ffn/linear_0/bias": rng.normal(0, 0.05, 16).astype(np.float16),
        "encoder/conv1/weight": rng.normal(0, 0.05, (8, 4, 3)).astype(np.float16),
    }
    return {"version": 6, "spec": "WhisperSpec", "revision": 3, "variables": variables,
            "aliases": {"decoder/projection/weight": "decoder/embeddings/weight"}}


def _folder(path, model):
    path.mkdir(parents=True)
    write_model_bin(path / "model.bin", model)
    (path / "config.json").write_text(json.dumps({"suppress_ids": [1, 2]}))
    (path / "vocabulary.txt").write_text("a\nb\n")
    return path


def test_model_bin_round_trips_byte_for_byte(tmp_path):
    write_model_bin(tmp_path / "a.bin", _model(np.random.default_rng(0)))
    m = read_model_bin(tmp_path / "a.bin")
    assert m["variables"]["decoder/activation"].shape == ()  # a scalar stays a scalar
    assert m["aliases"] == {"decoder/projection/weight": "decoder/embeddings/weight"}
    write_model_bin(tmp_path / "b.bin", m)
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "b.bin").read_bytes()


def test_delta_stores_what_changed_and_rebuilds_it(tmp_path, monkeypatch):
    from deid_speech.asr import delta

    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(1)
    base = _model(rng)
    base_dir = _folder(tmp_path / "base", base)
    ft = {**base, "variables": dict(base["variables"])}
    for name in ("decoder/embeddings/weight", "decoder/layer_0/ffn/linear_0/weight", "decoder/layer_0/ffn/linear_0/bias"):
        w = ft["variables"][name]
        ft["variables"][name] = (w.astype(np.float32) + rng.normal(0, 0.01, w.shape)).astype(np.float16)
    ft_dir = _folder(tmp_path / "ft", ft)

    meta = delta.make_delta(ft_dir, tmp_path / "ship", base=str(base_dir))
    assert meta["variables"] == sorted(["decoder/embeddings/weight", "decoder/layer_0/ffn/linear_0/weight",
                                        "decoder/layer_0/ffn/linear_0/bias"])  # the encoder did not change
    assert meta["max_abs_error"] < 2e-4
    assert delta.is_delta(tmp_path / "ship")

    out = delta.materialize(tmp_path / "ship")
    rebuilt = read_model_bin(out / "model.bin")
    assert list(rebuilt["variables"]) == list(base["variables"]) and rebuilt["aliases"] == base["aliases"]
    for name, w in ft["variables"].items():
        r = rebuilt["variables"][name]
        assert r.dtype == w.dtype and r.shape == w.shape
        if name in meta["variables"]:
            assert np.abs(r.astype(np.float32) - w.astype(np.float32)).max() < 1e-3, name
            assert not np.array_equal(r, base["variables"][name])
        else:
            assert np.array_equal(r, w), name  # untouched bit for bit
    assert (out / "config.json").read_text() == (base_dir / "config.json").read_text()
    assert (out / "vocabulary.txt").is_file() and (out / ".verified").is_file()
    stamp = (out / "model.bin").stat().st_mtime_ns
    assert delta.materialize(tmp_path / "ship") == out and (out / "model.bin").stat().st_mtime_ns == stamp


def test_delta_refuses_another_base_and_a_broken_delta(tmp_path, monkeypatch):
    from deid_speech.asr import delta

    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path / "cache"))
    base = _model(np.random.default_rng(2))
    base_dir = _folder(tmp_path / "base", base)
    ft = {**base, "variables": {**base["variables"], "decoder/layer_0/ffn/linear_0/bias":
                                np.zeros(16, np.float16)}}
    delta.make_delta(_folder(tmp_path / "ft", ft), tmp_path / "ship", base=str(base_dir))

    other = {**base, "variables": {**base["variables"], "encoder/conv1/weight": np.zeros((8, 4, 3), np.float16)}}
    write_model_bin(base_dir / "model.bin", other)  # the installed base changed since the delta was made
    with pytest.raises(DeidError, match="another"):
        delta.materialize(tmp_path / "ship")

    (tmp_path / "ship" / delta.META).write_text("{not json")
    with pytest.raises(DeidError, match="unreadable ASR delta"):
        delta.materialize(tmp_path / "ship")

    wrong = {**base, "variables": {**base["variables"], "decoder/layer_0/ffn/linear_0/bias": np.zeros(15, np.float16)}}
    with pytest.raises(DeidError, match="shape"):
        delta.make_delta(_folder(tmp_path / "wrong", wrong), tmp_path / "ship2", base=str(tmp_path / "ft"))
