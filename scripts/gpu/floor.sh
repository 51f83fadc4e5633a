#!/usr/bin/env bash
# First launch and start-up against their floors (issue 42), for one build or two in turns,
# on a machine with the NVIDIA driver (no Rust, no LLVM, no nvcc):
#
#   cargo xtask gpu-suite target/gpu-suite                      # where the toolkit is built
#   scripts/gpu/floor.sh target/gpu-suite/suite.tar.xz          # on the GPU machine
#   scripts/gpu/floor.sh OLD/suite.tar.xz NEW/suite.tar.xz 21   # two builds, 21 rounds
#
# An archive needs only `bin/gpu-bench`, `bin/startup-1`, `bin/startup-1000` and `bin/deps/`
# (a suite's, or those alone). Each round runs, for each build in turn, in new processes:
# - the first launch of SAXPY and of SGEMM through the runtime and by hand (`gpu-bench
#   --first-launch ours|hand KERNEL`: an empty persistent cache, the driver's JIT cache off;
#   timed from a ready queue and uploaded buffers to the end of the first launch's wait);
# - `startup-1000` and `startup-1` on a warm persistent cache: exec to `main`, the first
#   discovery and the first launch (`fixtures/startup-1/src/main.rs`), added up.
# Prints, per build, the median of the rounds' ratios runtime / by hand (bound 1.2) and of the
# rounds' start-up differences (bound 0.5 ms), as `RATIO` lines, with each side's medians.
# With PROBE=1 it also runs each program once with `SYCL_PROBE=1`, for a build whose runtime
# has probes. Raw values in $OUT (else ./gpu-floor-out): rounds.txt.
set -euo pipefail
usage="usage: floor.sh A.tar.xz [B.tar.xz] [ROUNDS]"
a=${1:?$usage}
b=${2:-}
rounds=${3:-15}
out=${OUT:-gpu-floor-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sides=(a)
mkdir -p "$work/a"
tar -xJf "$a" -C "$work/a"
if [ -n "$b" ]; then
    sides+=(b)
    mkdir -p "$work/b"
    tar -xJf "$b" -C "$work/b"
fi
unset SYCL_DEVICE SYCL_TRACE SYCL_CACHE_DISABLE SYCL_PROBE
export CUDA_CACHE_DISABLE=1

# `first SIDE ours|hand KERNEL`: microseconds of a first launch, cold cache.
first() {
    local cache
    cache=$(mktemp -d)
    LD_LIBRARY_PATH=$work/$1/bin/deps SYCL_CACHE_DIR=$cache "$work/$1/bin/gpu-bench" \
        --first-launch "$2" "$3" | sed -n 's/^first_launch_us //p'
    rm -rf "$cache"
}

# `start SIDE PROGRAM`: exec to main, discovery and first launch, in microseconds, warm cache.
start() {
    LD_LIBRARY_PATH=$work/$1/bin/deps SYCL_CACHE_DIR=$work/$1/cache \
        STARTUP_SPAWNED_NS=${EPOCHREALTIME/./}000 "$work/$1/bin/$2" |
        awk '/^(exec_to_main_us|discover_us|first_launch_us) / { s += $2; printf "%s ", $2 }
             END { printf "%s\n", s }'
}

for side in "${sides[@]}"; do
    mkdir -p "$work/$side/cache"
    start "$side" startup-1 >/dev/null
    start "$side" startup-1000 >/dev/null
    if [ "${PROBE:-0}" = 1 ]; then
        for what in "ours saxpy" "hand saxpy" "ours sgemm" "hand sgemm"; do
            echo "== $side: gpu-bench --first-launch $what"
            # shellcheck disable=SC2086
            SYCL_PROBE=1 first "$side" $what 2>&1
        done
        for program in startup-1 startup-1000; do
            echo "== $side: $program"
            SYCL_PROBE=1 start "$side" "$program" 2>&1
        done
    fi | tee -a "$out/probes.txt"
done

for round in $(seq "$rounds"); do
    for side in "${sides[@]}"; do
        for kernel in saxpy sgemm; do
            echo "$side $round $kernel $(first "$side" ours $kernel) $(first "$side" hand $kernel)"
        done
        # Alternate which program starts first.
        if [ $((round % 2)) = 0 ]; then
            many=$(start "$side" startup-1000)
            one=$(start "$side" startup-1)
        else
            one=$(start "$side" startup-1)
            many=$(start "$side" startup-1000)
        fi
        echo "$side $round startup $many $one"
    done
done >"$out/rounds.txt"

awk '
function median(v, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function med(key, what,   n, i, v) {
    n = count[key]
    for (i = 1; i <= n; i++) v[i] = values[key, what, i]
    return median(v, n)
}
$3 != "startup" {
    key = $1 " " $3; n = ++count[key]
    values[key, "ours", n] = $4; values[key, "hand", n] = $5; values[key, "ratio", n] = $4 / $5
}
$3 == "startup" {
    key = $1 " startup"; n = ++count[key]
    # many: exec, discover, launch, sum; then one: the same.
    for (k = 1; k <= 4; k++) { values[key, "many" k, n] = $(3 + k); values[key, "one" k, n] = $(7 + k) }
    values[key, "diff", n] = ($7 - $11) / 1e3
}
END {
    split("a b", sides, " ")
    for (s = 1; s <= 2; s++) {
        side = sides[s]
        if (!((side " startup") in count)) continue
        for (k = 1; k <= 2; k++) {
            kernel = k == 1 ? "saxpy" : "sgemm"
            key = side " " kernel
            printf "%s: first launch, %s: ours %.3f ms, by hand %.3f ms (medians of %d)\n", side, kernel,
                med(key, "ours") / 1e3, med(key, "hand") / 1e3, count[key]
            printf "RATIO %.3f <= 1.2 | %s: GPU first launch %s, runtime / the same driver calls by hand | median of %d rounds'\'' ratios\n",
                med(key, "ratio"), side, kernel, count[key]
        }
        key = side " startup"
        printf "%s: start-up, 1,000 kernels / 1: exec to main %.1f / %.1f us, discovery %.1f / %.1f us, first launch %.1f / %.1f us (medians)\n",
            side, med(key, "many1"), med(key, "one1"), med(key, "many2"), med(key, "one2"), med(key, "many3"), med(key, "one3")
        printf "RATIO %.3f <= 0.5 | %s: start-up with 1,000 kernels - with 1, ms | median of %d rounds'\'' differences\n",
            med(key, "diff"), side, count[key]
    }
}' "$out/rounds.txt" | tee "$out/summary.txt"
