// The half_* math functions and the memory fences, which PoCL 3.1's kernel library defines
// only under other names (_cl_half_sqrt, _cl_mem_fence, ...).

// x in (0, 4): every function of it, then half_recip and half_divide on a float4.
kernel void half_math(global const float *x, global float *out) {
    size_t i = get_global_id(0);
    float v = x[i];
    global float *o = &out[16 * i];
    o[0] = half_cos(v);
    o[1] = half_exp(v);
    o[2] = half_exp2(v);
    o[3] = half_exp10(v);
    o[4] = half_log(v);
    o[5] = half_log2(v);
    o[6] = half_log10(v);
    o[7] = half_powr(v, 1.5f);
    o[8] = half_rsqrt(v);
    o[9] = half_sin(v);
    o[10] = half_sqrt(v);
    o[11] = half_tan(v * 0.25f);
    float4 w = (float4)(v, v + 1.0f, v + 2.0f, v + 3.0f);
    float4 r = half_recip(w) + half_divide(w, (float4)(4.0f));
    vstore4(r, 3, o);
}

// Each work-item writes, fences, and reads back what it and its neighbour wrote.
kernel void memory_fences(global int *out) {
    local int scratch[4];
    size_t i = get_global_id(0), l = get_local_id(0), n = get_global_size(0);
    out[i] = (int)i;
    write_mem_fence(CLK_GLOBAL_MEM_FENCE);
    scratch[l] = 10 * (int)i;
    mem_fence(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    read_mem_fence(CLK_LOCAL_MEM_FENCE);
    int own = scratch[l] + out[i];
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    out[n + i] = own + scratch[(l + 1) % 4];
}
