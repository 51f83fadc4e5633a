//! Native NVIDIA images (relocatable cubins), which the runtime reads from loaded binaries to
//! write specialization values into before the CUDA link, and `sycl-ld inspect` shows.
//! Property: parsing never panics or reads out of bounds; a variable's initial value lies
//! within the bytes, and writing a value of its size there changes exactly those bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sycl_format::cubin::{set_initializer, Cubin};

fuzz_target!(|data: &[u8]| {
    let Ok(cubin) = Cubin::parse(data) else { return };
    let _ = cubin.summary();
    for symbol in &cubin.symbols {
        let Some(range) = cubin.initializer(symbol.name) else { continue };
        assert!(range.end <= data.len());
        let mut copy = data.to_vec();
        let value = vec![0xa5; range.len()];
        assert_eq!(set_initializer(&mut copy, symbol.name, &value).ok(), Some(true));
        assert_eq!(&copy[range.clone()], value.as_slice());
        assert_eq!(copy[..range.start], data[..range.start]);
        assert_eq!(copy[range.end..], data[range.end..]);
    }
});
