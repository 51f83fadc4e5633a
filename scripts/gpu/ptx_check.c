/* Runs the PTX that sycl-ld's ptx64 target makes on an NVIDIA GPU through the CUDA driver, the
 * way a CUDA backend of the runtime would, and checks every result against a reference
 * computed here on the host.
 *
 *     ptx_check DIR [CASE...]
 *
 * DIR holds what `cargo xtask gpu-pack DIR` writes: UNIT.N.ptx images and manifest.txt (which
 * kernels, exports and imports each image has; see xtask/src/gpu.rs). For each case the
 * kernel's image and, transitively, the images that export its imports (first the kernel's
 * own unit, then any) are linked with cuLinkCreate / cuLinkAddData(CU_JIT_INPUT_PTX) /
 * cuLinkComplete, loaded with cuModuleLoadData and launched as the conventions of the PTX ask
 * (docs/PLATFORMS.md, "NVIDIA: PTX for the CUDA driver"):
 *   - grid = global size / local size in each dimension, block = local size; no offsets;
 *   - a `local` pointer parameter is an 8-byte byte offset into the launch's dynamic shared
 *     memory, whose size is the total of the local arguments (each here aligned to 16 bytes);
 *   - that size, rounded up to 4, plus the number of dimensions less one, is what the launch
 *     asks for: `get_work_dim` reads the two low bits of `%dynamic_smem_size`.
 * Each case runs in a child process of its own (a fault or a hang fails that case only) and
 * prints `PASS name (...)` or `FAIL name: why`; the last line is `N passed, M failed`.
 *
 * Self-contained: the few driver entry points are declared here and found with dlopen, so it
 * needs no CUDA headers (gcc -O2 -o ptx_check ptx_check.c -ldl -lm). The host references
 * follow tests/tests/real_world.rs (sizes, data, tolerances). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- The driver API, as much as is used ---- */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUlinkState, *CUstream;
typedef unsigned long long CUdeviceptr;
enum { CU_JIT_INFO_LOG_BUFFER = 3, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4, CU_JIT_ERROR_LOG_BUFFER = 5,
       CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6, CU_JIT_LOG_VERBOSE = 12 };
enum { CU_JIT_INPUT_PTX = 1 };
enum { CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3, CU_FUNC_ATTRIBUTE_NUM_REGS = 4 };

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*LinkCreate)(unsigned, int *, void **, CUlinkState *);
    CUresult (*LinkAddData)(CUlinkState, int, void *, size_t, const char *, unsigned, int *, void **);
    CUresult (*LinkComplete)(CUlinkState, void **, size_t *);
    CUresult (*LinkDestroy)(CUlinkState);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
    CUresult (*FuncGetAttribute)(int *, int, CUfunction);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
} cu;

static void load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "ptx_check: %s\n", dlerror());
        exit(2);
    }
#define SYM(field, name)                                                     \
    do {                                                                     \
        *(void **)&cu.field = dlsym(lib, name);                              \
        if (!cu.field) {                                                     \
            fprintf(stderr, "ptx_check: libcuda.so.1 lacks %s\n", name);     \
            exit(2);                                                         \
        }                                                                    \
    } while (0)
    SYM(Init, "cuInit");
    SYM(DriverGetVersion, "cuDriverGetVersion");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(DeviceGetName, "cuDeviceGetName");
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(CtxSetCurrent, "cuCtxSetCurrent");
    SYM(CtxSynchronize, "cuCtxSynchronize");
    SYM(LinkCreate, "cuLinkCreate_v2");
    SYM(LinkAddData, "cuLinkAddData_v2");
    SYM(LinkComplete, "cuLinkComplete");
    SYM(LinkDestroy, "cuLinkDestroy");
    SYM(ModuleLoadData, "cuModuleLoadData");
    SYM(ModuleGetFunction, "cuModuleGetFunction");
    SYM(ModuleGetGlobal, "cuModuleGetGlobal_v2");
    SYM(FuncGetAttribute, "cuFuncGetAttribute");
    SYM(MemAlloc, "cuMemAlloc_v2");
    SYM(MemFree, "cuMemFree_v2");
    SYM(MemcpyHtoD, "cuMemcpyHtoD_v2");
    SYM(MemcpyDtoH, "cuMemcpyDtoH_v2");
    SYM(MemsetD8, "cuMemsetD8_v2");
    SYM(LaunchKernel, "cuLaunchKernel");
    SYM(GetErrorName, "cuGetErrorName");
    SYM(GetErrorString, "cuGetErrorString");
#undef SYM
}

/* ---- Failing a case: the child prints one FAIL line and exits 1 ---- */
static const char *case_name;

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s: ", case_name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    exit(1);
}

static const char *cu_error(CUresult r) {
    static char text[512];
    const char *name = "?", *desc = "?";
    cu.GetErrorName(r, &name);
    cu.GetErrorString(r, &desc);
    snprintf(text, sizeof text, "%s (%d: %s)", name, r, desc);
    return text;
}

#define CHECK(call)                                               \
    do {                                                          \
        CUresult r_ = (call);                                     \
        if (r_ != 0)                                              \
            fail("%s: %s", #call, cu_error(r_));                  \
    } while (0)

/* ---- The manifest ---- */
#define MAX_IMAGES 64
#define MAX_NAMES 64
#define MAX_PARAMS 16

typedef struct {
    char kernel[128];
    int index;
    char kind[16];
} Param;

typedef struct {
    char file[128], unit[64];
    char *kernels[MAX_NAMES], *exports[MAX_NAMES], *imports[MAX_NAMES];
    int nkernels, nexports, nimports, dummy;
    Param params[MAX_NAMES * 4];
    int nparams;
    char *ptx;
} Image;

static Image images[MAX_IMAGES];
static int nimages;
static const char *ptx_dir;

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(n + 1);
    if (fread(text, 1, n, f) != (size_t)n) {
        fclose(f);
        free(text);
        return NULL;
    }
    text[n] = 0;
    fclose(f);
    return text;
}

static void read_manifest(void) {
    char path[4096], line[1024];
    snprintf(path, sizeof path, "%s/manifest.txt", ptx_dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ptx_check: cannot read %s\n", path);
        exit(2);
    }
    Image *im = NULL;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char a[512], b[512], c[512], d[512];
        if (sscanf(line, "image %511s %511s", a, b) == 2) {
            if (nimages == MAX_IMAGES)
                exit(2);
            im = &images[nimages++];
            snprintf(im->file, sizeof im->file, "%s", a);
            snprintf(im->unit, sizeof im->unit, "%s", b);
            snprintf(path, sizeof path, "%s/%s", ptx_dir, a);
            if (!(im->ptx = read_text(path))) {
                fprintf(stderr, "ptx_check: cannot read %s\n", path);
                exit(2);
            }
        } else if (!im) {
            continue;
        } else if (sscanf(line, "kernel %511s", a) == 1 && im->nkernels < MAX_NAMES) {
            im->kernels[im->nkernels++] = strdup(a);
        } else if (sscanf(line, "export %511s", a) == 1 && im->nexports < MAX_NAMES) {
            im->exports[im->nexports++] = strdup(a);
        } else if (sscanf(line, "import %511s", a) == 1 && im->nimports < MAX_NAMES) {
            im->imports[im->nimports++] = strdup(a);
        } else if (strcmp(line, "dummy") == 0) {
            im->dummy = 1;
        } else if (sscanf(line, "param %511s %511s %511s %511s", a, b, c, d) == 4 && im->nparams < MAX_NAMES * 4) {
            Param *p = &im->params[im->nparams++];
            snprintf(p->kernel, sizeof p->kernel, "%s", a);
            p->index = atoi(b);
            snprintf(p->kind, sizeof p->kind, "%s", c);
        }
    }
    fclose(f);
}

static int has(char **names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

static int image_of_kernel(const char *unit, const char *kernel) {
    for (int i = 0; i < nimages; i++)
        if (strcmp(images[i].unit, unit) == 0 && has(images[i].kernels, images[i].nkernels, kernel))
            return i;
    return -1;
}

/* The image that exports `symbol`: first in `unit`, then in any unit; never a dummy. */
static int exporter(const char *unit, const char *symbol) {
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nimages; i++)
            if (!images[i].dummy && (pass == 1 || strcmp(images[i].unit, unit) == 0) &&
                has(images[i].exports, images[i].nexports, symbol))
                return i;
    return -1;
}

/* ---- Linking and loading a kernel's module ---- */
static char link_info[1 << 16], link_error[1 << 16];

typedef struct {
    CUmodule module;
    CUfunction function;
    int image;
    char linked[512];
} Kernel;

static Kernel get_kernel(const char *unit, const char *name) {
    Kernel k = {0};
    int set[MAX_IMAGES], n = 0;
    k.image = image_of_kernel(unit, name);
    if (k.image < 0)
        fail("no image of unit %s has kernel %s", unit, name);
    set[n++] = k.image;
    for (int i = 0; i < n; i++) {
        Image *im = &images[set[i]];
        for (int j = 0; j < im->nimports; j++) {
            int e = exporter(unit, im->imports[j]);
            if (e < 0)
                fail("no image exports %s, which %s imports", im->imports[j], im->file);
            int seen = 0;
            for (int s = 0; s < n; s++)
                seen |= set[s] == e;
            if (!seen)
                set[n++] = e;
        }
    }
    int options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                     CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE};
    void *values[] = {link_info, (void *)(uintptr_t)sizeof link_info, link_error, (void *)(uintptr_t)sizeof link_error,
                      (void *)(uintptr_t)1};
    CUlinkState state;
    CHECK(cu.LinkCreate(5, options, values, &state));
    for (int i = 0; i < n; i++) {
        Image *im = &images[set[i]];
        size_t len = strlen(k.linked);
        snprintf(k.linked + len, sizeof k.linked - len, "%s%s", i ? "+" : "", im->file);
        CUresult r = cu.LinkAddData(state, CU_JIT_INPUT_PTX, im->ptx, strlen(im->ptx) + 1, im->file, 0, NULL, NULL);
        if (r != 0)
            fail("cuLinkAddData(%s): %s; JIT log: %s", im->file, cu_error(r), link_error);
    }
    void *cubin;
    size_t size;
    CUresult r = cu.LinkComplete(state, &cubin, &size);
    if (r != 0)
        fail("cuLinkComplete(%s): %s; JIT log: %s", k.linked, cu_error(r), link_error);
    CHECK(cu.ModuleLoadData(&k.module, cubin));
    CHECK(cu.LinkDestroy(state));
    CHECK(cu.ModuleGetFunction(&k.function, k.module, name));
    const char *log = getenv("PTX_CHECK_JIT_LOG");
    if (log) {
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "== %s: %s (%s)\n%s\n", case_name, name, k.linked, link_info);
            fclose(f);
        }
    }
    return k;
}

/* ---- Arguments and launches ---- */
enum { ARG_BUF, ARG_LOCAL, ARG_VALUE };

typedef struct {
    int kind;
    size_t local_bytes;
    unsigned char value[16];
} Arg;

static Arg buf(CUdeviceptr p) {
    Arg a = {.kind = ARG_BUF};
    memcpy(a.value, &p, sizeof p);
    return a;
}
static Arg local_bytes(size_t bytes) {
    Arg a = {.kind = ARG_LOCAL, .local_bytes = bytes};
    return a;
}
static Arg val(const void *v, size_t size) {
    Arg a = {.kind = ARG_VALUE};
    memcpy(a.value, v, size);
    return a;
}
static Arg i32(int32_t v) { return val(&v, 4); }
static Arg u64(uint64_t v) { return val(&v, 8); }
static Arg f32(float v) { return val(&v, 4); }
static Arg u8(uint8_t v) { return val(&v, 1); }

static CUdeviceptr dev_from(const void *host, size_t bytes) {
    CUdeviceptr p;
    CHECK(cu.MemAlloc(&p, bytes));
    CHECK(cu.MemcpyHtoD(p, host, bytes));
    return p;
}
static CUdeviceptr dev_zero(size_t bytes) {
    CUdeviceptr p;
    CHECK(cu.MemAlloc(&p, bytes));
    CHECK(cu.MemsetD8(p, 0, bytes));
    return p;
}
static void *dev_read(CUdeviceptr p, size_t bytes) {
    void *host = malloc(bytes);
    CHECK(cu.MemcpyDtoH(host, p, bytes));
    return host;
}

/* What the PASS line says about the kernels a case launched. */
static char notes[1024];

/* Launches `kernel` of `unit` over `global` in work-groups of `local` (dims 1..3), with the
 * arguments in order; waits for it. */
static void launch(const char *unit, const char *kernel, int dims, const size_t *global, const size_t *local, int nargs,
                   Arg *args) {
    Kernel k = get_kernel(unit, kernel);
    Image *im = &images[k.image];
    /* The arguments against the kernel's parameters as `SYCL/kernel arguments` records them. */
    int nparams = 0;
    for (int i = 0; i < im->nparams; i++) {
        Param *p = &im->params[i];
        if (strcmp(p->kernel, kernel) != 0)
            continue;
        nparams++;
        if (p->index < nargs && (strcmp(p->kind, "Local") == 0) != (args[p->index].kind == ARG_LOCAL))
            fail("%s: parameter %d is %s, the launch disagrees", kernel, p->index, p->kind);
    }
    if (nparams && nparams != nargs)
        fail("%s has %d parameters, the launch passes %d", kernel, nparams, nargs);
    size_t shared = 0;
    uint64_t offsets[MAX_PARAMS];
    void *params[MAX_PARAMS];
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == ARG_LOCAL) {
            shared = (shared + 15) & ~(size_t)15;
            offsets[i] = shared;
            shared += args[i].local_bytes;
            params[i] = &offsets[i];
        } else {
            params[i] = args[i].value;
        }
    }
    unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
    for (int d = 0; d < dims; d++) {
        if (global[d] % local[d])
            fail("local size %zu does not divide global size %zu", local[d], global[d]);
        grid[d] = global[d] / local[d];
        block[d] = local[d];
    }
    shared = ((shared + 3) & ~(size_t)3) + (size_t)(dims - 1);
    CUresult r = cu.LaunchKernel(k.function, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, NULL, params, NULL);
    if (r != 0)
        fail("cuLaunchKernel(%s): %s", kernel, cu_error(r));
    r = cu.CtxSynchronize();
    if (r != 0)
        fail("%s: %s", kernel, cu_error(r));
    int regs = 0, spill = 0, static_shared = 0;
    cu.FuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k.function);
    cu.FuncGetAttribute(&spill, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k.function);
    cu.FuncGetAttribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k.function);
    size_t len = strlen(notes);
    snprintf(notes + len, sizeof notes - len, "%s%s: %s, %d regs, %d B local, %d+%zu B shared", len ? "; " : "", kernel,
             k.linked, regs, spill, static_shared, shared);
}

#define ARGS(...) (int)(sizeof((Arg[]){__VA_ARGS__}) / sizeof(Arg)), (Arg[]){__VA_ARGS__}
#define SIZES(...) (size_t[]){__VA_ARGS__}

static void launch1(const char *unit, const char *kernel, size_t global, size_t local, int nargs, Arg *args) {
    launch(unit, kernel, 1, &global, &local, nargs, args);
}

/* ---- Comparing ---- */
static void expect_i32(const char *what, const int32_t *got, const int32_t *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail("%s[%zu]: got %d, want %d", what, i, got[i], want[i]);
}
static void expect_f32_exact(const char *what, const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && !(isnan(got[i]) && isnan(want[i])))
            fail("%s[%zu]: got %.9g, want %.9g", what, i, got[i], want[i]);
}
/* Every got[i] within tol * max(scale[i], 1) of want[i] (scale NULL: |want[i]|). */
static void expect_close(const char *what, const double *got, const double *want, const double *scale, size_t n, double tol) {
    for (size_t i = 0; i < n; i++) {
        double s = scale ? scale[i] : fabs(want[i]);
        double limit = tol * (s > 1.0 ? s : 1.0);
        if (!(fabs(got[i] - want[i]) <= limit))
            fail("%s[%zu]: got %.17g, want %.17g (tolerance %.3g)", what, i, got[i], want[i], limit);
    }
}
static double *f64_of(const float *v, size_t n) {
    double *out = malloc(n * sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = v[i];
    return out;
}

/* The deterministic generator of tests/tests/real_world.rs (a 64-bit LCG). */
static uint64_t lcg;
static uint32_t next_u32(void) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(lcg >> 33);
}
static float rand_f32(float lo, float hi) { return lo + (hi - lo) * ((float)next_u32() / (float)(1ULL << 31)); }
static int32_t rand_i32(int32_t lo, int32_t hi) { return lo + (int32_t)(next_u32() % (uint32_t)(hi - lo)); }
static float *rand_f32s(size_t n, float lo, float hi) {
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = rand_f32(lo, hi);
    return v;
}

/* ================= The cases ================= */

/* -- Across modules: xapp's kernels call xlib's exports -- */
static void case_x_scale(void) {
    size_t n = 1024;
    lcg = 11;
    float *in = rand_f32s(n, -10, 10), table[1] = {3.0f};
    CUdeviceptr din = dev_from(in, n * 4), dout = dev_zero(n * 4), dtable = dev_from(table, 4);
    launch1("xapp", "x_scale", n, 64, ARGS(buf(din), buf(dout), buf(dtable)));
    float *got = dev_read(dout, n * 4), want[1024];
    for (size_t i = 0; i < n; i++)
        want[i] = in[i] * 3.0f;
    expect_f32_exact("out", got, want, n);
}

static void case_x_fract(void) {
    size_t n = 1024;
    lcg = 12;
    float *in = rand_f32s(n, -10, 10);
    in[0] = -0.0f, in[1] = 3.0f, in[2] = -2.5f;
    CUdeviceptr din = dev_from(in, n * 4), dfr = dev_zero(n * 4), dwh = dev_zero(n * 4);
    launch1("xapp", "x_fract", n, 128, ARGS(buf(din), buf(dfr), buf(dwh)));
    float *fr = dev_read(dfr, n * 4), *wh = dev_read(dwh, n * 4), want_fr[1024], want_wh[1024];
    for (size_t i = 0; i < n; i++) {
        want_wh[i] = floorf(in[i]);
        want_fr[i] = fminf(in[i] - floorf(in[i]), 0x1.fffffep-1f);
    }
    expect_f32_exact("fract", fr, want_fr, n);
    expect_f32_exact("whole", wh, want_wh, n);
}

static void case_x_norm(void) {
    size_t n = 1000;
    lcg = 13;
    double xy[2000], want[1000];
    for (size_t i = 0; i < 2 * n; i++)
        xy[i] = rand_f32(-100, 100) / 3.0;
    for (size_t i = 0; i < n; i++)
        want[i] = sqrt(xy[2 * i] * xy[2 * i] + xy[2 * i + 1] * xy[2 * i + 1]);
    CUdeviceptr dxy = dev_from(xy, sizeof xy), dd = dev_zero(n * 8);
    launch1("xapp", "x_norm", n, 100, ARGS(buf(dxy), buf(dd)));
    expect_close("d", dev_read(dd, n * 8), want, NULL, n, 1e-15);
}

static void case_x_mix(void) {
    size_t n = 512;
    int32_t want[512];
    CUdeviceptr d = dev_zero(n * 4);
    launch1("xapp", "x_mix", n, 64, ARGS(buf(d)));
    for (size_t i = 0; i < n; i++)
        want[i] = (int32_t)(3 * i + 1) + (int32_t)i - 1; /* the library's helper, then the app's */
    expect_i32("o", dev_read(d, n * 4), want, n);
}

static void tile_sum_case(const char *kernel) {
    size_t global = 1024, group = 64, groups = global / group;
    static const float weights[4] = {0.5f, 1.0f, 1.5f, 2.0f};
    float in[1024], want[16];
    for (size_t i = 0; i < global; i++)
        in[i] = (float)((i * 7) % 16 + 1) / 4.0f; /* quarters: every sum is exact, in any order */
    for (size_t g = 0; g < groups; g++) {
        float s = 0;
        for (size_t l = 0; l < group; l++)
            s += in[g * group + l] * weights[l & 3];
        want[g] = s * in[0];
    }
    CUdeviceptr din = dev_from(in, sizeof in), dout = dev_zero(groups * 4);
    launch1("xapp", kernel, global, group, ARGS(buf(din), buf(dout), local_bytes(group * 4)));
    expect_f32_exact("out", dev_read(dout, groups * 4), want, groups);
}
static void case_tile_sum(void) { tile_sum_case("tile_sum"); }
static void case_tile_sums(void) { tile_sum_case("tile_sums"); }

static void case_two_locals(void) {
    size_t global = 240, group = 48; /* 48 ints: the doubles start at byte 192 */
    int32_t in[240], want[240];
    lcg = 14;
    for (size_t i = 0; i < global; i++)
        in[i] = rand_i32(-1000, 1000);
    for (size_t i = 0; i < global; i++) {
        size_t base = i / group * group, l = i % group;
        want[i] = in[base + group - 1 - l] + in[base + (l + 1) % group];
    }
    CUdeviceptr din = dev_from(in, sizeof in), dout = dev_zero(sizeof in);
    launch1("xapp", "two_locals", global, group, ARGS(buf(din), buf(dout), local_bytes(group * 4), local_bytes(group * 8)));
    expect_i32("out", dev_read(dout, sizeof in), want, global);
}

static void launch_info_case(int dims, const size_t *global, const size_t *local) {
    size_t n = 1;
    for (int d = 0; d < dims; d++)
        n *= global[d];
    CUdeviceptr d = dev_zero(n * 16);
    launch("xapp", "launch_info", dims, global, local, ARGS(buf(d)));
    int32_t *got = dev_read(d, n * 16), *want = malloc(n * 16);
    for (size_t i = 0; i < n; i++) {
        size_t x = i % global[0], y = dims > 1 ? i / global[0] : 0;
        want[4 * i] = dims;
        want[4 * i + 1] = 0;
        want[4 * i + 2] = (int32_t)((dims > 1 ? (y % local[1]) * local[0] : 0) + x % local[0]);
        want[4 * i + 3] = (int32_t)i;
    }
    expect_i32("o", got, want, 4 * n);
}
static void case_launch_info_1d(void) { launch_info_case(1, SIZES(256), SIZES(64)); }
static void case_launch_info_2d(void) { launch_info_case(2, SIZES(16, 8), SIZES(8, 4)); }

/* For element i of `in`, in blocks of `size`: the sum of its block, and the maximum of the
 * block's elements before it (through it when `inclusive`; INT_MIN for none). */
static void block_reduce_scan(const int32_t *in, size_t i, size_t size, int inclusive, int32_t *sum, int32_t *max) {
    size_t start = i / size * size;
    *sum = 0, *max = INT_MIN;
    for (size_t j = start; j < start + size; j++) {
        *sum += in[j];
        if (j < i + (inclusive ? 1 : 0))
            *max = in[j] > *max ? in[j] : *max;
    }
}

static void case_warps(void) {
    size_t global = 256, group = 64;
    int32_t in[256], want[1024];
    lcg = 15;
    for (size_t i = 0; i < global; i++)
        in[i] = rand_i32(-100, 100);
    for (size_t i = 0; i < global; i++) {
        size_t w = i / 32 * 32;
        block_reduce_scan(in, i, 32, 1, &want[4 * i], &want[4 * i + 1]);
        want[4 * i + 2] = in[w + 3];
        want[4 * i + 3] = (int32_t)(i % 32 + 100 * ((i % group) / 32) + 10000 * (group / 32));
    }
    CUdeviceptr din = dev_from(in, sizeof in), dout = dev_zero(sizeof want);
    launch1("xapp", "warps", global, group, ARGS(buf(din), buf(dout)));
    expect_i32("o", dev_read(dout, sizeof want), want, 4 * global);
}

static void case_group_ops(void) {
    size_t global = 256, group = 64;
    int32_t in[256], want[768];
    lcg = 16;
    for (size_t i = 0; i < global; i++)
        in[i] = rand_i32(-1000, 1000);
    for (size_t i = 0; i < global; i++) {
        size_t g = i / group * group;
        block_reduce_scan(in, i, group, 0, &want[3 * i], &want[3 * i + 1]);
        want[3 * i + 2] = in[g + 5];
    }
    CUdeviceptr din = dev_from(in, sizeof in), dout = dev_zero(sizeof want);
    launch1("xapp", "group_ops", global, group, ARGS(buf(din), buf(dout)));
    expect_i32("o", dev_read(dout, sizeof want), want, 3 * global);
}

static void case_x_dots(void) {
    size_t n = 128;
    float a[1024], want[128];
    for (size_t i = 0; i < 8 * n; i++)
        a[i] = (float)((int)(i * 5 % 9) - 4);
    for (size_t i = 0; i < n; i++) {
        float s = 0;
        for (int j = 0; j < 4; j++)
            s += a[8 * i + j] * a[8 * i + 4 + j];
        want[i] = s * s;
    }
    CUdeviceptr da = dev_from(a, sizeof a), dout = dev_zero(n * 4);
    launch1("xapp", "x_dots", n, 32, ARGS(buf(da), buf(dout)));
    expect_f32_exact("out", dev_read(dout, n * 4), want, n);
}

static void case_call_ops(void) {
    size_t n = 256;
    int32_t in[256], want[256];
    for (size_t i = 0; i < n; i++) {
        in[i] = (int32_t)i - 100;
        want[i] = in[i] * (i & 1 ? 3 : 2);
    }
    CUdeviceptr din = dev_from(in, sizeof in), dout = dev_zero(sizeof in);
    launch1("vf", "call_ops", n, 64, ARGS(buf(din), buf(dout)));
    expect_i32("o", dev_read(dout, sizeof in), want, n);
}

/* -- tests/kernels -- */
static void sgemm_case(const char *unit, size_t wptm, size_t wptn, size_t m, size_t n, size_t k) {
    lcg = 3;
    float *a = rand_f32s(m * k, -1, 1), *b = rand_f32s(k * n, -1, 1), *c = rand_f32s(m * n, -1, 1);
    float alpha = 1.5f, beta = 0.5f;
    double *want = malloc(m * n * 8), *scale = malloc(m * n * 8);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double sum = 0, magnitude = 0;
            for (size_t p = 0; p < k; p++) {
                double term = (double)a[i * k + p] * b[p * n + j];
                sum += term;
                magnitude += fabs(term);
            }
            want[i * n + j] = alpha * sum + beta * (double)c[i * n + j];
            scale[i * n + j] = fabs(alpha) * magnitude + fabs(beta * c[i * n + j]);
        }
    CUdeviceptr da = dev_from(a, m * k * 4), db = dev_from(b, k * n * 4), dc = dev_from(c, m * n * 4);
    launch(unit, "sgemm_tiled", 2, SIZES(n / wptn, m / wptm), SIZES(8, 8),
           ARGS(i32(m), i32(n), i32(k), buf(da), buf(db), buf(dc), f32(alpha), f32(beta)));
    float *got = dev_read(dc, m * n * 4);
    expect_close("C", f64_of(got, m * n), want, scale, m * n, 1e-5);
}
static void case_sgemm_64x64(void) { sgemm_case("sgemm_64x64", 8, 8, 128, 128, 128); }
static void case_sgemm_32x64(void) { sgemm_case("sgemm_32x64", 4, 8, 64, 128, 96); }

static void case_nbody(void) {
    size_t n = 1024, group = 64;
    float dt = 0.01f;
    double softening = 0.01;
    float *pos = malloc(4 * n * 4), *vel = malloc(4 * n * 4);
    lcg = 4;
    for (size_t i = 0; i < n; i++) {
        pos[4 * i] = rand_f32(-1, 1);
        pos[4 * i + 1] = rand_f32(-1, 1);
        pos[4 * i + 2] = rand_f32(-1, 1);
        pos[4 * i + 3] = rand_f32(0.5f, 1.5f);
    }
    for (size_t i = 0; i < n; i++) {
        vel[4 * i] = rand_f32(-0.1f, 0.1f);
        vel[4 * i + 1] = rand_f32(-0.1f, 0.1f);
        vel[4 * i + 2] = rand_f32(-0.1f, 0.1f);
        vel[4 * i + 3] = 0;
    }
    double *want_pos = malloc(4 * n * 8), *want_vel = malloc(4 * n * 8), *scale = malloc(4 * n * 8);
#define P(i, c) ((double)pos[4 * (i) + (c)])
    for (size_t i = 0; i < n; i++) {
        double acc[3] = {0, 0, 0}, magnitude = 0;
        for (size_t j = 0; j < n; j++) {
            double d[3] = {P(j, 0) - P(i, 0), P(j, 1) - P(i, 1), P(j, 2) - P(i, 2)};
            double inv = 1.0 / sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + softening);
            double f = P(j, 3) * inv * inv * inv;
            for (int c = 0; c < 3; c++) {
                acc[c] += d[c] * f;
                magnitude += fabs(d[c] * f);
            }
        }
        for (int c = 0; c < 4; c++) {
            double v = vel[4 * i + c] + (c < 3 ? acc[c] * dt : 0.0);
            want_vel[4 * i + c] = v;
            want_pos[4 * i + c] = c < 3 ? P(i, c) + v * dt : P(i, 3);
            scale[4 * i + c] = fabs(P(i, c)) + fabs(v) + magnitude * dt;
        }
    }
#undef P
    CUdeviceptr dp = dev_from(pos, 4 * n * 4), dv = dev_from(vel, 4 * n * 4), dnp = dev_zero(4 * n * 4), dnv = dev_zero(4 * n * 4);
    launch1("nbody", "nbody_step", n, group,
            ARGS(buf(dp), buf(dv), buf(dnp), buf(dnv), local_bytes(4 * group * 4), i32(n), f32(dt)));
    expect_close("velocities", f64_of(dev_read(dnv, 4 * n * 4), 4 * n), want_vel, scale, 4 * n, 1e-4);
    expect_close("positions", f64_of(dev_read(dnp, 4 * n * 4), 4 * n), want_pos, scale, 4 * n, 1e-4);
}

static void case_reduce_sum(void) {
    size_t n = 1 << 16, global = 1024, group = 64, groups = global / group;
    float *values = malloc(n * 4), want[16] = {0};
    for (size_t i = 0; i < n; i++)
        values[i] = (float)(i * 7 % 16) / 4.0f;
    for (size_t i = 0; i < n; i++)
        want[(i % global) / group] += values[i];
    CUdeviceptr din = dev_from(values, n * 4), dpart = dev_zero(groups * 4);
    launch1("local_memory", "reduce_sum", global, group, ARGS(buf(din), buf(dpart), local_bytes(group * 4), i32(n)));
    expect_f32_exact("partial", dev_read(dpart, groups * 4), want, groups);
}

static void case_histogram(void) {
    size_t n = 10000, bins = 32;
    uint32_t *data = malloc(n * 4);
    int32_t want[32] = {0};
    lcg = 7;
    for (size_t i = 0; i < n; i++)
        data[i] = next_u32();
    for (size_t i = 0; i < n; i++)
        want[data[i] % bins]++;
    CUdeviceptr dd = dev_from(data, n * 4), dh = dev_zero(bins * 4);
    launch1("local_memory", "histogram", 1024, 64, ARGS(buf(dd), i32(n), buf(dh), local_bytes(bins * 4)));
    expect_i32("hist", dev_read(dh, bins * 4), want, bins);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int32_t *atomics_values(size_t n) {
    int32_t *v = malloc(n * 4);
    lcg = 8;
    for (size_t i = 0; i < n; i++)
        v[i] = rand_i32(-1000, 1000);
    return v;
}

static void case_sum_and_compact(void) {
    size_t n = 4096;
    int32_t *values = atomics_values(n), threshold = 500, sum = 0, nkept = 0;
    int32_t *want = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        sum += values[i];
        if (values[i] > threshold)
            want[nkept++] = values[i];
    }
    qsort(want, nkept, 4, cmp_i32);
    CUdeviceptr din = dev_from(values, n * 4), dsum = dev_zero(4), dcount = dev_zero(4), dkept = dev_zero(n * 4);
    launch1("atomics", "sum_and_compact", n, 256, ARGS(buf(din), buf(dsum), buf(dcount), buf(dkept), i32(threshold)));
    int32_t *got_sum = dev_read(dsum, 4), *count = dev_read(dcount, 4), *kept = dev_read(dkept, n * 4);
    expect_i32("sum", got_sum, &sum, 1);
    expect_i32("count", count, &nkept, 1);
    qsort(kept, nkept, 4, cmp_i32);
    expect_i32("kept", kept, want, nkept);
}

static void case_float_sum_cmpxchg(void) {
    size_t n = 4096;
    float *floats = malloc(n * 4), want = 0;
    for (size_t i = 0; i < n; i++)
        want += floats[i] = (float)(i % 7) - 3.0f;
    CUdeviceptr dfl = dev_from(floats, n * 4), dtotal = dev_zero(4);
    launch1("atomics", "float_sum_cmpxchg", n, 64, ARGS(buf(dfl), buf(dtotal)));
    expect_f32_exact("total", dev_read(dtotal, 4), &want, 1);
}

static void case_max_min(void) {
    size_t n = 4096, group = 64, groups = n / group;
    int32_t *values = atomics_values(n), want[64], max = INT_MIN, min = INT_MAX;
    for (size_t g = 0; g < groups; g++) {
        want[g] = INT_MIN;
        for (size_t i = g * group; i < (g + 1) * group; i++)
            want[g] = values[i] > want[g] ? values[i] : want[g];
    }
    for (size_t i = 0; i < n; i++) {
        max = values[i] > max ? values[i] : max;
        min = values[i] < min ? values[i] : min;
    }
    int32_t lowest = INT_MIN, highest = INT_MAX;
    CUdeviceptr din = dev_from(values, n * 4), dgroup = dev_zero(groups * 4), dmax = dev_from(&lowest, 4), dmin = dev_from(&highest, 4);
    launch1("atomics", "max_min", n, group, ARGS(buf(din), buf(dgroup), buf(dmax), buf(dmin)));
    expect_i32("group_max", dev_read(dgroup, groups * 4), want, groups);
    expect_i32("max_all", dev_read(dmax, 4), &max, 1);
    expect_i32("min_all", dev_read(dmin, 4), &min, 1);
}

/* vload.cl: what VEC_BLOCK makes of blocks of 32 floats. */
#define VEC_BLOCKS 64
static const float VEC_WIDTH[32] = {2, 2, 4, 4, 4, 4, 8, 8, 8, 8, 8, 8, 8, 8, 1, 1,
                                    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16};

static void vload_cases(const char *unit) {
    size_t n = 32 * VEC_BLOCKS;
    lcg = 5;
    float *input = rand_f32s(n, -10, 10), *want = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        want[i] = input[i] * VEC_WIDTH[i % 32];
    CUdeviceptr din = dev_from(input, n * 4), dout = dev_zero(n * 4);
    static const char *kernels[] = {"vload_global", "vload_constant", "vload_private"};
    for (int k = 0; k < 3; k++) {
        CHECK(cu.MemsetD8(dout, 0, n * 4));
        launch1(unit, kernels[k], VEC_BLOCKS, 16, ARGS(buf(din), buf(dout)));
        expect_f32_exact(kernels[k], dev_read(dout, n * 4), want, n);
    }
    CHECK(cu.MemsetD8(dout, 0, n * 4));
    size_t group = 16;
    launch1(unit, "vload_local", VEC_BLOCKS, group, ARGS(buf(din), buf(dout), local_bytes(2 * 32 * group * 4)));
    expect_f32_exact("vload_local", dev_read(dout, n * 4), want, n);

    launch1(unit, "vload_constant_table", VEC_BLOCKS, 16, ARGS(buf(dout)));
    for (size_t i = 0; i < n; i++)
        want[i] = ((float)(i % 32) + 0.5f) * VEC_WIDTH[i % 32] + (float)(i / 32);
    expect_f32_exact("vload_constant_table", dev_read(dout, n * 4), want, n);

    uint8_t bytes[1024], want_bytes[1024];
    for (unsigned i = 0; i < 1024; i++) {
        bytes[i] = (uint8_t)(i * 7 % 256);
        want_bytes[i] = bytes[i] > 155 ? 255 : bytes[i] + 100;
    }
    CUdeviceptr db = dev_from(bytes, 1024), dbo = dev_zero(1024);
    launch1(unit, "brighten_u8", 1024 / 16, 16, ARGS(buf(db), buf(dbo), u8(100)));
    uint8_t *got = dev_read(dbo, 1024);
    for (int i = 0; i < 1024; i++)
        if (got[i] != want_bytes[i])
            fail("brighten_u8[%d]: got %d, want %d", i, got[i], want_bytes[i]);
}
static void case_vload12(void) { vload_cases("vload12"); }
static void case_vload20(void) { vload_cases("vload20"); }

static void case_vload_generic(void) {
    size_t n = 32 * VEC_BLOCKS;
    lcg = 6;
    float *input = rand_f32s(n, -10, 10), *want = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        want[i] = input[i] * VEC_WIDTH[i % 32];
    CUdeviceptr din = dev_from(input, n * 4), dout = dev_zero(n * 4);
    launch1("vload_generic", "vload_generic", VEC_BLOCKS, 32, ARGS(buf(din), buf(dout)));
    expect_f32_exact("vload_generic", dev_read(dout, n * 4), want, n);
}

static void case_divrem(void) {
    int32_t want[1024];
    CUdeviceptr dout = dev_zero(1000 * 4);
    launch1("divrem", "divrem_sum", 1000, 200, ARGS(buf(dout), i32(7)));
    for (int i = 0; i < 1000; i++)
        want[i] = i / 7 + i % 7;
    expect_i32("i / n + i % n", dev_read(dout, 1000 * 4), want, 1000);

    size_t n = 1024;
    int32_t values[1024], quot[1024], rem[1024];
    uint32_t packed[1024];
    lcg = 1;
    for (size_t i = 0; i < n; i++)
        values[i] = rand_i32(-100000, 100000);
    int32_t first[6] = {0, -1, -16, -17, 15, INT_MIN};
    memcpy(values, first, sizeof first);
    for (size_t i = 0; i < n; i++) {
        quot[i] = values[i] / 16;
        rem[i] = values[i] % 16;
        packed[i] = ((uint32_t)values[i] / 16) * 100u + (uint32_t)values[i] % 16;
    }
    CUdeviceptr din = dev_from(values, n * 4), dq = dev_zero(n * 4), dr = dev_zero(n * 4), dp = dev_zero(n * 4);
    launch1("divrem", "divrem_by_16", n, 128, ARGS(buf(din), buf(dq), buf(dr), buf(dp)));
    expect_i32("x / 16", dev_read(dq, n * 4), quot, n);
    expect_i32("x % 16", dev_read(dr, n * 4), rem, n);
    expect_i32("unsigned x / 16 and x % 16", dev_read(dp, n * 4), (int32_t *)packed, n);

    size_t width = 37, height = 29, items = width * height;
    int32_t *xy = malloc(items * 8);
    for (size_t i = 0; i < items; i++)
        xy[2 * i] = (int32_t)(i % width), xy[2 * i + 1] = (int32_t)(i / width);
    CUdeviceptr dxy = dev_zero(items * 8);
    launch1("divrem", "index_to_xy", items, 37, ARGS(buf(dxy), u64(width)));
    expect_i32("64-bit i / w and i % w", dev_read(dxy, items * 8), xy, 2 * items);
}

static void case_bounds(void) {
    size_t n = 1000, padded = 1024;
    lcg = 2;
    float *xyz = rand_f32s(3 * padded, -1, 1), lo = -0.5f, hi = 0.5f;
    int32_t want[1024];
    for (size_t i = 0; i < padded; i++) {
        int in = i < n;
        for (int c = 0; c < 3; c++)
            in = in && xyz[3 * i + c] >= lo && xyz[3 * i + c] < hi;
        want[i] = in;
    }
    CUdeviceptr dxyz = dev_from(xyz, 3 * padded * 4), din = dev_zero(padded * 4);
    launch1("bounds", "in_box", padded, 128, ARGS(buf(dxyz), buf(din), f32(lo), f32(hi), i32(n)));
    expect_i32("in_box", dev_read(din, padded * 4), want, padded);

    int32_t w = 37, h = 23, dx = 3, dy = -2;
    int32_t image[37 * 23], want_img[37 * 23];
    for (int i = 0; i < w * h; i++)
        image[i] = i * 3 + 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int sx = x + dx, sy = y + dy;
            want_img[y * w + x] = sx >= 0 && sy >= 0 && sx < w && sy < h ? image[sy * w + sx] : 0;
        }
    CUdeviceptr dimg = dev_from(image, sizeof image), dout = dev_zero(sizeof image);
    launch("bounds", "shifted", 2, SIZES(40, 24), SIZES(8, 8), ARGS(buf(dimg), buf(dout), i32(w), i32(h), i32(dx), i32(dy)));
    expect_i32("shifted", dev_read(dout, sizeof image), want_img, w * h);
}

static void case_stencil(void) {
    size_t w = 64, h = 48, n = w * h;
    lcg = 10;
    float *in = rand_f32s(n, 0, 1);
    double *want = malloc(n * 8);
    for (size_t i = 0; i < n; i++) {
        size_t x = i % w, y = i / w;
        float v = in[i];
        if (x > 0 && y > 0 && x < w - 1 && y < h - 1)
            v = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
        want[i] = v;
    }
    CUdeviceptr din = dev_from(in, n * 4), dout = dev_zero(n * 4);
    launch("stencil", "stencil5", 2, SIZES(w, h), SIZES(16, 8), ARGS(buf(din), buf(dout), i32(w), i32(h)));
    expect_close("stencil5", f64_of(dev_read(dout, n * 4), n), want, NULL, n, 1e-6);
}

static void case_doubles_pragma(void) {
    size_t n = 1000;
    double xs[1000], pairs[4000], want[1000], want_dot[1000];
    lcg = 9;
    for (size_t i = 0; i < n; i++)
        xs[i] = (double)rand_f32(0.1f, 10.0f) + 1e-9;
    for (size_t i = 0; i < 4 * n; i++)
        pairs[i] = (double)rand_f32(-1, 1) / 3.0;
    double *a = pairs, *b = pairs + 2 * n;
    for (size_t i = 0; i < n; i++) {
        double x = xs[i];
        want[i] = sqrt(x) + exp(-x) * fma(x, 2.0, 1.0) + sin(x) / (1.0 + x * x);
        want_dot[i] = a[2 * i] * b[2 * i] + a[2 * i + 1] * b[2 * i + 1];
    }
    CUdeviceptr dx = dev_from(xs, n * 8), dout = dev_zero(n * 8);
    launch1("doubles_pragma", "double_math", n, 100, ARGS(buf(dx), buf(dout)));
    expect_close("double_math", dev_read(dout, n * 8), want, NULL, n, 1e-13);
    CUdeviceptr da = dev_from(a, 2 * n * 8), db = dev_from(b, 2 * n * 8);
    launch1("doubles_pragma", "double_dot", n, 100, ARGS(buf(da), buf(db), buf(dout)));
    expect_close("double_dot", dev_read(dout, n * 8), want_dot, NULL, n, 1e-15);
}

static void case_horner(void) {
    size_t n = 1000;
    float x[1000];
    double coeffs[6] = {1.0, -0.5, 1.0 / 3.0, 0.25, -0.2, 1.0 / 7.0}, want[1000];
    int degree = 5;
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)i / 100.0f - 5.0f;
        double acc = 0;
        for (int k = degree; k >= 0; k--)
            acc = acc * x[i] + coeffs[k];
        want[i] = acc;
    }
    CUdeviceptr dx = dev_from(x, sizeof x), dc = dev_from(coeffs, sizeof coeffs), dout = dev_zero(n * 8), dout_f = dev_zero(n * 4);
    launch1("doubles_plain", "horner", n, 100, ARGS(buf(dx), buf(dc), i32(degree), buf(dout), buf(dout_f)));
    expect_close("horner", dev_read(dout, n * 8), want, NULL, n, 1e-13);
    expect_close("convert_float", f64_of(dev_read(dout_f, n * 4), n), want, NULL, n, 1e-7);
}

/* ================= Running them ================= */
typedef struct {
    const char *name;
    void (*run)(void);
} Case;

static const Case cases[] = {
    {"xapp/x_scale", case_x_scale},
    {"xapp/x_fract", case_x_fract},
    {"xapp/x_norm", case_x_norm},
    {"xapp/x_mix", case_x_mix},
    {"xapp/x_dots", case_x_dots},
    {"xapp/tile_sum", case_tile_sum},
    {"xapp/tile_sums", case_tile_sums},
    {"xapp/two_locals", case_two_locals},
    {"xapp/launch_info_1d", case_launch_info_1d},
    {"xapp/launch_info_2d", case_launch_info_2d},
    {"xapp/warps", case_warps},
    {"xapp/group_ops", case_group_ops},
    {"vf/call_ops", case_call_ops},
    {"sgemm_64x64", case_sgemm_64x64},
    {"sgemm_32x64", case_sgemm_32x64},
    {"nbody", case_nbody},
    {"local_memory/reduce_sum", case_reduce_sum},
    {"local_memory/histogram", case_histogram},
    {"atomics/sum_and_compact", case_sum_and_compact},
    {"atomics/float_sum_cmpxchg", case_float_sum_cmpxchg},
    {"atomics/max_min", case_max_min},
    {"vload12", case_vload12},
    {"vload20", case_vload20},
    {"vload_generic", case_vload_generic},
    {"divrem", case_divrem},
    {"bounds", case_bounds},
    {"stencil", case_stencil},
    {"doubles_pragma", case_doubles_pragma},
    {"doubles_plain/horner", case_horner},
};

static void run_case(const Case *c) {
    case_name = c->name;
    alarm(60); /* a hang (a barrier not every work-item reaches) fails the case */
    load_driver();
    CUdevice dev;
    CUcontext ctx;
    CHECK(cu.Init(0));
    CHECK(cu.DeviceGet(&dev, 0));
    CHECK(cu.DevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cu.CtxSetCurrent(ctx));
    c->run();
    printf("PASS %s (%s)\n", c->name, notes);
    fflush(stdout);
    exit(0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ptx_check DIR [CASE...]\n");
        return 2;
    }
    ptx_dir = argv[1];
    read_manifest();
    {
        /* The device, from a child too: the parent never touches the driver before forking. */
        pid_t pid = fork();
        if (pid == 0) {
            load_driver();
            CUdevice dev;
            int version = 0;
            char name[256] = "?";
            if (cu.Init(0) == 0 && cu.DeviceGet(&dev, 0) == 0)
                cu.DeviceGetName(name, sizeof name, dev);
            cu.DriverGetVersion(&version);
            printf("device: %s, CUDA driver API %d.%d; %d PTX images from %s\n", name, version / 1000, version % 1000 / 10,
                   nimages, ptx_dir);
            fflush(stdout);
            exit(0);
        }
        waitpid(pid, NULL, 0);
    }
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int wanted = argc == 2;
        for (int a = 2; a < argc; a++)
            wanted |= strcmp(argv[a], cases[i].name) == 0;
        if (!wanted)
            continue;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            run_case(&cases[i]);
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            passed++;
        } else {
            failed++;
            if (WIFEXITED(status) && WEXITSTATUS(status) != 1)
                printf("FAIL %s: exited with status %d\n", cases[i].name, WEXITSTATUS(status));
            if (WIFSIGNALED(status))
                printf("FAIL %s: %s\n", cases[i].name,
                       WTERMSIG(status) == SIGALRM ? "no result within 60 s (a hang)" : strsignal(WTERMSIG(status)));
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
