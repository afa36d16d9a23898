# The README's two commands: `make demo` (the main job) and `make test` (the test suite).
# Both set up .venv on first use, with whatever pip the venv has: CPU torch 2.13.0 (pinned, also
# inside pip's build environments via PIP_CONSTRAINT), this package, fairseq 0.12.2 without its
# stale pins, then patch fairseq.
# PYTHON: the interpreter the venv is made from (3.11, 3.12 or 3.13); VENV: its folder, e.g.
# `make setup PYTHON=python3.12 VENV=.venv312` beside the default one.
PYTHON ?= python3
VENV ?= .venv
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed
# TORCH: the torch the set-up installs and pins. 2.13.0 (constraints.txt): the CPU wheel where
# one is at hand (Python 3.11 here), else PyPI's build with CUDA (~3 GB with its nvidia-*
# packages); TORCH=VERSION another release; TORCH=installed keeps the torch already in
# $(VENV) (your CUDA build, installed there first) and pins it as it is.
TORCH ?= 2.13.0
ifeq ($(TORCH),2.13.0)
export PIP_CONSTRAINT := $(abspath constraints.txt)
TORCH_REQUIREMENT := torch==2.13.0
else
export PIP_CONSTRAINT := $(abspath $(VENV))/torch-constraint.txt
TORCH_REQUIREMENT := torch
endif
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test test-patch test-fast lint setup check gpu-check recipes-small studies study-nmt study-ptb study-wt2 study-tlm study-adaptive fairseq-tests clean-venv

demo: $(STAMP)
	PATH="$(BIN):$$PATH" bash examples/nmt_demo/run.sh $(ARGS)

# pytest-xdist workers, one torch thread each; tests that share a recipe run or a checkpoint
# made in their file stay on one worker (loadfile; tests/conftest.py shares the rest).
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
XDIST = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: $(STAMP)
	PATH="$(BIN):$$PATH" $(BIN)/python -m pytest tests $(XDIST) $(PYTEST_ARGS)

# the patch's own suite (patch/tests: the patch's mechanics, layering and stock fairseq's CLIs,
# no plugin); CI runs it beside the plugin's (.ci/run)
test-patch: $(STAMP)
	cd patch && PATH="$(BIN):$$PATH" $(BIN)/python -m pytest tests $(XDIST) $(PYTEST_ARGS)

# the in-process unit tests only (no fairseq CLI, no recipe): the inner loop (docs/testing.md)
test-fast: $(STAMP)
	PATH="$(BIN):$$PATH" $(BIN)/python -m pytest tests -m "not cli" $(XDIST) $(PYTEST_ARGS)

# ruff (ruff.toml): pyflakes, pycodestyle and import order; CI runs it first (a second)
lint: $(STAMP)
	$(BIN)/ruff check fairseq_define patch tests benchmarks studies scripts run_scripts examples

setup: $(STAMP)

# every paper recipe (run_scripts/) in its small CPU mode, then the figures (~75 min here)
recipes-small: $(STAMP)
	PATH="$(BIN):$$PATH" bash run_scripts/run_all_small.sh $(ARGS)

# the studies (docs/studies.md): quality against parameters per model family, about 2 hours
# each on 2 CPU cores; resumable (run again to continue). ARGS go to each study, e.g.
# ARGS=--quick (a one-minute pipeline check) or ARGS="--arms 'a b'"
studies: study-nmt study-ptb study-wt2 study-tlm study-adaptive

study-nmt: $(STAMP)
	PATH="$(BIN):$$PATH" $(BIN)/python -m studies.nmt_multi30k $(ARGS)

study-ptb: $(STAMP)
	PATH="$(BIN):$$PATH" $(BIN)/python -m studies.lm_ptb $(ARGS)

study-wt2: $(STAMP)
	PATH="$(BIN):$$PATH" $(BIN)/python -m studies.lm_wikitext2 $(ARGS)

study-tlm: $(STAMP)
	PATH="$(BIN):$$PATH" $(BIN)/python -m studies.lm_transformer_wikitext2 $(ARGS)

# study 5 (issue 59): DeFINE added on an adaptive input against that adaptive input (Table 1a
# R2 vs R3), LSTM and transformer_lm pairs, two seeds; ARGS="--jobs 2" trains a pair side by side
study-adaptive: $(STAMP)
	PATH="$(BIN):$$PATH" $(BIN)/python -m studies.lm_adaptive_define $(ARGS)

# fairseq 0.12.2's own tests (from the v0.12.2 tag, in a temporary folder) on the patched
# install: FAIRSEQ_SRC=checkout-or-archive, by default ../shared/fairseq's archive when it is
# there, else GitHub's; what is left out and why: scripts/run_fairseq_tests.sh
fairseq-tests: $(STAMP)
	TEST_WORKERS=$(TEST_WORKERS) bash scripts/run_fairseq_tests.sh $(PYTEST_ARGS)

# the GPU check (docs/testing.md#gpu-check): GPU tests, benchmarks in bf16, a short Table 3 run,
# one summary; ARGS="--out DIR" (and --cpu for the CPU version). No $(STAMP): on a GPU machine
# the package is installed beside its CUDA torch (make setup would add the CPU one); the
# script uses .venv where there is one.
gpu-check:
	bash scripts/gpu_check.sh $(ARGS)

check: $(STAMP)
	$(BIN)/python -m fairseq_define_patch --check

# Any pip: fairseq 0.12.2 goes in with --no-deps, after this package has brought fairseq's
# run-time requirements (setup.py), since its metadata pins hydra-core 1.0 and omegaconf 2.0,
# which pip >= 24.1 refuses; the patch makes it run on the hydra-core 1.3 / omegaconf 2.3 pip
# installs today (docs/install.md).
$(STAMP): setup.py constraints.txt patch/pyproject.toml $(wildcard patch/fairseq_define_patch/*.py patch/fairseq_define_patch/*/*.py)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
ifeq ($(TORCH),installed)
	v=$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null) || \
	  { echo "TORCH=installed: no torch in $(VENV); install your torch build there first" >&2; exit 2; }; \
	echo "torch==$$v" > $(PIP_CONSTRAINT)
else ifneq ($(TORCH),2.13.0)
	echo "torch==$(TORCH)" > $(PIP_CONSTRAINT)
endif
	$(BIN)/python -m pip install $(TORCH_REQUIREMENT)
	$(BIN)/python -m pip install -e ./patch -e '.[test,deploy]'
	$(BIN)/python -m pip install --no-deps fairseq==0.12.2
	# a venv patched by an older version of this project: reinstall fairseq's shipped files first
	$(BIN)/python -m fairseq_define_patch --apply || { \
	  $(BIN)/python -m pip install --force-reinstall --no-deps fairseq==0.12.2 && \
	  $(BIN)/python -m fairseq_define_patch --apply; }
	$(BIN)/python -m fairseq_define_patch --check
	touch $(STAMP)

clean-venv:
	rm -rf $(VENV)
