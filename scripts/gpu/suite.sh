#!/usr/bin/env bash
# Runs the fixtures' end-to-end programs on an NVIDIA GPU through the runtime's CUDA backend,
# on a machine with the NVIDIA driver but without Rust or LLVM, and compares each output with
# the one both CPU devices gave where the programs were built:
#
#   cargo xtask gpu-suite target/gpu-suite                  # where the toolkit is built
#   scripts/gpu/suite.sh target/gpu-suite/suite.tar.xz [CASE...]   # on the GPU machine
#
# Every case runs for each build the archive carries: `bin` (PTX and native sm_90 objects:
# the runtime links the native ones), `bin-ptx` (PTX only: the driver's JIT compiles it) and
# `bin-native` (native objects only: no PTX to fall back to; a case it must refuse has
# `expected/NAME.bin-native.refusal`, the words its output must hold). Each runs twice, in one
# persistent cache per build: cold (each program linked by the CUDA driver's linker) and warm
# (the linked cubins read back from the cache). Each run prints `PASS name (build, cold|warm)`
# or `FAIL name (…)` with a diff; the last line is `N passed, M failed`. Outputs are compared with `BIN` for the programs' directory, `DEVICE` for the
# device's name and `image #` for image numbers (a PTX image's number is not its SPIR-V
# form's). The demo also runs once with SYCL_TRACE=1, kept in OUT/app.trace. SYCL_DEVICE
# (default `cuda:0`, the first GPU) picks the device. Logs go to $OUT (else ./gpu-suite-out): summary.txt, and
# each failed run's output and stderr. The exit status is 0 when everything passed.
set -u
archive=${1:?usage: suite.sh SUITE.tar.xz [CASE...]}
shift
out=${OUT:-gpu-suite-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$archive" -C "$work" || exit 1
mkdir -p "$work/logs"
export SYCL_DEVICE=${SYCL_DEVICE:-cuda:0}
unset SYCL_TRACE SYCL_CACHE_DISABLE SYCL_STRICT_EXPORTS

{
    echo "== $(date -u +%FT%TZ) on $(hostname), SYCL_DEVICE=$SYCL_DEVICE"
    nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1 || true
} | tee "$out/summary.txt"

# One run of a case: its stdout, `exit: N` (or `exit: signal`) when it failed, `BIN` for $bin
# and `DEVICE` for the device's name (from the trace's `sycl: device PLATFORM / NAME` lines).
run_case() {
    local name=$1 argv=$2 log=$3
    local -a env args
    read -r -a args <<<"${argv//@BIN/$bin}"
    while [[ ${args[0]} == *=* ]]; do
        env+=("${args[0]}")
        args=("${args[@]:1}")
    done
    SYCL_TRACE=1 timeout 300 env "${env[@]}" "$bin/${args[0]}" "${args[@]:1}" >"$log.stdout" 2>"$log.stderr"
    local status=$?
    cp "$log.stdout" "$log.out"
    if [ $status -gt 128 ] && [ $status -ne 124 ]; then
        echo "exit: signal" >>"$log.out"
    elif [ $status -ne 0 ]; then
        echo "exit: $status" >>"$log.out"
    fi
    sed -i -E "s|$bin|BIN|g; s/image [0-9]+/image #/g" "$log.out"
    local device
    sed -n 's|^sycl: device .* / ||p' "$log.stderr" | sort -u >"$log.devices"
    while IFS= read -r device; do
        [ -n "$device" ] && sed -i "s|$(printf '%s' "$device" | sed 's/[][\\/.*^$|]/\\&/g')|DEVICE|g" "$log.out"
    done <"$log.devices"
}

passed=0
failed=0
for build in bin bin-ptx bin-native; do
    [ -d "$work/$build" ] || continue
    bin=$work/$build
    # No LD_LIBRARY_PATH: each program finds its libraries in deps/ by its run path ($ORIGIN).
    export SYCL_CACHE_DIR=$work/cache-$build
    while IFS=$'\t' read -r name argv; do
        if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
            continue
        fi
        for run in cold warm; do
            log=$work/logs/$name.$build.$run
            run_case "$name" "$argv" "$log"
            refusal=$work/expected/$name.$build.refusal
            if [ -f "$refusal" ]; then
                # This build must refuse the case, saying why (gpu_suite.rs, NATIVE_REFUSES).
                if grep -q '^exit: ' "$log.out" && grep -qF "$(cat "$refusal")" "$log.out" "$log.stderr"; then
                    echo "PASS $name ($build, $run: refused, as it must)" | tee -a "$out/summary.txt"
                    passed=$((passed + 1))
                else
                    echo "FAIL $name ($build, $run: not refused with \"$(cat "$refusal")\")" | tee -a "$out/summary.txt"
                    head -5 "$log.out" "$log.stderr" | sed 's/^/    /' | tee -a "$out/summary.txt"
                    cp "$log.out" "$log.stderr" "$out/"
                    failed=$((failed + 1))
                fi
                continue
            fi
            if cmp -s "$log.out" "$work/expected/$name.txt"; then
                echo "PASS $name ($build, $run)" | tee -a "$out/summary.txt"
                passed=$((passed + 1))
            else
                echo "FAIL $name ($build, $run)" | tee -a "$out/summary.txt"
                diff "$work/expected/$name.txt" "$log.out" | head -20 | sed 's/^/    /' | tee -a "$out/summary.txt"
                head -5 "$log.stderr" | sed 's/^/    stderr: /' | tee -a "$out/summary.txt"
                cp "$log.out" "$log.stderr" "$out/"
                failed=$((failed + 1))
            fi
        done
    done <"$work/cases.txt"
done
bin=$work/bin
export SYCL_CACHE_DIR=$work/cache-bin

SYCL_TRACE=1 SYCL_CACHE_DISABLE=1 "$bin/app" >"$out/app.trace" 2>&1
echo "== the demo with SYCL_TRACE=1" | tee -a "$out/summary.txt"
tee -a "$out/summary.txt" <"$out/app.trace"

# Every device the runtime sees (an unmatched selector lists them). With several GPUs, the
# demo's kernel on each of them from one process, each result checked (counted); then the GPU
# and each OpenCL device from one process (told, not counted).
echo "== devices" | tee -a "$out/summary.txt"
devices=$(SYCL_DEVICE=none "$bin/app" 2>&1)
echo "$devices" | tee -a "$out/summary.txt"
gpus=$(echo "$devices" | awk 'NR > 1 && $1 ~ /^cuda:[0-9]+$/ { print $1 }')
if [ "$(echo "$gpus" | wc -w)" -gt 1 ]; then
    # shellcheck disable=SC2086 # one selector a word
    got=$("$bin/two_devices" $gpus 2>&1)
    want=$(for gpu in $gpus; do echo "$gpu: [0, 2, 4, 6, 8, 10, 12, 14]"; done)
    if [ "$got" = "$want" ]; then
        passed=$((passed + 1))
        echo "PASS two_devices $(echo $gpus) (every GPU from one process)" | tee -a "$out/summary.txt"
    else
        failed=$((failed + 1))
        { echo "FAIL two_devices $(echo $gpus)"; diff <(echo "$want") <(echo "$got"); } | tee -a "$out/summary.txt"
    fi
fi
# NCCL through cudarc on the runtime's buffers across every GPU (fixtures/nccl-app; one GPU
# is a world of one): counted, passed when it checked a result per GPU and ended `ok`; told,
# not counted, when it skipped (no NCCL here). NCCL linked where cudarc looks (nccl.sh).
if [ -x "$bin/nccl-app" ]; then
    # shellcheck source=nccl.sh
    . "$(dirname "$0")/nccl.sh"
    nccl_link "$work/nccl"
    count=$(echo "$devices" | awk 'NR > 1 && $1 ~ /^cuda(:[0-9]+)?$/' | wc -l)
    got=$(LD_LIBRARY_PATH=$work/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 300 "$bin/nccl-app" 2>&1)
    checked=$(echo "$got" | grep -c ' values: the sum over every GPU checked$')
    if echo "$got" | grep -q ': skipped$'; then
        echo "== nccl-app (not counted): $(echo "$got" | tail -1)" | tee -a "$out/summary.txt"
    elif [ "$(echo "$got" | tail -1)" = ok ] && [ "$checked" = "$count" ]; then
        passed=$((passed + 1))
        echo "PASS nccl-app ($count GPU(s), NCCL ${nccl:-?})" | tee -a "$out/summary.txt"
    else
        failed=$((failed + 1))
        { echo "FAIL nccl-app ($count GPU(s), $checked checked)"; echo "$got" | tail -20 | sed 's/^/    /'; } | tee -a "$out/summary.txt"
    fi
fi
for other in $(echo "$devices" | awk 'NR > 1 && $1 != "cuda" && $1 !~ /^cuda:/ { print $1 }'); do
    echo "== two_devices $SYCL_DEVICE $other" | tee -a "$out/summary.txt"
    "$bin/two_devices" "$SYCL_DEVICE" "$other" 2>&1 | tail -5 | tee -a "$out/summary.txt"
done

echo "$passed passed, $failed failed" | tee -a "$out/summary.txt"
[ "$failed" = 0 ]
