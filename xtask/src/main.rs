//! Developer tasks for this workspace, run as `cargo xtask <COMMAND>` (`cargo xtask help`).
//!
//! * `setup` makes the machine ready: the Debian packages (clang, llvm-spirv, SPIR-V tools,
//!   the OpenCL ICD loader and PoCL), Intel's CPU OpenCL runtime from PyPI and its ICD
//!   registration, NVIDIA's `ptxas` from PyPI (for the native GPU targets). It is idempotent and is run first by the tasks that build device code.
//! * `demo` builds `sycl-ld`, then the fixture app (and `libhelpers.so`, which it links
//!   against) with it, then runs the app: only what the demo runs is built.
//! * `test` builds `sycl-ld` and the whole fixture workspace, then runs `cargo test
//!   --workspace` with any extra arguments, the tidy checks of `tidy.rs` among the tests, with a
//!   temporary persistent cache (`SYCL_CACHE_DIR`) for the run. Without arguments (the CI run,
//!   `.ci/run`), the style checks come first (`cargo fmt --check`, clippy with every feature
//!   and `-D warnings`, see `style.rs`); after the tests, the API docs (`cargo doc` of the
//!   workspace with every feature, broken intra-doc links denied), every benchmark once
//!   (`cargo xtask bench --smoke`), `cargo test -p sycl-runtime --all-features`, a short smoke
//!   run of every fuzz target, `package`, and the GPU suite where an NVIDIA GPU is (said plainly
//!   where not). Any failed step fails the run, after the others have run, and so does a
//!   `Cargo.lock` that the run changed (see `locks.rs`).
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
//! * `bench [--informational] [--smoke] [ARGS]` runs every benchmark, tabulates their ratios
//!   and fails when a bound is missed or an expected one is not printed (see `bench.rs`).

use anyhow::{bail, Context, Result};

mod bench;
mod fuzz;
mod gpu;
mod gpu_suite;
mod locks;
mod pack;
mod package;
mod style;
#[cfg(test)]
mod tidy;
mod weight;
use std::env;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

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
    // Device code written in Rust (on `sycl-device`), all four from bookworm-security:
    // rustc-web 1.96 and its matching library sources build `core` for nvptx64-nvidia-cuda
    // with `-Zbuild-std`; cargo-web drives that build.
    "rustc-web",
    "cargo-web",
    "rust-web-src",
    // llc-22 reads rustc 1.96's LLVM 22 IR and writes SPIR-V (`spirv64-unknown-unknown`).
    "llvm-22",
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
                 (without ARGS, the CI run: first the style checks, then the tests, the API
                 docs with broken links denied, every benchmark once, the runtime's tests with
                 all features, a 5-second smoke run of every fuzz target, `package`, and the
                 GPU suite where a GPU is; a Cargo.lock the run changed fails it); every test
                 process has a persistent cache of its own, never the home directory's
  style          `cargo fmt --all --check` for this workspace, fixtures/ and fuzz/, then
                 `cargo clippy --workspace --all-targets --all-features --keep-going -- -D
                 warnings`
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
  bench [--informational] [--smoke] [ARGS]
                 setup, build sycl-ld, run the sycl-runtime and sycl-ld benchmarks
                 (`cargo bench -p PACKAGE --bench '*' ARGS`), gpu-bench --across on both CPU
                 devices and, with an NVIDIA GPU and nvcc here, the GPU benchmark; print a
                 table of their ratios; fail when a bound is missed, an expected ratio is not
                 printed or a RATIO line does not read (--informational: report, exit 0;
                 --smoke: the runtime's and sycl-ld's benchmarks once each, `cargo test`,
                 checking their RATIO lines are printed but not their bounds)
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
        ("bench", args) => bench::bench(args),
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
/// The CI run (no arguments) checks the style first and runs the rest of the checks after the
/// tests (see [`run_tests`]); a style failure is reported again, and fails the run, once the
/// tests have run, as does a lock file the run changed (see `locks.rs`).
fn test(args: &[OsString]) -> Result<ExitCode> {
    if args.is_empty() && env::var_os("SYCL_TEST_BLESS").is_some() {
        bail!(
            "SYCL_TEST_BLESS is set: the CI run compares with the expected files, it never \
             rewrites them (bless with `cargo xtask test -p sycl-tests` and read the diff)"
        );
    }
    // Nothing the tests run writes into the home directory: every process they start gets this
    // run's own persistent cache (the end-to-end tests' processes make one each, see
    // tests/src/lib.rs), removed when the run ends. Set while this process has one thread.
    let cache = tempfile::Builder::new().prefix("sycl-xtask-test-cache-").tempdir()?;
    env::set_var("SYCL_CACHE_DIR", cache.path());
    env::remove_var("SYCL_CACHE_DISABLE");
    // Read before the first cargo command, which would rewrite a stale one.
    let locks = if args.is_empty() { Some(locks::Snapshot::take(&repo_root())?) } else { None };
    let style = if args.is_empty() { style::check()? } else { Vec::new() };
    let tests = run_tests(args);
    let style_clean = style::report(&style);
    let locks_kept = match &locks {
        Some(before) => locks::report(&repo_root(), before)?,
        None => true,
    };
    match tests? {
        status if status.success() && !(style_clean && locks_kept) => Ok(ExitCode::FAILURE),
        status => Ok(exit_code(status)),
    }
}

/// Everything `test` does after the style checks: `cargo test --workspace ARGS`; in the CI
/// run (no arguments) then the API docs ([`DOC`], links checked), every benchmark once (their
/// smoke mode, `bench::smoke`), the runtime's tests with every feature (its interop modules), a
/// short smoke run of every fuzz target, the packaged crates (see package.rs) and, where a CUDA
/// GPU is, the GPU suite. Every step runs even after one failed; the first failure is the
/// run's status.
fn run_tests(args: &[OsString]) -> Result<ExitStatus> {
    setup()?;
    build_fixtures(&[])?;
    let root = repo_root();
    let status = run_within(
        cargo().args(["test", "--workspace"]).args(args).current_dir(&root),
        STEP_LIMIT,
    )?;
    if !args.is_empty() {
        return Ok(status);
    }
    let mut failed = Vec::new();
    if !status.success() {
        failed.push("cargo test --workspace".to_string());
    }
    // The API docs as users read them: every feature (the interop conversions' docs render
    // only with theirs), every link resolved.
    let docs = run_within(
        cargo().args(DOC).env("RUSTDOCFLAGS", DOC_FLAGS).current_dir(&root),
        STEP_LIMIT,
    )?;
    if !docs.success() {
        failed.push(format!(
            "RUSTDOCFLAGS=\"{DOC_FLAGS}\" cargo {} (fix each link it names: a path in scope, \
             or `crate::`; the item's kind when a name is two, `f()` or `m!`)",
            DOC.join(" ")
        ));
    }
    // Every benchmark once (their smoke mode), every ratio they must print checked for.
    if !bench::smoke()? {
        failed.push("the benchmarks' smoke run (`cargo xtask bench --smoke`)".to_string());
    }
    let all_features = ["test", "-p", "sycl-runtime", "--all-features"];
    if !run_within(cargo().args(all_features).current_dir(&root), STEP_LIMIT)?.success() {
        failed.push(format!("cargo {}", all_features.join(" ")));
    }
    // A short smoke run of every fuzz target (the long runs are `cargo xtask fuzz`).
    if let Err(e) = fuzz::fuzz(FUZZ_SMOKE_SECONDS) {
        eprintln!("xtask: error: {e:#}");
        failed.push("the fuzz smoke run".to_string());
    }
    // The crates as a user outside gets them (see package.rs).
    if let Err(e) = package::package() {
        eprintln!("xtask: error: {e:#}");
        failed.push("cargo xtask package".to_string());
    }
    if let Err(e) = gpu_suite_here() {
        eprintln!("xtask: error: {e:#}");
        failed.push("the GPU suite".to_string());
    }
    if failed.is_empty() {
        return Ok(status);
    }
    eprintln!("xtask: test: failed: {}", failed.join("; "));
    Ok(if status.success() { failure_status() } else { status })
}

/// `cargo doc` of the workspace's crates as CI builds them: every feature, no dependencies.
const DOC: &[&str] = &["doc", "--workspace", "--no-deps", "--all-features"];

/// What CI's `cargo doc` denies: a link that resolves to nothing, or to an item the docs do
/// not show.
const DOC_FLAGS: &str = "-D rustdoc::broken_intra_doc_links -D rustdoc::private_intra_doc_links";

/// How long one test command may run (its build included) before it is killed and fails the
/// run: a hang the test processes' own watchdogs do not see (a unit test, a doctest) fails
/// instead of blocking CI.
const STEP_LIMIT: Duration = Duration::from_secs(40 * 60);

/// Runs a command with the terminal as its stdio, as [`run_inherited`] does, but kills it and
/// every process under it past `limit`, which then counts as a failure.
fn run_within(command: &mut Command, limit: Duration) -> Result<ExitStatus> {
    let mut child = command.spawn().with_context(|| describe(command))?;
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().with_context(|| describe(command))? {
            return Ok(status);
        }
        if start.elapsed() > limit {
            eprintln!(
                "xtask: error: {} ran for more than {} minutes: killed (a hang? the tests \
                 running for over 60 s are named above)",
                describe(command),
                limit.as_secs() / 60
            );
            kill_tree(child.id());
            child.wait().with_context(|| describe(command))?;
            return Ok(failure_status());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Kills a process and everything it started (found through `/proc`), the process first, so
/// that it starts nothing more.
fn kill_tree(pid: u32) {
    let mut children: std::collections::HashMap<u32, Vec<u32>> = Default::default();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(id) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // `/proc/ID/stat` is `ID (COMMAND) STATE PPID ...`; the command may hold spaces.
        let stat = fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if let Some(parent) = parent.and_then(|p| p.parse().ok()) {
            children.entry(parent).or_default().push(id);
        }
    }
    let mut order = vec![pid];
    let mut next = 0;
    while let Some(&id) = order.get(next) {
        order.extend(children.get(&id).into_iter().flatten());
        next += 1;
    }
    for id in &order {
        let _ = Command::new("kill").args(["-KILL", &id.to_string()]).status();
    }
}

/// A failed exit status, for a run whose tests passed but a later step did not.
fn failure_status() -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    ExitStatus::from_raw(1 << 8)
}

/// Whether an NVIDIA GPU answers here (`nvidia-smi -L` lists one).
fn gpu_here() -> bool {
    Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
}

/// Where a CUDA GPU is, the GPU suite: the fixtures packed as `gpu-suite` packs them, run by
/// `scripts/gpu/suite.sh` on the GPU (through the CUDA backend), failing when a case fails.
/// Elsewhere it says plainly that it was skipped, and how to run it on a GPU machine.
fn gpu_suite_here() -> Result<()> {
    if !gpu_here() {
        println!(
            "xtask: GPU suite SKIPPED: no NVIDIA GPU on this machine (nvidia-smi lists none); the \
             PTX and native forms were checked. On a GPU machine: `cargo xtask gpu-suite DIR` \
             here, then `scripts/gpu/suite.sh DIR/suite.tar.xz` there"
        );
        return Ok(());
    }
    let root = repo_root();
    let dir = root.join("target/gpu-suite");
    gpu_suite::gpu_suite(&dir)?;
    println!("xtask: running the GPU suite on this machine's GPU (scripts/gpu/suite.sh)");
    run_checked(
        Command::new("bash")
            .arg(root.join("scripts/gpu/suite.sh"))
            .arg(dir.join("suite.tar.xz"))
            .env("OUT", dir.join("suite-out")),
    )
}

/// Seconds each fuzz target runs in `cargo xtask test`.
const FUZZ_SMOKE_SECONDS: u64 = 5;

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
