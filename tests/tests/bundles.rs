//! Kernel bundles (SYCL 2020's kernel_bundle) and specialization constants, on the real devices.

use std::process::Command;

use sycl_tests::{fixtures, output, stderr, stdout};

fn scenario(name: &str, device: &str) -> String {
    let out = output(
        Command::new(fixtures().join("bundle-app"))
            .arg(name)
            .env("SYCL_DEVICE", device)
            .env("SYCL_CACHE_DISABLE", "1"),
    );
    assert!(out.status.success(), "{name} on {device}:\n{}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

#[test]
fn every_state_transition_on_both_devices() {
    for device in ["intel", "pocl"] {
        let out = scenario("states", device);
        let expected = [
            r#"input kernels: ["needs_missing", "scaled", "uses_lib"]"#,
            "has scaled: true, has nothing: false",
            "images: 2, spec constants: true",
            "has bundles: input true, object true, executable true",
            "this_module twice is equal: true",
            r#"object kernels: ["scaled", "uses_lib"]"#,
            r#"executable kernels: ["scaled", "uses_lib"]"#,
            r#"executable imports resolved from: ["bundle-app", "libhelpers.so"]"#,
            "scaled: [0, 2, 4, 6]",
            "uses_lib: [0, 2, 4, 6]",
            "build then launch: [0, 2, 4, 6]",
        ];
        assert_eq!(out.lines().collect::<Vec<_>>(), expected, "on {device}");
    }
}

#[test]
fn unresolved_imports_are_allowed_in_objects_and_refused_in_executables() {
    let out = scenario("unresolved", "intel");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], r#"object: ["needs_missing"]"#);
    assert!(
        lines[1].starts_with("executable: unresolved device symbol `MissingFunc` imported for kernel `(bundle of bundle-app image 1)`; searched: "),
        "{out}"
    );
}

#[test]
fn join_rejects_nothing_and_mixed_devices() {
    let out = scenario("join", "intel");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "empty join: invalid object: join of no bundles",
            r#"joined: ["scaled", "uses_lib"]"#,
            "join across devices: invalid object: join of bundles for different devices",
        ]
    );
}

#[test]
fn a_kernel_not_in_the_used_bundle_is_kernel_not_found() {
    let out = scenario("not_found", "intel");
    assert!(out.starts_with("needs_missing: kernel `needs_missing` not found in the device images of: KernelBundle { state: \"executable\""), "{out}");
    let misspelt =
        out.lines().find(|l| l.starts_with("scaledd: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(
        misspelt.contains("kernel `scaledd` not found")
            && misspelt.ends_with("did you mean `scaled`?"),
        "{misspelt}"
    );
}

#[test]
fn specialization_constants_change_results_on_both_devices() {
    for device in ["intel", "pocl"] {
        let out = scenario("spec", device);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [
                "default: [0, 2, 4, 6]",
                "launch with 3: [0, 3, 6, 9]",
                "launch with the default: [0, 2, 4, 6]",
                "bundle with 5: [0, 5, 10, 15]",
                "selector chose 7: [0, 7, 14, 21]",
                "selector chose 5: [0, 5, 10, 15]",
                "a misspelt constant on a launch: invalid argument: specialization constant `scael`: the images of kernel `scaled` declare no constant of that name (they declare `scale`); the generated kernels::spec constants name each one as the device source does",
                "a misspelt constant on a bundle: invalid argument: specialization constant `scael`: the images of the bundle declare no constant of that name (they declare `scale`); the generated kernels::spec constants name each one as the device source does",
                "a constant of another size: invalid argument: specialization constant `scale` of kernel `scaled` holds 4 bytes; got a value of 8 bytes: give it a value of its type",
            ],
            "on {device}"
        );
    }
}

/// `BuildProperty::OpenClFlags` reaches the driver exactly once: the driver itself refuses the
/// unknown option (its error code, and its log naming the option: Intel's lists every option
/// it was given), and the options the runtime passed are the flag alone. A flag dropped on its
/// way builds, one passed twice shows twice: either fails this.
#[test]
fn an_opencl_flag_reaches_the_driver_once_on_both_devices() {
    let hint = "to try: the build options `-cl-no-such-option` are not valid for this device: check the options given to the launch or the bundle";
    for (device, refusal, log) in [
        (
            "intel",
            "compiling bundle-app image 0 (clCompileProgram: CL_INVALID_COMPILER_OPTIONS (-66))",
            ["Compilation failed", "Unrecognized build options: -cl-no-such-option"].as_slice(),
        ),
        (
            "pocl",
            "building bundle-app image 0 + libhelpers.so image 1 (clBuildProgram: CL_INVALID_BUILD_OPTIONS (-43))",
            ["Invalid build option: -cl-no-such-option"].as_slice(),
        ),
    ] {
        let out = scenario("flags", device);
        let first = format!(
            "an unknown OpenCL flag: {refusal} failed on DEVICE: the driver's build log:"
        );
        let mut expected = vec![first.as_str()];
        expected.extend_from_slice(log);
        expected.push(hint);
        assert_eq!(out.lines().collect::<Vec<_>>(), expected, "on {device}");
    }
}

#[test]
fn the_persistent_cache_keeps_an_entry_per_specialization_value() {
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        let out = output(
            Command::new(fixtures().join("bundle-app"))
                .arg("spec")
                .env("SYCL_CACHE_DIR", dir.path())
                .env("SYCL_TRACE", "1")
                .env_remove("SYCL_CACHE_DISABLE")
                .env("SYCL_DEVICE", "intel"),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        (stdout(&out), stderr(&out))
    };
    let (first, trace) = run();
    assert!(first.starts_with("default: [0, 2, 4, 6]\nlaunch with 3: [0, 3, 6, 9]\n"), "{first}");
    // Three launches, two programs: the default set explicitly is the default.
    assert_eq!(
        trace.lines().filter(|l| l.starts_with("sycl: persist-store ")).count(),
        2,
        "{trace}"
    );
    let entries = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(entries, 2, "one entry per value of `scale`");
    assert!(
        trace.contains("sycl: cache-hit scaled on "),
        "the explicit default found the default's program: {trace}"
    );
    let (second, trace) = run();
    assert_eq!(first, second);
    assert_eq!(trace.lines().filter(|l| l.starts_with("sycl: persist-hit ")).count(), 2, "{trace}");
}

#[test]
fn strict_mode_refuses_a_duplicate_export_in_a_bundle_link_as_in_a_launch() {
    let preload = fixtures().join("deps/libfast_helpers.so");
    for device in ["intel", "pocl"] {
        let run = |strict: &str| {
            output(
                Command::new(fixtures().join("bundle-app"))
                    .arg("states")
                    .env("SYCL_DEVICE", device)
                    .env("SYCL_CACHE_DISABLE", "1")
                    .env("LD_PRELOAD", &preload)
                    .env("SYCL_STRICT_EXPORTS", strict),
            )
        };
        let lenient = run("0");
        assert!(lenient.status.success(), "{device}: {}", stderr(&lenient));
        assert!(
            stdout(&lenient).contains(
                r#"executable imports resolved from: ["bundle-app", "libfast_helpers.so"]"#
            ),
            "the first in loader order wins on {device}: {}",
            stdout(&lenient)
        );
        let strict = run("1");
        assert!(!strict.status.success(), "{device}: {}", stdout(&strict));
        assert!(
            stdout(&strict).ends_with("error: device symbol `LibDeviceFunc` is exported by more than one binary: libfast_helpers.so image 0, libhelpers.so image 1 (strict mode)\n"),
            "{device}: {}{}",
            stdout(&strict),
            stderr(&strict)
        );
    }
}
