//! Shared by the runtime benchmarks: building `sycl-ld` and the demo program, replaying the
//! demo's link, reading its embedded images, statistics, and the `RATIO` lines that
//! `cargo xtask bench` gathers into one table.
//!
//! A bench target is linked by plain `cc`, not by `sycl-ld`, so it carries no device images
//! of its own. What needs real kernels runs the demo program (`program/app.rs`, with the
//! demo's device sources beside it), built here as a throwaway cargo project under
//! `target/sycl-bench/` that links through `target/debug/sycl-ld` exactly as the fixture
//! workspace does. The project and its target directory stay there between runs, so only the
//! first run pays for the build.

#![allow(dead_code)] // each bench target uses its own part of this module

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sycl_format::{find_notes, Image, ImageFormat, ImageSet, IMAGE_NOTE_SECTION, NOTE_TYPE_IMAGES};

/// The demo's kernel, in the executable; it imports `LibDeviceFunc` from the shared library.
pub(crate) const KERNEL: &str = "app_kernel";

const APP_RS: &str = include_str!("../program/app.rs");
const APP_CL: &str = include_str!("../program/app.cl");
const HELPERS_CL: &str = include_str!("../program/helpers.cl");

/// Whether cargo runs us as a benchmark (`cargo bench` passes `--bench`); otherwise
/// (`cargo test --benches`) every measurement runs once, as a smoke test.
pub(crate) fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Where the benchmarks keep what they build: `<repo>/target/sycl-bench`.
pub(crate) fn bench_dir() -> PathBuf {
    let dir = repo_root().join("target").join("sycl-bench");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The cargo that runs us, for nested builds with the same toolchain.
fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // Flags meant for this workspace must not leak into the nested builds.
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS", "CARGO_TARGET_DIR"]
    {
        cmd.env_remove(var);
    }
    cmd
}

pub(crate) fn run_ok(cmd: &mut Command) -> std::process::Output {
    let output = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        output.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `target/debug/sycl-ld`, built first (the linker the fixtures and the demo use).
pub(crate) fn sycl_ld() -> PathBuf {
    run_ok(cargo().args(["build", "--quiet", "-p", "sycl-ld"]).current_dir(repo_root()));
    repo_root().join("target/debug/sycl-ld")
}

/// Writes `text` to `path` unless it already holds exactly that, so that cargo sees no change.
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).is_ok_and(|current| current == text) {
        return;
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The demo program, built by `sycl-ld`: optimized for a measurement ([`bench_mode`]), in the
/// dev profile for the smoke mode, which measures nothing and should not pay for a release
/// build of the runtime's dependencies.
pub(crate) struct Demo {
    pub project: PathBuf,
    /// The executable: `app_kernel` and the measuring modes of `program/app.rs`.
    pub exe: PathBuf,
    /// `libsycl_bench_helpers.so`, which exports `LibDeviceFunc`.
    pub lib: PathBuf,
    /// The executable's link as cargo ran it (through `sycl-ld`), for replaying.
    pub link_args: Vec<OsString>,
    pub sycl_ld: PathBuf,
}

impl Demo {
    /// Writes the project (the fixture app and helpers, with the measuring program as the
    /// app's main), builds it and finds its outputs.
    pub(crate) fn build() -> Demo {
        let sycl_ld = sycl_ld();
        let root = repo_root();
        let dir = bench_dir();
        let project = dir.join("demo");
        let target = dir.join("demo-target");
        let quoted = |p: &Path| format!("{:?}", p.display().to_string());

        write_if_changed(
            &project.join("Cargo.toml"),
            "# Written by runtime/benches/common/mod.rs: the demo, measured by the launch bench.\n\
             [workspace]\nresolver = \"2\"\nmembers = [\"helpers\", \"app\"]\n",
        );
        // The same versions as the main workspace, without asking the registry.
        if !project.join("Cargo.lock").exists() {
            std::fs::copy(root.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
        }
        // A linker that records each link's command line, then is `sycl-ld`; `save-temps`
        // keeps the objects the recorded line names, so that it can be replayed.
        let capture = project.join("capture-link");
        write_if_changed(
            &capture,
            &format!(
                "#!/bin/sh\nout=\nprev=\nfor a in \"$@\"; do\n  [ \"$prev\" = -o ] && out=$a\n  prev=$a\ndone\n\
                 mkdir -p {dir}\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > {dir}/\"$(basename \"$out\")\"\n\
                 exec {ld} \"$@\"\n",
                dir = quoted(&project.join("link-args")),
                ld = quoted(&sycl_ld),
            ),
        );
        run_ok(Command::new("chmod").arg("+x").arg(&capture));
        write_if_changed(
            &project.join(".cargo/config.toml"),
            &format!(
                "[target.x86_64-unknown-linux-gnu]\nlinker = {}\nrustflags = [\"-C\", \"linker-flavor=gcc\", \"-C\", \"save-temps\"]\n",
                quoted(&capture)
            ),
        );
        let package = |name: &str| {
            format!("[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n")
        };
        let sycl_build = format!(
            "[build-dependencies]\nsycl-build = {{ path = {} }}\n",
            quoted(&root.join("sycl-build"))
        );
        write_if_changed(
            &project.join("helpers/Cargo.toml"),
            &format!(
                "{}\n[lib]\ncrate-type = [\"cdylib\", \"rlib\"]\n\n{sycl_build}",
                package("sycl_bench_helpers")
            ),
        );
        write_if_changed(
            &project.join("helpers/build.rs"),
            "fn main() {\n    sycl_build::Build::new().file(\"device/helpers.cl\").compile(\"helpers\");\n}\n",
        );
        write_if_changed(
            &project.join("helpers/src/lib.rs"),
            "//! Nothing but device code, which sycl-ld embeds.\n",
        );
        write_if_changed(&project.join("helpers/device/helpers.cl"), HELPERS_CL);
        write_if_changed(
            &project.join("app/Cargo.toml"),
            &format!(
                "{}\n[dependencies]\nsycl-runtime = {{ path = {} }}\ncl3 = \"0.13\"\n\
                 sycl_bench_helpers = {{ path = \"../helpers\" }}\n\n{sycl_build}",
                package("sycl_bench_app"),
                quoted(&root.join("runtime"))
            ),
        );
        write_if_changed(
            &project.join("app/build.rs"),
            "fn main() {\n    sycl_build::Build::new().file(\"device/app.cl\").compile(\"benchapp\");\n    \
             sycl_build::link_device_library(\"sycl_bench_helpers\");\n}\n",
        );
        write_if_changed(&project.join("app/src/main.rs"), APP_RS);
        write_if_changed(&project.join("app/device/app.cl"), APP_CL);

        let started = Instant::now();
        let (profile, out) = if bench_mode() { ("release", "release") } else { ("dev", "debug") };
        run_ok(
            cargo()
                .args(["build", "--profile", profile, "--quiet"])
                .env("CARGO_TARGET_DIR", &target)
                .current_dir(&project),
        );
        let built = started.elapsed();
        if built > Duration::from_secs(5) {
            eprintln!(
                "built the demo program in {:.0} s ({})",
                built.as_secs_f64(),
                project.display()
            );
        }

        let link_args = latest_link(&project.join("link-args"), "sycl_bench_app-");
        Demo {
            exe: target.join(out).join("sycl_bench_app"),
            lib: target.join(out).join("deps/libsycl_bench_helpers.so"),
            project,
            link_args,
            sycl_ld,
        }
    }

    /// Runs the demo program with `args` and the environment the measurements need (default
    /// device, no trace, no strict mode), plus `env`; returns its `key value` lines.
    pub(crate) fn run(&self, args: &[&str], env: &[(&str, &Path)]) -> Vec<(String, f64)> {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args)
            .env("SYCL_DEVICE", "intel")
            .env_remove("SYCL_TRACE")
            .env_remove("SYCL_STRICT_EXPORTS")
            .env_remove("SYCL_CACHE_DIR")
            .env_remove("SYCL_CACHE_DISABLE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let output = run_ok(&mut cmd);
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(' ')?;
                Some((k.to_string(), v.trim().parse().ok()?))
            })
            .collect()
    }

    /// One replay of the executable's link through `sycl-ld`, writing to `out`: one link of
    /// the demo. Returns its wall time.
    pub(crate) fn link_once(&self, out: &Path) -> Duration {
        let mut args = self.link_args.clone();
        let o = args.iter().position(|a| a == "-o").expect("no -o in the recorded link");
        args[o + 1] = out.as_os_str().to_owned();
        let mut cmd = Command::new(&self.sycl_ld);
        cmd.args(&args)
            .current_dir(&self.project)
            .env_remove("SYCL_LD_LINKER")
            .env_remove("SYCL_LD_VERBOSE");
        let start = Instant::now();
        run_ok(&mut cmd);
        start.elapsed()
    }

    /// The SPIR-V images the runtime links for [`KERNEL`], in its order (the kernel's image,
    /// then the first provider of each import, executable before library), written to `dir`
    /// for the hand-written path.
    pub(crate) fn kernel_images(&self, dir: &Path) -> Vec<PathBuf> {
        let mut all: Vec<Image> = embedded_images(&self.exe);
        all.extend(embedded_images(&self.lib));
        all.retain(|i| i.format == ImageFormat::SpirV);
        let root = all
            .iter()
            .position(|i| i.kernels.iter().any(|k| k == KERNEL))
            .expect("no image has app_kernel");
        let mut chosen = vec![root];
        let mut next = 0;
        while next < chosen.len() {
            let imports: Vec<String> =
                all[chosen[next]].imported_symbols().map(str::to_string).collect();
            for symbol in imports {
                let provided =
                    chosen.iter().any(|&i| all[i].exported_symbols().any(|e| e == symbol));
                if !provided {
                    let provider =
                        all.iter().position(|i| i.exported_symbols().any(|e| e == symbol));
                    chosen.push(provider.unwrap_or_else(|| panic!("nothing exports {symbol}")));
                }
            }
            next += 1;
        }
        chosen
            .iter()
            .enumerate()
            .map(|(n, &i)| {
                let path = dir.join(format!("image-{n}.spv"));
                std::fs::write(&path, &all[i].data).unwrap();
                path
            })
            .collect()
    }
}

/// The most recently recorded link whose output's name starts with `prefix`.
fn latest_link(dir: &Path, prefix: &str) -> Vec<OsString> {
    let newest = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| panic!("no recorded link of {prefix}* in {}", dir.display()));
    std::fs::read_to_string(newest.path()).unwrap().lines().map(OsString::from).collect()
}

/// The images `sycl-ld` embedded in a binary (its `.note.sycl.images` section).
pub(crate) fn embedded_images(path: &Path) -> Vec<Image> {
    use object::{Object, ObjectSection};
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = object::File::parse(&*bytes).unwrap();
    let Some(section) = file.section_by_name(IMAGE_NOTE_SECTION) else { return vec![] };
    let data = section.data().unwrap();
    find_notes(data, NOTE_TYPE_IMAGES, section.align())
        .unwrap()
        .into_iter()
        .flat_map(|desc| ImageSet::decode(desc).unwrap().images)
        .collect()
}

pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    assert!(!values.is_empty());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Prints a ratio for `cargo xtask bench`, which checks it against its bound and tabulates it:
/// `RATIO value op target | what | detail`, where `op target` is the bound (`<= 1.02`,
/// `>= 10`, `< 0.01`). The value is printed with every digit (`{}` writes the shortest text
/// that reads back as the same `f64`), so that the bound sees the value measured, not a
/// rounded one: 1.0204 is over `<= 1.02`, and one allocation in 100,000 launches (0.00001) is
/// over `<= 0`. Printed in the smoke mode too, where it measures nothing and is not checked.
pub(crate) fn ratio(what: &str, value: f64, bound: &str, detail: &str) {
    println!("RATIO {value} {bound} | {what} | {detail}");
}

/// Milliseconds, for details.
pub(crate) fn ms(d: f64) -> String {
    format!("{:.2} ms", d * 1e3)
}

/// Microseconds, for details.
pub(crate) fn us(d: f64) -> String {
    format!("{:.1} µs", d * 1e6)
}

/// Nanoseconds, for details.
pub(crate) fn ns(d: f64) -> String {
    format!("{:.0} ns", d * 1e9)
}
