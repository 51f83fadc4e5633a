//! Cost of `sycl-ld` on a link without device code, where it must be an exact pass-through
//! to the real linker (build scripts and proc macros are linked through it too).
//!
//! Builds a hello-world binary once with a capture script as the linker and `-C save-temps`,
//! then replays the captured link command line in rounds, each command once a round (the
//! order turns from round to round):
//! (a) `cc ARGS` against (b) `sycl-ld ARGS` with `SYCL_LD_LINKER=cc`, and (c) `env cc ARGS`:
//! the least any wrapper between rustc and `cc` costs, one more program started (`env` only
//! `exec`s its argument); then the same with `true` as the linker: sycl-ld's own cost per
//! link (its start, the scan, the `exec` of the linker), without the linker's. Prints medians
//! and minimums, and the pass-through ratio b/a against its bound as a `RATIO` line, with the
//! floor c/a beside it, which `cargo xtask bench` tabulates. Nothing is asserted about the
//! timings.
//!
//! A ratio is the median over the rounds of each round's own ratio: the two links of a round
//! run within milliseconds of each other, so whatever else the machine is doing then weighs
//! on both. On a 2-core VM busy with other builds, six blocks of 100 rounds gave ratios of the
//! two medians from 1.05 to 1.11, and medians of the rounds' ratios from 1.06 to 1.08.
//!
//! Run with `cargo bench -p sycl-ld --bench passthrough`. Without `--bench` (as in
//! `cargo test --benches`) every command runs once, as a smoke test, and the `RATIO` lines
//! are printed all the same (one run measures nothing: `cargo xtask bench --smoke` checks that
//! they are printed, not their values).

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const SYCL_LD: &str = env!("CARGO_BIN_EXE_sycl-ld");
const WARMUP: usize = 5;
/// A hello-world link takes 20-30 ms and sycl-ld's share is about one: many rounds, so that
/// the ratio holds still on a machine that other work shares.
const RUNS: usize = 200;
/// The most a pass-through link may cost, as a multiple of the plain `cc` link.
const BOUND: f64 = 1.02;

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (warmup, runs) = if bench { (WARMUP, RUNS) } else { (0, 1) };

    let dir = tempfile::Builder::new().prefix("sycl-ld-bench").tempdir().unwrap();
    let args = capture_link(dir.path());
    let project = dir.path().join("hello");

    let cc_link = |linker: &str| {
        let mut cmd = Command::new(linker);
        cmd.args(&args).current_dir(&project);
        cmd
    };
    let via_sycl_ld = |real: &str| {
        let mut cmd = Command::new(SYCL_LD);
        cmd.args(&args).env("SYCL_LD_LINKER", real).current_dir(&project);
        cmd
    };
    let via_env = |real: &str| {
        let mut cmd = Command::new("env");
        cmd.arg(real).args(&args).current_dir(&project);
        cmd
    };

    let links = interleaved(warmup, runs, [cc_link("cc"), via_sycl_ld("cc"), via_env("cc")]);
    let [cc, ld, floor] = links.each_ref().map(|t| Stats::of(t));
    let [alone, own, env] =
        interleaved(warmup, runs, [cc_link("true"), via_sycl_ld("true"), via_env("true")])
            .map(|t| Stats::of(&t));

    let profile = if cfg!(debug_assertions) { "debug" } else { "optimized" };
    let (ratio, min_ratio) = (paired_ratio(&links[1], &links[0]), ld.min / cc.min);
    let (floor_ratio, floor_min_ratio) = (paired_ratio(&links[2], &links[0]), floor.min / cc.min);
    println!(
        "sycl-ld pass-through (hello world link, {profile} sycl-ld, {runs} runs each, interleaved)"
    );
    println!("  cc link              {cc}");
    println!("  sycl-ld -> cc link   {ld}");
    println!("  env -> cc link       {floor}");
    println!("  true                 {alone}");
    println!("  sycl-ld -> true      {own}");
    println!("  env -> true          {env}");
    println!(
        "  sycl-ld's own cost = {:.2} ms per link (median; min {:.2}): its start, the scan, the exec of the linker",
        own.median - alone.median,
        own.min - alone.min
    );
    println!(
        "  a wrapper's least cost (env) = {:.2} ms per link (median; min {:.2}): one more program started",
        env.median - alone.median,
        env.min - alone.min
    );
    if bench {
        let verdict = if ratio <= BOUND { "met" } else { "MISSED" };
        println!("  pass-through link / cc link = {ratio:.3} (median of the rounds; min/min {min_ratio:.3}), bound <= {BOUND}: {verdict}");
        println!("  env -> cc link / cc link = {floor_ratio:.3} (median of the rounds; min/min {floor_min_ratio:.3}): what any wrapper costs");
    } else {
        println!("  (one run each: a smoke test, not a measurement)");
    }
    // With every digit: `cargo xtask bench` compares the value as printed with the bound.
    println!(
        "RATIO {ratio} <= {BOUND} | sycl-ld pass-through link / cc link (no device code) | median of {runs} rounds' ratios; medians {:.1} ms vs {:.1} ms; min/min {min_ratio:.3}",
        ld.median, cc.median
    );
    println!(
        "RATIO {floor_ratio} | a wrapper's floor: env -> cc link / cc link | median of {runs} rounds' ratios; medians {:.1} ms vs {:.1} ms; min/min {floor_min_ratio:.3}",
        floor.median, cc.median
    );
}

/// Builds a hello-world project in `dir` through a linker script that records its arguments
/// and returns them, with the output redirected into `dir`.
fn capture_link(dir: &Path) -> Vec<OsString> {
    let project = dir.join("hello");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"hello\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(project.join("src/main.rs"), "fn main() {\n    println!(\"hello\");\n}\n")
        .unwrap();

    let script = dir.join("capture-cc");
    std::fs::write(
        &script,
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"$(dirname \"$0\")/link-args\"\nexec cc \"$@\"\n",
    )
    .unwrap();
    let status = Command::new("chmod").arg("+x").arg(&script).status().unwrap();
    assert!(status.success(), "chmod +x {}", script.display());

    // save-temps keeps the objects the captured command line names (codegen units and
    // rustc's temporary directory with symbols.o, both under target/release/deps).
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["build", "--release", "--quiet"])
        .current_dir(&project)
        .env("RUSTFLAGS", format!("-C save-temps -C linker={}", script.display()))
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "building hello world failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let text = std::fs::read_to_string(dir.join("link-args")).unwrap();
    let mut args: Vec<OsString> = text.lines().map(OsString::from).collect();
    let o = args.iter().position(|a| a == "-o").expect("no -o in the captured link");
    args[o + 1] = dir.join("hello-relinked").into_os_string();
    args
}

/// Runs the commands in turn, `warmup` then `runs` rounds, and returns each one's wall times.
/// Each round starts one command further on, so that none is always the first of its round.
fn interleaved<const N: usize>(
    warmup: usize,
    runs: usize,
    mut cmds: [Command; N],
) -> [Vec<Duration>; N] {
    let mut times: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(runs));
    for round in 0..warmup + runs {
        for i in (0..N).map(|i| (i + round) % N) {
            let (cmd, times) = (&mut cmds[i], &mut times[i]);
            let start = Instant::now();
            let output = cmd.output().unwrap();
            let elapsed = start.elapsed();
            assert!(
                output.status.success(),
                "{cmd:?} failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
            if round >= warmup {
                times.push(elapsed);
            }
        }
    }
    times
}

/// The median over the rounds of `b`'s time over `a`'s in the same round.
fn paired_ratio(b: &[Duration], a: &[Duration]) -> f64 {
    let mut ratios: Vec<f64> =
        b.iter().zip(a).map(|(b, a)| b.as_secs_f64() / a.as_secs_f64()).collect();
    ratios.sort_by(f64::total_cmp);
    median_of_sorted(&ratios)
}

fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Median and minimum in milliseconds.
struct Stats {
    median: f64,
    min: f64,
}

impl Stats {
    fn of(times: &[Duration]) -> Stats {
        let mut ms: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        Stats { median: median_of_sorted(&ms), min: ms[0] }
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "median {:5.1} ms  min {:5.1} ms", self.median, self.min)
    }
}
