//! `cargo xtask bench`: runs the benchmarks, gathers the ratios they print into one table, and
//! fails when one misses its bound.
//!
//! The benchmarks (the runtime's and `sycl-ld`'s, the fixtures' `gpu-bench --across` and
//! `rs-app bench` on both CPU devices, the time a Rust device crate adds to a clean build and,
//! where an NVIDIA GPU and nvcc are, `scripts/gpu/bench.sh`, `scripts/gpu/graphs.sh` and
//! `scripts/gpu/rust.sh`) print each ratio
//! as a line `RATIO value op limit | what | detail`, or `RATIO value | what | detail` for one
//! shown beside the others without a bound of its own. The run fails, after the table, when
//!
//! - a bounded ratio misses its bound, the value compared as printed, at full precision (the
//!   benchmarks print every digit; the table rounds for display only);
//! - a bounded ratio of [`EXPECTED`] is not printed, or printed with another bound: a benchmark
//!   that stops printing one, or loosens it, fails the run rather than dropping out of it;
//! - a `RATIO` line does not read: its value or limit not a number, its operator none of `<=`,
//!   `<`, `>=`, `>`, no `| what`.
//!
//! `--informational` reports the same and exits 0. `--smoke` runs the runtime's and `sycl-ld`'s
//! benchmarks once each (`cargo test --bench '*'`: their smoke mode, which measures nothing)
//! and checks only that each prints its expected ratios, well formed, with their bounds.

use std::ffi::OsString;
use std::fmt;
use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};

use crate::{cargo, describe, gpu_suite, repo_root, run_checked, setup};

/// A bounded ratio a benchmark must print: its `what`, and its bound's operator and limit.
type Expected = (&'static str, Op, f64);

/// The packages whose benchmarks `bench` runs, in order.
const PACKAGES: &[&str] = &["sycl-runtime", "sycl-ld"];

/// The bounded ratios of every benchmark, by who prints them: the program and where it runs.
const EXPECTED: &[(&str, &[Expected])] = &[
    ("sycl-runtime", RUNTIME),
    ("sycl-ld", SYCL_LD),
    ("gpu-bench --across intel", ACROSS_INTEL),
    ("gpu-bench --across pocl", ACROSS_POCL),
    ("scripts/gpu/bench.sh", GPU),
    ("scripts/gpu/graphs.sh", GPU_GRAPHS),
    ("rs-app bench intel", RUST_KERNELS),
    ("rs-app bench pocl", RUST_KERNELS),
    ("scripts/gpu/rust.sh", RUST_KERNELS),
    ("clean builds of rs-lib and cl-lib", RUST_BUILD),
];

/// `runtime/benches/`: `launch.rs`, `runtime.rs`, `kernel_time.rs`, `graph.rs`, `memory.rs`. A graph's
/// replay / eager bound (`<= 0.5`) is the for devices with command buffers:
/// `graph.rs` prints it with its bound for the driver's command buffers
/// (`SYCL_COMMAND_BUFFERS=1`; checked where printed, and missed by both CPU drivers), and
/// without one for the runtime's own replay, a CPU device's default; it is not expected.
const RUNTIME: &[Expected] = &[
    ("first launch: runtime / hand-written cl3", Op::Le, 1.02),
    ("cached launch / raw clEnqueueNDRangeKernel", Op::Le, 1.05),
    ("new process first launch: cold / warm persistent cache", Op::Ge, 10.0),
    ("launches per second, runtime / raw clEnqueueNDRangeKernel, intel", Op::Ge, 0.90),
    ("heap allocations per launch in steady state, intel", Op::Le, 0.0),
    ("launches per second, runtime / raw clEnqueueNDRangeKernel, pocl", Op::Ge, 0.90),
    ("heap allocations per launch in steady state, pocl", Op::Le, 0.0),
    ("collect a kernel's images: 1000 / 100 images registered", Op::Le, 1.10),
    ("collect a kernel's images: 10000 / 100 images registered", Op::Le, 1.10),
    ("discover every loaded library's images / one demo link", Op::Lt, 0.01),
    ("kernel time on intel: SPIR-V as sycl-build makes it / from clang -O2", Op::Le, 1.02),
    ("kernel time on pocl: SPIR-V as sycl-build makes it / from clang -O2", Op::Le, 1.02),
    ("kernel time, both devices: SPIR-V as sycl-build makes it / from clang -O2", Op::Le, 1.02),
    ("graph recording / eager launches, 1,000 launches, intel", Op::Le, 2.0),
    ("graph recording / eager launches, 1,000 launches, pocl", Op::Le, 2.0),
    ("heap allocations per view copy in steady state, intel", Op::Le, 0.0),
    ("heap allocations per view copy in steady state, pocl", Op::Le, 0.0),
    ("copy intel -> pocl (staged through the host) / host memcpy, rate", Op::Ge, 0.5),
    ("copy pocl -> intel (staged through the host) / host memcpy, rate", Op::Ge, 0.5),
];

/// `sycl-ld/benches/`: `passthrough.rs`, `postlink.rs`.
const SYCL_LD: &[Expected] = &[
    ("sycl-ld pass-through link / cc link (no device code)", Op::Le, 1.02),
    ("load, link and per_kernel split of one source's kernels, seconds", Op::Le, 1.0),
];

/// `fixtures/gpu-bench/src/overheads.rs`, `across`, on each CPU device.
const ACROSS_INTEL: &[Expected] =
    &[("intel: n-body, hot function across libraries / in one", Op::Le, 1.02)];
const ACROSS_POCL: &[Expected] =
    &[("pocl: n-body, hot function across libraries / in one", Op::Le, 1.02)];

/// `fixtures/gpu-bench/src/`, as `scripts/gpu/bench.sh` runs it on a suite `gpu-suite` packed
/// (with the PTX-only build beside it, for native against PTX). `gpu-bench --gpus` prints its
/// ratio only where two GPUs or more are, so it is checked where printed but not expected.
const GPU: &[Expected] = &[
    ("GPU SAXPY 1 GiB, bandwidth ours / nvcc -O3", Op::Ge, 0.99),
    ("GPU half SAXPY 512 MiB, bandwidth ours / nvcc -O3 __hfma", Op::Ge, 0.99),
    ("GPU float4 copy 1 GiB, bandwidth ours / nvcc -O3", Op::Ge, 0.99),
    ("GPU SGEMM 4096^3, time ours / nvcc -O3", Op::Le, 1.0),
    ("GPU n-body step, time ours / nvcc -O3", Op::Le, 1.0),
    ("GPU n-body, hot function across libraries / in one", Op::Le, 1.02),
    ("GPU cached launch + wait / cuLaunchKernel + synchronize", Op::Le, 1.05),
    ("GPU first launch SAXPY 1 Mi, runtime / the same driver calls by hand", Op::Le, 1.2),
    ("GPU first launch SGEMM 1024^3, runtime / the same driver calls by hand", Op::Le, 1.2),
    ("GPU first launch in a new process, cold / warm persistent cache", Op::Ge, 10.0),
    ("start-up with 1,000 kernels - with 1, ms", Op::Le, 0.5),
    (
        "GPU cold first launch of n-body, hot function in another library, native, in ms",
        Op::Le,
        3.0,
    ),
    (
        "GPU cold first launch of n-body, hot function in another library, native / PTX",
        Op::Le,
        0.05,
    ),
    ("GPU cold first launch of SAXPY 1 Mi, native, in ms", Op::Le, 3.0),
    ("GPU cold first launch of SAXPY 1 Mi, native / PTX", Op::Le, 0.05),
    ("GPU heap allocations per launch in steady state", Op::Le, 0.0),
    ("GPU launches per second, 100,000 asynchronous then one wait / cuLaunchKernel", Op::Ge, 0.90),
    (
        "GPU read_into 1 GiB pinned, bandwidth ours / cuMemcpyDtoH into the same memory",
        Op::Ge,
        0.95,
    ),
    (
        "GPU read_into 1 GiB pageable, bandwidth ours / cuMemcpyDtoH into the same memory",
        Op::Ge,
        0.95,
    ),
    ("GPU 1 GiB pinned copy and kernels on two queues at once / the longer alone", Op::Le, 1.15),
    ("GPU |Event::elapsed() of SAXPY / cuEventElapsedTime - 1|", Op::Le, 0.05),
];

/// `fixtures/rs-app`'s `bench`: Rust kernels against the same code in OpenCL C, on each CPU
/// device and (`scripts/gpu/rust.sh`) on a GPU.
const RUST_KERNELS: &[Expected] = &[
    ("Rust kernel time / the same code in OpenCL C: saxpy", Op::Le, 1.02),
    ("Rust kernel time / the same code in OpenCL C: nbody", Op::Le, 1.02),
    ("Rust kernel time / the same code in OpenCL C: nbody-rust-library", Op::Le, 1.02),
];

/// [`rust_device_build_time`].
const RUST_BUILD: &[Expected] =
    &[("seconds a Rust device crate adds to a clean build of its package", Op::Le, 30.0)];

/// `fixtures/gpu-bench/src/graphs.rs`, as `scripts/gpu/graphs.sh` runs it.
const GPU_GRAPHS: &[Expected] = &[
    (
        "GPU graph replay / eager launches, 1,000 one-block launches of two binaries' kernels",
        Op::Le,
        0.3334,
    ),
    ("GPU graph replay rate / bare cuGraphLaunch of the same kernels built by hand", Op::Ge, 0.95),
    ("GPU graph recording / eager launches, 1,000 launches", Op::Le, 2.0),
];

/// The bounded ratios `source` (a key of [`EXPECTED`]) must print.
fn expected(source: &str) -> &'static [Expected] {
    EXPECTED
        .iter()
        .find(|(name, _)| *name == source)
        .map_or_else(|| panic!("no expected ratios for {source}"), |(_, expected)| expected)
}

/// `cargo xtask bench [--informational] [--smoke] [ARGS]`: setup, then every benchmark (ARGS
/// go to `cargo bench`), the table of ratios, and the verdict.
pub(crate) fn bench(args: &[OsString]) -> Result<ExitCode> {
    let (mut informational, mut smoke, mut args) = (false, false, args);
    while let Some((first, rest)) = args.split_first() {
        match first.to_str() {
            Some("--informational") => informational = true,
            Some("--smoke") => smoke = true,
            _ => break,
        }
        args = rest;
    }
    setup()?;
    run(smoke, informational, args)
}

/// Every benchmark once, in its smoke mode, every expected `RATIO` line checked for (no bound:
/// one run measures nothing): `cargo xtask test`'s step, after its setup. Whether all were.
pub(crate) fn smoke() -> Result<bool> {
    Ok(run(true, false, &[])? == ExitCode::SUCCESS)
}

/// [`bench()`] after the setup.
fn run(smoke: bool, informational: bool, args: &[OsString]) -> Result<ExitCode> {
    let root = repo_root();
    // The runtime's benchmarks link their programs through target/debug/sycl-ld.
    run_checked(cargo().args(["build", "-p", "sycl-ld"]).current_dir(&root))?;
    let mut reports = Vec::new();
    for package in PACKAGES {
        let mut command = cargo();
        let mode = if smoke { "test" } else { "bench" };
        command.args([mode, "-p", package, "--bench", "*"]).args(args).current_dir(&root);
        reports.push(Report::read(package, expected(package), &run_teed(&mut command)?));
    }
    if !smoke {
        reports.extend(across_libraries_on_cpus()?);
        reports.extend(rust_kernels_on_cpus()?);
        reports.push(rust_device_build_time()?);
        reports.extend(gpu_report()?);
    }
    // One run of each benchmark (the smoke mode) measures nothing: no bound is checked.
    let bounds = !smoke;
    print_ratio_table(&reports, bounds);
    let problems: Vec<String> = reports.iter().flat_map(|r| r.problems(bounds)).collect();
    Ok(verdict(&problems, bounds, informational))
}

/// Prints the problems found (with `bounds`, the missed bounds among them); the exit code: a
/// failure when there is one, unless the run is `--informational`.
fn verdict(problems: &[String], bounds: bool, informational: bool) -> ExitCode {
    if problems.is_empty() {
        println!(
            "xtask: bench: every expected ratio printed, {}",
            if bounds {
                "every bound met"
            } else {
                "well formed (bounds not checked: one run each measures nothing)"
            }
        );
        return ExitCode::SUCCESS;
    }
    for problem in problems {
        eprintln!("xtask: bench: {problem}");
    }
    if informational {
        println!("xtask: bench: {} problem(s), reported only (--informational)", problems.len());
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "xtask: bench: FAILED: {} problem(s) (`cargo xtask bench --informational` reports \
             them without failing)",
            problems.len()
        );
        ExitCode::FAILURE
    }
}

/// The fixtures' `gpu-bench` n-body step with its hot function in another library against
/// the same code in one, on both CPU devices (release build).
fn across_libraries_on_cpus() -> Result<Vec<Report>> {
    on_both_cpus("gpu-bench", "gpu-bench --across", |command, device| {
        command.args(["--across", device]).env("SYCL_CACHE_DISABLE", "1");
    })
}

/// `rs-app bench` on both CPU devices: each Rust kernel's time against the same code in
/// OpenCL C.
fn rust_kernels_on_cpus() -> Result<Vec<Report>> {
    on_both_cpus("rs-app", "rs-app bench", |command, device| {
        command.args(["bench", "15"]).env("SYCL_DEVICE", device);
    })
}

/// The fixture `program` built in release, then run on each CPU device as `arguments` sets
/// its command up for the device; each run's ratios read as `SOURCE DEVICE`'s.
fn on_both_cpus(
    program: &str,
    source: &str,
    arguments: impl Fn(&mut Command, &str),
) -> Result<Vec<Report>> {
    let root = repo_root();
    run_checked(
        cargo()
            .args(["build", "-q", "--release", "-p", program])
            .current_dir(root.join("fixtures")),
    )?;
    let path = root.join("fixtures/target/release").join(program);
    let mut reports = Vec::new();
    for device in ["intel", "pocl"] {
        let mut command = Command::new(&path);
        arguments(&mut command, device);
        let source = format!("{source} {device}");
        reports.push(Report::read(&source, expected(&source), &run_teed(&mut command)?));
    }
    Ok(reports)
}

/// What a Rust device crate adds to a clean build of its package: `rs-lib` (a library whose
/// device code is a Rust crate) against `cl-lib` (one whose device code is OpenCL C), each
/// built from clean in a target directory of its own, `core` for the device included.
fn rust_device_build_time() -> Result<Report> {
    let root = repo_root();
    let mut seconds = Vec::new();
    for package in ["cl-lib", "rs-lib"] {
        let target = root.join("target/rust-build-time").join(package);
        if target.exists() {
            std::fs::remove_dir_all(&target)
                .with_context(|| format!("removing {}", target.display()))?;
        }
        let start = std::time::Instant::now();
        run_checked(
            cargo()
                .args(["build", "-q", "-p", package, "--target-dir"])
                .arg(&target)
                .current_dir(root.join("fixtures")),
        )?;
        seconds.push(start.elapsed().as_secs_f64());
    }
    let line = format!(
        "RATIO {} <= 30 | seconds a Rust device crate adds to a clean build of its package | rs-lib {:.1} s, cl-lib {:.1} s, from clean",
        seconds[1] - seconds[0],
        seconds[1],
        seconds[0]
    );
    println!("{line}");
    let source = "clean builds of rs-lib and cl-lib";
    Ok(Report::read(source, expected(source), &line))
}

/// Where an NVIDIA GPU and nvcc are here: the fixtures packed for the GPU (`gpu-suite`) and
/// `scripts/gpu/bench.sh` and `scripts/gpu/graphs.sh` run on them, their ratios tabulated.
/// Elsewhere, says that the GPU rows were skipped and how to get them.
fn gpu_report() -> Result<Vec<Report>> {
    let gpu = crate::gpu_here();
    let nvcc = Command::new("nvcc").arg("--version").output().is_ok_and(|o| o.status.success());
    if !(gpu && nvcc) {
        println!(
            "xtask: GPU benchmarks skipped: {} here. On a machine with one (no Rust needed there): \
             `cargo xtask gpu-suite DIR` here, then `scripts/gpu/bench.sh DIR/suite.tar.xz` and \
             `scripts/gpu/graphs.sh DIR/suite.tar.xz` there",
            if gpu { "no nvcc" } else { "no NVIDIA GPU" }
        );
        return Ok(Vec::new());
    }
    let root = repo_root();
    let dir = root.join("target/gpu-suite");
    gpu_suite::gpu_suite(&dir)?;
    let mut reports = Vec::new();
    for (script, out) in
        [("bench.sh", "bench-out"), ("graphs.sh", "graphs-out"), ("rust.sh", "rust-out")]
    {
        let mut command = Command::new("bash");
        command
            .arg(root.join("scripts/gpu").join(script))
            .arg(dir.join("suite.tar.xz"))
            .env("OUT", dir.join(out));
        let source = format!("scripts/gpu/{script}");
        reports.push(Report::read(&source, expected(&source), &run_teed(&mut command)?));
    }
    Ok(reports)
}

/// Runs a command with its stdout shown line by line as it comes and also returned; stderr
/// goes to the terminal. Fails if the command does not succeed.
fn run_teed(command: &mut Command) -> Result<String> {
    let mut child = command.stdout(Stdio::piped()).spawn().with_context(|| describe(command))?;
    let stdout = child.stdout.take().context("no stdout to read")?;
    let mut captured = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.with_context(|| format!("reading the output of {}", describe(command)))?;
        println!("{line}");
        captured.push_str(&line);
        captured.push('\n');
    }
    let status = child.wait().with_context(|| describe(command))?;
    if !status.success() {
        bail!("{} failed: {status}", describe(command));
    }
    Ok(captured)
}

/// How a value must compare with a bound's limit.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Le,
    Lt,
    Ge,
    Gt,
}

impl Op {
    /// The operator a `RATIO` line writes, if it is one.
    fn parse(text: &str) -> Option<Op> {
        Some(match text {
            "<=" => Op::Le,
            "<" => Op::Lt,
            ">=" => Op::Ge,
            ">" => Op::Gt,
            _ => return None,
        })
    }

    /// Whether `value op limit` holds; never for a value that is not a number.
    fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Op::Le => value <= limit,
            Op::Lt => value < limit,
            Op::Ge => value >= limit,
            Op::Gt => value > limit,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Ge => ">=",
            Op::Gt => ">",
        })
    }
}

/// The bound a ratio must meet: `op limit`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bound {
    op: Op,
    limit: f64,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.op, self.limit)
    }
}

/// One ratio a benchmark measured.
#[derive(Debug, PartialEq)]
struct RatioRow {
    what: String,
    /// The value as printed, every digit of it.
    value: f64,
    /// The bound it must meet, when it has one.
    bound: Option<Bound>,
    detail: String,
}

impl RatioRow {
    /// Reads what follows `RATIO` on a line: `value [op limit] | what [| detail]`; the error
    /// says what is wrong with it.
    fn parse(rest: &str) -> Result<RatioRow, String> {
        let mut parts = rest.splitn(3, " | ");
        let head: Vec<&str> = parts.next().unwrap_or("").split_whitespace().collect();
        let what = parts.next().map(str::trim).filter(|w| !w.is_empty());
        let what = what.ok_or("no `| what` after the value")?;
        let detail = parts.next().unwrap_or("").trim();
        let number = |text: &str, name: &str| {
            text.parse::<f64>().map_err(|_| format!("its {name} `{text}` is not a number"))
        };
        let (value, bound) = match head[..] {
            [value] => (number(value, "value")?, None),
            [value, op, limit] => {
                let op = Op::parse(op).ok_or_else(|| {
                    format!("its operator `{op}` is none of `<=`, `<`, `>=`, `>`")
                })?;
                let limit = number(limit, "limit")?;
                if !limit.is_finite() {
                    return Err(format!("its limit `{limit}` is not a finite number"));
                }
                (number(value, "value")?, Some(Bound { op, limit }))
            }
            _ => return Err("it is not `RATIO value [op limit] | what | detail`".to_string()),
        };
        Ok(RatioRow { what: what.to_string(), value, bound, detail: detail.to_string() })
    }

    /// Whether the value meets the bound; `None` without one.
    fn met(&self) -> Option<bool> {
        self.bound.map(|b| b.op.holds(self.value, b.limit))
    }

    /// The value as the table shows it: four decimals, or three significant digits in
    /// scientific notation where four decimals would show a value that is not zero as zero;
    /// every digit where the figure shown would seem to meet a bound the value misses (or the
    /// other way round).
    fn shown(&self) -> String {
        let v = self.value;
        let rounded =
            if v != 0.0 && v.abs() < 5e-5 { format!("{v:.3e}") } else { format!("{v:.4}") };
        let agrees = self.bound.is_none_or(|b| {
            rounded.parse().is_ok_and(|r: f64| b.op.holds(r, b.limit) == b.op.holds(v, b.limit))
        });
        if agrees {
            rounded
        } else {
            v.to_string()
        }
    }
}

/// What one benchmark program, or one package's benchmarks, printed: its ratios, the `RATIO`
/// lines that did not read, and the bounded ratios it must print.
struct Report {
    /// Who printed it, for messages: a package, or a program and its arguments.
    source: String,
    expected: &'static [Expected],
    rows: Vec<RatioRow>,
    /// Each `RATIO` line that did not read, with what is wrong with it.
    malformed: Vec<String>,
}

impl Report {
    /// Reads the `RATIO` lines of `output` (lines whose first word is `RATIO`).
    fn read(source: &str, expected: &'static [Expected], output: &str) -> Report {
        let mut report = Report {
            source: source.to_string(),
            expected,
            rows: Vec::new(),
            malformed: Vec::new(),
        };
        for line in output.lines() {
            let Some(rest) = line.strip_prefix("RATIO") else { continue };
            if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
                continue;
            }
            match RatioRow::parse(rest) {
                Ok(row) => report.rows.push(row),
                Err(why) => {
                    report.malformed.push(format!("unreadable RATIO line: {why}: `{line}`"))
                }
            }
        }
        report
    }

    /// Everything that fails the run: the lines that did not read, the expected bounded ratios
    /// not printed or printed with another bound, and (with `bounds`) the bounds missed.
    fn problems(&self, bounds: bool) -> Vec<String> {
        let source = &self.source;
        let mut problems: Vec<String> =
            self.malformed.iter().map(|m| format!("{source}: {m}")).collect();
        for &(what, op, limit) in self.expected {
            let want = Bound { op, limit };
            match self.rows.iter().find(|r| r.what == what) {
                None => problems.push(format!(
                    "{source}: printed no RATIO line for `{what}` (expected, bound {want})"
                )),
                Some(row) if row.bound != Some(want) => problems.push(format!(
                    "{source}: `{what}` printed with bound {}, expected {want}",
                    row.bound.map_or("none".to_string(), |b| b.to_string())
                )),
                Some(_) => {}
            }
        }
        if bounds {
            for row in self.rows.iter().filter(|r| r.met() == Some(false)) {
                let bound = row.bound.expect("a bound was missed");
                problems.push(format!(
                    "{source}: bound MISSED: `{}`: {} is not {bound}",
                    row.what, row.value
                ));
            }
        }
        problems
    }
}

/// Prints every ratio, with its bound and (with `bounds`) whether it was met: the verdict from
/// the full value; the table rounds it, see [`RatioRow::shown`].
fn print_ratio_table(reports: &[Report], bounds: bool) {
    let rows: Vec<&RatioRow> = reports.iter().flat_map(|r| &r.rows).collect();
    let width = rows.iter().map(|r| r.what.chars().count()).max().unwrap_or(0).max(5);
    println!();
    println!("benchmark ratios (measured side by side in this run)");
    println!("  {:<width$}  {:>10}  {:<9}  {:<6}  detail", "ratio", "measured", "bound", "");
    for row in &rows {
        let bound = row.bound.map_or("-".to_string(), |b| b.to_string());
        let verdict = match row.met() {
            Some(true) if bounds => "ok",
            Some(false) if bounds => "MISSED",
            _ => "",
        };
        println!(
            "  {:<width$}  {:>10}  {:<9}  {:<6}  {}",
            row.what,
            row.shown(),
            bound,
            verdict,
            row.detail
        );
    }
    let bounded = rows.iter().filter(|r| r.bound.is_some()).count();
    if bounds {
        let met = rows.iter().filter(|r| r.met() == Some(true)).count();
        println!("{met} of {bounded} bounds met");
    } else {
        println!("{bounded} bounds printed, not checked (a smoke run)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of `output` from a source that must print `expected`.
    fn report(expected: &'static [Expected], output: &str) -> Report {
        Report::read("bench", expected, output)
    }

    #[test]
    fn the_rust_device_ratios_read_as_their_expected_bounds() {
        let kernels = "\
RATIO 0.9902704681773297 <= 1.02 | Rust kernel time / the same code in OpenCL C: saxpy | AMD EPYC: median of 31 rounds' ratios; medians Rust 4282 us, OpenCL C 4331 us
RATIO 0.9963300276042336 <= 1.02 | Rust kernel time / the same code in OpenCL C: nbody | AMD EPYC: median of 31 rounds' ratios; medians Rust 886 us, OpenCL C 931 us
RATIO 1.0024429989830008 <= 1.02 | Rust kernel time / the same code in OpenCL C: nbody-rust-library | AMD EPYC: median of 31 rounds' ratios; medians Rust 885 us, OpenCL C 885 us
";
        assert_eq!(report(RUST_KERNELS, kernels).problems(true), Vec::<String>::new());
        let build = "RATIO 14.5 <= 30 | seconds a Rust device crate adds to a clean build of its package | rs-lib 39.5 s, cl-lib 24.9 s, from clean";
        assert_eq!(report(RUST_BUILD, build).problems(true), Vec::<String>::new());
        let slow = build.replace("RATIO 14.5", "RATIO 31.5");
        assert_eq!(report(RUST_BUILD, &slow).problems(true).len(), 1, "a missed bound fails");
    }

    #[test]
    fn ratios_are_read_with_their_bounds() {
        let output = "\
collect/100             time:   [1.1938 µs 1.2045 µs 1.2195 µs]
RATIO 0.9945 <= 1.02 | first launch: runtime / hand-written cl3 | 132.67 ms vs 133.40 ms
RATIO 1.7051 <= 1.05 | cached launch / raw clEnqueueNDRangeKernel | 10.1 µs vs 5.9 µs
RATIO 58.5655 >= 10 | cold / warm | 140.03 ms vs 2.39 ms
RATIO 0.5 > 0.4 | greater
RATIO 0.01 < 0.05 | GPU |Event::elapsed() of SAXPY / cuEventElapsedTime - 1| | median of 11
RATIO 1.0010 | a wrapper's floor: env -> cc link / cc link | medians 24.0 ms vs 24.0 ms
  RATIO lines in prose, indented, are not RATIO lines; nor is RATIOS 1 | x
";
        let r = report(&[], output);
        assert_eq!(r.malformed, Vec::<String>::new());
        assert_eq!(r.rows.len(), 6);
        assert_eq!(
            r.rows[0],
            RatioRow {
                what: "first launch: runtime / hand-written cl3".to_string(),
                value: 0.9945,
                bound: Some(Bound { op: Op::Le, limit: 1.02 }),
                detail: "132.67 ms vs 133.40 ms".to_string(),
            }
        );
        assert_eq!(r.rows[3].detail, "");
        assert_eq!(r.rows[4].what, "GPU |Event::elapsed() of SAXPY / cuEventElapsedTime - 1|");
        assert_eq!(r.rows[5].bound, None);
        assert_eq!(
            r.rows.iter().map(RatioRow::met).collect::<Vec<_>>(),
            [Some(true), Some(false), Some(true), Some(true), Some(true), None]
        );
    }

    #[test]
    fn a_missed_bound_fails_the_run_unless_informational() {
        let r = report(&[], "RATIO 1.7051 <= 1.05 | cached launch | 10.1 µs vs 5.9 µs\n");
        let problems = r.problems(true);
        assert_eq!(problems, ["bench: bound MISSED: `cached launch`: 1.7051 is not <= 1.05"]);
        assert_eq!(verdict(&problems, true, false), ExitCode::FAILURE);
        assert_eq!(verdict(&problems, true, true), ExitCode::SUCCESS);
        assert_eq!(verdict(&[], true, false), ExitCode::SUCCESS);
        // The smoke run (one run each, measuring nothing) checks no bound.
        assert_eq!(r.problems(false), Vec::<String>::new());
        // Each operator, at its limit.
        for (line, met) in [
            ("RATIO 1 <= 1 | a", true),
            ("RATIO 1 < 1 | a", false),
            ("RATIO 1 >= 1 | a", true),
            ("RATIO 1 > 1 | a", false),
            ("RATIO 0.9 >= 0.90 | a", true),
            ("RATIO NaN <= 1 | a", false),
            ("RATIO NaN >= 1 | a", false),
        ] {
            assert_eq!(report(&[], line).rows[0].met(), Some(met), "{line}");
        }
    }

    #[test]
    fn an_unknown_operator_is_an_error_naming_the_line() {
        for op in ["=<", "==", "=", "~", "<<"] {
            let line = format!("RATIO 0.5 {op} 1.02 | first launch | detail");
            let r = report(&[], &line);
            assert_eq!(r.rows, []);
            assert_eq!(
                r.problems(true),
                [format!(
                    "bench: unreadable RATIO line: its operator `{op}` is none of `<=`, `<`, \
                     `>=`, `>`: `{line}`"
                )]
            );
        }
    }

    #[test]
    fn an_unparsable_limit_or_value_is_an_error_naming_the_line() {
        for (line, why) in [
            ("RATIO 0.5 <= 1.02x | first launch", "its limit `1.02x` is not a number"),
            ("RATIO 0.5 <= one | first launch", "its limit `one` is not a number"),
            ("RATIO 0.5 <= inf | first launch", "its limit `inf` is not a finite number"),
            ("RATIO 0.5 <= NaN | first launch", "its limit `NaN` is not a finite number"),
            ("RATIO 0,5 <= 1 | first launch", "its value `0,5` is not a number"),
            ("RATIO 0.5x | first launch", "its value `0.5x` is not a number"),
            ("RATIO 0.5 <= | first launch", "it is not `RATIO value [op limit] | what | detail`"),
            (
                "RATIO 0.5 <= 1 2 | first launch",
                "it is not `RATIO value [op limit] | what | detail`",
            ),
            ("RATIO | first launch", "it is not `RATIO value [op limit] | what | detail`"),
            ("RATIO 0.5 <= 1.02", "no `| what` after the value"),
            ("RATIO 0.5 <= 1.02 |  | detail", "no `| what` after the value"),
            ("RATIO", "no `| what` after the value"),
        ] {
            let r = report(&[], line);
            assert_eq!(r.rows, [], "{line}");
            assert_eq!(
                r.problems(false),
                [format!("bench: unreadable RATIO line: {why}: `{line}`")],
                "{line}"
            );
        }
    }

    #[test]
    fn a_missing_expected_bound_fails() {
        const EXPECTS: &[Expected] =
            &[("first launch", Op::Le, 1.02), ("cold / warm", Op::Ge, 10.0)];
        let both = "RATIO 1.0 <= 1.02 | first launch | x\nRATIO 11 >= 10.00 | cold / warm | y\n";
        assert_eq!(report(EXPECTS, both).problems(true), Vec::<String>::new());
        // One not printed at all, or printed without its bound, or with another bound.
        assert_eq!(
            report(EXPECTS, "RATIO 1.0 <= 1.02 | first launch | x\n").problems(false),
            ["bench: printed no RATIO line for `cold / warm` (expected, bound >= 10)"]
        );
        assert_eq!(
            report(EXPECTS, "RATIO 1.0 <= 1.02 | first launch\nRATIO 11 | cold / warm\n")
                .problems(false),
            ["bench: `cold / warm` printed with bound none, expected >= 10"]
        );
        assert_eq!(
            report(EXPECTS, "RATIO 1.0 <= 1.05 | first launch\nRATIO 11 >= 10 | cold / warm\n")
                .problems(false),
            ["bench: `first launch` printed with bound <= 1.05, expected <= 1.02"]
        );
        // A malformed line is no expected line either.
        assert_eq!(
            report(EXPECTS, "RATIO 1.0 =< 1.02 | first launch\nRATIO 11 >= 10 | cold / warm\n")
                .problems(false)
                .len(),
            2
        );
        // Nothing printed at all: every expected one is missing.
        assert_eq!(report(EXPECTS, "no ratios here\n").problems(false).len(), 2);
    }

    #[test]
    fn values_are_compared_at_full_precision() {
        // Shown as 1.020 with three decimals (and 1.0204 with four), over 1.02 all the same.
        let r = report(&[], "RATIO 1.0204 <= 1.02 | first launch | x\n");
        assert_eq!(r.rows[0].met(), Some(false));
        assert_eq!(
            r.problems(true),
            ["bench: bound MISSED: `first launch`: 1.0204 is not <= 1.02"]
        );
        let r = report(&[], "RATIO 1.0200001 <= 1.02 | first launch | x\n");
        assert_eq!(r.rows[0].met(), Some(false));
        // Shown rounded where the rounding agrees with the verdict, else with every digit.
        assert_eq!(r.rows[0].shown(), "1.0200001");
        assert_eq!(report(&[], "RATIO 1.0204 <= 1.02 | a").rows[0].shown(), "1.0204");
        assert_eq!(report(&[], "RATIO 0.123456 | a").rows[0].shown(), "0.1235");

        // One heap allocation in 100,000 launches, as the benchmarks print it (`{}`), is not
        // none; nor in scientific notation.
        for printed in [format!("{}", 1.0 / 100_000.0), format!("{:e}", 1.0 / 100_000.0)] {
            let line = format!("RATIO {printed} <= 0 | heap allocations per launch | 1 in 100000");
            let r = report(&[], &line);
            assert_eq!(r.rows[0].value, 1e-5, "{line}");
            assert_eq!(r.rows[0].met(), Some(false), "{line}");
            assert_eq!(r.rows[0].shown(), "1.000e-5");
        }
        assert_eq!(format!("{}", 1.0 / 100_000.0), "0.00001");
        let none = report(&[], "RATIO 0 <= 0 | heap allocations per launch | 0 in 100000\n");
        assert_eq!(none.rows[0].met(), Some(true));
        assert_eq!(none.rows[0].shown(), "0.0000");
    }

    #[test]
    fn every_expected_ratio_is_named_once() {
        for (source, expected) in EXPECTED {
            for (i, (what, _, limit)) in expected.iter().enumerate() {
                assert!(
                    expected[..i].iter().all(|(other, ..)| other != what),
                    "{source}: `{what}` is expected twice"
                );
                assert!(limit.is_finite(), "{source}: `{what}`");
            }
        }
        // Every source `bench` reads has its list.
        for source in PACKAGES.iter().copied().chain([
            "scripts/gpu/bench.sh",
            "scripts/gpu/graphs.sh",
            "scripts/gpu/rust.sh",
            "clean builds of rs-lib and cl-lib",
        ]) {
            assert!(!expected(source).is_empty(), "{source}");
        }
        for device in ["intel", "pocl"] {
            assert!(!expected(&format!("gpu-bench --across {device}")).is_empty());
            assert!(!expected(&format!("rs-app bench {device}")).is_empty());
        }
    }
}
