// Calls through function pointers into another image: the set `ops` is outlined into an
// image of its own, and the kernel's table names its functions (`.extern .func` addresses).
#include <sycl/device.h>
#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable
typedef int (*fn_t)(int);
SYCL_INDIRECTLY_CALLABLE(ops) int twice(int x) { return 2 * x; }
SYCL_INDIRECTLY_CALLABLE(ops) int thrice(int x) { return 3 * x; }
__global fn_t table[2] = {twice, thrice};
__kernel SYCL_CALLS_INDIRECTLY(ops) void call_ops(__global const int *in, __global int *o) {
    size_t i = get_global_id(0);
    o[i] = table[i & 1](in[i]);
}
