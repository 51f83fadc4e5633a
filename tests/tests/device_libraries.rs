//! Device code from files and function pointers across libraries (DPC++'s other
//! ways of supplying device code).

use std::process::Command;

use sycl_tests::{device_lib, fixtures, repo_root, run_fixture_with, stderr, stdout};

#[test]
fn a_device_image_made_separately_defines_the_device_version() {
    let out = run_fixture_with("prebuilt-app", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "device: [0, 5, 10, 15]\nhost: [0, 5, 10, 15]\n");
}

#[test]
fn a_device_library_file_satisfies_imports_while_it_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("devlib.sydl");
    let made = device_lib(&[], &file, &[&repo_root().join("fixtures/devlib-app/device/devlib.cl")]);
    assert!(made.status.success(), "{}", stderr(&made));
    let out = Command::new(fixtures().join("devlib-app"))
        .arg(&file)
        .env("SYCL_CACHE_DISABLE", "1")
        .env("SYCL_TRACE", "1")
        .output()
        .unwrap();
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{o}{e}");
    let lines: Vec<&str> = o.lines().collect();
    assert!(lines[0].starts_with("before: error: unresolved device symbol `devlib_func` imported for kernel `use_devlib`"), "{o}");
    assert_eq!(lines[1], "loaded: [0, 7, 14, 21]");
    assert_eq!(lines[2], r#"library kernels: ["devlib_kernel"]"#);
    assert_eq!(lines[3], "library kernel: [42, 42, 42, 42]");
    assert!(
        lines[4].starts_with("unloaded: error: unresolved device symbol `devlib_func`"),
        "unloading makes it fail again: {o}"
    );
    assert!(
        lines[5].starts_with("own scope: error: unresolved device symbol `devlib_func`"),
        "a scope of its own serves only itself: {o}"
    );
    assert!(lines[5].contains("exports it, but was loaded with LibraryScope::Own, so only its own images may use its exports"), "{o}");
    assert_eq!(
        lines[6],
        "device library /nonexistent/lib.sydl: No such file or directory (os error 2)"
    );
    assert_eq!(lines[7], "device library /etc/hostname: malformed device library: bad magic");
    // Each load and unload is noticed at the next launch, which reads the file's images only
    // when it appears and reads nothing loaded again.
    let path = file.display().to_string();
    let trace = |event: &str| -> Vec<String> {
        let prefix = format!("sycl: {event} ");
        e.lines().filter_map(|l| l.strip_prefix(prefix.as_str())).map(str::to_string).collect()
    };
    let appeared = format!("appeared: {path}; went: none");
    assert_eq!(
        trace("rediscover"),
        [appeared.clone(), format!("appeared: none; went: {path}"), appeared],
        "{e}"
    );
    let discovered = format!("{path}: 2 image(s) from a device library file");
    assert_eq!(trace("discover")[1..], [discovered.clone(), discovered], "{e}");
    // The file is an image set in the embedded encoding.
    let set = sycl_format::ImageSet::decode(&std::fs::read(&file).unwrap()).unwrap();
    assert!(set.images.iter().any(|i| i.exported_symbols().any(|s| s == "devlib_func")));
    // `sycl-ld inspect` lists it as it lists a binary's.
    let out = std::process::Command::new(sycl_tests::sycl_ld())
        .args(["inspect", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["images"].as_array().unwrap().len(), set.images.len());
    assert!(listed["images"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["exported"] == serde_json::json!(["devlib_func"])));
}

#[test]
fn function_pointers_cross_the_library_boundary_both_ways() {
    // Intel calls through the pointers; for PoCL the runtime lowers the calls to switches
    // over the functions whose addresses the program takes.
    for device in ["intel", "pocl"] {
        let out = run_fixture_with("fnptr-app", &[("SYCL_DEVICE", device), ("SYCL_TRACE", "1")]);
        assert!(out.status.success(), "{device}: {}", stderr(&out));
        assert_eq!(
            stdout(&out),
            "app_to_lib: [1, 2, 5, 10]\ntake_lib_address: [0, 3, 6, 9]\nlib_to_app: [100, 103, 106, 109]\n",
            "{device}"
        );
        let own_link = stderr(&out).contains("(linked by the runtime, translated to SPIR)");
        assert_eq!(own_link, device == "pocl", "{device}: {}", stderr(&out));
    }
}
