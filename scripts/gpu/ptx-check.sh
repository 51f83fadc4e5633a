#!/usr/bin/env bash
# Checks the PTX that sycl-ld's ptx64 target makes on an NVIDIA GPU, on a machine with the
# driver and the CUDA toolkit (ptxas) but without Rust or LLVM:
#
#   cargo xtask gpu-pack target/gpu-ptx          # where the toolkit is built: PTX + manifest
#   scripts/gpu/ptx-check.sh target/gpu-ptx [CASE...]  # on the GPU machine
#
# 1. `ptxas -arch=sm_90 -c` on every PTX file (relocatable: imports stay unresolved), its
#    register and spill counts kept in OUT/ptxas.log;
# 2. scripts/gpu/ptx_check.c, compiled here with gcc, links each case's images with the CUDA
#    driver's JIT linker, launches it and checks the results against host references
#    (`PASS name` / `FAIL name: why`, then `N passed, M failed`); the JIT linker's info log
#    goes to OUT/jit.log.
# Logs go to $OUT (else ./ptx-check-out): summary.txt, ptxas.log, jit.log. CASEs (names as
# ptx_check prints them) run only those. The exit status is 0 when everything passed.
set -u
dir=${1:?usage: ptx-check.sh PTX_DIR [CASE...]}
shift
out=${OUT:-ptx-check-out}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
status=0

{
    echo "== $(date -u +%FT%TZ) on $(hostname)"
    nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1 || true
    ptxas --version 2>&1 | tail -1 || true
} | tee "$out/summary.txt"

echo "== ptxas -arch=sm_90" | tee -a "$out/summary.txt"
: >"$out/ptxas.log"
ptxas_failed=0
for f in "$dir"/*.ptx; do
    name=$(basename "$f")
    if ptxas -arch=sm_90 -c -v "$f" -o /tmp/ptxas-$$.o >>"$out/ptxas.log" 2>&1; then
        echo "ptxas ok $name" | tee -a "$out/summary.txt"
    else
        echo "ptxas FAIL $name" | tee -a "$out/summary.txt"
        ptxas -arch=sm_90 -c "$f" -o /tmp/ptxas-$$.o 2>&1 | head -20 | sed 's/^/    /' | tee -a "$out/summary.txt"
        ptxas_failed=$((ptxas_failed + 1))
    fi
done
rm -f /tmp/ptxas-$$.o
echo "ptxas: $ptxas_failed failed" | tee -a "$out/summary.txt"
[ "$ptxas_failed" = 0 ] || status=1

echo "== ptx_check" | tee -a "$out/summary.txt"
gcc -O2 -Wall -Wno-format-truncation -o /tmp/ptx_check-$$ "$here/ptx_check.c" -ldl -lm 2>&1 | tee -a "$out/summary.txt"
if [ ! -x /tmp/ptx_check-$$ ]; then
    echo "ptx_check did not compile" | tee -a "$out/summary.txt"
    exit 1
fi
rm -f "$out/jit.log"
PTX_CHECK_JIT_LOG="$out/jit.log" /tmp/ptx_check-$$ "$dir" "$@" 2>&1 | tee -a "$out/summary.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
rm -f /tmp/ptx_check-$$
exit $status
