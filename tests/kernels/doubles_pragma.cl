// Double precision with the extension pragma, as OpenCL 1.x code has it.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void double_math(__global const double *in, __global double *out) {
    size_t i = get_global_id(0);
    double x = in[i];
    out[i] = sqrt(x) + exp(-x) * fma(x, 2.0, 1.0) + sin(x) / (1.0 + x * x);
}

// A dot product of double2 pairs, per work-item.
__kernel void double_dot(__global const double2 *a, __global const double2 *b, __global double *out) {
    size_t i = get_global_id(0);
    out[i] = dot(a[i], b[i]);
}
