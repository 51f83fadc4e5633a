#!/usr/bin/env bash
# Every GPU of one host (issue 41), on a machine with the NVIDIA driver and NCCL, without Rust,
# LLVM or nvcc:
#
#   cargo xtask gpu-suite target/gpu-suite                     # where the toolkit is built
#   scripts/gpu/multi-gpu.sh target/gpu-suite/suite.tar.xz     # on the GPU machine
#
# Steps, each under a time limit (together well within ten minutes), each run whatever the one
# before gave:
# - the GPUs: `nvidia-smi -L`, their driver and persistence mode, `nvidia-smi topo -m`;
# - `gpu-bench --multi` (fixtures/gpu-bench/src/multi.rs): a 1 GiB copy between two GPUs
#   through `copy_from_async` against a bare `cuMemcpyPeerAsync` (both ways), SGEMM 4096³ split
#   across two GPUs with copies in and back against one GPU (and, without a bound, fed from the
#   first GPU by copies between the two), a queue and a first launch on every GPU at once
#   against one (new processes, cache empty); each a `RATIO` line with its bound, every result
#   checked; it skips, saying so, with fewer than two GPUs;
# - `nccl-app` (fixtures/nccl-app): the runtime's buffers all-reduced by NCCL through cudarc
#   across every GPU, between toolkit kernels on each GPU's one stream; a line per GPU, `ok`;
# - `nccl-app --bench`: that all-reduce (256 MiB per GPU) against the same on cudarc's own
#   slices, a `RATIO` line;
# - `memory-app` (fixtures/memory-app) across the GPUs and PoCL: a ring of kernels and copies
#   around both GPUs, views, events of another device, ordering by buffers alone across
#   devices, copies staged between a GPU and PoCL (each line checked by the program: "every
#   value right", "true").
# Then every `RATIO` line again, together.
#
# NCCL: cudarc's loader never asks for libnccl.so.2 (scripts/gpu/nccl.sh says why): this script
# links NCCL as libnccl.so in a directory of its own and puts that on LD_LIBRARY_PATH.
#
# Everything goes to $OUT (else ./gpu-multi-out)/multi.txt, and to the terminal. The exit
# status is 0 when every step exited 0 (a missed bound is read from the `RATIO` lines, as
# `cargo xtask bench` reads them, not from the exit status).
set -u
archive=${1:?usage: multi-gpu.sh SUITE.tar.xz}
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-gpu-multi-out}
mkdir -p "$out"
log=$out/multi.txt
: >"$log"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$archive" -C "$work" || exit 1
bin=$work/bin
for program in gpu-bench nccl-app memory-app; do
    if [ ! -x "$bin/$program" ]; then
        echo "multi-gpu.sh: $archive has no bin/$program: pack it (xtask/src/gpu_suite.rs, CARRIED)" | tee -a "$log" >&2
        exit 1
    fi
done
export SYCL_CACHE_DIR=$work/cache
unset SYCL_DEVICE SYCL_TRACE SYCL_CACHE_DISABLE
# shellcheck source=nccl.sh
. "$here/nccl.sh"
nccl_link "$work/nccl"
export LD_LIBRARY_PATH=$work/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NCCL says why when it fails (its warnings go to the standard output), and nothing otherwise.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

failed=0
# `step LIMIT TITLE COMMAND...`: the command under `timeout LIMIT` (seconds), its output and
# errors shown and logged; a failure or a time-out is said, counted, and the next step runs.
step() {
    local limit=$1 title=$2 status
    shift 2
    echo "== $title" | tee -a "$log"
    timeout "$limit" "$@" 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
    if [ "$status" = 124 ]; then
        echo "== $title: stopped after $limit s" | tee -a "$log"
    elif [ "$status" != 0 ]; then
        echo "== $title: exit $status" | tee -a "$log"
    fi
    [ "$status" = 0 ] || failed=$((failed + 1))
}

echo "== $(date -u +%FT%TZ) on $(hostname); NCCL: ${nccl:-none found}" | tee -a "$log"
step 20 "nvidia-smi -L" nvidia-smi -L
step 20 "driver, persistence" nvidia-smi --query-gpu=index,name,driver_version,persistence_mode,pci.bus_id --format=csv,noheader
step 20 "nvidia-smi topo -m" nvidia-smi topo -m
step 300 "gpu-bench --multi" "$bin/gpu-bench" --multi
step 60 "nccl-app" "$bin/nccl-app"
step 120 "nccl-app --bench" "$bin/nccl-app" --bench
if nvidia-smi -L | sed -n 2p | grep -q GPU; then
    # PoCL runs no kernel here (it needs llvm-spirv-15 at run time, which the GPU machine
    # lacks): it takes part in the scenarios whose kernels run on the GPUs.
    for args in "ring cuda:0 cuda:1" "views cuda:0 cuda:1" "views cuda:1 pocl" \
        "events cuda:0 cuda:1" "events cuda:1 cuda:0" "ordered cuda:0 cuda:1" \
        "staged cuda:0 cuda:1 1024" "staged cuda:0 pocl 256" "staged pocl cuda:1 256" \
        "pointers cuda:0 cuda:1"; do
        # shellcheck disable=SC2086 # the scenario's words
        step 60 "memory-app $args" "$bin/memory-app" $args
    done
fi
echo "== RATIO lines" | tee -a "$log"
ratios=$(grep '^RATIO' "$log")
echo "$ratios" | tee -a "$log"
echo "== $failed step(s) failed" | tee -a "$log"
[ "$failed" = 0 ]
