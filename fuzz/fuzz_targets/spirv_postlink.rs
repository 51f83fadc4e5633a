//! SPIR-V entering the post-link and the runtime's own linker.
//! Property (`check`, in sycl-spirv's `tests/fuzz_regressions.rs`, which also replays the
//! inputs kept in `tests/fuzz_regressions/`): loading, linking (with itself, as two inputs),
//! lowering function pointers (as the runtime does for PoCL) and post-linking any bytes never
//! lets a panic out, never reads out of bounds, and ends in a module or an error; every module
//! the lowering or the post-link hands on loads again. (The post-link checks its own images
//! and refuses an input that would make an invalid one; the lowering has no such check, so its
//! output is checked there.)
//!
//! rspirv's parser panics on some operand kinds it does not expect; `sycl_spirv::load`
//! contains those panics and returns an error. libfuzzer-sys's panic hook would abort on them
//! even though they are caught, so a hook that prints nothing replaces it: a panic that
//! escapes still aborts the process (the target cannot unwind), and the fuzzer still reports
//! it (the replay, under the default hook, prints its message).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../sycl-spirv/tests/fuzz_regressions.rs"]
mod property;

fuzz_target!(|data: &[u8]| {
    static QUIET_CAUGHT_PANICS: std::sync::Once = std::sync::Once::new();
    QUIET_CAUGHT_PANICS.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    property::check(data);
});
