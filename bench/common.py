"""What the benchmark scripts share: print a result as JSON and keep it in ``--out``; find the
unseen-voice benchmark's dev manifests (tuning scripts refuse its test part)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

DEV_PARTS = ("utterances", "calls")
SYSTEM = "cascade+verify"  # the default: `redact` verifies the cascade's redaction with a second decoder


def report(result: dict, out: Path | None) -> None:
    """Print ``result`` as indented JSON; also write it to ``out`` (folders made) if given."""
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


TEST_PART = re.compile(r"test\d*(_telephone)?")  # test parts: the benchmark's test and test2, a dataset's test_telephone


def refuse_test_part(bench: Path, tool: str) -> None:
    """Exit with one line when ``bench`` is (in) one of the benchmark's test parts (``test``,
    ``test2``, ...): tuning reads dev only."""
    if any(TEST_PART.fullmatch(part) for part in Path(bench).resolve().parts):
        sys.exit(f"{tool}: tuning data only; give the benchmark's dev part, not its test part")


def dev_manifests(bench: Path, tool: str) -> list[tuple[str, Path]]:
    """(part, manifest) for each of :data:`DEV_PARTS` of the dev part ``bench``; exits with one
    line for the test part or a manifest not built yet."""
    refuse_test_part(bench, tool)
    out = []
    for part in DEV_PARTS:
        manifest = Path(bench) / part / "manifest.jsonl"
        if not manifest.is_file():
            sys.exit(f"{tool}: no {manifest}; run `make benchmark` first")
        out.append((part, manifest))
    return out


def default_predictions(manifest: Path, cache: Path | None) -> list[tuple]:
    """(item, prediction, duration) of the default system (:data:`SYSTEM`) for every file of
    ``manifest``, as ``deid-speech eval`` makes them: the first decoder's and the verifier's
    transcripts read from (or decoded into) ``cache``, the detectors run here."""
    from deid_speech.asr.whisper import AsrOptions, transcriber
    from deid_speech.eval.run import load_manifest, system_predictions
    from deid_speech.pipeline import verifier_transcriber
    from deid_speech.systems import RECOGNISER, VERIFIER

    preds = system_predictions([SYSTEM], load_manifest(manifest), asr=transcriber(AsrOptions(model=RECOGNISER), cache),
                               ner_model="default", verifier_asr=verifier_transcriber(VERIFIER, cache))
    return [(item, out[SYSTEM], duration) for item, duration, out in preds]  # detects here, lazily
