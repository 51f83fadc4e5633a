//! The `image_set` fuzz target's property, in the one function that both the fuzz target
//! (`fuzz/fuzz_targets/image_set.rs`) and the replay of the kept inputs in `image_set/`
//! (`tests/fuzz_regressions.rs`) call: note walking and decoding never panic or read out of
//! bounds; a decoded set round-trips; the in-place view the runtime indexes with agrees with
//! the decoded set, names read as bytes included (and its header's count with the images
//! found); device requirements and virtual-function properties of every image decode to a
//! value or an error; kernel parameter lists read the same in place and copied out, and one
//! that reads re-encodes to itself.

use sycl_format::{
    encode_kernel_params, find_notes, parse_kernel_params, sets, ImageSet, ImageSetView,
    NOTE_TYPE_IMAGES,
};

/// Checks the property on `data`: panics where it does not hold.
pub(crate) fn check(data: &[u8]) {
    for align in [4, 8] {
        let _ = find_notes(data, NOTE_TYPE_IMAGES, align);
    }
    let view = ImageSetView::parse(data);
    match ImageSet::decode(data) {
        Ok(set) => {
            assert_eq!(ImageSet::decode(&set.encode()).expect("an encoded set decodes"), set);
            let view = view.expect("a set that decodes parses in place");
            assert_eq!(ImageSetView::count_hint(data), set.images.len());
            assert_eq!(view.images.len(), set.images.len());
            for (image, seen) in set.images.iter().zip(&view.images) {
                assert_eq!(&seen.to_image(), image);
                assert!(seen.kernels().eq(image.kernels.iter().map(String::as_str)));
                assert!(seen.kernel_bytes().eq(image.kernels.iter().map(String::as_bytes)));
                assert!(seen.exported_symbols().eq(image.exported_symbols()));
                let exported = seen.property_set(sets::EXPORTED_SYMBOLS);
                assert!(exported
                    .into_iter()
                    .flat_map(|set| set.name_bytes())
                    .eq(image.exported_symbols().map(str::as_bytes)));
                assert_eq!(seen.virtual_functions_set(), image.virtual_functions_set());
                assert_eq!(
                    seen.uses_virtual_functions_sets().collect::<Vec<_>>(),
                    image.uses_virtual_functions_sets()
                );
                let _ = image.requirements();
                let recorded = image.property_names(sets::KERNEL_ARGUMENTS);
                for kernel in image.kernels.iter().map(String::as_str).chain(recorded) {
                    let params = image.kernel_params(kernel);
                    assert_eq!(seen.kernel_params(kernel), params);
                    if let Some(Ok(params)) = params {
                        assert_eq!(
                            parse_kernel_params(&encode_kernel_params(&params)).as_ref(),
                            Ok(&params)
                        );
                    }
                }
            }
        }
        Err(_) => {
            assert!(view.is_err(), "a set that does not decode does not parse in place either")
        }
    }
}
