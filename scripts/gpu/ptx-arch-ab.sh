#!/usr/bin/env bash
# Kernel times of two builds' PTX side by side on one GPU: the GPU benchmark's kernels (each
# against nvcc's, in one process) for archive A, then B, then A and B again, so that the
# ratios each prints can be compared run for run (issue 29's bound: the baseline
# architecture's PTX against sm_90's, kernel time <= 1.01).
#
#   cargo xtask gpu-suite DIR_A   # one build (say, with sm_90 PTX)
#   cargo xtask gpu-suite DIR_B   # the other (sm_70)
#   scripts/gpu/ptx-arch-ab.sh DIR_A/suite.tar.xz DIR_B/suite.tar.xz   # on the GPU machine
#
# Prints each run's RATIO lines prefixed with its build; logs in $OUT (else ./gpu-ab-out).
set -euo pipefail
a=${1:?usage: ptx-arch-ab.sh A.tar.xz B.tar.xz}
b=${2:?usage: ptx-arch-ab.sh A.tar.xz B.tar.xz}
out=${OUT:-gpu-ab-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for side in a b; do
    mkdir -p "$work/$side"
    tar -xJf "$( [ $side = a ] && echo "$a" || echo "$b")" -C "$work/$side"
done
arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
nvcc -O3 -arch="$arch" -cubin -o "$work/bench.cubin" "$work/a/bench.cu"
unset SYCL_DEVICE SYCL_TRACE SYCL_CACHE_DISABLE
for round in 1 2; do
    for side in a b; do
        LD_LIBRARY_PATH=$work/$side/bin/deps SYCL_CACHE_DIR=$work/$side/cache \
            "$work/$side/bin/gpu-bench" "$work/bench.cubin" >"$out/$side-$round.txt" 2>&1
        grep RATIO "$out/$side-$round.txt" | sed "s/^/$side$round /"
    done
done
