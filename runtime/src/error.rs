//! What went wrong, as users see it.

/// What went wrong. The runtime stays usable after any of these.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{problem}{}", device_list(available))]
    NoDevice { problem: String, available: Vec<String> },
    #[error("kernel `{kernel}` not found in the device images of: {}", if searched.is_empty() { NO_IMAGES.to_string() } else { list(searched) })]
    KernelNotFound { kernel: String, searched: Vec<String> },
    /// No binary that may serve the kernel exports `symbol`; `hidden` says, for each binary
    /// that exports it but may not serve this kernel, which one and why.
    #[error(
        "unresolved device symbol `{symbol}` imported for kernel `{kernel}`; searched: {}{}",
        list(searched),
        hidden.iter().map(|h| format!("; {h}")).collect::<String>()
    )]
    UnresolvedSymbol { symbol: String, kernel: String, searched: Vec<String>, hidden: Vec<String> },
    /// The driver refused to compile, link or build device code: `log` is its build log for
    /// the device, `what` names the step, the images and the driver's error, `hint` what to try.
    #[error(
        "{what} failed on {device}: {}\nto try: {hint}",
        if log.is_empty() { "the driver wrote no build log".to_string() } else { format!("the driver's build log:\n{log}") }
    )]
    Build { device: String, what: String, log: String, hint: String },
    #[error("kernel_not_supported: {reason} (kernel `{kernel}` on {device})")]
    KernelNotSupported { kernel: String, device: String, reason: String },
    #[error("no image provides virtual-function set `{set}`, which kernel `{kernel}` uses; searched: {}", list(searched))]
    MissingVirtualFunctions { set: String, kernel: String, searched: Vec<String> },
    /// The functions the kernel's images hold call each other in a cycle (recursion, which
    /// device code may not have); `cycle` names each function with its binary, the first again
    /// at the end.
    #[error(
        "kernel `{kernel}` reaches a call cycle: {}; device code may not recurse (OpenCL C and SYCL forbid it), \
         so no driver was given it: break the cycle",
        cycle.join(" -> ")
    )]
    CallCycle { kernel: String, cycle: Vec<String> },
    #[error("device symbol `{symbol}` is exported by more than one binary: {} (strict mode)", providers.join(", "))]
    DuplicateSymbol { symbol: String, providers: Vec<String> },
    #[error("preparing device code for a device without SPIR-V: {0}")]
    Translate(String),
    /// A driver call failed: `error` is the driver's error, by name and number.
    #[error("{call} failed with {error}")]
    Driver { call: &'static str, error: String },
    /// A driver call made for a kernel's launch failed.
    #[error("kernel `{kernel}`: {call} failed with {error}")]
    KernelCall { kernel: String, call: &'static str, error: String },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("invalid object: {0}")]
    InvalidObject(String),
    #[error("device library {path}: {reason}")]
    DeviceLibrary { path: String, reason: String },
}

/// What a kernel lookup says when no loaded binary has device images: the usual cause is a
/// program cargo did not link through `sycl-ld`.
const NO_IMAGES: &str = "(none: no loaded binary carries device images, so this program was probably not linked by \
sycl-ld; add to .cargo/config.toml `[target.x86_64-unknown-linux-gnu]` with `linker = \"/path/to/sycl-ld\"` and \
`rustflags = [\"-C\", \"linker-flavor=gcc\"]`, then rebuild)";

/// The devices of a selection error, one per line with the selector that picks it.
fn device_list(available: &[String]) -> String {
    if available.is_empty() {
        return "; no device is available (is an OpenCL runtime installed and registered in /etc/OpenCL/vendors, or an NVIDIA driver with libcuda.so.1?)"
            .into();
    }
    let lines: String = available.iter().map(|line| format!("\n  {line}")).collect();
    format!("; available devices, each with the selector that picks it:{lines}")
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".into()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_not_found_without_any_device_images_says_to_link_through_sycl_ld() {
        let none = Error::KernelNotFound { kernel: "diamond".into(), searched: vec![] }.to_string();
        assert!(
            none.starts_with("kernel `diamond` not found in the device images of: (none: no loaded binary carries device images"),
            "{none}"
        );
        assert!(
            none.contains("linker = \"/path/to/sycl-ld\"") && none.contains("linker-flavor=gcc"),
            "{none}"
        );
        let some = Error::KernelNotFound { kernel: "k".into(), searched: vec!["/bin/app".into()] }
            .to_string();
        assert_eq!(some, "kernel `k` not found in the device images of: /bin/app");
    }
}
