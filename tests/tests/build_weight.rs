//! What a crate with device code pays in `target/` for its build script, which links
//! `sycl-build` (docs/BUILD-WEIGHT.md): a workspace of many such crates pays it once per
//! crate. The bound is loose on purpose, so that toolchain updates do not trip it: the fixtures'
//! build scripts measure 4.6 MB with their `[profile.dev.build-override] debug = false`, and
//! 27 MB without it (39 MB before sycl-build shed `object` and sycl-spirv's link). It catches
//! debug information coming back into build scripts, or a dependency of that weight.
//! `cargo xtask weight` prints the numbers.

use std::process::Command;

/// The largest build script a fixture crate may have, in bytes.
const BUILD_SCRIPT_BOUND: u64 = 8_000_000;

#[test]
fn build_scripts_of_device_crates_stay_small() {
    sycl_tests::fixtures();
    // A no-op build that names the build scripts of the current configuration (the build
    // directory may also hold stale ones from other settings).
    let fixtures = sycl_tests::repo_root().join("fixtures");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = sycl_tests::output(
        Command::new(&cargo)
            .args(["build", "--quiet", "--message-format=json"])
            .current_dir(&fixtures),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let mut sizes = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let is_build_script = message["reason"] == "compiler-artifact"
            && message["target"]["kind"][0] == "custom-build";
        let manifest = message["manifest_path"].as_str().unwrap_or_default();
        if !is_build_script || !manifest.starts_with(fixtures.to_str().unwrap()) {
            continue;
        }
        let script = message["filenames"][0].as_str().expect("a build script's executable");
        sizes.push((manifest.to_string(), std::fs::metadata(script).unwrap().len()));
    }
    assert!(sizes.len() >= 20, "expected the build scripts of the fixture crates, found {sizes:?}");
    for (manifest, size) in &sizes {
        assert!(
            *size <= BUILD_SCRIPT_BOUND,
            "the build script of {manifest} is {size} bytes, over {BUILD_SCRIPT_BOUND} (see docs/BUILD-WEIGHT.md)"
        );
    }
}
