# CUDA build image (the NVIDIA control backend):
#   podman build -f containers/cuda.Dockerfile --build-arg CUDA_VERSION=12.8.1 -t setrows-cuda:12.8.1 containers/
ARG CUDA_VERSION=12.8.1
ARG UBUNTU_VERSION=24.04
ARG BASE_IMAGE=docker.io/nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION}
FROM ${BASE_IMAGE}

ARG CUDA_VERSION
ARG DEBIAN_FRONTEND=noninteractive
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates ccache cmake g++ git ninja-build python3 \
 && rm -rf /var/lib/apt/lists/*

LABEL org.opencontainers.image.title="setrows-cuda" \
      io.setrows.cuda-version="${CUDA_VERSION}"
ENV CCACHE_DIR=/ccache
WORKDIR /work
