//! Faults: malformed images in a loaded library, the persistent cache on a full disk and
//! under killed writers, and libraries opened and closed while 16 threads launch. In each: a
//! clear error or a correct result, never a crash, a hang or a wrong result.

use std::path::Path;
use std::process::Command;

use sycl_tests::{fixtures, output, run_fixture_with, stderr, stdout};

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
    let out =
        output(Command::new(&copy).env("SYCL_CACHE_DISABLE", "1").env("SYCL_DEVICE", "intel"));
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
    let mounted = output(
        Command::new("mount").args(["-t", "tmpfs", "-o", "size=4k,mode=0700", "tmpfs"]).arg(&mount),
    );
    assert!(
        mounted.status.success(),
        "mounting a size-limited tmpfs needs root (as CI and the development machines run): {}",
        stderr(&mounted)
    );
    let out = output(
        Command::new(fixtures().join("app"))
            .env("SYCL_CACHE_DIR", &mount)
            .env("SYCL_TRACE", "1")
            .env_remove("SYCL_CACHE_DISABLE")
            .env("SYCL_DEVICE", "intel"),
    );
    let files: Vec<String> = std::fs::read_dir(&mount)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let _ = output(Command::new("umount").arg(&mount));
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
    let out = output(
        Command::new(fixtures().join("app"))
            .env("SYCL_CACHE_DIR", dir.path())
            .env("SYCL_CACHE_MAX_BYTES", "1G")
            .env_remove("SYCL_CACHE_DISABLE")
            .env("SYCL_DEVICE", "intel"),
    );
    let (o, err) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{o}{err}");
    assert!(
        err.contains("sycl: warning: SYCL_CACHE_MAX_BYTES=\"1G\" is not a number of bytes (such as 2147483648); the persistent cache keeps its default, 1073741824 bytes"),
        "{err}"
    );
}

/// An `LD_PRELOAD` library that kills the process in the middle of its first write into a
/// file in `SYCL_CACHE_DIR`: half the bytes are written, then `SIGKILL`. Made by `cc` (which
/// every Rust link here uses) into `dir`.
fn killer_in_the_cache_write(dir: &Path) -> std::path::PathBuf {
    const SOURCE: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t write(int fd, const void *buf, size_t count) {
    ssize_t (*real)(int, const void *, size_t) =
        (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    const char *cache = getenv("SYCL_CACHE_DIR");
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (cache != NULL && len > 0) {
        path[len] = 0;
        size_t n = strlen(cache);
        if (strncmp(path, cache, n) == 0 && path[n] == '/') {
            real(fd, buf, count / 2);
            raise(SIGKILL);
        }
    }
    return real(fd, buf, count);
}
"#;
    let source = dir.join("killer.c");
    std::fs::write(&source, SOURCE).unwrap();
    let library = dir.join("libkiller.so");
    let out = output(
        Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&library).arg(&source).arg("-ldl"),
    );
    assert!(out.status.success(), "cc: {}", stderr(&out));
    library
}

/// The names and sizes of the files in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len())
        })
        .collect();
    files.sort();
    files
}

/// A writer killed in the middle of writing its cache entry leaves only a partial temporary
/// file, never an entry; the next run rebuilds and stores a whole entry. And an entry that is
/// partial all the same (what a crash of the machine could leave, since entries are not
/// synced) is found corrupt, traced, and rebuilt: the trace the first check looks for is one
/// the runtime writes.
#[test]
fn writers_killed_mid_build_leave_no_corrupt_entry() {
    let dir = tempfile::tempdir().unwrap();
    let killer = killer_in_the_cache_write(dir.path());
    let cache = dir.path().canonicalize().unwrap().join("cache");
    let app = |preload: Option<&Path>| {
        let mut cmd = Command::new(fixtures().join("app"));
        cmd.env("SYCL_CACHE_DIR", &cache)
            .env("SYCL_TRACE", "1")
            .env_remove("SYCL_CACHE_DISABLE")
            .env("SYCL_DEVICE", "intel");
        if let Some(library) = preload {
            cmd.env("LD_PRELOAD", library);
        }
        let out = output(&mut cmd);
        (out.status, stdout(&out), stderr(&out))
    };
    let stores = |trace: &str| -> Vec<String> {
        trace
            .lines()
            .filter_map(|l| l.strip_prefix("sycl: persist-store "))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    };

    // Killed in its write: a temporary file with half the entry, and no entry.
    let (status, o, trace) = app(Some(&killer));
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL),
        "killed in the middle of its cache write: {status:?}\n{o}{trace}"
    );
    assert!(trace.contains("sycl: link app_kernel on "), "killed after the build: {trace}");
    let killed = files_in(&cache);
    let [(temporary, partial)] = &killed[..] else { panic!("one file: {killed:?}") };
    let partial_bytes = std::fs::read(cache.join(temporary)).unwrap();
    let key = temporary
        .strip_prefix('.')
        .and_then(|t| t.strip_suffix(".tmp"))
        .and_then(|t| t.split('.').next())
        .unwrap_or_else(|| panic!("a temporary file, not an entry: {killed:?}"));

    // The next run finds no entry, rebuilds, and stores it whole, under the same key.
    let (status, o, trace) = app(None);
    assert!(status.success(), "{o}{trace}");
    assert_eq!(o, "0 2 4 6 8 10 12 14\n", "{trace}");
    assert!(!trace.contains("cache-corrupt"), "no partial entry was read: {trace}");
    assert!(!trace.contains("persist-hit"), "{trace}");
    assert_eq!(stores(&trace), [key], "{trace}");
    let entry = cache.join(format!("{key}.bin"));
    let whole = std::fs::metadata(&entry).unwrap().len();
    assert_eq!(*partial, whole / 2, "the temporary file held half the entry");
    // The dead writer's temporary file went at the store's look at the directory.
    let entries: Vec<String> = files_in(&cache).into_iter().map(|(name, _)| name).collect();
    assert_eq!(entries, [format!("{key}.bin")]);

    // The partial file as the entry: found corrupt, rebuilt and stored whole.
    std::fs::write(&entry, partial_bytes).unwrap();
    let (status, o, trace) = app(None);
    assert!(status.success(), "{o}{trace}");
    assert_eq!(o, "0 2 4 6 8 10 12 14\n", "{trace}");
    let header = 116; // magic, version, key, length, checksum
    assert!(
        trace.contains(&format!(
            "sycl: cache-corrupt {}: truncated: {} of {} bytes; rebuilding\n",
            entry.display(),
            partial - header,
            whole - header
        )),
        "{trace}"
    );
    assert_eq!(stores(&trace), [key], "{trace}");
    assert_eq!(std::fs::metadata(&entry).unwrap().len(), whole);

    // And found whole.
    let (status, o, trace) = app(None);
    assert!(status.success(), "{o}{trace}");
    assert_eq!(o, "0 2 4 6 8 10 12 14\n", "{trace}");
    assert!(trace.contains("sycl: persist-hit app_kernel on "), "{trace}");
    assert!(!trace.contains("cache-corrupt") && stores(&trace).is_empty(), "{trace}");
}

/// `text` with each number in it written `N`, and the numbers.
fn numbers_out(text: &str) -> (String, Vec<u64>) {
    let (mut shape, mut numbers) = (String::new(), Vec::new());
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        let len = rest[start..].find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len() - start);
        shape.push_str(&rest[..start]);
        shape.push('N');
        numbers.push(rest[start..start + len].parse().unwrap());
        rest = &rest[start + len..];
    }
    shape.push_str(rest);
    (shape, numbers)
}

/// `dlopen-app threads` (see its `threads`): 16 threads launch while the library that serves
/// their kernel's import is opened and closed 25 times. The program itself fails on a launch
/// with the wrong outcome (one wholly while the library is open must run with the right
/// values, one wholly while it is closed must find the symbol unresolved, one across an open
/// or close may do either, and nothing else may happen); here, its counts show that every
/// thread launched in every state (26 closed, 25 open) and that launches overlapped every
/// open and every close.
#[test]
fn sixteen_threads_launch_while_a_library_is_opened_and_closed() {
    for device in ["intel", "pocl"] {
        let out = output(
            Command::new(fixtures().join("dlopen-app"))
                .arg("threads")
                .env("SYCL_DEVICE", device)
                .env("SYCL_CACHE_DISABLE", "1"),
        );
        let (o, e) = (stdout(&out), stderr(&out));
        assert!(out.status.success(), "{device}: {o}{e}");
        let (shape, n) = numbers_out(&o);
        assert_eq!(
            shape,
            "threads: N threads, N opens and closes; while open: N ran; while closed: N \
             unresolved; across an open: N ran, N unresolved; across a close: N ran, N \
             unresolved\n",
            "{device}: {o}"
        );
        let [threads, cycles, open, closed, open_ran, open_unresolved, close_ran, close_unresolved] =
            n[..]
        else {
            unreachable!("eight numbers, as the shape says")
        };
        assert_eq!((threads, cycles), (16, 25), "{device}: {o}");
        assert!(open >= threads * cycles, "{device}: every thread ran in every open state: {o}");
        assert!(
            closed >= threads * (cycles + 1),
            "{device}: every thread found the symbol unresolved in every closed state: {o}"
        );
        assert!(open_ran + open_unresolved >= cycles, "{device}: launches across every open: {o}");
        assert!(
            close_ran + close_unresolved >= cycles,
            "{device}: launches across every close: {o}"
        );
    }
}
