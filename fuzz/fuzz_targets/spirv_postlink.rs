//! SPIR-V entering the post-link and the runtime's own linker.
//! Property: loading, linking (with itself, as two inputs), lowering function pointers (as the
//! runtime does for PoCL) and post-linking any bytes never lets a panic out, never reads out of
//! bounds, and ends in a module or an error; every module the lowering or the post-link hands
//! on loads again. (The post-link checks its own images and refuses an input that would make
//! an invalid one; the lowering has no such check, so its output is checked here.)
//!
//! rspirv's parser panics on some operand kinds it does not expect; `sycl_spirv::load`
//! contains those panics and returns an error. libfuzzer-sys's panic hook would abort on them
//! even though they are caught, so the default hook is put back: a panic that escapes still
//! aborts the process (the target cannot unwind), and the fuzzer still reports it.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use sycl_format::{DeviceConfig, SplitMode};
use sycl_spirv::{
    assemble, link, load, lower_function_pointers, post_link, LinkInput, PostLinkOptions, Source,
};

fuzz_target!(|data: &[u8]| {
    static QUIET_CAUGHT_PANICS: std::sync::Once = std::sync::Once::new();
    QUIET_CAUGHT_PANICS.call_once(|| std::panic::set_hook(Box::new(|_| {})));
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
});
