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
# Which Dockerfile stage: runtime (default) or devel (adds nvcc; needs NVIDIA's apt repo)
TARGET ?= runtime
# torchvision/torchaudio matching TORCH_VERSION; left out when TORCH_VERSION is overridden
# unless given too (they must match torch)
TORCHVISION_VERSION ?=
TORCHAUDIO_VERSION ?=
BUILD_ARGS ?=
# make run: the command to train (empty: services only) and extra docker run options
CMD ?=
RUN_ARGS ?=
JUPYTER_PORT ?= 8888
SSH_HOST_PORT ?= 2222
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST ?= $(PY) -m pytest
PYTEST_ARGS ?=

.PHONY: build run test lint clean dev test-unit test-system test-image test-cuda wheelhouse \
	stand-in-base

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]' 'torch==2.13.0'
	touch $@

dev: $(VENV)/.installed

lint: dev
	$(VENV)/bin/ruff check src tests scripts benchmarks docker
	$(VENV)/bin/ruff format --check src tests scripts benchmarks docker
	$(VENV)/bin/shellcheck entrypoint.sh .ci/run $$(git ls-files '*.sh')
	$(VENV)/bin/hadolint Dockerfile

test-unit: dev
	$(PYTEST) tests/unit $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache .hypothesis src/*.egg-info docker/wheelhouse/*.whl

# The whole stack: unit tests, this machine's kernel, the image in real containers, the CUDA stack.
test: test-unit test-system test-image test-cuda

test-system: dev
	$(PYTEST) tests/system $(PYTEST_ARGS)

# --- the image -------------------------------------------------------------------------------
# BuildKit can only bind-mount what is in the build context, at a fixed place: stage
# WHEELHOUSE's wheels in docker/wheelhouse/ (hard links when possible, git-ignored).
# Empty WHEELHOUSE: torch comes from TORCH_INDEX_URL.
WHEEL_STAGE := docker/wheelhouse
wheelhouse:
	@rm -f $(WHEEL_STAGE)/*.whl
	@if [ -n "$(WHEELHOUSE)" ]; then \
	  ls "$(WHEELHOUSE)"/*.whl >/dev/null || { echo "WHEELHOUSE=$(WHEELHOUSE) holds no *.whl" >&2; exit 1; }; \
	  cp -l "$(WHEELHOUSE)"/*.whl $(WHEEL_STAGE)/ 2>/dev/null || cp "$(WHEELHOUSE)"/*.whl $(WHEEL_STAGE)/; fi

_BUILD_ARGS = --build-arg BASE_IMAGE=$(BASE_IMAGE) \
  --build-arg IMAGE_VERSION=$$(git describe --always --dirty 2>/dev/null || echo dev) \
  --build-arg VCS_REF=$$(git rev-parse HEAD 2>/dev/null || echo unknown) \
  $(if $(TORCH_VERSION),--build-arg TORCH_VERSION=$(TORCH_VERSION) \
    --build-arg TORCHVISION_VERSION=$(TORCHVISION_VERSION) \
    --build-arg TORCHAUDIO_VERSION=$(TORCHAUDIO_VERSION)) \
  $(if $(CA_BUNDLE),--secret id=ca_bundle$(comma)src=$(CA_BUNDLE)) \
  $(BUILD_ARGS)
comma := ,

build: wheelhouse
	DOCKER_BUILDKIT=1 $(DOCKER) build --network host --progress plain --target $(TARGET) \
	  $(_BUILD_ARGS) -t $(IMAGE) .

# The stand-in base (Debian 12 via debootstrap) for machines without a registry.
stand-in-base:
	DOCKER=$(DOCKER) bash scripts/build-stand-in-base.sh $(STAND_IN_BASE)

# JupyterLab on JUPYTER_PORT, SSH on SSH_HOST_PORT with your ~/.ssh key, logs in ./logs owned
# by you (NB_UID/NB_GID = your ids, unless you are root).
run:
	mkdir -p logs
	$(DOCKER) run --rm -it --shm-size=16g \
	  $$(command -v nvidia-smi >/dev/null && echo --gpus all) \
	  -p $(JUPYTER_PORT):8888 -p $(SSH_HOST_PORT):22 \
	  -e PUBLIC_KEY="$$(cat ~/.ssh/id_*.pub 2>/dev/null)" \
	  $$([ "$$(id -u)" != 0 ] && printf -- '-e NB_UID=%s -e NB_GID=%s' "$$(id -u)" "$$(id -g)") \
	  -v "$$PWD/logs:/workspace/logs" \
	  $(RUN_ARGS) $(IMAGE) $(CMD)

# Build TEST_IMAGE (on whatever BASE_IMAGE says, e.g. the stand-in) and test it in containers.
test-image: dev
	$(MAKE) build IMAGE=$(TEST_IMAGE)
	IMAGE=$(TEST_IMAGE) DOCKER=$(DOCKER) $(PYTEST) tests/image $(PYTEST_ARGS)

# The CUDA stack (scripts/validate_cuda.py) inside TEST_IMAGE on the host's GPUs. Without an
# NVIDIA GPU and Docker's NVIDIA runtime it prints why it skips and succeeds. Report: build/test-cuda/
VALIDATE_CUDA_ARGS ?=
test-cuda:
	@if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then \
	  echo "test-cuda: skipped: no NVIDIA GPU on this host (nvidia-smi missing or lists no GPU)"; \
	elif ! { $(DOCKER) info --format '{{json .Runtimes}}' 2>/dev/null | grep -q nvidia \
	    || command -v nvidia-container-runtime-hook >/dev/null; }; then \
	  echo "test-cuda: skipped: GPU present but Docker has no NVIDIA runtime (install nvidia-container-toolkit)"; \
	else \
	  $(DOCKER) image inspect $(TEST_IMAGE) >/dev/null 2>&1 || $(MAKE) build IMAGE=$(TEST_IMAGE) || exit 1; \
	  mkdir -p build/test-cuda && \
	  $(DOCKER) run --rm --gpus all --network host --shm-size=1g --entrypoint validate-cuda \
	    -v "$(CURDIR)/build/test-cuda:/workspace/logs" $(TEST_IMAGE) $(VALIDATE_CUDA_ARGS); \
	fi
