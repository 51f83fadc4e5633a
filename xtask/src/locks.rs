//! The lock files the CI run (`cargo xtask test`, no arguments) must leave as they are: the
//! three workspaces' `Cargo.lock`s. A committed lock file that is not current is rewritten by
//! the first cargo command run in its workspace (`cargo fmt --check` included), so a run that
//! changed one means the committed one is stale: CI would test other dependencies than those
//! committed, and every checkout would start with a modified file. Their bytes are read before
//! the run's first cargo command and compared after its last; each that changed fails the run,
//! named with what to do.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use anyhow::{Context, Result};

/// The lock files the run keeps, relative to the repository root.
const LOCK_FILES: &[&str] = &["Cargo.lock", "fixtures/Cargo.lock", "fuzz/Cargo.lock"];

/// Each lock file's bytes at one point of the run (`None`: the file was not there).
pub(crate) struct Snapshot(Vec<(&'static str, Option<Vec<u8>>)>);

impl Snapshot {
    /// The lock files under `root` as they are now.
    pub(crate) fn take(root: &Path) -> Result<Snapshot> {
        let mut files = Vec::new();
        for name in LOCK_FILES {
            let path = root.join(name);
            let bytes = match fs::read(&path) {
                Ok(bytes) => Some(bytes),
                Err(e) if e.kind() == ErrorKind::NotFound => None,
                Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
            };
            files.push((*name, bytes));
        }
        Ok(Snapshot(files))
    }

    /// Each lock file that differs in `now`, with what to do about it.
    fn changes(&self, now: &Snapshot) -> Vec<String> {
        let mut problems = Vec::new();
        for ((name, before), (_, after)) in self.0.iter().zip(&now.0) {
            let what = match (before, after) {
                (before, after) if before == after => continue,
                (Some(_), Some(_)) => "changed during the run",
                (None, Some(_)) => "was written during the run",
                (Some(_), None) => "was removed during the run",
                (None, None) => continue,
            };
            problems.push(format!(
                "{name} {what}: the committed lock file is not current, and cargo updated it \
                 (`git diff {name}` shows how); commit the updated {name}"
            ));
        }
        problems
    }
}

/// Says which lock files the run changed since `before`; `true` when none did.
pub(crate) fn report(root: &Path, before: &Snapshot) -> Result<bool> {
    let problems = before.changes(&Snapshot::take(root)?);
    for problem in &problems {
        eprintln!("xtask: test: {problem}");
    }
    Ok(problems.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_file_the_run_changed_is_reported_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("fixtures")).unwrap();
        fs::create_dir_all(root.join("fuzz")).unwrap();
        fs::write(root.join("Cargo.lock"), "version = 4\n").unwrap();
        fs::write(root.join("fuzz/Cargo.lock"), "version = 4\n").unwrap();
        let before = Snapshot::take(root).unwrap();
        assert!(report(root, &before).unwrap(), "nothing changed");

        fs::write(root.join("fuzz/Cargo.lock"), "version = 4\n[[package]]\n").unwrap();
        fs::write(root.join("fixtures/Cargo.lock"), "version = 4\n").unwrap();
        let problems = before.changes(&Snapshot::take(root).unwrap());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(
            problems[0],
            "fixtures/Cargo.lock was written during the run: the committed lock file is not \
             current, and cargo updated it (`git diff fixtures/Cargo.lock` shows how); commit \
             the updated fixtures/Cargo.lock"
        );
        assert!(problems[1].starts_with("fuzz/Cargo.lock changed during the run: "));
        assert!(problems[1].ends_with("commit the updated fuzz/Cargo.lock"));
        assert!(!report(root, &before).unwrap());

        fs::remove_file(root.join("Cargo.lock")).unwrap();
        let problems = before.changes(&Snapshot::take(root).unwrap());
        assert!(problems[0].starts_with("Cargo.lock was removed during the run: "), "{problems:?}");
    }
}
