"""``deid-speech make-dataset --config FILE``: seed -> augment -> tts into train/dev/test manifests.

The config is TOML (see ``configs/datasets/small.toml``)::

    out_dir = "out/datasets/small"   # relative paths are relative to the config file
    seed = 0
    seed_dir = "my/seed"             # optional: train.jsonl, dev.jsonl, test.jsonl (default: the shipped seed corpus)
    fresh_values = true              # refill every seed sentence's tags with new values
    limit = { train = 100, dev = 40, test = 40 }   # optional: N seed records per split, a seeded sample

    [[augment]]                      # zero or more arms; their sentences join train only
    strategy = "similar"             # similar | diverse
    temperature = 0.3
    n = 50
    backend = "template"             # template | llamacpp | ollama  (+ model, host, max_requests)
    # sentences = "bench/results/llm-arms/similar0.3.jsonl"
    #                                  # or: the first n sentences an earlier `augment` run
    #                                  # accepted (no generation; fewer than n is an error),
    #                                  # or a list of such files, taken in turn

    [tts]
    voices = "default"               # or one list: train uses its non-held-out voices, dev/test the rest
    held_out = ["flite:awb", ...]    # default: the catalogue's held-out voices
    train_augment = "light"          # channel policy for train; dev/test use eval_augment
    eval_augment = "none"
    telephone_test = true            # also voice test through the telephone channel
    workers = 2

Output: ``OUT/text/{train,dev,test}.jsonl`` (tagged sentences), ``OUT/augment/<arm>.jsonl``,
``OUT/{train,dev,test[,test_telephone]}/manifest.jsonl`` + FLAC, ``OUT/dataset_config.toml``
(the config as given) and ``OUT/dataset.json`` (resolved settings and every stage's summary).
Every stage resumes, so rerunning after an interruption finishes the job; a rerun with
a different config into the same folder is refused.
"""
from __future__ import annotations

import json
import random
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from deid_speech.audio import write_text_atomic
from deid_speech.errors import DeidError

SPLITS = ("train", "dev", "test")


def read_toml(path: Path) -> dict:
    """A config file's TOML; a one-line DeidError when it is missing or not TOML."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DeidError(f"{path}: no such config file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DeidError(f"{path}: not valid TOML ({exc})") from None


def read_config(path: Path) -> tuple[dict, list[Path]]:
    """A config's TOML with its ``base`` under it, and the files read (the config first).

    ``base = "other.toml"`` names a config in the same folder (so that relative paths mean the
    same in both); the config's keys override the base's: a table key by key, anything else
    (a value, a list, the list of ``[[arm]]`` tables) whole. A base may have a base of its own.
    A config with a base sets its own ``out_dir``: two configs never share their outputs."""
    layers: list[dict] = []
    files: list[Path] = []
    p = Path(path)
    while True:
        if p.resolve() in files:
            raise DeidError(f"{path}: its base configs form a loop ({' -> '.join(f.name for f in files + [p])})")
        layer = read_toml(p)
        files.append(p.resolve())
        layers.append(layer)
        base = layer.pop("base", None)
        if base is None:
            break
        if not isinstance(base, str) or not base or Path(base).name != base:
            raise DeidError(f"{p}: base must name a config file in the same folder (got {base!r})")
        if "out_dir" not in layer:
            raise DeidError(f"{p}: a config with a base needs an out_dir of its own")
        p = p.parent / base
    merged: dict = {}
    for layer in reversed(layers):
        merged = _merged(merged, layer)
    return merged, files


def _merged(under: dict, over: dict) -> dict:
    out = dict(under)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def config_record(files: list[Path]) -> str:
    """The text of a config (``read_config``'s files) to keep beside its outputs: the file
    itself, then each base's text as comments, so that the record is complete."""
    parts = [files[0].read_text(encoding="utf-8")]
    for f in files[1:]:
        lines = f.read_text(encoding="utf-8").splitlines()
        parts.append(f"\n# ---- its base, {f.name} ----\n" + "".join(f"# {x}".rstrip() + "\n" for x in lines))
    return "".join(parts)


def _shipped_seed() -> Path:
    from deid_speech import models

    return models.path("seed")

@dataclass(frozen=True)
class Arm:
    strategy: str = "similar"
    temperature: float | None = None
    n: int = 100
    backend: str = "template"
    model: str | None = None
    host: str = "http://localhost:11434"
    max_requests: int | None = None
    per_request: int = 20
    # an earlier `augment` output: its first n rows, no generation; or several (shards of one arm
    # written by jobs with different seeds): their rows taken in turn, a sentence frame seen before skipped
    sentences: str | tuple[str, ...] | None = None

    @property
    def temp(self) -> float:
        """The temperature the arm resolves to (its strategy's default when none is given)."""
        from deid_speech.augment.run import AugmentOptions

        return AugmentOptions(self.strategy, self.temperature).temp

    @property
    def name(self) -> str:
        return f"{self.strategy}{self.temp:g}"

    @property
    def sentence_files(self) -> tuple[str, ...]:
        """The files of ``sentences``, one or several (none: the arm generates its own)."""
        if self.sentences is None:
            return ()
        return (self.sentences,) if isinstance(self.sentences, str) else tuple(self.sentences)


@dataclass(frozen=True)
class TtsSettings:
    voices: tuple[str, ...] | None = None  # None: the default catalogue
    held_out: tuple[str, ...] | None = None
    train_augment: str = "light"
    eval_augment: str = "none"
    telephone_test: bool = False
    workers: int = 1


@dataclass(frozen=True)
class DatasetConfig:
    out_dir: Path
    seed_dir: Path
    seed: int = 0
    fresh_values: bool = True
    limit: dict = field(default_factory=dict)
    augment: tuple[Arm, ...] = ()
    tts: TtsSettings = TtsSettings()

    @classmethod
    def load(cls, path: Path) -> DatasetConfig:
        return cls.from_dict(read_config(path)[0], Path(path).resolve().parent)

    @classmethod
    def from_dict(cls, raw: dict, base: Path) -> DatasetConfig:
        """The config of a TOML table; a one-line DeidError naming the first bad key (every key is
        checked here, before anything is built)."""
        from deid_speech.tts.channel import POLICIES

        checked(raw, {"out_dir": str, "seed_dir": str, "seed": int, "fresh_values": bool, "limit": dict,
                      "augment": list, "tts": dict}, "")
        if "out_dir" not in raw:
            raise DeidError("the config needs out_dir")
        arms = parse_arms(raw.get("augment", []), base)
        t = dict(checked(raw.get("tts", {}), {"voices": (str, list), "held_out": (str, list), "train_augment": str,
                                              "eval_augment": str, "telephone_test": bool, "workers": int}, "[tts]"))
        for k in ("voices", "held_out"):
            v = t.get(k, "default")
            if v != "default" and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                raise DeidError(f'[tts] {k}: a list of voices, or "default" (got {v!r})')
            t[k] = None if v == "default" else tuple(v)
        for k in ("train_augment", "eval_augment"):
            if k in t and t[k] not in POLICIES:
                raise DeidError(f"[tts] {k}: one of {', '.join(POLICIES)} (got {t[k]!r})")
        if t.get("workers", 1) < 1:
            raise DeidError("[tts] workers must be at least 1")
        tts = TtsSettings(**t)
        limit = raw.get("limit", {})
        if set(limit) - set(SPLITS) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                               for v in limit.values()):
            raise DeidError("limit takes positive integers for train, dev, test")
        if len({a.name for a in arms}) != len(arms):
            raise DeidError("two [[augment]] arms have the same strategy and temperature")
        return cls(out_dir=(base / raw["out_dir"]).resolve(),
                   seed_dir=(base / raw["seed_dir"]).resolve() if "seed_dir" in raw else _shipped_seed(),
                   seed=raw.get("seed", 0), fresh_values=raw.get("fresh_values", True),
                   limit=dict(limit), augment=arms, tts=tts)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["out_dir"], d["seed_dir"] = str(self.out_dir), str(self.seed_dir)
        return json.loads(json.dumps(d))  # as it reads back from dataset.json


_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list",
          dict: "a table"}


def checked(table, types: dict, where: str) -> dict:
    """``table`` when it is a table whose keys are all in ``types`` (key -> a type or a tuple of
    types; an int passes for a float, a bool for nothing but bool), else a one-line DeidError
    naming the key (``where``: the table's name in the config, "" for the top level)."""
    if not isinstance(table, dict):
        raise DeidError(f"{where}: a table expected (got {table!r})")
    if unknown := set(table) - set(types):
        raise DeidError(f"bad config: unknown key(s) in {where}: {', '.join(sorted(unknown))}" if where
                        else f"unknown config key(s): {', '.join(sorted(unknown))}")
    for k, v in table.items():
        kinds = types[k] if isinstance(types[k], tuple) else (types[k],)
        ok = (int, float) if float in kinds else kinds
        if isinstance(v, bool) and bool not in kinds or not isinstance(v, ok):
            raise DeidError(f"{where + ' ' if where else ''}{k}: {' or '.join(_NAMES[x] for x in kinds)} "
                            f"expected (got {v!r})")
    return table


_ARM_TYPES = {"strategy": str, "temperature": float, "n": int, "backend": str, "model": str, "host": str,
              "max_requests": int, "per_request": int, "sentences": (str, list)}


def parse_arms(tables: list[dict], base: Path, where: str = "[[augment]]") -> tuple[Arm, ...]:
    """Arms from their config tables (``where``: their name in the config), a ``sentences`` path
    made relative to the config file; a one-line DeidError naming a bad key."""
    from dataclasses import replace

    from deid_speech.augment.llm import BACKENDS

    if not isinstance(tables, list):
        raise DeidError(f"{where}: a list of tables expected (got {tables!r})")
    arms = []
    for table in tables:
        a = Arm(**checked(table, _ARM_TYPES, where))
        if bad := [k for k in ("n", "per_request", "max_requests") if table.get(k, 1) < 1]:
            raise DeidError(f"{where} {bad[0]} must be at least 1")
        if a.backend not in BACKENDS:
            raise DeidError(f"{where} backend: one of {', '.join(BACKENDS)} (got {a.backend!r})")
        arms.append(a)

    def resolved(sentences):
        if isinstance(sentences, str):
            return str((base / sentences).resolve())
        if isinstance(sentences, (list, tuple)) and sentences and all(isinstance(x, str) for x in sentences):
            return tuple(str((base / x).resolve()) for x in sentences)
        raise DeidError(f"sentences: a path or a list of paths (got {sentences!r})")

    return tuple(replace(a, sentences=resolved(a.sentences)) if a.sentences is not None else a for a in arms)


def arm_sentences(arm: Arm, seed_train: Path, out: Path, opts, pool: list[str]) -> dict:
    """Write ``arm``'s augmented sentences to ``out`` and return the augmentation summary:
    generated by its backend, or (``arm.sentences``) the first ``opts.n`` rows of an earlier
    run's output, checked and tag-validated as any seed file is."""
    from deid_speech.augment.llm import make_backend
    from deid_speech.augment.run import augment

    if not arm.sentences:
        return augment(seed_train, out, opts, make_backend(arm.backend, arm.model, pool, arm.host))
    srcs, shards, rows, used = _file_rows(arm, opts.n)
    names = ", ".join(map(str, srcs))
    _write_jsonl(out, rows)
    first = rows[0]
    requests = sum(1 + max(int(r.get("request", 0)) for r in shard[:k]) for shard, k in zip(shards, used) if k)
    return {"out": str(out), "accepted": opts.n, "requests": requests,
            "complete": True, "backend": first.get("backend", "file"), "model": first.get("model", ""),
            "sentences": names}


def _file_rows(arm: Arm, n: int) -> tuple[list[Path], list[list[dict]], list[dict], list[int]]:
    """The files of ``arm.sentences``, their rows, the first ``n`` taken in turn and how many of
    each file's rows were read; a one-line DeidError when there are fewer than ``n``."""
    srcs, shards = arm_shards(arm, arm.temp)
    rows, used = take_in_turn(shards, n)
    if len(rows) < n:
        raise DeidError(f"arm {arm.name}: {', '.join(map(str, srcs))} holds {len(rows)} sentences, the arm needs {n}")
    return srcs, shards, rows, used


def check_arm_files(arms: tuple[Arm, ...], seed_dir: Path) -> None:
    """Before anything is built: each arm that takes an earlier run's sentences finds the ``n`` it
    takes, and none of them is a dev or test sentence (train/test mixing): a one-line DeidError
    naming one whose sentence frame (``frame_key``: values as their labels) holds the frame of a
    dev or test seed sentence (an opener or a particle added to it leaves it a copy)."""
    from deid_speech.augment.seed import load_split
    from deid_speech.augment.validate import frame_key

    if not any(a.sentences for a in arms):
        return
    held = {}
    for split in ("dev", "test"):
        path = seed_dir / f"{split}.jsonl"
        if not path.is_file():
            raise DeidError(f"{path}: seed split missing")
        held |= {f" {frame_key(r['tagged'])} ": f"{split} sentence {r['id']}" for r in load_split(path)}
    for arm in arms:
        for r in _file_rows(arm, arm.n)[2] if arm.sentences else ():
            frame = f" {frame_key(r['tagged'])} "
            if hit := next((k for k in held if k in frame), None):
                raise DeidError(f"arm {arm.name}: sentence {r['id']} repeats {held[hit]} ({hit.strip()!r}), values "
                                "aside; an arm's sentences must not come from dev or test")


def arm_shards(arm: Arm, temp: float) -> tuple[list[Path], list[list[dict]]]:
    """The files of ``arm.sentences`` and the rows of each, every row checked to be this arm's
    (its strategy at ``temp``, the temperature the arm resolves to; rows that name no arm pass)."""
    from deid_speech.augment.seed import load_split

    srcs = [Path(x) for x in arm.sentence_files]
    shards = []
    for src in srcs:
        if not src.is_file():
            raise DeidError(f"arm {arm.name}: {src}: no such sentences file")
        rows = load_split(src)
        if other := {(r.get("strategy"), r.get("temperature")) for r in rows} - {(arm.strategy, temp), (None, None)}:
            raise DeidError(f"arm {arm.name}: {src} holds sentences of another arm {sorted(map(str, other))[0]}")
        shards.append(rows)
    return srcs, shards


def take_in_turn(shards: list[list[dict]], n: int | None = None) -> tuple[list[dict], list[int]]:
    """Up to ``n`` rows (all: None) of several jobs' files, in turn: the first row of each shard,
    then the second, ...; a row whose sentence frame another shard gave already is skipped (within
    one shard, its job's validation has judged duplicates). Returns the rows and how many rows of
    each shard were read."""
    from deid_speech.augment.validate import frame_key

    rows, seen, used = [], {}, [0] * len(shards)
    for i in range(max(map(len, shards), default=0)):
        for k, shard in enumerate(shards):
            if i >= len(shard) or len(rows) == n:
                continue
            if seen.setdefault(frame_key(shard[i]["tagged"]), k) == k:
                rows.append(shard[i])
                used[k] = i + 1
    return rows, used


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def limit_rows(rows: list[dict], n: int | None, seed: str) -> list[dict]:
    """``n`` rows drawn evenly at random (seeded), in file order. Not the first ``n``: the
    seed files are grouped by label (the raw parts were written label by label), so the
    head of a split can miss whole labels."""
    if n is None or n >= len(rows):
        return rows
    keep = sorted(random.Random(f"limit-{seed}").sample(range(len(rows)), n))
    return [rows[i] for i in keep]


def split_texts(cfg: DatasetConfig) -> tuple[dict[str, list[dict]], dict]:
    """The tagged sentences of each split (seed, optionally with fresh values; train plus
    every augmentation arm), and the augmentation summaries."""
    from deid_speech.augment.replace import fill_tags
    from deid_speech.augment.run import AugmentOptions
    from deid_speech.augment.seed import load_split

    texts: dict[str, list[dict]] = {}
    for split in SPLITS:
        path = cfg.seed_dir / f"{split}.jsonl"
        if not path.is_file():
            raise DeidError(f"{path}: seed split missing")
        rows = limit_rows(load_split(path), cfg.limit.get(split), f"{cfg.seed}-{split}")
        if cfg.fresh_values:
            rng = random.Random(f"{cfg.seed}-{split}")
            rows = [{"id": r["id"], "tagged": fill_tags(r["tagged"], rng)[0], "source": "seed"} for r in rows]
        else:
            rows = [{"id": r["id"], "tagged": r["tagged"], "source": "seed"} for r in rows]
        texts[split] = rows
    summaries = {}
    seed_train = cfg.seed_dir / "train.jsonl"
    pool = [r["tagged"] for r in load_split(seed_train)]
    for arm in cfg.augment:
        out = cfg.out_dir / "augment" / f"{arm.name}.jsonl"
        opts = AugmentOptions(strategy=arm.strategy, temperature=arm.temperature, n=arm.n, seed=cfg.seed,
                              per_request=arm.per_request, max_requests=arm.max_requests)
        summaries[arm.name] = arm_sentences(arm, seed_train, out, opts, pool)
        texts["train"] += [{"id": r["id"], "tagged": r["tagged"], "source": arm.name}
                           for r in load_split(out)]
    return texts, summaries


def voice_pools(tts: TtsSettings) -> tuple[tuple[str, ...], dict[str, list[str] | None]]:
    """(held-out voices, voices per split); a split's None means the catalogue's voices for it."""
    from deid_speech.tts.voices import DEFAULT_HELD_OUT, split_voices

    held = tts.held_out if tts.held_out is not None else DEFAULT_HELD_OUT
    pools: dict[str, list[str] | None] = {"train": None, "dev": None, "test": None}
    if tts.voices is not None:  # one list for all splits: train gets its non-held-out part
        train, held_part = split_voices(tts.voices, held)
        if not train or not held_part:
            raise DeidError("tts.voices must contain both training voices and held-out voices "
                            f"(held out: {', '.join(held)})")
        pools = {"train": train, "dev": held_part, "test": held_part}
    return tuple(held), pools


def make_dataset(cfg: DatasetConfig, config_text: str | None = None, progress: bool | None = None) -> dict:
    """Build the dataset ``cfg`` describes; return the summary also written to dataset.json."""
    from deid_speech.tts.dataset import voice_manifest

    held, pools = voice_pools(cfg.tts)
    check_arm_files(cfg.augment, cfg.seed_dir)
    out = cfg.out_dir
    out.mkdir(parents=True, exist_ok=True)
    record = out / "dataset.json"
    if record.exists() and json.loads(record.read_text(encoding="utf-8")).get("config") != cfg.to_dict():
        raise DeidError(f"{out} was built from another config; use a new out_dir")
    if config_text is not None:
        write_text_atomic(out / "dataset_config.toml", config_text)
    texts, aug = split_texts(cfg)
    summary: dict = {"config": cfg.to_dict(), "augment": aug, "sentences": {k: len(v) for k, v in texts.items()},
                     "tts": {}}
    write_text_atomic(record, json.dumps(summary, indent=2) + "\n")
    jobs = [(s, s, cfg.tts.train_augment if s == "train" else cfg.tts.eval_augment) for s in SPLITS]
    if cfg.tts.telephone_test:
        jobs.append(("test_telephone", "test", "telephone"))
    for name, split, policy in jobs:
        _write_jsonl(out / "text" / f"{split}.jsonl", texts[split])
        summary["tts"][name] = voice_manifest(out / "text" / f"{split}.jsonl", out / name, pools[split],
                                              augment=policy, seed=cfg.seed, workers=cfg.tts.workers,
                                              held_out=held, split=split, progress=progress)
        write_text_atomic(record, json.dumps(summary, indent=2) + "\n")
    return summary
