// Chains of `&&`: bounds checks of four and more conditions. clang's SLP vectoriser makes
// `<4 x i1>` of such chains, which llvm-spirv-15 cannot translate.

// Whether each point (x, y, z) lies in the box [lo, hi)^3, for the first n points.
__kernel void in_box(__global const float *xyz, __global int *inside, const float lo, const float hi,
                     const int n) {
    int i = get_global_id(0);
    float x = xyz[3 * i], y = xyz[3 * i + 1], z = xyz[3 * i + 2];
    inside[i] = i < n && x >= lo && x < hi && y >= lo && y < hi && z >= lo && z < hi;
}

// A gather with a border: each output pixel reads the input at an offset, 0 outside.
__kernel void shifted(__global const int *in, __global int *out, const int w, const int h,
                      const int dx, const int dy) {
    int x = get_global_id(0), y = get_global_id(1);
    int sx = x + dx, sy = y + dy;
    if (sx >= 0 && sy >= 0 && sx < w && sy < h && x < w && y < h)
        out[y * w + x] = in[sy * w + sx];
    else if (x < w && y < h)
        out[y * w + x] = 0;
}
