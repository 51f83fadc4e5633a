// The library side of the cross-module cases of scripts/gpu/ptx-check.sh: device functions
// that another library's kernels call, linked with them by the CUDA driver's JIT linker.
#include <sycl/device.h>

// A global pointer argument.
SYCL_EXTERNAL float lib_scale(float x, __global const float *table) { return x * table[0]; }

// A generic pointer argument, written through by `fract` (the caller's private variable).
SYCL_EXTERNAL float lib_fract(float x, float *whole) { return fract(x, whole); }

// Doubles across the call.
SYCL_EXTERNAL double lib_norm(double a, double b) { return sqrt(a * a + b * b); }

// A helper that the export calls: internal in the PTX, so two modules may both have one.
static int helper(int x) { return x * 3 + 1; }
SYCL_EXTERNAL int lib_mix(int x) { return helper(x); }
