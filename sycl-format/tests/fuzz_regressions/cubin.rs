//! The `cubin` fuzz target's property, in the one function that both the fuzz target
//! (`fuzz/fuzz_targets/cubin.rs`) and the replay of the kept inputs in `cubin/`
//! (`tests/fuzz_regressions.rs`) call: parsing never panics or reads out of bounds; a
//! variable's initial value lies within the bytes, and writing a value of its size there
//! changes exactly those bytes.

use sycl_format::cubin::{set_initializer, Cubin};

/// Checks the property on `data`: panics where it does not hold.
pub(crate) fn check(data: &[u8]) {
    let Ok(cubin) = Cubin::parse(data) else { return };
    let _ = cubin.summary();
    for symbol in &cubin.symbols {
        let Some(range) = cubin.initializer(symbol.name) else { continue };
        assert!(
            range.start <= range.end && range.end <= data.len(),
            "`{}`'s initial value at {range:?} is not within the {} bytes",
            symbol.name,
            data.len()
        );
        let mut copy = data.to_vec();
        let value = vec![0xa5; range.len()];
        assert_eq!(set_initializer(&mut copy, symbol.name, &value).ok(), Some(true));
        assert_eq!(&copy[range.clone()], value.as_slice());
        assert_eq!(copy[..range.start], data[..range.start]);
        assert_eq!(copy[range.end..], data[range.end..]);
    }
}
