# CPU build image: the control backend, and the image the container tests run in.
# Build from Docker Hub:   podman build -f containers/cpu.Dockerfile -t setrows-cpu:bookworm containers/
# Build from a local base: podman build --build-arg BASE_IMAGE=localhost/setrows-base:bookworm ...
ARG BASE_IMAGE=docker.io/library/debian:bookworm-slim
FROM ${BASE_IMAGE}

ARG DEBIAN_FRONTEND=noninteractive
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates ccache cmake g++ git make ninja-build python3 \
 && rm -rf /var/lib/apt/lists/*

# The tool mounts a persistent ccache directory here per (image, recipe).
ENV CCACHE_DIR=/ccache
WORKDIR /work
