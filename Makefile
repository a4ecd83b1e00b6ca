# Build, run and validate the image. Every knob is a variable: make build IMAGE=... BASE_IMAGE=...
SHELL := /bin/bash
DOCKER ?= docker
IMAGE ?= pytorch-cuda-diskinfo:latest
BASE_IMAGE ?= nvidia/cuda:11.8.0-base-ubuntu22.04
STAND_IN_BASE ?= local/bookworm:base
TEST_IMAGE ?= pytorch-cuda-diskinfo:test
# Offline / stand-in builds: a directory of wheels (torch among them) and the torch version in it
WHEELHOUSE ?=
TORCH_VERSION ?=
# Extra CA bundle trusted by apt and pip inside the build (corporate TLS proxies)
CA_BUNDLE ?=
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST ?= $(PY) -m pytest
PYTEST_ARGS ?=

.PHONY: build run test lint clean dev test-unit test-system test-image test-cuda

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]' 'torch==2.13.0'
	touch $@

dev: $(VENV)/.installed

lint: dev
	$(VENV)/bin/ruff check src tests scripts benchmarks
	$(VENV)/bin/ruff format --check src tests scripts benchmarks
	$(VENV)/bin/shellcheck entrypoint.sh $$(git ls-files '*.sh') 
	$(VENV)/bin/hadolint Dockerfile

test-unit: dev
	$(PYTEST) tests/unit $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache .hypothesis src/*.egg-info

# The whole stack: unit tests, this machine's kernel, the image in real containers, the CUDA stack.
test: test-unit test-system test-image test-cuda

test-system: dev
	$(PYTEST) tests/system $(PYTEST_ARGS)
