// Register-blocked SGEMM as written for a GPU (after Cedric Nugteren's "myGEMM" kernel 6):
// C = alpha * A * B + beta * C, all row-major; A is M x K, B is K x N.
//
// Each work-group computes a TSM x TSN tile of C, walking K in steps of TSK through tiles of
// A and B in __local memory; each work-item holds a WPTM x WPTN accumulator tile in private
// arrays, fully unrolled. The tile sizes come from -D, as host code sets them; M, N and K must
// be multiples of TSM, TSN and TSK.
//
// clang's optimiser makes <64 x float> of the 8 x 8 accumulator (SLP vectoriser) and `freeze`
// of the tile-load index arithmetic: llvm-spirv-15 translates neither.

#ifndef TSM
#define TSM 64
#endif
#ifndef TSN
#define TSN 64
#endif
#ifndef TSK
#define TSK 16
#endif
#ifndef WPTM
#define WPTM 8
#endif
#ifndef WPTN
#define WPTN 8
#endif

#define RTSM (TSM / WPTM)                      // work-items per group along M (dimension 1)
#define RTSN (TSN / WPTN)                      // work-items per group along N (dimension 0)
#define LPTA ((TSK * TSM) / (RTSM * RTSN))     // loads of A per work-item per tile
#define LPTB ((TSK * TSN) / (RTSM * RTSN))     // loads of B per work-item per tile

__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void sgemm_tiled(const int M, const int N, const int K,
                 const __global float *A, const __global float *B, __global float *C,
                 const float alpha, const float beta) {
    const int tidn = get_local_id(0);
    const int tidm = get_local_id(1);
    const int offsetN = TSN * get_group_id(0);
    const int offsetM = TSM * get_group_id(1);
    const int tid = tidm * RTSN + tidn;

    __local float Asub[TSK][TSM];   // transposed on the way in: Asub[k][m]
    __local float Bsub[TSK][TSN];

    float Areg;
    float Breg[WPTN];
    float acc[WPTM][WPTN];
#pragma unroll
    for (int wm = 0; wm < WPTM; wm++)
#pragma unroll
        for (int wn = 0; wn < WPTN; wn++)
            acc[wm][wn] = 0.0f;

    for (int t = 0; t < K; t += TSK) {
#pragma unroll
        for (int la = 0; la < LPTA; la++) {
            int id = la * RTSM * RTSN + tid;
            int row = id / TSK;
            int col = id % TSK;
            Asub[col][row] = A[(offsetM + row) * K + t + col];
        }
#pragma unroll
        for (int lb = 0; lb < LPTB; lb++) {
            int id = lb * RTSM * RTSN + tid;
            int row = id / TSN;
            int col = id % TSN;
            Bsub[row][col] = B[(t + row) * N + offsetN + col];
        }
        barrier(CLK_LOCAL_MEM_FENCE);

#pragma unroll
        for (int k = 0; k < TSK; k++) {
#pragma unroll
            for (int wn = 0; wn < WPTN; wn++)
                Breg[wn] = Bsub[k][tidn + wn * RTSN];
#pragma unroll
            for (int wm = 0; wm < WPTM; wm++) {
                Areg = Asub[k][tidm + wm * RTSM];
#pragma unroll
                for (int wn = 0; wn < WPTN; wn++)
                    acc[wm][wn] += Areg * Breg[wn];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

#pragma unroll
    for (int wm = 0; wm < WPTM; wm++) {
        int row = offsetM + tidm + wm * RTSM;
#pragma unroll
        for (int wn = 0; wn < WPTN; wn++) {
            int col = offsetN + tidn + wn * RTSN;
            C[row * N + col] = alpha * acc[wm][wn] + beta * C[row * N + col];
        }
    }
}
