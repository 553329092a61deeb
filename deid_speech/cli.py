"""Command line: ``deid-speech redact FILE|DIR ...`` (more subcommands join as stages land).

Errors print one line (no traceback). Exit status: 0 all files redacted, 1 some failed,
2 bad usage.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from deid_speech.errors import DeidError
from deid_speech.types import LABELS


def _labels(value: str) -> tuple[str, ...]:
    labels = tuple(x.strip().upper() for x in value.split(",") if x.strip())
    bad = [x for x in labels if x not in LABELS]
    if bad or not labels:
        raise argparse.ArgumentTypeError(f"unknown label(s) {', '.join(bad) or '(none)'}; "
                                         f"choose from {','.join(LABELS)}")
    return labels


def _padding(value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0 <= v <= 2:
        raise argparse.ArgumentTypeError("padding must be between 0 and 2 seconds")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="deid-speech", description="Offline speech de-identification.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("redact", help="beep out PII in call recordings; write a redacted transcript",
                       description="Writes X.redacted.<ext> and X.redacted.json next to each input "
                                   "(or into --out-dir). Folders are searched for audio files.")
    r.add_argument("inputs", nargs="+", help="audio files (wav/flac/ogg/mp3) or folders")
    r.add_argument("--out-dir", type=Path, help="write outputs here instead of next to the inputs")
    r.add_argument("--system", choices=("cascade", "e2e"), default="cascade")
    r.add_argument("--mode", choices=("beep", "silence"), default="beep")
    r.add_argument("--padding", type=_padding, default=0.1, help="seconds added on both sides (0.1)")
    r.add_argument("--asr-model", default="tiny.en",
                   help="tiny.en (default), base, a CTranslate2 or HF folder, a .pt checkpoint, or a hub name")
    r.add_argument("--labels", type=_labels, default=LABELS, help="comma-separated subset of " + ",".join(LABELS))
    r.add_argument("--spacy-model", default=None, help="spaCy pipeline name or folder for PERSON/DATE")
    r.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    return p


def cmd_redact(args: argparse.Namespace) -> int:
    from deid_speech.pipeline import RedactConfig, Redactor, collect_inputs
    from deid_speech.redact import RedactOptions

    files = collect_inputs(args.inputs)
    config = RedactConfig(system=args.system, asr_model=args.asr_model, labels=args.labels,
                          redact=RedactOptions(mode=args.mode, padding=args.padding),
                          spacy_model=args.spacy_model)
    show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
    return redact_many(Redactor(config), files, args.out_dir, show)


def redact_many(redactor, files: list[Path], out_dir: Path | None, show_progress: bool = False) -> int:
    """Redact every file, continue past failures, print a summary; 1 if any failed."""
    from deid_speech.pipeline import redact_file, remove_stale_outputs

    inputs = {f.resolve() for f in files if f.exists()}
    ok, failed = 0, []
    bar = None
    if show_progress:
        from tqdm import tqdm

        bar = tqdm(total=len(files), unit="file", file=sys.stderr, dynamic_ncols=True)
    for f in files:
        t0 = time.perf_counter()
        if bar:
            bar.set_description(f.name[:40])
            bar.set_postfix_str("")
        try:
            progress = (lambda done, total: bar.set_postfix_str(f"{done:.0f}/{total:.0f}s audio")) if bar else None
            audio_out, _, result = redact_file(redactor, f, out_dir, inputs, progress=progress)
            ok += 1
            msg = (f"{f}: {len(result.spans)} span(s) redacted in {time.perf_counter() - t0:.1f}s "
                   f"-> {audio_out}")
            if result.uncovered:
                secs = sum(b - a for a, b in result.uncovered)
                msg += (f"\nwarning: {f}: {secs:.1f}s of speech-like audio has no transcribed words and "
                        f"was not checked for PII (see uncovered_speech in the JSON)")
        except Exception as e:  # never a traceback, never a half-written or stale output
            failed.append(f)
            remove_stale_outputs(f, out_dir)
            msg = f"error: {e}" if isinstance(e, DeidError) else \
                f"error: {f}: unexpected failure ({type(e).__name__}: {e})"
        if bar:
            bar.write(msg)
            bar.update(1)
        else:
            print(msg, file=sys.stderr if msg.startswith("error") else sys.stdout)
    if bar:
        bar.close()
    if len(files) > 1 or failed:
        print(f"{len(files)} file(s): {ok} redacted, {len(failed)} failed"
              + (" (" + ", ".join(map(str, failed)) + ")" if failed else ""))
    return 1 if failed else 0


COMMANDS = {"redact": cmd_redact}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except DeidError as e:
        print(f"deid-speech: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("deid-speech: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
