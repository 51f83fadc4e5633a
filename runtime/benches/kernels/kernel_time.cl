// Kernels of the kernel_time benchmark that clang -O2 + llvm-spirv-15 can also translate (the
// old way of making SPIR-V): streaming, a local-memory tiled matmul with a few results per
// work-item, a stencil without bounds checks. The n-body step, the reduction and the
// histogram come from tests/kernels/.

__kernel void saxpy(__global const float *x, __global const float *y, __global float *out, const float a) {
    size_t i = get_global_id(0);
    out[i] = a * x[i] + y[i];
}

// C = A * B, row-major, M x K times K x N: tiles of TS x TS in local memory, each work-item
// computing WPT results of a column, RTS rows apart (after Cedric Nugteren's "myGEMM"
// kernel 3). Work-groups of TS x RTS; M, N and K multiples of TS.
#ifndef TS
#define TS 16
#endif
#ifndef WPT
#define WPT 4
#endif
#define RTS (TS / WPT)

__kernel void matmul_tiled(const int M, const int N, const int K, __global const float *A,
                           __global const float *B, __global float *C) {
    const int col = get_local_id(0);
    const int row = get_local_id(1);
    const int gcol = TS * get_group_id(0) + col;
    const int grow = TS * get_group_id(1) + row;
    __local float Asub[TS][TS];
    __local float Bsub[TS][TS];
    float acc[WPT];
#pragma unroll
    for (int w = 0; w < WPT; w++)
        acc[w] = 0.0f;
    for (int t = 0; t < K; t += TS) {
#pragma unroll
        for (int w = 0; w < WPT; w++) {
            Asub[row + w * RTS][col] = A[(grow + w * RTS) * K + t + col];
            Bsub[row + w * RTS][col] = B[(t + row + w * RTS) * N + gcol];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++) {
            float b = Bsub[k][col];
#pragma unroll
            for (int w = 0; w < WPT; w++)
                acc[w] += Asub[row + w * RTS][k] * b;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#pragma unroll
    for (int w = 0; w < WPT; w++)
        C[(grow + w * RTS) * N + gcol] = acc[w];
}

// A 5-point stencil over the interior of a grid w wide: one work-item per interior point.
__kernel void stencil_interior(__global const float *in, __global float *out, const int w) {
    int x = get_global_id(0) + 1, y = get_global_id(1) + 1;
    int i = y * w + x;
    out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
}
