// Float kernels whose results on a device must be bit for bit those of the driver's own build
// of this source (tests/tests/builtins.rs). Each work-item reads 16 floats of `a`, `b` and
// `c` from its own offset.

#define ARGS global float *out, global const float *a, global const float *b, global const float *c
#define AT(p, k) p[16 * get_global_id(0) + (k)]

kernel void f_mul_add(ARGS) { out[get_global_id(0)] = AT(a, 0) * AT(b, 0) + AT(c, 0); }

kernel void f_sub_mul(ARGS) { out[get_global_id(0)] = AT(a, 0) - AT(b, 0) * AT(c, 0); }

kernel void f_dot(ARGS) {
    float s = 0.0f;
    for (int k = 0; k < 16; k++) s += AT(a, k) * AT(b, k);
    out[get_global_id(0)] = s;
}

kernel void f_matmul(ARGS) {
    // out[i] = row i / 4 of a 4x4 matrix times column i % 4 of another.
    size_t i = get_global_id(0), row = i / 4 % 4, col = i % 4;
    float s = 0.0f;
    for (int k = 0; k < 4; k++) s += a[row * 4 + k] * b[k * 4 + col];
    out[i] = s;
}

kernel void f_horner(ARGS) {
    float x = AT(a, 0);
    out[get_global_id(0)] = ((AT(b, 0) * x + AT(b, 1)) * x + AT(b, 2)) * x + AT(b, 3);
}

kernel void f_two_uses(ARGS) {
    float p = AT(a, 0) * AT(b, 0);
    out[get_global_id(0)] = (p + AT(c, 0)) * (AT(a, 0) * AT(b, 0) + AT(c, 1)) + p;
}

kernel void f_complex(ARGS) {
    float2 x = (float2)(AT(a, 0), AT(a, 1)), y = (float2)(AT(b, 0), AT(b, 1));
    out[get_global_id(0)] = (x.x * y.x - x.y * y.y) * (x.x * y.y + x.y * y.x);
}

kernel void f_vector(ARGS) {
    float4 s = vload4(0, &AT(a, 0)) * vload4(0, &AT(b, 0)) + vload4(0, &AT(c, 0));
    out[get_global_id(0)] = s.x + s.y + s.z + s.w;
}

kernel void f_dot4(ARGS) { out[get_global_id(0)] = dot(vload4(1, &AT(a, 0)), vload4(1, &AT(b, 0))) + AT(c, 0); }

kernel void f_exp_sqrt(ARGS) {
    out[get_global_id(0)] = exp(AT(a, 0)) * sqrt(fabs(AT(b, 0))) - AT(a, 1) * AT(c, 0);
}

kernel void f_math(ARGS) {
    float x = AT(a, 0), y = AT(b, 0), z = AT(c, 0);
    out[get_global_id(0)] = sin(x) * cos(y) + log(fabs(z) + 1.0f) * atan2(x, y) + x / y;
}

kernel void f_tiny(ARGS) {
    // Products and sums near the smallest normal floats, and below it.
    out[get_global_id(0)] = (AT(a, 0) * 1e-38f) * AT(b, 0) + AT(c, 0) * 1e-38f;
}

kernel void f_double(ARGS) {
    double x = AT(a, 0), y = AT(b, 0), z = AT(c, 0);
    out[get_global_id(0)] = (float)(x * y + z * 1e-3 + exp(x) / y);
}
