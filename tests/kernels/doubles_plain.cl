// Double precision without the pragma (OpenCL C 1.2 and later need none where the device
// supports cl_khr_fp64): Horner's rule, conversions to and from float.

__kernel void horner(__global const float *x, __global const double *coeffs, const int degree,
                     __global double *out, __global float *out_f) {
    size_t i = get_global_id(0);
    double v = (double)x[i];
    double acc = coeffs[degree];
    for (int k = degree - 1; k >= 0; k--)
        acc = acc * v + coeffs[k];
    out[i] = acc;
    out_f[i] = convert_float(acc);
}
