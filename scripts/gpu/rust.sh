#!/usr/bin/env bash
# Device code in Rust on an NVIDIA GPU: fixtures/rs-app (OpenCL C kernels calling librs_lib.so's
# Rust functions, Rust kernels calling libcl_lib.so's OpenCL C ones) from the GPU suite's
# archive, on a machine with the NVIDIA driver but without Rust:
#
#   cargo xtask gpu-suite target/gpu-suite                          # where the toolkit is built
#   scripts/gpu/rust.sh target/gpu-suite/suite.tar.xz                # on the GPU machine
#
# For each build the archive carries (bin: PTX and native objects, bin-ptx, bin-native): the
# checks against the host, librs_alt.so preloaded (its rs_poly for kernels and host alike; the
# native-only build must refuse it, since native objects' own calls are bound), and the two
# panics (a Rust kernel's bounds check, and a Rust library function's called from OpenCL C),
# which must end the kernel with a fault that the program reports, never a result. Then, on
# `bin`, the Rust kernels' time against the same code in OpenCL C (`RATIO` lines, bound 1.02).
# Prints `PASS`/`FAIL` lines and `N passed, M failed`; logs in $OUT (else ./rust-gpu-out).
set -u
archive=${1:?usage: rust.sh SUITE.tar.xz}
out=${OUT:-rust-gpu-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$archive" -C "$work" || exit 1
export SYCL_DEVICE=${SYCL_DEVICE:-cuda:0}
export SYCL_CACHE_DIR="$work/cache"
unset SYCL_TRACE SYCL_STRICT_EXPORTS
passed=0 failed=0
verdict() { # NAME OK(0|1) LOG
    if [ "$2" = 0 ]; then echo "PASS $1"; passed=$((passed + 1));
    else echo "FAIL $1"; sed 's/^/    /' "$3" | tail -20; failed=$((failed + 1)); fi
}
for build in bin bin-ptx bin-native; do
    dir="$work/$build"
    [ -x "$dir/rs-app" ] || continue
    log="$out/$build-checks.log"
    timeout 300 "$dir/rs-app" >"$log" 2>&1
    rc=$?
    ! grep -q MISMATCH "$log" && [ $rc = 0 ]; verdict "rs-app checks ($build)" $? "$log"
    log="$out/$build-preload.log"
    LD_PRELOAD="$dir/deps/librs_alt.so" timeout 300 "$dir/rs-app" >"$log" 2>&1
    rc=$?
    if [ "$build" = bin-native ]; then
        [ $rc != 0 ] && grep -q "own calls cannot be redirected" "$log"
    else
        [ $rc = 0 ] && grep -q "host rs_poly(1.5) = -4.75" "$log" && ! grep -q MISMATCH "$log"
    fi
    verdict "rs-app with librs_alt.so preloaded ($build)" $? "$log"
    for p in panic-rust panic-rust-lib; do
        log="$out/$build-$p.log"
        timeout 300 "$dir/rs-app" $p >"$log" 2>&1
        rc=$?
        # A fault: not a result, not a hang (timeout's 124), an error the program reports.
        [ $rc != 0 ] && [ $rc != 124 ] && ! grep -q "no panic" "$log" && grep -q "^error:" "$log"
        verdict "rs-app $p: the kernel faults ($build)" $? "$log"
    done
done
echo "== the Rust kernels against the same code in OpenCL C (bin)"
timeout 600 "$work/bin/rs-app" bench 15 2>&1 | tee "$out/bench.log"
echo "$passed passed, $failed failed"
[ $failed = 0 ]
