//! Shared helpers for the end-to-end tests: building the fixture workspace with the real
//! toolchain and `sycl-ld`, running fixture binaries under a time limit, and comparing output
//! with expected files (`SYCL_TEST_BLESS=1` rewrites them, never in CI).
//!
//! Every test process that links this crate gets, before `main` (so before any runtime call
//! can read the environment), a persistent cache of its own in a fresh temporary directory
//! (`SYCL_CACHE_DIR`, removed at exit: nothing the tests run writes into the home directory)
//! and a watchdog that aborts the process, failing the run, when it outlives
//! [`PROCESS_TIME_LIMIT`]: a hang fails instead of blocking CI (libtest has by then named the
//! tests running for over 60 s).
//!
//! For the tests that run fixtures on both CPU devices, one table of them ([`DEVICES`]) and
//! one reading of the runtime's trace ([`Run`], [`device_name`], [`events`],
//! [`Device::build_events`]): what a device is expected to do is said once, here.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one test process may run before the watchdog aborts it;
/// `SYCL_TEST_PROCESS_LIMIT=SECONDS` changes it.
pub const PROCESS_TIME_LIMIT: Duration = Duration::from_secs(900);

/// How long a program a test spawns may run before it is killed and the test fails with its
/// output; `SYCL_TEST_SPAWN_LIMIT=SECONDS` changes it.
pub const SPAWN_TIME_LIMIT: Duration = Duration::from_secs(300);

/// The process's own cache directory (see the crate's doc), made by [`init`].
static CACHE_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Runs before `main`, while the process has one thread: no other code can read or write the
/// environment meanwhile.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    let dir = tempfile::Builder::new()
        .prefix("sycl-test-cache-")
        .tempdir()
        .expect("creating the test process's cache directory")
        .keep();
    std::env::set_var("SYCL_CACHE_DIR", &dir);
    std::env::remove_var("SYCL_CACHE_DISABLE");
    let _ = CACHE_DIR.set(dir);
    // SAFETY: `remove_cache_dir` is an `extern "C" fn()` that touches only a `OnceLock` and the
    // file system, which is sound at exit.
    unsafe { libc::atexit(remove_cache_dir) };
    let limit = limit_from_env("SYCL_TEST_PROCESS_LIMIT", PROCESS_TIME_LIMIT);
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!(
            "sycl-tests: this test process ran for more than {} s: a test hangs (those running \
             over 60 s are named above); aborting it",
            limit.as_secs()
        );
        std::process::abort();
    });
}

extern "C" fn remove_cache_dir() {
    if let Some(dir) = CACHE_DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// This test process's own persistent cache directory (`SYCL_CACHE_DIR`, set before `main`).
pub fn cache_dir() -> &'static Path {
    CACHE_DIR.get().expect("the test process's cache directory is made before main")
}

fn limit_from_env(var: &str, default: Duration) -> Duration {
    match std::env::var(var) {
        Ok(v) => Duration::from_secs(
            v.trim().parse().unwrap_or_else(|_| panic!("{var}={v:?} is not a number of seconds")),
        ),
        Err(_) => default,
    }
}

/// Runs `command` to its end with its output captured, as [`Command::output`] does, but killed
/// (with every process it started) past [`SPAWN_TIME_LIMIT`], which fails the test with what
/// it wrote so far.
pub fn output(command: &mut Command) -> Output {
    output_within(command, limit_from_env("SYCL_TEST_SPAWN_LIMIT", SPAWN_TIME_LIMIT))
}

/// [`output`] with a time limit of its own.
pub fn output_within(command: &mut Command, limit: Duration) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A group of its own, so that what it spawns is killed with it.
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = reader(Box::new(child.stdout.take().unwrap()));
    let stderr = reader(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("{command:?}: {e}")) {
            break Some(status);
        }
        if start.elapsed() > limit {
            // SAFETY: `kill` takes no pointers; the group is the child's own (see above).
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    match status {
        Some(status) => Output { status, stdout, stderr },
        None => panic!(
            "{command:?} ran for more than {} s and was killed (a hang?)\nstdout:\n{}\nstderr:\n{}",
            limit.as_secs(),
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        ),
    }
}

/// The workspace root: the directory above this crate's.
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Where `cargo build` puts the workspace's `sycl-ld` (`target/debug/sycl-ld`), built or not;
/// [`built_sycl_ld`] builds it first.
pub fn sycl_ld() -> PathBuf {
    repo_root().join("target/debug/sycl-ld")
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// [`sycl_ld`], after building it once per test process (a no-op when up to date).
pub fn built_sycl_ld() -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        run_ok(cargo().args(["build", "-q", "-p", "sycl-ld"]).current_dir(repo_root()))
    });
    sycl_ld()
}

/// The fixture build output directory, after building `sycl-ld` and the fixtures once per
/// test process (both are no-ops when up to date).
pub fn fixtures() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        built_sycl_ld();
        run_ok(cargo().args(["build", "-q"]).current_dir(repo_root().join("fixtures")));
        repo_root().join("fixtures/target/debug")
    })
}

/// `sycl-ld device-lib OPTIONS... -o OUT SOURCES...` with the built `sycl-ld`: a device
/// library file from sources (compiler options such as `-D`, `-I`, `-cl-std=` in `options`).
pub fn device_lib(options: &[&str], out: &Path, sources: &[&Path]) -> Output {
    // PoCL calls `setenv` while it loads; a process spawned meanwhile from another test's
    // thread can read a moving environment (`execve` failed with EFAULT, "Bad address"). The
    // drivers are loaded once, under the runtime's lock: wait for that first.
    let _ = sycl_runtime::devices();
    output(
        Command::new(built_sycl_ld())
            .arg("device-lib")
            .args(options)
            .arg("-o")
            .arg(out)
            .args(sources),
    )
}

fn run_ok(cmd: &mut Command) {
    let out = output(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a fixture binary with `SYCL_TRACE=1` and no persistent cache (so that traces show
/// every compile), on Intel's CPU runtime (`SYCL_DEVICE=intel`) unless `env` says otherwise.
pub fn run_fixture(name: &str) -> Output {
    run_fixture_with(name, &[])
}

/// [`run_fixture`] with extra environment variables.
pub fn run_fixture_with(name: &str, env: &[(&str, &str)]) -> Output {
    run_fixture_args(name, &[], env)
}

/// [`run_fixture_with`] with arguments for the fixture.
pub fn run_fixture_args(name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    output(
        Command::new(fixtures().join(name))
            .args(args)
            .env("SYCL_TRACE", "1")
            .env("SYCL_CACHE_DISABLE", "1")
            .env("SYCL_DEVICE", "intel")
            .env_remove("SYCL_STRICT_EXPORTS")
            .envs(env.iter().copied()),
    )
}

/// A finished process's standard output as text (invalid UTF-8 replaced).
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A finished process's standard error as text (invalid UTF-8 replaced).
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Compares `actual` with `tests/expected/NAME`, or rewrites the file under `SYCL_TEST_BLESS=1`
/// (refused where `CI` is set: a CI run compares, it never accepts what it got).
pub fn assert_expected(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("expected").join(name);
    if std::env::var_os("SYCL_TEST_BLESS").is_some() {
        assert!(
            std::env::var_os("CI").is_none(),
            "SYCL_TEST_BLESS is set in CI (CI is set): expected files are never rewritten there"
        );
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e} (run with SYCL_TEST_BLESS=1 to create it)", path.display())
    });
    assert_eq!(
        actual,
        expected,
        "output differs from {} (SYCL_TEST_BLESS=1 rewrites it)",
        path.display()
    );
}

/// A finished process's standard output and error as text, after asserting that it succeeded
/// (the assertion message shows both).
pub fn ok(out: &Output) -> (String, String) {
    let (o, e) = (stdout(out), stderr(out));
    assert!(out.status.success(), "failed:\n{o}{e}");
    (o, e)
}

/// A CPU OpenCL device of this machine that the tests run fixtures on, and what they expect
/// of it: how its trace names it and builds a program, and its `fp16`.
#[derive(Clone, Copy, Debug)]
pub struct Device {
    /// Its `SYCL_DEVICE` selector.
    pub selector: &'static str,
    /// Its platform, as the trace's `sycl: device PLATFORM / NAME` line names it.
    pub platform: &'static str,
    /// Whether its driver links: Intel's CPU runtime compiles each image once (a `compile`
    /// line each) and links the objects with `clLinkProgram`; PoCL 3.1 links no SPIR-V, so
    /// the runtime links the images itself and gives PoCL one program (no `compile` line,
    /// and the `link` line says so).
    pub driver_links: bool,
    /// Whether it has `fp16` (Intel's CPU runtime does, PoCL does not).
    pub fp16: bool,
    /// Whether it has device allocations (`usm_device_allocations`: Intel's CPU runtime
    /// through `cl_intel_unified_shared_memory`, PoCL 3.1 through SVM).
    pub usm: bool,
}

impl Device {
    /// Intel's CPU runtime.
    pub const INTEL: Device = Device {
        selector: "intel",
        platform: "Intel(R) OpenCL",
        driver_links: true,
        fp16: true,
        usm: true,
    };

    /// PoCL 3.1.
    pub const POCL: Device = Device {
        selector: "pocl",
        platform: "Portable Computing Language",
        driver_links: false,
        fp16: false,
        usm: true,
    };

    /// The trace's build events (without `sycl: `) for `kernel`'s program on this device,
    /// which the trace calls `name`, linked from `images` (`A image 0 + B image 1`), where
    /// `new` are the images not compiled before on this device: where the driver links
    /// (Intel), a `compile` line for each of `new`, then the driver's link; else (PoCL) the
    /// runtime's link alone, translated to SPIR.
    pub fn build_events(self, name: &str, kernel: &str, new: &[&str], images: &str) -> Vec<String> {
        if self.driver_links {
            let compiles = new.iter().map(|image| format!("compile {image} on {name}"));
            compiles.chain([format!("link {kernel} on {name}: {images}")]).collect()
        } else {
            vec![format!(
                "link {kernel} on {name} (linked by the runtime, translated to SPIR): {images}"
            )]
        }
    }
}

/// Both CPU devices, Intel's CPU runtime first.
pub const DEVICES: [Device; 2] = [Device::INTEL, Device::POCL];

/// The name a trace of a run on `device` gives the device (whatever this machine's CPU is
/// called), from its `sycl: device PLATFORM / NAME` line; fails the test unless the trace
/// opens exactly one device, of `device`'s platform.
pub fn device_name(trace: &str, device: Device) -> &str {
    let opened: Vec<&str> = trace.lines().filter_map(|l| l.strip_prefix("sycl: device ")).collect();
    let name = match opened[..] {
        [one] => one.strip_prefix(device.platform).and_then(|n| n.strip_prefix(" / ")),
        _ => None,
    };
    name.unwrap_or_else(|| {
        panic!("on {}: one device of {} expected:\n{trace}", device.selector, device.platform)
    })
}

/// The trace lines of one event, in order, without `sycl: EVENT `.
pub fn events<'t>(trace: &'t str, event: &str) -> Vec<&'t str> {
    let prefix = format!("sycl: {event} ");
    trace.lines().filter_map(|l| l.strip_prefix(prefix.as_str())).collect()
}

/// The fixture build directory as the fixtures see it (their own path, links resolved), as
/// the trace and the runtime's errors give paths.
pub fn fixtures_dir() -> PathBuf {
    std::fs::canonicalize(fixtures()).unwrap()
}

/// The `discover` lines (without `sycl: discover `) of `binaries`, each a path below the
/// fixture build directory with its image count (`app: 2 images`).
pub fn discovered(binaries: &[&str]) -> Vec<String> {
    let dir = fixtures_dir();
    binaries.iter().map(|b| format!("{}/{b}", dir.display())).collect()
}

/// What a launch of `kernel`, which imports `symbol`, says when only `searched` were searched
/// (paths below the fixture build directory, listed `, `-separated).
pub fn unresolved(symbol: &str, kernel: &str, searched: &[&str]) -> String {
    format!(
        "error: unresolved device symbol `{symbol}` imported for kernel `{kernel}`; searched: {}",
        discovered(searched).join(", ")
    )
}

/// A fixture's successful run on one device ([`run_fixture_args`]: `SYCL_TRACE=1`, no
/// persistent cache): what it printed, its trace, and the name the trace gives the device.
pub struct Run {
    /// The device it ran on.
    pub device: Device,
    /// Its standard output.
    pub out: String,
    /// Its standard error: the trace.
    pub trace: String,
    /// The device's name, as the trace gives it (whatever this machine's CPU is called).
    pub name: String,
}

impl Run {
    /// `program ARGS` on `device` with `env` added: it must succeed, on `device` alone.
    pub fn new(device: Device, program: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut all = vec![("SYCL_DEVICE", device.selector)];
        all.extend_from_slice(env);
        let out = run_fixture_args(program, args, &all);
        let (o, trace) = (stdout(&out), stderr(&out));
        assert!(out.status.success(), "{program} failed on {}:\n{o}{trace}", device.selector);
        let name = device_name(&trace, device).to_string();
        Run { device, out: o, trace, name }
    }

    /// The trace's build events in order (its `compile`, `link`, `cache-hit` and `persist-`
    /// lines, without `sycl: `).
    pub fn builds(&self) -> Vec<&str> {
        let events = ["compile ", "link ", "cache-hit ", "persist-"];
        let build = |l: &&str| events.iter().any(|e| l.starts_with(e));
        self.trace.lines().filter_map(|l| l.strip_prefix("sycl: ")).filter(build).collect()
    }

    /// [`Device::build_events`] of this run's device, by the name its trace gives it.
    pub fn build(&self, kernel: &str, new: &[&str], images: &str) -> Vec<String> {
        self.device.build_events(&self.name, kernel, new, images)
    }

    /// [`Run::build`] where none of `images` was compiled before on this device (a kernel's
    /// first launch in a process that built nothing of them).
    pub fn first_build(&self, kernel: &str, images: &str) -> Vec<String> {
        let new: Vec<&str> = images.split(" + ").collect();
        self.build(kernel, &new, images)
    }

    /// The trace lines of one event, without `sycl: EVENT ` ([`events`]).
    pub fn events(&self, event: &str) -> Vec<&str> {
        events(&self.trace, event)
    }

    /// For assertion messages: the device, then the output and the trace.
    pub fn say(&self) -> String {
        format!("on {}:\n{}{}", self.device.selector, self.out, self.trace)
    }
}

/// Whether the CUDA driver is here, and with it a GPU, asked of the driver itself rather than
/// of the runtime under test (so that a test's skip is decided independently of the outcome
/// it checks): `None` when `libcuda.so.1` does not load; else whether `cuInit` succeeds and
/// `cuDeviceGetCount` counts a device.
pub fn cuda_gpu() -> Option<bool> {
    // SAFETY: a NUL-terminated name; the library stays loaded for the process.
    let lib = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if lib.is_null() {
        return None;
    }
    // SAFETY: a handle `dlopen` gave, and NUL-terminated names.
    let (init, count) = unsafe {
        (libc::dlsym(lib, c"cuInit".as_ptr()), libc::dlsym(lib, c"cuDeviceGetCount".as_ptr()))
    };
    if init.is_null() || count.is_null() {
        return Some(false);
    }
    // SAFETY: the CUDA driver API's signatures, `CUresult cuInit(unsigned int)` and `CUresult
    // cuDeviceGetCount(int *)` (`CUresult` an `int`, 0 for success), with a pointer to a local.
    unsafe {
        let init: unsafe extern "C" fn(u32) -> i32 = std::mem::transmute(init);
        let count: unsafe extern "C" fn(*mut i32) -> i32 = std::mem::transmute(count);
        let mut devices = 0;
        Some(init(0) == 0 && count(&mut devices) == 0 && devices > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_spawned_program_that_outlives_its_limit_is_killed_and_fails_with_its_output() {
        let start = Instant::now();
        let result = std::panic::catch_unwind(|| {
            output_within(
                Command::new("sh").args(["-c", "echo started; sleep 30 & sleep 30"]),
                Duration::from_secs(1),
            )
        });
        let message = *result.expect_err("a hang must fail").downcast::<String>().unwrap();
        assert!(message.contains("ran for more than 1 s and was killed (a hang?)"), "{message}");
        assert!(message.contains("stdout:\nstarted\n"), "{message}");
        // The background `sleep`, which holds the pipes too, died with its group.
        assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    }

    #[test]
    fn a_program_within_its_limit_is_run_as_output_runs_it() {
        let out = output(Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]));
        assert_eq!(
            (out.status.code(), &out.stdout[..], &out.stderr[..]),
            (Some(3), &b"out\n"[..], &b"err\n"[..])
        );
    }

    #[test]
    fn each_test_process_has_a_cache_of_its_own_outside_the_home_directory() {
        let dir = cache_dir();
        assert_eq!(std::env::var_os("SYCL_CACHE_DIR").as_deref(), Some(dir.as_os_str()));
        assert!(dir.is_dir() && dir.starts_with(std::env::temp_dir()), "{}", dir.display());
        // Another process of this binary gets another directory.
        let out = output(Command::new(std::env::current_exe().unwrap()).args([
            "--exact",
            "tests::print_the_cache_dir",
            "--ignored",
            "--nocapture",
        ]));
        let printed = String::from_utf8_lossy(&out.stdout);
        let theirs = printed.lines().find_map(|l| l.strip_prefix("cache dir: ")).unwrap();
        assert_ne!(Path::new(theirs), dir);
        assert!(!Path::new(theirs).exists(), "removed when that process ended: {theirs}");
    }

    /// Run by the test above in a process of its own.
    #[test]
    #[ignore = "a helper of each_test_process_has_a_cache_of_its_own_outside_the_home_directory"]
    fn print_the_cache_dir() {
        println!("cache dir: {}", cache_dir().display());
    }

    #[test]
    fn a_device_name_is_read_only_from_a_trace_that_opens_that_one_device() {
        let trace =
            "sycl: discover /f/app: 1 image\nsycl: device Portable Computing Language / cpu\n";
        assert_eq!(device_name(trace, Device::POCL), "cpu");
        let twice = format!("{trace}sycl: device Portable Computing Language / cpu\n");
        for (wrong, device) in [(trace, Device::INTEL), (&twice, Device::POCL), ("", Device::POCL)]
        {
            let read = std::panic::catch_unwind(|| device_name(wrong, device).to_string());
            assert!(read.is_err(), "{device:?} read from {wrong:?}: {read:?}");
        }
    }

    #[test]
    fn a_test_process_that_hangs_is_aborted_by_its_watchdog() {
        let out = output(
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "tests::hang", "--ignored"])
                .env("SYCL_TEST_PROCESS_LIMIT", "1"),
        );
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("this test process ran for more than 1 s: a test hangs"), "{err}");
    }

    /// Run by the test above in a process of its own.
    #[test]
    #[ignore = "a helper of a_test_process_that_hangs_is_aborted_by_its_watchdog"]
    fn hang() {
        std::thread::sleep(Duration::from_secs(60));
    }
}
