"""``deid-speech eval``: score systems (or saved redact outputs) on a voiced manifest.

    deid-speech eval --manifest DIR/test/manifest.jsonl --system cascade,presidio,spacy --out-dir OUT
    deid-speech eval --manifest ... --predictions DIR_OF_REDACT_JSONS --out-dir OUT

Writes OUT/results.json, results.md, results.csv and results.png (see :mod:`deid_speech.eval.report`).
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from deid_speech.cli import parse_passes
from deid_speech.errors import DeidError
from deid_speech.redact import MERGE_GAP, PAD_AFTER, PAD_BEFORE
from deid_speech.systems import RECOGNISER, VERIFIER, VERIFY_PASSES


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from deid_speech.systems import EVAL as SYSTEMS

    p = subparsers.add_parser(
        "eval", help="timestamp-overlap P/R/F1, leak and privacy metrics on a voiced manifest",
        description="Scores systems run here (one shared Whisper transcript per file) or saved "
                    "`deid-speech redact` outputs (--predictions) against a manifest's entity times.")
    p.add_argument("--manifest", type=Path, required=True, help="manifest.jsonl from `deid-speech tts`")
    p.add_argument("--system", default="cascade",
                   help=f"comma-separated: {', '.join(SYSTEMS)} (default: cascade)")
    p.add_argument("--predictions", type=Path, default=None,
                   help="folder of X.redacted.json files to score instead of running a system")
    p.add_argument("--asr-model", default=RECOGNISER, help="as `redact --asr-model` (default %(default)s)")
    p.add_argument("--fast-asr", action="store_true", help="Whisper's batched greedy decoding (as `redact --fast-asr`)")
    p.add_argument("--asr-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a decoding option of deid_speech.asr.whisper.AsrOptions (beam_size, fallback, "
                        "max_temperature, best_of, ...), to compare decodings; repeatable")
    p.add_argument("--verifier-option", action="append", default=[], metavar="KEY=VALUE",
                   help="as --asr-option, for cascade+verify's second decoder (a Whisper verifier); repeatable")
    p.add_argument("--verifier", default=VERIFIER, metavar="MODEL",
                   help="cascade+verify's second decoder, as `redact --verifier`: a Whisper model (default "
                        "%(default)s; its transcripts go to --asr-cache too), e2e, or Whisper models taking turns "
                        "by pass, comma-separated")
    p.add_argument("--verify-passes", type=parse_passes, default=VERIFY_PASSES, metavar="N",
                   help="how often cascade+verify's second decoder decodes each file, as `redact "
                        "--verify-passes` (default %(default)s)")
    p.add_argument("--asr-cache", type=Path, default=None, metavar="FILE",
                   help="keep Whisper transcripts in FILE (JSONL, keyed by audio, model and options) "
                        "and reuse them: scoring several NER models on one manifest decodes it once")
    p.add_argument("--ner-model", default="default",
                   help="the cascade's trained NER: default (the shipped NER model), a folder, or none")
    p.add_argument("--model", default=None, metavar="DIR",
                   help="the end-to-end model folder for system 'e2e' (`deid-speech train e2e`; "
                        "default: the shipped one, if any)")
    p.add_argument("--device", default="cpu",
                   help="where system e2e runs: cpu (its CTranslate2 int8 copy) or cuda (the model "
                        "itself on the GPU); the cascade's ASR runs on the CPU (default %(default)s)")
    p.add_argument("--aligner", choices=("pocketsphinx", "vosk", "whisper"), default="pocketsphinx",
                   help="times entities that lack them in the manifest")
    p.add_argument("--pad-before", type=float, default=PAD_BEFORE,
                   help="seconds redacted before each span (%(default)s, as redact)")
    p.add_argument("--pad-after", type=float, default=PAD_AFTER, help="seconds redacted after each span (%(default)s)")
    p.add_argument("--padding", type=float, default=None, help="set --pad-before and --pad-after together")
    p.add_argument("--merge-gap", type=float, default=MERGE_GAP,
                   help="redactions closer than this are joined (%(default)s, as redact)")
    p.add_argument("--uncovered", choices=("beep", "warn"), default=None,
                   help="speech that no transcribed word covers: beeped, as redact does by default (beep, "
                        "the default), or left out of the redaction (warn: the detectors alone)")
    p.add_argument("--limit", type=int, default=None, help="score only the first N records")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--overwrite", action="store_true", help="replace the results of an earlier eval in --out-dir")
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    return p


def asr_overrides(pairs: list[str], flag: str = "--asr-option") -> dict:
    """``KEY=VALUE`` pairs as AsrOptions fields, each value read as its field's type."""
    import dataclasses

    from deid_speech.asr.whisper import AsrOptions

    kinds = {f.name: f.type for f in dataclasses.fields(AsrOptions)
             if f.type in ("bool", "int", "float", "float | None", "str") and f.name != "model"}  # --asr-model
    out: dict = {}
    for pair in pairs:
        key, eq, text = pair.partition("=")
        if not eq or key not in kinds:
            raise DeidError(f"{flag} {pair!r}: expected KEY=VALUE, KEY one of {', '.join(sorted(kinds))}")
        kind, low = kinds[key], text.strip().lower()
        try:
            if kind == "bool":
                if low not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                out[key] = low in ("true", "1", "yes")
            elif kind == "float | None" and low == "none":
                out[key] = None
            else:
                out[key] = {"int": int, "str": str}.get(kind, float)(text)
        except ValueError:
            raise DeidError(f"{flag} {pair!r}: {key} takes a value of type {kind}") from None
    try:
        AsrOptions(**out)
    except ValueError as e:
        raise DeidError(f"{flag}: {e}") from None
    return out


def check_outputs(args: argparse.Namespace) -> None:
    """Before any work: the out-dir holds no earlier results (unless ``--overwrite``), and the
    ASR cache is not the manifest (CachedTranscriber refuses any other file not a cache)."""
    from deid_speech.eval.report import RESULT_FILES

    if args.out_dir.exists() and not args.out_dir.is_dir():
        raise DeidError(f"--out-dir {args.out_dir} is a file, not a folder")
    there = [args.out_dir / f for f in RESULT_FILES if (args.out_dir / f).exists()]
    if there and not args.overwrite:
        raise DeidError(f"{there[0]} already exists; use --overwrite to replace the earlier results, or another --out-dir")
    if args.asr_cache is not None and args.asr_cache.resolve() == args.manifest.resolve():
        raise DeidError(f"--asr-cache {args.asr_cache} is the manifest; give the cache a file of its own")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from deid_speech import systems as table
    from deid_speech.eval.report import write_results
    from deid_speech.eval.run import evaluate, load_manifest, predictions_from_dir, system_predictions

    systems = [s.strip() for s in args.system.split(",") if s.strip()]
    bad = [s for s in systems if s not in table.EVAL]
    if bad or not systems:
        raise DeidError(f"unknown system(s) {', '.join(bad) or '(none)'}; choose from {', '.join(table.EVAL)}")
    if args.limit is not None and args.limit < 1:
        raise DeidError("--limit must be at least 1")
    check_outputs(args)
    from deid_speech.redact import Operator, RedactOptions

    pads = (args.padding, args.padding) if args.padding is not None else (args.pad_before, args.pad_after)
    options = RedactOptions(Operator(pad_before=pads[0], pad_after=pads[1]), merge_gap=args.merge_gap)
    verifying = any(table.TABLE[s].verify for s in systems)
    if args.verifier != VERIFIER and not verifying:
        raise DeidError("--verifier is cascade+verify's second decoder: use it with --system cascade+verify")
    uses_e2e = any(table.TABLE[s].recognizer == "e2e" for s in systems) or (verifying and args.verifier == "e2e")
    if args.model is not None and not uses_e2e:
        raise DeidError("--model is the end-to-end model: use it with --system e2e")
    if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
        raise DeidError(f"--device must be cpu or cuda, got {args.device!r}")
    if args.device != "cpu" and not uses_e2e:
        raise DeidError("--device is where the e2e model runs: use it with --system e2e")
    e2e = None
    if uses_e2e and args.predictions is None:  # load (and validate) the model before the manifest
        from deid_speech.e2e.infer import E2EOptions, E2ETagger, default_model

        if args.device != "cpu":
            from deid_speech.asr.hf import torch_device

            torch_device(args.device)  # no GPU: a one-line error, not a torch traceback
        e2e = E2ETagger(E2EOptions(model=args.model or default_model(), device=args.device))
    extra = asr_overrides(args.asr_option)  # a bad pair fails before anything is loaded
    if args.verify_passes != VERIFY_PASSES and not verifying:
        raise DeidError("--verify-passes is cascade+verify's: use it with --system cascade+verify")
    if args.verifier_option and (not verifying or args.verifier == "e2e"):
        raise DeidError("--verifier-option is a Whisper verifier's decoding: use it with --system cascade+verify")
    second_extra = asr_overrides(args.verifier_option, "--verifier-option")
    if args.predictions is not None and args.uncovered is not None:
        raise DeidError("--uncovered is for systems run here: saved outputs say what redact beeped")
    uncovered = args.uncovered or "beep"
    items = load_manifest(args.manifest, args.aligner, args.limit)
    if not items:
        raise DeidError(f"{args.manifest}: no records")
    asr = second = None
    if args.predictions is not None:
        preds = predictions_from_dir(args.predictions, items)
    else:
        if not all(s in table.E2E for s in systems) and (args.asr_cache is not None or args.fast_asr
                                                          or args.asr_option):
            from deid_speech.asr.whisper import AsrOptions, transcriber

            opts = (AsrOptions.fast(model=args.asr_model, **extra) if args.fast_asr
                    else AsrOptions(model=args.asr_model, **extra))
            asr = transcriber(opts, args.asr_cache)
        if verifying and args.verifier != "e2e":
            from deid_speech.pipeline import verifier_transcriber

            second = verifier_transcriber(args.verifier, args.asr_cache, **second_extra)
        preds = system_predictions(systems, items, args.asr_model, asr=asr, options=options,
                                   ner_model=args.ner_model, e2e_model=args.model, e2e=e2e,
                                   verifier=args.verifier, verifier_asr=second, uncovered=uncovered,
                                   verify_passes=args.verify_passes)
    show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
    with tqdm(total=len(items), unit="file", disable=not show, file=sys.stderr) as bar:
        results = evaluate(items, preds, progress=lambda k: bar.update(1))
    results["manifest"] = str(args.manifest)
    results["asr_model"] = "(saved outputs)" if args.predictions else args.asr_model
    results["ner_model"] = args.ner_model
    if args.predictions is None:
        results["uncovered_action"] = uncovered
    if args.asr_option:
        results["asr_options"] = extra
    if args.asr_cache is not None and asr is not None:
        results["asr_cache"] = {"path": str(args.asr_cache), "hits": asr.hits, "decoded": asr.misses,
                                "decoding_s": round(asr.decoding_s, 2)}
    if verifying:
        results["verifier"] = args.verifier
        results["verify_passes"] = args.verify_passes
    if args.asr_cache is not None and second is not None:
        from deid_speech.pipeline import turns

        results["verifier_cache"] = {"hits": sum(t.hits for t in turns(second)),
                                     "decoded": sum(t.misses for t in turns(second)),
                                     "decoding_s": round(sum(t.decoding_s for t in turns(second)), 2)}
    if args.verifier_option:
        results["verifier_options"] = second_extra
    if e2e is not None:
        results["e2e_model"] = str(e2e.options.model)
        results["e2e_device"] = args.device
    results["command"] = shlex.join(["deid-speech", *sys.argv[1:]])
    paths = write_results(results, args.out_dir)
    for name, s in results["systems"].items():
        o = s["timestamp_overlap"]["overall"]
        print(f"{name}: P {o['precision']:.3f} R {o['recall']:.3f} F1 {o['f1']:.3f} "
              f"(leaked time {s['audio_leak']['leaked_duration']:.3f})")
    print("wrote " + ", ".join(map(str, paths)))
    return 0
