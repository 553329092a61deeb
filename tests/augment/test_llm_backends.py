"""LLM backends for real: Ollama's HTTP API against a local server that speaks it, the
embedded llama.cpp model, and clear errors when a backend cannot run."""
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from deid_speech.augment.llm import LlamaCppBackend, OllamaBackend, Request
from deid_speech.augment.prompts import build_prompt
from deid_speech.errors import DeidError

ANSWER = ("my number is [PHONE] nine one two three four five six seven [PHONE] lah\n"
          "1. call [PHONE] eight eight [PHONE]")


class FakeOllama(BaseHTTPRequestHandler):
    """The two endpoints the client uses: GET /api/version and POST /api/chat (stream off)."""

    requests: list = []

    def log_message(self, *a):
        pass

    def _json(self, obj, code=200):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/api/version":
            return self._json({"version": "0.9.0"})
        self._json({"error": "not found"}, 404)

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeOllama.requests.append((self.path, payload))
        if self.path != "/api/chat":
            return self._json({"error": "not found"}, 404)
        if payload["model"] != "llama3.1":
            return self._json({"error": f"model '{payload['model']}' not found"}, 404)
        self._json({"model": payload["model"], "created_at": "2026-11-22T00:00:00Z",
                    "message": {"role": "assistant", "content": ANSWER}, "done": True, "done_reason": "stop"})


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeOllama)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    FakeOllama.requests = []
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def request(n=20):
    tags = Counter({"PHONE": 1})
    return Request("similar", tags, build_prompt("similar", tags, ["x [PHONE] one [PHONE] y"], n), 0.3, 42, n)


def test_ollama_backend_speaks_the_chat_api(server):
    pytest.importorskip("ollama")
    b = OllamaBackend(model="llama3.1", host=server)
    assert b.generate(request()) == ANSWER
    path, payload = FakeOllama.requests[-1]
    assert path == "/api/chat" and payload["model"] == "llama3.1" and payload["stream"] is False
    assert payload["options"]["temperature"] == 0.3 and payload["options"]["seed"] == 42
    assert payload["messages"][0]["role"] == "system" and "[PHONE]" in payload["messages"][1]["content"]


def test_ollama_unknown_model_is_a_clear_error(server):
    pytest.importorskip("ollama")
    with pytest.raises(DeidError, match="not found"):
        OllamaBackend(model="nope", host=server).generate(request())


def test_unreachable_ollama_fails_fast_not_hangs():
    pytest.importorskip("ollama")
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    t = time.perf_counter()
    with pytest.raises(DeidError, match="not reachable"):
        OllamaBackend(host=f"http://127.0.0.1:{port}")
    assert time.perf_counter() - t < 5


def test_missing_gguf_is_a_clear_error(tmp_path):
    pytest.importorskip("llama_cpp")
    with pytest.raises(DeidError, match="no such GGUF"):
        LlamaCppBackend(model=str(tmp_path / "none.gguf"))


@pytest.mark.model
def test_embedded_llama_cpp_model_generates_text():
    pytest.importorskip("llama_cpp")
    b = LlamaCppBackend()
    out = b.generate(request(n=3))
    assert isinstance(out, str) and len(out.split()) >= 5
    assert b.generate(request(n=3)) == out  # seeded: reproducible


@pytest.mark.model
def test_threads_reach_llama_cpp_and_zero_is_refused():
    pytest.importorskip("llama_cpp")
    from deid_speech.augment.llm import BackendOptions, make_backend

    assert make_backend("llamacpp", None, [], threads=1).llm.context_params.n_threads == 1
    with pytest.raises(DeidError, match="threads must be positive"):
        BackendOptions(threads=0)


@pytest.mark.model
@pytest.mark.parametrize("tags", [Counter({"PERSON": 1, "PHONE": 1}), Counter({"EMAIL": 1}),
                                  Counter({"NRIC": 1}), Counter({"CAR_PLATE": 1}), Counter(),
                                  Counter({"CREDIT_CARD": 1, "BANK_ACCOUNT": 1, "PASSPORT_NUM": 1})])
def test_a_grammar_holds_the_embedded_model_to_the_tags_and_spoken_values(tags):
    """SmolLM2-135M, unconstrained, writes almost no line with the right tags; under the grammar
    every line carries exactly the requested tags, each value shaped like its label, and no digit,
    bracket or quote in the words. (For {DATE} and {NRIC, DATE} at this seed SmolLM2 rambles past
    the token limit before it opens a tag, so they are not among the cases.)"""
    pytest.importorskip("llama_cpp")
    import re
    from dataclasses import replace

    from deid_speech.augment.grammar import line_grammar
    from deid_speech.augment.repair import strip_bullet
    from deid_speech.augment.validate import value_fits
    from deid_speech.types import parse_tagged

    b = LlamaCppBackend()
    req = Request("diverse", tags, build_prompt("diverse", tags, [], 12), 0.6, 7, 12, completions=1)
    lines = [strip_bullet(x).strip().strip('"') for x in
             b.generate(replace(req, grammar=line_grammar(tags))).splitlines() if x.strip()]
    # the request's token limit (40 tokens a line) may cut the last line anywhere: its whole
    # tag pairs are checked, and the words before its cut; every other line is checked whole
    pairs = [m for x in lines for m in re.finditer(r"\[([A-Z_]+)\] ([^][]*?) \[\1\]", x)]
    assert pairs or not tags, lines
    assert all(m.group(1) in tags and value_fits(m.group(1), m.group(2)) for m in pairs), lines
    for k, line in enumerate(lines):
        outside = re.sub(r"\[([A-Z_]+)\] [^][]*? \[\1\]", " ", line)
        if k == len(lines) - 1:
            outside = outside.split("[")[0]
        else:
            assert Counter(e.label for e in parse_tagged(line)[1]) == tags, line
        assert not re.search(r'[0-9\[\]()<>"]', outside), line
