//! Inputs the `spirv_postlink` fuzz target found that load, but once made the post-link write
//! an image that does not: each is linked with itself and post-linked in every split mode, and
//! every image must load again.

use std::collections::BTreeMap;

use sycl_format::{DeviceConfig, SplitMode};
use sycl_spirv::{link, load, post_link, LinkInput, PostLinkOptions, Source};

#[test]
fn every_post_linked_image_loads() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/postlink_regressions");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let module = load(&std::fs::read(&path).unwrap()).unwrap();
        for split in [SplitMode::PerKernel, SplitMode::PerSource, SplitMode::Off] {
            let inputs = vec![
                LinkInput { name: "a".into(), module: module.clone() },
                LinkInput { name: "b".into(), module: module.clone() },
            ];
            let linked = link(inputs).unwrap();
            let sources = [Source::default(), Source::default()];
            let config = DeviceConfig::default_config();
            let spec = BTreeMap::new();
            let options = PostLinkOptions { split, sources: &sources, config: &config, spec_constants: &spec };
            let out = post_link(linked, &options).unwrap();
            assert!(!out.images.is_empty(), "{}: no images", path.display());
            for image in out.images {
                load(&image.spirv).unwrap_or_else(|e| panic!("{} ({split:?}): {e}", path.display()));
            }
        }
        count += 1;
    }
    assert_eq!(count, 1);
}
