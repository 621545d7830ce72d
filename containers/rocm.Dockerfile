# ROCm/HIP build image, one per ROCm version:
#   podman build -f containers/rocm.Dockerfile --build-arg ROCM_VERSION=6.4.1 -t setrows-rocm:6.4.1 containers/
# On AMD's public development images (rocm/dev-ubuntu-24.04:<version>-complete carries hipcc,
# hipBLAS and rocBLAS, which GGML_HIP needs). BASE_IMAGE overrides the whole reference, e.g.
# for a mirror or a locally built base.
ARG ROCM_VERSION=6.4.1
ARG UBUNTU_VERSION=24.04
ARG BASE_IMAGE=docker.io/rocm/dev-ubuntu-${UBUNTU_VERSION}:${ROCM_VERSION}-complete
FROM ${BASE_IMAGE}

ARG ROCM_VERSION
ARG DEBIAN_FRONTEND=noninteractive
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates ccache cmake git ninja-build python3 \
 && rm -rf /var/lib/apt/lists/*

# Recorded so provenance can name the ROCm the image was built for, even without a GPU.
LABEL org.opencontainers.image.title="setrows-rocm" \
      io.setrows.rocm-version="${ROCM_VERSION}"
# HIPCXX and HIP_PATH are not set here: the build recipe asks `hipconfig` in the image.
ENV ROCM_PATH=/opt/rocm \
    PATH=/opt/rocm/bin:/opt/rocm/llvm/bin:${PATH} \
    CCACHE_DIR=/ccache
WORKDIR /work
