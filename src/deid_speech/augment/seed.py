"""The seed corpus: hand-written tagged sentences in data/seed/raw/*.txt, split 80/10/10.

The split is fixed by a hash of each sentence (not by file order), so adding sentences
never moves existing ones between train, dev and test.

    python -m deid_speech.augment.seed [RAW_DIR] [OUT_DIR]
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from deid_speech.types import parse_tagged

SPLITS = ("train", "dev", "test")


def split_of(tagged: str) -> str:
    bucket = int(hashlib.sha1(tagged.encode("utf-8")).hexdigest(), 16) % 10
    return "test" if bucket == 0 else "dev" if bucket == 1 else "train"


def read_raw(raw_dir: Path) -> list[dict]:
    """Parse every line; raise ValueError naming file:line for a malformed or duplicate one."""
    records, seen = [], set()
    for f in sorted(raw_dir.glob("*.txt")):
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            line = line.strip()
            if not line:
                continue
            try:
                text, ents = parse_tagged(line)
            except ValueError as e:
                raise ValueError(f"{f}:{i}: {e}") from None
            if line in seen:
                raise ValueError(f"{f}:{i}: duplicate sentence")
            seen.add(line)
            rid = f"seed-{hashlib.sha1(line.encode('utf-8')).hexdigest()[:10]}"
            records.append({"id": rid, "text": text, "tagged": line,
                            "entities": [e.to_dict() for e in ents], "source": f.name})
    return records


def write_splits(raw_dir: Path, out_dir: Path) -> dict[str, int]:
    records = read_raw(raw_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split in SPLITS:
        rows = [r for r in records if split_of(r["tagged"]) == split]
        with open(out_dir / f"{split}.jsonl", "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        counts[split] = len(rows)
    return counts


def load_split(path: Path) -> list[dict]:
    """The records of a JSONL split, each with a well-formed ``tagged`` sentence (a one-line
    DeidError naming the line otherwise)."""
    from deid_speech import manifest
    from deid_speech.errors import DeidError

    out = []
    for r in manifest.read(path, need=("tagged",), line_ids=False):
        try:
            parse_tagged(r.tagged)
        except ValueError as exc:
            raise DeidError(f"{r.where}: bad tagged text ({exc})") from None
        out.append(r.to_dict())
    return out


if __name__ == "__main__":
    from deid_speech import models

    root = models.path("seed")
    raw = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "raw"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else root
    print(write_splits(raw, out))
