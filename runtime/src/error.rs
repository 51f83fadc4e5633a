//! What went wrong, as users see it.

/// What went wrong. The runtime stays usable after any of these.
///
/// `Debug` prints the message `Display` does: a `main` returning `Result<(), Error>` and an
/// `unwrap` show what went wrong and what to try, not the variant's fields (which programs
/// that want them match on).
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No device, or not exactly one, matches what was asked for.
    #[error("{problem}{}", device_list(available))]
    NoDevice {
        /// What was asked for and why nothing matched.
        problem: String,
        /// Every device, each with the selector that picks it.
        available: Vec<String>,
    },
    /// No image of a form the device can use defines the kernel.
    #[error("kernel `{kernel}` not found in the device images of: {}", if searched.is_empty() { NO_IMAGES.to_string() } else { list(searched) })]
    KernelNotFound {
        /// The kernel asked for.
        kernel: String,
        /// The binaries (or the bundle) searched.
        searched: Vec<String>,
    },
    /// No binary that may serve the kernel exports `symbol`; `hidden` says, for each binary
    /// that exports it but may not serve this kernel, which one and why.
    #[error(
        "unresolved device symbol `{symbol}` imported for kernel `{kernel}`; searched: {}{}",
        list(searched),
        hidden.iter().map(|h| format!("; {h}")).collect::<String>()
    )]
    UnresolvedSymbol {
        /// The imported symbol.
        symbol: String,
        /// The kernel that needs it (for a bundle, `(bundle of IMAGE)`).
        kernel: String,
        /// The binaries searched.
        searched: Vec<String>,
        /// Binaries that export it but may not serve the kernel, with the reason.
        hidden: Vec<String>,
    },
    /// The driver refused to compile, link or build device code: `log` is its build log for
    /// the device, `what` names the step, the images and the driver's error, `hint` what to try.
    #[error(
        "{what} failed on {device}: {}\nto try: {hint}",
        if log.is_empty() { "the driver wrote no build log".to_string() } else { format!("the driver's build log:\n{log}") }
    )]
    Build {
        /// The device's name.
        device: String,
        /// The step, the images and the driver's error.
        what: String,
        /// The driver's build log (may be empty).
        log: String,
        /// What to try.
        hint: String,
    },
    /// An image needs what the device lacks (an aspect, a sub-group or work-group size,
    /// another fixed target): found before anything is compiled.
    #[error("kernel_not_supported: {reason} (kernel `{kernel}` on {device})")]
    KernelNotSupported {
        /// The kernel (`(bundle)` for a bundle's link).
        kernel: String,
        /// The device's name.
        device: String,
        /// What the image needs, in the words of DPC++'s optional kernel features design.
        reason: String,
    },
    /// A kernel uses a virtual-function set that no binary it may see provides.
    #[error("no image provides virtual-function set `{set}`, which kernel `{kernel}` uses; searched: {}", list(searched))]
    MissingVirtualFunctions {
        /// The set's name.
        set: String,
        /// The kernel that uses it.
        kernel: String,
        /// The binaries searched.
        searched: Vec<String>,
    },
    /// The functions the kernel's images hold call each other in a cycle (recursion, which
    /// device code may not have); `cycle` names each function with its binary, the first again
    /// at the end.
    #[error(
        "kernel `{kernel}` reaches a call cycle: {}; device code may not recurse (OpenCL C and SYCL forbid it), \
         so no driver was given it: break the cycle",
        cycle.join(" -> ")
    )]
    CallCycle {
        /// The kernel (`(bundle)` for a bundle's link).
        kernel: String,
        /// The functions of the cycle, each with its binary.
        cycle: Vec<String>,
    },
    /// In strict mode (`SYCL_STRICT_EXPORTS=1`), a symbol exported by more than one binary.
    #[error("device symbol `{symbol}` is exported by more than one binary: {} (strict mode)", providers.join(", "))]
    DuplicateSymbol {
        /// The symbol.
        symbol: String,
        /// Each exporting image, in loader order.
        providers: Vec<String>,
    },
    /// Linking or translating SPIR-V for a device that takes no SPIR-V (PoCL) failed.
    #[error("preparing device code for a device without SPIR-V: {0}")]
    Translate(String),
    /// A driver call failed: `error` is the driver's error, by name and number.
    #[error("{call} failed with {error}")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// Its error, by name and number.
        error: String,
    },
    /// A driver call made for a kernel's launch failed.
    #[error("kernel `{kernel}`: {call} failed with {error}")]
    KernelCall {
        /// The kernel launched.
        kernel: String,
        /// The driver function.
        call: &'static str,
        /// Its error, by name and number.
        error: String,
    },
    /// An argument the call cannot take, named with what it takes.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An operation on objects that cannot go together (bundles of two devices, nothing to
    /// link).
    #[error("invalid object: {0}")]
    InvalidObject(String),
    /// A device library file could not be read or used.
    #[error("device library {path}: {reason}")]
    DeviceLibrary {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
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

    #[test]
    fn debug_prints_the_message_a_main_returning_the_error_shows() {
        let e = Error::InvalidArgument("kernel `k` takes 1 argument; got 0".into());
        assert_eq!(format!("{e:?}"), e.to_string());
        assert_eq!(format!("{e:?}"), "invalid argument: kernel `k` takes 1 argument; got 0");
    }
}
