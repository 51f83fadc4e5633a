//! Faults: malformed images in a loaded library, the persistent cache on a full disk and
//! under killed writers, and libraries opened and closed while 16 threads launch. In each: a
//! clear error or a correct result, never a crash, a hang or a wrong result.

use std::path::Path;
use std::process::Command;

use sycl_tests::{fixtures, run_fixture_with, stderr, stdout};

/// libfast_helpers.so with its embedded images damaged by `damage(bytes, at)`, where `at` is
/// the offset of the image-set payload.
fn damaged_library(
    dir: &Path,
    name: &str,
    damage: impl Fn(&mut Vec<u8>, usize),
) -> std::path::PathBuf {
    let mut bytes = std::fs::read(fixtures().join("deps/libfast_helpers.so")).unwrap();
    let at = bytes.windows(8).position(|w| w == sycl_format::IMAGE_SET_MAGIC).unwrap();
    damage(&mut bytes, at);
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn a_binary_with_damaged_images_is_skipped_and_the_rest_works() {
    let dir = tempfile::tempdir().unwrap();
    let put = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    type Damage = Box<dyn Fn(&mut Vec<u8>, usize)>;
    let cases: [(&str, Damage, &str); 5] = [
        ("future", Box::new(move |b, at| put(b, at + 8, 99)), "unknown version 99"),
        ("magic", Box::new(|b, at| b[at] ^= 0xff), "bad magic"),
        ("count", Box::new(move |b, at| put(b, at + 12, u32::MAX)), "exceeds"),
        // The first description's format: after the count and the descriptions' length.
        ("format", Box::new(move |b, at| put(b, at + 20, 77)), "unknown image format 77"),
        // The note's own descriptor size (the header is 20 bytes before the payload).
        ("note", Box::new(move |b, at| put(b, at - 16, u32::MAX / 2)), "truncated"),
    ];
    for (name, damage, reason) in cases {
        let lib = damaged_library(dir.path(), &format!("libbroken_{name}.so"), damage);
        let out = run_fixture_with("app", &[("LD_PRELOAD", lib.to_str().unwrap())]);
        let (o, trace) = (stdout(&out), stderr(&out));
        assert!(out.status.success(), "{name}: {o}{trace}");
        assert_eq!(
            o, "0 2 4 6 8 10 12 14\n",
            "{name}: libhelpers.so serves, the damaged library is skipped"
        );
        let line = trace
            .lines()
            .find(|l| l.contains(&format!("libbroken_{name}.so")))
            .unwrap_or_else(|| panic!("{trace}"));
        assert!(
            line.contains("malformed device images ignored") && line.contains(reason),
            "{name}: {line}"
        );
    }
}

#[test]
fn a_bit_flipped_image_fails_its_own_build_cleanly() {
    // A copy of the app whose own image has bytes flipped inside its SPIR-V: it still decodes
    // (the payload framing is intact), so the damage reaches the driver's compiler.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("app_flipped");
    let mut bytes = std::fs::read(fixtures().join("app")).unwrap();
    let at = bytes.windows(8).position(|w| w == sycl_format::IMAGE_SET_MAGIC).unwrap();
    let spirv = bytes[at..].windows(4).position(|w| w == [0x03, 0x02, 0x23, 0x07]).unwrap() + at;
    for i in (spirv + 24..spirv + 400).step_by(7) {
        bytes[i] ^= 0x5a;
    }
    std::fs::write(&copy, bytes).unwrap();
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Its library where its run path ($ORIGIN/deps) finds it.
    std::fs::create_dir(dir.path().join("deps")).unwrap();
    std::fs::copy(fixtures().join("deps/libhelpers.so"), dir.path().join("deps/libhelpers.so"))
        .unwrap();
    let out = Command::new(&copy)
        .env("SYCL_CACHE_DISABLE", "1")
        .env("SYCL_DEVICE", "intel")
        .output()
        .unwrap();
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "a clear error, not a crash: {o}{e}");
    assert!(e.starts_with("error: compiling app_flipped image 0 (clCompileProgram: CL_COMPILE_PROGRAM_FAILURE (-15)) failed on "), "{e}");
    assert!(
        e.contains("the driver's build log:\n") && e.contains("\nto try: "),
        "the driver's words and what to try: {e}"
    );
}

#[test]
fn a_link_the_driver_refuses_carries_its_log() {
    let kernel = "int helper(int); kernel void k(global int *o) { o[0] = helper(1); }";
    let other = "int unrelated(int i) { return i; }";
    let err = sycl_runtime::test_support::link_sources("intel", &[kernel, other])
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "linking source 0 + source 1 (clLinkProgram: CL_LINK_PROGRAM_FAILURE (-17)) failed on "
        ),
        "{err}"
    );
    // The Intel runtime names the missing symbol in its log; the hint follows from it.
    assert!(err.contains("the driver's build log:\n") && err.contains("helper"), "{err}");
    assert!(
        err.contains("to try: a function these images call is defined by none of them"),
        "{err}"
    );
}

#[test]
fn the_persistent_cache_on_a_full_disk_never_fails_a_launch() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("full");
    std::fs::create_dir(&mount).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4k,mode=0700", "tmpfs"])
        .arg(&mount)
        .status();
    assert!(
        mounted.is_ok_and(|s| s.success()),
        "mounting a size-limited tmpfs needs root (as CI and the development machines run)"
    );
    let out = Command::new(fixtures().join("app"))
        .env("SYCL_CACHE_DIR", &mount)
        .env("SYCL_TRACE", "1")
        .env_remove("SYCL_CACHE_DISABLE")
        .env("SYCL_DEVICE", "intel")
        .output()
        .unwrap();
    let files: Vec<String> = std::fs::read_dir(&mount)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let _ = Command::new("umount").arg(&mount).status();
    let (o, trace) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{o}{trace}");
    assert_eq!(o, "0 2 4 6 8 10 12 14\n");
    assert!(
        trace.contains("sycl: cache-error storing"),
        "the write failed and was only traced: {trace}"
    );
    assert!(files.is_empty(), "no partial entry or temporary file left: {files:?}");
}

#[test]
fn a_cache_size_that_is_not_a_number_is_warned_about_and_the_default_kept() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(fixtures().join("app"))
        .env("SYCL_CACHE_DIR", dir.path())
        .env("SYCL_CACHE_MAX_BYTES", "1G")
        .env_remove("SYCL_CACHE_DISABLE")
        .env("SYCL_DEVICE", "intel")
        .output()
        .unwrap();
    let (o, err) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{o}{err}");
    assert!(
        err.contains("sycl: warning: SYCL_CACHE_MAX_BYTES=\"1G\" is not a number of bytes (such as 2147483648); the persistent cache keeps its default, 1073741824 bytes"),
        "{err}"
    );
}

#[test]
fn writers_killed_mid_build_leave_no_corrupt_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let app = || {
        let mut cmd = Command::new(fixtures().join("app"));
        cmd.env("SYCL_CACHE_DIR", &cache)
            .env("SYCL_TRACE", "1")
            .env_remove("SYCL_CACHE_DISABLE")
            .env("SYCL_DEVICE", "intel");
        cmd
    };
    for delay in [20, 60, 100, 140, 180, 220] {
        let mut child = app()
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
    }
    let out = app().output().unwrap();
    let (o, trace) = (stdout(&out), stderr(&out));
    assert_eq!(o, "0 2 4 6 8 10 12 14\n", "{trace}");
    assert!(!trace.contains("cache-corrupt"), "every entry on disk is whole: {trace}");
}

#[test]
fn sixteen_threads_launch_while_a_library_is_opened_and_closed() {
    let out = Command::new(fixtures().join("dlopen-app"))
        .arg("threads")
        .env("SYCL_CACHE_DISABLE", "1")
        .output()
        .unwrap();
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{o}{e}");
    assert!(
        o.starts_with("threads: ") && o.trim_end().ends_with("unresolved, no other outcome"),
        "{o}"
    );
}
