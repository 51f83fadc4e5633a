//! Native NVIDIA images (relocatable cubins), which the runtime reads from loaded binaries to
//! write specialization values into before the CUDA link, and `sycl-ld inspect` shows.
//! Property (`check`, in sycl-format's `tests/fuzz_regressions/cubin.rs`, which also replays
//! the inputs kept beside it): parsing never panics or reads out of bounds; a variable's
//! initial value lies within the bytes, and writing a value of its size there changes exactly
//! those bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../sycl-format/tests/fuzz_regressions/cubin.rs"]
mod property;

fuzz_target!(|data: &[u8]| property::check(data));
