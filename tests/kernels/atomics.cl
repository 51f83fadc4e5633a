// OpenCL 1.2 atomics (built with -cl-std=CL1.2) on global and local memory.

// Sum with atomic_add; values above the threshold compacted through atomic_inc.
__kernel void sum_and_compact(__global const int *in, __global int *sum, __global uint *count,
                              __global int *kept, const int threshold) {
    int x = in[get_global_id(0)];
    atomic_add(sum, x);
    if (x > threshold)
        kept[atomic_inc(count)] = x;
}

// A float sum through an atomic_cmpxchg loop on its bits: per group in local memory, then
// into the global total.
static void add_float_local(volatile __local uint *p, float v) {
    uint old = *p, seen;
    while ((seen = atomic_cmpxchg(p, old, as_uint(as_float(old) + v))) != old)
        old = seen;
}

static void add_float_global(volatile __global uint *p, float v) {
    uint old = *p, seen;
    while ((seen = atomic_cmpxchg(p, old, as_uint(as_float(old) + v))) != old)
        old = seen;
}

__kernel void float_sum_cmpxchg(__global const float *in, __global uint *total) {
    __local uint group_sum;
    if (get_local_id(0) == 0)
        group_sum = as_uint(0.0f);
    barrier(CLK_LOCAL_MEM_FENCE);
    add_float_local(&group_sum, in[get_global_id(0)]);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0)
        add_float_global(total, as_float(group_sum));
}

// Signed maximum and minimum: per group with local atomics, each group's into group_max,
// and the overall ones with global atomics.
__kernel void max_min(__global const int *in, __global int *group_max, __global int *max_all,
                      __global int *min_all) {
    __local int local_max;
    int x = in[get_global_id(0)];
    if (get_local_id(0) == 0)
        local_max = INT_MIN;
    barrier(CLK_LOCAL_MEM_FENCE);
    atomic_max(&local_max, x);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        group_max[get_group_id(0)] = local_max;
        atomic_max(max_all, local_max);
    }
    atomic_min(min_all, x);
}
