//! Devices as data on this machine's two CPU devices (Intel's CPU runtime and PoCL): both are
//! listed with their selectors and sane limits, the aspect that tells them apart (`fp16`), a
//! queue opened on each, and a kernel's work-group limits as the drivers enforce them at launch.

use sycl_runtime::{devices, load_device_library, Backend, DeviceInfo, DeviceType, Error, Queue};
use sycl_tests::{device_lib, no_cache, repo_root, stderr};

/// The device `selector` picks, from the list.
fn listed<'d>(devices: &'d [DeviceInfo], selector: &str) -> &'d DeviceInfo {
    devices.iter().find(|d| d.selector == selector).unwrap_or_else(|| {
        panic!("no device with selector `{selector}` among {devices:#?}");
    })
}

#[test]
fn both_cpu_devices_are_listed_with_their_selectors_limits_and_aspects() {
    let all = devices().unwrap();
    let (intel, pocl) = (listed(&all, "intel"), listed(&all, "pocl"));
    for d in [intel, pocl] {
        let what = &d.selector;
        assert_eq!((d.backend, d.device_type), (Backend::OpenCl, DeviceType::Cpu), "{what}");
        assert!(d.compute_units > 0, "{what}: {d:?}");
        assert!(d.global_mem_bytes >= 1 << 20, "{what}: {d:?}");
        assert!(d.local_mem_bytes >= 16 << 10, "{what}: OpenCL's minimum is 16 KiB: {d:?}");
        assert!(d.max_work_group_size >= 1, "{what}: {d:?}");
        assert_eq!(d.compute_capability, None, "{what}: not a CUDA GPU");
        assert!(d.has_aspect("cpu") && d.has_aspect("fp64"), "{what}: {:?}", d.aspects);
        assert!(!d.has_aspect("gpu"), "{what}: {:?}", d.aspects);
    }
    assert!(intel.platform.contains("Intel(R) OpenCL"), "{intel:?}");
    assert!(pocl.platform.contains("Portable Computing Language"), "{pocl:?}");
    assert!(intel.has_aspect("fp16"), "Intel's CPU runtime has cl_khr_fp16: {:?}", intel.aspects);
    assert!(!pocl.has_aspect("fp16"), "PoCL has no cl_khr_fp16: {:?}", pocl.aspects);
    assert!(intel.has_aspect("target_intel_cpu_x86_64") && pocl.has_aspect("target_pocl_cpu"));
    assert!(intel.sub_group_sizes.contains(&8), "{:?}", intel.sub_group_sizes);

    // Each selector picks its device, however the queue is asked for.
    for d in [intel, pocl] {
        assert_eq!(Queue::with_device(&d.selector).unwrap().device(), d);
        let q = Queue::on(d).unwrap();
        assert_eq!(q.device(), d);
        assert_eq!(q.device_name(), d.name);
    }
}

#[test]
fn kernel_work_group_sizes_are_what_the_drivers_enforce() {
    no_cache();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("divrem.sydl");
    let made = device_lib(&[], &file, &[&repo_root().join("tests/kernels/divrem.cl")]);
    assert!(made.status.success(), "{}", stderr(&made));
    let _library = load_device_library(&file).unwrap();

    for selector in ["intel", "pocl"] {
        let q = Queue::with_device(selector).unwrap();
        let sizes = q.kernel_work_group_sizes("divrem_sum").unwrap();
        assert!(
            sizes.max >= sizes.preferred_multiple && sizes.preferred_multiple >= 1,
            "{selector}: {sizes:?}"
        );
        assert!(sizes.max <= q.device().max_work_group_size, "{selector}: {sizes:?}");

        // A work-group of `max` work-items runs; one of twice as many is refused by the driver,
        // and the error names both sizes.
        let n = sizes.max;
        let out = q.buffer::<i32>(2 * n).unwrap();
        q.launch("divrem_sum").arg(&out).arg(7i32).global([n]).local([n]).run().unwrap();
        let want: Vec<i32> = (0..n as i32).map(|i| i / 7 + i % 7).collect();
        assert_eq!(out.read().unwrap()[..n], want, "{selector}: a work-group of {n}");
        let refused = q.launch("divrem_sum").arg(&out).arg(7i32).global([2 * n]).local([2 * n]);
        match refused.run().map(drop) {
            Err(Error::InvalidArgument(e)) => assert!(
                e.starts_with(&format!(
                    "kernel `divrem_sum`: a work-group of {} work-items ([{}]) is more than it takes on ",
                    2 * n,
                    2 * n
                )) && e.contains(&format!("(`{selector}`) (at most {n}: Queue::kernel_work_group_sizes)"))
                    && e.ends_with(
                        "the driver said clEnqueueNDRangeKernel failed with CL_INVALID_WORK_GROUP_SIZE (-54)"
                    ),
                "{selector}: {e}"
            ),
            other => panic!("{selector}: a work-group of {} work-items: {other:?}", 2 * n),
        }
    }
}
