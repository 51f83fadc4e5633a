//! `sycl-runtime`: runs kernels whose device code lives in this executable and in the shared
//! libraries it loaded, linking across them at run time.
//!
//! At first use the runtime reads the device images that `sycl-ld` embedded in every loaded
//! binary (from memory, in the dynamic loader's order), indexes kernels and exported symbols,
//! and for each kernel collects the images that resolve its imports, compiles each once,
//! links them through OpenCL and caches the program.
//!
//! ```no_run
//! mod kernels {
//!     // What `sycl_runtime::include_kernels!("app");` brings in after `Build::compile("app")`:
//!     pub const APP_KERNEL: &str = "app_kernel";
//! }
//!
//! let q = sycl_runtime::Queue::new()?;
//! let out = q.buffer::<i32>(8)?;
//! q.launch(kernels::APP_KERNEL).arg(&out).global([8]).run()?;
//! println!("{:?}", out.read()?);
//! # Ok::<(), sycl_runtime::Error>(())
//! ```
//!
//! Environment: `SYCL_DEVICE` picks the device (`intel`, `pocl`, `cpu`, `pocl:0`: see
//! [`Queue::with_device`]); `SYCL_TRACE=1` prints one line per event (`sycl: discover …`).

mod bundle;
mod cache;
mod cl;
mod cycles;
mod device;
mod discovery;
mod library;
mod loaded;
mod program;
mod queue;
mod registry;
mod resolve;
mod select;
mod trace;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

pub use cache::{DIR_ENV as CACHE_DIR_ENV, DISABLE_ENV as CACHE_DISABLE_ENV, MAX_BYTES_ENV as CACHE_MAX_BYTES_ENV};
pub use bundle::{
    build, compile, get_kernel_bundle, get_kernel_bundle_for, has_kernel_bundle, join, link, BuildProperty,
    BundleState, DeviceImage, Executable, Input, KernelBundle, Object, SpecConstant,
};
pub use library::{load_device_library, load_device_library_with, DeviceLibrary, LibraryScope};
pub use queue::{Buffer, GlobalRange, KernelArg, Launch, Local, NoGlobalRange, Pod, Queue};
pub use resolve::STRICT_ENV;

use cache::DiskCache;
use cl::DeviceId;
use discovery::Discovery;
use program::DeviceState;
use registry::Registry;
use trace::trace;

/// Entry points for the fuzz targets, which check decoders no user calls directly.
#[doc(hidden)]
pub mod fuzz_support {
    /// Checks `bytes` as the persistent-cache entry of `key`; the payload when it is intact.
    pub fn decode_cache_entry<'a>(bytes: &'a [u8], key: &str) -> Result<&'a [u8], String> {
        crate::cache::decode_entry(bytes, key)
    }

    /// The bytes the persistent cache writes for `payload` under `key`.
    pub fn encode_cache_entry(key: &str, payload: &[u8]) -> Vec<u8> {
        crate::cache::encode_entry(key, payload)
    }
}

/// Entry points for the tests, which make the driver fail in ways loaded images should not.
#[doc(hidden)]
pub mod test_support {
    use std::sync::Arc;

    use crate::cl::Program;
    use crate::Error;

    /// Compiles each OpenCL C source for the device `selector` picks and links the objects as
    /// the runtime links images, so a test sees the error a link the driver refuses gives.
    pub fn link_sources(selector: &str, sources: &[&str]) -> Result<(), Error> {
        let device = crate::runtime().device(Some(selector))?;
        let mut objects = Vec::new();
        for source in sources {
            let program = Program::from_source(&device.context, source)?;
            program.compile(device.id, "").map_err(|(code, log)| Error::Build {
                device: device.name.clone(),
                what: format!("compiling source {} ({})", objects.len(), crate::cl::error_name(code)),
                hint: crate::program::hint(crate::program::Step::Compile, code, &log, ""),
                log,
            })?;
            objects.push(Arc::new(program));
        }
        let names: Vec<String> = (0..objects.len()).map(|i| format!("source {i}")).collect();
        device.link_objects(&objects, "", &names).map(drop)
    }

    /// Builds OpenCL C `source` on the queue's device as the driver builds a source itself
    /// (`clCreateProgramWithSource`, `clBuildProgram` with `options`) and runs `kernel` over
    /// `global` work-items, so that a test can compare the driver's own build of a source with
    /// the program the runtime makes of the same source's images.
    pub fn run_source(
        queue: &crate::Queue,
        source: &str,
        options: &str,
        kernel: &str,
        args: &[&dyn crate::KernelArg],
        global: usize,
    ) -> Result<(), Error> {
        let device = queue.device();
        let program = Program::from_source(&device.context, source)?;
        program.build(device.id, options).map_err(|(code, log)| Error::Build {
            device: device.name.clone(),
            what: format!("building a source ({})", crate::cl::error_name(code)),
            hint: crate::program::hint(crate::program::Step::Build, code, &log, options),
            log,
        })?;
        let args: Vec<_> = args.iter().map(|a| a.to_arg()).collect();
        queue.run_program(&program, kernel, &args, &[global])
    }
}

/// Entry points for the benchmarks, which measure internals no user calls directly.
#[doc(hidden)]
pub mod bench_support {
    use sycl_format::ImageSet;

    use crate::device::Variant;
    use crate::registry::Registry;

    /// Finds and indexes the images of every loaded binary from scratch, as a process's
    /// first discovery does; returns how many images there are.
    pub fn discover() -> usize {
        crate::discovery::Discovery::new().registry().binaries.iter().map(|b| b.image_count as usize).sum()
    }

    /// A registry of synthetic binaries, to time image collection against its size.
    pub struct SyntheticRegistry(Registry, [Variant; 1]);

    impl SyntheticRegistry {
        pub fn new(binaries: Vec<(String, ImageSet)>) -> SyntheticRegistry {
            SyntheticRegistry(Registry::from_binaries(binaries), [Variant::spirv()])
        }

        /// Collects `kernel`'s SPIR-V images, as a launch does on a device that takes SPIR-V
        /// (whose image forms are computed once); returns how many.
        pub fn collect(&self, kernel: &str) -> Result<usize, crate::Error> {
            crate::resolve::collect(&self.0, kernel, &self.1, &|_| true).map(|c| c.images.len())
        }
    }
}

/// Environment variable that picks the device.
pub const DEVICE_ENV: &str = "SYCL_DEVICE";

/// Includes the kernel-name constants that `sycl_build::Build::compile(NAME)` generated.
#[macro_export]
macro_rules! include_kernels {
    ($name:literal) => {
        include!(concat!(env!("OUT_DIR"), "/sycl-kernels-", $name, ".rs"));
    };
}

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
    /// the device, `what` names the step, the images and the OpenCL error, `hint` what to try.
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
    #[error("{call} failed with {}", cl::error_name(*code))]
    OpenCl { call: &'static str, code: i32 },
    /// An OpenCL call made for a kernel's launch failed.
    #[error("kernel `{kernel}`: {call} failed with {}", cl::error_name(*code))]
    KernelCall { kernel: String, call: &'static str, code: i32 },
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
        return "; no OpenCL device is available (is an OpenCL runtime installed and registered in /etc/OpenCL/vendors?)"
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

/// Process-wide state, made at first use.
struct Runtime {
    /// Made at the first use of the registry (before the OpenCL drivers load, see
    /// [`Runtime::guard_vectorizer`]); kept up to date as libraries are opened and closed.
    discovery: RwLock<Option<Discovery>>,
    devices: Mutex<HashMap<DeviceId, Arc<DeviceState>>>,
    disk: Option<DiskCache>,
}

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| Runtime {
        discovery: RwLock::new(None),
        devices: Mutex::default(),
        disk: DiskCache::open(),
    })
}

/// Compiles SPIR-V ahead of time into a compiled-object program binary for the device
/// `selector` picks (see [`Queue::with_device`]); used by `sycl-ld` for native targets. The
/// binary can be linked at run time with other objects of that device.
pub fn compile_object_for(selector: &str, spirv: &[u8]) -> Result<Vec<u8>, Error> {
    let devices = cl::devices()?;
    let info = find_device(&devices, Some((selector, &format!("device selector `{selector}`"))))?;
    let context = cl::Context::new(info.id)?;
    let program = cl::Program::from_il(&context, spirv)?;
    program.compile(info.id, "").map_err(|(code, log)| Error::Build {
        device: info.name.clone(),
        what: format!("ahead-of-time compilation (clCompileProgram: {})", cl::error_name(code)),
        hint: program::hint(program::Step::Compile, code, &log, ""),
        log,
    })?;
    program.binary()
}

fn candidates(devices: &[cl::DeviceInfo]) -> Vec<select::Candidate<'_>> {
    devices
        .iter()
        .map(|d| select::Candidate { platform: &d.platform, vendor: &d.vendor, name: &d.name, device_type: d.device_type })
        .collect()
}

/// The device `wanted` picks (a selector, and where it came from), or the first that accepts
/// SPIR-V.
fn find_device<'d>(devices: &'d [cl::DeviceInfo], wanted: Option<(&str, &str)>) -> Result<&'d cl::DeviceInfo, Error> {
    let table = candidates(devices);
    let no_device = |e: select::SelectionError| Error::NoDevice { problem: e.problem, available: e.available };
    match wanted {
        Some((selector, source)) => Ok(&devices[select::select(&table, selector, source).map_err(no_device)?]),
        None => devices.iter().find(|d| d.il_version.contains("SPIR-V")).ok_or_else(|| Error::NoDevice {
            problem: format!("no OpenCL device accepts SPIR-V, so none is the default; pick one with {DEVICE_ENV}"),
            available: select::table(&table),
        }),
    }
}

impl Runtime {
    /// The current registry: brought up to date when libraries were opened or closed since
    /// the last look (reading only what appeared), dropping every program built from a
    /// binary that went.
    fn registry(&self) -> Arc<Registry> {
        if let Some(discovery) = self.discovery.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if !discovery.is_stale() {
                return discovery.registry().clone();
            }
        }
        let mut slot = self.discovery.write().unwrap_or_else(|e| e.into_inner());
        match slot.as_mut() {
            None => slot.insert(Discovery::new()).registry().clone(),
            Some(discovery) => {
                if discovery.is_stale() && discovery.refresh() {
                    for device in self.devices.lock().unwrap_or_else(|e| e.into_inner()).values() {
                        device.forget_unloaded(discovery.registry());
                    }
                }
                discovery.registry().clone()
            }
        }
    }

    /// The Intel CPU runtime's vectorizer kills the process on a `select` between function
    /// pointers, and reads its switch once, when it loads: so before any OpenCL call, if the
    /// loaded device code calls through function pointers, it is turned off for the process
    /// (unless the user set `CL_CONFIG_USE_VECTORIZER` already). Libraries opened later
    /// cannot change it any more.
    fn guard_vectorizer(&self) {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if std::env::var_os("CL_CONFIG_USE_VECTORIZER").is_none() && self.registry().uses_function_pointers {
                trace!("vectorizer", "off for this process: its device code calls through function pointers");
                // The first OpenCL call has not happened yet, so no driver thread reads the
                // environment while it changes.
                std::env::set_var("CL_CONFIG_USE_VECTORIZER", "False");
            }
        });
    }

    /// The device `wanted` picks (a selector, see [`Queue::with_device`]), or `SYCL_DEVICE`'s,
    /// or the first that accepts SPIR-V.
    fn device(&self, wanted: Option<&str>) -> Result<Arc<DeviceState>, Error> {
        self.guard_vectorizer();
        let devices = cl::devices()?;
        let from_env = std::env::var(DEVICE_ENV).ok().filter(|v| !v.trim().is_empty());
        let wanted = match (wanted, &from_env) {
            (Some(selector), _) => Some((selector.to_string(), format!("Queue::with_device({selector:?})"))),
            (None, Some(selector)) => Some((selector.clone(), format!("{DEVICE_ENV}={selector}"))),
            (None, None) => None,
        };
        let info = find_device(&devices, wanted.as_ref().map(|(s, source)| (s.as_str(), source.as_str())))?;
        let mut map = self.devices.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = map.get(&info.id) {
            return Ok(state.clone());
        }
        trace!("device", "{} / {}", info.platform, info.name);
        let state = Arc::new(DeviceState::new(info)?);
        map.insert(info.id, state.clone());
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_not_found_without_any_device_images_says_to_link_through_sycl_ld() {
        let none = Error::KernelNotFound { kernel: "diamond".into(), searched: vec![] }.to_string();
        assert!(none.starts_with("kernel `diamond` not found in the device images of: (none: no loaded binary carries device images"), "{none}");
        assert!(none.contains("linker = \"/path/to/sycl-ld\"") && none.contains("linker-flavor=gcc"), "{none}");
        let some = Error::KernelNotFound { kernel: "k".into(), searched: vec!["/bin/app".into()] }.to_string();
        assert_eq!(some, "kernel `k` not found in the device images of: /bin/app");
    }
}
