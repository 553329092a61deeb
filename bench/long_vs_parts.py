"""Which decoder makes the joined ten-minute call leak more than its calls scored alone.

    .venv/bin/python bench/long_vs_parts.py [--draws 8] [--parts-cache out/asr-cache.jsonl] \\
        [--long-cache out/asr-cache-long.jsonl] [--out bench/results/long-vs-parts.json]

The joined call (``bench/speed.py``'s ``call-10min``: the four speed calls of the dev part, then
the first two again, :data:`speed.GAP_S` of silence after each) is scored four ways, per dithered
draw as ``bench/dither.py`` makes them: with the first decoder's transcript and the verifier's
transcripts each taken either from the joined call's own decoding (``J``) or from the calls'
separate decodings, shifted to their places in the joined call (``S``). Detection and the
verifier's merge are the redactor's own (:meth:`Redactor.detect`, :meth:`Redactor.verify`); the
speech no word covers is beeped as redact beeps it. Transcripts are read from the caches that
``bench/dither.py`` fills (decoded where missing).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import report  # noqa: E402

WAYS = ("first J, verifier J", "first S, verifier J", "first J, verifier S", "first S, verifier S")


def joined_transcript(parts):
    """One transcript of ``parts`` (``(transcript, offset_s)`` in order): each word moved by its
    part's offset, the words joined as :meth:`Transcript.from_words` joins them."""
    from deid_speech.types import Transcript

    return Transcript.from_words([(w.text, w.start + off, w.end + off, w.prob) for tr, off in parts for w in tr.words])


class Heard:
    """A verifier pass already decoded: what :meth:`Redactor.verify` asks of a handle."""

    def __init__(self, transcript):
        self.transcript = transcript

    def result(self):
        from deid_speech.types import Recognition

        return Recognition(self.transcript)


def main(argv: list[str] | None = None) -> dict:
    import speed
    from deid_speech.asr.whisper import AsrOptions, speech_regions, transcriber
    from deid_speech.audio import MODEL_RATE, for_recognition, load
    from deid_speech.eval.run import Prediction, SystemScore, load_manifest
    from deid_speech.pipeline import ByPass, RedactConfig, Redactor, turns, unchecked_speech, verifier_transcriber
    from deid_speech.redact import redact_text
    from deid_speech.systems import RECOGNISER, VERIFIER
    from dither import Dithered

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=8)
    ap.add_argument("--parts-cache", type=Path, default=ROOT / "out" / "asr-cache.jsonl")
    ap.add_argument("--long-cache", type=Path, default=ROOT / "out" / "asr-cache-long.jsonl")
    ap.add_argument("--audio-dir", type=Path, default=ROOT / "out" / "speed-audio")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    long_manifest = args.audio_dir / f"{speed.TEN_MINUTES}.manifest.jsonl"
    if not long_manifest.is_file():
        sys.exit(f"no {long_manifest}: run `bench/speed.py` once first")
    parts = {i.id: i for i in load_manifest(speed.BENCH / "calls" / "manifest.jsonl") if i.id in speed.SPEED_CALLS}
    joined = load_manifest(long_manifest)[0]
    order = speed.ten_minute_order(list(parts))  # in manifest order, as speed.make_audio joins them
    config = RedactConfig(asr_model=RECOGNISER, ner_model="default", verify=True, verifier=VERIFIER)
    # each cache read, and the detectors built, once; a draw only changes the dither they hear
    decoders = {cache: (transcriber(AsrOptions(model=RECOGNISER), cache), turns(verifier_transcriber(VERIFIER, cache)))
                for cache in (args.long_cache, args.parts_cache)}
    detectors = None

    def redactor(cache: Path, d: int) -> Redactor:
        nonlocal detectors
        first, second = decoders[cache]
        r = Redactor(config, asr=Dithered(first, d), verifier=ByPass([Dithered(t, d) for t in second]),
                     detectors=detectors)
        detectors = r.detectors
        return r

    def decoded(r: Redactor, mono):
        return r.asr.recognize(mono).transcript, [p.result().transcript for p in r.listen(mono)]

    mono = for_recognition(load(joined.audio).mono16k())
    regions = speech_regions(mono)
    parts_audio = {k: for_recognition(load(parts[k].audio).mono16k()) for k in parts}
    offsets = speed.join_offsets(order, {k: len(a) / MODEL_RATE for k, a in parts_audio.items()})
    draws = []
    for d in range(args.draws):
        rj = redactor(args.long_cache, d)
        first_j, verifier_j = decoded(rj, mono)
        rs = redactor(args.parts_cache, d)
        alone = {k: decoded(rs, a) for k, a in parts_audio.items()}
        first_s = joined_transcript([(alone[k][0], off) for k, off in zip(order, offsets)])
        verifier_s = [joined_transcript([(alone[k][1][p], off) for k, off in zip(order, offsets)])
                      for p in range(len(verifier_j))]
        row = {}
        for way, first, passes in zip(WAYS, (first_j, first_s, first_j, first_s),
                                      (verifier_j, verifier_j, verifier_s, verifier_s)):
            spans = rj.detect(first)
            spans = sorted(rj.verify(mono, spans, [Heard(t) for t in passes], first).applied(spans))
            score = SystemScore()
            score.add(joined, Prediction(spans, first, redact_text(first, spans), rj.config.redact,
                                         unchecked_speech(mono, first.words, regions)), len(mono) / MODEL_RATE)
            row[way] = {"leak": round(100 * score.leak.leaked_duration, 2),
                        "over_redaction": round(100 * score.leak.as_dict()["over_redaction"], 2)}
        draws.append(row)
        print(f"draw {d}: " + ", ".join(f"{w}: leak {v['leak']}" for w, v in row.items()), flush=True)
    summary = {w: {k: {"mean": round(statistics.mean(xs), 3), "sd": round(statistics.stdev(xs), 3) if len(xs) > 1 else 0.0}
                   for k in ("leak", "over_redaction") for xs in [[r[w][k] for r in draws]]} for w in WAYS}
    result = {"draws": draws, "summary": summary,
              "command": "python bench/long_vs_parts.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    report(result, args.out)
    return result


if __name__ == "__main__":
    main()
