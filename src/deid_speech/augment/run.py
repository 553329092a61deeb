"""The augmentation job: seed sentences -> LLM (Similar/Diverse) -> strict validation ->
tag replacement with fresh values -> JSONL, resumable.

Each request asks for ``per_request`` sentences with one tag multiset drawn from the seed
corpus (in proportion to how often it occurs there). Every accepted line is written at once;
a restart reads the file back, rebuilds the de-duplication set and goes on from the next
request, so an interrupted job loses nothing.
"""
from __future__ import annotations

import math
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from deid_speech.augment.grammar import line_grammar
from deid_speech.augment.llm import Request
from deid_speech.augment.prompts import DEFAULT_TEMPERATURE, PER_REQUEST, STRATEGIES, build_prompt, tag_list
from deid_speech.augment.repair import REPAIRS, repair_line
from deid_speech.augment.replace import fill_tags
from deid_speech.augment.seed import load_split
from deid_speech.augment.validate import REASONS, check_line, frame_key, prompt_key
from deid_speech.errors import DeidError
from deid_speech.manifest import JsonlWriter, read_resumable
from deid_speech.types import parse_tagged, render_tagged


@dataclass(frozen=True)
class AugmentOptions:
    """The options of ``deid-speech augment`` (flags and ``--config`` keys come from here)."""

    strategy: str = field(default="similar", metadata={"choices": STRATEGIES})
    temperature: float | None = field(default=None, metadata={
        "help": "default: 0.3 for similar, 0.6 for diverse (the paper's)"})
    n: int = field(default=100, metadata={"help": "sentences to accept"})
    seed: int = 0
    per_request: int = field(default=PER_REQUEST, metadata={"help": "sentences asked for per LLM request"})
    examples: int = field(default=5, metadata={"help": "seed sentences shown per request"})
    max_requests: int | None = field(default=None, metadata={
        "help": "give up after this many requests (default: 10x what a perfect model would need)"})
    repair: bool = field(default=True, metadata={
        "help": "strip numbering, normalise tag spelling and fix a misnamed closing tag before validation"})
    completions: int = field(default=2, metadata={
        "help": "completions per prompt, each with its own seed; llama.cpp stops one at its first repeated line"})
    repeat_penalty: float = field(default=1.1, metadata={"help": "llama.cpp/Ollama repeat penalty"})
    presence_penalty: float = field(default=0.0, metadata={"help": "llama.cpp/Ollama presence penalty"})
    grammar: bool = field(default=False, metadata={
        "help": "llama.cpp only: constrain decoding to lines with the requested tags and spoken values "
                "(augment/grammar.py); every line is still validated"})
    keep_rejected: int = field(default=0, metadata={
        "help": "report up to this many rejected raw lines with their reason (to see why lines fail)"})
    first_request: int = field(default=0, metadata={
        "help": "start at this request number at least (a job that knows how many requests it made; "
                "by default a resumed run starts after the last request that gave a sentence)"})

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise DeidError(f"strategy must be one of {', '.join(STRATEGIES)}")
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise DeidError("temperature must be between 0 and 2")
        if self.n < 1 or self.per_request < 1 or self.completions < 1:
            raise DeidError("--n, the sentences per request and --completions must be positive")

    @property
    def temp(self) -> float:
        return DEFAULT_TEMPERATURE[self.strategy] if self.temperature is None else self.temperature

    @property
    def request_limit(self) -> int:
        return self.max_requests or 10 * math.ceil(self.n / self.per_request)


def augment(seed_path: Path, out: Path, opts: AugmentOptions, backend, progress=None) -> dict:
    """Run the job; return the summary. ``backend`` has ``name``, ``model``, ``generate``."""
    if opts.grammar and getattr(backend, "name", "") != "llamacpp":
        raise DeidError(f"--grammar needs the llamacpp backend, not {getattr(backend, 'name', '?')}")
    seeds = load_split(seed_path)
    if not seeds:
        raise DeidError(f"{seed_path}: no seed sentences")
    by_tags: dict[tuple, list[str]] = {}  # tag multiset -> seed sentences carrying it
    for r in seeds:
        by_tags.setdefault(tuple(sorted(e.label for e in parse_tagged(r["tagged"])[1])), []).append(r["tagged"])
    made = {"strategy": opts.strategy, "temperature": opts.temp, "seed": opts.seed,
            "backend": backend.name, "model": getattr(backend, "model", "")}
    for r in read_resumable(out):  # a resume goes on with what the file was started with
        if diff := [k for k, v in made.items() if k in r and r[k] != v]:
            raise DeidError(f"{out} was started with other options ("
                            + "; ".join(f"{k} {r[k]!r}, not {made[k]!r}" for k in diff) + "); use another --out")
    writer = JsonlWriter(out)  # a line cut by an interrupted run is dropped; each record is synced
    existing = list(writer.rows)
    seen = {frame_key(r["tagged"]) for r in seeds} | {frame_key(r["tagged"]) for r in existing}
    accepted = len(existing)
    request = max(max((r.get("request", -1) for r in existing), default=-1) + 1, opts.first_request)
    reasons: Counter = Counter()
    repairs: Counter = Counter()  # lines each repair changed
    repaired_accepted = 0
    rejected_lines: list[dict] = []  # the first opts.keep_rejected rejected raw lines
    labels: Counter = Counter(e["label"] for r in existing for e in r["entities"])
    lines_seen = 0
    new = 0
    t0 = time.perf_counter()
    keys = list(by_tags)
    weights = [len(by_tags[k]) for k in keys]  # tag sets drawn as often as the seed has them
    with writer:
        while accepted < opts.n and request < opts.request_limit:
            rng = random.Random(opts.seed * 1_000_003 + request)
            tags = Counter(rng.choices(keys, weights)[0])
            pool = by_tags[tuple(sorted(tags.elements()))]
            examples = rng.sample(pool, min(opts.examples, len(pool)))
            req = Request(opts.strategy, tags, build_prompt(opts.strategy, tags, examples, opts.per_request, request),
                          opts.temp, opts.seed * 1_000_003 + request, opts.per_request, examples,
                          completions=opts.completions, repeat_penalty=opts.repeat_penalty,
                          presence_penalty=opts.presence_penalty,
                          grammar=line_grammar(tags) if opts.grammar else None)
            raw = backend.generate(req)
            echo = prompt_key(req.messages, examples)
            for k, line in enumerate(x for x in raw.splitlines() if x.strip()):
                lines_seen += 1
                raw_line = line
                fixed = []
                if opts.repair:
                    line, fixed = repair_line(line, tags)
                    repairs.update(fixed)
                parsed, why = check_line(line, tags, seen, echo)
                if why:
                    reasons[why] += 1
                    if len(rejected_lines) < opts.keep_rejected:
                        rejected_lines.append({"reason": why, "tags": tag_list(tags), "line": raw_line})
                    continue
                if accepted >= opts.n:
                    break
                text, ents = parsed
                tagged, _ = fill_tags(render_tagged(text, ents), rng)
                text2, ents2 = parse_tagged(tagged)
                rec = {"id": f"{opts.strategy}-t{opts.temp:g}-s{opts.seed}-r{request:05d}-{k:02d}",
                       "text": text2, "tagged": tagged, "entities": [e.to_dict() for e in ents2],
                       **made, "request": request}
                writer.write(rec)
                accepted += 1
                new += 1
                repaired_accepted += bool(fixed)
                labels.update(e.label for e in ents2)
            request += 1
            if progress:
                progress(accepted, opts.n)
    wall = time.perf_counter() - t0
    return {"out": str(out), "accepted": accepted, "new": new, "requests": request,
            "lines": lines_seen, "acceptance_rate": round(new / lines_seen, 4) if lines_seen else 0.0,
            "rejected": {r: reasons[r] for r in REASONS if reasons[r]},
            "repairs": {r: repairs[r] for r in REPAIRS}, "repaired_accepted": repaired_accepted,
            "labels": dict(sorted(labels.items())),
            "wall_s": round(wall, 1), "s_per_100_accepted": round(100 * wall / new, 1) if new else None,
            "complete": accepted >= opts.n,
            **({"rejected_lines": rejected_lines} if opts.keep_rejected else {})}
