//! Device code written in Rust (issue 43), on both CPU devices. librs_lib.so (fixture `rs-lib`)
//! exports device functions written in Rust, libcl_lib.so (`cl-lib`) OpenCL C ones; `rs-app`'s
//! OpenCL C kernels call the Rust functions, its Rust kernels (`sycl_device::kernel!`) call
//! the OpenCL C ones and a Rust one, and every result matches the same functions on the host.
//! librs_alt.so (`rs-alt`), preloaded, defines `rs_poly` again: it serves the device's callers
//! as the host's, Rust's images included (strict mode refuses the duplicate instead). A Rust
//! bounds check that fails, in a Rust kernel or in a Rust function called from OpenCL C, ends
//! the process with a fault, never with a result. The Rust kernels' parameters, as the
//! binary's `SYCL/kernel arguments` records them, are their signatures in OpenCL C's terms.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

use sycl_tests::{
    built_sycl_ld, device_name, events, fixtures, fixtures_dir, output, run_fixture_args, stderr,
    stdout, Device, Run, DEVICES,
};

/// rs-app's checks, in the order it prints them, each `NAME: match` where the device's
/// results are the host's: a check that stops running, or one added and not named here, fails
/// the tests.
const CHECKS: [&str; 16] = [
    "OpenCL C kernel -> Rust rs_poly",
    "OpenCL C kernel -> Rust rs_mean -> rs_sum",
    "OpenCL C kernel -> Rust rs_poly_twice",
    "Rust kernel -> OpenCL C cl_lerp",
    "Rust kernel -> OpenCL C cl_hash",
    "Rust kernel -> Rust rs_poly",
    "Rust kernel -> OpenCL C cl_accumulate",
    "Rust kernel, bounds-checked",
    "OpenCL C kernel -> Rust rs_get",
    "Rust kernel saxpy_rs",
    "nbody_rs",
    "nbody_cl_rs",
    "nbody_cl",
    "histogram (atomics)",
    "matmul (slices, iterators)",
    "mandelbrot (f64, a struct)",
];

/// `rs_poly(1.5)` as librs_lib.so defines it, `(3x + 2)x + 1`.
const RS_LIB_POLY: &str = "10.75";

/// `rs_poly(1.5)` as librs_alt.so defines it, `x² - 7`.
const RS_ALT_POLY: &str = "-4.75";

/// rs-app with no argument on `device`, librs_alt.so preloaded where `preload`, with `env`
/// added; it must succeed.
fn checks(device: Device, preload: bool, env: &[(&str, &str)]) -> Run {
    let alt = fixtures().join("deps/librs_alt.so");
    let mut env = env.to_vec();
    if preload {
        env.push(("LD_PRELOAD", alt.to_str().unwrap()));
    }
    Run::new(device, "rs-app", &[], &env)
}

/// Asserts that `run` printed what rs-app prints when every check matches: `before` (what
/// its argument did first), the device's name and the host's `rs_poly(1.5)`, `host_poly`,
/// then `NAME: match` for each of [`CHECKS`].
fn assert_all_match(run: &Run, before: &str, host_poly: &str) {
    let mut expected = format!("{before}device: {}\nhost rs_poly(1.5) = {host_poly}\n", run.name);
    for check in CHECKS {
        expected += &format!("{check}: match\n");
    }
    assert_eq!(run.out, expected, "{}", run.say());
}

/// The images `kernel`'s program was linked from, as each of the run's `link` lines for it
/// lists them (`rs-app image 1 + libcl_lib.so image 0`); one line where the program was built
/// once.
fn linked<'r>(run: &'r Run, kernel: &str) -> Vec<&'r str> {
    let this = format!("{kernel} on {}", run.name);
    run.events("link")
        .into_iter()
        .filter_map(|l| l.strip_prefix(this.as_str())?.split_once(": ").map(|(_, images)| images))
        .collect()
}

/// OpenCL C kernels call librs_lib.so's Rust functions, Rust kernels libcl_lib.so's OpenCL C
/// functions and librs_lib.so's `rs_poly`, and every check's results are the host's; each
/// kernel's program holds its own image and the libraries it calls.
#[test]
fn rust_and_opencl_c_call_each_other_across_libraries_as_on_the_host() {
    for device in DEVICES {
        let run = checks(device, false, &[]);
        assert_all_match(&run, "", RS_LIB_POLY);
        let libraries = "libcl_lib.so image 0 + librs_lib.so image 0";
        assert_eq!(
            linked(&run, "cl_calls_rust"),
            [format!("rs-app image 0 + {libraries}")],
            "{}",
            run.say()
        );
        assert_eq!(
            linked(&run, "rs_calls_cl"),
            [format!("rs-app image 1 + {libraries}")],
            "{}",
            run.say()
        );
        let overrides = [run.events("duplicate"), run.events("interpose")].concat();
        assert!(overrides.is_empty(), "one rs_poly, no override {}", run.say());
    }
}

/// With librs_alt.so preloaded, its `rs_poly` serves the host and every device caller: the
/// OpenCL C kernel, whose program still needs librs_lib.so (`rs_sum`, `rs_get`) and gets its
/// `rs_poly` made an import, and the Rust kernel, whose program no longer needs librs_lib.so.
#[test]
fn a_preloaded_librs_alt_rs_poly_serves_the_host_and_every_device_caller() {
    for device in DEVICES {
        let run = checks(device, true, &[]);
        assert_all_match(&run, "", RS_ALT_POLY);
        assert_eq!(
            linked(&run, "cl_calls_rust"),
            ["rs-app image 0 + libcl_lib.so image 0 + librs_lib.so image 0 + librs_alt.so image 0"],
            "{}",
            run.say()
        );
        assert_eq!(
            linked(&run, "rs_calls_cl"),
            ["rs-app image 1 + libcl_lib.so image 0 + librs_alt.so image 0"],
            "{}",
            run.say()
        );
        assert_eq!(
            run.events("interpose"),
            ["librs_lib.so image 0: rs_poly made imports"],
            "{}",
            run.say()
        );
        let duplicates = run.events("duplicate");
        let first_wins = "rs_poly: exported by librs_alt.so image 0, librs_lib.so image 0; the \
                          first in loader order wins";
        assert!(
            !duplicates.is_empty() && duplicates.iter().all(|l| l.starts_with(first_wins)),
            "{}",
            run.say()
        );
    }
}

/// librs_alt.so opened by the program (`dlopen-alt-local`, `dlopen-alt-global`) comes after
/// librs_lib.so in the loader's order, `RTLD_GLOBAL` or not: librs_lib.so's `rs_poly` still
/// serves the host and every device caller, and nothing is overridden. Opened `RTLD_GLOBAL`,
/// its `rs_poly` is a duplicate the program's images see, traced as one once per kernel whose
/// images define or import it (`cl_calls_rust` takes librs_lib.so's image for `rs_get` before
/// it imports `rs_poly`: the duplicate is noticed all the same); `RTLD_LOCAL`, it is not.
#[test]
fn librs_alt_opened_later_leaves_librs_lib_rs_poly_serving_every_caller() {
    for device in DEVICES {
        for scope in ["RTLD_LOCAL", "RTLD_GLOBAL"] {
            let argument = format!("dlopen-alt-{}", scope[5..].to_lowercase());
            let run = Run::new(device, "rs-app", &[&argument], &[]);
            assert_all_match(&run, &format!("opened librs_alt.so {scope}\n"), RS_LIB_POLY);
            assert_eq!(
                linked(&run, "rs_calls_cl"),
                ["rs-app image 1 + libcl_lib.so image 0 + librs_lib.so image 0"],
                "{argument} {}",
                run.say()
            );
            assert!(run.events("interpose").is_empty(), "{argument} {}", run.say());
            let local = scope == "RTLD_LOCAL";
            let alt = format!("{}/deps/librs_alt.so: 1 image", fixtures_dir().display());
            let alt = if local { format!("{alt} (RTLD_LOCAL)") } else { alt };
            assert!(run.events("discover").contains(&alt.as_str()), "{argument} {}", run.say());
            let duplicates: Vec<&str> = run
                .events("duplicate")
                .into_iter()
                .filter(|e| {
                    e.starts_with("rs_poly: exported by librs_lib.so image 0, librs_alt.so")
                })
                .collect();
            for kernel in ["cl_calls_rust", "rs_calls_cl"] {
                let wins = format!("wins: librs_lib.so image 0 (for kernel {kernel})");
                let traced = duplicates.iter().filter(|e| e.ends_with(&wins)).count();
                assert_eq!(traced, usize::from(!local), "{argument}, {kernel}: {}", run.say());
            }
        }
    }
}

/// Strict mode refuses librs_alt.so's `rs_poly` opened `RTLD_GLOBAL` after librs_lib.so, for
/// the kernel whose image takes librs_lib.so's image for another symbol first
/// (`cl_calls_rust`: `rs_get`) as for one that imports `rs_poly` alone; opened `RTLD_LOCAL`,
/// the program's images do not see it, and strict mode has nothing to refuse.
#[test]
fn strict_mode_refuses_a_duplicate_opened_rtld_global_after_the_winner() {
    for device in DEVICES {
        let on = device.selector;
        let env = [("SYCL_DEVICE", on), ("SYCL_STRICT_EXPORTS", "1")];
        let out = run_fixture_args("rs-app", &["dlopen-alt-global"], &env);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "strict on {on}: {err}");
        assert!(
            err.lines().any(|l| l.starts_with("error: ")
                && ["`rs_poly`", "librs_alt.so", "librs_lib.so", "strict"]
                    .iter()
                    .all(|w| l.contains(w))),
            "strict on {on}: {err}"
        );
        // The first kernel launched, `cl_calls_rust`, is refused before anything is linked.
        assert!(events(&err, "link").is_empty(), "strict on {on}: {err}");
        let out = run_fixture_args("rs-app", &["dlopen-alt-local"], &env);
        assert_eq!(out.status.code(), Some(0), "strict, RTLD_LOCAL, on {on}: {}", stderr(&out));
    }
}

/// `SYCL_STRICT_EXPORTS=1` with librs_alt.so preloaded: the first launch is refused with one
/// error naming `rs_poly` and both libraries, and nothing is linked.
#[test]
fn strict_mode_refuses_rs_poly_of_both_libraries_and_links_nothing() {
    let alt = fixtures().join("deps/librs_alt.so");
    for device in DEVICES {
        let on = device.selector;
        let env = [
            ("SYCL_DEVICE", on),
            ("SYCL_STRICT_EXPORTS", "1"),
            ("LD_PRELOAD", alt.to_str().unwrap()),
        ];
        let out = run_fixture_args("rs-app", &[], &env);
        let (printed, err) = (stdout(&out), stderr(&out));
        let name = device_name(&err, device);
        let before = format!("device: {name}\nhost rs_poly(1.5) = {RS_ALT_POLY}\n");
        assert_eq!(
            (out.status.code(), printed.as_str()),
            (Some(1), before.as_str()),
            "strict on {on}: {err}"
        );
        let said: Vec<&str> = err.lines().filter(|l| !l.starts_with("sycl: ")).collect();
        let names_both = |l: &str| {
            l.starts_with("error: ")
                && ["`rs_poly`", "librs_alt.so", "librs_lib.so", "strict"]
                    .iter()
                    .all(|word| l.contains(word))
        };
        assert!(
            matches!(said[..], [line] if names_both(line)),
            "strict on {on}: one error naming both libraries: {err}"
        );
        assert!(events(&err, "link").is_empty(), "strict on {on}: {err}");
    }
}

/// `rs-app ARGUMENT` on `device` as [`run_fixture_args`] runs a fixture, but from a temporary
/// directory: the process is expected to die of a fault, and a core file (where the system
/// writes one to the working directory) must not land in the checkout.
fn run_to_fault(argument: &str, device: Device) -> Output {
    let dir = tempfile::tempdir().unwrap();
    output(
        Command::new(fixtures().join("rs-app"))
            .arg(argument)
            .current_dir(dir.path())
            .env("SYCL_TRACE", "1")
            .env("SYCL_CACHE_DISABLE", "1")
            .env("SYCL_DEVICE", device.selector)
            .env_remove("SYCL_STRICT_EXPORTS"),
    )
}

/// `rs-app ARGUMENT` launches `kernel`, whose Rust bounds check fails: the device's panic is a
/// store to the null global address, which kills the process on a CPU device with SIGSEGV
/// before the launch gives a result (`no panic: …` never printed).
fn faults(argument: &str, kernel: &str) {
    for device in DEVICES {
        let out = run_to_fault(argument, device);
        let (printed, err) = (stdout(&out), stderr(&out));
        let on = device.selector;
        assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{argument} on {on}: {out:?}");
        let name = device_name(&err, device);
        assert_eq!(
            printed,
            format!("launching {kernel} with index 16 of 16 values on {name}\n"),
            "{argument} on {on}: the launch, never a result: {err}"
        );
    }
}

#[test]
fn a_failed_bounds_check_in_a_rust_kernel_faults() {
    faults("panic-rust", "rs_get_checked");
}

#[test]
fn a_failed_bounds_check_in_a_rust_function_called_from_opencl_c_faults() {
    faults("panic-rust-lib", "cl_calls_rust_get");
}

/// The Rust kernels' parameters in `sycl-ld inspect --json` of rs-app (`SYCL/kernel
/// arguments`, which the typed launchers are made from): Rust's `*const f32` a
/// `global const float*`, `*mut u32` a `global int*` (SPIR-V's integers have no sign, and
/// OpenCL C's `uint` reads the same), `u32` an `int`, `f32` a `float`; the same as the
/// OpenCL C kernels of the same code.
#[test]
fn the_rust_kernels_parameters_are_their_signatures_in_opencl_c_terms() {
    let binary = fixtures().join("rs-app");
    let out = output(Command::new(built_sycl_ld()).args(["inspect", "--json"]).arg(&binary));
    assert!(out.status.success(), "inspect rs-app: {}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let images = json["images"].as_array().unwrap();
    let arguments = |kernel: &str| {
        let image = images
            .iter()
            .find(|i| i["kernels"].as_array().unwrap().iter().any(|k| k == kernel))
            .unwrap_or_else(|| panic!("no image of rs-app has {kernel}: {json}"));
        let params = image["properties"]["SYCL/kernel arguments"][kernel].as_array().unwrap();
        let param = |p: &serde_json::Value| {
            let text = |key: &str| p[key].as_str().unwrap().to_string();
            (text("kind"), p["size"].as_u64().unwrap(), text("type"), text("name"))
        };
        params.iter().map(param).collect::<Vec<_>>()
    };
    let (float_in, float_out) = ("global const float*", "global float*");
    let rust: [(&str, &[(&str, &str)]); 4] = [
        (
            "rs_calls_cl",
            &[
                ("x", float_in),
                ("lerp", float_out),
                ("hash", "global int*"),
                ("poly", float_out),
                ("acc", float_out),
                ("n", "int"),
            ],
        ),
        (
            "rs_get_checked",
            &[("data", "global const int*"), ("len", "int"), ("i", "int"), ("out", "global int*")],
        ),
        ("saxpy_rs", &[("n", "int"), ("a", "float"), ("x", float_in), ("y", float_out)]),
        ("nbody_rs", &[("pos", float_in), ("acc", float_out), ("n", "int"), ("soft2", "float")]),
    ];
    for (kernel, params) in rust {
        let expected: Vec<_> = params
            .iter()
            .map(|&(name, ty)| {
                let (kind, size) = if ty.ends_with('*') { ("global", 8) } else { ("scalar", 4) };
                (kind.to_string(), size, ty.to_string(), name.to_string())
            })
            .collect();
        assert_eq!(arguments(kernel), expected, "{kernel}'s parameters: {json}");
    }
    // The same code in OpenCL C, parameter for parameter but for the names.
    let types = |kernel: &str| {
        arguments(kernel).into_iter().map(|(k, s, t, _)| (k, s, t)).collect::<Vec<_>>()
    };
    for (rust, opencl_c) in [
        ("saxpy_rs", "saxpy_cl"),
        ("nbody_rs", "nbody_cl"),
        ("rs_get_checked", "cl_calls_rust_get"),
    ] {
        assert_eq!(types(rust), types(opencl_c), "{rust} against {opencl_c}: {json}");
    }
}

/// A plain run and a preloaded one, twice, in one persistent cache: each run's values follow
/// its own `rs_poly`, whatever the run before it stored, and the second round finds the first
/// round's programs (the cache is in play).
#[test]
fn a_persistent_cache_shared_by_runs_with_either_rs_poly_follows_the_winner() {
    for device in DEVICES {
        let dir = tempfile::tempdir().unwrap();
        let cache = [("SYCL_CACHE_DISABLE", "0"), ("SYCL_CACHE_DIR", dir.path().to_str().unwrap())];
        for round in 0..2 {
            for (preload, host_poly) in [(false, RS_LIB_POLY), (true, RS_ALT_POLY)] {
                let run = checks(device, preload, &cache);
                assert_all_match(&run, "", host_poly);
                if round == 1 {
                    assert!(
                        !run.events("persist-hit").is_empty(),
                        "second round, preloaded: {preload}: from the cache {}",
                        run.say()
                    );
                }
            }
        }
    }
}

/// rs-app linked with the CPU devices' ahead-of-time forms too (`SYCL_LD_TARGETS=spir64,
/// intel_cpu_x86_64,pocl_cpu`, into `fixtures/target/aot`): every check matches on both
/// devices, Intel's runtime linking the native objects made at link time (the Rust kernels'
/// histogram among them: an atomic on a generic pointer, which Intel's runtime builds only
/// once the builtin is given a global pointer, as the run-time path gives it), PoCL linking the
/// SPIR-V and taking its own form for a kernel that imports nothing.
#[test]
fn rust_kernels_run_from_the_cpu_devices_ahead_of_time_forms() {
    let fixtures_src = sycl_tests::repo_root().join("fixtures");
    let target = fixtures_src.join("target/aot");
    fixtures();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = output(
        Command::new(cargo)
            .args(["build", "-q", "-p", "rs-app", "-p", "rs-alt"])
            .current_dir(&fixtures_src)
            .env("CARGO_TARGET_DIR", &target)
            .env("SYCL_LD_TARGETS", "spir64,intel_cpu_x86_64,pocl_cpu"),
    );
    assert!(built.status.success(), "{}", stderr(&built));
    for device in DEVICES {
        let out = output(
            Command::new(target.join("debug/rs-app"))
                .env("SYCL_TRACE", "1")
                .env("SYCL_CACHE_DISABLE", "1")
                .env("SYCL_DEVICE", device.selector)
                .env_remove("SYCL_STRICT_EXPORTS"),
        );
        let (printed, err) = (stdout(&out), stderr(&out));
        assert!(out.status.success(), "{}: {printed}{err}", device.selector);
        let matched: Vec<&str> =
            printed.lines().filter_map(|l| l.strip_suffix(": match")).collect();
        assert_eq!(matched, CHECKS, "{}: {printed}{err}", device.selector);
        let native = events(&err, "compile")
            .into_iter()
            .filter(|e| e.ends_with("(ahead-of-time object)"))
            .count();
        if device.selector == "intel" {
            assert!(native >= 3, "Intel links native objects: {err}");
        } else {
            assert_eq!(native, 0, "PoCL takes no Intel object: {err}");
        }
    }
}
