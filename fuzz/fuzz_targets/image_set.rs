//! The embedded image payload and property sets the runtime reads from loaded binaries, and
//! the ELF notes around them.
//! Property: note walking and decoding never panic or read out of bounds; a decoded set
//! round-trips; device requirements and virtual-function properties of every image decode
//! to a value or an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sycl_format::{find_notes, ImageSet, NOTE_TYPE_IMAGES};

fuzz_target!(|data: &[u8]| {
    for align in [4, 8] {
        let _ = find_notes(data, NOTE_TYPE_IMAGES, align);
    }
    if let Ok(set) = ImageSet::decode(data) {
        assert_eq!(ImageSet::decode(&set.encode()).expect("an encoded set decodes"), set);
        for image in &set.images {
            let _ = image.requirements();
            let _ = image.virtual_functions_set();
            let _ = image.uses_virtual_functions_sets();
            let _ = image.exported_symbols().count();
        }
    }
});
