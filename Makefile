# Everything a fresh machine needs: `make demo` (install + train) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint bench protos clean

$(STAMP): setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip wheel "setuptools<80"
	# torch first and pinned: the CPU wheel on these machines; a bare "torch" would pull CUDA.
	$(BIN)/pip install "torch==2.13.0"
	$(BIN)/pip install -e ".[dev,pettingzoo,ray]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/arl-learn config/ppo/Reach.yaml --run-id demo --force

lint: $(STAMP)
	$(BIN)/ruff check ml_arl tests bench
	$(BIN)/mypy ml_arl

# `lint`, with mypy (about a minute of one core from a cold cache, as in CI) beside the tests, its
# report after theirs; either failing fails the target. The tests run in two processes (pytest-xdist):
# one test at a time keeps about one of two cores busy. tests/conftest.py keeps some in one process.
# Bytecode caching stays on for the tests even where the environment turns it off: pytest rewrites
# every test module's asserts and would redo that (about 2 s of CPU) in each of its processes.
test: $(STAMP)
	$(BIN)/ruff check ml_arl tests bench
	$(BIN)/mypy ml_arl > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 2 --durations=25 tests; tests=$$?; \
	wait $$mypy; typed=$$?; echo "$(BIN)/mypy ml_arl:"; cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

test-fast: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 2 -m "not slow" tests

bench: $(STAMP)
	$(BIN)/python bench/pipeline.py

# The Unity protocol's Python modules from the .proto files beside them (ml_arl/protocol/__init__.py).
# grpcio-tools is pinned: its version decides the protobuf and grpcio floors in setup.py.
PROTOS := ml_arl/protocol/communicator_objects
protos: $(STAMP)
	$(BIN)/pip install "grpcio-tools==1.84.0"
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. $(PROTOS)/*.proto
	$(BIN)/python -m grpc_tools.protoc -I. --grpc_python_out=. $(PROTOS)/unity_to_external.proto

clean:
	rm -rf $(VENV) results *.egg-info
