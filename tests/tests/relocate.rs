//! Programs run where they are copied: `cargo xtask pack` takes fixtures out of the build tree
//! with their device libraries (and one library opened with `dlopen`, one to `LD_PRELOAD`),
//! as a tar archive unpacked elsewhere; there they run on both CPU devices with no
//! `LD_LIBRARY_PATH`, and the dynamic loader's own log shows that nothing they load comes from
//! the build tree. (The build tree's copies stay where they are, for the tests running beside
//! this one: the loader's log is what proves they are not used.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sycl_tests::{fixtures, output, repo_root, stderr, stdout};

/// `cargo xtask pack PROGRAMS --lib LIBRARIES --out DIR --tar ARCHIVE`, from the workspace.
fn pack(programs: &[&str], libraries: &[&str], out: &Path, archive: &Path) {
    let built = fixtures();
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["run", "-q", "-p", "xtask", "--", "pack"]).current_dir(repo_root());
    cmd.args(programs.iter().map(|p| built.join(p)));
    for library in libraries {
        cmd.arg("--lib").arg(built.join("deps").join(library));
    }
    cmd.arg("--out").arg(out).arg("--tar").arg(archive);
    let done = output(&mut cmd);
    assert!(done.status.success(), "{cmd:?}:\n{}{}", stdout(&done), stderr(&done));
    let said = stdout(&done);
    assert!(said.contains("from the target machine: ld-linux-x86-64.so.2, libc.so.6"), "{said}");
}

/// Runs a packed program from `cwd` (not its own directory) on `device`, with a clean
/// environment as far as libraries go, and the loader's log in `log.PID` files.
fn run(dir: &Path, program: &str, device: &str, env: &[(&str, &str)], log: &Path) -> Output {
    output(
        Command::new(dir.join(program))
            .current_dir(dir.parent().unwrap())
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("LD_PRELOAD")
            .env_remove("SYCL_STRICT_EXPORTS")
            .env("SYCL_DEVICE", device)
            .env("SYCL_TRACE", "1")
            .env("SYCL_CACHE_DISABLE", "1")
            .env("LD_DEBUG", "libs")
            .env("LD_DEBUG_OUTPUT", log)
            .envs(env.iter().copied()),
    )
}

/// The objects the loader's logs (`LOG.PID` files) say it opened or initialised.
fn loaded(log_dir: &Path, prefix: &str) -> Vec<String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(log_dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.file_name().unwrap().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines() {
            for marker in ["calling init: ", "trying file="] {
                if let Some((_, file)) = line.split_once(marker) {
                    files.push(file.trim().to_string());
                }
            }
        }
    }
    files
}

#[test]
fn packed_programs_run_outside_the_build_tree_on_both_cpu_devices() {
    let temp = tempfile::tempdir().unwrap();
    let (staged, archive) = (temp.path().join("stage/demo"), temp.path().join("demo.tar"));
    pack(
        &["app", "chain-app", "dlopen-app"],
        &["libplugin.so", "libfast_helpers.so"],
        &staged,
        &archive,
    );
    std::fs::remove_dir_all(temp.path().join("stage")).unwrap();
    let unpacked = temp.path().join("elsewhere");
    std::fs::create_dir_all(&unpacked).unwrap();
    let untar = output(Command::new("tar").arg("-xf").arg(&archive).arg("-C").arg(&unpacked));
    assert!(untar.status.success(), "tar: {}", stderr(&untar));
    let dir: PathBuf = unpacked.join("demo");
    let logs = temp.path().join("ld");
    std::fs::create_dir_all(&logs).unwrap();
    let build_tree = fixtures().parent().unwrap().to_path_buf();

    let preload = dir.join("deps/libfast_helpers.so");
    let preload = [("LD_PRELOAD", preload.to_str().unwrap())];
    // The program, whether libfast_helpers.so is preloaded, the output (dlopen-app's is below).
    let cases = [
        ("app", false, "0 2 4 6 8 10 12 14\n"),
        ("chain-app", false, "1 4 7 10 13 16 19 22\n"),
        ("app", true, "0 3 6 9 12 15 18 21\n"),
        ("dlopen-app", false, ""),
    ];
    for device in ["intel", "pocl"] {
        for (i, (program, preloaded, expected)) in cases.iter().enumerate() {
            let env: &[(&str, &str)] = if *preloaded { &preload } else { &[] };
            let prefix = format!("{device}-{i}");
            let out = run(&dir, program, device, env, &logs.join(&prefix));
            let (text, trace) = (stdout(&out), stderr(&out));
            assert!(out.status.success(), "{program} on {device}:\n{text}{trace}");
            if *program == "dlopen-app" {
                let lines: Vec<&str> = text.lines().collect();
                assert_eq!(lines[1], "open: [1000, 1001, 1002, 1003]", "{device}:\n{text}");
                let searched = format!("searched: {}", dir.join("dlopen-app").display());
                assert!(lines[0].ends_with(&searched) && lines[2].ends_with(&searched), "{text}");
            } else {
                assert_eq!(&text, expected, "{program} on {device}:\n{trace}");
            }
            let files = loaded(&logs, &prefix);
            let ours = dir.join("deps").to_string_lossy().into_owned();
            assert!(
                files.iter().any(|f| f.starts_with(&ours)),
                "{program} on {device}: the loader opened nothing of {ours}: {files:?}"
            );
            let from_build: Vec<&String> =
                files.iter().filter(|f| Path::new(f).starts_with(&build_tree)).collect();
            assert!(
                from_build.is_empty(),
                "{program} on {device} looked into the build tree: {from_build:?}"
            );
            assert!(!trace.contains(&*build_tree.to_string_lossy()), "{trace}");
        }
    }
}
