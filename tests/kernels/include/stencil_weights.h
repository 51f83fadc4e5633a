// The 5-point stencil's weights, shared by host code and the kernel in a real program.
#define STENCIL_CENTER 0.5f
#define STENCIL_SIDE 0.125f

static inline float stencil_at(__global const float *in, int w, int x, int y) {
    return STENCIL_CENTER * in[y * w + x] +
           STENCIL_SIDE * (in[y * w + x - 1] + in[y * w + x + 1] + in[(y - 1) * w + x] + in[(y + 1) * w + x]);
}
