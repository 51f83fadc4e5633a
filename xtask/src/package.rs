//! `cargo xtask package`: the crates as a user outside this repository gets them. Packages the
//! library crates and `sycl-ld` (`cargo package`), checks that each `.crate` carries the licence
//! files and the README, unpacks them into a directory outside the repository, installs the
//! packaged `sycl-ld` from there (`cargo install --path`), and builds and runs the demo (the
//! fixtures' `app` and `helpers`, copied) in a workspace of its own there, which depends on the
//! packaged crates by version through `[patch.crates-io]` and links through the installed
//! `sycl-ld`. `cargo xtask test` runs it after the tests.
//!
//! Builds go to `target/package-check` (release for the install, dev for the demo), so a second
//! run rebuilds only the crates whose `.crate` changed: a `.crate` identical to the last run's is
//! not unpacked again (its files keep their times), a changed one is unpacked with fresh times.

use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::{cargo, describe, repo_root, run_captured, run_checked};

/// The crates people depend on, in dependency order, and the linker.
const PACKAGES: &[&str] =
    &["sycl-format", "sycl-spirv", "sycl-build", "sycl-device", "sycl-runtime", "sycl-ld"];

/// The packages the demo's workspace patches in (all but the binary, which is installed).
const LIBRARIES: &[&str] = &["sycl-format", "sycl-spirv", "sycl-build", "sycl-runtime"];

/// Files every packaged crate must carry.
const REQUIRED_FILES: &[&str] = &["LICENSE-MIT", "LICENSE-APACHE", "README.md", "Cargo.toml"];

/// The version every packaged crate has (the workspace's).
const VERSION: &str = "0.1.0";

/// What the demo prints on each CPU device.
const DEMO_OUTPUT: &str = "0 2 4 6 8 10 12 14";

/// The devices the demo runs on (`SYCL_DEVICE`).
const DEVICES: &[&str] = &["intel", "pocl"];

/// The demo's files, copied from `fixtures/` (relative to it) into the outside workspace.
const DEMO_FILES: &[&str] = &[
    "app/build.rs",
    "app/src/main.rs",
    "app/device/app.cl",
    "app/device/app2.cl",
    "helpers/build.rs",
    "helpers/src/lib.rs",
    "helpers/device/helpers.cl",
];

/// Packages, unpacks, installs `sycl-ld` and builds and runs the demo outside the repository.
pub(crate) fn package() -> Result<()> {
    let started = Instant::now();
    let root = repo_root();
    let target = root.join("target/package-check");
    let outside = outside_dir(&root);
    println!(
        "xtask: packaging {} (outside the repository: {})",
        PACKAGES.join(" "),
        outside.display()
    );

    // `--no-verify`: cargo's own check builds each crate against the others' `.crate` files
    // through a registry of its own, whose unpacked sources (`$CARGO_HOME/registry/src`) and
    // builds it keeps and reuses while the version stays the same, so a second run checks the
    // first run's code. The build outside below is that check, from this run's files.
    let mut command = cargo();
    command.args(["package", "--allow-dirty", "--no-verify"]).current_dir(&root);
    for package in PACKAGES {
        command.args(["-p", package]);
    }
    run_checked(&mut command)?;

    let crates = outside.join("crates");
    fs::create_dir_all(&crates).with_context(|| format!("creating {}", crates.display()))?;
    for package in PACKAGES {
        let file = root.join(format!("target/package/{package}-{VERSION}.crate"));
        unpack(&file, &crates)?;
        let dir = crates.join(format!("{package}-{VERSION}"));
        for required in REQUIRED_FILES {
            if !dir.join(required).is_file() {
                bail!("{} does not carry {required}", file.display());
            }
        }
    }

    // The patch a user outside would write, as a config file for `cargo install`.
    let mut patch = String::from("[patch.crates-io]\n");
    for library in LIBRARIES {
        let dir = crates.join(format!("{library}-{VERSION}"));
        patch.push_str(&format!("{library} = {{ path = {} }}\n", toml_string(&dir)?));
    }
    let patch_file = outside.join("patch.toml");
    write(&patch_file, &patch)?;

    let install_root = outside.join("root");
    println!("xtask: installing the packaged sycl-ld into {}", install_root.display());
    run_checked(
        cargo()
            .arg("install")
            .arg("--path")
            .arg(crates.join(format!("sycl-ld-{VERSION}")))
            .arg("--root")
            .arg(&install_root)
            .arg("--target-dir")
            .arg(&target)
            .arg("--config")
            .arg(&patch_file)
            .args(["--force", "--quiet"])
            .current_dir(&outside),
    )?;
    let sycl_ld = install_root.join("bin/sycl-ld");

    let demo = outside.join("demo");
    write_demo(&root.join("fixtures"), &demo, &patch, &sycl_ld)?;
    println!("xtask: building the demo in {} against the packaged crates", demo.display());
    run_checked(
        cargo().arg("build").arg("--target-dir").arg(&target).arg("--quiet").current_dir(&demo),
    )?;
    let app = target.join("debug/app");
    for device in DEVICES {
        let output = run_captured(Command::new(&app).env("SYCL_DEVICE", device))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if stdout.trim() != DEMO_OUTPUT {
            bail!(
                "{} on {device} printed {:?}, not {DEMO_OUTPUT:?}",
                describe(Command::new(&app).env("SYCL_DEVICE", device)),
                stdout.trim()
            );
        }
        println!("xtask: packaged demo on {device}: {}", stdout.trim());
    }
    println!("xtask: packaging checked in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// A directory outside the repository, the same for every run from one checkout (so that
/// builds are reused), named after the checkout's path.
fn outside_dir(root: &Path) -> PathBuf {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    root.hash(&mut hasher);
    std::env::temp_dir().join(format!("sycl-package-check-{:016x}", hasher.finish()))
}

/// Unpacks a `.crate` into `dir`, unless the same `.crate` was unpacked there last time. Cargo
/// gives every file in a `.crate` one fixed time, so a changed crate is unpacked with fresh
/// times (`tar -m`), which its dependents' fingerprints notice.
fn unpack(file: &Path, dir: &Path) -> Result<()> {
    let name = file.file_name().context("a .crate file has a name")?;
    let bytes = fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let copy = dir.join(name);
    let stem = name.to_string_lossy().trim_end_matches(".crate").to_string();
    let unpacked = dir.join(&stem);
    if unpacked.is_dir() && fs::read(&copy).is_ok_and(|previous| previous == bytes) {
        return Ok(());
    }
    if unpacked.exists() {
        fs::remove_dir_all(&unpacked)
            .with_context(|| format!("removing {}", unpacked.display()))?;
    }
    run_captured(Command::new("tar").arg("-xzmf").arg(file).arg("-C").arg(dir))?;
    fs::write(&copy, &bytes).with_context(|| format!("writing {}", copy.display()))
}

/// Writes the demo's workspace: the fixtures' files, manifests that depend on the packaged
/// crates by version (patched to the unpacked `.crate` files), and a `.cargo/config.toml` that
/// links through the installed `sycl-ld`. Files already as they should be are left alone.
fn write_demo(fixtures: &Path, demo: &Path, patch: &str, sycl_ld: &Path) -> Result<()> {
    for file in DEMO_FILES {
        let text = fs::read_to_string(fixtures.join(file))
            .with_context(|| format!("reading fixtures/{file}"))?;
        write(&demo.join(file), &text)?;
    }
    let workspace = format!(
        "[workspace]\nresolver = \"2\"\nmembers = [\"app\", \"helpers\"]\n\n{patch}\n\
         [profile.dev.build-override]\ndebug = false\n"
    );
    write(&demo.join("Cargo.toml"), &workspace)?;
    let package = |name: &str| {
        format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n")
    };
    let app = format!(
        "{}\n[dependencies]\nsycl-runtime = \"{VERSION}\"\nhelpers = {{ path = \"../helpers\" }}\n\n\
         [build-dependencies]\nsycl-build = \"{VERSION}\"\n",
        package("app")
    );
    write(&demo.join("app/Cargo.toml"), &app)?;
    let helpers = format!(
        "{}\n[lib]\ncrate-type = [\"cdylib\", \"rlib\"]\n\n[build-dependencies]\nsycl-build = \"{VERSION}\"\n",
        package("helpers")
    );
    write(&demo.join("helpers/Cargo.toml"), &helpers)?;
    let config = format!(
        "[target.x86_64-unknown-linux-gnu]\nlinker = {}\nrustflags = [\"-C\", \"linker-flavor=gcc\"]\n",
        toml_string(sycl_ld)?
    );
    write(&demo.join(".cargo/config.toml"), &config)
}

/// Writes a file (and its directory), unless it already holds `text`: an unchanged file keeps
/// its time, so cargo does not rebuild for it.
fn write(path: &Path, text: &str) -> Result<()> {
    if fs::read_to_string(path).is_ok_and(|current| current == text) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// A path as a TOML basic string.
fn toml_string(path: &Path) -> Result<String> {
    let path = path.to_str().with_context(|| format!("{} is not UTF-8", path.display()))?;
    Ok(format!("\"{}\"", path.replace('\\', "\\\\").replace('"', "\\\"")))
}
