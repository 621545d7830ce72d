# The build line of the HIP build bisect (bench/hip_build_bisect.sh), run inside a ROCm image by
# both tools: configure ggml with its HIP backend for gfx1151 and compile set-rows.cu (the
# subject's kernel) to a gfx1151 object. A revision whose configure refuses this HIP, or whose
# set-rows.cu does not compile for gfx1151, fails. $SRC is the checkout, $WORK a persistent dir.
HIPCXX="$(hipconfig -l)/clang" HIP_PATH="$(hipconfig -R)"
export HIPCXX HIP_PATH
cmake -S "$SRC" -B "$WORK/b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_HIP=ON \
  -DAMDGPU_TARGETS=gfx1151 -DGPU_TARGETS=gfx1151 -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
  -DCMAKE_HIP_COMPILER_LAUNCHER=ccache >"$WORK/configure.log" 2>&1 || { tail -n 5 "$WORK/configure.log"; exit 1; }
ninja -C "$WORK/b" src/ggml-hip/CMakeFiles/ggml-hip.dir/__/ggml-cuda/set-rows.cu.o
