"""Carry an experiment's end-to-end half to a GPU machine that has no network (issue 21).

The GPU machine has torch, transformers and onnxruntime, but no Whisper weights, no
pocketsphinx, soundfile or faster-whisper, and a device call carries at most 64 MiB. So
the voiced data, the base weights and the missing packages travel in two parts, one per
call (the second call finds the first part still there):

* ``a/``: tiny.en as an HF folder with its weights as int8 rows with float16 scales
  (``deid_speech.asr.delta.pack``; ~39 MB against 151 MB in float32), soundfile and cffi
  wheels for Python 3.12, and the parts of faster-whisper that deid-speech uses there
  (the log-Mel features and the Silero VAD model; its ``__init__`` would import PyAV and
  CTranslate2, which are not there).
* ``b/``: pocketsphinx 5.0.4 for Python 3.12 (5.1.1 has no such wheel) carrying 5.1.1's
  dictionary, the only model file that differs, so the shipped hashes hold; and a mirror of
  the repository root with the experiment's config, its training, dev and test manifests
  with the audio as 16 kHz Ogg Opus (~17 kb/s), the arms' sentence files, and the finished
  data and arm steps, so that the experiment resumes at its trainings.

Here::

    python bench/gpu_bundle.py pack --config configs/experiments/small-llm-gpu.toml --out .gpu

On the GPU machine, from the repository root (``.gpu`` ignored by git, carried)::

    python3 bench/gpu_bundle.py unpack --bundle .gpu      # /tmp/site and .gpu/a/base-hf
    PYTHONPATH=/tmp/site:src python3 -m deid_speech experiment \
        --config .gpu/b/configs/experiments/small-llm-gpu.toml --system e2e --jobs 10

The config there is the original with ``--base .gpu/a/base-hf`` added to the e2e
trainer's options; the telephone copy of test is left out unless ``--telephone``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PY = "3.12"  # the GPU machine's Python
PLATFORMS = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64"]
WHEELS_A = ["soundfile==0.14.0", "cffi==2.1.1", "pycparser==3.12", "jiwer==4.0.0", "rapidfuzz==3.14.6"]
WHEELS_B = ["pocketsphinx==5.0.4"]
OPUS_LEVEL = 0.95  # libsndfile's Opus compression level: ~17 kb/s on speech at 16 kHz
FW_FILES = ["utils.py", "vad.py", "feature_extractor.py", "assets/__init__.py", "assets/silero_vad_v6.onnx"]


def _download(specs: list[str], dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", PY, "--implementation", "cp", "-d", str(dest)]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    subprocess.run(cmd + specs, check=True)
    return sorted(dest.glob("*.whl"))


def pack_base(out: Path) -> dict:
    """tiny.en's HF folder, weights int8 (``base.npz``), the rest as is (``base/``)."""
    from safetensors.numpy import load_file

    from deid_speech.asr.delta import pack
    from deid_speech.asr.hf import base_folder

    src = base_folder("tiny.en")
    (out / "base").mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and not f.name.startswith("."):
            shutil.copy2(f, out / "base" / f.name)
    arrays: dict[str, np.ndarray] = {}
    err = 0.0
    for f in sorted(src.glob("*.safetensors")):
        for name, w in load_file(str(f)).items():
            err = max(err, pack(name, w.astype(np.float32), arrays))
            arrays[f"{name}:shape"] = np.array(w.shape, dtype=np.int64)
    np.savez(out / "base.npz", **arrays)
    return {"base": str(src), "largest_error": err, "mb": round((out / "base.npz").stat().st_size / 1e6, 1)}


def unpack_base(a: Path) -> Path:
    """The float32 HF folder ``a/base-hf`` rebuilt from ``a/base.npz`` and ``a/base/``."""
    from safetensors.numpy import save_file

    from deid_speech.asr.delta import unpack

    out = a / "base-hf"
    if (out / "model.safetensors").is_file():
        return out
    shutil.copytree(a / "base", out, dirs_exist_ok=True)
    z = np.load(a / "base.npz")
    names = sorted({k.rsplit(":", 1)[0] for k in z.files})
    tensors = {n: unpack(n, z, tuple(int(x) for x in z[f"{n}:shape"])).astype(np.float32) for n in names}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def fw_shim(site: Path) -> None:
    """faster_whisper's features and VAD without its ``__init__`` (PyAV, CTranslate2)."""
    import faster_whisper

    src = Path(faster_whisper.__file__).parent
    dst = site / "faster_whisper"
    for f in FW_FILES:
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / f, dst / f)
    (dst / "__init__.py").write_text('"""faster-whisper\'s features and Silero VAD only (gpu_bundle)."""\n')


def repack_pocketsphinx(wheel: Path) -> None:
    """Put this installation's dictionary (pocketsphinx 5.1.1's) into the 5.0.4 wheel."""
    import pocketsphinx

    ours = Path(pocketsphinx.__file__).parent / "model" / "en-us" / "cmudict-en-us.dict"
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = ours.read_bytes() if item.filename.endswith("cmudict-en-us.dict") else zin.read(item)
            zout.writestr(item, data)
    tmp.replace(wheel)  # the RECORD hash of the dictionary is stale: install with pip --no-deps --no-compile


def to_opus(src: Path, dst: Path) -> float:
    import soundfile as sf

    from deid_speech.asr.hf import load_audio

    x = load_audio(str(src))
    dst.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(dst), x, 16000, format="OGG", subtype="OPUS", compression_level=OPUS_LEVEL)
    return len(x) / 16000


def copy_manifest(src: Path, root: Path, mirror: Path, done: dict[Path, Path]) -> int:
    """``src`` (a manifest under ``root``) at the same place under ``mirror``, each audio
    file as Opus beside it (once per file), the paths relative to the new manifest."""
    from deid_speech import manifest

    rows = manifest.read(src, need=("text", "audio"), check_audio=True, line_ids=False)
    dst = mirror / src.resolve().relative_to(root)
    out = []
    for r in rows:
        audio = r.audio.resolve()
        if audio not in done:
            target = (mirror / audio.relative_to(root)).with_suffix(".opus")
            to_opus(audio, target)
            done[audio] = target
        out.append({**r.to_dict(), "audio": os.path.relpath(done[audio], dst.parent)})
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out))
    return len(out)


def device_config(text: str, base: str) -> str:
    """The config with ``--base`` added to the e2e trainer's options."""
    m = re.search(r"^e2e\s*=\s*\[", text, flags=re.M)
    if not m:
        return text.rstrip() + f'\n\n[train]\ne2e = ["--base", "{base}"]\n'
    return text[:m.end()] + f'"--base", "{base}", ' + text[m.end():]


def pack(config: Path, out: Path, telephone: bool) -> dict:
    from deid_speech.experiment import TEST_SETS, ExperimentConfig

    cfg = ExperimentConfig.load(config)
    steps = json.loads((cfg.out_dir / "steps.json").read_text())
    need = ["data"] + [f"arm {a.name}" for a in cfg.arms]
    if missing := [s for s in need if s not in steps]:
        sys.exit(f"gpu_bundle: build the data first (missing steps: {', '.join(missing)})")
    a, b = out / "a", out / "b"
    shutil.rmtree(out, ignore_errors=True)
    report: dict = {"a": pack_base(a)}
    _download(WHEELS_A, a / "whl")
    fw_shim(a / "site")
    for w in _download(WHEELS_B, b / "whl"):
        if w.name.startswith("pocketsphinx"):
            repack_pocketsphinx(w)
    mirror = b
    root = ROOT.resolve()
    done: dict[Path, Path] = {}
    data = cfg.data.out_dir
    manifests = [data / "train" / "manifest.jsonl", data / "dev" / "manifest.jsonl"]
    manifests += [data / t / "manifest.jsonl" for t in TEST_SETS if t != "test_telephone" or telephone]
    manifests += [cfg.out_dir / "arms" / arm.name / "train.jsonl" for arm in cfg.arms]
    manifests += list(cfg.extra_tests.values())
    report["manifests"] = {str(m.relative_to(root)): copy_manifest(m, root, mirror, done) for m in manifests}
    for arm in cfg.arms:
        for s in ([arm.sentences] if isinstance(arm.sentences, str) else arm.sentences or []):
            dst = mirror / Path(s).resolve().relative_to(root)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, dst)
    exp = mirror / cfg.out_dir.relative_to(root)
    (exp / "steps.json").write_text(json.dumps({k: steps[k] for k in need}, indent=2) + "\n")
    shutil.copy2(data / "dataset.json", exp / "data" / "dataset.json")
    cfg_dst = mirror / config.resolve().relative_to(root)
    cfg_dst.parent.mkdir(parents=True, exist_ok=True)
    cfg_dst.write_text(device_config(config.read_text(), str((a / "base-hf").relative_to(root))))
    report["audio_files"] = len(done)
    for part in (a, b):
        report[f"{part.name}_mb"] = round(sum(f.stat().st_size for f in part.rglob("*") if f.is_file()) / 2**20, 1)
    return report


def unpack(bundle: Path, site: Path) -> dict:
    site.mkdir(parents=True, exist_ok=True)
    wheels = sorted(glob.glob(str(bundle / "a" / "whl" / "*.whl")) + glob.glob(str(bundle / "b" / "whl" / "*.whl")))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--upgrade", "--target", str(site), *wheels], check=True)
    shutil.copytree(bundle / "a" / "site", site, dirs_exist_ok=True)
    sys.path.insert(0, str(site))
    return {"base": str(unpack_base(bundle / "a")), "wheels": [Path(w).name for w in wheels]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--out", type=Path, default=ROOT / ".gpu")
    p.add_argument("--telephone", action="store_true", help="also the telephone copy of test")
    u = sub.add_parser("unpack")
    u.add_argument("--bundle", type=Path, default=ROOT / ".gpu")
    u.add_argument("--site", type=Path, default=Path("/tmp/site"))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    if args.cmd == "pack":
        print(json.dumps(pack(args.config, args.out.resolve(), args.telephone), indent=2))
    else:
        print(json.dumps(unpack(args.bundle.resolve(), args.site), indent=2))


if __name__ == "__main__":
    main()
