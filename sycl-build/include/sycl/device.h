/* sycl/device.h: the device-side vocabulary of sycl-build, for OpenCL C and C++ for OpenCL.
 *
 * SYCL_EXTERNAL marks a function that other binaries may call: sycl-ld exports it from the
 * device images of this crate's link unit (the seeds' SYCL_EXTERNAL / sycl-module-id). A
 * declaration of a function defined elsewhere needs no marker, but may carry one for
 * symmetry with the definition. */
#ifndef SYCL_DEVICE_H
#define SYCL_DEVICE_H

#define SYCL_EXTERNAL __attribute__((annotate("sycl-external")))

#endif /* SYCL_DEVICE_H */
