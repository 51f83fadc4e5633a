//! Call cycles (recursion, which device code may not have): refused with an error naming
//! every function of the cycle and its binary, before any driver sees them, on both devices.
//! PoCL's compiler would otherwise kill the process.

use std::process::Command;

use sycl_tests::{device_lib, fixtures, output, run_fixture_with, stderr, stdout, DEVICES};

/// `sycl-ld device-lib` over `source`, written as `NAME.cl` in `dir`: the library file and
/// what sycl-ld printed on stderr.
fn source_lib(dir: &std::path::Path, name: &str, source: &str) -> (std::path::PathBuf, String) {
    let source_path = dir.join(format!("{name}.cl"));
    std::fs::write(&source_path, source).unwrap();
    let file = dir.join(format!("{name}.sydl"));
    let made = device_lib(&[], &file, &[&source_path]);
    assert!(made.status.success(), "{}", stderr(&made));
    (file, stderr(&made))
}

/// `devlib-app FILE` on `device`, never killed by a signal.
fn devlib_app(file: &std::path::Path, device: &str) -> std::process::Output {
    let out = output(
        Command::new(fixtures().join("devlib-app"))
            .arg(file)
            .env("SYCL_CACHE_DISABLE", "1")
            .env("SYCL_DEVICE", device),
    );
    assert!(out.status.code().is_some(), "{device}: killed by a signal: {}", stderr(&out));
    out
}

#[test]
fn a_cycle_across_libraries_is_refused_before_the_driver_on_both_devices() {
    for device in DEVICES.map(|d| d.selector) {
        let out = run_fixture_with("cycle-app", &[("SYCL_DEVICE", device)]);
        let (o, trace) = (stdout(&out), stderr(&out));
        assert!(out.status.success(), "{device}: the process lives on: {o}{trace}");
        let lines: Vec<&str> = o.lines().collect();
        assert_eq!(
            lines[0],
            "enters_cycle: error: kernel `enters_cycle` reaches a call cycle: cycle_a (libcycle_a.so) -> \
             cycle_b (libcycle_b.so) -> step (libcycle_b.so) -> cycle_a (libcycle_a.so); device code may not recurse \
             (OpenCL C and SYCL forbid it), so no driver was given it: break the cycle",
            "{device}"
        );
        assert_eq!(
            lines[1], "stays_out: [1, 2, 3, 4]",
            "{device}: a kernel outside the cycle runs"
        );
        assert!(
            !trace.lines().any(|l| l.contains("enters_cycle on")
                && (l.starts_with("sycl: link") || l.starts_with("sycl: build"))),
            "{device}: {trace}"
        );
    }
}

#[test]
fn recursion_inside_one_library_is_warned_at_link_time_and_refused_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let (file, warnings) = source_lib(
        dir.path(),
        "recursive",
        "#include <sycl/device.h>\n\
         SYCL_EXTERNAL int devlib_func(int i) { return i < 2 ? i : devlib_func(i - 1) + devlib_func(i - 2); }\n\
         __kernel void devlib_kernel(__global int *out) { out[get_global_id(0)] = 42; }\n",
    );
    assert!(warnings.contains("devlib_func -> devlib_func"), "sycl-ld names the cycle: {warnings}");
    for device in DEVICES.map(|d| d.selector) {
        let out = devlib_app(&file, device);
        let o = stdout(&out);
        // The fixture goes on to build the library's whole bundle, which holds the cycle too:
        // that fails (the fixture unwraps it), but the process is never killed by a signal.
        assert!(
            stderr(&out).contains("kernel `(bundle)` reaches a call cycle: devlib_func ("),
            "{device}: {}",
            stderr(&out)
        );
        let loaded = o.lines().nth(1).unwrap();
        assert!(
            loaded.starts_with(
                "loaded: error: kernel `use_devlib` reaches a call cycle: devlib_func ("
            ) && loaded.contains("recursive.sydl) -> devlib_func ("),
            "{device}: {o}"
        );
    }
}

#[test]
fn a_cycle_through_a_function_pointer_is_refused_once_pocl_needs_direct_calls() {
    // The call graphs cannot see a call through a pointer; for PoCL the runtime turns such
    // calls into direct ones, and checks the program again before PoCL's compiler sees it.
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = source_lib(
        dir.path(),
        "pointer_cycle",
        "#include <sycl/device.h>\n\
         #pragma OPENCL EXTENSION __cl_clang_function_pointers : enable\n\
         typedef int (*int_fn)(int);\n\
         int again(int x);\n\
         __global int_fn table[1] = { again };\n\
         int again(int x) { return x <= 0 ? 0 : table[0](x - 1) + 1; }\n\
         SYCL_EXTERNAL int devlib_func(int i) { return again(i); }\n",
    );
    let run = |device: &str| {
        stdout(&devlib_app(&file, device)).lines().nth(1).unwrap_or_default().to_string()
    };
    assert_eq!(
        run("pocl"),
        "loaded: error: kernel `use_devlib` reaches a call cycle: again (pointer_cycle.sydl) -> again (pointer_cycle.sydl); \
         device code may not recurse (OpenCL C and SYCL forbid it), so no driver was given it: break the cycle"
    );
    // Intel's runtime calls through the pointer itself, and runs it.
    assert_eq!(run("intel"), "loaded: [0, 1, 2, 3]");
}
