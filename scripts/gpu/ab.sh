#!/usr/bin/env bash
# Kernel times of two builds side by side on one GPU: the GPU benchmark's kernels (each
# against nvcc's, in one process) for build A, then B, then A and B again, so that the ratios
# each prints can be compared run for run. A build is an archive of `cargo xtask gpu-suite`
# and, after a colon, which of its builds: `bin` (PTX and native objects: the runtime links
# the native ones; the default) or `bin-ptx` (PTX only).
#
#   cargo xtask gpu-suite DIR
#   scripts/gpu/ab.sh DIR/suite.tar.xz DIR/suite.tar.xz:bin-ptx    # native against PTX
#   scripts/gpu/ab.sh OLD/suite.tar.xz NEW/suite.tar.xz            # two versions' builds
#   ARGS="--host-api @CUBIN throughput" ROUNDS=3 scripts/gpu/ab.sh OLD/… NEW/…  # launch rate
#
# ARGS are gpu-bench's arguments (`@CUBIN` for nvcc's cubin; default: the kernels), ROUNDS
# how many times each side runs (default 2).
# Prints each run's RATIO lines prefixed with its side and round; logs in $OUT (else
# ./gpu-ab-out).
set -euo pipefail
usage="usage: ab.sh A.tar.xz[:BUILD] B.tar.xz[:BUILD]"
a=${1:?$usage}
b=${2:?$usage}
out=${OUT:-gpu-ab-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
declare -A build
for side in a b; do
    spec=$([ $side = a ] && echo "$a" || echo "$b")
    archive=${spec%%:*}
    build[$side]=$([[ $spec == *:* ]] && echo "${spec#*:}" || echo bin)
    mkdir -p "$work/$side"
    tar -xJf "$archive" -C "$work/$side"
done
arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
nvcc -O3 -arch="$arch" -cubin -o "$work/bench.cubin" "$work/a/bench.cu"
unset SYCL_DEVICE SYCL_TRACE SYCL_CACHE_DISABLE
read -r -a args <<<"${ARGS:-@CUBIN}"
args=("${args[@]//@CUBIN/$work/bench.cubin}")
for round in $(seq "${ROUNDS:-2}"); do
    for side in a b; do
        bin=$work/$side/${build[$side]}
        SYCL_CACHE_DIR=$work/$side/cache \
            "$bin/gpu-bench" "${args[@]}" >"$out/$side-$round.txt" 2>&1
        grep -E "RATIO|per launch" "$out/$side-$round.txt" | sed "s/^/$side$round /"
    done
done
