//! Developer tasks for this workspace, run as `cargo xtask <COMMAND>` (`cargo xtask help`).
//!
//! * `setup` makes the machine ready: the Debian packages (clang, llvm-spirv, SPIR-V tools,
//!   the OpenCL ICD loader and PoCL), Intel's CPU OpenCL runtime from PyPI and its ICD
//!   registration, NVIDIA's `ptxas` from PyPI (for the native GPU targets). It is idempotent and is run first by the tasks that build device code.
//! * `demo` builds `sycl-ld`, then the fixture app (and `libhelpers.so`, which it links
//!   against) with it, then runs the app: only what the demo runs is built.
//! * `test` builds `sycl-ld` and the whole fixture workspace, then runs `cargo test
//!   --workspace` with any extra arguments, the tidy checks of `tidy.rs` among the tests.
//!   Without arguments (the CI run, `.ci/run`), the style checks come first (`cargo fmt
//!   --check` and clippy with `-D warnings`, see `style.rs`) and a short smoke run of every
//!   fuzz target last; a failed style check fails the run after the tests.
//! * `style` runs the style checks alone.
//! * `gpu-pack DIR` writes the PTX images the `ptx64` target makes for a set of real kernels,
//!   with a manifest, for `scripts/gpu/ptx-check.sh` to run on an NVIDIA GPU (see `gpu.rs`).
//! * `gpu-suite DIR` packs the fixtures' programs, built with PTX, and their expected outputs,
//!   for `scripts/gpu/suite.sh` to run on an NVIDIA GPU (see `gpu_suite.rs`).
//! * `pack PROGRAM... --out DIR` copies built programs with their device libraries into a
//!   directory that runs wherever it is copied, and `--tar ARCHIVE` archives it (see `pack.rs`).
//! * `fuzz [SECONDS]` runs every fuzz target for SECONDS (see `fuzz.rs`).
//! * `package` packages the crates, installs the packaged `sycl-ld` and builds and runs the
//!   demo against them outside the repository; `test` runs it too (see `package.rs`).
//! * `weight [ARGS]` builds the fixture workspace from clean and prints what device code costs
//!   a workspace: build time, target size, each build script's size (see `weight.rs`).
//! * `bench [ARGS]` builds `sycl-ld`, runs the benchmarks of `sycl-runtime` and `sycl-ld`
//!   (their output shown as it comes), the fixtures' `gpu-bench --across` on both CPU devices,
//!   and, where an NVIDIA GPU and nvcc are, the GPU benchmark (`scripts/gpu/bench.sh`); then
//!   prints one table of every ratio they measured side by side, each with the bound it must
//!   meet and whether it did.

use anyhow::{bail, Context, Result};

mod fuzz;
mod gpu;
mod gpu_suite;
mod pack;
mod package;
mod style;
#[cfg(test)]
mod tidy;
mod weight;
use std::env;
use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Output, Stdio};

/// Debian packages the toolchain and the OpenCL platforms need: `llvm-16` (`llvm-dis-16`,
/// `llvm-link-16`, `opt-16`, `llc-16`) and `libclc-16` (OpenCL C's library for NVPTX) make the
/// PTX images of the `ptx64` target (`sycl-ld/src/ptx.rs`).
const APT_PACKAGES: &[&str] = &[
    "clang-15",
    "llvm-15",
    "llvm-spirv-15",
    "spirv-tools",
    "ocl-icd-opencl-dev",
    "pocl-opencl-icd",
    "llvm-16",
    "libclc-16",
];

/// PyPI packages providing Intel's CPU OpenCL runtime (`libintelocl.so`) and its dependencies.
const PIP_PACKAGES: &[&str] = &["intel-opencl-rt", "intel-cmplr-lib-rt"];

/// The Python interpreter whose environment holds the Intel runtime.
const PYTHON: &str = "python3";

/// The library the Intel ICD file must name.
const INTEL_LIB: &str = "libintelocl.so";

/// Where the OpenCL ICD loader looks for vendor registrations.
const ICD_DIR: &str = "/etc/OpenCL/vendors";

/// The ICD file registering the Intel CPU runtime.
const INTEL_ICD: &str = "/etc/OpenCL/vendors/intel-cpu.icd";

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  setup          install and register everything the demo and the tests need
  demo [ARGS]    setup, build the fixture app and run it with ARGS
  test [ARGS]    setup, build all the fixtures and run `cargo test --workspace ARGS`
                 (without ARGS: first the style checks, then the tests, then a 5-second
                 smoke run of every fuzz target, then `package`)
  style          `cargo fmt --all --check` for this workspace, fixtures/ and fuzz/, then
                 `cargo clippy --workspace --all-targets --keep-going -- -D warnings`
  gpu-pack DIR   write the PTX the ptx64 target makes for the GPU check's kernels to DIR,
                 with a manifest (for scripts/gpu/ptx-check.sh on an NVIDIA machine)
  gpu-suite DIR  setup, build the fixtures in release with PTX, and pack them with their expected
                 outputs into DIR/suite.tar.xz (for scripts/gpu/suite.sh on an NVIDIA machine)
  pack PROGRAM... [--lib LIBRARY]... --out DIR [--tar ARCHIVE]
                 copy built programs with the shared libraries they need (and LIBRARY, one
                 opened with dlopen or LD_PRELOADed) into DIR, laid out as their run paths
                 expect; with --tar also write DIR as ARCHIVE
  fuzz [SECONDS] run every fuzz target for SECONDS each (default 60)
  package        cargo package the crates, install the packaged sycl-ld, and build and run
                 the demo against them in a workspace outside the repository
  bench [ARGS]   setup, build sycl-ld, run the sycl-runtime and sycl-ld benchmarks
                 (`cargo bench -p PACKAGE --bench '*' ARGS`), gpu-bench --across on both CPU
                 devices and, with an NVIDIA GPU and nvcc here, the GPU benchmark; print a
                 table of their ratios
  weight [ARGS]  setup, build the fixtures from clean in target/weight-fixtures (`cargo build
                 ARGS`) and print the build time, the target size and each build script's size";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Dispatches on the subcommand; a usage error exits with status 2, like most CLIs.
fn run() -> Result<ExitCode> {
    let args: Vec<OsString> = env::args_os().skip(1).collect();
    let (command, rest) = match args.split_first() {
        Some((command, rest)) => (command.to_str().unwrap_or(""), rest),
        None => ("", &[][..]),
    };
    match (command, rest) {
        ("setup", []) => {
            setup()?;
            Ok(ExitCode::SUCCESS)
        }
        ("demo", args) => demo(args),
        ("style", []) => Ok(if style::style()? { ExitCode::SUCCESS } else { ExitCode::FAILURE }),
        ("test", args) => test(args),
        ("bench", args) => bench(args),
        ("weight", args) => {
            setup()?;
            weight::weight(args)?;
            Ok(ExitCode::SUCCESS)
        }
        ("gpu-suite", [dir]) => {
            setup()?;
            gpu_suite::gpu_suite(Path::new(dir))?;
            Ok(ExitCode::SUCCESS)
        }
        ("pack", args) => {
            pack::pack(args)?;
            Ok(ExitCode::SUCCESS)
        }
        ("package", []) => {
            setup()?;
            package::package()?;
            Ok(ExitCode::SUCCESS)
        }
        ("gpu-pack", [dir]) => {
            gpu::gpu_pack(Path::new(dir))?;
            Ok(ExitCode::SUCCESS)
        }
        ("fuzz", args) => {
            let seconds = match args {
                [] => 60,
                [s] => s
                    .to_str()
                    .and_then(|s| s.parse().ok())
                    .context("usage: cargo xtask fuzz [SECONDS]")?,
                _ => bail!("usage: cargo xtask fuzz [SECONDS]"),
            };
            fuzz::fuzz(seconds)?;
            Ok(ExitCode::SUCCESS)
        }
        ("help" | "-h" | "--help", []) => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        _ => {
            eprintln!("{USAGE}");
            Ok(ExitCode::from(2))
        }
    }
}

/// The fixture package the demo runs (its binary has the same name).
const DEMO_PACKAGE: &str = "app";

/// Runs setup, builds the fixture app and runs it, passing its output and status on.
fn demo(args: &[OsString]) -> Result<ExitCode> {
    setup()?;
    build_fixtures(&[DEMO_PACKAGE])?;
    let app = repo_root().join("fixtures/target/debug").join(DEMO_PACKAGE);
    let status = run_inherited(Command::new(&app).args(args))?;
    Ok(exit_code(status))
}

/// Runs setup, builds the fixtures the end-to-end tests load, then runs the workspace tests.
/// The CI run (no arguments) checks the style first and smoke-runs the fuzz targets last; a
/// style failure is reported again, and fails the run, once the tests have run.
fn test(args: &[OsString]) -> Result<ExitCode> {
    let style = if args.is_empty() { style::check()? } else { Vec::new() };
    let tests = run_tests(args);
    let style_clean = style::report(&style);
    match tests? {
        status if status.success() && !style_clean => Ok(ExitCode::FAILURE),
        status => Ok(exit_code(status)),
    }
}

/// Everything `test` does after the style checks.
fn run_tests(args: &[OsString]) -> Result<ExitStatus> {
    setup()?;
    build_fixtures(&[])?;
    let status =
        run_inherited(cargo().args(["test", "--workspace"]).args(args).current_dir(repo_root()))?;
    if status.success() && args.is_empty() {
        // A short smoke run of every fuzz target (the long runs are `cargo xtask fuzz`).
        fuzz::fuzz(FUZZ_SMOKE_SECONDS)?;
        // The crates as a user outside gets them (see package.rs).
        package::package()?;
        say_gpu_runs_skipped();
    }
    Ok(status)
}

/// The tests check the PTX the `ptx64` target makes (sycl-ld's `ptx64_*` tests), but run
/// nothing on a GPU: the suite that does is built here and run on a GPU machine. Said plainly.
fn say_gpu_runs_skipped() {
    let gpu = Command::new("nvidia-smi").arg("-L").output().is_ok_and(|o| o.status.success());
    println!(
        "xtask: GPU runs skipped: {}; the PTX forms were checked. On a GPU machine: `cargo xtask gpu-suite DIR` here, \
         then `scripts/gpu/suite.sh DIR/suite.tar.xz` there",
        if gpu { "the tests run nothing on the GPU this machine has" } else { "no NVIDIA GPU on this machine" }
    );
}

/// Seconds each fuzz target runs in `cargo xtask test`.
const FUZZ_SMOKE_SECONDS: u64 = 5;

/// The packages whose benchmarks `bench` runs, in order.
const BENCH_PACKAGES: &[&str] = &["sycl-runtime", "sycl-ld"];

/// Runs setup and every benchmark, then prints the table of ratios.
fn bench(args: &[OsString]) -> Result<ExitCode> {
    setup()?;
    let root = repo_root();
    // The runtime's benchmarks link their programs through target/debug/sycl-ld.
    run_checked(cargo().args(["build", "-p", "sycl-ld"]).current_dir(&root))?;
    let mut rows = Vec::new();
    for package in BENCH_PACKAGES {
        let mut command = cargo();
        command.args(["bench", "-p", package, "--bench", "*"]).args(args).current_dir(&root);
        let output = run_teed(&mut command)?;
        rows.extend(ratio_rows(package, &output));
    }
    rows.extend(across_libraries_on_cpus()?);
    rows.extend(gpu_rows()?);
    print_ratio_table(&rows);
    Ok(ExitCode::SUCCESS)
}

/// The fixtures' `gpu-bench` n-body step with its hot function in another library against
/// the same code in one, on both CPU devices (release build).
fn across_libraries_on_cpus() -> Result<Vec<RatioRow>> {
    let root = repo_root();
    run_checked(
        cargo()
            .args(["build", "-q", "--release", "-p", "gpu-bench"])
            .current_dir(root.join("fixtures")),
    )?;
    let program = root.join("fixtures/target/release/gpu-bench");
    let mut rows = Vec::new();
    for device in ["intel", "pocl"] {
        let mut command = Command::new(&program);
        command.args(["--across", device]).env("SYCL_CACHE_DISABLE", "1");
        rows.extend(ratio_rows("gpu-bench", &run_teed(&mut command)?));
    }
    Ok(rows)
}

/// Where an NVIDIA GPU and nvcc are here: the fixtures packed for the GPU
/// (`gpu-suite`) and `scripts/gpu/bench.sh` run on them, its ratios tabulated. Elsewhere, says
/// that the GPU rows were skipped and how to get them.
fn gpu_rows() -> Result<Vec<RatioRow>> {
    let gpu = Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    let nvcc = Command::new("nvcc").arg("--version").output().is_ok_and(|o| o.status.success());
    if !(gpu && nvcc) {
        println!(
            "xtask: GPU benchmarks skipped: {} here. On a machine with one (no Rust needed there): \
             `cargo xtask gpu-suite DIR` here, then `scripts/gpu/bench.sh DIR/suite.tar.xz` there",
            if gpu { "no nvcc" } else { "no NVIDIA GPU" }
        );
        return Ok(Vec::new());
    }
    let root = repo_root();
    let dir = root.join("target/gpu-suite");
    gpu_suite::gpu_suite(&dir)?;
    let mut command = Command::new("bash");
    command
        .arg(root.join("scripts/gpu/bench.sh"))
        .arg(dir.join("suite.tar.xz"))
        .env("OUT", dir.join("bench-out"));
    Ok(ratio_rows("gpu-bench", &run_teed(&mut command)?))
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

/// One ratio a benchmark measured.
#[derive(Debug, PartialEq)]
struct RatioRow {
    what: String,
    value: f64,
    /// The bound it must meet, as `op number` (`<= 1.02`), when there is one.
    bound: Option<(String, f64)>,
    detail: String,
}

impl RatioRow {
    /// Whether the value meets the bound; `None` without one.
    fn met(&self) -> Option<bool> {
        let (op, limit) = self.bound.as_ref()?;
        Some(match op.as_str() {
            "<=" => self.value <= *limit,
            "<" => self.value < *limit,
            ">=" => self.value >= *limit,
            ">" => self.value > *limit,
            _ => return None,
        })
    }
}

/// The ratios in a package's benchmark output: the runtime's benches and sycl-ld's
/// pass-through bench print `RATIO value op bound | what | detail` lines (`RATIO value | …`
/// for one shown beside the others without a bound of its own); sycl-ld's others print
/// theirs in prose (the post-link table against spirv-link, the per_kernel split time).
fn ratio_rows(package: &str, output: &str) -> Vec<RatioRow> {
    let mut rows = Vec::new();
    let mut in_postlink_table = false;
    for line in output.lines() {
        if let Some(rest) = line.strip_prefix("RATIO ") {
            let mut parts = rest.splitn(3, " | ");
            let head: Vec<&str> = parts.next().unwrap_or("").split_whitespace().collect();
            let (what, detail) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let (value, bound) = match head[..] {
                [value] => (value, None),
                [value, op, limit] => match limit.parse() {
                    Ok(limit) => (value, Some((op.to_string(), limit))),
                    Err(_) => continue,
                },
                _ => continue,
            };
            if let Ok(value) = value.parse() {
                rows.push(RatioRow {
                    what: what.to_string(),
                    value,
                    bound,
                    detail: detail.to_string(),
                });
            }
            continue;
        }
        let trimmed = line.trim();
        if trimmed.starts_with("functions") && trimmed.ends_with("ours/spirv-link") {
            in_postlink_table = true;
        } else if in_postlink_table {
            // `  2000   0.123 s (5 runs)   0.456 s (3 runs)   0.2697`
            let fields: Vec<&str> = trimmed.split_whitespace().collect();
            match (
                fields.first().map(|f| f.parse::<u64>()),
                fields.last().map(|f| f.parse::<f64>()),
            ) {
                (Some(Ok(functions)), Some(Ok(value))) => rows.push(RatioRow {
                    what: format!("device link + post-link / spirv-link, {functions} functions"),
                    value,
                    bound: None,
                    detail: String::new(),
                }),
                _ => in_postlink_table = false,
            }
        } else if let Some(rest) = trimmed.strip_prefix("per_kernel split of ") {
            // `per_kernel split of 1000 kernels: 0.321 s (limit 1 s; ...)`
            let Some((kernels, rest)) = rest.split_once(':') else {
                continue;
            };
            let value = rest.split_whitespace().next().and_then(|v| v.parse().ok());
            let limit = rest
                .split_once("limit ")
                .and_then(|(_, l)| l.split_whitespace().next())
                .and_then(|l| l.parse().ok());
            if let Some(value) = value {
                rows.push(RatioRow {
                    what: format!("per_kernel split of {kernels}, seconds"),
                    value,
                    bound: limit.map(|l| ("<=".to_string(), l)),
                    detail: String::new(),
                });
            }
        }
    }
    if rows.is_empty() {
        println!("xtask: warning: no ratios found in the output of the {package} benchmarks");
    }
    rows
}

fn print_ratio_table(rows: &[RatioRow]) {
    let width = rows.iter().map(|r| r.what.chars().count()).max().unwrap_or(0).max(5);
    println!();
    println!("benchmark ratios (measured side by side in this run)");
    println!("  {:<width$}  {:>10}  {:<9}  {:<6}  detail", "ratio", "measured", "bound", "");
    let mut missed = 0;
    for row in rows {
        let bound =
            row.bound.as_ref().map_or("-".to_string(), |(op, limit)| format!("{op} {limit}"));
        let verdict = match row.met() {
            Some(true) => "ok",
            Some(false) => {
                missed += 1;
                "MISSED"
            }
            None => "",
        };
        println!(
            "  {:<width$}  {:>10.4}  {:<9}  {:<6}  {}",
            row.what, row.value, bound, verdict, row.detail
        );
    }
    let bounded = rows.iter().filter(|r| r.bound.is_some()).count();
    println!("{} of {bounded} bounds met", bounded - missed);
}

/// Makes the machine ready for the demo and the tests; each step skips work already done.
fn setup() -> Result<()> {
    let root = is_root()?;
    install_apt_packages(root)?;
    pip_install(PIP_PACKAGES)?;
    // NVIDIA's ptxas, for the native GPU targets (`nvidia_gpu_sm_XX`): the wheel `sycl-ld`
    // looks for it in.
    if let sycl_build::Package::PyPi { name, .. } = sycl_build::Tool::PTXAS.package {
        pip_install(&[name])?;
    }
    let lib = find_intel_lib()?;
    register_intel_icd(root, &lib)?;
    list_platforms()
}

/// Installs the Debian packages that are missing; `apt-get update` only runs when needed.
fn install_apt_packages(root: bool) -> Result<()> {
    let mut missing = Vec::new();
    for &package in APT_PACKAGES {
        if !dpkg_installed(package)? {
            missing.push(package);
        }
    }
    if missing.is_empty() {
        println!("xtask: apt packages already present: {}", APT_PACKAGES.join(" "));
        return Ok(());
    }
    println!("xtask: installing apt packages: {}", missing.join(" "));
    run_captured(&mut privileged(root, &["apt-get", "update"]))?;
    // `env` sets the variable on the far side of sudo, which would otherwise reset it.
    let install = [
        "env",
        "DEBIAN_FRONTEND=noninteractive",
        "apt-get",
        "install",
        "-y",
        "--no-install-recommends",
    ];
    run_captured(privileged(root, &install).args(&missing))?;
    Ok(())
}

/// Asks dpkg whether a package is installed; a package dpkg has never heard of is not.
fn dpkg_installed(package: &str) -> Result<bool> {
    let output = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .context("running dpkg-query")?;
    Ok(String::from_utf8_lossy(&output.stdout).contains("install ok installed"))
}

/// Installs `packages` with pip unless the first is there: Intel's CPU OpenCL runtime, and
/// NVIDIA's ptxas, which is where their makers ship them for Linux.
fn pip_install(packages: &[&str]) -> Result<()> {
    let shown = Command::new(PYTHON)
        .args(["-m", "pip", "show", packages[0]])
        .output()
        .with_context(|| format!("running {PYTHON} -m pip show {}", packages[0]))?;
    if shown.status.success() {
        println!("xtask: pip package {} already present", packages[0]);
        return Ok(());
    }
    println!("xtask: installing pip packages: {}", packages.join(" "));
    let mut install = Command::new(PYTHON);
    install.args(["-m", "pip", "install"]).args(packages);
    let first = install.output().with_context(|| describe(&install))?;
    if first.status.success() {
        return Ok(());
    }
    // A distribution's own Python refuses pip installs (PEP 668) unless told otherwise.
    if String::from_utf8_lossy(&first.stderr).contains("externally-managed-environment") {
        println!("xtask: retrying pip install with --break-system-packages");
        run_captured(install.arg("--break-system-packages"))?;
        return Ok(());
    }
    Err(failure(&install, &first))
}

/// Finds `libintelocl.so`: pip puts it in `<sys.prefix>/lib`, else pip's file list says where.
fn find_intel_lib() -> Result<PathBuf> {
    let prefix = run_captured(Command::new(PYTHON).args(["-c", "import sys; print(sys.prefix)"]))?;
    let lib = Path::new(String::from_utf8_lossy(&prefix.stdout).trim()).join("lib").join(INTEL_LIB);
    if lib.is_file() {
        return Ok(lib);
    }
    let listing =
        run_captured(Command::new(PYTHON).args(["-m", "pip", "show", "-f", "intel-opencl-rt"]))?;
    let listing = String::from_utf8_lossy(&listing.stdout);
    let location = listing
        .lines()
        .find_map(|line| line.strip_prefix("Location:"))
        .map(|location| Path::new(location.trim()));
    if let Some(location) = location {
        for file in listing.lines().map(str::trim) {
            if file.ends_with(INTEL_LIB) {
                // The listed paths are relative and may climb out with `..`; canonicalize
                // resolves them and confirms the file exists.
                if let Ok(path) = location.join(file).canonicalize() {
                    return Ok(path);
                }
            }
        }
    }
    bail!(
        "{INTEL_LIB} not found: neither {} exists nor does `{PYTHON} -m pip show -f \
         intel-opencl-rt` list it",
        lib.display()
    )
}

/// Registers the Intel runtime with the OpenCL ICD loader, rewriting a stale registration.
fn register_intel_icd(root: bool, lib: &Path) -> Result<()> {
    let content = format!("{}\n", lib.display());
    if fs::read_to_string(INTEL_ICD).is_ok_and(|current| current == content) {
        println!("xtask: {INTEL_ICD} already present");
        return Ok(());
    }
    println!("xtask: writing {INTEL_ICD} -> {}", lib.display());
    if root {
        fs::create_dir_all(ICD_DIR).with_context(|| format!("creating {ICD_DIR}"))?;
        fs::write(INTEL_ICD, content).with_context(|| format!("writing {INTEL_ICD}"))?;
        return Ok(());
    }
    run_captured(&mut privileged(root, &["mkdir", "-p", ICD_DIR]))?;
    let mut tee = privileged(root, &["tee", INTEL_ICD]);
    let mut child = tee
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| describe(&tee))?;
    child
        .stdin
        .take()
        .context("tee has no stdin")?
        .write_all(content.as_bytes())
        .with_context(|| describe(&tee))?;
    let output = child.wait_with_output().with_context(|| describe(&tee))?;
    if !output.status.success() {
        return Err(failure(&tee, &output));
    }
    Ok(())
}

/// Shows the OpenCL platforms so a missing Intel or PoCL platform is visible at a glance.
/// clinfo is a convenience, not a requirement.
fn list_platforms() -> Result<()> {
    if !on_path("clinfo") {
        println!("xtask: clinfo not found, skipping the platform listing");
        return Ok(());
    }
    let output = run_captured(Command::new("clinfo").arg("-l"))?;
    let listing = String::from_utf8_lossy(&output.stdout);
    println!("xtask: OpenCL platforms (clinfo -l):");
    print!("{listing}");
    if !listing.contains("Intel") {
        println!("xtask: warning: no Intel OpenCL platform is visible");
    }
    if !listing.contains("Portable Computing Language") {
        println!("xtask: warning: no PoCL platform is visible");
    }
    Ok(())
}

/// Builds `sycl-ld` first, because the fixture workspace's linker is `target/debug/sycl-ld`,
/// then the fixture `packages` (with what they depend on; none named: the whole fixture
/// workspace) from inside `fixtures/`, so that its `.cargo/config.toml` applies.
fn build_fixtures(packages: &[&str]) -> Result<()> {
    let root = repo_root();
    run_checked(cargo().args(["build", "-p", "sycl-ld"]).current_dir(&root))?;
    let mut build = cargo();
    build.arg("build").current_dir(root.join("fixtures"));
    for package in packages {
        build.args(["-p", package]);
    }
    run_checked(&mut build)
}

/// The repository root: this crate lives in `<root>/xtask`.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in a subdirectory of the repository")
        .to_path_buf()
}

/// The cargo that runs us (`$CARGO`), so nested builds use the same toolchain.
fn cargo() -> Command {
    Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Whether we run as root; otherwise system changes go through sudo.
fn is_root() -> Result<bool> {
    let output = run_captured(Command::new("id").arg("-u"))?;
    Ok(String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// A command that changes the system, prefixed with `sudo` when we are not root.
fn privileged(root: bool, argv: &[&str]) -> Command {
    let mut command = if root {
        Command::new(argv[0])
    } else {
        let mut sudo = Command::new("sudo");
        sudo.arg(argv[0]);
        sudo
    };
    command.args(&argv[1..]);
    command
}

/// Whether an executable of this name is in `$PATH`.
fn on_path(name: &str) -> bool {
    env::var_os("PATH")
        .is_some_and(|path| env::split_paths(&path).any(|dir| dir.join(name).is_file()))
}

/// Runs a command with its output captured, failing with its command line and stderr.
fn run_captured(command: &mut Command) -> Result<Output> {
    let output = command.output().with_context(|| describe(command))?;
    if !output.status.success() {
        return Err(failure(command, &output));
    }
    Ok(output)
}

/// Runs a command with the terminal as its stdio, so its progress and errors show live.
fn run_inherited(command: &mut Command) -> Result<ExitStatus> {
    command.status().with_context(|| describe(command))
}

/// Runs a command with the terminal as its stdio and fails if it does not succeed; its
/// stderr has already been shown, so the error names the command and its status.
fn run_checked(command: &mut Command) -> Result<()> {
    let status = run_inherited(command)?;
    if !status.success() {
        bail!("{} failed: {status}", describe(command));
    }
    Ok(())
}

/// The error for a failed captured command: its command line, status and stderr.
fn failure(command: &Command, output: &Output) -> anyhow::Error {
    anyhow::anyhow!(
        "{} failed: {}\n{}",
        describe(command),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim_end()
    )
}

/// A command line for messages: `` `program arg ...` `` (in `dir` when it has one).
fn describe(command: &Command) -> String {
    let mut line = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    match command.get_current_dir() {
        Some(dir) => format!("`{line}` (in {})", dir.display()),
        None => format!("`{line}`"),
    }
}

/// The exit code to pass on from a child; one killed by a signal counts as a failure.
fn exit_code(status: ExitStatus) -> ExitCode {
    status.code().and_then(|code| u8::try_from(code).ok()).map_or(ExitCode::FAILURE, ExitCode::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_read_from_both_kinds_of_bench_output() {
        let runtime = "\
collect/100             time:   [1.1938 µs 1.2045 µs 1.2195 µs]
RATIO 0.9945 <= 1.02 | first launch: runtime / hand-written cl3 | 132.67 ms vs 133.40 ms
RATIO 1.7051 <= 1.05 | cached launch / raw clEnqueueNDRangeKernel | 10.1 µs vs 5.9 µs
RATIO 58.5655 >= 10 | cold / warm | 140.03 ms vs 2.39 ms
";
        let rows = ratio_rows("sycl-runtime", runtime);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].what, "first launch: runtime / hand-written cl3");
        assert_eq!(rows[0].bound, Some(("<=".to_string(), 1.02)));
        assert_eq!(rows[0].detail, "132.67 ms vs 133.40 ms");
        assert_eq!(
            rows.iter().map(RatioRow::met).collect::<Vec<_>>(),
            [Some(true), Some(false), Some(true)]
        );

        let sycl_ld = "\
sycl-ld pass-through (hello world link, optimized sycl-ld, 100 runs each, interleaved)
  pass-through link / cc link = 1.003 (median; min 1.010), bound <= 1.02: met
RATIO 1.0030 <= 1.02 | sycl-ld pass-through link / cc link (no device code) | medians 24.1 ms vs 24.0 ms; min/min 1.010; 100 runs
RATIO 1.0010 | a wrapper's floor: env -> cc link / cc link | medians 24.0 ms vs 24.0 ms; min/min 1.004; 100 runs
device link + post-link vs spirv-link (20 sources, optimized build)
  functions   ours (link+post-link)   spirv-link       ours/spirv-link
       2000        0.051 s (5 runs)      0.412 s (3 runs)   0.1238
       8000        0.203 s (5 runs)      6.600 s (1 run)   0.0308
  growth 2000 -> 8000 functions (x4): ours x4.0, spirv-link x16.0
per_kernel split of 1000 kernels: 0.321 s (limit 1 s; load 0.1 s)
";
        let rows = ratio_rows("sycl-ld", sycl_ld);
        let values: Vec<(f64, Option<bool>)> = rows.iter().map(|r| (r.value, r.met())).collect();
        assert_eq!(
            values,
            [
                (1.003, Some(true)),
                (1.001, None),
                (0.1238, None),
                (0.0308, None),
                (0.321, Some(true))
            ]
        );
        assert_eq!(rows[0].what, "sycl-ld pass-through link / cc link (no device code)");
        assert_eq!(rows[1].bound, None);
        assert_eq!(rows[3].what, "device link + post-link / spirv-link, 8000 functions");
    }
}
