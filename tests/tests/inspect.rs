//! `sycl-ld inspect` on every fixture binary, compared with `tests/expected/*`.

use std::process::Command;

use sycl_tests::{assert_expected, built_sycl_ld, fixtures, output, sycl_ld};

fn inspect(file: &str, json: bool) -> String {
    let path = fixtures().join(file);
    let mut cmd = Command::new(sycl_ld());
    cmd.arg("inspect").arg(&path);
    if json {
        cmd.arg("--json");
    }
    let out = output(&mut cmd);
    assert!(out.status.success(), "inspect {file}: {}", String::from_utf8_lossy(&out.stderr));
    // The path depends on the checkout; the expected files name the binary only.
    String::from_utf8(out.stdout)
        .unwrap()
        .replace(&path.display().to_string(), file.rsplit('/').next().unwrap())
}

#[test]
fn inspect_json_of_every_fixture() {
    for file in [
        "app",
        "deps/libhelpers.so",
        "chain-app",
        "deps/libchain_a.so",
        "deps/libchain_b.so",
        "static-app",
        "cpp-app",
        "deps/libcpp_lib.so",
        "unresolved-app",
        "features-app",
        "bundle-app",
        "vfunc-app",
        // Device code in Rust (issue 43): Rust kernels and OpenCL C ones in one binary, device
        // functions in Rust and in OpenCL C in libraries.
        "rs-app",
        "deps/librs_lib.so",
        "deps/libcl_lib.so",
        "deps/librs_alt.so",
    ] {
        let name = file.rsplit('/').next().unwrap();
        assert_expected(&format!("{name}.json"), &inspect(file, true));
    }
}

#[test]
fn inspect_shows_the_demo_symbols_on_both_sides() {
    let app: serde_json::Value = serde_json::from_str(&inspect("app", true)).unwrap();
    let lib: serde_json::Value =
        serde_json::from_str(&inspect("deps/libhelpers.so", true)).unwrap();
    assert_eq!(app["images"][0]["imported"], serde_json::json!(["LibDeviceFunc"]));
    // Image 0 is the library's kernel (which exports nothing); image 1 exports LibDeviceFunc.
    assert_eq!(lib["images"][0]["kernels"], serde_json::json!(["lib_kernel"]));
    assert_eq!(lib["images"][0]["exported"], serde_json::json!([]));
    assert_eq!(lib["images"][1]["exported"], serde_json::json!(["LibDeviceFunc"]));
    assert_eq!(lib["images"][1]["properties"]["SYCL/exported symbols"]["LibDeviceFunc"], 1);
}

#[test]
fn inspect_text_of_the_demo_app() {
    // Sizes of SPIR-V differ with compiler versions; the text form keeps them, so mask them.
    let text = inspect("app", false);
    let masked: String = text
        .lines()
        .map(|l| match l.find(" bytes)") {
            Some(end) => format!("{}N bytes)", &l[..l[..end].rfind('(').unwrap() + 1]),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_expected("app.txt", &(masked + "\n"));
}

#[test]
fn extract_writes_each_image_as_its_tools_read_it() {
    let path = fixtures().join("deps/libhelpers.so");
    let dir = tempfile::tempdir().unwrap();
    let out = output(
        Command::new(sycl_ld())
            .args(["inspect", "--json"])
            .arg(&path)
            .arg("--extract")
            .arg(dir.path().join("images")),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let images = listed["images"].as_array().unwrap();
    assert!(!images.is_empty());
    for (i, image) in images.iter().enumerate() {
        let (format, target) =
            (image["format"].as_str().unwrap(), image["target"].as_str().unwrap());
        let extension = match format {
            "spirv" => "spv",
            "ptx" => "ptx",
            other => panic!("a fixture image in {other}"),
        };
        let file = dir.path().join("images").join(format!("image-{i}.{target}.{extension}"));
        let code = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        match extension {
            "spv" => assert_eq!(code[..4], 0x0723_0203u32.to_le_bytes(), "{}", file.display()),
            _ => assert!(String::from_utf8_lossy(&code).contains(".version"), "{}", file.display()),
        }
    }
    assert_eq!(std::fs::read_dir(dir.path().join("images")).unwrap().count(), images.len());
}

#[test]
fn inspect_of_a_binary_without_device_code_lists_nothing() {
    let sycl_ld = built_sycl_ld();
    let out = output(Command::new(&sycl_ld).args(["inspect", "--json"]).arg(&sycl_ld));
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["images"], serde_json::json!([]));
}

#[test]
fn inspect_of_a_missing_file_names_it() {
    let out = output(Command::new(built_sycl_ld()).args(["inspect", "/nonexistent/libnothing.so"]));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/libnothing.so"));
}

/// The guide crate's rlib carries its three sources' device objects (bundled from its
/// `libsycl_device_guide.a`): inspect names each, with the images a link makes of them; the
/// archive and one of its members alone read the same way.
#[test]
fn inspect_reads_device_objects_in_rlibs_archives_and_objects() {
    let deps = fixtures().join("deps");
    let rlib = std::fs::read_dir(&deps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("libguide-") && name.ends_with(".rlib")
        })
        .expect("the guide crate's rlib");
    let run = |path: &std::path::Path, json: bool| {
        let mut cmd = Command::new(sycl_ld());
        cmd.arg("inspect").arg(path);
        if json {
            cmd.arg("--json");
        }
        let out = output(&mut cmd);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run(&rlib, false);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].ends_with(
            ": 3 device objects (not linked yet: below, the spir64 images a link makes of them)"
        ),
        "{text}"
    );
    for (line, source) in lines[1..4].iter().zip(["guide.cl", "uses_mylib.cl", "heat.cl"]) {
        assert!(
            line.contains(".rlib(sycl-device-")
                && line.contains(&format!("package guide, source device/{source}, split auto")),
            "{line}"
        );
    }
    assert!(lines[4].contains(" device image"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&run(&rlib, true)).unwrap();
    assert_eq!(json["device_objects"].as_array().unwrap().len(), 3, "{json}");
    assert_eq!(json["device_objects"][2]["source"], "device/heat.cl");
    assert!(!json["images"].as_array().unwrap().is_empty(), "{json}");
    // The archive the rlib bundled, and a member of it, alone.
    let dir = tempfile::tempdir().unwrap();
    let unpacked = output(Command::new("ar").arg("x").arg(&rlib).current_dir(dir.path()));
    assert!(unpacked.status.success());
    let member = dir.path().join(
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with("sycl-device-2"))
            .expect("the heat.cl device object"),
    );
    let one = run(&member, false);
    assert!(
        one.lines().next().unwrap().ends_with(
            ": 1 device object (not linked yet: below, the spir64 images a link makes of them)"
        ),
        "{one}"
    );
    assert!(one.contains("source device/heat.cl"), "{one}");
}
