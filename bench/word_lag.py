"""How late each Whisper model's word times come: its words matched to reference words with
times, and the median of (recognised - reference) start and end, split by where the word
stands: inside continuous speech (``joined``: the reference has less than ``--pause`` s of
silence on that side) or at a pause.

    .venv/bin/python bench/word_lag.py --manifest out/real-more/manifest.jsonl \\
        --models tiny.en,tiny.en-sg,base-sg@1 --asr-cache out/asr-cache-real.jsonl \\
        --out bench/results/word-lag-real.json

``MODEL@k``: the model hears the audio as the verifier's pass k does (k > 0: with the dither of
seed k). Both figures are given per model: ``raw`` (as faster-whisper times the words) and
``corrected`` (as the transcriber gives them, its lag taken off:
:data:`deid_speech.asr.models.WORD_LAG_S`). The lag is read from the ``joined`` words' raw
median: at a pause Whisper stretches a word over part of the silence, which says more about
the pause than about the model.

A word is matched when its normalised text (lower case, letters and digits) equals a reference
word's in the longest common subsequence of the two word lists (:mod:`difflib`); words the
recogniser wrote otherwise ("4" for "four") are left out.
"""
from __future__ import annotations

import argparse
import difflib
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import report  # noqa: E402

PAUSE_S = 0.1


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def word_errors(ref: list, hyp: list, pause_s: float = PAUSE_S) -> list[tuple[str, str, float]]:
    """``(edge, where, seconds)`` for each recognised word of ``hyp`` matched to a word of ``ref``
    (both lists of objects with ``text``, ``start``, ``end``, in time order): edge ``start`` or
    ``end``, where ``joined`` or ``pause`` (``pause_s`` or more of silence before a start or after
    an end in ``ref``, or the first or last word), seconds = recognised - reference."""
    ref = [w for w in ref if _norm(w.text)]
    hyp = [w for w in hyp if _norm(w.text)]
    match = difflib.SequenceMatcher(a=[_norm(w.text) for w in ref], b=[_norm(w.text) for w in hyp], autojunk=False)
    out = []
    for block in match.get_matching_blocks():
        for i in range(block.size):
            j, h = block.a + i, hyp[block.b + i]
            r = ref[j]
            before = j == 0 or r.start - ref[j - 1].end >= pause_s
            after = j == len(ref) - 1 or ref[j + 1].start - r.end >= pause_s
            out.append(("start", "pause" if before else "joined", h.start - r.start))
            out.append(("end", "pause" if after else "joined", h.end - r.end))
    return out


def summarise(errors: list[tuple[str, str, float]]) -> dict:
    """Median, mean and count of the errors of each (edge, where), in seconds."""
    out = {}
    for edge in ("start", "end"):
        for where in ("joined", "pause"):
            xs = [e for g, w, e in errors if (g, w) == (edge, where)]
            if xs:
                out[f"{edge} {where}"] = {"n": len(xs), "median": round(statistics.median(xs), 3),
                                          "mean": round(statistics.fmean(xs), 3)}
    return out


def lag(summary: dict) -> float | None:
    """The lag read from a summary: the mean of the ``joined`` starts' and ends' medians."""
    xs = [summary[k]["median"] for k in ("start joined", "end joined") if k in summary]
    return round(statistics.fmean(xs), 3) if xs else None


def main(argv: list[str] | None = None) -> dict:
    from deid_speech.asr.whisper import AsrOptions, transcriber
    from deid_speech.audio import for_recognition, load, verifier_pass
    from deid_speech.eval.run import load_manifest

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--manifest", type=Path, required=True, help="records with reference word times")
    p.add_argument("--models", default="tiny.en,tiny.en-sg,base-sg@1", help="MODEL[@pass],...")
    p.add_argument("--pause", type=float, default=PAUSE_S, help="silence that makes a word edge a pause's")
    p.add_argument("--asr-cache", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    models = []
    for spec in args.models.split(","):
        name, _, k = spec.partition("@")
        if not name or (k and not k.isdigit()):
            p.error(f"--models: {spec!r} is not MODEL or MODEL@PASS")
        models.append((spec, transcriber(AsrOptions(model=name), args.asr_cache), int(k or 0)))
    items = [i for i in load_manifest(args.manifest) if i.words]
    if not items:
        sys.exit(f"{args.manifest}: no record has reference word times")
    raw = {spec: [] for spec, _, _ in models}
    corrected = {spec: [] for spec, _, _ in models}
    for item in items:
        mono = for_recognition(load(item.audio).mono16k())
        for spec, asr, k in models:
            words = asr.transcribe(verifier_pass(mono, k)).words
            errors = word_errors(item.words, list(words), args.pause)
            corrected[spec] += errors
            shift = asr.resolved.lag_s  # put back what the transcriber took off (clipping aside)
            raw[spec] += [(g, w, e + shift) for g, w, e in errors]
    out = {}
    for spec, asr, _ in models:
        r, c = summarise(raw[spec]), summarise(corrected[spec])
        out[spec] = {"model_lag_s": asr.resolved.lag_s, "measured_lag_s": lag(r), "residual_lag_s": lag(c),
                     "raw": r, "corrected": c}
    result = {"command": "python bench/word_lag.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "manifest": str(args.manifest), "files": len(items), "pause_s": args.pause, "models": out}
    report(result, args.out)
    return result


if __name__ == "__main__":
    main()
