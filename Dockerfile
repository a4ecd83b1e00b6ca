# PyTorch + CUDA 11.8 with JupyterLab, SSH and the diskinfo I/O monitor under supervisord.
# Layers are ordered by how often they change: OS packages, Python and torch, the services,
# then our own package and configs, so a change to diskinfo rebuilds in seconds.
#
#   DOCKER_BUILDKIT=1 docker build -t pytorch-cuda-diskinfo .                  # the runtime image
#   DOCKER_BUILDKIT=1 docker build --target devel -t pytorch-cuda-diskinfo:devel .   # + nvcc
#   ... --secret id=ca_bundle,src=/path/ca.pem      # trust an extra CA (TLS-inspecting proxy)
#   wheels in docker/wheelhouse/ are preferred to any index (make build WHEELHOUSE=DIR puts them there)
#
# The default base is CUDA's *base* image: torch's cu118 wheels bring the CUDA runtime, cuDNN
# and NCCL as pip packages, so a cudnn base image would ship a second copy (about 2 GB).
ARG BASE_IMAGE=nvidia/cuda:11.8.0-base-ubuntu22.04

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS os
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG DEBIAN_FRONTEND=noninteractive
# apt trusts the optional CA secret too; nothing of it, nor apt's caches, stays in a layer.
# gcc, g++, libc6-dev and python3-dev: torch.compile needs them at run time (Triton compiles a
# small launcher on GPUs, inductor compiles C++ kernels on the CPU).
RUN --mount=type=cache,id=apt-cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,id=apt-lists,target=/var/lib/apt/lists,sharing=locked \
    --mount=type=secret,id=ca_bundle,required=false \
    rm -f /etc/apt/apt.conf.d/docker-clean \
    && ca=(); if [ -s /run/secrets/ca_bundle ]; then ca=(-o Acquire::https::CAInfo=/run/secrets/ca_bundle); fi \
    && apt-get "${ca[@]}" update \
    && apt-get "${ca[@]}" install -y --no-install-recommends \
        ca-certificates curl git less procps openssh-server openssh-client \
        python3 python3-venv python3-dev gcc g++ libc6-dev \
    && rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
# A venv keeps pip away from the distribution's Python (PEP 668 on Debian 12) on both bases.
RUN python3 -m venv "$VIRTUAL_ENV"

# ---------------------------------------------------------------------------------------------
FROM os AS torch
ARG TORCH_VERSION=2.7.1
ARG TORCHVISION_VERSION=0.22.1
ARG TORCHAUDIO_VERSION=2.7.1
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu118
# torch and its dependencies (the nvidia-*-cu11 wheels) come from TORCH_INDEX_URL alone, as
# PyTorch's install docs do, so PyPI's default CUDA build can never be picked instead.
# Wheels in docker/wheelhouse/ (torch among them) are installed instead of TORCH_INDEX_URL's
# (BuildKit here cannot take the mount's source from an ARG, so the place is fixed).
# OFFLINE=1: install only from there (an air-gapped build; every wheel must be there).
ARG OFFLINE=0
# The extra CA is added to the system bundle, so PyPI stays trusted behind any proxy.
RUN --mount=type=cache,id=pip-cache,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle,required=false \
    --mount=type=bind,source=docker/wheelhouse,target=/wheelhouse \
    if [ -s /run/secrets/ca_bundle ]; then \
        cat /etc/ssl/certs/ca-certificates.crt /run/secrets/ca_bundle >/tmp/ca.pem \
        && export PIP_CERT=/tmp/ca.pem; fi \
    && pkgs=("torch==${TORCH_VERSION}") \
    && if [ -n "$TORCHVISION_VERSION" ]; then pkgs+=("torchvision==${TORCHVISION_VERSION}"); fi \
    && if [ -n "$TORCHAUDIO_VERSION" ]; then pkgs+=("torchaudio==${TORCHAUDIO_VERSION}"); fi \
    && if compgen -G '/wheelhouse/*.whl' >/dev/null; then src=(--find-links /wheelhouse); \
       else src=(--index-url "$TORCH_INDEX_URL"); fi \
    && if [ "$OFFLINE" = 1 ]; then src+=(--no-index); fi \
    && pip install "${src[@]}" "${pkgs[@]}" \
    && rm -f /tmp/ca.pem

# ---------------------------------------------------------------------------------------------
FROM torch AS tools
ARG OFFLINE=0
# The services and diskinfo's dependencies: these change less often than our code. numpy:
# torch warns on every import without it, and most training code needs it anyway.
RUN --mount=type=cache,id=pip-cache,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle,required=false \
    --mount=type=bind,source=docker/wheelhouse,target=/wheelhouse \
    if [ -s /run/secrets/ca_bundle ]; then \
        cat /etc/ssl/certs/ca-certificates.crt /run/secrets/ca_bundle >/tmp/ca.pem \
        && export PIP_CERT=/tmp/ca.pem; fi \
    && src=(--find-links /wheelhouse) && if [ "$OFFLINE" = 1 ]; then src+=(--no-index); fi \
    && pip install "${src[@]}" \
        'jupyterlab>=4.2,<5' 'supervisor>=4.2.5,<5' 'setuptools>=77' 'numpy' \
        'psutil>=5.9' 'prometheus_client>=0.17' 'nvidia-ml-py>=12.535' \
    && rm -f /tmp/ca.pem

ARG NB_USER=jovyan
ARG NB_UID=1000
ARG NB_GID=100
# The unprivileged user (docker-stacks' convention); renamed/renumbered at start if asked.
# Password "*": no password login, yet not "locked" for sshd's key login.
RUN (getent group "$NB_GID" >/dev/null || groupadd -g "$NB_GID" users) \
    && useradd -l -m -s /bin/bash -u "$NB_UID" -g "$NB_GID" "$NB_USER" \
    && usermod -p '*' "$NB_USER" \
    && mkdir -p /workspace/logs /workspace/data \
    && chown -R "$NB_UID:$NB_GID" /workspace

ENV NB_USER=${NB_USER} NB_UID=${NB_UID} NB_GID=${NB_GID} \
    JUPYTER_ENABLE=1 JUPYTER_PORT=8888 SSH_PORT=22 \
    METRICS_PORT=9101 METRICS_ADDR=0.0.0.0 \
    DISKINFO_PATHS="/workspace/data /workspace" DISKINFO_INTERVAL=5 \
    DISKINFO_STATE_DIR=/run/diskinfo \
    KEEP_ALIVE=0 TRAIN_STOP_TIMEOUT=5
WORKDIR /workspace
EXPOSE 8888 22 9101

# ---------------------------------------------------------------------------------------------
FROM tools AS runtime
ARG IMAGE_VERSION=dev
ARG VCS_REF=unknown
ARG TORCH_VERSION=2.7.1
ARG BASE_IMAGE
LABEL org.opencontainers.image.title="pytorch-cuda-diskinfo" \
      org.opencontainers.image.description="PyTorch + CUDA 11.8, JupyterLab, SSH and an I/O monitor that says whether training waits for data" \
      org.opencontainers.image.version="${IMAGE_VERSION}" \
      org.opencontainers.image.revision="${VCS_REF}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.pytorch-cuda.torch.version="${TORCH_VERSION}"
ENV IMAGE_VERSION=${IMAGE_VERSION}
# Our package: dependencies are already in the layer above, so this is seconds.
COPY pyproject.toml README.md /opt/diskinfo/
COPY src /opt/diskinfo/src
RUN --mount=type=cache,id=pip-cache,target=/root/.cache/pip \
    pip install --no-deps --no-build-isolation /opt/diskinfo
# Configs and scripts, last: they change most often. scripts/ is copied whole, so the CUDA
# validation command is installed when it is there.
COPY docker/supervisord.conf docker/sshd_config /etc/pytorch-cuda/
COPY docker/jupyter_server_config.py /etc/jupyter/
COPY docker/*.sh docker/*.py /usr/local/lib/pytorch-cuda/
COPY docker/init.d/ /usr/local/lib/pytorch-cuda/init.d/
COPY scripts/ /usr/local/lib/pytorch-cuda/scripts/
COPY entrypoint.sh /usr/local/bin/entrypoint.sh
RUN chmod 0755 /usr/local/bin/entrypoint.sh /usr/local/lib/pytorch-cuda/*.sh \
    && if [ -f /usr/local/lib/pytorch-cuda/scripts/validate_cuda.py ]; then \
        ln -sf /usr/local/lib/pytorch-cuda/scripts/validate_cuda.py /usr/local/bin/validate-cuda \
        && chmod 0755 /usr/local/lib/pytorch-cuda/scripts/validate_cuda.py; fi

HEALTHCHECK --interval=5s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/usr/local/lib/pytorch-cuda/healthcheck.sh"]
ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]
CMD []

# ---------------------------------------------------------------------------------------------
# For building CUDA extensions: nvcc and the CUDA headers torch's extension builder includes,
# from NVIDIA's apt repository that the nvidia/cuda base image already configures.
FROM runtime AS devel
ARG DEBIAN_FRONTEND=noninteractive
RUN --mount=type=cache,id=apt-cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,id=apt-lists,target=/var/lib/apt/lists,sharing=locked \
    --mount=type=secret,id=ca_bundle,required=false \
    ca=(); if [ -s /run/secrets/ca_bundle ]; then ca=(-o Acquire::https::CAInfo=/run/secrets/ca_bundle); fi \
    && apt-get "${ca[@]}" update \
    && apt-get "${ca[@]}" install -y --no-install-recommends \
        build-essential cuda-nvcc-11-8 cuda-cudart-dev-11-8 cuda-nvrtc-dev-11-8 \
        libcublas-dev-11-8 libcusparse-dev-11-8 libcusolver-dev-11-8 libcurand-dev-11-8 \
        cuda-nvtx-11-8 \
    && nvcc --version
ENV CUDA_HOME=/usr/local/cuda

# The default target (the last stage) is the runtime image.
FROM runtime
