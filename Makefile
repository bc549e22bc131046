# Everything a fresh machine needs: `make demo` (install + train) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# Two installs, each with its stamp. The core (torch + `pip install -e .`, what `pip install ml_arl`
# gives a user) is all `make demo`, `make bench` and `make protos` need. The full one adds the extras
# the tests, lint and docs use (Ray, MLflow, W&B, PettingZoo, palaestrAI, MIDAS, Grid2Op, pandapower, onnxruntime, MuJoCo, the
# dev tools); `make install` means the full one. Figures for both: docs/dependencies.md (bench/speed/install_size.sh measures them).
CORE_STAMP := $(VENV)/.core-installed
STAMP := $(VENV)/.full-installed
EXTRAS := dev,pettingzoo,ray,trackers,palaestrai,midas,grid2op,postgresql

.PHONY: install install-core demo test test-fast lint bench bench-check protos smoke smoke-pythons docs clean

# torch first and pinned: the CPU wheel on these machines; a bare "torch" would pull CUDA. Every later
# install finds torch==2.13.0 there, and setup.py's torch>=2.4 then installs nothing more.
define venv_with_torch
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip wheel "setuptools<80"
	$(BIN)/pip install "torch==2.13.0"
endef

$(CORE_STAMP): setup.py
	$(venv_with_torch)
	$(BIN)/pip install -e .
	touch $(CORE_STAMP)

# The core and the extras in one resolution, in a fresh venv or over a core one (the same pip freeze
# either way); a full venv holds the core, so it stamps both.
$(STAMP): setup.py
	$(venv_with_torch)
	$(BIN)/pip install -e ".[$(EXTRAS)]"
	touch $(CORE_STAMP) $(STAMP)

install: $(STAMP)

# The full install plus the `bench` extra (Stable-Baselines3 as a peer, MuJoCo) that make bench-check measures with.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -e ".[$(EXTRAS),bench]"
	touch $(BENCH_STAMP)

install-core: $(CORE_STAMP)

demo: $(CORE_STAMP)
	$(BIN)/arl-learn config/ppo/Reach.yaml --run-id demo --force

lint: $(STAMP)
	$(BIN)/ruff check ml_arl tests bench examples
	$(BIN)/mypy ml_arl

# `lint`, with mypy (about a minute of one core from a cold cache, as in CI) beside the tests, its
# report after theirs; either failing fails the target. The tests run in two processes (pytest-xdist):
# one test at a time keeps about one of two cores busy. tests/conftest.py keeps some in one process.
# Bytecode caching stays on for the tests even where the environment turns it off: pytest rewrites
# every test module's asserts and would redo that (about 2 s of CPU) in each of its processes.
test: $(STAMP)
	$(BIN)/ruff check ml_arl tests bench examples
	$(BIN)/mypy ml_arl > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 2 --durations=25 tests; tests=$$?; \
	wait $$mypy; typed=$$?; echo "$(BIN)/mypy ml_arl:"; cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

test-fast: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 2 -m "not slow" tests

# The smoke suite on the other Pythons the package supports, each in a venv of its own made from
# scratch (.venv-<version>) with the newest release of every dependency: install, a PPO run to its
# threshold, a run through the Unity stand-in build, ONNX export checked by onnxruntime, a .demo round
# trip, the protocol's byte-for-byte tests, a CLI run. Interpreters: pyenv's, else python<version> on
# PATH. torch 2.13.0's CPU wheel on these machines is for 3.11 only; elsewhere pip takes PyPI's
# build of the same release, CUDA libraries included (5.2 GB a venv, 6.2 GB at the peak of its install
# with pip's downloads). It runs on the CPU all the same. A venv whose suite passed is removed, so one at
# a time is on disk: about 9 GB with .venv at the peak, where keeping all three took 18 GB and ran CI's
# disk full. One whose suite failed stays for a look; KEEP_SMOKE_VENV=1 keeps them all.
SMOKE_FREE_GB ?= 8
SMOKE_PYTHONS ?= 3.10 3.12 3.13
SMOKE := tests/protocol/test_protocol.py tests/networks/test_onnx.py tests/study/test_study_plan.py \
	tests/trainers/test_learning.py::test_ppo_learns_reach \
	tests/envs/test_unity.py::test_build_with_two_workers_learns_and_gets_parameters_engine_settings_and_stats \
	tests/envs/test_unity.py::test_onnx_from_a_trained_checkpoint_matches_the_muscle \
	tests/demonstrations/test_demonstrations.py::test_round_trip tests/demonstrations/test_demonstrations.py::test_bytes_are_what_ml_agents_loader_reads \
	tests/demonstrations/test_demonstrations.py::test_a_demo_written_by_mlagents_1x_reads_as_its_own_loader_reads_it \
	tests/cli/test_cli.py::test_tiny_run_writes_results_layout_and_tags \
	tests/api/test_vector_env.py tests/api/test_python_api.py
smoke:
	@test -n "$(PYV)" || { echo "make smoke: give PYV, e.g. make smoke PYV=3.12"; exit 2; }
	py=$$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$(PYV).*/bin/python 2>/dev/null | sort -V | tail -1); \
	py=$${py:-$$(command -v python$(PYV))}; \
	$$py -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$(PYV)'.split('.')))" 2>/dev/null \
	  || { echo "make smoke: no Python $(PYV) here; install it (pyenv install $(PYV), or apt-get install python$(PYV))"; exit 2; }; \
	rm -rf .venv-$(PYV); \
	free=$$(df -Pk . | awk 'NR==2 {print int($$4 / 1048576)}'); \
	[ "$$free" -ge $(SMOKE_FREE_GB) ] \
	  || { echo "make smoke: $$free GB free on this disk, the Python $(PYV) venv needs $(SMOKE_FREE_GB) GB; free some space (rm -rf .venv-3.*)"; exit 2; }; \
	$$py -m venv .venv-$(PYV) && \
	.venv-$(PYV)/bin/pip install -q --no-cache-dir --upgrade pip wheel && \
	.venv-$(PYV)/bin/pip install -q --no-cache-dir "torch==2.13.0" && \
	.venv-$(PYV)/bin/pip install -q --no-cache-dir -e . onnxruntime hypothesis pytest pytest-timeout && \
	.venv-$(PYV)/bin/pip list --format=freeze > .venv-$(PYV)/pip-list.txt && \
	! grep -E "^protobuf==3\." .venv-$(PYV)/pip-list.txt && \
	echo "Python $(PYV): $$(.venv-$(PYV)/bin/python --version); $$(grep -E '^(torch|protobuf|grpcio|onnx|onnxruntime|numpy|tensorboard|mlagents-envs)==' .venv-$(PYV)/pip-list.txt | tr '\n' ' ')" && \
	PYTHONDONTWRITEBYTECODE= .venv-$(PYV)/bin/python -m pytest -q -p no:cacheprovider $(SMOKE) && \
	if [ -z "$(KEEP_SMOKE_VENV)" ]; then rm -rf .venv-$(PYV); fi

smoke-pythons:
	@for v in $(SMOKE_PYTHONS); do $(MAKE) --no-print-directory smoke PYV=$$v || exit 1; done

# The manual (docs/) as a site in build/site; --strict: a broken link or a page missing from the nav fails.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

bench: $(CORE_STAMP)
	$(BIN)/python bench/speed/pipeline.py

# the README's short figures, re-measured; fails when one is further off than its noise (run it on an idle machine)
bench-check: $(BENCH_STAMP)
	$(BIN)/python bench/check_readme.py

# ML-Agents 1.1.0, the peer of bench/peers/ (bench/README.md), in a venv of its own: .venv-mlagents, so that its
# pins (protobuf 3.20, numpy 1.23, grpcio 1.49) stay out of .venv. It needs python3.11 and the
# package index. To make it again: rm -rf .venv-mlagents && make peer-mlagents.
MLAGENTS_VENV := .venv-mlagents
.PHONY: peer-mlagents
peer-mlagents: $(MLAGENTS_VENV)/.installed
$(MLAGENTS_VENV)/.installed: bench/peers/install_mlagents.sh
	bash bench/peers/install_mlagents.sh $(MLAGENTS_VENV)
	touch $@

# palaestrAI 3.5.18 with palaestrai-agents (harl) 3.6.2, the peer of bench/peers/harl_tictactoe.py, in a venv of its own:
# harl pins numpy < 2. To make it again: rm -rf .venv-palaestrai-harl && make peer-palaestrai-harl.
HARL_VENV := .venv-palaestrai-harl
.PHONY: peer-palaestrai-harl
peer-palaestrai-harl: $(HARL_VENV)/.installed
$(HARL_VENV)/.installed: bench/peers/install_palaestrai_harl.sh
	bash bench/peers/install_palaestrai_harl.sh $(HARL_VENV)
	touch $@

# The Unity protocol's Python modules from the .proto files beside them (ml_arl/protocol/__init__.py).
# grpcio-tools is pinned: its version decides the protobuf and grpcio floors in setup.py.
PROTOS := ml_arl/protocol/communicator_objects
protos: $(CORE_STAMP)
	$(BIN)/pip install "grpcio-tools==1.84.0"
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. $(PROTOS)/*.proto
	$(BIN)/python -m grpc_tools.protoc -I. --grpc_python_out=. $(PROTOS)/unity_to_external.proto

clean:
	rm -rf $(VENV) .venv-3.* results *.egg-info
