// Builtins that take a pointer, on global, local and private memory, for
// tests/tests/pointer_builtins.rs. Under OpenCL C 2.0 each is also called through a helper
// whose parameter is a generic pointer (an unqualified pointer is generic there), and clang
// declares these builtins for generic pointers only, so every call below passes one; under
// OpenCL C 1.2 the helpers are the builtins themselves.

#if __OPENCL_C_VERSION__ >= 200
float4 load4(size_t i, const float *p) { return vload4(i, p); }
void store4(float4 v, size_t i, float *p) { vstore4(v, i, p); }
int3 load3(size_t i, const int *p) { return vload3(i, p); }
void store3(int3 v, size_t i, int *p) { vstore3(v, i, p); }
float load_half(size_t i, const half *p) { return vload_half(i, p); }
float4 load_half4(size_t i, const half *p) { return vload_half4(i, p); }
float4 loada_half4(size_t i, const half *p) { return vloada_half4(i, p); }
void store_half_rtp(float v, size_t i, half *p) { vstore_half_rtp(v, i, p); }
void store_half4_rtn(float4 v, size_t i, half *p) { vstore_half4_rtn(v, i, p); }
void storea_half4(float4 v, size_t i, half *p) { vstorea_half4(v, i, p); }
float modf_of(float x, float *whole) { return modf(x, whole); }
float frexp_of(float x, int *exponent) { return frexp(x, exponent); }
float sincos_of(float x, float *cosine) { return sincos(x, cosine); }
typedef atomic_int counter;
int increment(counter *c) { return atomic_fetch_add(c, 1); }
#define ADD_TWO(c) atomic_fetch_add(c, 2)
#define INIT(c) atomic_init(c, 0)
#define READ(c) atomic_load(c)
#define WRITE(c, v) atomic_store(c, v)
#else
#define load4 vload4
#define store4 vstore4
#define load3 vload3
#define store3 vstore3
#define load_half vload_half
#define load_half4 vload_half4
#define loada_half4 vloada_half4
#define store_half_rtp vstore_half_rtp
#define store_half4_rtn vstore_half4_rtn
#define storea_half4 vstorea_half4
#define modf_of modf
#define frexp_of frexp
#define sincos_of sincos
typedef int counter;
#define increment atomic_inc
#define ADD_TWO(c) atomic_add(c, 2)
#define INIT(c) (*(c) = 0)
#define READ(c) (*(c))
#define WRITE(c, v) (*(c) = (v))
#endif

// 16 floats of `in` and 12 ints of `ints` per work-item in; 16 floats and 12 ints out.
kernel void vectors(global const float *in, global float *out, global const int *ints, global int *iout) {
    size_t i = get_global_id(0), l = get_local_id(0);
    local float tile[16];
    float priv[8];
    float4 a = load4(i, in);                  // global
    float4 b = vload4(i, in);                 // global, straight
    store4(a * 2.0f, l, tile);                // local
    barrier(CLK_LOCAL_MEM_FENCE);
    float4 c = load4((l + 1) % 4, tile);
    store4(a + 1.0f, 1, priv);                // private
    float4 d = load4(1, priv);
    vstore4(a, 4 * i, out);
    vstore4(b, 4 * i + 1, out);
    store4(c, 4 * i + 2, out);
    store4(d, 4 * i + 3, out);
    int3 k = load3(i, ints);
    store3(k * 3, i, iout);
}

// Per work-item: 4 halves of `h` in, 4 halves of `hout` and 8 floats of `out` out; `x` holds
// ±1/3, rounded four ways.
kernel void halves(global const half *h, global const float *x, global half *hout, global float *out) {
    size_t i = get_global_id(0), l = get_local_id(0);
    // Without cl_khr_fp16 there are no arrays of half, only pointers to half.
    local ushort tile_bits[16];
    ushort priv_bits[4];
    local half *tile = (local half *)tile_bits;
    private half *priv = (private half *)priv_bits;
    float4 a = load_half4(i, h);
    float4 b = loada_half4(i, h);
    float c = load_half(4 * i + 2, h);
    storea_half4(a * 2.0f, l, tile);
    barrier(CLK_LOCAL_MEM_FENCE);
    float4 e = load_half4((l + 1) % 4, tile);
    store_half_rtp(x[i], 0, priv);
    float f = load_half(0, priv);
    store_half_rtp(x[i], 4 * i, hout);
    store_half4_rtn((float4)(x[i]), 0, priv);
    ((global ushort *)hout)[4 * i + 1] = priv_bits[3];
    vstore_half_rte(x[i], 4 * i + 2, hout);
    vstore_half_rtz(x[i], 4 * i + 3, hout);
    vstore4(a, 2 * i, out);
    out[8 * i + 4] = b.w;
    out[8 * i + 5] = c;
    out[8 * i + 6] = e.y;
    out[8 * i + 7] = f;
}

// Per work-item: x[i] in; 12 floats of `out` and 4 ints of `iout` out.
kernel void math(global const float *x, global float *out, global int *iout) {
    size_t i = get_global_id(0), l = get_local_id(0);
    local int exponents[4];
    local int quotients[4];
    float v = x[i];
    float whole, cosine;
    out[12 * i + 0] = fract(v, &whole);                     // private
    out[12 * i + 1] = whole;
    out[12 * i + 2] = modf_of(v, &out[12 * i + 3]);         // global
    out[12 * i + 4] = frexp_of(v, &exponents[l]);           // local
    out[12 * i + 5] = sincos_of(v * 0.0f, &cosine);         // private
    out[12 * i + 6] = cosine;
    out[12 * i + 7] = lgamma_r(v * 0.5f, &iout[4 * i + 1]); // global, straight
    out[12 * i + 8] = remquo(v, 2.0f, &quotients[l]);       // local, straight
    barrier(CLK_LOCAL_MEM_FENCE);
    iout[4 * i] = exponents[l];
    iout[4 * i + 2] = quotients[l];
}

// Every work-item adds 1 to c[0] and to a local counter, 2 to c[1]; each work-group writes
// its local count to c[2].
kernel void atomics(global counter *c) {
    local counter group;
    if (get_local_id(0) == 0) INIT(&group);
    barrier(CLK_LOCAL_MEM_FENCE);
    increment(&c[0]);
    increment(&group);
    ADD_TWO(&c[1]);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) WRITE(&c[2], READ(&group));
}

#if __OPENCL_C_VERSION__ >= 200
cl_mem_fence_flags fence_of(const void *p) { return get_fence(p); }

// get_fence of a global and a local pointer, and of the global one through a generic helper.
kernel void fences(global int *out) {
    local int scratch;
    scratch = 0;
    out[0] = get_fence(out);
    out[1] = get_fence(&scratch);
    out[2] = fence_of(out);
}
#endif
