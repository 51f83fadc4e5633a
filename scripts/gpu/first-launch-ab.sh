#!/usr/bin/env bash
# First launches of SGEMM through two builds of the toolkit, interleaved on one GPU machine:
# to tell a change's cost from the machine's noise (the JIT's time is bimodal on some hosts:
# medians of 90 or 130 ms from run to run, minima steady), compare minima and medians of both
# builds measured in the same minutes.
#
#   cargo xtask gpu-suite target/gpu-suite          # each build, where the toolkit is built
#   scripts/gpu/first-launch-ab.sh A.tar.xz B.tar.xz [ROUNDS]    # on the GPU machine
#
# Each round runs, in new processes with an empty persistent cache and the driver's JIT cache
# off: A through the runtime, A by hand (`cuLink` calls), B through the runtime, B by hand.
# Prints each side's median and minimum, and each build's median ratio runtime / by hand.
set -euo pipefail
a=${1:?usage: first-launch-ab.sh A.tar.xz B.tar.xz [ROUNDS]}
b=${2:?usage: first-launch-ab.sh A.tar.xz B.tar.xz [ROUNDS]}
rounds=${3:-25}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/a" "$work/b"
tar -xJf "$a" -C "$work/a"
tar -xJf "$b" -C "$work/b"
unset SYCL_DEVICE SYCL_TRACE SYCL_CACHE_DISABLE
export CUDA_CACHE_DISABLE=1
one() {
    local cache
    cache=$(mktemp -d)
    LD_LIBRARY_PATH=$work/$1/bin/deps SYCL_CACHE_DIR=$cache "$work/$1/bin/gpu-bench" \
        --first-launch "$2" sgemm | sed -n 's/^first_launch_us //p'
    rm -rf "$cache"
}
for _ in $(seq "$rounds"); do
    echo "$(one a ours) $(one a hand) $(one b ours) $(one b hand)"
done >"$work/rounds.txt"
awk '
function median(v, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{ n++; for (k = 1; k <= 4; k++) { x[k, n] = $k; if (n == 1 || $k < lo[k]) lo[k] = $k }
  ra[n] = $1 / $2; rb[n] = $3 / $4 }
END {
    split("A runtime,A by hand,B runtime,B by hand", name, ",")
    for (k = 1; k <= 4; k++) {
        for (i = 1; i <= n; i++) col[i] = x[k, i]
        printf "%-12s median %.1f ms, min %.1f ms\n", name[k], median(col, n) / 1e3, lo[k] / 1e3
    }
    printf "median ratio runtime / by hand: A %.3f, B %.3f (%d rounds)\n", median(ra, n), median(rb, n), n
}' "$work/rounds.txt"
