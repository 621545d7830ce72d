#!/usr/bin/env bash
# Compile the set-rows kernels for AMD gfx1151 (Strix Halo) WITHOUT an AMD GPU, and prove from the
# produced AMDGPU assembly what was built: target, wave size, and the k_set_rows kernels.
#   scripts/hip-compile.sh [GGML_SOURCE_TREE]
#   (a) repro-kernels/setrows-kernel/setrows-kernel.cu        always
#   (b) GGML_SOURCE_TREE/src/ggml-cuda/set-rows.cu (ggml's own)  only when a tree is given
# each with clang -x hip --offload-arch=gfx1151 --cuda-device-only -nogpulib -S, once for wave32
# (gfx1151's native mode) and once with -mwavefrontsize64. Nothing runs: this is device code
# compiled to assembly (unlinked: the calls into ROCm's device library, __ockl_*, stay external).
# Toolchain: scripts/setup.d/40-hip.sh (HIP_CLANG, HIP_INCLUDE). Output: one summary line per
# check on stdout; assembly under $HIP_COMPILE_OUT (default: a temporary directory). Exit 0 only
# if every compile and every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."
clang=${HIP_CLANG:-$(command -v clang++-19 || true)}
hip_inc=${HIP_INCLUDE:-/usr/include}
arch=gfx1151
ggml=${1:-}
out=${HIP_COMPILE_OUT:-$(mktemp -d)}
mkdir -p "$out"
fails=0
ok() { echo "PASS $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

if [ -z "$clang" ] || [ ! -x "$clang" ] || [ ! -f "$hip_inc/hip/hip_runtime.h" ]; then
  echo "FAIL no HIP toolchain (clang++-19 and $hip_inc/hip/hip_runtime.h): run scripts/setup.d/40-hip.sh as root"
  exit 1
fi
hipver=$(awk '/#define HIP_VERSION_(MAJOR|MINOR|PATCH)/ { v = v (v == "" ? "" : ".") $3 } END { print v }' \
  "$hip_inc/hip/hip_version.h" 2>/dev/null)
echo "toolchain: $("$clang" --version | head -1); HIP headers ${hipver:-unknown} ($hip_inc/hip); target $arch"

# check_asm FILE WAVE LABEL: the assembly must name the gfx1151 target, every kernel must carry
# the requested wave size (code-object metadata and the kernel descriptor), and k_set_rows must be
# among the kernels.
check_asm() {
  local s=$1 w=$2 label=$3 w32
  [ "$w" = 32 ] && w32=1 || w32=0
  local target nk nmeta nmeta_w ndesc ndesc_w nset
  target=$(grep -c "^[[:space:]]*\.amdgcn_target \"amdgcn-amd-amdhsa--$arch\"" "$s")
  nk=$(grep -c '^[[:space:]]*\.amdhsa_kernel ' "$s")
  nmeta=$(grep -c '\.wavefront_size:' "$s")
  nmeta_w=$(grep -c "\.wavefront_size:[[:space:]]*$w\$" "$s")
  ndesc=$(grep -c '\.amdhsa_wavefront_size32 ' "$s")
  ndesc_w=$(grep -c "\.amdhsa_wavefront_size32 $w32\$" "$s")
  nset=$(grep -E '^[[:space:]]*\.name:[[:space:]]+_Z.*k_set_rows' "$s" | wc -l)
  local detail="target=$target kernels=$nk wavefront_size:$w=$nmeta_w/$nmeta amdhsa_wavefront_size32=$w32 $ndesc_w/$ndesc k_set_rows*=$nset"
  if [ "$target" -ge 1 ] && [ "$nk" -ge 1 ] && [ "$nmeta" = "$nk" ] && [ "$nmeta_w" = "$nk" ] \
    && [ "$ndesc_w" = "$nk" ] && [ "$ndesc" = "$nk" ] && [ "$nset" -ge 1 ]; then
    ok "$label wave$w: $detail ($s)"
  else
    bad "$label wave$w: $detail ($s)"
  fi
}

# compile LABEL SRC WAVE OUT.s extra-flags...
compile() {
  local label=$1 src=$2 w=$3 s=$4; shift 4
  local wflag=()
  [ "$w" = 64 ] && wflag=(-mwavefrontsize64)
  local inc=()  # /usr/include is searched anyway; naming it again breaks libstdc++'s #include_next
  [ "$hip_inc" != /usr/include ] && inc=(-isystem "$hip_inc")
  local cmd=("$clang" -x hip --offload-arch=$arch "${wflag[@]}" --cuda-device-only -nogpulib -S -O2 -std=c++17
    "${inc[@]}" "$@" "$src" -o "$s")
  echo "  \$ ${cmd[*]}" >"$s.cmd"
  if "${cmd[@]}" >"$s.err" 2>&1; then
    check_asm "$s" "$w" "$label"
  else
    bad "$label wave$w: compile failed ($(grep -m1 -E 'error' "$s.err" || tail -1 "$s.err")); full log $s.err"
  fi
}

# (a) the standalone replica; DFLASH_WAVE_SIZE follows the compiled wave size
for w in 32 64; do
  compile "setrows-kernel.cu" repro-kernels/setrows-kernel/setrows-kernel.cu $w "$out/setrows-kernel-w$w.s" \
    -DDFLASH_WAVE_SIZE=$w -I repro-kernels/setrows-kernel
done

# (b) ggml's own set-rows.cu, as ggml's HIP build compiles it (GGML_USE_HIP, vendors/hip.h)
if [ -z "$ggml" ]; then
  echo "SKIP ggml set-rows.cu: no ggml source tree given (usage: scripts/hip-compile.sh /path/to/ggml)"
elif [ ! -f "$ggml/src/ggml-cuda/set-rows.cu" ]; then
  bad "ggml set-rows.cu: $ggml/src/ggml-cuda/set-rows.cu does not exist"
else
  need=$(grep -o -E 'VERSION_LESS [0-9.]+' "$ggml/src/ggml-hip/CMakeLists.txt" 2>/dev/null | head -1 | awk '{print $2}')
  [ -n "$need" ] && echo "note: ggml's src/ggml-hip/CMakeLists.txt requires HIP >= $need; headers here are ${hipver:-unknown}"
  for w in 32 64; do
    compile "ggml set-rows.cu" "$ggml/src/ggml-cuda/set-rows.cu" $w "$out/ggml-set-rows-w$w.s" \
      -DGGML_USE_HIP -D__HIP_PLATFORM_AMD__ -I "$ggml/include" -I "$ggml/src" -I "$ggml/src/ggml-cuda"
  done
fi

echo "assembly and compile logs: $out"
if [ "$fails" -gt 0 ]; then
  echo "hip-compile: $fails check(s) FAILED"
  exit 1
fi
echo "hip-compile: all checks passed"
