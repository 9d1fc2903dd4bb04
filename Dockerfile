# zkqueue: workers, Flower, the metrics exporter and the demo, from one image.
#
#   docker build -t zkqueue .                              CPU image (python:3.11-slim-bookworm), with s3fs
#                                                          for an s3:// store
#   docker build -t zkqueue:gpu --build-arg GPU=1 .        + CuPy, CUDA 12 NVRTC and runtime from PyPI,
#                                                          and the kernels as cubins for CUDA_ARCHS
#                                                          (default "sm_80 sm_90"; needs an NVIDIA
#                                                          driver >= 525.60.13 and the NVIDIA
#                                                          container runtime to run)
#   docker build --build-arg BASE_IMAGE=my/debian-bookworm .
#       any Debian bookworm image with python3 (3.10+) and its venv module; CI uses a local one
#       made by scripts/base_images.sh, as no image registry is reachable there.
#
# The build context is only what .dockerignore lets through: pyproject.toml, README.md and the
# package folders. The Dockerfile names no package folder, so moving or renaming packages needs
# only .dockerignore's list and the import in the native-kernel step below to follow.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ARG GPU=0
# CuPy 14 and the CUDA 12.x toolkit wheels it loads NVRTC and the runtime from.
ARG CUPY_SPEC="cupy-cuda12x>=13.3,<15"
ARG CUDA_WHEELS="nvidia-cuda-nvrtc-cu12>=12.2,<13 nvidia-cuda-runtime-cu12>=12.2,<13"

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# g++ compiles the native CPU kernels (below, into the image); installed unless the base has it.
RUN command -v g++ >/dev/null || { apt-get update \
 && apt-get install -y --no-install-recommends g++ \
 && rm -rf /var/lib/apt/lists/*; }

# A venv, so the image works the same on python:*-slim (Python in /usr/local) and on a plain
# Debian base (/usr/bin/python3, whose site-packages PEP 668 closes to pip).
RUN python3 -m venv /opt/zkqueue/venv
ENV PATH=/opt/zkqueue/venv/bin:$PATH \
    VIRTUAL_ENV=/opt/zkqueue/venv \
    ZKQUEUE_CACHE_DIR=/opt/zkqueue/cache

WORKDIR /opt/zkqueue/src

# Dependencies first, from pyproject.toml alone: editing the code does not reinstall them.
COPY pyproject.toml ./
RUN python -c 'import sys, tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
print("\n".join(p["dependencies"] + p["optional-dependencies"]["s3"] + (p["optional-dependencies"]["gpu"] if sys.argv[1] == "1" else [])))' \
      "$GPU" > /tmp/requirements.txt \
 && if [ "$GPU" = "1" ]; then echo "$CUPY_SPEC $CUDA_WHEELS" | tr ' ' '\n' >> /tmp/requirements.txt; fi \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

COPY . ./
# --no-deps: everything was installed above; a dependency missing from that list fails here.
# Then: the native CPU kernels compiled into the image, not at the first partition; and in the
# GPU image, a check that needs no GPU: CuPy imports, NVRTC and the CUDA runtime load from the
# wheels, and NVRTC compiles zkqueue's CUDA kernels (scripts/gpu_image_check.py); then NVRTC
# compiles every module unit of both curves to cubins for $CUDA_ARCHS into the cache
# ($ZKQUEUE_CACHE_DIR/cuda-cubin, keyed by source hash, architecture and NVRTC version), so a
# fresh container's first partition on an A100 or H100/H200 spends no time in NVRTC
# (--build-arg CUDA_ARCHS= skips that step: tests/test_compose_up.py does, on a machine
# without a GPU, where only the check above matters).
# (From /: here ./zkqueue would shadow the installed package, which holds the mapped folders.)
ARG CUDA_ARCHS="sm_80 sm_90"
RUN pip install --no-deps . \
 && pip check \
 && cd / \
 && python -c 'from zkqueue.groth16 import native; native.library_path()' \
 && if [ "$GPU" = "1" ]; then python /opt/zkqueue/src/scripts/gpu_image_check.py \
      && if [ -n "$CUDA_ARCHS" ]; then \
           python -m zkqueue.groth16.backends.cuda_compile $(printf -- '--arch %s ' $CUDA_ARCHS); fi; fi \
 && rm -rf /opt/zkqueue/src

WORKDIR /
ENV ZKQUEUE_STORE_URL=/var/lib/zkqueue/store
VOLUME /var/lib/zkqueue/store
ENTRYPOINT ["zkqueue"]
CMD ["--help"]
