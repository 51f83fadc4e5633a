// An exported function, in a library of its own: with -g, its debug information must not
// survive into a program linked from several images (tests/tests/real_world.rs).
#include <sycl/device.h>

SYCL_EXTERNAL float scaled_sum(global const float *x, int n, float scale) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        sum += x[i];
    }
    return sum * scale;
}
