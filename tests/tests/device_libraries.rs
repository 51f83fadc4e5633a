//! Device code from files and function pointers across libraries (DPC++'s other
//! ways of supplying device code).

use std::process::Command;

use sycl_tests::{device_lib, fixtures, output, repo_root, run_fixture_with, stderr, stdout};

#[test]
fn a_device_image_made_separately_defines_the_device_version() {
    let out = run_fixture_with("prebuilt-app", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "device: [0, 5, 10, 15]\nhost: [0, 5, 10, 15]\n");
}

/// The name the trace of a run on `selector`'s device (of `platform`) gives the device
/// (whatever this machine's CPU is called), from its one `sycl: device` line.
fn device_name<'t>(trace: &'t str, selector: &str, platform: &str) -> &'t str {
    let opened: Vec<&str> = trace.lines().filter_map(|l| l.strip_prefix("sycl: device ")).collect();
    let name = match opened[..] {
        [one] => one.strip_prefix(platform).and_then(|n| n.strip_prefix(" / ")),
        _ => None,
    };
    name.unwrap_or_else(|| panic!("{selector}: one device of {platform} expected:\n{trace}"))
}

#[test]
fn a_device_library_file_satisfies_imports_while_it_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("devlib.sydl");
    let made = device_lib(&[], &file, &[&repo_root().join("fixtures/devlib-app/device/devlib.cl")]);
    assert!(made.status.success(), "{}", stderr(&made));
    let path = file.display().to_string();
    let app = std::fs::canonicalize(fixtures().join("devlib-app")).unwrap();
    let unresolved = format!(
        "error: unresolved device symbol `devlib_func` imported for kernel `use_devlib`; searched: {}",
        app.display()
    );
    for (device, platform) in
        [("intel", "Intel(R) OpenCL"), ("pocl", "Portable Computing Language")]
    {
        let out = output(
            Command::new(&app)
                .arg(&file)
                .env("SYCL_CACHE_DISABLE", "1")
                .env("SYCL_TRACE", "1")
                .env("SYCL_DEVICE", device),
        );
        let (o, e) = (stdout(&out), stderr(&out));
        assert!(out.status.success(), "{device}: {o}{e}");
        let name = device_name(&e, device, platform);
        assert_eq!(
            o.lines().collect::<Vec<&str>>(),
            [
                format!("before: {unresolved}"),
                "loaded: [0, 7, 14, 21]".into(),
                r#"library kernels: ["devlib_kernel"]"#.into(),
                "library kernel: [42, 42, 42, 42]".into(),
                // Unloading makes it fail again.
                format!("unloaded: {unresolved}"),
                // A scope of its own serves only itself.
                format!(
                    "own scope: {unresolved}; devlib.sydl exports it, but was loaded with \
                     LibraryScope::Own, so only its own images may use its exports (load it with \
                     sycl_runtime::load_device_library, whose scope is global)"
                ),
                "device library /nonexistent/lib.sydl: No such file or directory (os error 2)"
                    .into(),
                "device library /etc/hostname: malformed device library: bad magic".into(),
            ],
            "on {device}:\n{e}"
        );
        // Each load and unload is noticed at the next launch, which reads the file's images only
        // when it appears and reads nothing loaded again.
        let trace = |event: &str| -> Vec<String> {
            let prefix = format!("sycl: {event} ");
            e.lines().filter_map(|l| l.strip_prefix(prefix.as_str())).map(str::to_string).collect()
        };
        let appeared = format!("appeared: {path}; went: none");
        assert_eq!(
            trace("rediscover"),
            [appeared.clone(), format!("appeared: none; went: {path}"), appeared],
            "on {device}:\n{e}"
        );
        let discovered = format!("{path}: 2 image(s) from a device library file");
        assert_eq!(
            trace("discover"),
            [format!("{}: 1 image", app.display()), discovered.clone(), discovered],
            "on {device}:\n{e}"
        );
        // The kernel links the file's image 1 (devlib_func); the library's own kernel, its
        // image 0, links the same image 1 as a bundle. Intel's CPU runtime compiles each
        // image once and links them; for PoCL 3.1 the runtime links.
        let builds: Vec<&str> = e
            .lines()
            .filter_map(|l| l.strip_prefix("sycl: "))
            .filter(|l| l.starts_with("compile ") || l.starts_with("link "))
            .collect();
        let want: Vec<String> = if device == "intel" {
            vec![
                format!("compile devlib-app image 0 on {name}"),
                format!("compile devlib.sydl image 1 on {name}"),
                format!("link use_devlib on {name}: devlib-app image 0 + devlib.sydl image 1"),
                format!("compile devlib.sydl image 0 on {name}"),
                format!("link (bundle) on {name}: devlib.sydl image 0 + devlib.sydl image 1"),
            ]
        } else {
            let how = "(linked by the runtime, translated to SPIR)";
            vec![
                format!(
                    "link use_devlib on {name} {how}: devlib-app image 0 + devlib.sydl image 1"
                ),
                format!("link (bundle) on {name} {how}: devlib.sydl image 0 + devlib.sydl image 1"),
            ]
        };
        assert_eq!(builds, want, "on {device}:\n{e}");
    }
    // The file is an image set in the embedded encoding.
    let set = sycl_format::ImageSet::decode(&std::fs::read(&file).unwrap()).unwrap();
    assert!(set.images.iter().any(|i| i.exported_symbols().any(|s| s == "devlib_func")));
    // `sycl-ld inspect` lists it as it lists a binary's.
    let out = output(Command::new(sycl_tests::sycl_ld()).args(["inspect", "--json"]).arg(&file));
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
