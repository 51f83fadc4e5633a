//! A launch's mistakes named before the driver sees them, on both devices: argument count,
//! buffer against value, local memory, value size, a work-group size that does not divide the
//! global range; and, through the typed launchers `include_kernels!` generates, a reduction
//! through local memory that runs right, floats and a view, a vector, a struct by value and
//! buffers of structs.

use sycl_tests::{Run, DEVICES};

#[test]
fn launch_mistakes_are_named_and_typed_launchers_run_on_both_devices() {
    for device in DEVICES {
        let run = Run::new(device, "args-app", &[], &[]);
        let expected = [
            "sums: [120, 376, 632, 888]",
            "too few: invalid argument: kernel `block_sum` takes 4 arguments (global const int*, global int*, local int*, int); got 2",
            "scalar for a buffer: invalid argument: kernel `block_sum` argument 0 (global const int* in) takes a buffer (`&Buffer<T>`); got i32 (4 bytes)",
            "buffer for local memory: invalid argument: kernel `block_sum` argument 2 (local int* scratch) takes local memory (`sycl_runtime::Local::<T>::new(len)`); got a buffer of i32",
            "wrong scalar size: invalid argument: kernel `block_sum` argument 3 (int n) takes int (i32 or u32); got u64 (8 bytes)",
            "group not dividing: invalid argument: kernel `block_sum`: the work-group size [16] does not divide the global range [60] (dimension 0: 60 is not a multiple of 16); round the global range up to a multiple and skip the extra work-items in the kernel",
            "sums by 32: [496, 1520]",
            "saxpy: [74.0, 76.0, 78.0, 80.0]",
            "shift: [Pt { x: 102.5, y: 20.25 }, Pt { x: 206.5, y: 40.25 }]",
        ];
        assert_eq!(run.out.lines().collect::<Vec<_>>(), expected, "{}", run.say());
    }
}
