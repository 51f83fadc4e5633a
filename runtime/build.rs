//! The identity of the code that shapes a program (`src/program/code_identity.rs`), compiled in
//! as `SYCL_RUNTIME_CODE_IDENTITY`: part of the persistent cache's key, so that after a change
//! to the resolution, link or rewrite code no program built before it is reused.

#[path = "src/program/code_identity.rs"]
mod code_identity;

fn main() {
    let manifest_dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let dirs = code_identity::identity_dirs(&manifest_dir);
    for dir in &dirs {
        // A directory: cargo reruns this script when any file under it changes.
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    let identity = code_identity::code_identity(&dirs).expect("reading the runtime's sources");
    println!("cargo:rustc-env=SYCL_RUNTIME_CODE_IDENTITY={identity}");
}
