#include <sycl/device.h>

// The demo's kernel (fixtures/app): it calls LibDeviceFunc, which the shared library exports.
SYCL_EXTERNAL int LibDeviceFunc(int i);

__kernel void app_kernel(__global int *out) {
    size_t i = get_global_id(0);
    out[i] = LibDeviceFunc((int)i);
}
