//! `cargo xtask style`, and the first step of `cargo xtask test`: the formatter and clippy, so
//! that the house style is the tools' to keep. `cargo fmt --all --check` runs over the three
//! workspaces (this one, `fixtures/`, `fuzz/`; the one `rustfmt.toml` at the root applies to
//! all), then `cargo clippy --workspace --all-targets --all-features --keep-going -- -D
//! warnings` over this one (every feature: the runtime's interop modules are checked too), in
//! the tests' target directory (so the build scripts it runs are the tests' too).
//!
//! A failed check does not stop the others, nor the tests after them: each says what to run
//! to fix it, and `test` fails at the end, after the tests have said what they have to say.

use anyhow::Result;

use crate::{cargo, repo_root, run_inherited};

/// The workspaces `cargo fmt --check` covers, as their manifests relative to the root.
const WORKSPACES: &[&str] = &["Cargo.toml", "fixtures/Cargo.toml", "fuzz/Cargo.toml"];

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
    // `--keep-going`: a crate that fails does not hide what the others would report.
    let args = [
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--keep-going",
        "--",
        "-D",
        "warnings",
    ];
    let command = shown(&args);
    println!("xtask: style: {command}");
    if !run_inherited(cargo().args(args).current_dir(&root))?.success() {
        failures.push(Failure {
            command,
            fix: "fix each warning shown above (`cargo clippy --workspace --all-targets \
                  --all-features` shows them again; `cargo clippy --fix --workspace \
                  --all-targets --all-features` applies the \
                  suggestions it can); a lint that does not fit a place is allowed there with \
                  a comment saying why"
                .to_string(),
        });
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
