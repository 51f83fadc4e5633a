//! The fixtures, built with the real toolchain and run on the CPU OpenCL devices: the
//! resolution of imports across libraries on both (Intel's CPU runtime and PoCL), device
//! selection, and what a machine without devices is told.

use std::process::Command;

use sycl_tests::{
    cuda_gpu, discovered, fixtures, output, run_fixture_with, stderr, stdout, unresolved, Device,
    Run, DEVICES,
};

#[test]
fn the_demo_links_the_library_function_at_run_time() {
    for device in DEVICES {
        let run = Run::new(device, "app", &[], &[]);
        assert_eq!(run.out, "0 2 4 6 8 10 12 14\n", "{}", run.say());
        assert_eq!(
            run.events("discover"),
            discovered(&["app: 2 images", "deps/libhelpers.so: 2 images"]),
            "{}",
            run.say()
        );
        // libhelpers.so's image 0 holds its own kernel; image 1 exports LibDeviceFunc.
        assert_eq!(
            run.events("resolve"),
            ["LibDeviceFunc -> libhelpers.so image 1 (for kernel app_kernel)"],
            "{}",
            run.say()
        );
        assert_eq!(
            run.builds(),
            run.first_build("app_kernel", "app image 0 + libhelpers.so image 1"),
            "{}",
            run.say()
        );
    }
}

#[test]
fn imports_resolve_transitively_through_a_chain_of_libraries() {
    for device in DEVICES {
        let run = Run::new(device, "chain-app", &[], &[]);
        assert_eq!(run.out, "1 4 7 10 13 16 19 22\n", "{}", run.say());
        assert_eq!(
            run.events("resolve"),
            [
                "a_func -> libchain_a.so image 0 (for kernel chain_kernel)",
                "b_func -> libchain_b.so image 0 (for kernel chain_kernel)"
            ],
            "{}",
            run.say()
        );
        assert_eq!(
            run.builds(),
            run.first_build(
                "chain_kernel",
                "chain-app image 0 + libchain_a.so image 0 + libchain_b.so image 0"
            ),
            "{}",
            run.say()
        );
    }
}

#[test]
fn an_rlib_dependency_links_its_device_code_statically() {
    for device in DEVICES {
        let run = Run::new(device, "static-app", &[], &[]);
        assert_eq!(run.out, "0 2 4 6 8 10 12 14\n", "{}", run.say());
        assert_eq!(
            run.events("discover"),
            discovered(&["static-app: 3 images"]),
            "the rlib's two images are the executable's own, libhelpers.so is not involved {}",
            run.say()
        );
        assert!(run.events("resolve").is_empty(), "nothing should be imported {}", run.say());
        assert_eq!(
            run.builds(),
            run.first_build("app_kernel", "static-app image 0"),
            "{}",
            run.say()
        );
    }
}

#[test]
fn cpp_for_opencl_overloads_resolve_by_mangled_name() {
    for device in DEVICES {
        let run = Run::new(device, "cpp-app", &[], &[]);
        assert_eq!(run.out, "[0, 10, 20, 30]\n[0.0, 0.5, 1.0, 1.5]\n", "{}", run.say());
        // The library's image, added for the first overload, has the second too.
        assert_eq!(
            run.events("resolve"),
            ["_ZN7mathlib5scaleEf -> libcpp_lib.so image 0 (for kernel scale_both)"],
            "{}",
            run.say()
        );
        assert_eq!(
            run.builds(),
            run.first_build("scale_both", "cpp-app image 0 + libcpp_lib.so image 0"),
            "{}",
            run.say()
        );
    }
}

#[test]
fn an_unresolved_import_is_a_clear_error_and_the_runtime_stays_usable() {
    for device in DEVICES {
        let run = Run::new(device, "unresolved-app", &[], &[]);
        let unresolved = unresolved("NobodyExportsThis", "broken", &["unresolved-app"]);
        assert_eq!(
            run.out.lines().collect::<Vec<&str>>(),
            [
                format!("broken: {unresolved}"),
                "works: [100, 101, 102, 103]".to_string(),
                // A scalar argument reaches the kernel.
                "works: [200, 201, 202, 203]".to_string(),
            ],
            "{}",
            run.say()
        );
        // The broken kernel builds nothing; the second launch reuses the program.
        let mut builds = run.first_build("works", "unresolved-app image 1");
        builds.push(format!("cache-hit works on {}", run.name));
        assert_eq!(run.builds(), builds, "{}", run.say());
    }
}

#[test]
fn an_unknown_device_name_lists_the_devices_there_are() {
    let out = output(Command::new(fixtures().join("app")).env("SYCL_DEVICE", "no-such-device"));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("no device matches SYCL_DEVICE=no-such-device; available devices, each with the selector that picks it:"),
        "{err}"
    );
    let listed = |selector: &str, platform: &str| {
        err.lines()
            .any(|l| l.trim_start().starts_with(selector) && l.contains(&format!(" {platform} / ")))
    };
    assert!(DEVICES.iter().all(|d| listed(&format!("{} ", d.selector), d.platform)), "{err}");
}

#[test]
fn a_machine_without_devices_says_why_and_what_to_install() {
    // An ICD loader that finds no driver registered: no OpenCL platform. A CUDA GPU would
    // still be found (the program ran there, or failed otherwise): this needs a machine
    // without one, which the CUDA driver says, not the program.
    let gpu = cuda_gpu();
    if gpu == Some(true) {
        eprintln!("skipped: a CUDA GPU is here, which the program would find without OpenCL");
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let out = output(
        Command::new(fixtures().join("app"))
            .env("OCL_ICD_VENDORS", empty.path())
            .env_remove("SYCL_DEVICE")
            .env_remove("SYCL_TRACE"),
    );
    let (o, err) = (stdout(&out), stderr(&out));
    assert_eq!((out.status.code(), o.as_str()), (Some(1), ""), "{err}");
    let opencl = "error: no backend found a device (OpenCL: clGetPlatformIDs failed with \
                  CL_PLATFORM_NOT_FOUND_KHR (-1001); CUDA: ";
    let advice = "); no device is available (is an OpenCL runtime installed and registered in \
                  /etc/OpenCL/vendors, or an NVIDIA driver with libcuda.so.1?)\n";
    let cuda = err.strip_prefix(opencl).and_then(|e| e.strip_suffix(advice));
    match gpu {
        // No driver: no CUDA device, and nothing to say of it.
        None => assert_eq!(cuda, Some("no GPU"), "{err}"),
        // A driver without a GPU: its own words (`cuInit` failing with CUDA_ERROR_NO_DEVICE,
        // or no device counted).
        _ => assert!(cuda.is_some_and(|c| !c.is_empty()), "{err}"),
    }
}

#[test]
fn platform_selectors_pick_the_platform_whatever_the_device_is_called() {
    // PoCL names its device after the host CPU: on an Intel host, its device name says Intel.
    let selectors = DEVICES.map(|d| (d.selector, d.platform));
    for (selector, platform) in selectors.into_iter().chain([("Intel:0", Device::INTEL.platform)]) {
        let out = run_fixture_with("app", &[("SYCL_DEVICE", selector)]);
        assert!(out.status.success(), "{selector}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("sycl: device {platform} / ")),
            "{selector}: {}",
            stderr(&out)
        );
        assert_eq!(stdout(&out), "0 2 4 6 8 10 12 14\n");
    }
    // Both are CPU devices: `cpu` alone is ambiguous, and the error says so.
    let out = run_fixture_with("app", &[("SYCL_DEVICE", "cpu")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("SYCL_DEVICE=cpu is ambiguous: it matches 2 devices"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn kernels_without_optional_features_run_beside_ones_with_them() {
    let run = Run::new(Device::INTEL, "features-app", &[], &[]);
    assert_eq!(
        run.out,
        "K1: [0, 3, 6, 9, 12, 15, 18, 21]\nfixed_group: [4, 4, 4, 4, 4, 4, 4, 4]\n",
        "{}",
        run.say()
    );
    assert_eq!(
        run.events("compile").len(),
        2,
        "only the two images launched are compiled {}",
        run.say()
    );
}
