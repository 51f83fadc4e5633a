//! Inputs on which a fuzz target of this crate's decoders once failed, kept in the repository
//! and replayed by plain `cargo test` (no nightly toolchain, no cargo-fuzz): every file in
//! `tests/fuzz_regressions/TARGET/` goes through TARGET's property, the one function in
//! `tests/fuzz_regressions/TARGET.rs` that the fuzz target `fuzz/fuzz_targets/TARGET.rs` calls
//! too, so the fuzzer and this replay cannot check different things.
//!
//! Keeping an input the fuzzer found (`cargo xtask fuzz` names the file and the directory):
//! copy it into its target's directory here; this test fails until the bug is fixed, and
//! passes from then on. `xtask/src/fuzz.rs` lists where every target keeps its inputs (this
//! crate's three targets here, `spirv_postlink` in sycl-spirv's `tests/fuzz_regressions/`) and
//! seeds the fuzzers' corpora with them.

use std::any::Any;
use std::fs;
use std::panic::catch_unwind;
use std::path::{Path, PathBuf};

#[path = "fuzz_regressions/cubin.rs"]
mod cubin;
#[path = "fuzz_regressions/device_object.rs"]
mod device_object;
#[path = "fuzz_regressions/image_set.rs"]
mod image_set;

/// A fuzz target's property: panics where it does not hold for the bytes.
type Property = fn(&[u8]);

/// The fuzz targets whose decoders this crate holds, each with its property.
const TARGETS: &[(&str, Property)] = &[
    ("cubin", cubin::check),
    ("device_object", device_object::check),
    ("image_set", image_set::check),
];

/// Where the kept inputs lie, a directory per target.
fn kept() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions")
}

/// The entries of `dir`, in name order; none where it does not exist (a target with no kept
/// input yet).
fn entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = read.map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths
}

/// What a panic said.
fn message(panic: &(dyn Any + Send)) -> &str {
    match (panic.downcast_ref::<String>(), panic.downcast_ref::<&str>()) {
        (Some(text), _) => text,
        (None, Some(text)) => text,
        (None, None) => "(a panic without a message)",
    }
}

/// Every kept input holds its target's property now, each one replayed even after another
/// failed, and each failure named with its file.
#[test]
fn kept_inputs_hold_their_targets_property() {
    let mut failures = Vec::new();
    let mut replayed = 0;
    for &(target, check) in TARGETS {
        for input in entries(&kept().join(target)) {
            let data = fs::read(&input).unwrap();
            if let Err(panic) = catch_unwind(|| check(&data)) {
                failures.push(format!("{}: {}", input.display(), message(&*panic)));
            }
            replayed += 1;
        }
    }
    // The two `cubin` inputs, at least: a replay that finds nothing proves nothing.
    assert!(replayed >= 2, "only {replayed} kept input(s) under {}", kept().display());
    assert!(
        failures.is_empty(),
        "{} of {replayed} kept input(s) break their fuzz target's property again:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every entry of `tests/fuzz_regressions/` is a target's directory of inputs or its
/// property, and a target's directory holds files only: an input kept anywhere else would
/// never be replayed.
#[test]
fn every_kept_input_belongs_to_a_target() {
    let targets: Vec<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    let mut strays = Vec::new();
    for entry in entries(&kept()) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        let target = if entry.is_dir() { Some(name.as_str()) } else { name.strip_suffix(".rs") };
        if !target.is_some_and(|t| targets.contains(&t)) {
            strays.push(entry);
        } else if entry.is_dir() {
            strays.extend(entries(&entry).into_iter().filter(|input| !input.is_file()));
        }
    }
    assert!(strays.is_empty(), "not the inputs or the property of {targets:?}: {strays:#?}");
}
