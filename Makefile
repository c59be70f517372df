# Two commands do everything from a clean clone:
#   make run   - set up, then run the operator against $KUBECONFIG, or the local testbed
#   make test  - set up, then lint, type-check and run every test (unit + testbed end-to-end)
# Heavy artefacts (Go builds, the Ansible collection wheel, pip's cache) live outside the
# repository, under $(CACHE_HOME), so a second clone on the same machine reuses them.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# The Ansible line (README "Which Ansible"): the default line, the newest ansible-core,
# lives in .venv, pinned by requirements/constraints.txt and requirements/collections.txt;
# another line, chosen with `make venv ANSIBLE_LINE=<line>`, lives in
# .venv-ansible-<line>, pinned by requirements/ansible-<line>/. `make test` runs a subset
# on each of OTHER_ANSIBLE_LINES.
DEFAULT_ANSIBLE_LINE := newest
OTHER_ANSIBLE_LINES := 2.18
ANSIBLE_LINE ?= $(DEFAULT_ANSIBLE_LINE)
ifeq ($(ANSIBLE_LINE),$(DEFAULT_ANSIBLE_LINE))
VENV := .venv
LINE_REQUIREMENTS := requirements
else
VENV := .venv-ansible-$(ANSIBLE_LINE)
LINE_REQUIREMENTS := requirements/ansible-$(ANSIBLE_LINE)
endif
ifeq ($(wildcard $(LINE_REQUIREMENTS)/constraints.txt),)
$(error ANSIBLE_LINE=$(ANSIBLE_LINE): no $(LINE_REQUIREMENTS)/constraints.txt (lines: $(DEFAULT_ANSIBLE_LINE) $(patsubst requirements/ansible-%/,%,$(wildcard requirements/ansible-*/))))
endif
# ansible-core 2.21 and later need Python >= 3.12.
# The first that runs of python3.12, python3.13, then pyenv's installs (its shims
# refuse a version that is installed but not selected).
LINE_PYTHON_newest := $(or $(shell for p in python3.12 python3.13 $(HOME)/.pyenv/versions/3.1[23]*/bin/python3.1[23]; do "$$p" -c '' >/dev/null 2>&1 && { echo "$$p"; break; }; done),python3.12)
PYTHON ?= $(or $(LINE_PYTHON_$(ANSIBLE_LINE)),python3)
BIN := $(CURDIR)/$(VENV)/bin
CACHE_HOME ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)
export TESTBED_CACHE ?= $(CACHE_HOME)/ansible-operator-testbed
export COLLECTIONS_CACHE ?= $(CACHE_HOME)/ansible-operator-collections
PYTEST_ARGS ?=
COLD_TESTS ?= tests/e2e/test_reconcile.py
# What `make test` runs on another Ansible line: the reconcile end-to-end tests, the warm
# runs' isolation and clean-up (warm/preimports.py has a list per line), what differs
# between the lines, and the corpus of the Go era's idioms (tests/compat).
LINE_TESTS ?= tests/e2e/test_reconcile.py tests/runner/test_warm_runs.py tests/lines tests/compat

VENV_STAMP := $(VENV)/.installed
COLLECTIONS_STAMP := $(VENV)/.collections

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(VENV_STAMP): pyproject.toml $(LINE_REQUIREMENTS)/constraints.txt
	@# A venv left by another Python (the default line moved from 3.11 to 3.12) is rebuilt.
	@want=$$($(PYTHON) -c 'import sys; print(sys.version_info[:2])') && \
	  have=$$($(BIN)/python -c 'import sys; print(sys.version_info[:2])' 2>/dev/null || true) && \
	  if [ "$$want" != "$$have" ]; then rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); fi
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c $(LINE_REQUIREMENTS)/constraints.txt --config-settings editable_mode=compat -e '.[dev]'
	@# compat mode puts only the repo root on sys.path; the package lives in operator/
	$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "ansible_operator_src.pth").write_text("$(CURDIR)/operator\n")'
	@touch $@

$(COLLECTIONS_STAMP): $(VENV_STAMP) scripts/install_collections.py $(LINE_REQUIREMENTS)/collections.txt \
		$(wildcard collections/ansible_collections/*/*/galaxy.yml)
	$(BIN)/python scripts/install_collections.py --lock $(LINE_REQUIREMENTS)/collections.txt --cache "$(COLLECTIONS_CACHE)"
	@touch $@

.PHONY: venv
venv: $(COLLECTIONS_STAMP) ## create .venv (or ANSIBLE_LINE's venv) with pinned dependencies and kubernetes.core

.PHONY: testbed-build
testbed-build: venv ## build (or reuse) the control plane, the real node and its images
	@PYTHON=$(BIN)/python testbed/build.sh all node images s3 >/dev/null

# The control plane only: what `make test` needs before its first cluster test.
.PHONY: testbed-build-plane
testbed-build-plane:
	@testbed/build.sh all >/dev/null

.PHONY: testbed-up
testbed-up: venv testbed-build ## start the local control plane; kubeconfig in .testbed/kubeconfig
	$(BIN)/python -m testbed up

.PHONY: testbed-down
testbed-down: ## stop the processes testbed-up started and remove their state
	@if [ -x $(BIN)/python ]; then $(BIN)/python -m testbed down; else echo "no .venv: nothing to stop"; fi

.PHONY: testbed-status
testbed-status: venv ## say what the testbed runs
	$(BIN)/python -m testbed status

.PHONY: lint
lint: venv ## ruff lint + format check, mypy --strict
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

.PHONY: fmt
fmt: venv ## apply ruff formatting and safe fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

NODE_BUILD_LOG := $(CACHE_HOME)/ansible-operator-testbed-node-build.log

.PHONY: test
test: venv testbed-build-plane ## everything: lint, type-check, unit and end-to-end tests on the testbed
	@# The real node's binaries and images build in the background while lint and
	@# the tests on kwok's nodes run (those use no real node: TESTBED_REAL_NODE=0);
	@# the tests that need it (marker realnode) run last, on a testbed of their own.
	@PYTHON=$(BIN)/python testbed/build.sh node images s3 >"$(NODE_BUILD_LOG)" 2>&1 & build=$$!; \
	  status=0; \
	  $(MAKE) --no-print-directory lint || status=$$?; \
	  if [ $$status = 0 ]; then \
	    PATH="$(BIN):$$PATH" TESTBED_REAL_NODE=0 $(BIN)/pytest -m "not realnode" --durations=25 $(PYTEST_ARGS) || status=$$?; fi; \
	  if [ $$status = 0 ]; then \
	    PATH="$(BIN):$$PATH" TESTBED_REAL_NODE=0 E2E_OPERATOR_ARGS=--warm-ansible=false $(BIN)/pytest $(COLD_TESTS) || status=$$?; fi; \
	  wait $$build || { echo "building the real node failed (log: $(NODE_BUILD_LOG)):"; tail -20 "$(NODE_BUILD_LOG)"; exit 1; }; \
	  [ $$status = 0 ] || exit $$status
	PATH="$(BIN):$$PATH" $(BIN)/pytest -m realnode --durations=10 $(PYTEST_ARGS)
	$(MAKE) --no-print-directory dist
	@# A representative subset on each other Ansible line, in its own venv.
	for line in $(OTHER_ANSIBLE_LINES); do $(MAKE) --no-print-directory test-line ANSIBLE_LINE=$$line; done

.PHONY: unit
unit: venv ## the fast loop: every test that needs no cluster (about 2 minutes), no lint
	PATH="$(BIN):$$PATH" $(BIN)/pytest -m "not cluster and not slow" $(PYTEST_ARGS)

.PHONY: test-line
test-line: venv testbed-build-plane ## LINE_TESTS on ANSIBLE_LINE's venv (make test-line ANSIBLE_LINE=2.18)
	PATH="$(BIN):$$PATH" TESTBED_REAL_NODE=0 $(BIN)/pytest $(LINE_TESTS)

.PHONY: dist
dist: venv ## build the wheel and sdist into dist/, then check them (twine check --strict, contents)
	$(BIN)/python scripts/build_dist.py --out dist --cache "$(CACHE_HOME)/ansible-operator-dist-tools"

.PHONY: run
run: venv ## run the operator against $$KUBECONFIG, or the local testbed when it is unset
	@if [ -z "$${KUBECONFIG:-}" ]; then \
	  $(MAKE) --no-print-directory testbed-up; \
	  export KUBECONFIG="$(CURDIR)/.testbed/kubeconfig"; \
	  eval "$$($(BIN)/python -m testbed related-images)"; \
	fi; \
	PATH="$(BIN):$$PATH" scripts/run.sh

.PHONY: clean
clean: testbed-down ## remove .venv and local state (caches outside the repo are kept)
	rm -rf $(VENV) .testbed .mypy_cache .ruff_cache .pytest_cache

# make bench / bench-quick / bench-reference: side by side with the Go operator (docs/benchmarks.md)
include bench/bench.mk
