# Two commands: `make demo` (set up .venv and redact the shipped example) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-$(shell cat constraints.txt pyproject.toml | sha1sum | cut -c1-12)
APT_PACKAGES := espeak-ng flite festival festvox-kdlpc16k
EXAMPLE := src/deid_speech/data/examples/call.wav
# llama-cpp-python builds from source: a portable AVX2 build (a native build picked AMX
# kernels that crash in this kind of VM)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF

.PHONY: demo test test-quick lint setup system-deps clean bench benchmark ci-fresh

demo: setup
	$(VENV)/bin/deid-speech redact $(EXAMPLE) --out-dir out/demo
	@echo "--- redacted transcript (out/demo/call.redacted.json) ---"
	@$(PY) -c "import json; d=json.load(open('out/demo/call.redacted.json')); print(d['redacted_transcript']); print(); [print(f\"{s['label']:<13} {s['start']:7.2f}-{s['end']:<7.2f} {s['source']}\") for s in d['spans']]"

test: setup lint
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check src tests bench

test-quick: setup
	$(PY) -m pytest -q -m "not model"

setup: system-deps $(STAMP)

system-deps:
	@missing=""; for b in espeak-ng flite text2wave; do command -v $$b >/dev/null || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian packages:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES)) >/dev/null; \
	  else echo "warning: missing$$missing (apt-get install $(APT_PACKAGES)); voicing tests will be skipped"; fi; \
	fi

$(STAMP): constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install -q -c constraints.txt -e ".[all,test]"
	rm -f $(VENV)/.deps-*
	touch $(STAMP)

# what CI runs, on a fresh clone of the committed HEAD beside this checkout (and ../shared), so that
# nothing only this checkout has (out/, .venv, untracked files) lets a test pass here that fails there
ci-fresh:
	@dir=$$(mktemp -d "$(CURDIR)/../ci-fresh.XXXXXX") && git clone -q "$(CURDIR)" "$$dir" && \
	  (cd "$$dir" && bash .ci/run); rc=$$?; rm -rf "$$dir"; exit $$rc

# the unseen-voice benchmark (data/benchmark/README.md): voice it, then score it with `deid-speech eval`
benchmark: setup
	$(PY) -m deid_speech.tts.benchmark --out out/benchmark --workers 2

clean:
	rm -rf out .pytest_cache
