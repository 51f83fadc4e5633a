#!/usr/bin/env bash
# The cudarc interop check on an NVIDIA GPU, on a machine with the NVIDIA driver and the CUDA
# toolkit (nvcc, cuBLAS), without Rust or LLVM:
#
#   cargo xtask gpu-suite target/gpu-suite                   # where the toolkit is built
#   scripts/gpu/interop.sh target/gpu-suite/suite.tar.xz     # on the GPU machine
#
# The archive's `bin/interop-app` (fixtures/interop-app, built with the PTX of its images and
# of libhelpers.so's) prints the CUDA C of its nvcc side (`interop-app cuda-source`), which
# nvcc compiles here (-O3 -cubin for the GPU's architecture); `interop-app cudarc CUBIN` then
# runs, on the first GPU: cudarc uploads, a toolkit kernel calling libhelpers.so's
# LibDeviceFunc runs on cudarc's stream with cudarc's slices as arguments, cuBLAS SGEMM
# multiplies its result, cudarc downloads; the same with nvcc's kernel through cudarc alone;
# both checked on the host; the other conversions once each; then both pipelines timed
# (median of rounds) and a `RATIO x <= 1.02 | ...` line, as gpu-bench prints them. Then the
# guide's cudarc example (`bin/cudarc`, fixtures/guide/examples/cudarc.rs): C[0] = 128 wanted.
#
# cuBLAS: the runtime's cudarc is built for CUDA 12.8 (`cuda-12080`, the one version feature
# both must share), so cudarc's loader asks for libcublas.so, libcublas.so.12, .11, … but
# never libcublas.so.13 (CUDA 13). The unversioned name is the toolkit's development link
# (CUDA_HOME/lib64/libcublas.so), which ldconfig does not list: this script finds cuBLAS
# next to nvcc (else CUDA_HOME, /usr/local/cuda, ldconfig), links it as libcublas.so in a
# directory of its own, and puts that and cuBLAS's directory (for libcublasLt) on
# LD_LIBRARY_PATH. The calls cudarc makes (cublasCreate_v2, cublasSetStream_v2,
# cublasSgemm_v2) are the same in cuBLAS 13.
#
# Output goes to $OUT (else ./gpu-interop-out): interop.txt, nvcc.txt. The exit status is
# the program's (non-zero when a result is wrong: a wrong line says so, and the RATIO line's
# bound is for `cargo xtask bench`-style reading, not the exit status).
set -euo pipefail
archive=${1:?usage: interop.sh SUITE.tar.xz}
out=${OUT:-gpu-interop-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$archive" -C "$work"
if [ ! -x "$work/bin/interop-app" ]; then
    echo "interop.sh: $archive has no bin/interop-app: pack it (xtask/src/gpu_suite.rs, CARRIED)" >&2
    exit 1
fi

export LD_LIBRARY_PATH=$work/bin/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
"$work/bin/interop-app" cuda-source >"$work/interop.cu"
nvcc -O3 -arch="$arch" -cubin -o "$work/interop.cubin" "$work/interop.cu" 2>"$out/nvcc.txt"

cublas=
nvcc_dir=$(dirname "$(command -v nvcc)")
for dir in "$nvcc_dir/../lib64" "$nvcc_dir/../targets/x86_64-linux/lib" ${CUDA_HOME:+"$CUDA_HOME/lib64"} /usr/local/cuda/lib64; do
    for name in libcublas.so.13 libcublas.so.12 libcublas.so; do
        if [ -e "$dir/$name" ]; then
            cublas=$(readlink -f "$dir/$name")
            break 2
        fi
    done
done
if [ -z "$cublas" ]; then
    cublas=$(ldconfig -p | awk '/libcublas\.so\.[0-9]+ / { print $NF; exit }')
fi
if [ -z "$cublas" ]; then
    echo "interop.sh: cuBLAS not found (libcublas.so.N next to nvcc, in CUDA_HOME, /usr/local/cuda or ldconfig)" >&2
    exit 1
fi
mkdir -p "$work/cublas"
ln -s "$cublas" "$work/cublas/libcublas.so"

export LD_LIBRARY_PATH=$work/cublas:$(dirname "$cublas"):$LD_LIBRARY_PATH
export SYCL_CACHE_DIR=$work/cache
unset SYCL_DEVICE SYCL_TRACE SYCL_CACHE_DISABLE
{
    echo "== $(date -u +%FT%TZ) on $(hostname); cuBLAS: $cublas"
    nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1 || true
} | tee "$out/interop.txt"
"$work/bin/interop-app" cudarc "$work/interop.cubin" | tee -a "$out/interop.txt"
# The guide's example of the same (docs/GUIDE.md shows its code).
"$work/bin/cudarc" | tee -a "$out/interop.txt"
