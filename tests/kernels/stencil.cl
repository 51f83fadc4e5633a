// A 5-point stencil over the interior of a w x h grid; the border is copied. Weights from a
// header found through -I.
#include "stencil_weights.h"

__kernel void stencil5(__global const float *in, __global float *out, const int w, const int h) {
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= w || y >= h)
        return;
    if (x > 0 && y > 0 && x < w - 1 && y < h - 1)
        out[y * w + x] = stencil_at(in, w, x, y);
    else
        out[y * w + x] = in[y * w + x];
}
