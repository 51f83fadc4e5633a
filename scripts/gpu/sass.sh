#!/usr/bin/env bash
# Native objects against the driver's JIT, instruction by instruction: for each kernel of the
# GPU benchmark, the SASS of the native object `sycl-ld` made with `ptxas` (the `bin` build's
# images, written out by `sycl-ld inspect --extract`) against the SASS the driver compiled
# from the PTX-only build's images (the cubins the runtime cached after `gpu-bench --smoke`).
# Identical SASS runs in identical time: where a kernel prints IDENTICAL, native / PTX kernel
# time is 1 by construction, whatever a timing's noise says.
#
#   cargo xtask gpu-suite target/gpu-suite                    # where the toolkit is built
#   scripts/gpu/sass.sh target/gpu-suite/suite.tar.xz         # on the GPU machine
#
# Prints one line per kernel; both sides' SASS (addresses and encodings removed) go to $OUT
# (else ./gpu-sass-out) as KERNEL.native.sass and KERNEL.jit.sass.
set -euo pipefail
archive=${1:?usage: sass.sh SUITE.tar.xz}
out=${OUT:-gpu-sass-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$archive" -C "$work"
unset SYCL_TRACE SYCL_CACHE_DISABLE
SYCL_DEVICE=cuda:0 SYCL_CACHE_DIR=$work/cache "$work/bin-ptx/gpu-bench" --smoke >"$out/smoke.txt" 2>&1
for binary in "$work/bin/gpu-bench" "$work"/bin/deps/libgpu_bench_lib.so; do
    "$work/sycl-ld" inspect "$binary" --extract "$work/native/$(basename "$binary")" >/dev/null 2>&1
done
for entry in "$work"/cache/*; do
    # A cache entry: a 116-byte header, then the linked cubin.
    tail -c +117 "$entry" >"$work/jit-$(basename "$entry").cubin"
done
# KERNEL's SASS in a cubin, one instruction a line, without addresses or encodings.
sass() {
    cuobjdump -sass -fun "$1" "$2" 2>/dev/null |
        grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's#/\*[0-9a-f]+\*/##g; s#;.*##; s/[[:space:]]+/ /g' || true
}
# The first of the files that holds KERNEL as a whole function (not a relocatable object
# whose calls are still open): its SASS into $3.
first_with() {
    local kernel=$1 into=$2
    shift 2
    for cubin in "$@"; do
        sass "$kernel" "$cubin" >"$into"
        if [ -s "$into" ]; then return 0; fi
    done
    return 1
}
kernels=$(for cubin in "$work"/native/gpu-bench/*.cubin; do cuobjdump -elf "$cubin"; done 2>/dev/null |
    grep -oE '\.text\.[A-Za-z_][A-Za-z0-9_]*' | sed 's/^\.text\.//' | sort -u)
if [ -z "$kernels" ]; then
    echo "sass.sh: no native objects in $work/bin/gpu-bench (a build without nvidia_gpu_sm_XX?)" >&2
    ls -R "$work/native" >&2
    exit 1
fi
for kernel in $kernels; do
    native=$out/$kernel.native.sass jit=$out/$kernel.jit.sass
    # Prefer whole programs (the twins, the images without imports): what the runtime loads.
    if ! first_with "$kernel" "$native" $(ls "$work"/native/gpu-bench/*inlined*.cubin "$work"/native/gpu-bench/*.cubin 2>/dev/null); then
        continue
    fi
    if ! first_with "$kernel" "$jit" "$work"/jit-*.cubin; then
        echo "$kernel: no JIT cubin cached (not launched by --smoke)"
        continue
    fi
    n=$(wc -l <"$native") j=$(wc -l <"$jit")
    if cmp -s "$native" "$jit"; then
        echo "$kernel: SASS IDENTICAL ($n instructions)"
    else
        echo "$kernel: SASS differs: native $n instructions, JIT $j ($(diff "$native" "$jit" | grep -c '^[<>]') lines differ)"
    fi
done
