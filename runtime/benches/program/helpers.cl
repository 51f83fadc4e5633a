#include <sycl/device.h>

// The demo's shared library (fixtures/helpers): the device function the app's kernel imports.
SYCL_EXTERNAL int LibDeviceFunc(int i) { return i * 2; }

__kernel void lib_kernel(__global int *out) {
    size_t i = get_global_id(0);
    out[i] = LibDeviceFunc((int)i) + 100;
}
