"""Command line: ``deid-speech redact FILE|DIR ...``, ``augment ...`` and ``tts ...``.

Errors print one line (no traceback). Exit status: 0 all files redacted, 1 some failed,
2 bad usage.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from deid_speech.errors import DeidError
from deid_speech.redact import AUDIO_OPS, KEY_ENV, MAX_MERGE_GAP, MAX_PAD, MERGE_GAP, PAD_AFTER, PAD_BEFORE, TEXT_OPS
from deid_speech.systems import E2E as E2E_SYSTEMS
from deid_speech.systems import MAX_VERIFY_PASSES, RECOGNISER, VERIFIER, VERIFY_PASSES
from deid_speech.systems import REDACT as SYSTEMS
from deid_speech.types import LABELS


def _labels(value: str) -> tuple[str, ...]:
    labels = tuple(x.strip().upper() for x in value.split(",") if x.strip())
    bad = [x for x in labels if x not in LABELS]
    if bad or not labels:
        raise argparse.ArgumentTypeError(f"unknown label(s) {', '.join(bad) or '(none)'}; "
                                         f"choose from {','.join(LABELS)}")
    return labels


def _seconds(what: str, most: float):
    """An argparse type: a number of seconds from 0 to ``most``, named ``what`` in its error."""
    def parse(value: str) -> float:
        try:
            v = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
        if not 0 <= v <= most:
            raise argparse.ArgumentTypeError(f"{what} must be between 0 and {most:g} seconds")
        return v
    return parse


_padding = _seconds("padding", MAX_PAD)


def _formats(value: str) -> tuple[str, ...]:
    from deid_speech.writers import parse_formats

    try:
        return parse_formats(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    from deid_speech import __version__

    p = argparse.ArgumentParser(prog="deid-speech", description="Offline speech de-identification.")
    p.add_argument("--version", action="version", version=f"deid-speech {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    r = argparse.ArgumentParser(add_help=False)  # the redaction options, shared by redact and ingest
    r.add_argument("--system", choices=SYSTEMS, default="cascade",
                   help="cascade (Whisper + patterns + NER; default), e2e (the end-to-end model alone) "
                        "or e2e+patterns (its tags plus the pattern detectors over its transcript)")
    r.add_argument("--mode", choices=AUDIO_OPS, default=None,
                   help="audio operator for every label: beep (default), silence, or noise (speech-band noise)")
    r.add_argument("--text-op", choices=TEXT_OPS, default=None,
                   help="text operator for every label: placeholder ([PHONE_1]; default), mask (****), hash "
                        f"(keyed HMAC; needs {KEY_ENV}), or surrogate (a fresh valid value of the same type)")
    r.add_argument("--label-op", action="append", default=[], metavar="LABEL=OP[,OP]",
                   help="per-label operators over the default, e.g. PERSON=surrogate or PHONE=silence,hash; repeatable")
    r.add_argument("--pad-before", type=_padding, default=None,
                   help=f"seconds redacted before each span ({PAD_BEFORE:g}; the recogniser times entities late)")
    r.add_argument("--pad-after", type=_padding, default=None, help=f"seconds redacted after each span ({PAD_AFTER:g})")
    r.add_argument("--padding", type=_padding, default=None, help="set --pad-before and --pad-after together")
    r.add_argument("--merge-gap", type=_seconds("merge gap", MAX_MERGE_GAP), default=None,
                   help=f"join redactions closer than this many seconds ({MERGE_GAP:g})")
    r.add_argument("--config", type=Path, default=None, metavar="redact.toml",
                   help="operators from a TOML file: merge_gap, [default] and [labels.LABEL] tables of audio, text, "
                        "pad_before, pad_after (flags override it)")
    r.add_argument("--format", type=_formats, default=("json",),
                   help="transcript outputs, comma-separated from json,srt,vtt,txt (redacted text only); "
                        "the JSON report is always written")
    r.add_argument("--asr-model", default=RECOGNISER,
                   help="the cascade's recogniser: tiny.en (default, the stock model), tiny.en-sg-full "
                        "(encoder and decoder fine-tuned here on Singapore-English calls: twice as fast on "
                        "calls, slightly worse on real speech), tiny.en-sg (its decoder fine-tuned), base, base-sg, "
                        "a CTranslate2 or HF folder, a delta folder, a .pt checkpoint, or a hub name")
    r.add_argument("--fast-asr", action="store_true",
                   help="decode Whisper's windows in batches, greedily and independently: about twice as fast, "
                        "but it leaked more entity audio on held-out calls (docs/results.md §0f)")
    r.add_argument("--labels", type=_labels, default=LABELS, help="comma-separated subset of " + ",".join(LABELS))
    r.add_argument("--spacy-model", default=None, help="spaCy pipeline name or folder for PERSON/DATE")
    r.add_argument("--ner-model", default="default",
                   help="the cascade's trained NER: default (the shipped NER model), a folder from "
                        "`deid-speech train ner`, or none")
    r.add_argument("--model", default=None, metavar="DIR",
                   help="the end-to-end model folder for --system e2e (`deid-speech train e2e`; "
                        "default: the shipped one, if any)")
    r.add_argument("--allow-download", action="store_true",
                   help="let --asr-model name a Hugging Face hub model and download it; without this flag "
                        "deid-speech makes no network request")
    r.add_argument("--uncovered", choices=("beep", "fail", "warn"), default="beep",
                   help="speech-like audio that got no words (so was not checked for PII): beep it "
                        "(default), fail the file, or only warn")
    r.add_argument("--unredacted-report", action="store_true",
                   help="also write X.pii.json (mode 0600): the clear transcript, span texts and words. "
                        "Never written by default; X.redacted.json never holds clear text")
    r.add_argument("--verify", action=argparse.BooleanOptionalAction, default=None,
                   help="a second opinion (on by default for the cascade): a second decoder (--verifier) "
                        "transcribes the audio too, the cascade's detectors read that transcript, and what "
                        "they find beyond the first redaction is redacted too; --no-verify: one decoding only")
    r.add_argument("--verifier", default=VERIFIER, metavar="MODEL",
                   help="the decoder of --verify: Whisper models taking turns by pass, comma-separated (default "
                        "%(default)s: pass 1 by the first, pass 2 by the second; both fine-tuned on Singapore-English "
                        "call audio), one Whisper model (a name or folder as --asr-model), or e2e (the end-to-end "
                        "model)")
    r.add_argument("--verify-passes", type=parse_passes, default=VERIFY_PASSES, metavar="N",
                   help="how often the verifier decodes the audio (default %(default)s; 1-4): each pass after "
                        "the first hears it with another inaudible dither and misses other entities; "
                        "what any pass finds is redacted")
    r.add_argument("--helper-process", action=argparse.BooleanOptionalAction, default=None,
                   help="the verifier decodes in a helper process beside the first decoder, each on half the "
                        "cores (default where this process may use two or more; the same redaction, sooner, "
                        "for about 0.4 GB more memory); --no-helper-process: in this process, after it")
    r.add_argument("--workers", type=parse_workers, default=1, metavar="N|auto",
                   help="redact N files at once in N processes, each loading the models once (about 0.7 GB "
                        "each for the cascade); auto: one per CPU core. Output order and exit status as with 1")
    red = sub.add_parser("redact", parents=[r], help="beep out PII in call recordings; write a redacted transcript",
                         description="Writes X.redacted.<ext> and X.redacted.json next to each input "
                                     "(or into --out-dir). Folders are searched for audio files.")
    red.add_argument("inputs", nargs="+", help="audio files (wav/flac/ogg/mp3) or folders")
    red.add_argument("--out-dir", type=Path, help="write outputs here instead of next to the inputs")
    again = red.add_mutually_exclusive_group()
    again.add_argument("--overwrite", action="store_true", help="replace the outputs of an earlier run")
    again.add_argument("--skip-existing", action="store_true",
                       help="leave inputs whose outputs an earlier run finished; redo unfinished ones")
    red.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    ing = sub.add_parser("ingest", parents=[r], help="redact a recording archive, resumably, with a job ledger",
                         description="Redacts every audio file of SOURCE (a folder, or a .csv/.jsonl list of paths) "
                                     "into OUT_DIR (mirroring the folder tree), recording each input's state in "
                                     "OUT_DIR/ingest-ledger.sqlite; a rerun skips what is done and unchanged, redoes "
                                     "what changed or was left unfinished, and retries failures with --retry-failed.")
    ing.add_argument("source", type=Path, help="a folder of recordings, or a .csv/.jsonl list of their paths")
    ing.add_argument("--out-dir", type=Path, required=True, help="where the outputs and the ledger go")
    ing.add_argument("--retry-failed", action="store_true", help="try again the inputs that failed before")
    ing.add_argument("--overwrite", action="store_true",
                     help="replace files in OUT_DIR at an input's output paths that the ledger does not record as "
                          "that input's (another archive's, or what redact wrote); without it that input fails")
    ing.add_argument("--engine", choices=("local", "ray"), default="local",
                     help="local: --workers processes on this machine (default); ray: --workers Ray actors, "
                          "on a local Ray instance or the cluster at --address (the ray extra)")
    ing.add_argument("--address", default=None, help="with --engine ray: the cluster to join (default: a local one)")
    srv = sub.add_parser("serve", parents=[r], help="redaction over HTTP (FastAPI; the server extra)",
                         description="POST /v1/redact (multipart 'file', optional 'format'), GET /v1/jobs/{id}, "
                                     "GET /v1/jobs/{id}/audio|report|srt|vtt|txt, GET /healthz, docs at /docs. "
                                     "The redaction options are the server's (the flags below).")
    srv.add_argument("--host", default="127.0.0.1", help="beyond loopback only with a bearer token")
    srv.add_argument("--port", type=int, default=8000)
    srv.add_argument("--token-file", type=Path, default=None,
                     help="the bearer token (default: $DEID_SPEECH_TOKEN); at least 16 characters")
    srv.add_argument("--work-dir", type=Path, default=Path("deid-speech-work"),
                     help="uploads and results live here, and nowhere else")
    srv.add_argument("--max-upload-mb", type=int, default=200)
    srv.add_argument("--queue-size", type=int, default=8, help="jobs waiting at most; more get 429")
    srv.add_argument("--retention", type=float, default=3600.0, help="seconds a finished job's results are kept")
    srv.add_argument("--sync-timeout", type=float, default=120.0, help="how long ?sync=true waits")
    a = sub.add_parser("augment", help="multiply seed sentences with an LLM (Similar/Diverse) + tag replacement",
                       description="Writes tagged sentences with fresh PII values as JSONL; resumable.")
    from deid_speech.augment.llm import BackendOptions
    from deid_speech.augment.run import AugmentOptions
    from deid_speech.options import add_options

    add_options(a, AugmentOptions)  # every option a flag and a --config key
    add_options(a, BackendOptions)
    a.add_argument("--in", dest="seed_file", type=Path, default=None,
                   help="tagged seed JSONL (default: the shipped seed corpus, train part)")
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    from deid_speech.tts import cli as tts_cli

    tts_cli.add_parser(sub)
    from deid_speech.eval import cli as eval_cli

    eval_cli.add_parser(sub)
    m = sub.add_parser("make-dataset", help="seed -> augment -> tts: train/dev/test manifests from one config",
                       description="Builds the dataset a TOML config describes (see "
                                   "configs/datasets/small.toml); resumable; the config is copied next "
                                   "to the output.")
    m.add_argument("--config", type=Path, required=True)
    m.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    t = sub.add_parser("train", help="train a model: ner (spaCy), asr (Whisper fine-tune), e2e (tagging Whisper)",
                       description="Each target has its own options: deid-speech train ner|asr|e2e --help")
    targets = t.add_subparsers(dest="target", required=True)
    for target in TRAIN_TARGETS.values():
        _module(target).add_parser(targets)
    _module("deid_speech.experiment").add_parser(sub)
    return p


# `deid-speech train TARGET`: each target's module has add_parser(subparsers) and run(args)
TRAIN_TARGETS = {"ner": "deid_speech.ner.train", "asr": "deid_speech.asr.train_cli",
                 "e2e": "deid_speech.e2e.train"}


def _module(name: str):
    import importlib

    return importlib.import_module(name)


def cmd_augment(args: argparse.Namespace) -> int:
    import json

    from deid_speech.augment.llm import BackendOptions, make_backend
    from deid_speech.augment.run import AugmentOptions, augment
    from deid_speech.augment.seed import load_split
    from deid_speech.options import build

    if args.seed_file is None:  # the shipped seed corpus's training part
        from deid_speech import models

        args.seed_file = models.path("seed") / "train.jsonl"
    if not args.seed_file.is_file():
        raise DeidError(f"{args.seed_file}: no such seed file")
    if args.out.resolve() == args.seed_file.resolve():
        raise DeidError("--out must not be the seed file")
    opts, llm = build(args, AugmentOptions), build(args, BackendOptions)
    backend = make_backend(llm.backend, llm.model, [r["tagged"] for r in load_split(args.seed_file)],
                           host=llm.host, threads=llm.threads)
    bar = None
    if args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty()):
        from tqdm import tqdm

        bar = tqdm(total=opts.n, unit="sent", file=sys.stderr, desc=f"{opts.strategy} t={opts.temp:g}")

    def progress(done: int, total: int) -> None:
        if bar:
            bar.n = done
            bar.refresh()

    summary = augment(args.seed_file, args.out, opts, backend, progress)
    if bar:
        bar.close()
    print(json.dumps(summary, indent=2))
    if not summary["complete"]:
        print(f"deid-speech: warning: only {summary['accepted']} of {opts.n} sentences accepted after "
              f"{summary['requests']} requests (raise --max-requests or use a stronger model)", file=sys.stderr)
        return 1
    return 0


def cmd_redact(args: argparse.Namespace) -> int:
    from deid_speech import Redactor
    from deid_speech.batch import WorkerPool
    from deid_speech.pipeline import collect_inputs

    config = redact_config(args)  # a bad option fails before any work
    if args.out_dir is not None:  # checked before any work, not after every file was transcribed
        if args.out_dir.exists() and not args.out_dir.is_dir():
            raise DeidError(f"--out-dir {args.out_dir} is a file, not a folder")
        if args.out_dir.is_dir() and not os.access(args.out_dir, os.W_OK | os.X_OK):
            raise DeidError(f"--out-dir {args.out_dir}: permission denied (cannot write there)")
    files, skipped, roots = collect_inputs(args.inputs)
    for f, why in skipped:
        print(f"skipped: {f} ({why})", file=sys.stderr)
    show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
    existing = "overwrite" if args.overwrite else "skip" if args.skip_existing else "refuse"
    workers = min(args.workers, len(files))
    redactor = WorkerPool(config, workers) if workers > 1 else Redactor(config)
    try:
        return redact_many(redactor, files, args.out_dir, show, unredacted_report=args.unredacted_report,
                           roots=roots, formats=args.format, existing=existing)
    finally:
        redactor.close()  # the workers, or the verifier's helper process


def redact_config(args: argparse.Namespace):
    """The RedactConfig of the redaction options (``redact`` and ``ingest``)."""
    from deid_speech import RedactConfig

    if args.model is not None and args.system not in E2E_SYSTEMS:
        raise DeidError("--model is the end-to-end model: use it with --system e2e or e2e+patterns")
    if args.allow_download:
        from deid_speech.asr.models import ALLOW_DOWNLOAD_ENV

        os.environ[ALLOW_DOWNLOAD_ENV] = "1"
    return RedactConfig(system=args.system, asr_model=args.asr_model, fast_asr=args.fast_asr, labels=args.labels,
                        redact=redact_options(args),
                        spacy_model=args.spacy_model, ner_model=args.ner_model, e2e_model=args.model,
                        verify=args.verify, verifier=args.verifier, verify_passes=args.verify_passes,
                        verify_in_helper=args.helper_process, uncovered=args.uncovered)


def redact_options(args: argparse.Namespace):
    """The operators: built-in defaults, then ``--config``, then the flags."""
    from deid_speech.redact import RedactOptions

    settings: dict = {}
    if args.config is not None:
        try:
            import tomllib
        except ImportError:  # Python 3.10
            import tomli as tomllib
        try:
            settings = tomllib.loads(args.config.read_text(encoding="utf-8"))
        except OSError as e:
            raise DeidError(f"--config {args.config}: {e.strerror or e}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise DeidError(f"--config {args.config}: not valid TOML ({e})") from None
    default, labels = settings.get("default", {}), settings.get("labels", {})
    if not isinstance(default, dict) or not isinstance(labels, dict) or \
            not all(isinstance(v, dict) for v in labels.values()):
        raise DeidError(f"--config {args.config}: [default] and [labels.LABEL] must be tables")
    default, labels = dict(default), {k: dict(v) for k, v in labels.items()}
    if args.padding is not None:
        default["pad_before"] = default["pad_after"] = args.padding
    for flag, key in (("mode", "audio"), ("text_op", "text"), ("pad_before", "pad_before"), ("pad_after", "pad_after")):
        if getattr(args, flag) is not None:
            default[key] = getattr(args, flag)
    for spec in args.label_op:
        label, _, ops = spec.partition("=")
        label = label.strip().upper()
        if label not in LABELS or not ops.strip():
            raise DeidError(f"--label-op {spec!r}: expected LABEL=OP[,OP] with a label from {', '.join(LABELS)}")
        table = labels.setdefault(label, {})
        for op in (o.strip().lower() for o in ops.split(",") if o.strip()):
            if op in AUDIO_OPS:
                table["audio"] = op
            elif op in TEXT_OPS:
                table["text"] = op
            else:
                raise DeidError(f"--label-op {spec!r}: unknown operator {op!r}; audio: {', '.join(AUDIO_OPS)}; "
                                f"text: {', '.join(TEXT_OPS)}")
    merged = {**settings, "default": default, "labels": labels}
    if args.merge_gap is not None:
        merged["merge_gap"] = args.merge_gap
    key = os.environ.get(KEY_ENV)
    return RedactOptions.from_settings(merged, key.encode("utf-8") if key else None)


def redact_many(redactor, files: list[Path], out_dir: Path | None, show_progress: bool = False,
                unredacted_report: bool = False, roots: dict[Path, Path] | None = None,
                formats: tuple[str, ...] = ("json",), existing: str = "refuse") -> int:
    """Redact every file, continue past failures, print a summary; 1 if any failed.
    ``redactor``: a Redactor (files one after another, with a progress bar per file) or a
    :class:`~deid_speech.batch.WorkerPool`.
    ``existing``: what to do where an earlier run's outputs are (refuse, overwrite, skip)."""
    from deid_speech.batch import Job, WorkerPool, redact_one
    from deid_speech.pipeline import existing_policy, full_name_outputs, output_collisions, output_folders

    inputs = {f.resolve() for f in files if f.exists()}
    folders = output_folders(files, out_dir, roots or {})  # --out-dir mirrors each input folder's tree
    full = full_name_outputs(files, folders)  # "x.wav" and "x.flac": the second keeps its extension
    refused = output_collisions(files, folders, full)  # before any work: never overwrite or delete another file
    ok, failed, skipped = 0, [], 0
    bar = None
    if show_progress:
        from tqdm import tqdm

        bar = tqdm(total=len(files), unit="file", file=sys.stderr, dynamic_ncols=True)
    plans = []  # decided in the parent, before any work: skip, or redact (refusing where told to)
    for f in files:
        action, why = existing_policy(f, folders[f], f in full, formats, unredacted_report, existing)
        plans.append((f, action, refused.get(f) or why or None))

    def serial():
        for f, action, refuse in plans:
            if action == "skip":
                yield f, action, (True, f"skipped: {refuse}")
                continue
            if bar:
                bar.set_description(f.name[:40])
                bar.set_postfix_str("")
            progress = (lambda done, total: bar.set_postfix_str(f"{done:.0f}/{total:.0f}s audio")) if bar else None
            yield f, action, redact_one(redactor, job(f, refuse), progress)

    def job(f: Path, refuse: str | None) -> Job:
        return Job(f, folders[f], inputs, refuse, unredacted_report, f in full, formats)

    def parallel():  # results come back in input order, as serial ones do
        results = iter(redactor.redact_jobs([job(f, refuse) for f, action, refuse in plans if action != "skip"]))
        for f, action, refuse in plans:
            yield f, action, (True, f"skipped: {refuse}") if action == "skip" else next(results)

    for f, action, (good, msg) in (parallel() if isinstance(redactor, WorkerPool) else serial()):
        skipped += action == "skip"
        ok += good
        if not good:
            failed.append(f)
        if bar:
            bar.write(msg)
            bar.update(1)
        else:
            print(msg, file=sys.stderr if msg.startswith("error") else sys.stdout)
    if bar:
        bar.close()
    if len(files) > 1 or failed:
        print(f"{len(files)} file(s): {ok - skipped} redacted, " + (f"{skipped} skipped, " if skipped else "")
              + f"{len(failed)} failed"
              + (" (" + ", ".join(map(str, failed)) + ")" if failed else ""))
    return 1 if failed else 0


def parse_workers(value: str) -> int:
    """``--workers``: a count, or ``auto`` (the CPU cores this process may use)."""
    if value == "auto":
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def parse_passes(value: str) -> int:
    """``--verify-passes``: a whole number from 1 to :data:`MAX_VERIFY_PASSES`."""
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_VERIFY_PASSES:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_VERIFY_PASSES}, not {value!r}")
    return n


def cmd_tts(args: argparse.Namespace) -> int:
    from deid_speech.tts import cli as tts_cli

    return tts_cli.run(args)


def cmd_make_dataset(args: argparse.Namespace) -> int:
    import json

    from deid_speech.make_dataset import DatasetConfig, config_record, make_dataset, read_config

    cfg = DatasetConfig.load(args.config)
    summary = make_dataset(cfg, config_record(read_config(args.config)[1]),
                           progress={"auto": None, "on": True, "off": False}[args.progress])
    failed = {k: v["failed"] for k, v in summary["tts"].items() if v["failed"]}
    short = [k for k, v in summary["augment"].items() if not v["complete"]]
    print(json.dumps({"out_dir": str(cfg.out_dir), "sentences": summary["sentences"],
                      "manifests": {k: {"n": v["n"], "audio_s": v["audio_s"]} for k, v in summary["tts"].items()},
                      "failed": failed, "incomplete_augment": short}, indent=2))
    if failed or short:
        print("deid-speech: warning: " + "; ".join(
            [f"{sum(map(len, failed.values()))} record(s) not voiced (rerun retries them)"] * bool(failed)
            + [f"augmentation arm(s) {', '.join(short)} fell short of n"] * bool(short)), file=sys.stderr)
        return 1
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from deid_speech.eval import cli as eval_cli

    return eval_cli.run(args)


def cmd_train(args: argparse.Namespace) -> int:
    return _module(TRAIN_TARGETS[args.target]).run(args)


COMMANDS = {"redact": cmd_redact, "ingest": lambda args: _module("deid_speech.ingest").run(args),
            "serve": lambda args: _module("deid_speech.serve").run(args),
            "augment": cmd_augment, "tts": cmd_tts, "make-dataset": cmd_make_dataset,
            "eval": cmd_eval, "train": cmd_train,
            "experiment": lambda args: _module("deid_speech.experiment").run(args)}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so every cleanup runs as for Ctrl-C."""


def _on_sigterm(signum, frame) -> None:
    raise Terminated()


class _StderrHandler(logging.StreamHandler):
    """Progress messages of the library (``logging`` under ``deid_speech``) on whatever
    ``sys.stderr`` is when they are emitted."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def _log_to_stderr() -> None:
    log = logging.getLogger("deid_speech")
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    import signal

    _log_to_stderr()
    parser = build_parser()
    args = parser.parse_args(argv)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return COMMANDS[args.command](args)
    except DeidError as e:
        print(f"deid-speech: error: {e}", file=sys.stderr)
        return 1
    except Terminated:
        print("deid-speech: terminated; no partial output was left", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("deid-speech: interrupted; no partial output was left", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
