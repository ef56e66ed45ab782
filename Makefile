# Quick start: `make reproduce` and `make test` (= `make lint`, then pytest). All create .venv on
# first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

# The trainer integrations' tests (issue 23) run inside TRL and verl: `make test` installs
# torch==2.13.0 (a CPU build) FIRST, then the [trl,verl] extras under tests/constraints-trainers.txt
# (TRL 1.16.0, verl 0.9.1), and TRL 0.26.2 in a second small venv .venv-trl026 under
# tests/constraints-trl-0.26.txt. `make test TRAINERS=0` skips both (their tests then skip).
TRAINERS ?= 1
VENV026  := .venv-trl026
ifeq ($(TRAINERS),1)
TRAINER_DEPS := $(VENV)/.installed-trainers $(VENV026)/.installed
endif

.PHONY: reproduce test lint bench clean trainers

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,dask]"
	touch $@ $(VENV)/.installed

reproduce: $(VENV)/.installed
	$(BIN)/fgrpo-theory figures all

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

$(VENV)/.installed-trainers: pyproject.toml tests/constraints-trainers.txt $(VENV)/.installed-test
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[test,dask,trl,verl]" -c tests/constraints-trainers.txt
	touch $@

$(VENV026)/.installed: pyproject.toml tests/constraints-trl-0.26.txt
	$(PYTHON) -m venv $(VENV026)
	$(VENV026)/bin/python -m pip install --quiet --upgrade pip
	$(VENV026)/bin/python -m pip install --quiet torch==2.13.0
	$(VENV026)/bin/python -m pip install --quiet -e ".[test,trl]" -c tests/constraints-trl-0.26.txt
	touch $@

trainers: $(TRAINER_DEPS)

test: lint $(TRAINER_DEPS)
	$(BIN)/python -m pytest
ifeq ($(TRAINERS),1)
	$(VENV026)/bin/python -m pytest -p no:cacheprovider tests/test_trl_integration.py
endif

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,dask,bench]"
	touch $@ $(VENV)/.installed-test $(VENV)/.installed

# the bench extra brings JAX, the strongest reference (issue 14); PyTorch rows need `pip install torch`
bench: $(VENV)/.installed-bench
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) $(VENV026) build *.egg-info .pytest_cache
