//! The embedded image payload and property sets the runtime reads from loaded binaries, and
//! the ELF notes around them.
//! Property (`check`, in sycl-format's `tests/fuzz_regressions/image_set.rs`, which also
//! replays the inputs kept beside it): note walking and decoding never panic or read out of
//! bounds; a decoded set round-trips; the in-place view the runtime indexes with agrees with
//! the decoded set, names read as bytes included (and its header's count with the images
//! found); device requirements and virtual-function properties of every image decode to a
//! value or an error; kernel parameter lists read the same in place and copied out, and one
//! that reads re-encodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../sycl-format/tests/fuzz_regressions/image_set.rs"]
mod property;

fuzz_target!(|data: &[u8]| property::check(data));
