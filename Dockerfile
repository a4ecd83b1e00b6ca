# PyTorch + CUDA 11.8 with JupyterLab, SSH and the diskinfo I/O monitor under supervisord.
# Layers are ordered by how often they change: OS packages, Python and torch, the services,
# then our own package and configs, so a change to diskinfo rebuilds in seconds.
#
#   DOCKER_BUILDKIT=1 docker build -t pytorch-cuda-diskinfo .                  # the runtime image
#   DOCKER_BUILDKIT=1 docker build --target devel -t pytorch-cuda-diskinfo:devel .   # + nvcc
#   ... --secret id=ca_bundle,src=/path/ca.pem      # trust an extra CA (TLS-inspecting proxy)
#   wheels in docker/wheelhouse/ are preferred to any index (make build WHEELHOUSE=DIR puts them there)
#
# The CA secret, the wheelhouse and OFFLINE are handled in one place, docker/build/apt-install and
# docker/build/pip-install, bind-mounted into each RUN that installs packages (never a layer).
#
# The default base is CUDA's *base* image: torch's cu118 wheels bring the CUDA runtime, cuDNN
# and NCCL as pip packages, so a cudnn base image would ship a second copy (about 2 GB).
ARG BASE_IMAGE=nvidia/cuda:11.8.0-base-ubuntu22.04
# The CUDA line of BASE_IMAGE and of torch's wheels (TORCH_INDEX_URL): 11.8, or 12.8 for
# Blackwell GPUs (`make build CUDA=12.8` sets all three).
ARG CUDA=11.8
# torch, declared once for every stage (each repeats a bare ARG to see it). 2.7 is the last
# PyTorch line with CUDA 11.8 wheels.
ARG TORCH_VERSION=2.7.1

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS os
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# gcc, g++, libc6-dev and python3-dev: torch.compile needs them at run time (Triton compiles a
# small launcher on GPUs, inductor compiles C++ kernels on the CPU).
RUN --mount=type=cache,id=apt-cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,id=apt-lists,target=/var/lib/apt/lists,sharing=locked \
    --mount=type=secret,id=ca_bundle,required=false \
    --mount=type=bind,source=docker/build/apt-install,target=/usr/local/bin/apt-install \
    apt-install ca-certificates curl git less procps openssh-server openssh-client \
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
ARG TORCH_VERSION
ARG TORCHVISION_VERSION=0.22.1
ARG TORCHAUDIO_VERSION=2.7.1
ARG CUDA
# empty: PyTorch's index for CUDA (cu118, cu128)
ARG TORCH_INDEX_URL=
# torch and its dependencies (the nvidia-*-cu11 wheels) come from TORCH_INDEX_URL alone, as
# PyTorch's install docs do, so PyPI's default CUDA build can never be picked instead; wheels in
# docker/wheelhouse/ (torch among them) are used instead of TORCH_INDEX_URL when there are any.
# OFFLINE=1: install only from there (an air-gapped build; every wheel must be there).
ARG OFFLINE=0
RUN --mount=type=cache,id=pip-cache,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle,required=false \
    --mount=type=bind,source=docker/wheelhouse,target=/wheelhouse \
    --mount=type=bind,source=docker/build/pip-install,target=/usr/local/bin/pip-install \
    pkgs=("torch==${TORCH_VERSION}") \
    && if [ -n "$TORCHVISION_VERSION" ]; then pkgs+=("torchvision==${TORCHVISION_VERSION}"); fi \
    && if [ -n "$TORCHAUDIO_VERSION" ]; then pkgs+=("torchaudio==${TORCHAUDIO_VERSION}"); fi \
    && index=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cu${CUDA//./}} \
    && pip-install --index-unless-wheelhouse "$index" "${pkgs[@]}"

# ---------------------------------------------------------------------------------------------
FROM torch AS tools
ARG OFFLINE=0
# The services, diskinfo's dependencies (with matplotlib for `diskinfo report` and webdataset for
# the shard examples) and numpy: one list, docker/build/requirements.txt, whose diskinfo part
# tests/unit/test_image_requirements.py keeps equal to pyproject.toml, at the exact versions of
# docker/build/constraints.txt (resolved for the real base's Python 3.10 by `make constraints`),
# so every build installs what CI tested. These change less often than our code.
RUN --mount=type=cache,id=pip-cache,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle,required=false \
    --mount=type=bind,source=docker/wheelhouse,target=/wheelhouse \
    --mount=type=bind,source=docker/build/pip-install,target=/usr/local/bin/pip-install \
    --mount=type=bind,source=docker/build/requirements.txt,target=/tmp/requirements.txt \
    --mount=type=bind,source=docker/build/constraints.txt,target=/tmp/constraints.txt \
    PIP_CONSTRAINT=/tmp/constraints.txt pip-install -r /tmp/requirements.txt

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
    LOG_DIR=/workspace/logs DISKINFO_STATE_DIR=/run/diskinfo USER_VENV=/opt/user-venv \
    STARTUP_STATE_DIR=/run/pytorch-cuda PYTORCH_CUDA_LIB=/usr/local/lib/pytorch-cuda \
    KEEP_ALIVE=0 TRAIN_STOP_TIMEOUT=5
WORKDIR /workspace
EXPOSE 8888 22 9101

# ---------------------------------------------------------------------------------------------
FROM tools AS runtime
ARG IMAGE_VERSION=dev
ARG VCS_REF=unknown
ARG TORCH_VERSION
ARG BASE_IMAGE
ARG CUDA
LABEL org.opencontainers.image.title="pytorch-cuda-diskinfo" \
      org.opencontainers.image.description="PyTorch + CUDA ${CUDA}, JupyterLab, SSH and an I/O monitor that says whether training waits for data" \
      io.pytorch-cuda.cuda="${CUDA}" \
      org.opencontainers.image.version="${IMAGE_VERSION}" \
      org.opencontainers.image.revision="${VCS_REF}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.pytorch-cuda.torch.version="${TORCH_VERSION}"
ENV IMAGE_VERSION=${IMAGE_VERSION} IMAGE_CUDA=${CUDA}
# Our package: dependencies are already in the layer above, so this is seconds.
COPY pyproject.toml README.md /opt/diskinfo/
COPY src /opt/diskinfo/src
RUN --mount=type=cache,id=pip-cache,target=/root/.cache/pip \
    pip install --no-deps --no-build-isolation /opt/diskinfo
# NB_USER's environment over this one, where a `pip` run in a running container installs
# (docker/build/user-venv says why it is a second one); after the last package of /opt/venv.
RUN --mount=type=bind,source=docker/build/user-venv,target=/usr/local/bin/user-venv \
    user-venv "$VIRTUAL_ENV" "$USER_VENV" "$NB_UID" "$NB_GID"
# Every shell and `docker exec` finds those environments in the same order, login shells
# (`bash -lc`, whose /etc/profile sets PATH anew) too: a command of the image's environment
# runs NB_USER's for NB_USER and the image's for root (docker/build/user-path says how).
# JUPYTER_PATH: Jupyter run from NB_USER's environment (`jupyter nbconvert` over SSH or docker
# exec) finds the image's templates and kernel specs, which live in the image's environment.
ENV PATH=/opt/venv-select/bin:${PATH} \
    JUPYTER_PATH=${VIRTUAL_ENV}/share/jupyter
RUN --mount=type=bind,source=docker/build/user-path,target=/usr/local/bin/user-path \
    user-path "$VIRTUAL_ENV" "$USER_VENV" /opt/venv-select/bin
# The torch stack as installed above, pinned for every later install by pip (training command,
# notebooks, terminals, SSH, a derived image's RUN): a package that wants another torch is
# refused instead of shadowing the tested one; an empty PIP_CONSTRAINT overrides (docs/image.md).
# uv reads the same file (UV_CONSTRAINT).
RUN --mount=type=bind,source=docker/build/stack-constraints,target=/usr/local/bin/stack-constraints \
    stack-constraints "$VIRTUAL_ENV" /etc/pip/constraint.txt
# pip, uv and requests read the system store, as curl, git and apt do, so the CA that
# CA_BUNDLE_FILE adds there at start (init.d/15-ca.sh) reaches all of them.
ENV PIP_CONSTRAINT=/etc/pip/constraint.txt \
    UV_CONSTRAINT=/etc/pip/constraint.txt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    UV_NATIVE_TLS=1 \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
# Configs and scripts, last: they change most often. supervisord.conf is a template:
# supervisord-run.py writes the running config, with a fresh password for supervisord's socket,
# to /run/pytorch-cuda/supervisord.conf (root only) at start; /etc/pytorch-cuda/supervisord.conf
# is a link to it.
# docker/ is by phase: build/ (used above), etc/ (configs), start/ (entrypoint.sh's steps and
# their helpers), run/ (what supervisord runs) and shared/ (what both import or run). Each
# folder lands in PYTORCH_CUDA_LIB as it sits, with validate-cuda and its package as they sit
# in scripts/ (the banner imports the package's driver table; host tools stay out), so a path
# that works in the checkout works in the image. All of it is root's, written by nobody else:
# root runs it.
COPY docker/etc/supervisord.conf /etc/pytorch-cuda/supervisord.conf.in
COPY docker/etc/sshd_config /etc/pytorch-cuda/
COPY docker/etc/jupyter_server_config.py /etc/jupyter/
# No "get notified about official Jupyter news?" popup in every new container (docker-stacks
# turns the announcements plugin off too; a user can still turn news on in the settings).
COPY docker/etc/labconfig/page_config.json /etc/jupyter/labconfig/
COPY docker/start/ ${PYTORCH_CUDA_LIB}/start/
COPY docker/run/ ${PYTORCH_CUDA_LIB}/run/
COPY docker/shared/ ${PYTORCH_CUDA_LIB}/shared/
COPY scripts/validate_cuda/ ${PYTORCH_CUDA_LIB}/scripts/validate_cuda/
COPY scripts/validate-cuda ${PYTORCH_CUDA_LIB}/scripts/validate-cuda
# The examples, where Jupyter's file browser and a shell's `ls` show them.
COPY examples/ /workspace/examples/
COPY entrypoint.sh /usr/local/bin/entrypoint.sh
RUN chmod 0755 /usr/local/bin/entrypoint.sh "$PYTORCH_CUDA_LIB"/run/*.sh \
        "$PYTORCH_CUDA_LIB/scripts/validate-cuda" "$PYTORCH_CUDA_LIB/run/demo.py" \
    && ln -sf "$PYTORCH_CUDA_LIB/scripts/validate-cuda" /usr/local/bin/validate-cuda \
    && ln -sf "$PYTORCH_CUDA_LIB/run/demo.py" /usr/local/bin/demo \
    && ln -sf /run/pytorch-cuda/supervisord.conf /etc/pytorch-cuda/supervisord.conf \
    && find / -xdev -type f -perm /6000 -exec chmod ug-s {} +
# No setuid or setgid program is left (su, passwd, mount, newgrp, chfn, ssh-keysign, ...): NB_USER
# has no password and no sudo, so none serves them, and each is a program running as root with
# arguments and an environment NB_USER chooses. sshd and setpriv are started by root and need none.
# Root's Python imports nothing from a folder NB_USER can write: `docker exec C python3 ...`
# without -u starts in /workspace, and Python 3.10 has no PYTHONSAFEPATH (root_sys_path.py).
RUN site=$(python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
    && ln -s "$PYTORCH_CUDA_LIB/shared/root_sys_path.py" "$site/pytorch_cuda_root_sys_path.py" \
    && echo 'import pytorch_cuda_root_sys_path' >"$site/00-pytorch-cuda-root-sys-path.pth"

HEALTHCHECK --interval=5s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/usr/local/lib/pytorch-cuda/run/healthcheck.sh"]
ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]
CMD []

# ---------------------------------------------------------------------------------------------
# For building CUDA extensions: nvcc and the CUDA headers torch's extension builder includes,
# from NVIDIA's apt repository that the nvidia/cuda base image already configures.
FROM runtime AS devel
ARG CUDA
# hadolint ignore=SC3060  # the os stage's SHELL is bash, which hadolint does not see here
RUN --mount=type=cache,id=apt-cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,id=apt-lists,target=/var/lib/apt/lists,sharing=locked \
    --mount=type=secret,id=ca_bundle,required=false \
    --mount=type=bind,source=docker/build/apt-install,target=/usr/local/bin/apt-install \
    v=${CUDA//./-} \
    && apt-install build-essential "cuda-nvcc-$v" "cuda-cudart-dev-$v" "cuda-nvrtc-dev-$v" \
        "libcublas-dev-$v" "libcusparse-dev-$v" "libcusolver-dev-$v" "libcurand-dev-$v" \
        "cuda-nvtx-$v" \
    && nvcc --version
ENV CUDA_HOME=/usr/local/cuda

# The default target (the last stage) is the runtime image.
FROM runtime
