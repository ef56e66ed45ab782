# Quick start: `make reproduce` and `make test` (= `make lint`, then pytest). All create .venv on
# first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: reproduce test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[test,dask]"
	touch $@ $(VENV)/.installed

reproduce: $(VENV)/.installed
	$(BIN)/fgrpo-theory figures all

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,dask,bench]"
	touch $@ $(VENV)/.installed-test $(VENV)/.installed

# the bench extra brings JAX, the strongest reference (issue 14); PyTorch rows need `pip install torch`
bench: $(VENV)/.installed-bench
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
