//! Device code from files and function pointers across libraries (DPC++'s other
//! ways of supplying device code).

use std::process::Command;

use sycl_tests::{
    device_lib, discovered, output, repo_root, run_fixture_with, stderr, stdout, unresolved, Run,
    DEVICES,
};

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
    let path = file.display().to_string();
    let unresolved = unresolved("devlib_func", "use_devlib", &["devlib-app"]);
    for device in DEVICES {
        let run = Run::new(device, "devlib-app", &[&path], &[]);
        assert_eq!(
            run.out.lines().collect::<Vec<&str>>(),
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
            "{}",
            run.say()
        );
        // Each load and unload is noticed at the next launch, which reads the file's images only
        // when it appears and reads nothing loaded again.
        let appeared = format!("appeared: {path}; went: none");
        assert_eq!(
            run.events("rediscover"),
            [appeared.clone(), format!("appeared: none; went: {path}"), appeared],
            "{}",
            run.say()
        );
        let file_images = format!("{path}: 2 image(s) from a device library file");
        let mut want = discovered(&["devlib-app: 1 image"]);
        want.extend([file_images.clone(), file_images]);
        assert_eq!(run.events("discover"), want, "{}", run.say());
        // The kernel links the file's image 1 (devlib_func); the library's own kernel, its
        // image 0, links the same image 1 as a bundle (image 1 compiled by then).
        let mut builds = run.build(
            "use_devlib",
            &["devlib-app image 0", "devlib.sydl image 1"],
            "devlib-app image 0 + devlib.sydl image 1",
        );
        builds.extend(run.build(
            "(bundle)",
            &["devlib.sydl image 0"],
            "devlib.sydl image 0 + devlib.sydl image 1",
        ));
        assert_eq!(run.builds(), builds, "{}", run.say());
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
    for device in DEVICES {
        let run = Run::new(device, "fnptr-app", &[], &[]);
        assert_eq!(
            run.out,
            "app_to_lib: [1, 2, 5, 10]\ntake_lib_address: [0, 3, 6, 9]\nlib_to_app: [100, 103, 106, 109]\n",
            "{}",
            run.say()
        );
        let own_link = run.trace.contains("(linked by the runtime, translated to SPIR)");
        assert_eq!(own_link, !device.driver_links, "{}", run.say());
    }
}
