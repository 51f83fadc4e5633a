//! The runtime on the real devices: both devices in one process, device requirement checks,
//! the loader's doings on both CPU devices (loader-order resolution with `LD_PRELOAD`,
//! duplicates and strict mode, `dlopen`/`dlclose`, `RTLD_LOCAL`, malformed images), compile
//! counts, threads, and the persistent cache across processes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sycl_tests::{
    discovered, events, fixtures, ok, output, run_fixture, run_fixture_with, stderr, stdout,
    unresolved, Run, DEVICES,
};

/// What a launch of scoped-app's `app_uses_scoped` says while `library` (`a` or `b`) was
/// opened `RTLD_LOCAL`: its dependency exports `scoped_func`, for it alone.
fn only_for_its_library(library: &str) -> String {
    format!(
        "libscoped_dep_{library}.so exports it, but was loaded for libscoped_{library}.so, which was \
         opened RTLD_LOCAL, so only libscoped_{library}.so and its dependencies may use its exports, \
         and scoped-app image 0 is not one of them (open the library RTLD_GLOBAL, or link scoped-app \
         against libscoped_dep_{library}.so)"
    )
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
    assert_eq!(
        out,
        "K2: ok\nfixed_sub_group: ok\nintel_only: ok\nwide: ok\nK1: ok\nK1 result: [0, 3, 6, 9, 12, 15, 18, 21]\n",
        "Intel's CPU runtime runs them all"
    );
}

fn deps(file: &str) -> PathBuf {
    fixtures().join("deps").join(file)
}

#[test]
fn ld_preload_replaces_a_library_device_function() {
    let preload = deps("libfast_helpers.so");
    let preload = preload.to_str().unwrap();
    for device in DEVICES {
        let run = Run::new(device, "app", &[], &[("LD_PRELOAD", preload)]);
        assert_eq!(
            run.out,
            "0 3 6 9 12 15 18 21\n",
            "the preloaded LibDeviceFunc wins {}",
            run.say()
        );
        assert!(
            run.trace.lines().any(|l| l.starts_with("sycl: duplicate LibDeviceFunc: exported by libfast_helpers.so image 0, libhelpers.so image 1; the first in loader order wins: libfast_helpers.so image 0 (for ")),
            "{}",
            run.say()
        );
        assert_eq!(
            run.builds(),
            run.build(
                "app_kernel",
                &["app image 0", "libfast_helpers.so image 0"],
                "app image 0 + libfast_helpers.so image 0"
            ),
            "{}",
            run.say()
        );

        let on = device.selector;
        let strict = run_fixture_with(
            "app",
            &[("SYCL_DEVICE", on), ("LD_PRELOAD", preload), ("SYCL_STRICT_EXPORTS", "1")],
        );
        let (out, err) = (stdout(&strict), stderr(&strict));
        assert_eq!((strict.status.code(), out.as_str()), (Some(1), ""), "strict on {on}: {err}");
        let said: Vec<&str> = err.lines().filter(|l| !l.starts_with("sycl: ")).collect();
        assert_eq!(
            said,
            ["error: device symbol `LibDeviceFunc` is exported by more than one binary: libfast_helpers.so image 0, libhelpers.so image 1 (strict mode)"],
            "strict on {on}: {err}"
        );
        assert!(events(&err, "link").is_empty(), "strict on {on}: nothing built: {err}");
    }
}

/// 200 cycles of dlopen, launch, dlclose after the three launches of
/// [`a_dlopen_reads_only_the_new_library_and_a_dlclose_forgets_its_programs`]: every launch
/// is right, and the process's resident memory stays flat after 10 cycles of warm-up.
#[test]
fn dlopen_and_dlclose_are_noticed_over_200_cycles() {
    for device in DEVICES {
        let run = Run::new(device, "dlopen-app", &["200"], &[]);
        let lines: Vec<&str> = run.out.lines().collect();
        let unresolved = unresolved("plugin_func", "use_plugin", &["dlopen-app"]);
        assert_eq!(
            lines[..3],
            [
                format!("before: {unresolved}"),
                "open: [1000, 1001, 1002, 1003]".to_string(),
                format!("closed: {unresolved}"),
            ],
            "{}",
            run.say()
        );
        assert_eq!(lines.len(), 4, "{}", run.say());
        let growth: i64 = lines[3]
            .strip_prefix("cycles: 200 ok, resident growth after warm-up ")
            .and_then(|r| r.strip_suffix(" KiB"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}", run.say()));
        assert!(
            growth < 8 * 1024,
            "on {}: resident memory grew by {growth} KiB over 190 cycles",
            device.selector
        );
    }
}

#[test]
fn start_up_discovers_once_though_the_drivers_open_libraries() {
    for device in DEVICES {
        let run = Run::new(device, "app", &[], &[]);
        assert_eq!(run.out, "0 2 4 6 8 10 12 14\n", "{}", run.say());
        let discovered: Vec<&str> =
            run.events("discover").iter().map(|l| l.rsplit('/').next().unwrap()).collect();
        assert_eq!(
            discovered,
            ["app: 2 images", "libhelpers.so: 2 images"],
            "each binary read once {}",
            run.say()
        );
        assert!(
            run.events("rediscover").is_empty(),
            "loading the OpenCL driver is no change of images {}",
            run.say()
        );
    }
}

#[test]
fn a_dlopen_reads_only_the_new_library_and_a_dlclose_forgets_its_programs() {
    // Before, open (launch), close (launch), then one cycle: open (launch), close.
    for device in DEVICES {
        let run = Run::new(device, "dlopen-app", &["1"], &[]);
        let lines: Vec<&str> = run.out.lines().collect();
        let unresolved = unresolved("plugin_func", "use_plugin", &["dlopen-app"]);
        assert_eq!(
            lines[..3],
            [
                format!("before: {unresolved}"),
                "open: [1000, 1001, 1002, 1003]".to_string(),
                format!("closed: {unresolved}"),
            ],
            "{}",
            run.say()
        );
        // The last line's growth is of no meaning after one cycle (no warm-up).
        assert!(
            lines.len() == 4
                && lines[3].starts_with("cycles: 1 ok, resident growth after warm-up "),
            "{}",
            run.say()
        );
        assert_eq!(
            run.events("rediscover"),
            [
                "appeared: libplugin.so; went: none",
                "appeared: none; went: libplugin.so",
                "appeared: libplugin.so; went: none"
            ],
            "{}",
            run.say()
        );
        // The executable is read once, the library at each opening, and nothing else.
        let plugin = "deps/libplugin.so: 1 image";
        assert_eq!(
            run.events("discover"),
            discovered(&["dlopen-app: 1 image", plugin, plugin]),
            "{}",
            run.say()
        );
        // The executable keeps its compiled object throughout (on Intel); the closed library's
        // programs are gone, so its reopening builds use_plugin again, no program of the
        // closed library served.
        let mut builds = run.build(
            "use_plugin",
            &["dlopen-app image 0", "libplugin.so image 0"],
            "dlopen-app image 0 + libplugin.so image 0",
        );
        builds.extend(run.build(
            "use_plugin",
            &["libplugin.so image 0"],
            "dlopen-app image 0 + libplugin.so image 0",
        ));
        assert_eq!(run.builds(), builds, "{}", run.say());
    }
}

/// `scoped-app reopen`: libscoped_a.so opened `RTLD_LOCAL`, closed, and opened again
/// `RTLD_GLOBAL`, where the loader maps it again where it was: the runtime takes it for the
/// library it read (its programs kept), and sees that it is global now.
#[test]
fn a_library_closed_and_opened_again_rtld_global_serves_everyone() {
    for device in DEVICES {
        let run = Run::new(device, "scoped-app", &["reopen"], &[]);
        let local_first = format!(
            "{}; {}",
            unresolved("scoped_func", "app_uses_scoped", &["scoped-app", "deps/libscoped_a.so"]),
            only_for_its_library("a")
        );
        assert_eq!(
            run.out.lines().collect::<Vec<&str>>(),
            [
                "kernel_a: [1, 2, 3, 4]".to_string(),
                format!("app_uses_scoped: {local_first}"),
                "kernel_a: [1, 2, 3, 4]".to_string(),
                "app_uses_scoped: [1, 2, 3, 4]".to_string(),
            ],
            "RTLD_LOCAL first, RTLD_GLOBAL then {}",
            run.say()
        );
        assert_eq!(
            run.events("rediscover"),
            [
                "appeared: libscoped_a.so, libscoped_dep_a.so; went: none",
                "appeared: none; went: none; now global: libscoped_a.so, libscoped_dep_a.so"
            ],
            "{}",
            run.say()
        );
        let mut builds = run.build(
            "kernel_a",
            &["libscoped_a.so image 0", "libscoped_dep_a.so image 0"],
            "libscoped_a.so image 0 + libscoped_dep_a.so image 0",
        );
        builds.push(format!("cache-hit kernel_a on {}", run.name));
        builds.extend(run.build(
            "app_uses_scoped",
            &["scoped-app image 0"],
            "scoped-app image 0 + libscoped_dep_a.so image 0",
        ));
        assert_eq!(run.builds(), builds, "{}", run.say());
    }
}

#[test]
fn every_image_is_compiled_once_and_reused_by_every_link() {
    let (out, trace) = ok(&run_fixture("compile_once"));
    assert_eq!(out, "lib_kernel: [100, 102, 104, 106]\napp_kernel: [0, 2, 4, 6]\napp_kernel2: [1, 3, 5, 7]\napp_kernel: [0, 2, 4, 6]\n");
    let compiles = events(&trace, "compile");
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
        events(&trace, "link").iter().filter(|l| l.contains("libhelpers.so image 1")).count(),
        2,
        "{trace}"
    );
    let hits = events(&trace, "cache-hit");
    assert_eq!(hits.iter().filter(|l| l.starts_with("app_kernel ")).count(), 1, "{trace}");
}

#[test]
fn sixteen_threads_launching_twenty_kernels_build_once() {
    let (out, trace) = ok(&run_fixture("threads-app"));
    assert_eq!(out, "16 threads x 20 kernels ok\n");
    assert_eq!(events(&trace, "compile").len(), 1, "{trace}");
    assert_eq!(events(&trace, "link").len(), 1, "{trace}");
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
    let outs: Vec<Output> = std::thread::scope(|s| {
        let runs: Vec<_> =
            (0..8).map(|_| s.spawn(|| output(&mut app_with_cache(&cache)))).collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    for out in &outs {
        assert_eq!(ok(out).0, "0 2 4 6 8 10 12 14\n");
    }
    let files = entries(&cache);
    assert_eq!(files.len(), 1, "one entry, no temporary files left: {files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "bin"));
    let (out, trace) = ok(&output(&mut app_with_cache(&cache)));
    assert_eq!(out, "0 2 4 6 8 10 12 14\n");
    assert_eq!(events(&trace, "persist-hit").len(), 1, "{trace}");
    assert!(events(&trace, "compile").is_empty(), "{trace}");
}

#[test]
fn a_corrupt_cache_entry_is_detected_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    ok(&output(&mut app_with_cache(&cache)));
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
        let (out, trace) = ok(&output(&mut app_with_cache(&cache)));
        assert_eq!(out, "0 2 4 6 8 10 12 14\n");
        assert_eq!(events(&trace, "cache-corrupt").len(), 1, "{trace}");
        assert_eq!(events(&trace, "persist-store").len(), 1, "{trace}");
    }
    let (_, trace) = ok(&output(&mut app_with_cache(&cache)));
    assert_eq!(events(&trace, "persist-hit").len(), 1, "the rebuilt entry serves: {trace}");
}

#[test]
fn a_cache_directory_others_can_write_is_refused_and_launches_still_work() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("open");
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (out, err) = ok(&output(&mut app_with_cache(&cache)));
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
    for device in DEVICES {
        let run = Run::new(device, "app", &[], &[("LD_PRELOAD", broken.to_str().unwrap())]);
        assert_eq!(
            run.out,
            "0 2 4 6 8 10 12 14\n",
            "libhelpers.so's LibDeviceFunc, since libbroken.so is unreadable {}",
            run.say()
        );
        let ignored = format!(
            "sycl: discover {}: malformed device images ignored: unknown version 99 (this build \
             reads versions {} to {})",
            broken.display(),
            sycl_format::IMAGE_SET_OLDEST_VERSION,
            sycl_format::IMAGE_SET_VERSION
        );
        assert!(run.trace.lines().any(|l| l == ignored), "{ignored} {}", run.say());
        assert_eq!(
            run.builds(),
            run.build(
                "app_kernel",
                &["app image 0", "libhelpers.so image 1"],
                "app image 0 + libhelpers.so image 1"
            ),
            "{}",
            run.say()
        );
    }
}

/// `scoped-app local` and `scoped-app global`.
#[test]
fn libraries_opened_rtld_local_resolve_only_among_themselves() {
    for device in DEVICES {
        let run = Run::new(device, "scoped-app", &["local"], &[]);
        // libscoped_a.so and libscoped_b.so each use their own dependency's scoped_func
        // (libscoped_b.so too, though libscoped_dep_a.so comes first in loader order); the
        // error of the application's kernel says who has the symbol and why it was not used,
        // rather than listing those libraries as merely searched.
        let searched = ["scoped-app", "deps/libscoped_a.so", "deps/libscoped_b.so"];
        let error = format!(
            "{}; {}; {}",
            unresolved("scoped_func", "app_uses_scoped", &searched),
            only_for_its_library("a"),
            only_for_its_library("b")
        );
        assert_eq!(
            run.out.lines().collect::<Vec<&str>>(),
            [
                "kernel_a: [1, 2, 3, 4]".to_string(),
                "kernel_b: [2, 3, 4, 5]".to_string(),
                format!("app_uses_scoped: {error}"),
            ],
            "{}",
            run.say()
        );
        let local: Vec<String> = ["scoped_a", "scoped_dep_a", "scoped_b", "scoped_dep_b"]
            .iter()
            .map(|l| format!("deps/lib{l}.so: 1 image (RTLD_LOCAL)"))
            .collect();
        let local: Vec<&str> = local.iter().map(String::as_str).collect();
        assert_eq!(run.events("discover")[1..], discovered(&local), "{}", run.say());
        let mut builds = run.build(
            "kernel_a",
            &["libscoped_a.so image 0", "libscoped_dep_a.so image 0"],
            "libscoped_a.so image 0 + libscoped_dep_a.so image 0",
        );
        builds.extend(run.build(
            "kernel_b",
            &["libscoped_b.so image 0", "libscoped_dep_b.so image 0"],
            "libscoped_b.so image 0 + libscoped_dep_b.so image 0",
        ));
        assert_eq!(run.builds(), builds, "{}", run.say());

        let run = Run::new(device, "scoped-app", &["global"], &[]);
        assert_eq!(
            run.out,
            "kernel_a: [1, 2, 3, 4]\napp_uses_scoped: [1, 2, 3, 4]\n",
            "RTLD_GLOBAL exports serve everyone {}",
            run.say()
        );
        let mut builds = run.build(
            "kernel_a",
            &["libscoped_a.so image 0", "libscoped_dep_a.so image 0"],
            "libscoped_a.so image 0 + libscoped_dep_a.so image 0",
        );
        builds.extend(run.build(
            "app_uses_scoped",
            &["scoped-app image 0"],
            "scoped-app image 0 + libscoped_dep_a.so image 0",
        ));
        assert_eq!(run.builds(), builds, "{}", run.say());
    }
}

/// The GPU benchmark's kernels (register-blocked SGEMM in local memory, n-body with its hot
/// function in another library, vector loads) build and give the CPU reference's results on
/// both CPU devices, small: what CI can check of the benchmark without a GPU. Half precision
/// (`hsaxpy`) is checked where the device has `fp16`.
#[test]
fn the_gpu_benchmarks_kernels_run_right_on_both_cpu_devices() {
    for device in DEVICES {
        let run = Run::new(device, "gpu-bench", &["--smoke"], &[]);
        assert_eq!(
            run.out,
            format!(
                "gpu-bench smoke on {}: saxpy, copy4, sgemm, nbody, nbody_lib checked\n",
                run.name
            ),
            "{}",
            run.say()
        );
        let half = run
            .trace
            .lines()
            .any(|l| l == "gpu-bench smoke: hsaxpy checked too (the device has fp16)");
        assert_eq!(half, device.fp16, "{}", run.say());
    }
}
