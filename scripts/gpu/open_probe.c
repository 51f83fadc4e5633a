// What the CUDA driver itself takes to open every GPU of a host at once, against one: in a new
// process each (this program runs one case per process, `open_probe N`), cuInit, then one
// thread per GPU: the primary context retained and made current, 4 MiB allocated, a memset, a
// synchronize. Prints `open_us` (from before cuInit to after every thread ended) and the
// slowest thread's `thread_us`. scripts/gpu/open-probe.sh runs it in alternating rounds.
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void *open_gpu(void *arg) {
    int ordinal = (int)(long)arg;
    double start = now_us();
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (cuDeviceGet(&dev, ordinal) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuMemAlloc(&p, 4 << 20) || cuMemsetD8(p, 1, 4 << 20) || cuCtxSynchronize()) {
        fprintf(stderr, "GPU %d failed\n", ordinal);
        exit(1);
    }
    double *took = malloc(sizeof(double));
    *took = now_us() - start;
    return took;
}

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 1;
    double start = now_us();
    if (cuInit(0)) return 1;
    double init = now_us() - start;
    pthread_t threads[16];
    for (long i = 0; i < count; i++) pthread_create(&threads[i], NULL, open_gpu, (void *)i);
    double slowest = 0;
    for (int i = 0; i < count; i++) {
        double *took;
        pthread_join(threads[i], (void **)&took);
        if (*took > slowest) slowest = *took;
        free(took);
    }
    printf("gpus %d open_us %.1f init_us %.1f thread_us %.1f\n", count, now_us() - start, init, slowest);
    return 0;
}
