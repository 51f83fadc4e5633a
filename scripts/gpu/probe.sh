#!/usr/bin/env bash
# Where a CUDA launch's host time goes, on a machine with the NVIDIA driver and the CUDA
# toolkit (no Rust, no LLVM):
#
#   cargo xtask gpu-suite target/gpu-suite                    # where the toolkit is built
#   scripts/gpu/probe.sh target/gpu-suite/suite.tar.xz        # on the GPU machine
#
# nvcc compiles bench.cu there; `gpu-bench --launch-probe` then launches one 1x1 kernel in
# batches of 1,000 and 100,000 through the runtime and through bare `cuLaunchKernel` loops
# (nvcc's kernel on its own stream and on the runtime queue's, our PTX linked by hand, the
# runtime on a queue adopted from nvcc's stream, loops that ask `cuCtxGetCurrent`, make the
# runtime's look for loaded libraries, or take and give back two reference counts (what a
# launch's event costs in atomic operations) before each launch), rounds interleaved, and prints
# each one's time per launch (see fixtures/gpu-bench/src/host_api.rs). Run twice: the hosts'
# own speed moves 10 % between runs; compare within one run. Output goes to $OUT (else
# ./gpu-probe-out): probe.txt.
#
# For a profile of one submitter, carry perf and its libraries and run
# `PROBE_ONLY=0 perf record -F 20000 bin/gpu-bench --launch-probe bench.cubin`.
set -euo pipefail
archive=${1:?usage: probe.sh SUITE.tar.xz}
out=${OUT:-gpu-probe-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$archive" -C "$work"
arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
nvcc -O3 -arch="$arch" -cubin -o "$work/bench.cubin" "$work/bench.cu"
export SYCL_CACHE_DIR=$work/cache
unset SYCL_DEVICE SYCL_TRACE SYCL_CACHE_DISABLE
for run in 1 2; do
    echo "== run $run"
    "$work/bin/gpu-bench" --launch-probe "$work/bench.cubin"
done | tee "$out/probe.txt"
