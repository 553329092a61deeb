"""What the benchmark scripts share: print a result as JSON and keep it in ``--out``."""
from __future__ import annotations

import json
from pathlib import Path


def report(result: dict, out: Path | None) -> None:
    """Print ``result`` as indented JSON; also write it to ``out`` (folders made) if given."""
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
