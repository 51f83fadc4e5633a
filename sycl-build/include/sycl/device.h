/* sycl/device.h: the device-side vocabulary of sycl-build, for OpenCL C and C++ for OpenCL.
 *
 * SYCL_EXTERNAL marks a function that other binaries may call: sycl-ld exports it from the
 * device images of this crate's link unit (SYCL's SYCL_EXTERNAL; see docs/DESIGN.md). A
 * declaration of a function defined elsewhere needs no marker, but may carry one for
 * symmetry with the definition. Like a default-visibility function of a host library, it is
 * interposable: when another binary loaded first defines the same function, that definition
 * serves every call, this library's own included, so the compiler inlines no call to it
 * (every function without the marker is hidden, and inlined as usual). */
#ifndef SYCL_DEVICE_H
#define SYCL_DEVICE_H

#define SYCL_EXTERNAL __attribute__((annotate("sycl-external"), visibility("default")))

/* SYCL_DEVICE_HAS(fp16, fp64) on a kernel or device function: SYCL's
 * [[sycl::device_has()]]. The function may only run on devices with these aspects, and
 * sycl-build warns when it uses an aspect it does not list. Aspect names: see
 * sycl-format/src/aspects.rs (fp16, fp64, atomic64, image, ...). */
#define SYCL_DEVICE_HAS(...) __attribute__((annotate("sycl-device-has:" #__VA_ARGS__)))

/* Required work-group and sub-group sizes of a kernel ([[sycl::reqd_work_group_size]],
 * [[sycl::reqd_sub_group_size]]). */
#define SYCL_REQD_WORK_GROUP_SIZE(x, y, z) __attribute__((reqd_work_group_size(x, y, z)))
#define SYCL_REQD_SUB_GROUP_SIZE(n) __attribute__((intel_reqd_sub_group_size(n)))

/* SYCL_SPEC_CONSTANT(int, scale, 2) declares a specialization constant named `scale`, of type
 * int, 2 unless the host sets it; SYCL_SPEC(scale) reads it in device code. sycl-ld gives each
 * name of a link unit one SPIR-V SpecId; sycl-build generates a typed Rust handle for it
 * (`kernels::spec::SCALE`). Declare it once per source that reads it. */
#define SYCL_SPEC_CONSTANT(TYPE, NAME, DEFAULT)                                              \
    __attribute__((overloadable)) TYPE __spirv_SpecConstant(int, TYPE);                       \
    __attribute__((annotate("sycl-spec-constant:" #NAME ":" #TYPE))) static TYPE              \
        __sycl_spec_##NAME(void) {                                                             \
        return __spirv_SpecConstant(0x5C0000 + __COUNTER__, (TYPE)(DEFAULT));                  \
    }
#define SYCL_SPEC(NAME) __sycl_spec_##NAME()

/* Virtual functions (DPC++'s virtual-function sets), with OpenCL C function pointers
 * (#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable).
 * SYCL_INDIRECTLY_CALLABLE(set) on a function: a member of a set, outlined by sycl-ld into an
 * image of its own (plus a dummy with empty bodies when the set needs optional features).
 * SYCL_CALLS_INDIRECTLY(set, ...) on a kernel: it calls into these sets, so it needs what they
 * need. Objects dispatch through tables of function pointers; store the table's *index* in an
 * object, not its address, and objects survive a program rebuild:
 *
 *   typedef float (*area_fn)(__global const struct shape *);
 *   struct shape { int vtable; float size; };
 *   SYCL_INDIRECTLY_CALLABLE(shapes) float square_area(__global const struct shape *s) { return s->size * s->size; }
 *   SYCL_INDIRECTLY_CALLABLE(shapes) float circle_area(__global const struct shape *s) { return 3.14f * s->size * s->size; }
 *   __global area_fn vtables[2][1] = { { square_area }, { circle_area } };   // class index -> methods
 *   #define AREA(s) (vtables[(s)->vtable][0](s))
 *   __kernel SYCL_CALLS_INDIRECTLY(shapes) void areas(__global const struct shape *s, __global float *out)
 *   { out[get_global_id(0)] = AREA(&s[get_global_id(0)]); }
 *
 * Keep the tables __global (not __constant), so the compiler cannot fold a table load into a
 * select between function pointers (the Intel CPU runtime's vectorizer crashes on those). */
#define SYCL_INDIRECTLY_CALLABLE(SET) __attribute__((annotate("sycl-indirectly-callable:" #SET)))
#define SYCL_CALLS_INDIRECTLY(...) __attribute__((annotate("sycl-calls-indirectly:" #__VA_ARGS__)))

#endif /* SYCL_DEVICE_H */
