#!/usr/bin/env bash
# The CUDA driver's own cost of opening every GPU at once against one (scripts/gpu/open_probe.c,
# a new process per case, 11 alternating rounds): the ground for `gpu-bench --multi`'s
# "queue + first launch on N GPUs at once / on one". Needs nvcc on the GPU machine.
#
#   scripts/gpu/open-probe.sh        # output in $OUT (else ./gpu-open-out)/open.txt
set -u
out=${OUT:-gpu-open-out}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gpus=$(nvidia-smi -L | grep -c '^GPU')
{
    nvcc -O2 -o "$work/open_probe" "$here/open_probe.c" -lcuda -lpthread || exit 1
    for round in $(seq 11); do
        "$work/open_probe" "$gpus"
        "$work/open_probe" 1
    done
} 2>&1 | tee "$out/open.txt"
