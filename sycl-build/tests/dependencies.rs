//! sycl-build is compiled into the build script of every crate with device code, so what it
//! depends on is paid once per workspace in compile time and once per crate in `target/`
//! (docs/BUILD-WEIGHT.md). This keeps out what it was found not to need.

use std::process::Command;

#[test]
fn build_scripts_get_no_linker_and_no_object_writer() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "sycl-build",
            "-e",
            "normal,features",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.lines().any(|l| l.starts_with("sycl-spirv v")), "{tree}");
    for unwanted in [
        // SPIR-V linking and post-linking belong to sycl-ld and the runtime.
        "sycl-spirv feature \"link\"",
        "sycl-spirv feature \"default\"",
        // elf.rs writes the one section a device object needs.
        "object v",
        // Device configurations are only read.
        "toml feature \"display\"",
    ] {
        assert!(
            !tree.lines().any(|l| l.starts_with(unwanted)),
            "sycl-build depends on {unwanted}:\n{tree}"
        );
    }
}
