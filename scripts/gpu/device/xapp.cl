// The kernel side of the cross-module cases of scripts/gpu/ptx-check.sh: kernels that call
// device functions of the library xlib.cl (imports, `.extern .func` in the PTX), local
// pointer parameters (byte offsets into the launch's dynamic shared memory), a kernel that
// another kernel calls, get_work_dim (from the dynamic shared memory size) and sub-groups (warps).
#include <sycl/device.h>

SYCL_EXTERNAL float lib_scale(float x, __global const float *table);
SYCL_EXTERNAL float lib_fract(float x, float *whole);
SYCL_EXTERNAL double lib_norm(double a, double b);
SYCL_EXTERNAL int lib_mix(int x);

static int helper(int x) { return x - 1; }

__constant float weights[4] = {0.5f, 1.0f, 1.5f, 2.0f};

__kernel void x_scale(__global const float *in, __global float *out, __global const float *table) {
    size_t i = get_global_id(0);
    out[i] = lib_scale(in[i], table);
}

__kernel void x_fract(__global const float *in, __global float *fr, __global float *whole) {
    size_t i = get_global_id(0);
    float w;
    fr[i] = lib_fract(in[i], &w);
    whole[i] = w;
}

__kernel void x_norm(__global const double *xy, __global double *d) {
    size_t i = get_global_id(0);
    d[i] = lib_norm(xy[2 * i], xy[2 * i + 1]);
}

__kernel void x_mix(__global int *o) {
    int i = get_global_id(0);
    o[i] = lib_mix(i) + helper(i);
}

// Each group's weighted sum, scaled by the library: in[0] is the scale.
__kernel void tile_sum(__global const float *in, __global float *out, __local float *tile) {
    size_t l = get_local_id(0);
    tile[l] = in[get_global_id(0)] * weights[l & 3];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (l < s)
            tile[l] += tile[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        out[get_group_id(0)] = lib_scale(tile[0], in);
}

// A kernel calling another kernel.
__kernel void tile_sums(__global const float *in, __global float *out, __local float *tile) {
    tile_sum(in, out, tile);
}

// Two local parameters of different types: each at its own offset in the shared block.
__kernel void two_locals(__global const int *in, __global int *out, __local int *a, __local double *b) {
    size_t l = get_local_id(0), n = get_local_size(0);
    a[l] = in[get_global_id(0)];
    b[l] = (double)in[get_global_id(0)] * 0.5;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = a[n - 1 - l] + (int)(b[(l + 1) % n] * 2.0);
}

// The launch's shape, as work-item functions see it; a 2-D launch.
__kernel void launch_info(__global int *o) {
    size_t i = get_global_linear_id();
    o[4 * i] = get_work_dim();
    o[4 * i + 1] = (int)get_global_offset(0) + (int)get_global_offset(1);
    o[4 * i + 2] = (int)get_local_linear_id();
    o[4 * i + 3] = (int)(get_global_id(1) * get_global_size(0) + get_global_id(0));
}

// Sub-groups of 32 (warps): a reduction, an inclusive scan and a broadcast.
__kernel SYCL_REQD_SUB_GROUP_SIZE(32) void warps(__global const int *in, __global int *o) {
    size_t i = get_global_id(0);
    int v = in[i];
    o[4 * i] = sub_group_reduce_add(v);
    o[4 * i + 1] = sub_group_scan_inclusive_max(v);
    o[4 * i + 2] = sub_group_broadcast(v, 3);
    o[4 * i + 3] = (int)get_sub_group_local_id() + 100 * (int)get_sub_group_id() + 10000 * (int)get_num_sub_groups();
}

// Work-group collectives (OpenCL C 2.0).
__kernel void group_ops(__global const int *in, __global int *o) {
    size_t i = get_global_id(0);
    int v = in[i];
    o[3 * i] = work_group_reduce_add(v);
    o[3 * i + 1] = work_group_scan_exclusive_max(v);
    o[3 * i + 2] = work_group_broadcast(v, 5);
}
