//! Shared helpers for the end-to-end tests: building the fixture workspace with the real
//! toolchain and `sycl-ld`, running fixture binaries, and comparing output with expected files
//! (`SYCL_TEST_BLESS=1` rewrites them).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

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
    Command::new(built_sycl_ld())
        .arg("device-lib")
        .args(options)
        .arg("-o")
        .arg(out)
        .args(sources)
        .output()
        .unwrap_or_else(|e| panic!("running sycl-ld device-lib: {e}"))
}

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
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
    let path = fixtures().join(name);
    Command::new(&path)
        .args(args)
        .env("SYCL_TRACE", "1")
        .env("SYCL_CACHE_DISABLE", "1")
        .env("SYCL_DEVICE", "intel")
        .env_remove("SYCL_STRICT_EXPORTS")
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", path.display()))
}

/// A finished process's standard output as text (invalid UTF-8 replaced).
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A finished process's standard error as text (invalid UTF-8 replaced).
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Compares `actual` with `tests/expected/NAME`, or rewrites the file under `SYCL_TEST_BLESS=1`.
pub fn assert_expected(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("expected").join(name);
    if std::env::var_os("SYCL_TEST_BLESS").is_some() {
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

/// No persistent cache in this test process: every program is built here and now (set once,
/// before the first queue).
pub fn no_cache() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var("SYCL_CACHE_DISABLE", "1"));
}
