#!/usr/bin/env bash
# Kernel graphs on an NVIDIA GPU (issue 40), on a machine with the NVIDIA driver (no Rust, no
# LLVM, no nvcc needed):
#
#   cargo xtask gpu-suite target/gpu-suite                    # where the toolkit is built
#   scripts/gpu/graphs.sh target/gpu-suite/suite.tar.xz       # on the GPU machine
#
# `gpu-bench --graphs` (fixtures/gpu-bench/src/graphs.rs) runs 1,000 one-block launches
# alternating a kernel of gpu-bench's own binary (`touch`) and one of libgpu_bench_lib.so's
# (`lib_touch`), then one wait: eager through the runtime, as one replay of the same launches
# recorded in a graph (`Queue::record`, `Graph::run`), and as a bare CUDA graph built by hand
# with the driver API from the same kernels (cuGraphAddKernelNode, cuGraphInstantiateWithFlags,
# cuGraphLaunch, cuStreamSynchronize); rounds alternate which goes first. It checks the eager
# and the replayed results equal bit for bit (and every side against the host's value), then
# prints each side's time and the `RATIO` lines `cargo xtask bench` reads: replay / eager
# <= 0.3334, bare graph / replay time >= 0.95, recording / eager <= 2.0. The runtime's trace of
# one more run (`SYCL_TRACE=1`, its `graph-` lines only) says how the graph was built.
# Output goes to $OUT (else ./gpu-graphs-out): graphs.txt, graphs.trace.
set -euo pipefail
archive=${1:?usage: graphs.sh SUITE.tar.xz}
out=${OUT:-gpu-graphs-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$archive" -C "$work"
export SYCL_CACHE_DIR=$work/cache
unset SYCL_DEVICE SYCL_TRACE SYCL_CACHE_DISABLE
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee "$out/graphs.txt"
"$work/bin/gpu-bench" --graphs | tee -a "$out/graphs.txt"
SYCL_TRACE=1 "$work/bin/gpu-bench" --graphs 2>&1 >/dev/null | { grep 'sycl: graph-' || true; } | sort | uniq -c >"$out/graphs.trace"
cat "$out/graphs.trace"
