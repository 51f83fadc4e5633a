//! SPIR-V entering the post-link and the runtime's own linker.
//! Property: loading, linking (with itself, as two inputs) and post-linking any bytes never
//! panics, never reads out of bounds, and ends in images or an error; every image the
//! post-link makes loads again.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use sycl_format::{DeviceConfig, SplitMode};
use sycl_spirv::{link, load, post_link, LinkInput, PostLinkOptions, Source};

fuzz_target!(|data: &[u8]| {
    let Ok(module) = load(data) else { return };
    let inputs = vec![
        LinkInput { name: "a".into(), module: module.clone() },
        LinkInput { name: "b".into(), module },
    ];
    let Ok(linked) = link(inputs) else { return };
    let sources = [Source::default(), Source::default()];
    let config = DeviceConfig::default_config();
    let spec = BTreeMap::new();
    let split = [SplitMode::PerKernel, SplitMode::PerSource, SplitMode::Off][data.len() % 3];
    let options = PostLinkOptions { split, sources: &sources, config: &config, spec_constants: &spec };
    if let Ok(out) = post_link(linked, &options) {
        for image in out.images {
            load(&image.spirv).expect("a post-linked image loads");
        }
    }
});
