"""`deid-speech train ner`: a spaCy NER for the nine PII labels, trained on text as Whisper
writes it.

Training examples come from three sources, all as (text, character entities):

* **spoken**: the records' own text ("S one five two ... D", "at gmail dot com");
* **written**: copies of each record with fresh values rendered the way Whisper writes them
  ("S1528360D", "9123 4567", "tan.wm88@gmail.com", "12 March 1987"), sentence case and
  digits in the context too (:func:`written_copy`);
* **asr** (``--asr-noise``, voiced manifests only): the Whisper transcript of each clip, with
  the reference entities projected onto it by time (:func:`project_entities`), so the model
  sees real recognition errors. Transcripts are cached (``--asr-cache``).

The pipeline is blank English + tok2vec + ner (:data:`DEFAULT_CONFIG`, or ``--config``),
trained with fixed seeds and early stopping on the dev entity F1; the best epoch is saved
to ``--out`` (spaCy writes ``meta.json``) with ``training.json`` (scores per epoch, seed,
data sizes, wall time) and ``dev_examples.jsonl`` (the dev texts it was scored on).

``dev_examples.jsonl`` is written first and ``training.json`` last: a folder with the first
and not the second is an unfinished run, which the detector refuses and a rerun starts over.
A folder with a finished model is never replaced: the same data and options again do nothing,
other ones are refused (``training.json`` records a fingerprint of both). A dev set sharing
records with the training set is refused.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import logging
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from deid_speech.errors import DeidError
from deid_speech.types import LABELS, EntitySpan, Span, Transcript

DEFAULT_CONFIG = """
[nlp]
lang = "en"
pipeline = ["tok2vec","ner"]
batch_size = 256

[components]

[components.tok2vec]
factory = "tok2vec"

[components.tok2vec.model]
@architectures = "spacy.Tok2Vec.v2"

[components.tok2vec.model.embed]
@architectures = "spacy.MultiHashEmbed.v2"
width = 96
attrs = ["NORM","PREFIX","SUFFIX","SHAPE"]
rows = [5000,1000,2500,2500]
include_static_vectors = false

[components.tok2vec.model.encode]
@architectures = "spacy.MaxoutWindowEncoder.v2"
width = 96
depth = 4
window_size = 1
maxout_pieces = 3

[components.ner]
factory = "ner"

[components.ner.model]
@architectures = "spacy.TransitionBasedParser.v2"
state_type = "ner"
extra_state_tokens = false
hidden_width = 64
maxout_pieces = 2
use_upper = true
nO = null

[components.ner.model.tok2vec]
@architectures = "spacy.Tok2VecListener.v1"
width = ${components.tok2vec.model.encode.width}
upstream = "*"
"""

_PUNCT = ".,!?;:\"'"


@dataclass(frozen=True)
class TextExample:
    """One training text with its entities; ``kind`` is spoken, written or asr."""

    text: str
    entities: tuple[EntitySpan, ...]
    kind: str
    id: str = ""

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "text": self.text,
                "entities": [e.to_dict() for e in self.entities]}

    @classmethod
    def from_dict(cls, d: dict) -> TextExample:
        return cls(d["text"], tuple(EntitySpan.from_dict(e) for e in d.get("entities", [])),
                   d.get("kind", ""), d.get("id", ""))


# --- input records ------------------------------------------------------------------------

def read_records(path: Path) -> list[dict]:
    """Text records, tagged-only records or voiced manifest records; a one-line DeidError
    on anything else."""
    from deid_speech import manifest

    path = Path(path)
    return [{**r.to_dict(), "_dir": str(path.parent)}
            for r in manifest.read(path, need=("text",), check_audio=False, line_ids=False, nonempty=True)]


def spoken_example(row: dict) -> TextExample:
    return TextExample(row["text"], tuple(sorted(EntitySpan.from_dict(e) for e in row.get("entities", []))),
                       "spoken", row.get("id", ""))


# --- written form: what Whisper writes ----------------------------------------------------

def _spaced(s: str) -> str:
    return " ".join(s)


def _groups(digits: str, sizes: Sequence[int]) -> list[str]:
    out, k = [], 0
    for g in sizes:
        out.append(digits[k:k + g])
        k += g
    if k < len(digits):
        out.append(digits[k:])
    return [x for x in out if x]


def _pick(rng: random.Random, options: list[tuple[float, str]]) -> str:
    return rng.choices([o for _, o in options], weights=[w for w, _ in options])[0]


def written_value(label: str, rng: random.Random) -> str:
    """A fresh valid value for ``label``, rendered as Whisper writes it (one of its forms)."""
    from deid_speech import values as V
    from deid_speech.spoken import MONTH_NAMES, ordinal_words, verbalize_email
    from deid_speech.validators import BANK_ACCOUNT_FORMATS

    if label == "PERSON":
        name = V.gen_person(rng)
        return name.lower() if rng.random() < 0.1 else name
    if label in ("NRIC", "PASSPORT_NUM"):
        v = V.gen_nric(rng) if label == "NRIC" else V.gen_passport(rng)
        return _pick(rng, [(5, v), (2, f"{v[0]} {v[1:-1]} {v[-1]}"), (1.5, _spaced(v)),
                           (1, "-".join(v)), (1, f"{v[0]}{v[1:4]} {v[4:-1]}{v[-1]}")])
    if label == "PHONE":
        v = V.gen_phone(rng)
        form = _pick(rng, [(4, f"{v[:4]} {v[4:]}"), (2.5, v), (1.5, f"{v[:4]}-{v[4:]}"), (1, _spaced(v))])
        return ("+65 " + form) if rng.random() < 0.12 else form
    if label == "CREDIT_CARD":
        v = V.gen_card(rng)
        sizes = (4, 6, 5) if len(v) == 15 else (4,) * 5
        g = _groups(v, sizes)
        return _pick(rng, [(5, " ".join(g)), (2, v), (2, "-".join(g)), (1, _spaced(v))])
    if label == "BANK_ACCOUNT":
        v, bank = V.gen_bank_account(rng)
        g = _groups(v, BANK_ACCOUNT_FORMATS[bank])
        return _pick(rng, [(4, "-".join(g)), (3, v), (3, " ".join(g)), (1, _spaced(v))])
    if label == "CAR_PLATE":
        v = V.gen_plate(rng)
        m = re.fullmatch(r"([A-Z]+)(\d+)([A-Z])", v)
        a, d, c = m.groups() if m else (v, "", "")
        return _pick(rng, [(4, v), (3, f"{a} {d} {c}"), (1.5, f"{a} {d}{c}"), (1.5, _spaced(v))])
    if label == "EMAIL":
        v = V.gen_email(rng, V.gen_person(rng) if rng.random() < 0.5 else None)
        local, _, domain = v.partition("@")
        return _pick(rng, [(4, v), (2, f"{local} at {domain}"),
                           (2, f"{local.replace('.', ' dot ')} at {domain.replace('.', ' dot ')}"),
                           (2, verbalize_email(v, rng))])
    if label == "DATE":
        d: datetime.date = V.gen_date(rng)
        month = MONTH_NAMES[d.month - 1]
        sfx = "th" if 10 <= d.day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(d.day % 10, "th")
        return _pick(rng, [(2, f"{d.day}{sfx} of {month} {d.year}"), (2, f"{d.day} {month} {d.year}"),
                           (2, f"{month} {d.day}, {d.year}"), (1, f"{month} {d.day}{sfx}, {d.year}"),
                           (1, f"{d.day:02d}/{d.month:02d}/{d.year}"), (1, f"{d.day}/{d.month}/{d.year}"),
                           (1, f"the {d.day}{sfx} of {month}, {d.year}"),
                           (1, f"{ordinal_words(d.day)} of {month} {d.year}")])
    if label == "SECRET":
        v = V.gen_secret(rng)
        return _pick(rng, [(4, v), (1, _spaced(v))])
    raise ValueError(f"unknown label {label!r}")


def written_context(text: str) -> str:
    """Spoken digit runs of two or more words in non-PII text as digits ("queue number two
    three five" -> "queue number 235"), the way Whisper writes them."""
    from deid_speech.spoken import WEAK_WORDS, clean_token, normalize_tokens

    core = text.strip()
    if not core:
        return text
    lead, trail = text[:len(text) - len(text.lstrip())], text[len(text.rstrip()):]
    tokens = core.split()
    out = list(tokens)
    for first, last, sym in normalize_tokens(tokens):
        homophone = any(clean_token(t) in WEAK_WORDS - {"oh"} for t in tokens[first:last + 1])
        if last > first and sym.text.isdigit() and not homophone:
            tail = tokens[last][len(tokens[last].rstrip(_PUNCT)):]
            out[first] = sym.text + tail
            for k in range(first + 1, last + 1):
                out[k] = ""
    return lead + " ".join(t for t in out if t) + trail


def written_copy(ex: TextExample, rng: random.Random, keep_spoken: float = 0.2) -> TextExample:
    """``ex`` with each entity replaced by a fresh written-form value (a few kept spoken),
    digits in the context written as digits, and sentence case with a final full stop."""
    pieces: list[str] = []
    ents: list[EntitySpan] = []
    pos = length = 0
    for e in sorted(ex.entities):
        if e.char_start < pos:
            continue  # overlapping entity: skip
        before = ex.text[pos:e.char_start]
        before = written_context(before) if rng.random() < 0.7 else before
        value = ex.text[e.char_start:e.char_end] if rng.random() < keep_spoken else written_value(e.label, rng)
        pieces.append(before)
        length += len(before)
        ents.append(EntitySpan(length, length + len(value), e.label))
        pieces.append(value)
        length += len(value)
        pos = e.char_end
    rest = ex.text[pos:]
    pieces.append(written_context(rest) if rng.random() < 0.7 else rest)
    text = "".join(pieces)
    if text and text[0].islower() and rng.random() < 0.8 and not (ents and ents[0].char_start == 0
                                                                   and ex.text[:1].isupper()):
        text = text[0].upper() + text[1:]
    if text and text[-1] not in ".?!" and rng.random() < 0.7:
        text += "."
    return TextExample(text, tuple(ents), "written", ex.id)


# --- ASR noise: project reference entities onto the Whisper transcript by time ------------

def project_entities(entities: Sequence[Span], hyp: Transcript, min_fraction: float = 0.5) -> list[EntitySpan]:
    """Reference entities (times in seconds, with labels) as character spans of ``hyp``.

    A hypothesis word belongs to the entity it overlaps most in time, if that overlap is at
    least ``min_fraction`` of the word's or of the entity's duration (a word of no duration
    belongs to the entity its start falls in). The entity becomes the run of words from its
    first to its last word; when a comma or full stop splits that run (Whisper's word times
    are loose: "um, S1234567D"), the part that overlaps the entity most (DATE excepted:
    "April 14, 2005"). Surrounding punctuation is left out; an entity with no word (the ASR
    dropped it) yields nothing, and overlapping results keep the earlier one.
    """
    owner: list[int | None] = []
    overlap: list[float] = []
    for w in hyp.words:
        best, best_ov = None, 0.0
        for k, e in enumerate(entities):
            if w.end <= w.start:
                ov = 1e-3 if e.start <= w.start < e.end else 0.0
                ok = ov > 0
            else:
                ov = min(w.end, e.end) - max(w.start, e.start)
                ok = ov > 0 and (ov >= min_fraction * (w.end - w.start)
                                 or ov >= min_fraction * (e.end - e.start))
            if ok and ov > best_ov:
                best, best_ov = k, ov
        owner.append(best)
        overlap.append(best_ov)
    out: list[EntitySpan] = []
    for k, e in enumerate(entities):
        idx = [i for i, o in enumerate(owner) if o == k]
        if not idx:
            continue
        idx = list(range(idx[0], idx[-1] + 1))
        if e.label != "DATE":  # "um, S1234567D": a pause mark inside the run is an edge
            chunks: list[list[int]] = [[]]
            for i in idx:
                chunks[-1].append(i)
                if _ends_phrase(hyp.words[i].text) and i != idx[-1]:
                    chunks.append([])
            idx = max(chunks, key=lambda c: sum(overlap[i] for i in c if owner[i] == k))
        a, b = hyp.words[idx[0]].char_start, hyp.words[idx[-1]].char_end
        while a < b and hyp.text[a] in _PUNCT:
            a += 1
        while b > a and hyp.text[b - 1] in _PUNCT:
            b -= 1
        if b > a and not (out and a < out[-1].char_end):
            out.append(EntitySpan(a, b, e.label))
    return out


def _ends_phrase(word: str) -> bool:
    """A word ending in , ; ? ! or a full stop (not "Dr.", "Mr.": short abbreviations)."""
    if word.endswith((",", ";", "?", "!")):
        return True
    return word.endswith(".") and not (word[:-1].isalpha() and len(word) <= 4)


def _reference_spans(row: dict) -> list[Span]:
    return [Span(float(e["start"]), float(e["end"]), e["label"]) for e in row.get("entities", [])
            if "start" in e and "end" in e]


def asr_examples(rows: list[dict], asr_model: str, cache_path: Path, log=print) -> list[TextExample]:
    """Whisper transcripts of the voiced records (cached in ``cache_path``), with the
    reference entities projected."""
    from deid_speech.asr.whisper import AsrOptions, CachedTranscriber
    from deid_speech.audio import load

    voiced = [r for r in rows if r.get("audio")]
    transcriber = CachedTranscriber(AsrOptions(model=asr_model), cache_path)
    log(f"transcribing {len(voiced)} clips with {asr_model} (cache: {cache_path})")
    out: list[TextExample] = []
    t0 = time.time()
    for k, r in enumerate(voiced, 1):
        audio_path = Path(r["_dir"]) / r["audio"]
        try:
            hyp = transcriber.transcribe(load(audio_path).mono16k())
        except (OSError, RuntimeError, ValueError) as exc:
            raise DeidError(f"{audio_path}: cannot transcribe ({exc})") from None
        if k % 50 == 0:
            log(f"  {k}/{len(voiced)} ({transcriber.misses} decoded, {time.time() - t0:.0f} s)")
        if hyp.text:
            out.append(TextExample(hyp.text, tuple(project_entities(_reference_spans(r), hyp)), "asr",
                                   r.get("id", "")))
    log(f"  {len(voiced)} transcripts: {transcriber.hits} from the cache, {transcriber.misses} decoded")
    return out


def build_examples(rows: list[dict], rng: random.Random, written_copies: int, asr: list[TextExample],
                   asr_copies: int = 1) -> list[TextExample]:
    """The records' spoken text, ``written_copies`` written-form copies of each, and the ASR
    examples ``asr_copies`` times (they are the closest to what the model will read)."""
    spoken = [spoken_example(r) for r in rows]
    written = [written_copy(ex, rng) for _ in range(written_copies) for ex in spoken]
    return spoken + written + asr * asr_copies


# --- spaCy --------------------------------------------------------------------------------

def _spacy():
    from deid_speech.ner.spacy_ner import _import_spacy_without_torch, without_torch

    spacy = _import_spacy_without_torch()
    with without_torch():
        from spacy.training import Example
        from thinc.api import Config
    return spacy, Example, Config


def make_nlp(config_text: str):
    from deid_speech.ner.spacy_ner import without_torch

    spacy, _, Config = _spacy()
    try:
        cfg = Config().from_str(config_text)
        with without_torch():
            nlp = spacy.util.load_model_from_config(cfg, auto_fill=True, validate=True)
    except Exception as exc:  # config errors are many types; report the first line
        raise DeidError(f"bad spaCy config: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc}") from None
    if "ner" not in nlp.pipe_names:
        raise DeidError("the spaCy config has no 'ner' component")
    ner = nlp.get_pipe("ner")
    for label in LABELS:
        ner.add_label(label)
    return nlp


def to_spacy(nlp, examples: Sequence[TextExample]) -> list:
    """spaCy Examples; entity edges snap outwards to token edges, overlaps are dropped."""
    _, Example, _ = _spacy()
    out = []
    for ex in examples:
        pred, ref = nlp.make_doc(ex.text), nlp.make_doc(ex.text)
        spans, end = [], -1
        for e in sorted(ex.entities):
            sp = ref.char_span(e.char_start, e.char_end, label=e.label, alignment_mode="expand")
            if sp is not None and len(sp) and sp.start >= end:
                spans.append(sp)
                end = sp.end
        ref.set_ents(spans, default="outside")
        out.append(Example(pred, ref))
    return out


def ents_scores(nlp, examples: list) -> dict:
    s = nlp.evaluate(examples)
    return {"ents_p": round(float(s.get("ents_p") or 0.0), 4), "ents_r": round(float(s.get("ents_r") or 0.0), 4),
            "ents_f": round(float(s.get("ents_f") or 0.0), 4),
            "per_type": {k: {m: round(float(v[m]), 4) for m in ("p", "r", "f")}
                         for k, v in sorted((s.get("ents_per_type") or {}).items())}}


def evaluate_text(model: str | Path, examples: Sequence[TextExample]) -> dict:
    """Entity P/R/F (spaCy's scorer) of a trained folder on text examples: seconds, no audio."""
    from deid_speech.ner.spacy_ner import load_spacy

    nlp = load_spacy(str(Path(model).resolve()))
    return ents_scores(nlp, to_spacy(nlp, examples))


@dataclass(frozen=True)
class TrainOptions:
    """The options of ``deid-speech train ner`` (flags and ``--config`` keys come from here)."""

    seed: int = 0
    max_epochs: int = 30
    patience: int = field(default=8, metadata={"help": "epochs without a dev gain before stopping"})
    batch_size: int = 32
    dropout: float = 0.2
    learn_rate: float = field(default=0.001, metadata={"help": "Adam learning rate"})
    written_copies: int = field(default=2, metadata={"help": "written-form copies per record"})
    asr_copies: int = field(default=2, metadata={"help": "times each ASR-noised example is used per epoch"})
    max_train: int = field(default=8000, metadata={"help": "cap on training examples"})
    asr_noise: bool = field(default=False, metadata={
        "help": "add Whisper transcripts of manifest audio, entities projected by time"})
    asr_model: str = "tiny.en"
    asr_cache: Path | None = field(default=None, metadata={
        "help": "Whisper transcript cache, shared with `eval --asr-cache` (default: out/cache/asr-transcripts.jsonl)"})
    spacy_config: Path | None = field(default=None, metadata={"help": "a spaCy config file (default: built in)"})

    def __post_init__(self) -> None:
        if self.max_epochs < 1 or self.patience < 1 or self.batch_size < 1 or self.asr_copies < 1:
            raise DeidError("--max-epochs, --patience, --batch-size and --asr-copies must be >= 1")
        if self.written_copies < 0:
            raise DeidError("--written-copies must be >= 0")
        if not 0 < self.learn_rate < 1:
            raise DeidError("--learn-rate must be in (0, 1)")
        if not 0 <= self.dropout < 1:
            raise DeidError("--dropout must be in [0, 1)")


def train(train_ex: list[TextExample], dev_ex: list[TextExample], out: Path, opts: TrainOptions,
          config_text: str = DEFAULT_CONFIG, info: dict | None = None, log=print) -> dict:
    """Train, keep the best dev-F1 epoch in ``out``; returns (and writes) training.json."""
    from deid_speech.ner.spacy_ner import without_torch

    spacy, _, _ = _spacy()
    t0 = time.time()
    rng = random.Random(opts.seed)
    spacy.util.fix_random_seed(opts.seed)
    if len(train_ex) > opts.max_train:
        train_ex = rng.sample(train_ex, opts.max_train)
    nlp = make_nlp(config_text)
    train_sp, dev_sp = to_spacy(nlp, train_ex), to_spacy(nlp, dev_ex)
    with without_torch():
        optimizer = nlp.initialize(lambda: train_sp)
    optimizer.learn_rate = opts.learn_rate
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "dev_examples.jsonl", "w", encoding="utf-8") as fh:
        for ex in dev_ex:
            fh.write(json.dumps(ex.to_dict(), ensure_ascii=False) + "\n")
    epochs: list[dict] = []
    best, best_epoch, stale = -1.0, 0, 0
    for epoch in range(1, opts.max_epochs + 1):
        te = time.time()
        rng.shuffle(train_sp)
        losses: dict = {}
        for k in range(0, len(train_sp), opts.batch_size):
            nlp.update(train_sp[k:k + opts.batch_size], drop=opts.dropout, sgd=optimizer, losses=losses)
        scores = ents_scores(nlp, dev_sp)
        row = {"epoch": epoch, "loss": round(float(losses.get("ner", 0.0)), 2), "dev": scores,
               "seconds": round(time.time() - te, 1)}
        epochs.append(row)
        improved = scores["ents_f"] > best
        log(f"epoch {epoch:2d}  loss {row['loss']:9.2f}  dev P {scores['ents_p']:.3f} R {scores['ents_r']:.3f} "
            f"F {scores['ents_f']:.3f}  ({row['seconds']:.0f} s){'  *' if improved else ''}")
        if improved:
            best, best_epoch, stale = scores["ents_f"], epoch, 0
            nlp.meta.update({"name": "deid_ner", "version": "0.1.0",
                             "description": "deid-speech PII NER (deid-speech train ner)",
                             "performance": {"dev_ents_f": best, "epoch": epoch}})
            nlp.to_disk(out)
        else:
            stale += 1
            if stale >= opts.patience:
                log(f"no dev improvement for {opts.patience} epochs: stopping")
                break
    kinds = lambda xs: {k: sum(1 for x in xs if x.kind == k) for k in ("spoken", "written", "asr")}  # noqa: E731
    report = {
        **(info or {}),
        "seed": opts.seed, "options": {k: str(v) if isinstance(v, Path) else v for k, v in opts.__dict__.items()},
        "config": config_text if config_text != DEFAULT_CONFIG else "builtin (deid_speech.ner.train.DEFAULT_CONFIG)",
        "data": {"train": {"examples": len(train_ex), **kinds(train_ex),
                           "entities": sum(len(x.entities) for x in train_ex)},
                 "dev": {"examples": len(dev_ex), **kinds(dev_ex),
                         "entities": sum(len(x.entities) for x in dev_ex)}},
        "best_epoch": best_epoch, "best_dev": epochs[best_epoch - 1]["dev"],
        "best_score": best, "best_step": best_epoch,  # the names `deid-speech experiment` reads
        "dev_examples": "dev_examples.jsonl",
        "epochs": epochs, "wall_s": round(time.time() - t0, 1),
        "spacy": spacy.__version__,
    }
    (out / "training.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


# --- command line -------------------------------------------------------------------------

def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "ner", help="spaCy NER for the nine PII labels on Whisper-style text",
        description="Trains blank English + tok2vec + ner on the records' spoken text, written-form "
                    "copies and (--asr-noise) Whisper transcripts of voiced manifests; early stopping "
                    "on dev entity F1; writes the best model, training.json and dev_examples.jsonl to --out.")
    p.add_argument("--train", type=Path, nargs="+", required=True,
                   help="JSONL text records (data/seed/*.jsonl) or voiced manifests (manifest.jsonl)")
    p.add_argument("--dev", type=Path, nargs="+", required=True, help="dev records, same formats")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    from deid_speech.options import add_options

    add_options(p, TrainOptions)  # every option a flag and a --config key
    return p


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    from deid_speech.options import build

    opts = build(args, TrainOptions)
    config_text = DEFAULT_CONFIG
    if opts.spacy_config is not None:
        if not opts.spacy_config.is_file():
            raise DeidError(f"{opts.spacy_config}: no such spaCy config file")
        config_text = opts.spacy_config.read_text(encoding="utf-8")
    train_rows = [r for p in args.train for r in read_records(p)]
    dev_rows = [r for p in args.dev for r in read_records(p)]
    from deid_speech.asr.trainer import records_hash, same_run, shared_records

    shared_records(train_rows, dev_rows)
    fingerprint = {"train_data": records_hash(train_rows), "dev_data": records_hash(dev_rows),
                   **{k: v for k, v in opts.__dict__.items() if k not in ("asr_cache", "spacy_config")},
                   "config": hashlib.sha256(config_text.encode("utf-8")).hexdigest()[:16]}
    prior = finished_model(args.out)
    if prior is not None:  # the same training again: nothing to do; other training: refused
        same_run(str(args.out), prior.get("fingerprint"), fingerprint, "use a new --out")
        _print_summary(prior, args.out)
        return 0
    log = logging.getLogger(__name__).info  # progress, on stderr through the CLI's handler
    train_asr: list[TextExample] = []
    dev_asr: list[TextExample] = []
    if opts.asr_noise:
        if not any(r.get("audio") for r in train_rows + dev_rows):
            raise DeidError("--asr-noise needs voiced manifests (records with 'audio')")
        cache = opts.asr_cache or Path("out") / "cache" / "asr-transcripts.jsonl"
        train_asr = asr_examples(train_rows, opts.asr_model, cache, log)
        dev_asr = asr_examples(dev_rows, opts.asr_model, cache, log)
    rng = random.Random(opts.seed)
    train_ex = build_examples(train_rows, rng, opts.written_copies, train_asr, opts.asr_copies)
    dev_ex = build_examples(dev_rows, random.Random(opts.seed + 1), 1, dev_asr)
    log(f"train: {len(train_ex)} examples, dev: {len(dev_ex)}")
    info = {"inputs": {"train": [str(p) for p in args.train], "dev": [str(p) for p in args.dev]},
            "asr_noise": bool(opts.asr_noise), "asr_model": opts.asr_model if opts.asr_noise else None,
            "fingerprint": fingerprint}
    report = train(train_ex, dev_ex, args.out, opts, config_text, info, log)
    report["wall_s_total"] = round(time.time() - t0, 1)
    (args.out / "training.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    _print_summary(report, args.out)
    return 0


def finished_model(out: Path) -> dict | None:
    """The training.json of a finished `train ner` run in ``out`` (None: none, or an unfinished
    run, which a rerun starts over), or a one-line DeidError for an ``out`` it may not write."""
    from deid_speech.asr.trainer import finished_summary

    if out.exists() and not out.is_dir():
        raise DeidError(f"--out {out}: exists and is not a folder")
    prior = finished_summary(out)
    if prior is None and out.is_dir() and any(out.iterdir()) and not (out / "dev_examples.jsonl").is_file():
        raise DeidError(f"--out {out}: not empty and not a `train ner` folder; use a new --out")
    return prior


def _print_summary(report: dict, out: Path) -> None:
    b = report["best_dev"]
    print(f"best epoch {report['best_epoch']}: dev P {b['ents_p']:.3f} R {b['ents_r']:.3f} F {b['ents_f']:.3f}; "
          f"saved {out} ({report.get('wall_s_total', report['wall_s']):.0f} s)")
