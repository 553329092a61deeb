"""Carry an experiment's end-to-end half to a GPU machine that has no network (issue 21).

The GPU machine has torch, transformers and onnxruntime, but no Whisper weights, no
pocketsphinx, soundfile or faster-whisper, and a device call carries at most 64 MiB. So
the voiced data, the base weights and the missing packages travel in two parts, one per
call (the second call finds the first part still there):

* ``a/``: tiny.en as an HF folder with its weights as int8 rows with float16 scales
  (``deid_speech.asr.delta.pack``; ~39 MB against 151 MB in float32), soundfile, cffi and
  jiwer wheels for Python 3.12, and the parts of faster-whisper and spaCy that deid-speech
  imports there (:func:`shims`: the log-Mel features, the Silero VAD model, the English
  stop words; faster-whisper's ``__init__`` would import PyAV and CTranslate2).
* ``b/``: pocketsphinx 5.0.4 for Python 3.12 (5.1.1 has no such wheel) carrying 5.1.1's
  dictionary, the only model file that differs, so the shipped hashes hold; and a mirror of
  the repository root with the experiment's config, its training, dev and test manifests
  with the audio as 16 kHz Ogg Opus (~17 kb/s), the arms' sentence files, and the finished
  data and arm steps, so that the experiment resumes at its trainings.
* ``c/``: the arms' training manifests and the audio only they name, in the same mirror
  (laid over part b on the device). At n = 300 one part b of everything held 68 MiB, more
  than a call carries beside the repository; each part must stay under :data:`PART_MIB`.

Here::

    python bench/gpu_bundle.py pack --config configs/experiments/small-llm-gpu.toml --out .gpu

Before spending device time, ``emulate`` runs the device's steps here with the packages
that the GPU image lacks hidden (a short training and a few scored files of each test set,
with the shipped e2e model too, so that the tagging paths run). Then on the GPU machine
(``bench/gpu_run.sh``; ``.gpu`` is ignored by git and travels as ``carry``)::

    bash bench/gpu_run.sh check                 # call 1, carry .gpu/a: unpack it to /tmp/gpu-a
    bash bench/gpu_run.sh stage                 # call 2, carry .gpu/c: copied to /tmp/gpu-c
    bash bench/gpu_run.sh run configs/experiments/small-llm-gpu.toml 540
                                                # call 3, carry .gpu/b: copied to /tmp/gpu-b, c over it, run
    bash bench/gpu_run.sh run configs/experiments/small-llm-gpu.toml 540
                                                # call 4 if needed, carry nothing: resumes

The repository travels with every call and must fit beside a part: during the calls, take its
seven largest files out of the index and list them in ``.git/info/exclude`` (6.9 MB remain in session 29), and
``git add`` them back after::

    src/deid_speech/models/{asr,asr-full,asr-base,e2e}/delta.npz  src/deid_speech/models/e2e/tokenizer.json
    src/deid_speech/models/ner/tok2vec/model  src/deid_speech/data/examples/call.wav

A path carried in one call is gone from the repository there in the next call that does not
carry it (seen in session 22), so everything a later call needs lives under /tmp. The
config there is the original with ``--base .gpu/a/base-hf`` added to the e2e trainer's
options; the telephone copy of test is left out unless ``--telephone``.
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
PART_MIB = 56  # what one part may hold: a call carries 64 MiB, the repository without its seven largest files ~7
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


def unpack_base(a: Path, out: Path | None = None) -> Path:
    """The float32 HF folder ``out`` (default ``a/base-hf``) rebuilt from ``a/base.npz`` and ``a/base/``."""
    from safetensors.numpy import save_file

    from deid_speech.asr.delta import unpack

    out = out or a / "base-hf"
    if (out / "model.safetensors").is_file():
        return out
    shutil.copytree(a / "base", out, dirs_exist_ok=True)
    z = np.load(a / "base.npz")
    names = sorted({k.rsplit(":", 1)[0] for k in z.files})
    tensors = {n: unpack(n, z, tuple(int(x) for x in z[f"{n}:shape"])).astype(np.float32) for n in names}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def shims(site: Path) -> None:
    """What deid-speech imports there from packages the GPU image lacks: faster_whisper's
    features and VAD without its ``__init__`` (PyAV, CTranslate2), with metadata for the
    pin check, and spaCy's English stop-word list (``spoken.common_word``) without spaCy."""
    import faster_whisper
    import spacy.lang.en.stop_words as sw

    words = site / "spacy" / "lang" / "en"
    words.mkdir(parents=True, exist_ok=True)
    for init in (site / "spacy", site / "spacy" / "lang", words):
        (init / "__init__.py").write_text('"""spaCy\'s English stop words only (gpu_bundle)."""\n')
    shutil.copy2(sw.__file__, words / "stop_words.py")

    src = Path(faster_whisper.__file__).parent
    dst = site / "faster_whisper"
    for f in FW_FILES:
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / f, dst / f)
    (dst / "__init__.py").write_text('"""faster-whisper\'s features and Silero VAD only (gpu_bundle)."""\n')
    # the Silero model's pin (deid_speech.models) reads the package's version from its metadata
    info = site / f"faster_whisper-{faster_whisper.__version__}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: faster-whisper\nVersion: {faster_whisper.__version__}\n")
    (info / "RECORD").write_text("")


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
    file as Opus beside it (once per file, in the mirror of the first manifest that names it:
    ``done`` maps it to its place relative to the root of the parts), the paths relative to the
    new manifest as they will be once the parts are laid over one another."""
    from deid_speech import manifest

    rows = manifest.read(src, need=("text", "audio"), check_audio=True, line_ids=False)
    # its own place, not its link's target: an experiment's data may be a link to another's
    rel = Path(os.path.abspath(src)).relative_to(root)
    dst = mirror / rel
    out = []
    for r in rows:
        audio = r.audio.resolve()
        if audio not in done:
            done[audio] = audio.relative_to(root).with_suffix(".opus")
            to_opus(audio, mirror / done[audio])
        out.append({**r.to_dict(), "audio": os.path.relpath(done[audio], rel.parent)})
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out))
    return len(out)


def device_config(text: str, base: str, e2e: list[str] | tuple[str, ...] = ()) -> str:
    """The config with ``--base`` added to the e2e trainer's options: to its ``e2e`` line, or,
    where the file has none, to ``e2e`` (the options its own base configs give it)."""
    m = re.search(r"^e2e\s*=\s*\[", text, flags=re.M)
    if m:
        return text[:m.end()] + f'"--base", "{base}", ' + text[m.end():]
    line = "e2e = " + json.dumps(["--base", base, *e2e])
    if t := re.search(r"^\[train\][ \t]*$", text, flags=re.M):
        return text[:t.end()] + "\n" + line + text[t.end():]
    return text.rstrip() + f"\n\n[train]\n{line}\n"


def pack(config: Path, out: Path, telephone: bool) -> dict:
    from deid_speech.experiment import TEST_SETS, ExperimentConfig
    from deid_speech.make_dataset import read_config

    cfg = ExperimentConfig.load(config)
    cfg.check_tests()
    record = cfg.out_dir / "steps.json"  # none yet: nothing built
    steps = json.loads(record.read_text()) if record.is_file() else {}
    need = ["data"] + [f"arm {a.name}" for a in cfg.arms]
    if missing := [s for s in need if s not in steps]:
        sys.exit(f"gpu_bundle: build the data first (missing steps: {', '.join(missing)})")
    a, b = out / "a", out / "b"
    shutil.rmtree(out, ignore_errors=True)
    report: dict = {"a": pack_base(a)}
    _download(WHEELS_A, a / "whl")
    shims(a / "site")
    for w in _download(WHEELS_B, b / "whl"):
        if w.name.startswith("pocketsphinx"):
            repack_pocketsphinx(w)
    mirror = b
    root = ROOT.resolve()
    done: dict[Path, Path] = {}
    # the experiment's own data folder, as the device looks for it: cfg.data.out_dir is the same
    # folder resolved, which is another experiment's when this one's is a link to it
    data = cfg.out_dir / "data"
    manifests = [data / "train" / "manifest.jsonl", data / "dev" / "manifest.jsonl"]
    manifests += [data / t / "manifest.jsonl" for t in TEST_SETS if t != "test_telephone" or telephone]
    manifests += list(cfg.extra_tests.values())
    report["manifests"] = {str(m.relative_to(root)): copy_manifest(m, root, mirror, done) for m in manifests}
    # the arms' own audio (what the Baseline's manifests did not bring) goes to part c: at n = 300
    # part b held 68 MiB, more than one call carries beside the repository
    arms_mirror = out / "c"
    arms_mirror.mkdir(parents=True, exist_ok=True)  # there even with no arms: `stage` carries it
    for arm in cfg.arms:
        m = cfg.out_dir / "arms" / arm.name / "train.jsonl"
        report["manifests"][str(m.relative_to(root))] = copy_manifest(m, root, arms_mirror, done)
    for arm in cfg.arms:
        for s in arm.sentence_files:
            dst = mirror / Path(s).resolve().relative_to(root)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, dst)
    exp = mirror / cfg.out_dir.relative_to(root)
    (exp / "data").mkdir(parents=True, exist_ok=True)
    (exp / "steps.json").write_text(json.dumps({k: steps[k] for k in need}, indent=2) + "\n")
    shutil.copy2(data / "dataset.json", exp / "data" / "dataset.json")
    first, *bases = read_config(config)[1]  # the config, then its base configs (the same folder)
    cfg_dst = mirror / first.relative_to(root)
    cfg_dst.parent.mkdir(parents=True, exist_ok=True)
    cfg_dst.write_text(device_config(first.read_text(), str((a / "base-hf").relative_to(root)),
                                     cfg.train_args.get("e2e", [])))
    for f in bases:
        shutil.copy2(f, cfg_dst.parent / f.name)
    report["audio_files"] = len(done)
    for part in (a, b, arms_mirror):
        report[f"{part.name}_mb"] = round(sum(f.stat().st_size for f in part.rglob("*") if f.is_file()) / 2**20, 1)
    if big := [k for k in ("a_mb", "b_mb", "c_mb") if report[k] > PART_MIB]:
        print(f"gpu_bundle: warning: {', '.join(big)} over {PART_MIB} MiB: with the repository beside it, "
              "a call cannot carry it", file=sys.stderr)
    return report


def merged_mirror(bundle: Path, dest: Path) -> Path:
    """Parts b and c laid over one another in ``dest``, as ``bench/gpu_run.sh run`` lays them in
    /tmp/gpu-b on the device (the arms' manifests in c name audio of b by relative paths)."""
    shutil.copytree(bundle / "b", dest, dirs_exist_ok=True)
    if (bundle / "c").is_dir():
        shutil.copytree(bundle / "c", dest, dirs_exist_ok=True)
    return dest


def unpack(parts: list[Path], site: Path) -> dict:
    """On the GPU machine: each part's wheels installed into ``site``, its shims copied there,
    and (part a) the base model rebuilt beside it."""
    site.mkdir(parents=True, exist_ok=True)
    wheels = sorted(w for part in parts for w in glob.glob(str(part / "whl" / "*.whl")))
    if wheels:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--upgrade", "--target", str(site), *wheels], check=True)
    for part in parts:
        if (part / "site").is_dir():
            shutil.copytree(part / "site", site, dirs_exist_ok=True)
    # pocketsphinx: 5.0.4's compiled decoder with 5.1.1's model files (every one checked against
    # the shipped SHA-256 table when used); its metadata says 5.1.1 so that the pin admits it
    for old in site.glob("pocketsphinx-5.0.4.dist-info"):
        new = site / "pocketsphinx-5.1.1.dist-info"
        shutil.rmtree(new, ignore_errors=True)
        old.rename(new)
        meta = new / "METADATA"
        meta.write_text(re.sub(r"^Version: .*$", "Version: 5.1.1", meta.read_text(), count=1, flags=re.M))
    sys.path.insert(0, str(site))
    bases = [str(unpack_base(part)) for part in parts if (part / "base.npz").is_file()]
    return {"base": bases, "wheels": [Path(w).name for w in wheels]}


# what the GPU image lacks (KINDS.md's package list) and the bundle does not bring
HIDDEN = ("ctranslate2", "av", "spacy", "presidio_analyzer", "presidio_anonymizer", "piper", "piper_onnx", "vosk",
          "llama_cpp", "ray", "librosa", "thinc", "faster_whisper")
BLOCKER = """import os, sys
HIDDEN, SHIMS = set(os.environ["GPU_EMU_HIDDEN"].split(",")), os.environ["GPU_EMU_SHIMS"]
class _Hide:
    def find_spec(self, name, path=None, target=None):
        parts = name.split(".")
        if parts[0] in HIDDEN and not any(os.path.exists(os.path.join(SHIMS, *parts) + x) for x in ("", ".py")):
            raise ModuleNotFoundError(f"not on the GPU image: {name}")
        return None
sys.meta_path.insert(0, _Hide())
"""


def emulate(bundle: Path, work: Path, n: int = 3) -> dict:
    """The device's steps here, on a few records, with :data:`HIDDEN` hidden (the shims of
    part a stand in, as there): a 2-step training from the bundled base, then ``eval``
    of that model and of the shipped e2e model (its HF folder without a CTranslate2 copy,
    so that it decodes as on the GPU and writes tags) on ``n`` files of each test manifest."""
    from deid_speech import manifest
    from deid_speech.e2e.infer import check_model_dir

    shutil.rmtree(work, ignore_errors=True)
    (work / "hook").mkdir(parents=True)
    (work / "hook" / "sitecustomize.py").write_text(BLOCKER)
    a = bundle / "a"
    env = {**os.environ, "GPU_EMU_HIDDEN": ",".join(HIDDEN), "GPU_EMU_SHIMS": str(a / "site"),
           "PYTHONPATH": os.pathsep.join([str(work / "hook"), str(a / "site"), str(ROOT / "src")])}
    base = unpack_base(a, work / "base-hf")
    b = merged_mirror(bundle, work / "mirror")  # as on the device: part c's arms over part b
    for m in b.rglob("*.jsonl"):  # every manifest's audio travelled (a missing file is a one-line error)
        if m.parent.name != "whl" and '"audio"' in m.read_text(encoding="utf-8")[:4096]:
            manifest.read(m, need=("text", "audio"), check_audio=True, line_ids=False)
    exp = next(p for p in (b / "out" / "experiments").iterdir() if (p / "steps.json").is_file())
    small = {}
    for name, src in (("train", exp / "data" / "train" / "manifest.jsonl"), ("dev", exp / "data" / "dev" / "manifest.jsonl")):
        rows = manifest.read(src, need=("text", "audio"), line_ids=False)[: 2 * n]
        manifest.write(work / f"{name}.jsonl", rows)
        small[name] = work / f"{name}.jsonl"
    tests = sorted(p for p in b.rglob("manifest.jsonl") if "/train/" not in str(p) and "/dev/" not in str(p))
    shipped = work / "shipped-e2e"
    shutil.copytree(check_model_dir(ROOT / "src" / "deid_speech" / "models" / "e2e"), shipped,
                    ignore=shutil.ignore_patterns("ct2"))
    runs = [["train", "e2e", "--train", str(small["train"]), "--dev", str(small["dev"]), "--out", str(work / "e2e"),
             "--device", "cpu", "--base", str(base), "--max-steps", "2", "--batch-size", "2", "--eval-every", "1",
             "--no-ct2", "--progress", "off"]]
    for model in (work / "e2e", shipped):
        runs += [["eval", "--manifest", str(t), "--system", "e2e", "--model", str(model), "--limit", str(n),
                  "--out-dir", str(work / f"eval-{model.name}-{k}"), "--progress", "off"] for k, t in enumerate(tests)]
    report = []
    for k, argv in enumerate(runs):
        # the CPU dev score of a training decodes a CTranslate2 copy (on the GPU the model itself)
        hidden = ",".join(h for h in HIDDEN if not (k == 0 and h == "ctranslate2"))
        p = subprocess.run([sys.executable, "-m", "deid_speech", *argv], env={**env, "GPU_EMU_HIDDEN": hidden},
                           capture_output=True, text=True)
        report.append({"argv": " ".join(argv[:2] + argv[argv.index("--out" if k == 0 else "--out-dir") + 1:][:1]),
                       "exit": p.returncode, "error": p.stderr.strip().splitlines()[-1:] if p.returncode else []})
    return {"ok": all(r["exit"] == 0 for r in report), "runs": report}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--out", type=Path, default=ROOT / ".gpu")
    p.add_argument("--telephone", action="store_true", help="also the telephone copy of test")
    u = sub.add_parser("unpack")
    u.add_argument("--part", type=Path, action="append", required=True, help="a bundle part (repeatable)")
    u.add_argument("--site", type=Path, default=Path("/tmp/site"))
    e = sub.add_parser("emulate")
    e.add_argument("--bundle", type=Path, default=ROOT / ".gpu")
    e.add_argument("--work", type=Path, default=Path("/tmp/gpu-emulate"))
    e.add_argument("-n", type=int, default=3, help="files of each test manifest")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    if args.cmd == "pack":
        print(json.dumps(pack(args.config, args.out.resolve(), args.telephone), indent=2))
    elif args.cmd == "unpack":
        print(json.dumps(unpack([p.resolve() for p in args.part], args.site), indent=2))
    else:
        res = emulate(args.bundle.resolve(), args.work, args.n)
        print(json.dumps(res, indent=2))
        sys.exit(0 if res["ok"] else 1)


if __name__ == "__main__":
    main()
