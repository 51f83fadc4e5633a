//! `cargo xtask style`, and the first step of `cargo xtask test`: the formatter and clippy, so
//! that the house style is the tools' to keep. `cargo fmt --all --check` runs over the three
//! workspaces (this one, `fixtures/`, `fuzz/`; the one `rustfmt.toml` at the root applies to
//! all), then `cargo clippy --workspace --all-targets --all-features --keep-going -- -D
//! warnings` over this one (every feature: the runtime's interop modules are checked too) and
//! the same for the runtime with `--no-default-features` (its build without CUDA), in the
//! tests' target directory (so the build scripts it runs are the tests' too).
//!
//! A failed check does not stop the others, nor the tests after them: each says what to run
//! to fix it, and `test` fails at the end, after the tests have said what they have to say.

use anyhow::Result;

use crate::{cargo, repo_root, run_inherited};

/// The workspaces `cargo fmt --check` covers, as their manifests relative to the root.
const WORKSPACES: &[&str] = &["Cargo.toml", "fixtures/Cargo.toml", "fuzz/Cargo.toml"];

/// The clippy runs, each denying warnings: the workspace with every feature (the runtime's
/// interop modules included; `--keep-going`, so that a crate that fails does not hide what the
/// others would report), then the runtime without its default features, the build without
/// CUDA, whose stand-in backend (`backend/no_cuda.rs`) no other build compiles.
const CLIPPY: &[&[&str]] = &[
    &[
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--keep-going",
        "--",
        "-D",
        "warnings",
    ],
    &[
        "clippy",
        "-p",
        "sycl-runtime",
        "--all-targets",
        "--no-default-features",
        "--",
        "-D",
        "warnings",
    ],
];

/// A check that failed: the command, and what to run to fix what it found.
pub(crate) struct Failure {
    command: String,
    fix: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {}", self.command, self.fix)
    }
}

/// Runs every check, each with its output shown as it comes; returns those that failed.
pub(crate) fn check() -> Result<Vec<Failure>> {
    let root = repo_root();
    let mut failures = Vec::new();
    for manifest in WORKSPACES {
        let mut args = vec!["fmt", "--all", "--check"];
        if *manifest != "Cargo.toml" {
            args.extend(["--manifest-path", manifest]);
        }
        let command = shown(&args);
        println!("xtask: style: {command}");
        if !run_inherited(cargo().args(&args).current_dir(&root))?.success() {
            failures.push(Failure {
                command,
                fix: format!(
                    "run `{}` to format it (what it would change is shown above; a file it \
                     cannot parse is named there)",
                    fix_fmt(manifest)
                ),
            });
        }
    }
    for args in CLIPPY {
        let lints = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let command = shown(args);
        println!("xtask: style: {command}");
        if !run_inherited(cargo().args(*args).current_dir(&root))?.success() {
            let again = args[..lints].join(" ");
            failures.push(Failure {
                command,
                fix: format!(
                    "fix each warning shown above (`cargo {again}` shows them again; \
                     `cargo {}` applies the suggestions it can); a lint that does not fit a \
                     place is allowed there with a comment saying why",
                    again.replacen("clippy", "clippy --fix", 1)
                ),
            });
        }
    }
    Ok(failures)
}

/// A cargo command line for messages, run from the repository root: `` `cargo ARGS` ``.
fn shown(args: &[&str]) -> String {
    format!("`cargo {}`", args.join(" "))
}

/// The command that formats the workspace of `manifest`, from the repository root.
fn fix_fmt(manifest: &str) -> String {
    match manifest {
        "Cargo.toml" => "cargo fmt --all".to_string(),
        _ => format!("cargo fmt --all --manifest-path {manifest}"),
    }
}

/// Says which checks failed, after everything else has run; `true` when none did.
pub(crate) fn report(failures: &[Failure]) -> bool {
    for failure in failures {
        eprintln!("xtask: style: {failure}");
    }
    failures.is_empty()
}

/// Runs the checks alone (`cargo xtask style`).
pub(crate) fn style() -> Result<bool> {
    let failures = check()?;
    if failures.is_empty() {
        println!("xtask: style: formatting and clippy are clean");
    }
    Ok(report(&failures))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workspace_is_formatted_by_its_own_command() {
        assert_eq!(fix_fmt("Cargo.toml"), "cargo fmt --all");
        assert_eq!(fix_fmt("fuzz/Cargo.toml"), "cargo fmt --all --manifest-path fuzz/Cargo.toml");
        let failure = Failure { command: shown(&["clippy"]), fix: "fix it".into() };
        assert_eq!(failure.to_string(), "`cargo clippy` failed: fix it");
    }
}
