set -u
out=$1; T=$PWD/.work/dev/repro_prober; export GGML_NO_BACKTRACE=1
export SETROWS_TEST_GGML_SRC=$PWD/ggml-src/d4fcfe88 SETROWS_TEST_BUILD_DIR=/tmp/probe-work
export SETROWS_TEST_CMAKE_ARGS="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF"
big="--width 128 --guard 16 --rows 15000000 --start-row 14990000 --rows-per-launch 4 --stride 97 --launches 12"
run() { echo "### $*" | tee -a $out/prober.txt; env "$@" $T real_ggml --ignored --nocapture 2>&1 | grep -E "^(outcome|identity|test result|output tail)|panicked|^(SETROWS|cudaError|setrows)" | tee -a $out/prober.txt; }
run SETROWS_TEST_EXPECT=pass SETROWS_TEST_REPRO_ARGS="--backend CUDA0 --mode reuse --steps 20000"
run SETROWS_TEST_EXPECT=pass SETROWS_TEST_RUN_ENV=GGML_CUDA_DISABLE_GRAPHS=1 SETROWS_TEST_REPRO_ARGS="--backend CUDA0 --mode rebuild --steps 20000"
run SETROWS_TEST_EXPECT=wrong_result SETROWS_TEST_REPRO_ARGS="--backend CUDA0 --steps 2000 --inject stale-read"
run SETROWS_TEST_EXPECT=pass SETROWS_TEST_REPRODUCER=kernel SETROWS_TEST_REPRO_ARGS="$big"
run SETROWS_TEST_EXPECT=gpu_fault SETROWS_TEST_REPRODUCER=kernel SETROWS_TEST_REPRO_ARGS="--offset-math i32 $big"
cp /tmp/probe-work/*.log $out/ 2>/dev/null; ls /tmp/probe-work
