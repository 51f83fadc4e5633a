//! The code the README and `docs/GUIDE.md` show runs and does what they say: the examples of
//! the fixture crate `fixtures/guide` (one per capability; the tidy test
//! `every_rust_snippet_is_compiled_code` holds every Rust snippet of those documents to these
//! files) are built, then run on both CPU devices, each printing what `tests/expected/guide-*`
//! holds. The `cudarc` example needs an NVIDIA GPU: here it is only built.

use std::process::Command;

use sycl_tests::{device_lib, output, repo_root, stderr, stdout, DEVICES};

/// The examples run here, each with the arguments it takes (`FILE` stands for the device
/// library file made first).
const EXAMPLES: &[(&str, &[&str])] = &[
    ("events", &[]),
    ("host_memory", &[]),
    ("memory", &[]),
    ("graph", &[]),
    ("typed", &[]),
    ("native", &[]),
    ("opencl3", &[]),
    ("bundles", &[]),
    ("device_library", &["FILE"]),
];

#[test]
fn the_guides_examples_run_on_both_devices() {
    let fixtures = repo_root().join("fixtures");
    // The examples need only `sycl-ld`, which links them, and their own crate.
    sycl_tests::built_sycl_ld();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = output(
        Command::new(cargo)
            .args(["build", "-q", "-p", "guide", "--examples"])
            .current_dir(&fixtures),
    );
    assert!(built.status.success(), "{}", stderr(&built));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mylib.sydl");
    let made = device_lib(&[], &file, &[&fixtures.join("guide/device/mylib.cl")]);
    assert!(made.status.success(), "{}", stderr(&made));

    let examples = fixtures.join("target/debug/examples");
    for device in DEVICES {
        let run = |example: &str, args: &[&str]| {
            let args =
                args.iter().map(|a| if *a == "FILE" { file.as_os_str() } else { a.as_ref() });
            let out = output(
                Command::new(examples.join(example))
                    .args(args)
                    .env("SYCL_DEVICE", device.selector)
                    .env_remove("SYCL_TRACE"),
            );
            let text = stdout(&out);
            assert!(
                out.status.success(),
                "{example} on {}: {text}{}",
                device.selector,
                stderr(&out)
            );
            text
        };
        for (example, args) in EXAMPLES {
            sycl_tests::assert_expected(&format!("guide-{example}.txt"), &run(example, args));
        }
        // Which devices there are is the machine's: the list names the one used here, and the
        // CPU device's line its work-group sizes.
        let devices = run("devices", &[]);
        assert!(devices.lines().any(|l| l.starts_with(device.selector)), "{devices}");
        assert!(devices.contains(": work-groups of up to "), "{devices}");
    }
}
