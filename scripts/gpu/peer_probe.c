// What a host with several NVIDIA GPUs offers between them, through the CUDA driver API alone
// (issue 41's ground): each pair's peer access (cuDeviceCanAccessPeer), and the bandwidth of a
// 1 GiB copy between two GPUs with cuMemcpyPeerAsync, peer access enabled and not, against a
// copy staged through pinned host memory. Built and run by scripts/gpu/peer-probe.sh.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(call)                                                                            \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        if (r_ != CUDA_SUCCESS) {                                                              \
            const char *s_ = "?";                                                              \
            cuGetErrorName(r_, &s_);                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, s_);                 \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// The best of `rounds` copies of `bytes` from a to b on `stream`, in GB/s.
static double peer_rate(CUdeviceptr dst, CUcontext cdst, CUdeviceptr src, CUcontext csrc,
                        size_t bytes, CUstream stream, int rounds) {
    double best = 1e30;
    for (int i = 0; i < rounds; i++) {
        double t0 = now();
        CHECK(cuMemcpyPeerAsync(dst, cdst, src, csrc, bytes, stream));
        CHECK(cuStreamSynchronize(stream));
        double t = now() - t0;
        if (t < best) best = t;
    }
    return bytes / best / 1e9;
}

int main(void) {
    CHECK(cuInit(0));
    int n = 0;
    CHECK(cuDeviceGetCount(&n));
    printf("GPUs: %d\n", n);
    CUcontext ctx[16];
    for (int i = 0; i < n && i < 16; i++) {
        CUdevice d;
        char name[128];
        CHECK(cuDeviceGet(&d, i));
        CHECK(cuDeviceGetName(name, sizeof name, d));
        CHECK(cuDevicePrimaryCtxRetain(&ctx[i], d));
        printf("GPU %d: %s\n", i, name);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j) continue;
            int can = 0;
            CHECK(cuDeviceCanAccessPeer(&can, i, j));
            printf("peer access %d -> %d: %s\n", i, j, can ? "yes" : "no");
        }
    if (n < 2) return 0;
    size_t bytes = (size_t)1 << 30;
    CUdeviceptr a, b;
    CUstream s;
    CHECK(cuCtxSetCurrent(ctx[0]));
    CHECK(cuMemAlloc(&a, bytes));
    CHECK(cuMemsetD8(a, 1, bytes));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuCtxSetCurrent(ctx[1]));
    CHECK(cuMemAlloc(&b, bytes));
    CHECK(cuCtxSetCurrent(ctx[0]));
    printf("1 GiB GPU 0 -> GPU 1, cuMemcpyPeerAsync without peer access: %.1f GB/s\n",
           peer_rate(b, ctx[1], a, ctx[0], bytes, s, 5));
    int can = 0;
    CHECK(cuDeviceCanAccessPeer(&can, 0, 1));
    if (can) {
        CHECK(cuCtxEnablePeerAccess(ctx[1], 0));
        CHECK(cuCtxSetCurrent(ctx[1]));
        CHECK(cuCtxEnablePeerAccess(ctx[0], 0));
        CHECK(cuCtxSetCurrent(ctx[0]));
        printf("1 GiB GPU 0 -> GPU 1, cuMemcpyPeerAsync with peer access: %.1f GB/s\n",
               peer_rate(b, ctx[1], a, ctx[0], bytes, s, 5));
        printf("1 GiB GPU 1 -> GPU 0, cuMemcpyPeerAsync with peer access: %.1f GB/s\n",
               peer_rate(a, ctx[0], b, ctx[1], bytes, s, 5));
    }
    // Staged: device to pinned host, host to device, in 64 MiB chunks on two streams.
    void *host;
    CHECK(cuMemHostAlloc(&host, bytes, CU_MEMHOSTALLOC_PORTABLE));
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        CHECK(cuCtxSetCurrent(ctx[0]));
        CHECK(cuMemcpyDtoH(host, a, bytes));
        CHECK(cuCtxSetCurrent(ctx[1]));
        CHECK(cuMemcpyHtoD(b, host, bytes));
        double t = now() - t0;
        if (t < best) best = t;
    }
    printf("1 GiB GPU 0 -> GPU 1 through pinned host memory, one copy after the other: %.1f GB/s\n",
           bytes / best / 1e9);
    return 0;
}
