//! `Build::rust_crate` on device crates that must fail, each with an error that names the crate,
//! what is wrong and where: Rust that does not compile (rustc's own error), and a kernel whose
//! parameter no OpenCL kernel can take. Needs the Rust device toolchain (`cargo xtask test`
//! installs it: rustc-web, cargo-web, rust-web-src, llvm-22); one build of `core` serves both.

use std::fs;
use std::path::{Path, PathBuf};

/// A device crate at `dir/name` with `lib.rs` as its source, depending on sycl-device.
fn device_crate(dir: &Path, name: &str, lib_rs: &str) -> PathBuf {
    let root = dir.join(name);
    fs::create_dir_all(root.join("src")).unwrap();
    let sycl_device = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sycl-device");
    fs::write(
        root.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nsycl-device = {{ path = {:?} }}\n",
            sycl_device.canonicalize().unwrap()
        ),
    )
    .unwrap();
    fs::write(root.join("src/lib.rs"), lib_rs).unwrap();
    root
}

/// The error `try_compile` gives for `crate_dir`, as text.
fn error_of(crate_dir: &Path, out: &Path) -> String {
    match sycl_build::Build::new()
        .rust_crate(crate_dir)
        .out_dir(out)
        .cargo_metadata(false)
        .try_compile("bad")
    {
        Ok(_) => panic!("{}: built, but must fail", crate_dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_device_crate_that_cannot_be_device_code_fails_naming_the_crate_and_the_cause() {
    let dir = std::env::temp_dir().join(format!("sycl-build-rust-crate-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let out = dir.join("out");

    let typo = device_crate(
        &dir,
        "typo",
        "#![no_std]\n#[no_mangle]\npub extern \"C\" fn f(x: u32) -> u32 { x + undefined_name }\n",
    );
    let error = error_of(&typo, &out);
    assert!(error.contains(&typo.display().to_string()), "{error}");
    assert!(error.contains("cannot find value `undefined_name`"), "{error}");

    let by_value = device_crate(
        &dir,
        "by-value",
        "#![no_std]\n#[repr(C)]\npub struct Pair { a: f32, b: f32 }\n\
         sycl_device::kernel! { pub fn k(p: Pair, out: *mut f32) { unsafe { *out = p.a + p.b } } }\n",
    );
    let error = error_of(&by_value, &out);
    assert!(error.contains("kernel `k`: parameter 1 is neither a number nor a pointer"), "{error}");

    let _ = fs::remove_dir_all(&dir);
}
