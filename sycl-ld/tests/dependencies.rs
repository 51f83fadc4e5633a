//! What `sycl-ld` is built from: never the CUDA driver's bindings. It needs `sycl-runtime` for
//! one ahead-of-time compile through an OpenCL device, and takes it without its `cuda` feature;
//! with `cudarc` back in its graph, every build would compile the bindings into the linker and
//! every link that enumerates devices could load `libcuda.so.1`.

use std::process::Command;

/// The crates of `sycl-ld`'s normal dependency graph, as `cargo build -p sycl-ld` (what
/// `cargo xtask` runs) resolves its features: for `sycl-ld` alone.
fn normal_dependencies() -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "-p", "sycl-ld", "-e", "normal", "--prefix", "none"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo tree");
    assert!(out.status.success(), "cargo tree failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).expect("cargo tree writes UTF-8");
    tree.lines().filter_map(|line| line.split_whitespace().next()).map(str::to_string).collect()
}

#[test]
fn the_linker_does_not_pull_in_the_cuda_driver() {
    let crates = normal_dependencies();
    assert!(crates.iter().any(|c| c == "sycl-runtime"), "the graph has the runtime: {crates:?}");
    assert!(
        !crates.iter().any(|c| c == "cudarc"),
        "sycl-ld depends on cudarc: its sycl-runtime has the `cuda` feature (see the workspace's \
         `[workspace.dependencies]` entry for sycl-runtime): {crates:?}"
    );
}
