"""bench/gpu_bundle.py: what travels to a GPU machine comes back as it left (the base
weights within int8 error, the config with the carried base), and what the GPU image lacks
is hidden by its emulation unless a shim stands in."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_bundle", ROOT / "bench" / "gpu_bundle.py")
gpu_bundle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_bundle)


def test_the_device_config_trains_from_the_carried_base() -> None:
    text = 'out_dir = "x"\n[train]\nner = ["--asr-noise"]\ne2e = ["--max-steps", "200"]\n'
    out = gpu_bundle.device_config(text, ".gpu/a/base-hf")
    assert 'e2e = ["--base", ".gpu/a/base-hf", "--max-steps", "200"]' in out and 'ner = ["--asr-noise"]' in out
    assert gpu_bundle.device_config('out_dir = "x"\n', "B").endswith('[train]\ne2e = ["--base", "B"]\n')
    # a config whose e2e options come from its base: they are written out, after --base
    derived = 'base = "s.toml"\nout_dir = "y"\n[train]\nner = []\n'
    out = gpu_bundle.device_config(derived, "B", ["--lr", "1e-4"])
    assert tomllib.loads(out)["train"] == {"ner": [], "e2e": ["--base", "B", "--lr", "1e-4"]}


def test_base_weights_come_back_within_int8_error(tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    from deid_speech.asr.delta import pack

    rng = np.random.default_rng(0)
    weights = {"w": rng.normal(size=(8, 5)).astype(np.float32), "b": rng.normal(size=5).astype(np.float32),
               "conv": rng.normal(size=(4, 3, 2)).astype(np.float32)}
    arrays: dict[str, np.ndarray] = {}
    for name, w in weights.items():
        pack(name, w, arrays)
        arrays[f"{name}:shape"] = np.array(w.shape)
    a = tmp_path / "a"
    (a / "base").mkdir(parents=True)
    (a / "base" / "config.json").write_text('{"model_type": "whisper"}')
    np.savez(a / "base.npz", **arrays)
    out = gpu_bundle.unpack_base(a)
    back = load_file(str(out / "model.safetensors"))
    assert set(back) == set(weights) and (out / "config.json").is_file()
    for name, w in weights.items():
        assert back[name].shape == w.shape and back[name].dtype == np.float32
        assert np.abs(back[name] - w).max() <= np.abs(w).max() / 127 + 1e-3
        assert not np.array_equal(back[name], np.zeros_like(w))
    (out / "model.safetensors").write_bytes(b"kept")  # a rebuilt base is not rebuilt again
    assert gpu_bundle.unpack_base(a) == out and (out / "model.safetensors").read_bytes() == b"kept"


def test_the_emulated_image_hides_a_package_unless_a_shim_stands_in(tmp_path: Path) -> None:
    hook, shims = tmp_path / "hook", tmp_path / "shims"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(gpu_bundle.BLOCKER)
    (shims / "json" / "tool").mkdir(parents=True)
    env = {**os.environ, "GPU_EMU_HIDDEN": "json,csv", "GPU_EMU_SHIMS": str(shims),
           "PYTHONPATH": os.pathsep.join([str(hook), str(shims)])}

    def imports(module: str) -> str:
        p = subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True, text=True)
        return p.stderr.strip().splitlines()[-1] if p.returncode else "ok"

    assert imports("csv") == "ModuleNotFoundError: not on the GPU image: csv"
    assert imports("json.decoder") == "ModuleNotFoundError: not on the GPU image: json.decoder"
    (shims / "json" / "__init__.py").write_text("")
    (shims / "json" / "tool" / "__init__.py").write_text("")
    assert imports("json.tool") == "ok"  # the shim's own modules
    assert imports("email") == "ok"  # what the image has


def test_packing_before_the_data_is_built_is_a_one_line_error(tmp_path: Path) -> None:
    import pytest

    config = tmp_path / "x.toml"
    config.write_text('out_dir = "out"\nseeds = [0]\n')  # nothing built there: no steps.json
    with pytest.raises(SystemExit) as e:
        gpu_bundle.pack(config, tmp_path / "bundle", False)
    assert e.value.code == "gpu_bundle: build the data first (missing steps: data)"
    assert not (tmp_path / "bundle").exists()


def test_manifests_keep_their_place_and_find_their_audio_once_the_parts_are_laid_together(tmp_path: Path) -> None:
    """An experiment whose data folder is a link to another's: its manifests stay under its own
    folder, and an arm's manifest in part c names audio that part b carries."""
    import json

    import soundfile as sf

    root = tmp_path / "repo"
    shared = root / "out" / "experiments" / "n145" / "data"
    (shared / "train" / "audio").mkdir(parents=True)
    exp = root / "out" / "experiments" / "n300"
    exp.mkdir(parents=True)
    (exp / "data").symlink_to(Path("..") / "n145" / "data")
    (exp / "arms" / "x" / "audio").mkdir(parents=True)
    tone = (0.1 * np.sin(np.arange(8000) / 5)).astype(np.float32)
    for f in (shared / "train" / "audio" / "a.wav", exp / "arms" / "x" / "audio" / "b.wav"):
        sf.write(f, tone, 16000)
    (exp / "data" / "train" / "manifest.jsonl").write_text(json.dumps({"text": "a", "audio": "audio/a.wav"}) + "\n")
    arm = exp / "arms" / "x" / "train.jsonl"
    arm.write_text("".join(json.dumps(r) + "\n" for r in (
        {"text": "a", "audio": "../../data/train/audio/a.wav"}, {"text": "b", "audio": "audio/b.wav"})))
    bundle, done = tmp_path / "bundle", {}
    assert gpu_bundle.copy_manifest(exp / "data" / "train" / "manifest.jsonl", root, bundle / "b", done) == 1
    assert gpu_bundle.copy_manifest(arm, root, bundle / "c", done) == 2
    assert (bundle / "b" / "out" / "experiments" / "n300" / "data" / "train" / "manifest.jsonl").is_file()
    assert not (bundle / "c" / "out" / "experiments" / "n145").exists()  # a.wav travels once, in b
    merged = gpu_bundle.merged_mirror(bundle, tmp_path / "merged")
    for m in (merged / "out" / "experiments" / "n300" / "data" / "train" / "manifest.jsonl",
              merged / "out" / "experiments" / "n300" / "arms" / "x" / "train.jsonl"):
        for line in m.read_text().splitlines():
            assert (m.parent / json.loads(line)["audio"]).resolve().is_file()
