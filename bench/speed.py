"""Where a redaction's time goes: wall time, real-time factor with and without model
loading, peak memory and the share of each stage, for a 10 s utterance, a 110 s-class
call and a 10-minute call; the default system and ``e2e+patterns``; and, in the same run
on the same audio, plain faster-whisper (the floor for the recogniser) and Whisper +
Presidio (the peer); and the cascade with ``--fast-asr`` (batched greedy decoding).

    .venv/bin/python bench/speed.py [--runs 3] [--long] [--out bench/results/speed.json]

Every case runs in a fresh process, ``--runs`` times (medians, with min and max): the
whole ``deid-speech redact`` command (its own ``main``; interpreter start, imports, model
loading, redaction and writing the outputs), its stages collected by
:mod:`deid_speech.timing`; peak memory is the process's maximum resident set plus that of
the verifier's helper process, if it has one (the sum of the two peaks: an upper bound, since
the two peaks need not come at once and both processes map the same libraries). On Linux the
process tree is also sampled every 0.1 s (:class:`MemorySampler`): the largest sum of its
resident sets at one moment, and of its proportional set sizes (PSS: a page that n processes
share counts 1/n in each), which is what the machine must hold for the call.

Audio (written once into ``--audio-dir``) comes from the unseen-voice benchmark's dev
part, never its test part: the dev utterance closest to 10 s, the 108 s dev call, the
four dev calls and the first two again (10.6 min). ``--long`` adds a 20-minute 48 kHz
stereo call (the dev calls on the left, the same calls in another order on the right:
two different channels, both decoded) and its 16 kHz mono left channel, to compare
memory and cost per second.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "out" / "benchmark" / "dev"
# "cascade" is the default: the stock recogniser with the second opinion (--verify, on by default), which
# decodes the audio three times (--verify-passes 3: tiny.en-sg, base-sg, tiny.en-sg) in a helper process beside the first
# decoder; "--verifier tiny.en-sg" is the default until session 33 (both passes by tiny.en-sg)
SYSTEMS = ("cascade", "cascade --verifier tiny.en-sg", "cascade --no-helper-process", "cascade --verify-passes 1",
           "cascade --verify-passes 2",
           "cascade --verify-passes 1 --no-helper-process", "cascade --no-verify",
           "cascade --fast-asr",
           "cascade --asr-model tiny.en-sg", "cascade --asr-model tiny.en-sg-full", "e2e+patterns")
PEERS = ("faster-whisper", "faster-whisper-batched", "whisper+presidio")


TEN_MINUTES = "call-10min"
GAP_S = 1.0  # silence between the calls joined into the long ones
# the dev audio every speed figure since session 13 was measured on: the first four dev calls and the
# first 100 dev utterances (the dev part grew in session 31; the speed audio stays the same)
SPEED_CALLS = ("c-dev-bank-card-block", "c-dev-clinic-appointment", "c-dev-condo-delivery", "c-dev-friend-call")
SPEED_UTTERANCES = 100


def speed_sources(utterances: list[dict], calls: list[dict]) -> tuple[dict, list[dict]]:
    """The dev utterance nearest 10 s among the first :data:`SPEED_UTTERANCES`, and the
    :data:`SPEED_CALLS` records in manifest order (a one-line exit if one is missing)."""
    first = [d for d in utterances if int(d["id"].rsplit("-", 1)[1]) <= SPEED_UTTERANCES]
    chosen = [d for d in calls if d["id"] in SPEED_CALLS]
    if not first or len(chosen) != len(SPEED_CALLS):
        sys.exit(f"{BENCH}: the speed audio needs the first {SPEED_UTTERANCES} dev utterances and the dev calls "
                 f"{', '.join(SPEED_CALLS)}; run `make benchmark`")
    return min(first, key=lambda d: abs(d["duration"] - 10.0)), chosen


def ten_minute_order(ids: list[str]) -> list[str]:
    """The calls of the ten-minute call, in order: the four speed calls, then the first two again."""
    return list(ids) + list(ids[:2])


def join_offsets(order: list[str], seconds: dict[str, float]) -> list[float]:
    """Where each call of ``order`` starts in the joined call (``seconds``: each call's audio
    length), :data:`GAP_S` of silence after each; and, last, the joined call's length."""
    t0, out = 0.0, [0.0]
    for k in order:
        t0 += seconds[k] + GAP_S
        out.append(t0)
    return out


def join_audio(audio: dict, order: list[str], sr: int = 16000):
    """The calls of ``order`` (``audio``: each call's samples at ``sr``), :data:`GAP_S` of digital
    silence after each, as one array: how every joined call of the benchmarks is made."""
    import numpy as np

    gap = np.zeros(int(GAP_S * sr), np.float32)
    return np.concatenate([x for k in order for x in (audio[k], gap)])


def long_call_manifest(calls: list[dict], order: list[str], audio: Path, seconds: dict[str, float]) -> dict:
    """The manifest record of ``calls`` (dev manifest records, by id) joined in ``order`` with
    :data:`GAP_S` of silence after each, as :func:`make_audio` joins their audio: text joined by
    spaces, entity and word times and characters shifted, so that ``deid-speech eval`` scores
    the long call (``seconds``: each call's audio length)."""
    by_id = {d["id"]: d for d in calls}
    starts = join_offsets(order, seconds)
    c0, texts, ents, words = 0, [], [], []
    for k, t0 in zip(order, starts):
        d = by_id[k]
        shift = {"start": t0, "end": t0, "char_start": c0, "char_end": c0}
        ents += [{**e, **{f: e[f] + v for f, v in shift.items()}} for e in d["entities"]]
        words += [{**w, **{f: w[f] + v for f, v in shift.items() if f in w}} for w in d.get("words", [])]
        texts.append(d["text"])
        c0 += len(d["text"]) + 1
    return {"id": f"dev-calls-{len(order)}-joined", "audio": str(audio.resolve()), "duration": round(starts[-1], 6),
            "sample_rate": 16000, "text": " ".join(texts), "entities": ents, "words": words}


def make_audio(folder: Path, long: bool) -> dict[str, Path]:
    """The benchmark's audio, written once; with the 10-minute call, its manifest
    (``call-10min.manifest.jsonl``: the dev calls' entities in the joined call's times)."""
    import numpy as np
    import soundfile as sf

    from deid_speech.audio import load, resample

    if not (BENCH / "calls" / "manifest.jsonl").is_file():
        sys.exit(f"{BENCH}: no benchmark audio; run `make benchmark` first")
    folder.mkdir(parents=True, exist_ok=True)
    out = {"utterance-10s": folder / "utterance-10s.flac", "call-110s": folder / "call-110s.flac",
           TEN_MINUTES: folder / f"{TEN_MINUTES}.flac"}
    if long:
        out["call-20min-16k-mono"] = folder / "call-20min-16k-mono.flac"
        out["call-20min-48k-stereo"] = folder / "call-20min-48k-stereo.flac"
    ten_manifest = folder / f"{TEN_MINUTES}.manifest.jsonl"
    if all(p.is_file() for p in out.values()) and ten_manifest.is_file():
        return out
    best, calls = speed_sources([json.loads(line) for line in (BENCH / "utterances" / "manifest.jsonl").open()],
                                [json.loads(line) for line in (BENCH / "calls" / "manifest.jsonl").open()])
    audio = {d["id"]: load(BENCH / "calls" / d["audio"]).samples[:, 0] for d in calls}
    ids = [d["id"] for d in calls]
    sr = 16000
    sf.write(out["utterance-10s"], load(BENCH / "utterances" / best["audio"]).samples[:, 0], sr)
    sf.write(out["call-110s"], audio["c-dev-clinic-appointment"], sr)
    order = ten_minute_order(ids)  # the audio and its manifest
    sf.write(out[TEN_MINUTES], join_audio(audio, order, sr), sr)
    record = long_call_manifest(calls, order, out[TEN_MINUTES], {k: len(a) / sr for k, a in audio.items()})
    ten_manifest.write_text(json.dumps(record) + "\n")
    if long:
        left, right = join_audio(audio, ids * 3, sr), join_audio(audio, ids[::-1] * 3, sr)
        n = min(len(left), len(right))
        sf.write(out["call-20min-16k-mono"], left[:n], sr)
        stereo = np.stack([resample(left[:n], sr, 48000), resample(right[:n], sr, 48000)], axis=1)
        sf.write(out["call-20min-48k-stereo"], stereo, 48000)
    return out


CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
case, path, work = sys.argv[1], sys.argv[2], sys.argv[3]
from deid_speech import timing
with timing.collect() as t:
    if case.startswith("redact:"):
        from deid_speech.cli import main
        system, *flags = case.split(":", 1)[1].split()
        rc = main(["redact", path, "--out-dir", work, "--system", system, "--progress", "off", "--overwrite", *flags])
        if rc != 0:
            sys.exit(f"redact exited {rc}")
    elif case == "whisper+presidio":
        from pathlib import Path
        from deid_speech.pipeline import RedactConfig, Redactor, redact_file
        r = Redactor(RedactConfig(system="presidio", min_score=0.0))
        redact_file(r, Path(path), Path(work), set())
    else:
        from deid_speech import models
        from deid_speech.asr.whisper import cpu_threads
        with timing.stage("loading"):
            from faster_whisper import BatchedInferencePipeline, WhisperModel, decode_audio
            model = WhisperModel(str(models.path("whisper-tiny.en")), device="cpu", compute_type="int8",
                                 cpu_threads=cpu_threads())
        with timing.stage("reading"):
            audio = decode_audio(path)
        with timing.stage("decoding"):
            if case == "faster-whisper":  # its defaults (beam 5, temperature fallback), word times
                segments, _ = model.transcribe(audio, language="en", word_timestamps=True)
            else:  # its batched pipeline: Silero VAD chunks, batches of 8, greedy
                segments, _ = BatchedInferencePipeline(model).transcribe(
                    audio, language="en", word_timestamps=True, batch_size=8, beam_size=1)
            words = sum(len(s.words or []) for s in segments)
import resource  # this process's peak, and a helper process's (the verifier's, waited for when redact ends)
own_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
helper_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"stages": t.seconds, "in_process_s": time.perf_counter() - t0, "own_peak_mb": own_mb,
                  "helper_peak_mb": helper_mb}))
"""


def measure(case: str, path: Path, duration: float, runs: int) -> dict:
    """``runs`` fresh processes, each measured by its own parent (peak memory of one child)."""
    rows = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="deid-speed-") as work:
            probe = subprocess.run([sys.executable, __file__, "--one", case, str(path), work],
                                   capture_output=True, text=True)
            if probe.returncode:
                raise SystemExit(probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "case failed")
            rows.append(json.loads(probe.stdout.strip().splitlines()[-1]))
    return summarise(rows, duration)


def summarise(rows: list[dict], duration: float) -> dict:
    def med(xs):
        return statistics.median(xs)

    walls = [r["wall_s"] for r in rows]
    stages = sorted({k for r in rows for k in r["stages"]})
    per_stage = {k: med([r["stages"].get(k, 0.0) for r in rows]) for k in stages}
    startup = med([r["wall_s"] - sum(r["stages"].values()) for r in rows])
    loading = per_stage.get("loading", 0.0) + startup
    work = med([sum(v for k, v in r["stages"].items() if k != "loading") for r in rows])
    decoding = per_stage.get("decoding", 0.0)
    wall = med(walls)
    return {
        "runs": len(rows), "duration_s": round(duration, 2),
        "wall_s": round(wall, 2), "wall_min_s": round(min(walls), 2), "wall_max_s": round(max(walls), 2),
        "rtf": round(wall / duration, 4),
        "rtf_without_loading": round(work / duration, 4),
        "rtf_min": round(min(walls) / duration, 4), "rtf_max": round(max(walls) / duration, 4),
        "peak_mb": round(med([r["peak_mb"] for r in rows])),
        "helper_peak_mb": round(med([r.get("helper_peak_mb", 0.0) for r in rows])),
        **({k: round(med([r[k] for r in rows])) for k in ("largest_rss_sum_mb", "largest_pss_sum_mb")}
           if all("largest_pss_sum_mb" in r for r in rows) else {}),
        "seconds": {"start-up (interpreter, imports)": round(startup, 3),
                    **{k: round(v, 3) for k, v in per_stage.items()}},
        "share_of_wall": {"start-up + loading": round(loading / wall, 3),
                          **{k: round(v / wall, 3) for k, v in per_stage.items() if k != "loading"}},
        # detection: everything after loading that is not decoding, against the work after loading
        "detection_share_of_work": round((work - decoding) / work, 3) if work else None,
        "detectors_and_verification_over_decoding": round(
            (per_stage.get("detectors", 0.0) + per_stage.get("verification", 0.0)) / decoding, 3) if decoding else None,
    }


class MemorySampler:
    """The largest memory a process and its descendants hold at one moment, sampled every
    ``every`` seconds in a thread (Linux ``/proc``; elsewhere nothing is sampled): the sum of
    their resident sets (``VmRSS``) and of their proportional set sizes (``Pss`` of
    ``smaps_rollup``: a page shared by n processes counts 1/n in each, so the sum counts it
    once). A peak shorter than ``every`` can be missed; ``ru_maxrss`` bounds it from above."""

    def __init__(self, pid: int, every: float = 0.1):
        import threading

        self.pid, self.every = pid, every
        self.rss_mb = self.pss_mb = 0.0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _field(path: str, name: str) -> float:
        try:
            with open(path) as fh:
                for line in fh:
                    if line.startswith(name):
                        return int(line.split()[1]) / 1024
        except (OSError, ValueError, IndexError):
            pass
        return 0.0

    def tree(self) -> list[int]:
        """This process and its descendants (``/proc/PID/task/*/children``)."""
        import os

        out, i = [self.pid], 0
        while i < len(out):
            try:
                for task in os.listdir(f"/proc/{out[i]}/task"):
                    with open(f"/proc/{out[i]}/task/{task}/children") as fh:
                        out += [int(x) for x in fh.read().split()]
            except OSError:
                pass
            i += 1
        return out

    def _run(self) -> None:
        if not Path("/proc/self/smaps_rollup").exists():
            return
        while not self._stop.is_set():
            pids = self.tree()
            rss = sum(self._field(f"/proc/{q}/status", "VmRSS:") for q in pids)
            pss = sum(self._field(f"/proc/{q}/smaps_rollup", "Pss:") for q in pids)
            if not rss:  # the process is gone (or a zombie): no sample, not a sample of 0 MB
                break
            self.rss_mb, self.pss_mb = max(self.rss_mb, rss), max(self.pss_mb, pss)
            self.samples += 1
            self._stop.wait(self.every)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        if not self.samples:
            return {}
        return {"largest_rss_sum_mb": round(self.rss_mb), "largest_pss_sum_mb": round(self.pss_mb)}


def one(case: str, path: str, work: str) -> None:
    """Measure one fresh child process (this process is its only parent)."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, case, path, work], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    sampler = MemorySampler(proc.pid)
    out, err = proc.communicate()
    wall = time.perf_counter() - t
    sampled = sampler.stop()
    if proc.returncode:
        sys.exit(f"{case} on {Path(path).name} failed: "
                 f"{err.strip().splitlines()[-1] if err.strip() else proc.returncode}")
    d = json.loads(out.strip().splitlines()[-1])
    d["wall_s"] = wall
    # the redact process and its helper together (the sum of their peaks: an upper bound)
    d["peak_mb"] = d.pop("own_peak_mb") + d["helper_peak_mb"]
    d.update(sampled)
    print(json.dumps(d))


def table(results: dict) -> str:
    lines = ["| audio | case | wall s (min-max) | RTF | RTF w/o loading | peak MB | largest PSS MB | start-up+loading | "
             "decoding | vad | detectors | verification | alignment | reading+writing | detection share of work |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for audio, cases in results.items():
        for case, r in cases.items():
            s = r["share_of_wall"]

            def pct(*keys, s=s):
                return f"{100 * sum(s.get(k, 0.0) for k in keys):.0f}%"

            det = r["detection_share_of_work"]
            lines.append(f"| {audio} | {case} | {r['wall_s']} ({r['wall_min_s']}-{r['wall_max_s']}) | {r['rtf']} | "
                         f"{r['rtf_without_loading']} | {r['peak_mb']} | {r.get('largest_pss_sum_mb', '')} | "
                         f"{pct('start-up + loading')} | "
                         f"{pct('decoding')} | {pct('vad')} | {pct('detectors')} | {pct('verification')} | "
                         f"{pct('alignment')} | {pct('reading', 'writing')} | "
                         f"{'' if det is None else f'{100 * det:.0f}%'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--long", action="store_true", help="add the 20-minute calls (48 kHz stereo and 16 kHz mono)")
    ap.add_argument("--audio", default=None, help="comma-separated subset of the audio names")
    ap.add_argument("--cases", default=None, help="comma-separated subset of the cases")
    ap.add_argument("--audio-dir", type=Path, default=ROOT / "out" / "speed-audio")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--one", nargs=3, metavar=("CASE", "PATH", "WORK"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return one(*args.one)
    import soundfile as sf

    audio = make_audio(args.audio_dir, args.long)
    if args.audio:
        if unknown := set(args.audio.split(",")) - set(audio):
            ap.error(f"no audio named {', '.join(sorted(unknown))} (known: {', '.join(audio)})")
        audio = {k: v for k, v in audio.items() if k in args.audio.split(",")}
    cases = [f"redact:{s}" for s in SYSTEMS] + list(PEERS)
    if args.cases:
        if unknown := set(args.cases.split(",")) - set(cases):
            ap.error(f"no case named {', '.join(sorted(unknown))} (known: {', '.join(cases)})")
        cases = [c for c in cases if c in args.cases.split(",")]
    results: dict[str, dict] = {}
    for name, path in audio.items():
        duration = sf.info(str(path)).duration
        long_file = duration > 900
        for case in cases:
            if long_file and not case.startswith("redact:cascade"):
                continue  # the 20-minute calls: the cascade only
            r = measure(case, path, duration, args.runs)
            results.setdefault(name, {})[case] = r
            print(f"{name} {case}: wall {r['wall_s']} s, RTF {r['rtf']} ({r['rtf_without_loading']} without loading), "
                  f"peak {r['peak_mb']} MB (largest PSS at one time: {r.get('largest_pss_sum_mb', '-')} MB)", flush=True)
    print(table(results))
    if args.out:
        from deid_speech.asr.whisper import cpu_threads

        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"runs": args.runs, "cores": cpu_threads(), "python": sys.version.split()[0],
                                        "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
