// One step of an all-pairs n-body simulation: positions as float4 (xyz, mass in w), the
// bodies visited in tiles copied to __local memory by the work-group, rsqrt for the distance.
// n must be a multiple of the work-group size.

#ifndef SOFTENING
#define SOFTENING 0.01f
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

__kernel void nbody_step(__global const float4 *pos, __global const float4 *vel,
                         __global float4 *new_pos, __global float4 *new_vel,
                         __local float4 *tile, const int n, const float dt) {
    int i = get_global_id(0);
    int lid = get_local_id(0);
    int size = get_local_size(0);
    float4 p = pos[i];
    float3 acc = (float3)(0.0f);
    for (int start = 0; start < n; start += size) {
        tile[lid] = pos[start + lid];
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll UNROLL
        for (int j = 0; j < size; j++) {
            float4 q = tile[j];
            float3 d = q.xyz - p.xyz;
            float inv = rsqrt(dot(d, d) + SOFTENING);
            acc += d * (q.w * inv * inv * inv);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float4 v = vel[i];
    v.xyz += acc * dt;
    new_vel[i] = v;
    new_pos[i] = (float4)(p.xyz + v.xyz * dt, p.w);
}
