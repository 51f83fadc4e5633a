// __local kernel parameters with barriers: a work-group tree reduction and a histogram
// counted with local atomics, then merged into the global one.

#ifndef BINS
#define BINS 64
#endif

// Each group's sum of its grid-stride share of in[0..n), into partial[group].
__kernel void reduce_sum(__global const float *in, __global float *partial, __local float *scratch,
                         const int n) {
    int lid = get_local_id(0);
    float sum = 0.0f;
    for (int i = get_global_id(0); i < n; i += get_global_size(0))
        sum += in[i];
    scratch[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s)
            scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        partial[get_group_id(0)] = scratch[0];
}

__kernel void histogram(__global const uint *data, const int n, __global uint *hist,
                        __local uint *local_hist) {
    int lid = get_local_id(0), size = get_local_size(0);
    for (int b = lid; b < BINS; b += size)
        local_hist[b] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = get_global_id(0); i < n; i += get_global_size(0))
        atomic_inc(&local_hist[data[i] % BINS]);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int b = lid; b < BINS; b += size)
        if (local_hist[b] != 0)
            atomic_add(&hist[b], local_hist[b]);
}
