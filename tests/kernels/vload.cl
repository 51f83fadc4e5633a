// vloadN / vstoreN (N = 2, 4, 8, 16) on global, constant, local and private pointers, one
// block of VEC_BLOCK_LEN floats per work-item (vec_block.h, found through -I).

#include "vec_block.h"

__constant float TABLE[VEC_BLOCK_LEN] = {
    0.5f,  1.5f,  2.5f,  3.5f,  4.5f,  5.5f,  6.5f,  7.5f,  8.5f,  9.5f,  10.5f, 11.5f, 12.5f, 13.5f, 14.5f, 15.5f,
    16.5f, 17.5f, 18.5f, 19.5f, 20.5f, 21.5f, 22.5f, 23.5f, 24.5f, 25.5f, 26.5f, 27.5f, 28.5f, 29.5f, 30.5f, 31.5f};

__kernel void vload_global(__global const float *in, __global float *out) {
    size_t block = get_global_id(0) * VEC_BLOCK_LEN;
    VEC_BLOCK(in + block, out + block);
}

__kernel void vload_constant(__constant float *in, __global float *out) {
    size_t block = get_global_id(0) * VEC_BLOCK_LEN;
    VEC_BLOCK(in + block, out + block);
}

// From the program-scope table into private memory, then out with the work-item's index added.
__kernel void vload_constant_table(__global float *out) {
    float scaled[VEC_BLOCK_LEN];
    VEC_BLOCK(TABLE, scaled);
    size_t i = get_global_id(0);
    for (int j = 0; j < VEC_BLOCK_LEN; j++)
        out[i * VEC_BLOCK_LEN + j] = scaled[j] + (float)i;
}

// The work-group's blocks copied to local memory, scaled from one half of it into the other.
__kernel void vload_local(__global const float *in, __global float *out, __local float *scratch) {
    size_t lid = get_local_id(0), size = get_local_size(0);
    size_t group = get_group_id(0) * size * VEC_BLOCK_LEN;
    __local float *from = scratch, *to = scratch + size * VEC_BLOCK_LEN;
    for (size_t j = lid; j < size * VEC_BLOCK_LEN; j += size)
        from[j] = in[group + j];
    barrier(CLK_LOCAL_MEM_FENCE);
    VEC_BLOCK(from + lid * VEC_BLOCK_LEN, to + lid * VEC_BLOCK_LEN);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t j = lid; j < size * VEC_BLOCK_LEN; j += size)
        out[group + j] = to[j];
}

__kernel void vload_private(__global const float *in, __global float *out) {
    size_t block = get_global_id(0) * VEC_BLOCK_LEN;
    float from[VEC_BLOCK_LEN], to[VEC_BLOCK_LEN];
    for (int j = 0; j < VEC_BLOCK_LEN; j++)
        from[j] = in[block + j];
    VEC_BLOCK(from, to);
    for (int j = 0; j < VEC_BLOCK_LEN; j++)
        out[block + j] = to[j];
}

// Bytes: 16 pixels at a time, brightened with saturation.
__kernel void brighten_u8(__global const uchar *in, __global uchar *out, const uchar amount) {
    size_t i = get_global_id(0);
    vstore16(add_sat(vload16(i, in), (uchar16)(amount)), i, out);
}
