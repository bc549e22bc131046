# Everything a fresh machine needs: `make demo` (install + train) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint bench clean

$(STAMP): setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip wheel "setuptools<80"
	# torch first and pinned: the CPU wheel on these machines; a bare "torch" would pull CUDA.
	$(BIN)/pip install "torch==2.13.0"
	$(BIN)/pip install -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/arl-learn config/ppo/Reach.yaml --run-id demo --force

lint: $(STAMP)
	$(BIN)/ruff check ml_arl tests bench
	$(BIN)/mypy ml_arl

# The tests in two processes (pytest-xdist): one alone keeps about one core busy (torch gets half the
# cores; many tests wait on subprocesses or timeouts). tests/conftest.py keeps some in one process.
test: lint
	$(BIN)/python -m pytest -q -n 2 tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not slow" tests

bench: $(STAMP)
	$(BIN)/python bench/pipeline.py

clean:
	rm -rf $(VENV) results *.egg-info
