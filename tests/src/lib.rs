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
