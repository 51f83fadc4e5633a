//! The runtime on the real devices: both devices in one process, device requirement checks,
//! loader-order resolution (LD_PRELOAD, duplicates, strict mode), dlopen/dlclose, compile
//! counts, threads, the persistent cache across processes, and malformed images.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use sycl_tests::{fixtures, run_fixture, run_fixture_with, stderr, stdout};

fn ok(out: &Output) -> (String, String) {
    let (o, e) = (stdout(out), stderr(out));
    assert!(out.status.success(), "failed:\n{o}{e}");
    (o, e)
}

fn lines<'a>(trace: &'a str, prefix: &str) -> Vec<&'a str> {
    trace.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[test]
fn one_binary_runs_on_both_devices_in_one_process() {
    let (out, trace) = ok(&run_fixture("two_devices"));
    assert_eq!(out, "intel: [0, 2, 4, 6, 8, 10, 12, 14]\npocl: [0, 2, 4, 6, 8, 10, 12, 14]\n");
    assert!(trace.contains("sycl: device Portable Computing Language"), "{trace}");
    assert!(trace.contains("(linked by the runtime, translated to SPIR)"), "{trace}");
}

#[test]
fn the_demo_runs_on_pocl_too() {
    let (out, _) = ok(&run_fixture_with("app", &[("SYCL_DEVICE", "pocl")]));
    assert_eq!(out, "0 2 4 6 8 10 12 14\n");
}

#[test]
fn pocl_refuses_what_it_cannot_run_with_dpcpps_messages() {
    let (out, trace) = ok(&run_fixture_with("not_supported", &[("SYCL_DEVICE", "pocl")]));
    let expected = [
        "K2: kernel_not_supported: Kernel uses optional feature corresponding to 'aspect::fp16' but device does not support this aspect.",
        "fixed_sub_group: kernel_not_supported: Kernel has a required sub-group size of '8' but device does not support this sub-group size.",
        "intel_only: kernel_not_supported: Kernel was compiled with '-fsycl-fixed-targets=intel_cpu_x86_64' but was submitted to a different device.",
        "wide: ok",
        "K1: ok",
        "K1 result: [0, 3, 6, 9, 12, 15, 18, 21]",
    ];
    let got: Vec<&str> = out.lines().map(|l| l.split(" (kernel `").next().unwrap()).collect();
    assert_eq!(got, expected);
    for refused in ["K2", "fixed_sub_group", "intel_only"] {
        assert!(
            !trace.contains(&format!("build {refused} ")),
            "{refused} must not reach the device:\n{trace}"
        );
    }
    let (out, _) = ok(&run_fixture_with("not_supported", &[("SYCL_DEVICE", "intel")]));
    assert!(out.lines().take(5).all(|l| l.ends_with(": ok")), "{out}");
}

fn deps(file: &str) -> PathBuf {
    fixtures().join("deps").join(file)
}

#[test]
fn ld_preload_replaces_a_library_device_function() {
    let preload = deps("libfast_helpers.so");
    let (out, trace) = ok(&run_fixture_with("app", &[("LD_PRELOAD", preload.to_str().unwrap())]));
    assert_eq!(out, "0 3 6 9 12 15 18 21\n", "the preloaded LibDeviceFunc wins");
    assert!(
        trace.contains("sycl: duplicate LibDeviceFunc: exported by libfast_helpers.so image 0, libhelpers.so image 1; the first in loader order wins"),
        "{trace}"
    );
    let strict = run_fixture_with(
        "app",
        &[("LD_PRELOAD", preload.to_str().unwrap()), ("SYCL_STRICT_EXPORTS", "1")],
    );
    assert!(!strict.status.success());
    assert!(
        stderr(&strict).contains("device symbol `LibDeviceFunc` is exported by more than one binary: libfast_helpers.so image 0, libhelpers.so image 1"),
        "{}",
        stderr(&strict)
    );
}

#[test]
fn dlopen_and_dlclose_are_noticed_over_200_cycles() {
    let out = Command::new(fixtures().join("dlopen-app"))
        .arg("200")
        .env("SYCL_CACHE_DISABLE", "1")
        .output()
        .unwrap();
    let (out, _) = ok(&out);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("before: error: unresolved device symbol `plugin_func` imported for kernel `use_plugin`"), "{out}");
    assert_eq!(lines[1], "open: [1000, 1001, 1002, 1003]");
    assert!(lines[2].starts_with("closed: error: unresolved device symbol `plugin_func`"), "{out}");
    let growth: i64 = lines[3]
        .strip_prefix("cycles: 200 ok, resident growth after warm-up ")
        .and_then(|r| r.strip_suffix(" KiB"))
        .unwrap_or_else(|| panic!("{out}"))
        .parse()
        .unwrap();
    assert!(growth < 8 * 1024, "resident memory grew by {growth} KiB over 190 cycles");
}

/// The trace lines of one event, without `sycl: EVENT `.
fn events<'a>(trace: &'a str, event: &str) -> Vec<&'a str> {
    let prefix = format!("sycl: {event} ");
    trace.lines().filter_map(|l| l.strip_prefix(prefix.as_str())).collect()
}

#[test]
fn start_up_discovers_once_though_the_drivers_open_libraries() {
    let (out, trace) = ok(&run_fixture("app"));
    assert_eq!(out, "0 2 4 6 8 10 12 14\n");
    let discovered: Vec<&str> =
        events(&trace, "discover").iter().map(|l| l.rsplit('/').next().unwrap()).collect();
    assert_eq!(
        discovered,
        ["app: 2 images", "libhelpers.so: 2 images"],
        "each binary read once:\n{trace}"
    );
    assert!(
        events(&trace, "rediscover").is_empty(),
        "loading the OpenCL drivers is no change of images:\n{trace}"
    );
}

#[test]
fn a_dlopen_reads_only_the_new_library_and_a_dlclose_forgets_its_programs() {
    // Before, open (launch), close (launch), then one cycle: open (launch), close.
    let out = Command::new(fixtures().join("dlopen-app"))
        .arg("1")
        .env("SYCL_CACHE_DISABLE", "1")
        .env("SYCL_TRACE", "1")
        .output()
        .unwrap();
    let (out, trace) = ok(&out);
    assert!(out.contains("open: [1000, 1001, 1002, 1003]\n"), "{out}");
    assert_eq!(
        events(&trace, "rediscover"),
        [
            "appeared: libplugin.so; went: none",
            "appeared: none; went: libplugin.so",
            "appeared: libplugin.so; went: none"
        ],
        "{trace}"
    );
    // Every rediscovery that found the library read it, and nothing else.
    let after_rediscover: Vec<&str> = trace
        .lines()
        .zip(trace.lines().skip(1))
        .filter(|(l, _)| l.starts_with("sycl: rediscover appeared: libplugin.so"))
        .map(|(_, next)| next.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(after_rediscover, ["libplugin.so: 1 image", "libplugin.so: 1 image"], "{trace}");
    assert_eq!(
        events(&trace, "discover").len(),
        3,
        "dlopen-app once, libplugin.so at each opening:\n{trace}"
    );
    // The executable keeps its binary (and compiled object) throughout; the closed library's
    // programs are gone, so its reopening compiles and links again.
    let compiles = events(&trace, "compile");
    assert_eq!(
        compiles.iter().filter(|l| l.starts_with("dlopen-app image 0 ")).count(),
        1,
        "{trace}"
    );
    assert_eq!(
        compiles.iter().filter(|l| l.starts_with("libplugin.so image 0 ")).count(),
        2,
        "{trace}"
    );
    assert_eq!(events(&trace, "link").len(), 2, "{trace}");
    assert!(
        events(&trace, "cache-hit").is_empty(),
        "no program of the closed library served:\n{trace}"
    );
}

#[test]
fn a_library_closed_and_opened_again_rtld_global_serves_everyone() {
    let out = Command::new(fixtures().join("scoped-app"))
        .arg("reopen")
        .env("SYCL_CACHE_DISABLE", "1")
        .env("SYCL_TRACE", "1")
        .output()
        .unwrap();
    let (out, trace) = ok(&out);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "kernel_a: [1, 2, 3, 4]");
    assert!(
        lines[1].starts_with("app_uses_scoped: error: unresolved device symbol `scoped_func`"),
        "RTLD_LOCAL first:\n{out}"
    );
    assert_eq!(
        lines[2..],
        ["kernel_a: [1, 2, 3, 4]", "app_uses_scoped: [1, 2, 3, 4]"],
        "RTLD_GLOBAL then:\n{out}\n{trace}"
    );
}

#[test]
fn every_image_is_compiled_once_and_reused_by_every_link() {
    let (out, trace) = ok(&run_fixture("compile_once"));
    assert_eq!(out, "lib_kernel: [100, 102, 104, 106]\napp_kernel: [0, 2, 4, 6]\napp_kernel2: [1, 3, 5, 7]\napp_kernel: [0, 2, 4, 6]\n");
    let compiles = lines(&trace, "sycl: compile ");
    let mut unique = compiles.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(compiles.len(), unique.len(), "an image compiled twice:\n{trace}");
    assert_eq!(
        compiles.iter().filter(|l| l.contains("libhelpers.so image 1")).count(),
        1,
        "{trace}"
    );
    assert_eq!(
        lines(&trace, "sycl: link ").iter().filter(|l| l.contains("libhelpers.so image 1")).count(),
        2,
        "{trace}"
    );
    assert_eq!(lines(&trace, "sycl: cache-hit app_kernel ").len(), 1, "{trace}");
}

#[test]
fn sixteen_threads_launching_twenty_kernels_build_once() {
    let (out, trace) = ok(&run_fixture("threads-app"));
    assert_eq!(out, "16 threads x 20 kernels ok\n");
    assert_eq!(lines(&trace, "sycl: compile ").len(), 1, "{trace}");
    assert_eq!(lines(&trace, "sycl: link ").len(), 1, "{trace}");
}

fn app_with_cache(dir: &Path) -> Command {
    let mut cmd = Command::new(fixtures().join("app"));
    cmd.env("SYCL_TRACE", "1")
        .env("SYCL_CACHE_DIR", dir)
        .env_remove("SYCL_CACHE_DISABLE")
        .env("SYCL_DEVICE", "intel");
    cmd
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    out.sort();
    out
}

#[test]
fn eight_processes_starting_together_on_an_empty_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let children: Vec<_> = (0..8)
        .map(|_| {
            app_with_cache(&cache).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(ok(&out).0, "0 2 4 6 8 10 12 14\n");
    }
    let files = entries(&cache);
    assert_eq!(files.len(), 1, "one entry, no temporary files left: {files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "bin"));
    let (out, trace) = ok(&app_with_cache(&cache).output().unwrap());
    assert_eq!(out, "0 2 4 6 8 10 12 14\n");
    assert_eq!(lines(&trace, "sycl: persist-hit ").len(), 1, "{trace}");
    assert!(lines(&trace, "sycl: compile ").is_empty(), "{trace}");
}

#[test]
fn a_corrupt_cache_entry_is_detected_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    ok(&app_with_cache(&cache).output().unwrap());
    let entry = entries(&cache).pop().unwrap();
    let bytes = std::fs::read(&entry).unwrap();
    for damaged in [
        bytes[..bytes.len() / 2].to_vec(),
        {
            let mut b = bytes.clone();
            let n = b.len() - 1;
            b[n] ^= 0xff;
            b
        },
        b"garbage".to_vec(),
    ] {
        std::fs::write(&entry, &damaged).unwrap();
        let (out, trace) = ok(&app_with_cache(&cache).output().unwrap());
        assert_eq!(out, "0 2 4 6 8 10 12 14\n");
        assert_eq!(lines(&trace, "sycl: cache-corrupt ").len(), 1, "{trace}");
        assert_eq!(lines(&trace, "sycl: persist-store ").len(), 1, "{trace}");
    }
    let (_, trace) = ok(&app_with_cache(&cache).output().unwrap());
    assert_eq!(lines(&trace, "sycl: persist-hit ").len(), 1, "the rebuilt entry serves: {trace}");
}

#[test]
fn a_cache_directory_others_can_write_is_refused_and_launches_still_work() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("open");
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (out, err) = ok(&app_with_cache(&cache).output().unwrap());
    assert_eq!(out, "0 2 4 6 8 10 12 14\n");
    assert!(
        err.contains("sycl: warning: persistent cache off:") && err.contains("writable by others"),
        "{err}"
    );
    assert!(entries(&cache).is_empty());
}

#[test]
fn a_library_with_malformed_images_is_skipped_and_the_rest_works() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("libbroken.so");
    let mut bytes = std::fs::read(deps("libfast_helpers.so")).unwrap();
    let at = bytes.windows(8).position(|w| w == sycl_format::IMAGE_SET_MAGIC).unwrap();
    bytes[at + 8] = 99; // a version from the future
    std::fs::write(&broken, bytes).unwrap();
    let (out, trace) = ok(&run_fixture_with("app", &[("LD_PRELOAD", broken.to_str().unwrap())]));
    assert_eq!(
        out, "0 2 4 6 8 10 12 14\n",
        "libhelpers.so's LibDeviceFunc, since libbroken.so is unreadable"
    );
    assert!(
        trace.contains("libbroken.so: malformed device images ignored: unknown version 99"),
        "{trace}"
    );
}

#[test]
fn libraries_opened_rtld_local_resolve_only_among_themselves() {
    let out = Command::new(fixtures().join("scoped-app"))
        .arg("local")
        .env("SYCL_CACHE_DISABLE", "1")
        .env("SYCL_TRACE", "1")
        .output()
        .unwrap();
    let (out, trace) = ok(&out);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0], "kernel_a: [1, 2, 3, 4]",
        "libscoped_a.so uses its own dependency's scoped_func"
    );
    assert_eq!(
        lines[1], "kernel_b: [2, 3, 4, 5]",
        "libscoped_b.so too, though libscoped_dep_a.so comes first in loader order"
    );
    assert!(
        lines[2].starts_with("app_uses_scoped: error: unresolved device symbol `scoped_func`"),
        "{out}"
    );
    // The error says who has the symbol and why it was not used, rather than listing those
    // libraries as merely searched.
    assert!(
        lines[2].contains("; libscoped_dep_a.so exports it, but was loaded for libscoped_a.so, which was opened RTLD_LOCAL, so only libscoped_a.so and its dependencies may use its exports, and scoped-app image 0 is not one of them"),
        "{out}"
    );
    let searched = lines[2].split("; searched: ").nth(1).unwrap().split("; ").next().unwrap();
    assert!(!searched.contains("libscoped_dep_a.so"), "{out}");
    assert!(trace.contains("libscoped_a.so: 1 image (RTLD_LOCAL)"), "{trace}");

    let out = Command::new(fixtures().join("scoped-app"))
        .arg("global")
        .env("SYCL_CACHE_DISABLE", "1")
        .output()
        .unwrap();
    assert_eq!(
        ok(&out).0,
        "kernel_a: [1, 2, 3, 4]\napp_uses_scoped: [1, 2, 3, 4]\n",
        "RTLD_GLOBAL exports serve everyone"
    );
}

/// The GPU benchmark's kernels (register-blocked SGEMM in local memory, n-body with its hot
/// function in another library, vector loads) build and give the CPU reference's results on
/// both CPU devices, small: what CI can check of the benchmark without a GPU.
#[test]
fn the_gpu_benchmarks_kernels_run_right_on_both_cpu_devices() {
    for device in ["intel", "pocl"] {
        let out = Command::new(fixtures().join("gpu-bench"))
            .arg("--smoke")
            .env("SYCL_DEVICE", device)
            .env("SYCL_CACHE_DISABLE", "1")
            .output()
            .unwrap();
        let (out, _) = ok(&out);
        assert!(
            out.starts_with("gpu-bench smoke on ")
                && out.ends_with(": saxpy, copy4, sgemm, nbody, nbody_lib checked\n"),
            "{device}: {out}"
        );
    }
}

#[test]
fn a_binary_with_a_thousand_kernels_compiles_only_the_image_it_launches() {
    let out = run_fixture("startup-1000");
    let (out, trace) = ok(&out);
    assert!(out.contains("images 1000\n"), "{out}");
    let compiled: Vec<&str> = trace.lines().filter(|l| l.starts_with("sycl: compile ")).collect();
    assert_eq!(compiled.len(), 1, "one image compiled of 1,000:\n{trace}");
    assert!(compiled[0].contains("startup-1000 image "), "{}", compiled[0]);
}
