set -o pipefail
C=.devcarry-e; B=/tmp/b/decode-probe; export GGML_NO_BACKTRACE=1
nvidia-smi -L; nproc
CM="-DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_GRAPHS=ON"
echo "build line: cmake -G Ninja -S decode-probe -B /tmp/b -DLLAMA_SOURCE_DIR=<llama-cpp-python 0.3.36 vendor/llama.cpp> $CM" | tee $OUT/runs.log
cmake -G Ninja -S $C/decode-probe -B /tmp/b -DLLAMA_SOURCE_DIR=$PWD/$C/llama $CM > $OUT/configure.log 2>&1 || { tail -30 $OUT/configure.log; exit 1; }
grep "decode-probe: llama.cpp API" $OUT/configure.log
s=$(date +%s.%N); cmake --build /tmp/b --target decode-probe -j 16 > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
echo "build_s $(echo "$(date +%s.%N) - $s" | bc)" | tee -a $OUT/runs.log
run() { echo "== $*" | tee -a $OUT/runs.log; /usr/bin/time -f "wall %e s" $B "$@" 2>&1 | grep -E "decode-probe: [0-9]|SETROWS|wall" | tee -a $OUT/runs.log; }
for i in 1 2; do
  run --model $C/m16.gguf --check none
  run --model $C/m16.gguf --cpu-reference off
  run --model $C/m16.gguf
done
run --model $C/m32.gguf
run --model $C/m16.gguf --backend CPU
python3 $C/plant.py $C/llama/src/llama-context.cpp && cmake --build /tmp/b --target decode-probe -j 16 > $OUT/build2.log 2>&1 || tail -20 $OUT/build2.log
run --model $C/m16.gguf
