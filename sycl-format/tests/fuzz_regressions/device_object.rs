//! The `device_object` fuzz target's property, in the one function that both the fuzz target
//! (`fuzz/fuzz_targets/device_object.rs`) and the replay of the kept inputs in
//! `device_object/` (`tests/fuzz_regressions.rs`) call: decoding any bytes never panics or
//! reads out of bounds; whatever decodes encodes to bytes that decode to the same object.

use sycl_format::DeviceObject;

/// Checks the property on `data`: panics where it does not hold.
pub(crate) fn check(data: &[u8]) {
    if let Ok(object) = DeviceObject::decode(data) {
        let again = DeviceObject::decode(&object.encode()).expect("an encoded object decodes");
        assert_eq!(again, object);
    }
}
