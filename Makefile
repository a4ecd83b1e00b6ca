# Build, run and validate the image. Every knob is a variable: make build IMAGE=... BASE_IMAGE=...
SHELL := /bin/bash
# A docker client that builds with BuildKit: one with the buildx plugin, or a classic client
# (< 23) with DOCKER_BUILDKIT=1; the first of `docker` and /usr/bin/docker that can, else docker.
ifeq ($(origin DOCKER),undefined)
DOCKER := $(shell for c in docker /usr/bin/docker; do command -v $$c >/dev/null || continue; \
  if $$c buildx version >/dev/null 2>&1; then echo $$c; exit; fi; \
  v=$$($$c version --format '{{.Client.Version}}' 2>/dev/null); \
  if [ "$${v%%.*}" -lt 23 ] 2>/dev/null; then echo $$c; exit; fi; done; echo docker)
endif
# The CUDA line: 11.8 (the default; Maxwell to Hopper, driver >= 520) or 12.8 (adds Blackwell,
# sm_100 and sm_120, which 11.8 cannot run; driver >= 570). Each picks NVIDIA's base image and
# PyTorch's wheel index for that CUDA; torch, torchvision and torchaudio stay the same line.
CUDA ?= 11.8
CUDA_BASE_11.8 := nvidia/cuda:11.8.0-base-ubuntu22.04
CUDA_BASE_12.8 := nvidia/cuda:12.8.1-base-ubuntu22.04
ifeq ($(CUDA_BASE_$(CUDA)),)
$(error CUDA=$(CUDA) is not a variant of this image: 11.8 (default) or 12.8 (Blackwell GPUs))
endif
CUDA_TAG := cu$(subst .,,$(CUDA))
IMAGE ?= pytorch-cuda-diskinfo:$(if $(filter 11.8,$(CUDA)),latest,$(CUDA_TAG))
BASE_IMAGE ?= $(CUDA_BASE_$(CUDA))
TORCH_INDEX_URL ?= https://download.pytorch.org/whl/$(CUDA_TAG)
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
# make run: the command to train (empty: services only), your project's folder (mounted at
# /workspace/code, as the README's docker run mounts $PWD; the command runs in /workspace, so
# CMD="python code/train.py"; its logs/ gets the run's logs) and extra docker run options
CMD ?=
CODE ?= $(CURDIR)
RUN_ARGS ?=
JUPYTER_PORT ?= 8888
SSH_HOST_PORT ?= 2222
METRICS_HOST_PORT ?= 9101
# The image's torch line, from the Dockerfile's ARGs (declared there once): the test venv and
# the stand-in run it too, PyPI's Linux build (CUDA 12.6 libraries, on the CPU here).
PINNED_TORCH := $(shell sed -n 's/^ARG TORCH_VERSION=//p' Dockerfile)
PINNED_TORCHVISION := $(shell sed -n 's/^ARG TORCHVISION_VERSION=//p' Dockerfile)
PINNED_TORCHAUDIO := $(shell sed -n 's/^ARG TORCHAUDIO_VERSION=//p' Dockerfile)
# make stand-in: the torch line it puts in the wheelhouse, with its dependencies, for the
# stand-in's Python 3.11 (glibc 2.36: pip takes each manylinux tag it may use literally)
STAND_IN_TORCH ?= $(PINNED_TORCH)
STAND_IN_TORCHVISION ?= $(PINNED_TORCHVISION)
STAND_IN_TORCHAUDIO ?= $(PINNED_TORCHAUDIO)
STAND_IN_PLATFORMS := $(foreach v,$(shell seq 36 -1 5),--platform manylinux_2_$(v)_x86_64) \
  --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64
STAND_IN_WHEELHOUSE ?= wheelhouse
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST ?= $(PY) -m pytest
PYTEST_ARGS ?=

.PHONY: build run demo test lint clean dev test-unit test-system test-image test-cuda wheelhouse \
	stand-in-base stand-in stand-in-check stand-in-wheel constraints constraints-check \
	nvml-stand-in

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q $(if $(wildcard $(STAND_IN_WHEELHOUSE)/*.whl),--find-links $(STAND_IN_WHEELHOUSE)) \
	  -e '.[dev]' 'torch==$(PINNED_TORCH)' 'torchvision==$(PINNED_TORCHVISION)' 'torchaudio==$(PINNED_TORCHAUDIO)'
	touch $@

dev: $(VENV)/.installed

lint: dev
	$(VENV)/bin/ruff check src tests scripts benchmarks docker
	$(VENV)/bin/ruff format --check src tests scripts benchmarks docker
	$(VENV)/bin/shellcheck entrypoint.sh .ci/run docker/build/apt-install docker/build/pip-install docker/build/user-venv docker/build/user-path \
	  docker/build/stack-constraints \
	  $$(git ls-files '*.sh')
	$(VENV)/bin/hadolint Dockerfile
	$(VENV)/bin/vermin -q -t=3.10- --violations --no-tips src docker scripts
	$(VENV)/bin/lint-imports --no-cache
	$(PY) scripts/image-constraints.py check
	bash scripts/check-grafana-dashboard.sh

# docker/build/constraints.txt, the exact versions the image's tools layer installs, resolved
# for the real base's CPython 3.10 (scripts/image-constraints.py says how and what is left out).
# constraints: rewrite it after changing requirements.txt or to take newer releases;
# constraints-check (part of lint; needs PyPI): it still resolves for 3.10 and the stand-in's 3.11.
constraints: dev
	$(PY) scripts/image-constraints.py write

constraints-check: dev
	$(PY) scripts/image-constraints.py check

test-unit: dev
	$(PYTEST) tests/unit $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache .hypothesis src/*.egg-info docker/wheelhouse/*.whl

# The whole stack: unit tests, this machine's kernel, the image in real containers, the CUDA stack.
test: test-unit test-system test-image test-cuda

test-system: dev nvml-stand-in
	$(PYTEST) tests/system $(PYTEST_ARGS)

# An NVML for machines without a GPU: nvidia-ml-py loads it through LD_LIBRARY_PATH and it
# answers from a scenario file (docs/gpu.md). The tests build it too when it is missing.
NVML_STAND_IN := build/nvml-stand-in/libnvidia-ml.so.1
nvml-stand-in: $(NVML_STAND_IN)
$(NVML_STAND_IN): tests/nvml-stand-in/libnvidia-ml.c
	mkdir -p $(@D)
	gcc -shared -fPIC -O2 -Wall -Wextra -o $@ $< -lm

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
  --build-arg CUDA=$(CUDA) --build-arg TORCH_INDEX_URL=$(TORCH_INDEX_URL) \
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
stand-in-base: stand-in-check
	DOCKER=$(DOCKER) bash scripts/build-stand-in-base.sh $(STAND_IN_BASE)

# One line, before anything runs, when root or debootstrap is missing.
stand-in-check:
	$(if $(and $(filter 0,$(shell id -u)),$(shell command -v debootstrap 2>/dev/null)),,$(error \
	  make stand-in needs root and debootstrap (apt-get install debootstrap) for the Debian 12 \
	  stand-in base; with a registry use make build))

# A machine with neither a registry nor a GPU, in one step: the stand-in base, a CPU torch in
# STAND_IN_WHEELHOUSE (git-ignored; pip download from your index, kept for the next build) and
# the image, IMAGE, on it. Apt and pip inside the build trust this host's CA bundle.
stand-in: stand-in-base stand-in-wheel
	$(MAKE) build $(STAND_IN_SETTINGS)

STAND_IN_SETTINGS = BASE_IMAGE=$(STAND_IN_BASE) WHEELHOUSE=$(STAND_IN_WHEELHOUSE) \
  TORCH_VERSION=$(STAND_IN_TORCH) TORCHVISION_VERSION=$(STAND_IN_TORCHVISION) \
  TORCHAUDIO_VERSION=$(STAND_IN_TORCHAUDIO) DOCKER=$(DOCKER) \
  $(if $(CA_BUNDLE),,$(if $(wildcard /etc/ssl/certs/ca-certificates.crt),CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt))

STAND_IN_PINS = torch==$(STAND_IN_TORCH) $(if $(STAND_IN_TORCHVISION),torchvision==$(STAND_IN_TORCHVISION)) \
  $(if $(STAND_IN_TORCHAUDIO),torchaudio==$(STAND_IN_TORCHAUDIO))
stand-in-wheel:
	@if ! { ls $(STAND_IN_WHEELHOUSE)/torch-$(STAND_IN_TORCH)[-+]*.whl \
	    $(if $(STAND_IN_TORCHVISION),$(STAND_IN_WHEELHOUSE)/torchvision-$(STAND_IN_TORCHVISION)[-+]*.whl) \
	    $(if $(STAND_IN_TORCHAUDIO),$(STAND_IN_WHEELHOUSE)/torchaudio-$(STAND_IN_TORCHAUDIO)[-+]*.whl); \
	  } >/dev/null 2>&1; then \
	  echo "downloading $(strip $(STAND_IN_PINS)) and their dependencies (Python 3.11) into $(STAND_IN_WHEELHOUSE)/"; \
	  $(PYTHON) -m pip download -q --only-binary=:all: --python-version 3.11 $(STAND_IN_PLATFORMS) \
	    -d $(STAND_IN_WHEELHOUSE) $(STAND_IN_PINS) \
	  || { echo "make stand-in: pip could not download $(strip $(STAND_IN_PINS)) into $(STAND_IN_WHEELHOUSE)/" >&2; exit 1; }; fi

# The demo: a small dataset, a short training with diskinfo.torch.watch, verdicts within a minute.
demo:
	$(DOCKER) run --rm --shm-size=1g $(IMAGE) demo

# JupyterLab on JUPYTER_PORT, SSH on SSH_HOST_PORT with your ~/.ssh key, metrics on
# METRICS_HOST_PORT, CODE at /workspace/code, logs in CODE/logs owned by you (NB_UID/NB_GID =
# your ids, unless you are root). -it only when stdin is a terminal, so it runs from scripts too.
run:
	code=$$(realpath -m -- "$(CODE)") && mkdir -p "$$code/logs" && \
	$(DOCKER) run --rm $$([ -t 0 ] && echo -it) --shm-size=16g \
	  $$(command -v nvidia-smi >/dev/null && echo --gpus all) \
	  -p $(JUPYTER_PORT):8888 -p $(SSH_HOST_PORT):22 -p $(METRICS_HOST_PORT):9101 \
	  -e PUBLIC_KEY="$$(cat ~/.ssh/id_*.pub 2>/dev/null)" \
	  $$([ "$$(id -u)" != 0 ] && printf -- '-e NB_UID=%s -e NB_GID=%s' "$$(id -u)" "$$(id -g)") \
	  -v "$$code:/workspace/code" -v "$$code/logs:/workspace/logs" \
	  $(RUN_ARGS) $(IMAGE) $(CMD)

# Build TEST_IMAGE (on whatever BASE_IMAGE says, e.g. the stand-in) and test it in containers.
# After `make stand-in` (only the stand-in base here, BASE_IMAGE not chosen), plain `make test`
# builds the test image the same way and says so; a BASE_IMAGE you give always wins.
test-image: dev
	@if [ "$(origin BASE_IMAGE)" = file ] && ! $(DOCKER) image inspect $(BASE_IMAGE) >/dev/null 2>&1 \
	    && $(DOCKER) image inspect $(STAND_IN_BASE) >/dev/null 2>&1; then \
	  echo "make test: $(BASE_IMAGE) is not on this machine, the stand-in base $(STAND_IN_BASE) is: testing an image built on the stand-in (BASE_IMAGE=... chooses)"; \
	  $(MAKE) stand-in-wheel && $(MAKE) build IMAGE=$(TEST_IMAGE) $(STAND_IN_SETTINGS); \
	else $(MAKE) build IMAGE=$(TEST_IMAGE); fi
	IMAGE=$(TEST_IMAGE) DOCKER=$(DOCKER) $(PYTEST) tests/image $(PYTEST_ARGS)

# The CUDA stack (scripts/validate-cuda) inside TEST_IMAGE on the host's GPUs. Without an
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
