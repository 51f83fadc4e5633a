//! The kind of the errors common mistakes give on each CPU OpenCL device, and the driver's
//! code where a driver refused a call: what a program acts on, from real drivers.

use std::error::Error as _;

use sycl_runtime::test_support::run_source;
use sycl_runtime::{load_device_library, DriverCode, ErrorKind, Queue};

const DEVICES: [&str; 2] = ["intel", "pocl"];

#[test]
fn common_mistakes_have_the_kind_a_program_acts_on() {
    let none = Queue::with_device("no-such-device").err().expect("no device is `no-such-device`");
    assert_eq!((none.kind(), none.code()), (ErrorKind::NotFound, None), "{none}");

    let missing = load_device_library("/no/such/libdevice.so").unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    let io = missing.source().and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(io.map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound), "{missing}");

    for device in DEVICES {
        let q = Queue::with_device(device).unwrap();
        let huge = q.buffer::<u8>(usize::MAX).err().expect("no device allocates usize::MAX bytes");
        assert_eq!(huge.kind(), ErrorKind::InvalidArgument, "{device}: {huge}");
        assert!(!huge.is_out_of_memory(), "{device}: {huge}");

        // This test binary was not linked by sycl-ld: no kernel is anywhere.
        let kernel = q.launch("no_such_kernel").global([1]).run().unwrap_err();
        assert_eq!(kernel.kind(), ErrorKind::NotFound, "{device}: {kernel}");

        let b = q.buffer::<i32>(4).unwrap();
        let short = b.write(&[1, 2]).unwrap_err();
        assert_eq!(short.kind(), ErrorKind::InvalidArgument, "{device}: {short}");

        let build = run_source(&q, "kernel void k(global int *p) { p[0] = ; }", "", "k", &[], 1)
            .unwrap_err();
        assert_eq!((build.kind(), build.code()), (ErrorKind::Build, None), "{device}: {build}");
    }
}

/// A launch the driver itself refuses (`run_source` checks no arguments: the kernel's one
/// argument is never set) keeps the driver's code, and which driver, with its name.
#[test]
fn a_launch_the_driver_refuses_keeps_the_drivers_code() {
    for device in DEVICES {
        let q = Queue::with_device(device).unwrap();
        let e = run_source(&q, "kernel void k(global int *p) { p[0] = 1; }", "", "k", &[], 1)
            .unwrap_err();
        // CL_INVALID_KERNEL_ARGS
        assert_eq!(e.driver_code(), Some(DriverCode::OpenCl(-52)), "{device}: {e}");
        assert_eq!((e.kind(), e.code()), (ErrorKind::Driver, Some(-52)), "{device}: {e}");
        assert!(
            e.to_string()
                .ends_with("clEnqueueNDRangeKernel failed with CL_INVALID_KERNEL_ARGS (-52)"),
            "{device}: {e}"
        );
    }
}
