//! `SYCL_TRACE=1`: one line per runtime event on stderr, `sycl: EVENT what-it-concerns`.
//! Events also go to the `log` facade at debug level.

use std::sync::OnceLock;

pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("SYCL_TRACE").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Formats nothing unless tracing or debug logging is on: the cache-hit event sits on the
/// launch path.
macro_rules! trace {
    ($event:literal, $($arg:tt)*) => {{
        if $crate::trace::enabled() {
            eprintln!("sycl: {} {}", $event, format_args!($($arg)*));
        }
        log::debug!(target: "sycl", "{} {}", $event, format_args!($($arg)*));
    }};
}
pub(crate) use trace;
