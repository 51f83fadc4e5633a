//! `cargo xtask weight [CARGO ARGS]`: what device code costs a workspace to build. It builds
//! `sycl-ld`, then the fixture workspace from clean in a target directory of its own
//! (`target/weight-fixtures`, so the tests' builds are untouched), and prints the wall time,
//! the size of that target directory, and the sizes of the fixture crates' build scripts (each
//! links `sycl-build`), with how much of them is debug information.
//!
//! Extra arguments go to that cargo build, e.g. `--config profile.dev.build-override.debug=true`
//! to see what build scripts weigh with debug information. `docs/BUILD-WEIGHT.md` records the
//! numbers; `tests/tests/build_weight.rs` bounds them.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::{cargo, repo_root, run_checked};

/// Builds the fixtures from clean and prints what they weigh.
pub(crate) fn weight(args: &[OsString]) -> Result<()> {
    let root = repo_root();
    run_checked(cargo().args(["build", "-p", "sycl-ld"]).current_dir(&root))?;
    let target = root.join("target/weight-fixtures");
    if target.exists() {
        fs::remove_dir_all(&target).with_context(|| format!("removing {}", target.display()))?;
    }
    let (start, cpu_start) = (Instant::now(), children_cpu_seconds());
    // From inside fixtures/, so that its .cargo/config.toml (the linker) applies.
    run_checked(
        cargo()
            .args(["build", "--quiet", "--target-dir"])
            .arg(&target)
            .args(args)
            .current_dir(root.join("fixtures")),
    )?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu = children_cpu_seconds().zip(cpu_start).map(|(end, start)| end - start);

    let members = fixture_members(&root.join("fixtures"))?;
    let mut scripts = Vec::new();
    for entry in read_dir(&target.join("debug/build"))? {
        let dir = entry.file_name().to_string_lossy().into_owned();
        let Some((package, _hash)) = dir.rsplit_once('-') else { continue };
        let script = entry.path().join("build-script-build");
        if members.iter().any(|m| m == package) && script.is_file() {
            scripts.push((package.to_string(), script));
        }
    }
    scripts.sort();

    let cpu = cpu.map_or(String::new(), |cpu| format!(", {cpu:.1} s of CPU"));
    println!(
        "fixture workspace ({} members) built from clean in {seconds:.1} s{cpu}",
        members.len()
    );
    println!(
        "{}: {} (debug/build: {}, debug/deps: {}, debug/incremental: {})",
        target.display(),
        mb(tree_size(&target)?),
        mb(tree_size(&target.join("debug/build"))?),
        mb(tree_size(&target.join("debug/deps"))?),
        mb(tree_size(&target.join("debug/incremental")).unwrap_or(0)),
    );
    let mut sizes = Vec::new();
    for (package, script) in &scripts {
        let bytes = fs::read(script).with_context(|| format!("reading {}", script.display()))?;
        sizes.push((bytes.len() as u64, debug_info_size(&bytes)?, package.as_str()));
    }
    sizes.sort();
    let (Some(smallest), Some(largest)) = (sizes.first(), sizes.last()) else {
        bail!("no build scripts of fixture crates under {}", target.display());
    };
    println!(
        "build scripts of the {} fixture crates (each links sycl-build): {} to {} ({}), {} in all, of which debug info {}",
        sizes.len(),
        mb(smallest.0),
        mb(largest.0),
        largest.2,
        mb(sizes.iter().map(|s| s.0).sum()),
        mb(sizes.iter().map(|s| s.1).sum()),
    );
    Ok(())
}

/// The fixture workspace's member directories, which are named as their packages.
fn fixture_members(fixtures: &Path) -> Result<Vec<String>> {
    let mut members = Vec::new();
    for entry in read_dir(fixtures)? {
        if entry.path().join("Cargo.toml").is_file() {
            members.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    Ok(members)
}

fn read_dir(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    fs::read_dir(dir)
        .and_then(|entries| entries.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("listing {}", dir.display()))
}

/// Bytes in the files under `dir`, each file counted once (cargo hard-links build scripts
/// and final artifacts).
fn tree_size(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in read_dir(&dir)? {
            let meta =
                entry.metadata().with_context(|| format!("reading {}", entry.path().display()))?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() && seen.insert((meta.dev(), meta.ino())) {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

/// The bytes of an ELF64 little-endian file's `.debug_*` sections.
fn debug_info_size(elf: &[u8]) -> Result<u64> {
    let u16_at = |at: usize| elf.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |at: usize| elf.get(at..at + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()));
    let u64_at = |at: usize| elf.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
    let header = || -> Option<(usize, usize, usize, usize)> {
        if elf.get(..6)? != b"\x7fELF\x02\x01" {
            return None;
        }
        Some((
            u64_at(0x28)? as usize,
            usize::from(u16_at(0x3a)?),
            usize::from(u16_at(0x3c)?),
            usize::from(u16_at(0x3e)?),
        ))
    };
    let (shoff, shentsize, shnum, shstrndx) =
        header().context("not an ELF64 little-endian file")?;
    let section = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(section(shstrndx) + 0x18).context("truncated section headers")? as usize;
    let mut total = 0;
    for i in 0..shnum {
        let name_at = strtab + u32_at(section(i)).context("truncated section headers")? as usize;
        let name = elf.get(name_at..).and_then(|s| s.split(|b| *b == 0).next()).unwrap_or_default();
        if name.starts_with(b".debug_") {
            total += u64_at(section(i) + 0x20).context("truncated section headers")?;
        }
    }
    Ok(total)
}

/// User and system CPU seconds of the children this process has waited for, from
/// `/proc/self/stat` (Linux; in clock ticks, which the kernel's ABI fixes at 100 a second).
/// CPU time says more than wall time on a machine shared with other work.
fn children_cpu_seconds() -> Option<f64> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces: the
    // children's user and system times are fields 16 and 17 of the whole line.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(13)?.parse::<u64>().ok()? + fields.get(14)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

fn mb(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_sections_are_counted() {
        // This test binary is built with the dev profile, so it carries debug information.
        let exe = std::env::current_exe().unwrap();
        let bytes = fs::read(&exe).unwrap();
        let debug = debug_info_size(&bytes).unwrap();
        assert!(debug > 0 && debug < bytes.len() as u64, "{debug} of {}", bytes.len());
        assert!(debug_info_size(b"\x7fELF\x01\x01").is_err(), "a 32-bit header is refused");
    }
}
