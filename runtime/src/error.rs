//! What went wrong, as users see it ([`Error`]'s `Display`), and what kind of failure it is,
//! as programs act on it ([`ErrorKind`]). A driver's error keeps the driver's code
//! ([`DriverCode`]), and its kind is read from the code here, by the tables below: the
//! backends only say which driver and which call.

/// What kind of failure an [`Error`] is: what a program can do about it, whatever the
/// variant and whichever driver ([`Error::kind`]). More kinds may come, so a `match` on it
/// needs a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// What was asked for does not exist: no device matches the selector, no device image
    /// defines the kernel, no device library file is at the path.
    NotFound,
    /// An argument the call cannot take (a size, a range, a view, an object of another
    /// device), found by the runtime or refused by the driver: change the call.
    InvalidArgument,
    /// The device lacks what the call or the device code needs (an aspect, a work-group
    /// size, a compiler): use another device, or other code.
    Unsupported,
    /// The device's memory, or the driver's resources or host memory, ran out: free buffers,
    /// or retry smaller.
    OutOfMemory,
    /// The device, or the driver's context of every queue, buffer and program on it, is
    /// gone: a CUDA kernel faulted (which loses the context), the device failed or became
    /// unavailable. Every later call on the device fails: start over (on CUDA, in a new
    /// process).
    DeviceLost,
    /// The driver refused to compile, link or build device code, or preparing device code
    /// for it failed; the error holds the driver's build log.
    Build,
    /// The device images do not link, found before any driver sees them: a symbol nothing
    /// exports, or that several export in strict mode, a call cycle, a virtual-function set
    /// nothing provides.
    Link,
    /// Any other failure of a driver call; [`Error::code`] is the driver's code.
    Driver,
}

/// A driver's own error code, with the driver it came from ([`Error::driver_code`]). More
/// drivers may come, so a `match` on it needs a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DriverCode {
    /// An OpenCL API call's error, a negative `cl_int`: `CL_OUT_OF_RESOURCES` is -5.
    OpenCl(i32),
    /// The negative execution status of an OpenCL command (`clGetEventInfo`'s
    /// `CL_EVENT_COMMAND_EXECUTION_STATUS`): the command, or one it waited for, ended
    /// abnormally. Drivers put an API error code here, or one of their own, or the status a
    /// program gave a user event; only the codes that mean memory ran out or the device went
    /// away are read as such (GPU drivers report a kernel's fault as `CL_OUT_OF_RESOURCES`
    /// here, which is no shortage of memory).
    OpenClStatus(i32),
    /// A CUDA driver API result (`CUresult`): `CUDA_ERROR_OUT_OF_MEMORY` is 2.
    Cuda(i32),
}

impl DriverCode {
    /// The number, as the driver's headers define it.
    pub fn value(self) -> i32 {
        match self {
            DriverCode::OpenCl(code) | DriverCode::OpenClStatus(code) | DriverCode::Cuda(code) => {
                code
            }
        }
    }

    /// What kind of failure the code means; [`ErrorKind::Driver`] for the codes that say no
    /// more than that a call failed.
    pub fn kind(self) -> ErrorKind {
        match self {
            DriverCode::OpenCl(code) => opencl_kind(code),
            DriverCode::OpenClStatus(code) => match opencl_kind(code) {
                // A GPU driver's CL_OUT_OF_RESOURCES as a status is a kernel's fault.
                ErrorKind::OutOfMemory if code != CL_OUT_OF_RESOURCES => ErrorKind::OutOfMemory,
                ErrorKind::DeviceLost => ErrorKind::DeviceLost,
                _ => ErrorKind::Driver,
            },
            DriverCode::Cuda(code) => cuda_kind(code),
        }
    }

    /// What a [`Error::Driver`] or [`Error::KernelCall`] adds to the driver's words: for a
    /// CUDA error that loses the context, or the device, that it is lost and what the
    /// program can do.
    fn consequence(self) -> &'static str {
        // The CUDA driver API's documentation of each of these codes: "This leaves the
        // process in an inconsistent state and any further CUDA work will return the same
        // error. To continue using CUDA, the process must be terminated and relaunched."
        macro_rules! lost {
            ($cause:literal) => {
                concat!(
                    ": the CUDA context is lost (",
                    $cause,
                    "): every later CUDA call in this process fails with this error, on every \
                     queue and buffer of the device; end the process and start a new one (CUDA \
                     documents no way to recover the context within a process)"
                )
            };
        }
        let DriverCode::Cuda(code) = self else { return "" };
        match code {
            CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_HARDWARE_STACK_ERROR..=CUDA_ERROR_LAUNCH_FAILED => {
                lost!("a kernel faulted")
            }
            CUDA_ERROR_LAUNCH_TIMEOUT => {
                lost!("a kernel ran past the time limit of a GPU that drives a display")
            }
            CUDA_ERROR_CONTEXT_IS_DESTROYED => {
                ": the CUDA context was destroyed elsewhere in this process (cuCtxDestroy, or a \
                 reset of the device's primary context), and with it every queue, buffer and \
                 program the runtime made on the device; end the process and start a new one"
            }
            CUDA_ERROR_ECC_UNCORRECTABLE | CUDA_ERROR_NVLINK_UNCORRECTABLE => {
                ": the GPU reported an uncorrectable hardware error, so nothing its memory holds \
                 can be trusted; end the process, and check the GPU (`nvidia-smi -q`) before \
                 using it again"
            }
            CUDA_ERROR_DEVICE_UNAVAILABLE => {
                ": the GPU is busy or closed to this process (its compute mode is \
                 exclusive-process or prohibited, or other work fills it); use another device, \
                 or try again once it is free"
            }
            _ => "",
        }
    }
}

/// What went wrong. `Display` says what failed and what to try; [`kind`](Error::kind) says
/// what a program can do about it, whatever the variant and whichever driver:
///
/// - [`ErrorKind::OutOfMemory`] ([`is_out_of_memory`](Error::is_out_of_memory)): the device's
///   memory, or the driver's resources or host memory, ran out. Free buffers, or retry with a
///   smaller buffer or launch.
/// - [`ErrorKind::DeviceLost`]: the device, or the driver's context of every queue, buffer and
///   program on it, is gone. On CUDA a kernel that faults loses the context (the error says
///   so): every later call on that device fails with the same error, and only a new process
///   can use the device again. Save what the host holds and start over.
/// - [`ErrorKind::InvalidArgument`], [`NotFound`](ErrorKind::NotFound),
///   [`Unsupported`](ErrorKind::Unsupported), [`Build`](ErrorKind::Build),
///   [`Link`](ErrorKind::Link): the call, the device it names or the device code has to
///   change; the same call fails the same way again.
/// - [`ErrorKind::Driver`]: another failure of a driver call.
///
/// [`code`](Error::code) is the driver's own code where a driver call failed
/// ([`driver_code`](Error::driver_code) says which driver). After any error but a
/// `DeviceLost` one, the runtime, its queues and its buffers stay usable.
///
/// ```no_run
/// use sycl_runtime::{Buffer, Error, ErrorKind, Queue};
///
/// /// The largest buffer of at most `len` values the device gives, halving on out-of-memory.
/// fn largest(q: &Queue, mut len: usize) -> Result<Buffer<f32>, Error> {
///     loop {
///         match q.buffer::<f32>(len) {
///             Err(e) if e.is_out_of_memory() && len > 1 => len /= 2,
///             result => return result,
///         }
///     }
/// }
///
/// let q = Queue::new()?;
/// match largest(&q, 1 << 30) {
///     Ok(buffer) => println!("{} values", buffer.len()),
///     // Every later call on this device fails: end, for a supervisor to start a new process.
///     Err(e) if e.kind() == ErrorKind::DeviceLost => std::process::exit(75),
///     Err(e) => return Err(e),
/// }
/// # Ok::<(), Error>(())
/// ```
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
    #[error("kernel `{kernel}` not found in the device images of: {}{}", if searched.is_empty() { NO_IMAGES.to_string() } else { list(searched) }, did_you_mean(similar))]
    KernelNotFound {
        /// The kernel asked for.
        kernel: String,
        /// The binaries (or the bundle) searched.
        searched: Vec<String>,
        /// Kernels of the loaded images whose names are close to it (a misspelling's
        /// intended name), the closest first; may be empty.
        similar: Vec<String>,
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
    /// A driver call failed: `code` is the driver's code, `error` says it by name and number.
    /// A CUDA error that loses the context says so, and what the program can do.
    #[error("{call} failed with {error}{}", code.consequence())]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The driver's code, and which driver.
        code: DriverCode,
        /// Its error, by name and number.
        error: String,
    },
    /// A driver call made for a kernel's launch failed.
    #[error("kernel `{kernel}`: {call} failed with {error}{}", code.consequence())]
    KernelCall {
        /// The kernel launched.
        kernel: String,
        /// The driver function.
        call: &'static str,
        /// The driver's code, and which driver.
        code: DriverCode,
        /// Its error, by name and number.
        error: String,
    },
    /// An argument the call cannot take, named with what it takes.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The device lacks what the call needs (device allocations, on a device without them):
    /// the call, the device, and which devices have it or what to use instead.
    #[error("unsupported: {0}")]
    Unsupported(String),
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
        /// The error reading the file, when that is why.
        source: Option<std::io::Error>,
    },
}

impl Error {
    /// What kind of failure this is: what a program can do about it (see the module's
    /// documentation). A driver's error is of the kind its code means ([`DriverCode::kind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NoDevice { .. } | Error::KernelNotFound { .. } => ErrorKind::NotFound,
            Error::UnresolvedSymbol { .. }
            | Error::MissingVirtualFunctions { .. }
            | Error::CallCycle { .. }
            | Error::DuplicateSymbol { .. } => ErrorKind::Link,
            Error::Build { .. } | Error::Translate(_) => ErrorKind::Build,
            Error::KernelNotSupported { .. } | Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::Driver { code, .. } | Error::KernelCall { code, .. } => code.kind(),
            Error::InvalidArgument(_) | Error::InvalidObject(_) => ErrorKind::InvalidArgument,
            Error::DeviceLibrary { source: Some(io), .. }
                if io.kind() == std::io::ErrorKind::NotFound =>
            {
                ErrorKind::NotFound
            }
            Error::DeviceLibrary { .. } => ErrorKind::InvalidArgument,
        }
    }

    /// Whether the device's memory, or the driver's resources or host memory, ran out: free
    /// buffers, or retry smaller. The same as `kind() == ErrorKind::OutOfMemory`.
    pub fn is_out_of_memory(&self) -> bool {
        self.kind() == ErrorKind::OutOfMemory
    }

    /// The driver's own code, where a driver call failed: a negative `cl_int` for OpenCL
    /// (`-5` for `CL_OUT_OF_RESOURCES`), a `CUresult` for CUDA (`2` for
    /// `CUDA_ERROR_OUT_OF_MEMORY`). [`driver_code`](Error::driver_code) says which driver.
    pub fn code(&self) -> Option<i32> {
        self.driver_code().map(DriverCode::value)
    }

    /// The driver's own code with the driver it came from, where a driver call failed.
    pub fn driver_code(&self) -> Option<DriverCode> {
        match self {
            Error::Driver { code, .. } | Error::KernelCall { code, .. } => Some(*code),
            _ => None,
        }
    }
}

// `Error` crosses threads (an `Event` awaited on one thread fails with the error a driver
// thread saw) and boxes into `Box<dyn std::error::Error + Send + Sync>`: checked here.
const _: () = {
    const fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Error>();
};

// The OpenCL codes (`CL/cl.h`) that say more than that a call failed.
const CL_DEVICE_NOT_FOUND: i32 = -1;
const CL_DEVICE_NOT_AVAILABLE: i32 = -2;
const CL_COMPILER_NOT_AVAILABLE: i32 = -3;
const CL_MEM_OBJECT_ALLOCATION_FAILURE: i32 = -4;
const CL_OUT_OF_RESOURCES: i32 = -5;
const CL_OUT_OF_HOST_MEMORY: i32 = -6;
const CL_IMAGE_FORMAT_NOT_SUPPORTED: i32 = -10;
const CL_BUILD_PROGRAM_FAILURE: i32 = -11;
const CL_MISALIGNED_SUB_BUFFER_OFFSET: i32 = -13;
const CL_COMPILE_PROGRAM_FAILURE: i32 = -15;
const CL_LINKER_NOT_AVAILABLE: i32 = -16;
const CL_LINK_PROGRAM_FAILURE: i32 = -17;
const CL_INVALID_VALUE: i32 = -30;
const CL_INVALID_KERNEL_NAME: i32 = -46;
const CL_INVALID_WORK_GROUP_SIZE: i32 = -54;
const CL_INVALID_WORK_ITEM_SIZE: i32 = -55;
const CL_INVALID_GLOBAL_OFFSET: i32 = -56;
const CL_INVALID_BUFFER_SIZE: i32 = -61;
const CL_INVALID_GLOBAL_WORK_SIZE: i32 = -63;
const CL_PLATFORM_NOT_FOUND_KHR: i32 = -1001;

/// What an OpenCL API error code means to a program.
fn opencl_kind(code: i32) -> ErrorKind {
    match code {
        CL_MEM_OBJECT_ALLOCATION_FAILURE | CL_OUT_OF_RESOURCES | CL_OUT_OF_HOST_MEMORY => {
            ErrorKind::OutOfMemory
        }
        CL_DEVICE_NOT_AVAILABLE => ErrorKind::DeviceLost,
        CL_DEVICE_NOT_FOUND | CL_PLATFORM_NOT_FOUND_KHR | CL_INVALID_KERNEL_NAME => {
            ErrorKind::NotFound
        }
        CL_COMPILER_NOT_AVAILABLE | CL_LINKER_NOT_AVAILABLE | CL_IMAGE_FORMAT_NOT_SUPPORTED => {
            ErrorKind::Unsupported
        }
        // A buffer larger than the device allocates at once (CL_DEVICE_MAX_MEM_ALLOC_SIZE)
        // is refused whatever memory is free: a smaller one is another call, not a retry.
        CL_INVALID_VALUE
        | CL_MISALIGNED_SUB_BUFFER_OFFSET
        | CL_INVALID_WORK_GROUP_SIZE
        | CL_INVALID_WORK_ITEM_SIZE
        | CL_INVALID_GLOBAL_OFFSET
        | CL_INVALID_BUFFER_SIZE
        | CL_INVALID_GLOBAL_WORK_SIZE => ErrorKind::InvalidArgument,
        CL_BUILD_PROGRAM_FAILURE | CL_COMPILE_PROGRAM_FAILURE | CL_LINK_PROGRAM_FAILURE => {
            ErrorKind::Build
        }
        _ => ErrorKind::Driver,
    }
}

// The CUDA codes (`cuda.h`'s `CUresult`) that say more than that a call failed.
const CUDA_ERROR_INVALID_VALUE: i32 = 1;
const CUDA_ERROR_OUT_OF_MEMORY: i32 = 2;
const CUDA_ERROR_DEVICE_UNAVAILABLE: i32 = 46;
const CUDA_ERROR_NO_DEVICE: i32 = 100;
const CUDA_ERROR_NO_BINARY_FOR_GPU: i32 = 209;
const CUDA_ERROR_ECC_UNCORRECTABLE: i32 = 214;
const CUDA_ERROR_INVALID_PTX: i32 = 218;
const CUDA_ERROR_NVLINK_UNCORRECTABLE: i32 = 220;
const CUDA_ERROR_JIT_COMPILER_NOT_FOUND: i32 = 221;
const CUDA_ERROR_UNSUPPORTED_PTX_VERSION: i32 = 222;
const CUDA_ERROR_JIT_COMPILATION_DISABLED: i32 = 223;
const CUDA_ERROR_NOT_FOUND: i32 = 500;
const CUDA_ERROR_ILLEGAL_ADDRESS: i32 = 700;
const CUDA_ERROR_LAUNCH_TIMEOUT: i32 = 702;
const CUDA_ERROR_CONTEXT_IS_DESTROYED: i32 = 709;
const CUDA_ERROR_ASSERT: i32 = 710;
/// The first of the faults of a running kernel numbered together, up to
/// [`CUDA_ERROR_LAUNCH_FAILED`]: 714 HARDWARE_STACK_ERROR, 715 ILLEGAL_INSTRUCTION, 716
/// MISALIGNED_ADDRESS, 717 INVALID_ADDRESS_SPACE, 718 INVALID_PC, 719 LAUNCH_FAILED.
const CUDA_ERROR_HARDWARE_STACK_ERROR: i32 = 714;
const CUDA_ERROR_LAUNCH_FAILED: i32 = 719;
const CUDA_ERROR_NOT_SUPPORTED: i32 = 801;

/// What a CUDA driver API result means to a program.
fn cuda_kind(code: i32) -> ErrorKind {
    match code {
        CUDA_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        // Each loses the context, or the device (`DriverCode::consequence` says which).
        CUDA_ERROR_ILLEGAL_ADDRESS
        | CUDA_ERROR_LAUNCH_TIMEOUT
        | CUDA_ERROR_CONTEXT_IS_DESTROYED
        | CUDA_ERROR_ASSERT
        | CUDA_ERROR_HARDWARE_STACK_ERROR..=CUDA_ERROR_LAUNCH_FAILED
        | CUDA_ERROR_ECC_UNCORRECTABLE
        | CUDA_ERROR_NVLINK_UNCORRECTABLE
        | CUDA_ERROR_DEVICE_UNAVAILABLE => ErrorKind::DeviceLost,
        CUDA_ERROR_INVALID_VALUE => ErrorKind::InvalidArgument,
        CUDA_ERROR_NO_DEVICE | CUDA_ERROR_NOT_FOUND => ErrorKind::NotFound,
        CUDA_ERROR_NO_BINARY_FOR_GPU
        | CUDA_ERROR_JIT_COMPILER_NOT_FOUND
        | CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | CUDA_ERROR_JIT_COMPILATION_DISABLED
        | CUDA_ERROR_NOT_SUPPORTED => ErrorKind::Unsupported,
        CUDA_ERROR_INVALID_PTX => ErrorKind::Build,
        _ => ErrorKind::Driver,
    }
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

/// `; did you mean `a` (or `b`, `c`)?` for names close to a kernel's, or nothing.
fn did_you_mean(similar: &[String]) -> String {
    match similar {
        [] => String::new(),
        [first] => format!("; did you mean `{first}`?"),
        [first, rest @ ..] => {
            let rest: Vec<String> = rest.iter().map(|n| format!("`{n}`")).collect();
            format!("; did you mean `{first}` (or {})?", rest.join(", "))
        }
    }
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
        let none =
            Error::KernelNotFound { kernel: "diamond".into(), searched: vec![], similar: vec![] }
                .to_string();
        assert!(
            none.starts_with("kernel `diamond` not found in the device images of: (none: no loaded binary carries device images"),
            "{none}"
        );
        assert!(
            none.contains("linker = \"/path/to/sycl-ld\"") && none.contains("linker-flavor=gcc"),
            "{none}"
        );
        let some = Error::KernelNotFound {
            kernel: "k".into(),
            searched: vec!["/bin/app".into()],
            similar: vec![],
        }
        .to_string();
        assert_eq!(some, "kernel `k` not found in the device images of: /bin/app");
        let close = Error::KernelNotFound {
            kernel: "adone".into(),
            searched: vec!["/bin/app".into()],
            similar: vec!["add_one".into(), "add_two".into()],
        }
        .to_string();
        assert_eq!(
            close,
            "kernel `adone` not found in the device images of: /bin/app; did you mean \
             `add_one` (or `add_two`)?"
        );
    }

    fn driver(call: &'static str, code: DriverCode, error: &str) -> Error {
        Error::Driver { call, code, error: error.into() }
    }

    /// Each kind, code and out-of-memory answer for a representative of each variant and of
    /// each class of driver code.
    #[test]
    fn each_error_has_the_kind_and_code_a_program_acts_on() {
        use ErrorKind::*;
        let list = || vec!["/bin/app".to_string()];
        let cases: Vec<(Error, ErrorKind, Option<i32>)> = vec![
            (Error::NoDevice { problem: "none".into(), available: vec![] }, NotFound, None),
            (
                Error::KernelNotFound { kernel: "k".into(), searched: list(), similar: vec![] },
                NotFound,
                None,
            ),
            (
                Error::UnresolvedSymbol {
                    symbol: "f".into(),
                    kernel: "k".into(),
                    searched: list(),
                    hidden: vec![],
                },
                Link,
                None,
            ),
            (
                Error::MissingVirtualFunctions {
                    set: "s".into(),
                    kernel: "k".into(),
                    searched: list(),
                },
                Link,
                None,
            ),
            (Error::CallCycle { kernel: "k".into(), cycle: list() }, Link, None),
            (Error::DuplicateSymbol { symbol: "f".into(), providers: list() }, Link, None),
            (
                Error::Build {
                    device: "d".into(),
                    what: "w".into(),
                    log: "".into(),
                    hint: "h".into(),
                },
                Build,
                None,
            ),
            (Error::Translate("llvm-spirv-15 not found".into()), Build, None),
            (
                Error::KernelNotSupported {
                    kernel: "k".into(),
                    device: "d".into(),
                    reason: "fp64".into(),
                },
                Unsupported,
                None,
            ),
            (Error::InvalidArgument("n".into()), InvalidArgument, None),
            (Error::Unsupported("n".into()), Unsupported, None),
            (Error::InvalidObject("n".into()), InvalidArgument, None),
            (
                Error::DeviceLibrary {
                    path: "/no/lib.so".into(),
                    reason: "No such file or directory (os error 2)".into(),
                    source: Some(std::io::ErrorKind::NotFound.into()),
                },
                NotFound,
                None,
            ),
            (
                Error::DeviceLibrary {
                    path: "/lib.so".into(),
                    reason: "malformed device library: bad magic".into(),
                    source: None,
                },
                InvalidArgument,
                None,
            ),
            // OpenCL: memory and resources run out; a buffer over the device's largest
            // allocation is the call's fault; a device that went away.
            (driver("clCreateBuffer", DriverCode::OpenCl(-4), "e"), OutOfMemory, Some(-4)),
            (driver("clEnqueueNDRangeKernel", DriverCode::OpenCl(-5), "e"), OutOfMemory, Some(-5)),
            (driver("clCreateContext", DriverCode::OpenCl(-6), "e"), OutOfMemory, Some(-6)),
            (driver("clCreateBuffer", DriverCode::OpenCl(-61), "e"), InvalidArgument, Some(-61)),
            (driver("clFinish", DriverCode::OpenCl(-2), "e"), DeviceLost, Some(-2)),
            (driver("clCreateKernel", DriverCode::OpenCl(-46), "e"), NotFound, Some(-46)),
            (driver("clCompileProgram", DriverCode::OpenCl(-3), "e"), Unsupported, Some(-3)),
            (driver("clGetEventInfo", DriverCode::OpenCl(-58), "e"), Driver, Some(-58)),
            // An execution status: CL_OUT_OF_RESOURCES there is a GPU kernel's fault, -14 an
            // earlier command's failure, -1 what a program set a user event to.
            (driver("the enqueued command", DriverCode::OpenClStatus(-5), "e"), Driver, Some(-5)),
            (
                driver("the enqueued command", DriverCode::OpenClStatus(-4), "e"),
                OutOfMemory,
                Some(-4),
            ),
            (
                driver("the enqueued command", DriverCode::OpenClStatus(-2), "e"),
                DeviceLost,
                Some(-2),
            ),
            (driver("the enqueued command", DriverCode::OpenClStatus(-14), "e"), Driver, Some(-14)),
            (driver("the enqueued command", DriverCode::OpenClStatus(-1), "e"), Driver, Some(-1)),
            // CUDA: out of memory; each fault that loses the context; the rest.
            (driver("cuMemAlloc_v2", DriverCode::Cuda(2), "e"), OutOfMemory, Some(2)),
            (driver("cuLaunchKernel", DriverCode::Cuda(1), "e"), InvalidArgument, Some(1)),
            (driver("cuModuleLoadData", DriverCode::Cuda(209), "e"), Unsupported, Some(209)),
            (driver("cuModuleGetFunction", DriverCode::Cuda(500), "e"), NotFound, Some(500)),
            (driver("cuLaunchKernel", DriverCode::Cuda(701), "e"), Driver, Some(701)),
            (driver("cuStreamSynchronize", DriverCode::Cuda(999), "e"), Driver, Some(999)),
        ];
        let lost = [46, 214, 220, 700, 702, 709, 710, 714, 715, 716, 717, 718, 719];
        let lost = lost.map(|code| {
            (driver("cuEventSynchronize", DriverCode::Cuda(code), "e"), DeviceLost, Some(code))
        });
        for (error, kind, code) in cases.into_iter().chain(lost) {
            assert_eq!(error.kind(), kind, "{error}");
            assert_eq!(error.code(), code, "{error}");
            assert_eq!(error.is_out_of_memory(), kind == OutOfMemory, "{error}");
            assert_eq!(error.driver_code().map(DriverCode::value), code, "{error}");
        }
    }

    /// A kernel's driver call keeps the code, and so the kind, of the driver's error.
    #[test]
    fn a_kernels_driver_call_has_the_kind_of_its_code() {
        let e = Error::KernelCall {
            kernel: "k".into(),
            call: "clEnqueueNDRangeKernel",
            code: DriverCode::OpenCl(-5),
            error: "CL_OUT_OF_RESOURCES (-5)".into(),
        };
        assert!(e.is_out_of_memory());
        assert_eq!((e.code(), e.driver_code()), (Some(-5), Some(DriverCode::OpenCl(-5))));
        assert_eq!(
            e.to_string(),
            "kernel `k`: clEnqueueNDRangeKernel failed with CL_OUT_OF_RESOURCES (-5)"
        );
    }

    /// Every CUDA code that loses the context or the device says so, and no other does:
    /// the words follow the kind, over every code the driver defines (0 to 999).
    #[test]
    fn a_cuda_error_says_the_context_is_lost_exactly_when_it_is() {
        for code in 0..1000 {
            let e = driver("cuCtxSynchronize", DriverCode::Cuda(code), "X");
            let said = e.to_string() != "cuCtxSynchronize failed with X";
            assert_eq!(said, e.kind() == ErrorKind::DeviceLost, "code {code}: {e}");
        }
        // OpenCL's errors are the driver's words alone, a lost device's too.
        let e = driver("clFinish", DriverCode::OpenCl(-2), "CL_DEVICE_NOT_AVAILABLE (-2)");
        assert_eq!(e.to_string(), "clFinish failed with CL_DEVICE_NOT_AVAILABLE (-2)");
    }

    #[test]
    fn a_lost_cuda_context_is_said_to_be_lost_with_what_to_do() {
        let fault = Error::KernelCall {
            kernel: "oob".into(),
            call: "cuEventSynchronize",
            code: DriverCode::Cuda(700),
            error: "CUDA_ERROR_ILLEGAL_ADDRESS (700)".into(),
        };
        assert_eq!(
            fault.to_string(),
            "kernel `oob`: cuEventSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS (700): the \
             CUDA context is lost (a kernel faulted): every later CUDA call in this process fails \
             with this error, on every queue and buffer of the device; end the process and start \
             a new one (CUDA documents no way to recover the context within a process)"
        );
        let later =
            driver("cuMemAlloc_v2", DriverCode::Cuda(719), "CUDA_ERROR_LAUNCH_FAILED (719)");
        assert!(
            later.to_string().starts_with(
                "cuMemAlloc_v2 failed with CUDA_ERROR_LAUNCH_FAILED (719): the CUDA context is \
                 lost (a kernel faulted): every later CUDA call"
            ),
            "{later}"
        );
        let timeout =
            driver("cuStreamSynchronize", DriverCode::Cuda(702), "CUDA_ERROR_LAUNCH_TIMEOUT (702)");
        assert!(
            timeout.to_string().contains(
                "(702): the CUDA context is lost (a kernel ran past the time limit of a GPU that \
                 drives a display)"
            ),
            "{timeout}"
        );
        let destroyed =
            driver("cuMemAlloc_v2", DriverCode::Cuda(709), "CUDA_ERROR_CONTEXT_IS_DESTROYED (709)");
        assert!(
            destroyed
                .to_string()
                .contains("(709): the CUDA context was destroyed elsewhere in this process"),
            "{destroyed}"
        );
        let ecc =
            driver("cuMemcpyDtoH_v2", DriverCode::Cuda(214), "CUDA_ERROR_ECC_UNCORRECTABLE (214)");
        assert!(
            ecc.to_string().contains("(214): the GPU reported an uncorrectable hardware error"),
            "{ecc}"
        );
        let busy = driver(
            "cuDevicePrimaryCtxRetain",
            DriverCode::Cuda(46),
            "CUDA_ERROR_DEVICE_UNAVAILABLE (46)",
        );
        assert!(
            busy.to_string().contains("(46): the GPU is busy or closed to this process"),
            "{busy}"
        );
        // Out of memory is no lost context: the driver's words alone.
        let oom = driver("cuMemAlloc_v2", DriverCode::Cuda(2), "CUDA_ERROR_OUT_OF_MEMORY (2)");
        assert_eq!(oom.to_string(), "cuMemAlloc_v2 failed with CUDA_ERROR_OUT_OF_MEMORY (2)");
    }

    /// The one error that wraps another gives it as its source, through a box as well.
    #[test]
    fn a_device_library_that_cannot_be_read_has_the_io_error_as_its_source() {
        use std::error::Error as _;
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = Error::DeviceLibrary {
            path: "/lib.so".into(),
            reason: io.to_string(),
            source: Some(io),
        };
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e);
        let source = boxed.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(source.map(std::io::Error::kind), Some(std::io::ErrorKind::PermissionDenied));
        assert!(Error::InvalidArgument("x".into()).source().is_none());
        assert!(driver("clFinish", DriverCode::OpenCl(-5), "e").source().is_none());
    }

    #[test]
    fn debug_prints_the_message_a_main_returning_the_error_shows() {
        let e = Error::InvalidArgument("kernel `k` takes 1 argument; got 0".into());
        assert_eq!(format!("{e:?}"), e.to_string());
        assert_eq!(format!("{e:?}"), "invalid argument: kernel `k` takes 1 argument; got 0");
    }
}
