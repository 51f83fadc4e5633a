//! The `spirv_postlink` fuzz target's property, and the replay of the inputs it once failed
//! on, kept in `tests/fuzz_regressions/`, by plain `cargo test` (no nightly toolchain, no
//! cargo-fuzz).
//!
//! The property, [`check`], is the one function that both the fuzz target
//! (`fuzz/fuzz_targets/spirv_postlink.rs`, which includes this file) and the replay call, so
//! the fuzzer and the replay cannot check different things: loading, linking (with itself, as
//! two inputs), lowering function pointers (as the runtime does for PoCL) and post-linking any
//! bytes never lets a panic out, never reads out of bounds, and ends in a module or an error;
//! every module the lowering or the post-link hands on loads again. (The post-link checks its
//! own images and refuses an input that would make an invalid one; the lowering has no such
//! check, so its output is checked here.)
//!
//! Keeping an input the fuzzer found (`cargo xtask fuzz` names the file and the directory):
//! copy it into `tests/fuzz_regressions/`; the replay fails until the bug is fixed, and passes
//! from then on. (`load.rs`'s unit test checks, besides, that `load` refuses each of them.)

use std::collections::BTreeMap;

use sycl_format::{DeviceConfig, SplitMode};
use sycl_spirv::{
    assemble, link, load, lower_function_pointers, post_link, LinkInput, PostLinkOptions, Source,
};

/// Checks the property on `data`: panics where it does not hold.
pub(crate) fn check(data: &[u8]) {
    let Ok(module) = load(data) else { return };
    let inputs = vec![
        LinkInput { name: "a".into(), module: module.clone() },
        LinkInput { name: "b".into(), module },
    ];
    let Ok(linked) = link(inputs) else { return };
    let mut lowered = linked.module.clone();
    if let Ok(true) = lower_function_pointers(&mut lowered) {
        load(&assemble(&lowered)).expect("a lowered program loads");
    }
    let sources = [Source::default(), Source::default()];
    let config = DeviceConfig::default_config();
    let spec = BTreeMap::new();
    let split = [SplitMode::PerKernel, SplitMode::PerSource, SplitMode::Off][data.len() % 3];
    let options =
        PostLinkOptions { split, sources: &sources, config: &config, spec_constants: &spec };
    if let Ok(out) = post_link(linked, &options) {
        for image in out.images {
            load(&image.spirv).expect("a post-linked image loads");
        }
    }
}

/// The replay, behind `cfg(test)`: the fuzz target includes this file for [`check`] alone.
#[cfg(test)]
mod replay {
    use std::fs;
    use std::panic::catch_unwind;
    use std::path::{Path, PathBuf};

    /// The kept inputs, in name order (the directory holds nothing else).
    fn kept() -> Vec<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
        let mut paths: Vec<PathBuf> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        paths.sort();
        paths
    }

    /// Every kept input holds the property now, each one replayed even after another failed,
    /// and each failure named with its file.
    #[test]
    fn kept_inputs_hold_the_property() {
        let mut failures = Vec::new();
        let inputs = kept();
        for input in &inputs {
            let data = fs::read(input).unwrap();
            if let Err(panic) = catch_unwind(|| super::check(&data)) {
                let message = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(a panic without a message)");
                failures.push(format!("{}: {message}", input.display()));
            }
        }
        // The fifteen findings of docs/RELIABILITY.md, at least: a replay that finds nothing
        // proves nothing.
        assert!(inputs.len() >= 15, "only {} kept input(s)", inputs.len());
        assert!(
            failures.is_empty(),
            "{} of {} kept input(s) break the fuzz target's property again:\n{}",
            failures.len(),
            inputs.len(),
            failures.join("\n")
        );
    }

    /// The directory holds inputs only: one in a directory of its own would never be replayed.
    #[test]
    fn the_directory_holds_inputs_only() {
        let strays: Vec<PathBuf> = kept().into_iter().filter(|p| !p.is_file()).collect();
        assert!(strays.is_empty(), "not inputs: {strays:#?}");
    }
}
