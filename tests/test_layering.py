"""Inference never imports training code: every module reachable by imports (at the top
or inside functions) from the redaction path is checked against the training modules."""
from __future__ import annotations

import ast
from pathlib import Path

import deid_speech

ROOT = Path(deid_speech.__file__).parent
INFERENCE = ["deid_speech.pipeline", "deid_speech.e2e.infer", "deid_speech.e2e.shipped", "deid_speech.asr.whisper",
             "deid_speech.asr.models", "deid_speech.asr.hf", "deid_speech.redact", "deid_speech.writers",
             "deid_speech.models"]
TRAINING = {"deid_speech.asr.trainer", "deid_speech.asr.train_data", "deid_speech.asr.train_cli",
            "deid_speech.e2e.train", "deid_speech.ner.train", "deid_speech.experiment", "deid_speech.make_dataset",
            "deid_speech.tts.dataset", "deid_speech.augment.run", "deid_speech.augment.llm"}


def _file(module: str) -> Path | None:
    parts = module.split(".")[1:]
    if not parts:
        return ROOT / "__init__.py"
    rel = Path(*parts)
    for p in (ROOT / rel.with_suffix(".py"), ROOT / rel / "__init__.py"):
        if p.is_file():
            return p
    return None


def imports_of(module: str) -> set[str]:
    """The deid_speech modules that ``module`` imports anywhere in its source."""
    path = _file(module)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("deid_speech"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("deid_speech"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if _file(f"{node.module}.{a.name}"))
    return {m for m in found if _file(m)}


def reachable(start: list[str]) -> dict[str, str]:
    """Every module reachable from ``start``, with the module that first imported it."""
    seen = {m: "" for m in start}
    todo = list(start)
    while todo:
        m = todo.pop()
        for dep in imports_of(m):
            if dep not in seen:
                seen[dep] = m
                todo.append(dep)
    return seen


def test_no_inference_module_reaches_a_training_module() -> None:
    seen = reachable(INFERENCE)
    bad = {m: by for m, by in seen.items() if m in TRAINING}
    assert not bad, f"inference imports training code: {bad}"
    assert "deid_speech.asr.hf" in seen and "deid_speech.e2e.infer" in seen  # the walk does follow imports


def test_the_check_would_catch_a_training_import(tmp_path, monkeypatch) -> None:
    fake = tmp_path / "deid_speech"
    (fake / "e2e").mkdir(parents=True)
    (fake / "e2e" / "infer.py").write_text("def f():\n    from deid_speech.asr.trainer import finetune\n")
    (fake / "asr").mkdir()
    (fake / "asr" / "trainer.py").write_text("")
    monkeypatch.setitem(globals(), "ROOT", fake)
    assert "deid_speech.asr.trainer" in reachable(["deid_speech.e2e.infer"])
