//! The fixtures, built with the real toolchain and run on the Intel CPU OpenCL device.

use sycl_tests::{run_fixture, stderr, stdout};

fn run_ok(name: &str) -> (String, String) {
    let out = run_fixture(name);
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{name} failed:\n{o}{e}");
    assert!(
        e.contains("sycl: device Intel(R) OpenCL"),
        "{name} did not run on the Intel device:\n{e}"
    );
    (o, e)
}

fn count(haystack: &str, prefix: &str) -> usize {
    haystack.lines().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn the_demo_links_the_library_function_at_run_time() {
    let (out, trace) = run_ok("app");
    assert_eq!(out, "0 2 4 6 8 10 12 14\n");
    assert!(
        trace.lines().any(|l| l.starts_with("sycl: discover ") && l.ends_with("/app: 2 images")),
        "{trace}"
    );
    assert!(
        trace
            .lines()
            .any(|l| l.starts_with("sycl: discover ") && l.ends_with("/libhelpers.so: 2 images")),
        "{trace}"
    );
    // libhelpers.so's image 0 holds its own kernel; image 1 exports LibDeviceFunc.
    assert!(
        trace.contains(
            "sycl: resolve LibDeviceFunc -> libhelpers.so image 1 (for kernel app_kernel)"
        ),
        "{trace}"
    );
    assert_eq!(count(&trace, "sycl: link "), 1, "{trace}");
}

#[test]
fn imports_resolve_transitively_through_a_chain_of_libraries() {
    let (out, trace) = run_ok("chain-app");
    assert_eq!(out, "1 4 7 10 13 16 19 22\n");
    assert!(trace.contains("sycl: resolve a_func -> libchain_a.so image 0"), "{trace}");
    assert!(trace.contains("sycl: resolve b_func -> libchain_b.so image 0"), "{trace}");
    assert!(
        trace.contains("link chain_kernel on AMD EPYC: chain-app image 0 + libchain_a.so image 0 + libchain_b.so image 0")
            || trace.contains(": chain-app image 0 + libchain_a.so image 0 + libchain_b.so image 0"),
        "{trace}"
    );
}

#[test]
fn an_rlib_dependency_links_its_device_code_statically() {
    let (out, trace) = run_ok("static-app");
    assert_eq!(out, "0 2 4 6 8 10 12 14\n");
    assert_eq!(count(&trace, "sycl: resolve "), 0, "nothing should be imported:\n{trace}");
    assert!(!trace.contains("libhelpers.so"), "libhelpers.so must not be involved:\n{trace}");
}

#[test]
fn cpp_for_opencl_overloads_resolve_by_mangled_name() {
    let (out, trace) = run_ok("cpp-app");
    assert_eq!(out, "[0, 10, 20, 30]\n[0.0, 0.5, 1.0, 1.5]\n");
    assert!(trace.contains("-> libcpp_lib.so image 0"), "{trace}");
}

#[test]
fn an_unresolved_import_is_a_clear_error_and_the_runtime_stays_usable() {
    let (out, trace) = run_ok("unresolved-app");
    let mut lines = out.lines();
    let broken = lines.next().unwrap();
    assert!(
        broken.starts_with(
            "broken: error: unresolved device symbol `NobodyExportsThis` imported for kernel `broken`; searched: "
        ) && broken.ends_with("/unresolved-app"),
        "{out}"
    );
    assert_eq!(lines.next(), Some("works: [100, 101, 102, 103]"));
    assert_eq!(
        lines.next(),
        Some("works: [200, 201, 202, 203]"),
        "a scalar argument reaches the kernel"
    );
    assert_eq!(count(&trace, "sycl: link works "), 1, "{trace}");
    assert_eq!(
        count(&trace, "sycl: cache-hit works "),
        1,
        "the second launch reuses the program:\n{trace}"
    );
    assert_eq!(count(&trace, "sycl: compile "), 1, "the broken kernel compiles nothing:\n{trace}");
}

#[test]
fn an_unknown_device_name_lists_the_devices_there_are() {
    let out = std::process::Command::new(sycl_tests::fixtures().join("app"))
        .env("SYCL_DEVICE", "no-such-device")
        .output()
        .unwrap();
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
    assert!(
        listed("intel ", "Intel(R) OpenCL") && listed("pocl ", "Portable Computing Language"),
        "{err}"
    );
}

#[test]
fn a_machine_without_devices_says_why_and_what_to_install() {
    // An ICD loader that finds no driver registered: no OpenCL platform, and no GPU here (on a
    // GPU machine the program would find the GPU instead).
    let empty = std::env::temp_dir().join(format!("sycl-no-icd-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let out = std::process::Command::new(sycl_tests::fixtures().join("app"))
        .env("OCL_ICD_VENDORS", &empty)
        .env_remove("SYCL_DEVICE")
        .output()
        .unwrap();
    let err = stderr(&out);
    if out.status.success() {
        eprintln!("skipped: a CUDA GPU answered without OpenCL");
        return;
    }
    assert!(
        err.contains("no backend found a device (OpenCL: clGetPlatformIDs failed with CL_PLATFORM_NOT_FOUND_KHR (-1001); CUDA: ")
            && err.contains("is an OpenCL runtime installed and registered in /etc/OpenCL/vendors"),
        "{err}"
    );
}

#[test]
fn platform_selectors_pick_the_platform_whatever_the_device_is_called() {
    // PoCL names its device after the host CPU: on an Intel host, its device name says Intel.
    for (selector, platform) in [
        ("intel", "Intel(R) OpenCL"),
        ("pocl", "Portable Computing Language"),
        ("Intel:0", "Intel(R) OpenCL"),
    ] {
        let out = sycl_tests::run_fixture_with("app", &[("SYCL_DEVICE", selector)]);
        assert!(out.status.success(), "{selector}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("sycl: device {platform} / ")),
            "{selector}: {}",
            stderr(&out)
        );
        assert_eq!(sycl_tests::stdout(&out), "0 2 4 6 8 10 12 14\n");
    }
    // Both are CPU devices: `cpu` alone is ambiguous, and the error says so.
    let out = sycl_tests::run_fixture_with("app", &[("SYCL_DEVICE", "cpu")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("SYCL_DEVICE=cpu is ambiguous: it matches 2 devices"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn kernels_without_optional_features_run_beside_ones_with_them() {
    let (out, trace) = run_ok("features-app");
    assert_eq!(out, "K1: [0, 3, 6, 9, 12, 15, 18, 21]\nfixed_group: [4, 4, 4, 4, 4, 4, 4, 4]\n");
    assert_eq!(
        count(&trace, "sycl: compile "),
        2,
        "only the two images launched are compiled:\n{trace}"
    );
}
