//! Persistent cache entries, which other processes (and earlier runs) wrote.
//! Property: checking any bytes as the entry of a key never panics or reads out of bounds;
//! an entry is accepted only when it is exactly what the writer makes for that key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sycl_runtime::fuzz_support::{decode_cache_entry, encode_cache_entry};

const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fuzz_target!(|data: &[u8]| {
    if let Ok(payload) = decode_cache_entry(data, KEY) {
        assert_eq!(
            encode_cache_entry(KEY, payload),
            data,
            "only the writer's exact bytes are accepted"
        );
    }
    // And what the writer makes always reads back.
    let entry = encode_cache_entry(KEY, data);
    assert_eq!(decode_cache_entry(&entry, KEY).expect("a written entry reads back"), data);
});
