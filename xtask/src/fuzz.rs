//! `cargo xtask fuzz [SECONDS]`: every cargo-fuzz target in `fuzz/`, each for SECONDS (default
//! 60), from corpora seeded with what the fixtures' builds produced and with the inputs kept
//! from earlier findings. `cargo xtask test` runs a short smoke run of each after the tests.
//!
//! The workflow, in the order a run takes it:
//!
//! 1. **Replay.** Every input on which a fuzz target once failed is kept in the repository, in
//!    the directory [`TARGETS`] names for it, and plain `cargo test` replays it against the
//!    target's property: the very function the fuzz target calls, which lives beside the
//!    replay in the decoder's crate (sycl-format's `tests/fuzz_regressions/TARGET.rs`,
//!    sycl-spirv's `tests/fuzz_regressions.rs`) and which the target in `fuzz/fuzz_targets/`
//!    includes, so the two cannot drift. The run replays them first (`cargo test --workspace
//!    --test fuzz_regressions`, which `cargo test --workspace` runs as well): a kept input
//!    failing again is a regression of a bug already fixed, reported as one, and the run
//!    stops there. A kept input therefore fails a run every time or never, not at random.
//! 2. **Seeding.** Each target's corpus (`fuzz/corpus/TARGET/`) gets its kept inputs and the
//!    fixtures' build outputs.
//! 3. **Fuzzing.** Each target for SECONDS, from a fresh random seed, every target even after
//!    one failed. A failure here is a new finding (the kept ones passed the replay), and a real
//!    bug in a decoder of untrusted bytes: it fails the run (`cargo xtask test` too), reported
//!    with the target, the input libFuzzer wrote (`fuzz/artifacts/TARGET/crash-…`), the seed,
//!    the command that reproduces it and where to keep it.
//! 4. **Keeping a finding.** Copy the input into its target's directory (the report prints the
//!    command); the replay then fails under `cargo test` until the bug is fixed, and guards the
//!    fix from then on. Add a row to `docs/RELIABILITY.md`'s findings.
//!
//! cargo-fuzz instruments with sanitizer flags that only nightly toolchains accept; this
//! machine has one stable toolchain, so the runs set `RUSTC_BOOTSTRAP=1`. The replay needs
//! neither: it is an ordinary test.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{cargo, repo_root, run_checked, run_inherited};

/// A fuzz target: a `[[bin]]` of `fuzz/Cargo.toml`, one per decoder of untrusted bytes.
struct Target {
    /// Its name, as `cargo fuzz run` takes it.
    name: &'static str,
    /// Where its kept inputs lie, from the repository root: the directory its replay reads.
    /// `None` for a target with no replay yet.
    kept: Option<Kept>,
}

/// Where a target's kept inputs lie and which package's `tests/fuzz_regressions.rs` replays
/// them.
struct Kept {
    /// The package that replays them.
    package: &'static str,
    /// The directory of inputs, from the repository root.
    dir: &'static str,
}

/// The fuzz targets. `cache_entry`'s decoder lives in the runtime, whose replay
/// (`runtime/tests/fuzz_regressions.rs`, on the model of sycl-format's) is still to be
/// written: until then its property stays in its fuzz target, and a finding there is reported
/// with no directory to keep it in.
const TARGETS: &[Target] = &[
    Target {
        name: "spirv_postlink",
        kept: Some(Kept { package: "sycl-spirv", dir: "sycl-spirv/tests/fuzz_regressions" }),
    },
    Target {
        name: "device_object",
        kept: Some(Kept {
            package: "sycl-format",
            dir: "sycl-format/tests/fuzz_regressions/device_object",
        }),
    },
    Target {
        name: "image_set",
        kept: Some(Kept {
            package: "sycl-format",
            dir: "sycl-format/tests/fuzz_regressions/image_set",
        }),
    },
    Target { name: "cache_entry", kept: None },
    Target {
        name: "cubin",
        kept: Some(Kept {
            package: "sycl-format",
            dir: "sycl-format/tests/fuzz_regressions/cubin",
        }),
    },
];

/// Installs cargo-fuzz when it is missing.
fn ensure_cargo_fuzz() -> Result<()> {
    if cargo().args(["fuzz", "--version"]).output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    println!("xtask: installing cargo-fuzz");
    run_checked(cargo().args(["install", "cargo-fuzz", "--locked"]))
}

/// Replays the kept inputs, then runs every target for `seconds`; fails when a kept input
/// fails again (before any fuzzing) or when a target finds a new failure (after every target
/// has run, the error holding a report on each).
pub(crate) fn fuzz(seconds: u64) -> Result<()> {
    replay()?;
    ensure_cargo_fuzz()?;
    let dir = repo_root().join("fuzz");
    seed_corpora(&dir.join("corpus"))?;
    let mut findings = Vec::new();
    for target in TARGETS {
        println!("xtask: fuzzing {} for {seconds} s", target.name);
        let output = cargo()
            .args([
                "fuzz",
                "run",
                "-O",
                target.name,
                "--",
                &format!("-max_total_time={seconds}"),
                "-rss_limit_mb=2048",
                "-print_final_stats=1",
            ])
            .env("RUSTC_BOOTSTRAP", "1")
            .current_dir(&dir)
            .output()
            .with_context(|| format!("running cargo fuzz on {}", target.name))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.success() {
            let executed = stat(&stderr, "stat::number_of_executed_units:").unwrap_or("?");
            println!("xtask: {}: {executed} executions, no failure", target.name);
        } else {
            findings.push(finding_report(target, &dir, &stderr, &output.status.to_string()));
        }
    }
    if !findings.is_empty() {
        bail!("{} fuzz target(s) failed:\n\n{}", findings.len(), findings.join("\n\n"));
    }
    Ok(())
}

/// Replays every kept input against its target's property, through `cargo test`.
fn replay() -> Result<()> {
    println!("xtask: replaying the inputs kept from earlier fuzz findings");
    let mut command = cargo();
    command.args(["test", "--workspace", "--test", "fuzz_regressions"]).current_dir(repo_root());
    if !run_inherited(&mut command)?.success() {
        bail!(
            "an input kept from an earlier fuzz finding fails its target's property again (named \
             above): a regression of a bug already fixed; fuzzing skipped (rerun: cargo test \
             --workspace --test fuzz_regressions)"
        );
    }
    Ok(())
}

/// The value libFuzzer printed after `prefix` (`stat::…:`, `INFO: Seed:`), trimmed.
fn stat<'a>(stderr: &'a str, prefix: &str) -> Option<&'a str> {
    stderr.lines().find_map(|l| l.trim_start().strip_prefix(prefix)).map(str::trim)
}

/// The input libFuzzer wrote for the failure it found (`… Test unit written to PATH`), if it
/// wrote one: none when the build failed, for one.
fn written_input(stderr: &str) -> Option<&str> {
    stderr.lines().rev().find_map(|l| l.split_once("Test unit written to ")).map(|(_, p)| p.trim())
}

/// The last panic's message in the output (`thread '…' panicked at PLACE:` and the lines after
/// it, up to the backtrace or libFuzzer's report), which a long backtrace can push out of the
/// output's last lines.
fn panic_message(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let start =
        lines.iter().rposition(|l| l.starts_with("thread '") && l.contains(" panicked at "))?;
    let end = lines[start + 1..]
        .iter()
        .position(|l| {
            l.starts_with("stack backtrace:") || l.starts_with("note: ") || l.starts_with("==")
        })
        .map_or(lines.len(), |n| start + 1 + n);
    Some(lines[start..end].join("\n"))
}

/// What a failed `cargo fuzz run` of `target` in `fuzz_dir` found, said plainly: the target,
/// the input, the seed and the number of executions, the panic and the end of libFuzzer's
/// output, and what to do: reproduce it, keep it where the replay reads it.
fn finding_report(target: &Target, fuzz_dir: &Path, stderr: &str, status: &str) -> String {
    let name = target.name;
    // From libFuzzer's report of the failure (past the panic's backtrace) where it made one.
    let lines: Vec<&str> = stderr.lines().collect();
    let report = lines.iter().rposition(|l| l.starts_with("==") && l.contains("ERROR: libFuzzer"));
    let from = report.unwrap_or(0).max(lines.len().saturating_sub(40));
    let tail = lines[from..].join("\n");
    let Some(input) = written_input(stderr) else {
        return format!(
            "xtask: fuzz target {name}: cargo fuzz failed ({status}) without writing a failing \
             input (a build error?):\n{tail}"
        );
    };
    // libFuzzer runs in `fuzz/`: a relative path is relative to it.
    let input = fuzz_dir.join(input);
    let input = input.display();
    let seed = stat(stderr, "INFO: Seed:").unwrap_or("?");
    let executed = stat(stderr, "stat::number_of_executed_units:").unwrap_or("?");
    let panic = panic_message(stderr)
        .unwrap_or_else(|| "none (a timeout? see libFuzzer's output above)".into());
    let keep = match &target.kept {
        Some(kept) => format!(
            "  keep it (from the repository root): mkdir -p {dir} && cp {input} {dir}/\n             \
             (`cargo test -p {package} --test fuzz_regressions` replays it from then on: it \
             fails until the bug is fixed)",
            dir = kept.dir,
            package = kept.package
        ),
        None => format!(
            "  keep it:   {name} has no replay yet (see TARGETS in xtask/src/fuzz.rs): write one \
             on the model of sycl-format's tests/fuzz_regressions.rs, then copy the input there"
        ),
    };
    format!(
        "xtask: NEW FUZZ FINDING: fuzz target {name} failed on an input no kept one covers \
         (seed {seed}, {executed} executions):\n{tail}\n\n  the panic: {panic}\n  the input: \
         {input}\n  reproduce: \
         (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -O {name} {input})\n{keep}"
    )
}

/// Seeds each target's corpus with its kept inputs and the fixtures' build outputs: the SPIR-V
/// of every device source, device objects made of them, the image sets embedded in the fixture
/// binaries, and persistent-cache entries written by a run of the demo.
fn seed_corpora(corpus: &Path) -> Result<()> {
    for target in TARGETS {
        let Some(kept) = &target.kept else { continue };
        for input in read_dir(&repo_root().join(kept.dir)).unwrap_or_default() {
            put(&corpus.join(target.name), &std::fs::read(&input)?)?;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `TARGETS` lists exactly the fuzz workspace's targets: one missing would never be fuzzed.
    #[test]
    fn targets_are_the_fuzz_workspaces() {
        let manifest = std::fs::read_to_string(repo_root().join("fuzz/Cargo.toml")).unwrap();
        let mut bins: Vec<&str> = manifest
            .split("[[bin]]")
            .skip(1)
            .filter_map(|bin| bin.lines().find_map(|l| l.trim().strip_prefix("name = ")))
            .map(|name| name.trim_matches('"'))
            .collect();
        let mut names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
        bins.sort_unstable();
        names.sort_unstable();
        assert_eq!(bins, names);
    }

    /// Each target with kept inputs in DIR checks the property in `DIR.rs`, which the replay
    /// of its package (`tests/fuzz_regressions.rs`) is or includes: what the fuzzer checks is
    /// what `cargo test` replays, on the inputs in the directory named here. A target without
    /// a replay keeps its property in its own file.
    #[test]
    fn each_target_and_its_replay_check_one_property() {
        let root = repo_root();
        for target in TARGETS {
            let name = target.name;
            let source =
                std::fs::read_to_string(root.join(format!("fuzz/fuzz_targets/{name}.rs"))).unwrap();
            let Some(kept) = &target.kept else {
                assert!(!source.contains("#[path"), "{name} includes a property: name its replay");
                continue;
            };
            let property = format!("{}.rs", kept.dir);
            assert!(root.join(&property).is_file(), "{name}: no {property}");
            let include = format!("#[path = \"../../{property}\"]");
            assert!(source.contains(&include), "{name}'s fuzz target does not include {property}");
            let crate_dir = kept.dir.split('/').next().unwrap();
            let manifest =
                std::fs::read_to_string(root.join(crate_dir).join("Cargo.toml")).unwrap();
            assert!(manifest.contains(&format!("name = \"{}\"", kept.package)), "{}", kept.dir);
            let replay = format!("{crate_dir}/tests/fuzz_regressions.rs");
            let declares = std::fs::read_to_string(root.join(&replay))
                .unwrap()
                .contains(&format!("#[path = \"fuzz_regressions/{name}.rs\"]"));
            assert!(property == replay || declares, "{replay} does not replay {name}");
        }
    }

    /// The output of a `cargo fuzz run` that found a failure, as libFuzzer writes it: the
    /// panic, a backtrace longer than the report's tail, libFuzzer's report and statistics.
    fn crash_output() -> String {
        let frames: String = (0..30).map(|i| format!("  {i}: frame\n        at place\n")).collect();
        format!(
            "INFO: Running with entropic power schedule (0xFF, 100).
INFO: Seed: 3141592653
INFO: seed corpus: files: 1 min: 5861b max: 5861b total: 5861b rss: 27Mb

thread '<unnamed>' (25678) panicked at fuzz_targets/../../sycl-format/tests/fuzz_regressions/cubin.rs:15:9:
`.text.use_bar`'s initial value at 7..7 is not within the 5861 bytes
stack backtrace:
{frames}note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.
==25678== ERROR: libFuzzer: deadly signal
SUMMARY: libFuzzer: deadly signal
MS: 0 ; base unit: 0000000000000000000000000000000000000000
artifact_prefix='/work/main/fuzz/artifacts/cubin/'; Test unit written to /work/main/fuzz/artifacts/cubin/crash-514e955a
stat::number_of_executed_units: 8817
stat::average_exec_per_sec:     1763
"
        )
    }

    fn target(name: &str) -> &'static Target {
        TARGETS.iter().find(|t| t.name == name).unwrap()
    }

    /// A finding is reported with the target, the seed, the executions, the panic, the input
    /// and the commands that reproduce and keep it.
    #[test]
    fn a_finding_is_reported_with_what_to_do() {
        let report =
            finding_report(target("cubin"), Path::new("/r/fuzz"), &crash_output(), "exit 77");
        for needed in [
            "NEW FUZZ FINDING: fuzz target cubin failed",
            "seed 3141592653, 8817 executions",
            "the panic: thread '<unnamed>' (25678) panicked at \
             fuzz_targets/../../sycl-format/tests/fuzz_regressions/cubin.rs:15:9:\n`.text.use_bar`'s \
             initial value at 7..7 is not within the 5861 bytes\n  the input:",
            "the input: /work/main/fuzz/artifacts/cubin/crash-514e955a\n",
            "cargo fuzz run -O cubin /work/main/fuzz/artifacts/cubin/crash-514e955a)",
            "keep it (from the repository root): mkdir -p sycl-format/tests/fuzz_regressions/cubin && cp \
             /work/main/fuzz/artifacts/cubin/crash-514e955a sycl-format/tests/fuzz_regressions/cubin/\n",
            "`cargo test -p sycl-format --test fuzz_regressions` replays it",
        ] {
            assert!(report.contains(needed), "{needed:?} not in:\n{report}");
        }
        // libFuzzer's report, not the backtrace before it.
        assert!(report.contains("==25678== ERROR: libFuzzer: deadly signal\n"), "{report}");
        assert!(!report.contains("0: frame"), "{report}");
        // A relative path is libFuzzer's, which runs in `fuzz/`.
        let relative = crash_output().replace(" /work/main/fuzz/artifacts", " artifacts");
        let report = finding_report(target("spirv_postlink"), Path::new("/r/fuzz"), &relative, "");
        assert!(report.contains("the input: /r/fuzz/artifacts/cubin/crash-514e955a\n"), "{report}");
        assert!(report.contains(
            "&& cp /r/fuzz/artifacts/cubin/crash-514e955a sycl-spirv/tests/fuzz_regressions/\n"
        ));
        let report =
            finding_report(target("cache_entry"), Path::new("/r/fuzz"), &crash_output(), "");
        assert!(report.contains("cache_entry has no replay yet"), "{report}");
    }

    /// A failure without an input written (a build error) says so, with the output's end.
    #[test]
    fn a_failure_without_an_input_says_so() {
        let stderr = "   Compiling sycl-format\nerror[E0425]: cannot find value `x`\n";
        let report =
            finding_report(target("cubin"), Path::new("/r/fuzz"), stderr, "exit status: 101");
        assert!(report.contains("cubin: cargo fuzz failed (exit status: 101) without writing"));
        assert!(report.contains("error[E0425]: cannot find value `x`"), "{report}");
        assert!(!report.contains("NEW FUZZ FINDING"), "{report}");
    }
}
