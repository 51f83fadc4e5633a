// vloadN / vstoreN through generic pointers (OpenCL C 2.0): the helper's unqualified
// pointers are generic, and the kernel passes it global ones.

#include "vec_block.h"

static void scale_block(const float *src, float *dst) {
    VEC_BLOCK(src, dst);
}

__kernel void vload_generic(__global const float *in, __global float *out) {
    size_t block = get_global_id(0) * VEC_BLOCK_LEN;
    scale_block(in + block, out + block);
}
