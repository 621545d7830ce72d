# ROCm/HIP build image from Debian's own ROCm packages: no AMD registry, nothing pulled. The base is
# a debootstrapped Debian suite imported as an image (scripts/rocm-image.sh does both steps):
#   sid    (unstable): HIP 6.4 (libamdhip64-dev 6.4.3, clang-21, rocBLAS/hipBLAS 6.4.4)
#   trixie (13):       HIP 5.7 (libamdhip64-dev 5.7.1, LLVM 17, rocBLAS/hipBLAS 5.5.1)
# ROCM_VERSION is what the matrix calls this image (localhost/setrows-rocm:<ROCM_VERSION>); the build
# refuses to finish when the installed HIP is not that major.minor, so the label cannot lie.
ARG BASE_IMAGE=localhost/setrows-base:sid
FROM ${BASE_IMAGE}

ARG ROCM_VERSION
ARG SUITE=sid
ARG DEBIAN_FRONTEND=noninteractive
# A Debian snapshot mirror may serve an expired Release file for sid; the base is pinned by its
# debootstrap date, so validity windows add nothing here.
# hadolint ignore=DL3008
RUN apt-get -o Acquire::Check-Valid-Until=false update \
 && apt-get install -y --no-install-recommends \
      hipcc libamdhip64-dev libhipblas-dev librocblas-dev rocm-cmake rocminfo \
      ca-certificates ccache cmake g++ git make ninja-build python3 \
 && rm -rf /var/lib/apt/lists/*

# Where this suite's clang and device libraries live. Debian's clang does not find its own
# amdgcn bitcode for HIP ("cannot find ROCm device library") and trixie's `hipconfig -l` names
# /usr/bin, which has only clang-17: both are set here, for every tool that compiles HIP.
ARG HIP_CLANG_PATH
ARG HIP_DEVICE_LIB_PATH
ENV HIP_CLANG_PATH=${HIP_CLANG_PATH} \
    HIP_DEVICE_LIB_PATH=${HIP_DEVICE_LIB_PATH}

# The HIP the image really carries, checked against its tag, and whether its compiler can emit
# gfx1151 code at all (a one-kernel compile), kept in a file provenance reads.
RUN hip="$(hipconfig --version)" \
 && case "$hip" in "${ROCM_VERSION%.*}".*) ;; \
      *) echo "rocm-debian: HIP ${hip} installed, image tagged ${ROCM_VERSION}" >&2; exit 1 ;; esac \
 && test -x "$(hipconfig -l)/clang" \
 && printf '#include <hip/hip_runtime.h>\n__global__ void k(float *x) { x[threadIdx.x] = 1; }\n' > /tmp/k.hip \
 && if "$(hipconfig -l)/clang" -x hip --offload-arch=gfx1151 -c /tmp/k.hip -o /tmp/k.o \
      && grep -q 'amdgcn-amd-amdhsa--gfx1151' /tmp/k.o; then gfx1151=yes; else gfx1151=no; fi \
 && rm -f /tmp/k.hip /tmp/k.o \
 && printf 'rocm=%s\nhip=%s\nsuite=%s\nclang=%s\ngfx1151=%s\n' "${ROCM_VERSION}" "$hip" "${SUITE}" \
      "$(hipconfig -l)" "$gfx1151" > /etc/setrows-rocm

LABEL org.opencontainers.image.title="setrows-rocm" \
      io.setrows.rocm-version="${ROCM_VERSION}" \
      io.setrows.rocm-source="debian-${SUITE}"
# Debian installs ROCm under /usr; HIPCXX and HIP_PATH come from `hipconfig` at build time.
ENV ROCM_PATH=/usr \
    CCACHE_DIR=/ccache
WORKDIR /work
