// Integer division and remainder of the same operands, side by side, as index arithmetic
// writes them. clang's optimiser turns `x % n` beside `x / n` into `x - (x / n) * n` with a
// `freeze`, which llvm-spirv-15 cannot translate.

__kernel void divrem_sum(__global int *out, const int n) {
    int i = get_global_id(0);
    out[i] = i / n + i % n;
}

// A constant power of two, on signed values (negative ones round toward zero) and unsigned.
__kernel void divrem_by_16(__global const int *in, __global int *quot, __global int *rem,
                           __global uint *packed) {
    size_t i = get_global_id(0);
    int x = in[i];
    quot[i] = x / 16;
    rem[i] = x % 16;
    uint u = (uint)x;
    packed[i] = (u / 16) * 100u + u % 16;
}

// A linear index to 2-D coordinates, in 64-bit (size_t) arithmetic.
__kernel void index_to_xy(__global int *xy, const ulong width) {
    size_t i = get_global_id(0);
    size_t y = i / width;
    size_t x = i % width;
    xy[2 * i] = (int)x;
    xy[2 * i + 1] = (int)y;
}
