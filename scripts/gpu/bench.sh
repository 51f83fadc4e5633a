#!/usr/bin/env bash
# The GPU benchmark: kernels through the toolkit against the same kernels from nvcc, side by
# side in one process, on a machine with the NVIDIA driver and the CUDA toolkit (no Rust, no
# LLVM):
#
#   cargo xtask gpu-suite target/gpu-suite                    # where the toolkit is built
#   scripts/gpu/bench.sh target/gpu-suite/suite.tar.xz        # on the GPU machine
#
# nvcc compiles bench.cu (-O3 -arch=sm_90) there; `gpu-bench` checks every kernel on both sides
# against a CPU reference, then prints each comparison and its `RATIO` line; `gpu-bench
# --overheads` compares first launches (against the same driver calls by hand, warm cache
# against cold) and start-up with 1,000 kernels against 1, in new processes; `gpu-bench --gpus`
# runs the kernels on every GPU, then on all at once (skipped with one GPU); `gpu-bench
# --host-api` compares launch throughput, copies, overlap and profiling with the driver API
# (`gpu-bench --host-api bench.cubin throughput` runs one of those sections alone). Then the register
# and spill counts of both sides' kernels (`cuobjdump -res-usage`: nvcc's cubin, and our native
# objects, which `sycl-ld inspect --extract` writes out of the programs) and the SASS of both
# SGEMMs. Logs go to $OUT
# (else ./gpu-bench-out): bench.txt, resources.txt, sass-*.txt.
set -euo pipefail
archive=${1:?usage: bench.sh SUITE.tar.xz}
out=${OUT:-gpu-bench-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$archive" -C "$work"
arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
nvcc -O3 -arch="$arch" -cubin -Xptxas -v -o "$work/bench.cubin" "$work/bench.cu" 2>"$out/nvcc.txt"
export SYCL_CACHE_DIR=$work/cache
unset SYCL_DEVICE SYCL_TRACE SYCL_CACHE_DISABLE
"$work/bin/gpu-bench" "$work/bench.cubin" | tee "$out/bench.txt"
"$work/bin/gpu-bench" --overheads | tee -a "$out/bench.txt"
"$work/bin/gpu-bench" --gpus | tee -a "$out/bench.txt"
"$work/bin/gpu-bench" --host-api "$work/bench.cubin" | tee -a "$out/bench.txt"

{
    echo "== nvcc ($arch)"
    cuobjdump -res-usage "$work/bench.cubin"
    # Ours: the native objects the runtime loads, written out of the program and its library.
    for binary in "$work/bin/gpu-bench" "$work/bin/deps/libgpu_bench_lib.so"; do
        "$work/sycl-ld" inspect "$binary" --extract "$work/ours/$(basename "$binary")" >/dev/null 2>&1
    done
    for cubin in "$work"/ours/*/*.cubin; do
        echo "== ours: $(basename "$(dirname "$cubin")") $(basename "$cubin")"
        cuobjdump -res-usage "$cubin" 2>&1 || true
        if cuobjdump -sass -fun sgemm "$cubin" >"$work/sass.txt" 2>/dev/null && [ -s "$work/sass.txt" ]; then
            cp "$work/sass.txt" "$out/sass-ours-sgemm.txt"
        fi
    done
} >"$out/resources.txt" 2>&1
cuobjdump -sass -fun sgemm "$work/bench.cubin" >"$out/sass-nvcc-sgemm.txt" 2>&1 || true
grep -E "Function|REG|spill" "$out/resources.txt" | head -60
