//! The device-object payload that sycl-ld reads from archives and objects.
//! Property: decoding any bytes never panics or reads out of bounds; whatever decodes encodes
//! to bytes that decode to the same object.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sycl_format::DeviceObject;

fuzz_target!(|data: &[u8]| {
    if let Ok(object) = DeviceObject::decode(data) {
        let again = DeviceObject::decode(&object.encode()).expect("an encoded object decodes");
        assert_eq!(again, object);
    }
});
