//! The device-object payload that sycl-ld reads from archives and objects.
//! Property (`check`, in sycl-format's `tests/fuzz_regressions/device_object.rs`, which also
//! replays the inputs kept beside it): decoding any bytes never panics or reads out of bounds;
//! whatever decodes encodes to bytes that decode to the same object.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../sycl-format/tests/fuzz_regressions/device_object.rs"]
mod property;

fuzz_target!(|data: &[u8]| property::check(data));
