//! `cargo xtask fuzz [SECONDS]`: every cargo-fuzz target in `fuzz/`, each for SECONDS (default
//! 60), from corpora seeded with what the fixtures' builds produced. `cargo xtask test` runs a
//! short smoke run of each after the tests.
//!
//! cargo-fuzz instruments with sanitizer flags that only nightly toolchains accept; this
//! machine has one stable toolchain, so the runs set `RUSTC_BOOTSTRAP=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{cargo, repo_root, run_checked};

/// The fuzz targets, one per decoder of untrusted bytes.
const TARGETS: &[&str] = &["spirv_postlink", "device_object", "image_set", "cache_entry", "cubin"];

/// Installs cargo-fuzz when it is missing.
fn ensure_cargo_fuzz() -> Result<()> {
    if cargo().args(["fuzz", "--version"]).output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    println!("xtask: installing cargo-fuzz");
    run_checked(cargo().args(["install", "cargo-fuzz", "--locked"]))
}

/// Runs every target for `seconds`; fails on the first target that finds a crash.
pub(crate) fn fuzz(seconds: u64) -> Result<()> {
    ensure_cargo_fuzz()?;
    let dir = repo_root().join("fuzz");
    seed_corpora(&dir.join("corpus"))?;
    for target in TARGETS {
        println!("xtask: fuzzing {target} for {seconds} s");
        let output = cargo()
            .args([
                "fuzz",
                "run",
                "-O",
                target,
                "--",
                &format!("-max_total_time={seconds}"),
                "-rss_limit_mb=2048",
                "-print_final_stats=1",
            ])
            .env("RUSTC_BOOTSTRAP", "1")
            .current_dir(&dir)
            .output()
            .with_context(|| format!("running cargo fuzz on {target}"))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        let executed = stderr
            .lines()
            .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
            .map(str::trim)
            .unwrap_or("?");
        if !output.status.success() {
            let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
            bail!(
                "fuzz target {target} failed after {executed} executions:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        println!("xtask: {target}: {executed} executions, no failure");
    }
    Ok(())
}

/// Seeds each target's corpus from the fixtures' build outputs: the SPIR-V of every device
/// source, device objects made of them, the image sets embedded in the fixture binaries, and
/// persistent-cache entries written by a run of the demo.
fn seed_corpora(corpus: &Path) -> Result<()> {
    let fixtures = repo_root().join("fixtures/target/debug");
    if !fixtures.is_dir() {
        bail!("build the fixtures first (cargo xtask test builds them)");
    }
    let mut spirv = Vec::new();
    for build in read_dir(&fixtures.join("build"))? {
        let devices = build.join("out/sycl-device");
        for unit in read_dir(&devices).unwrap_or_default() {
            for file in read_dir(&unit)? {
                let name = file.to_string_lossy();
                if name.ends_with(".spv") && !name.ends_with(".check.spv") {
                    spirv.push(std::fs::read(&file)?);
                }
            }
        }
    }
    spirv.sort();
    spirv.dedup();
    spirv.truncate(40);
    for bytes in &spirv {
        put(&corpus.join("spirv_postlink"), bytes)?;
    }
    for bytes in spirv.iter().take(10) {
        let object = sycl_format::DeviceObject {
            package: "seed".into(),
            source: "seed.cl".into(),
            split: Some(sycl_format::SplitMode::PerSource),
            fixed_targets: vec![sycl_format::Target::PoclCpu.name().into()],
            targets: vec![],
            device_config: None,
            spirv: bytes.clone(),
        };
        put(&corpus.join("device_object"), &object.encode())?;
    }
    // With the GPU suite's build (`cargo xtask gpu-suite`), where there is one: native images.
    let gpu = repo_root().join("fixtures/target/gpu/release");
    let binaries = [read_dir(&fixtures)?, read_dir(&fixtures.join("deps"))?]
        .into_iter()
        .chain([&gpu, &gpu.join("deps")].map(|d| read_dir(d).unwrap_or_default()))
        .flatten();
    for binary in binaries {
        let Ok(bytes) = std::fs::read(&binary) else { continue };
        if let Some(at) = bytes.windows(8).position(|w| w == sycl_format::IMAGE_SET_MAGIC) {
            // The note header before the payload holds its size.
            let size = at
                .checked_sub(16)
                .map(|h| u32::from_le_bytes(bytes[h..h + 4].try_into().unwrap()) as usize);
            if let Some(payload) = size.and_then(|n| bytes.get(at..at + n)) {
                put(&corpus.join("image_set"), payload)?;
                let set = sycl_format::ImageSet::decode(payload).unwrap_or_default();
                for image in set.images.iter().filter(|i| i.data.starts_with(b"\x7fELF")) {
                    put(&corpus.join("cubin"), &image.data)?;
                }
            }
        }
    }
    let cache = tempfile_dir()?;
    let _ = Command::new(fixtures.join("app")).env("SYCL_CACHE_DIR", &cache).output();
    for entry in read_dir(&cache).unwrap_or_default() {
        put(&corpus.join("cache_entry"), &std::fs::read(&entry)?)?;
    }
    let _ = std::fs::remove_dir_all(&cache);
    Ok(())
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("xtask-fuzz-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Writes a corpus file named by its content, so seeding twice adds nothing.
fn put(dir: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let name: u64 = bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
    std::fs::write(dir.join(format!("seed-{name:016x}")), bytes)
        .with_context(|| format!("writing into {}", dir.display()))
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    out.sort();
    Ok(out)
}
