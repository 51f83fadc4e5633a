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
//! Environment: `SYCL_DEVICE` picks a device by a case-insensitive part of its platform or
//! device name; `SYCL_TRACE=1` prints one line per event (`sycl: discover …`).

mod bundle;
mod cache;
mod cl;
mod device;
mod discovery;
mod library;
mod loaded;
mod program;
mod queue;
mod registry;
mod resolve;
mod trace;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

pub use cache::{DIR_ENV as CACHE_DIR_ENV, DISABLE_ENV as CACHE_DISABLE_ENV, MAX_BYTES_ENV as CACHE_MAX_BYTES_ENV};
pub use bundle::{
    build, compile, get_kernel_bundle, get_kernel_bundle_for, has_kernel_bundle, join, link, BuildProperty,
    BundleState, DeviceImage, Executable, Input, KernelBundle, Object, SpecConstant,
};
pub use library::{load_device_library, load_device_library_with, DeviceLibrary, LibraryScope};
pub use queue::{Buffer, KernelArg, Launch, Pod, Queue};
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
    #[error("no OpenCL device {wanted}; available: {}", list(available))]
    NoDevice { wanted: String, available: Vec<String> },
    #[error("kernel `{kernel}` not found in the device images of: {}", list(searched))]
    KernelNotFound { kernel: String, searched: Vec<String> },
    #[error("unresolved device symbol `{symbol}` imported for kernel `{kernel}`; searched: {}", list(searched))]
    UnresolvedSymbol { symbol: String, kernel: String, searched: Vec<String> },
    #[error("{what} failed on {device}{}", if log.is_empty() { String::new() } else { format!(":\n{log}") })]
    Build { device: String, what: String, log: String },
    #[error("kernel_not_supported: {reason} (kernel `{kernel}` on {device})")]
    KernelNotSupported { kernel: String, device: String, reason: String },
    #[error("no image provides virtual-function set `{set}`, which kernel `{kernel}` uses; searched: {}", list(searched))]
    MissingVirtualFunctions { set: String, kernel: String, searched: Vec<String> },
    #[error("device symbol `{symbol}` is exported by more than one binary: {} (strict mode)", providers.join(", "))]
    DuplicateSymbol { symbol: String, providers: Vec<String> },
    #[error("preparing device code for a device without SPIR-V: {0}")]
    Translate(String),
    #[error("{call} failed with OpenCL error {code}")]
    OpenCl { call: &'static str, code: i32 },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("invalid object: {0}")]
    InvalidObject(String),
    #[error("device library {path}: {reason}")]
    DeviceLibrary { path: String, reason: String },
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

/// Compiles SPIR-V ahead of time into a compiled-object program binary for the first device
/// whose platform or device name contains `device` (case-insensitive); used by `sycl-ld` for
/// native targets. The binary can be linked at run time with other objects of that device.
pub fn compile_object_for(device: &str, spirv: &[u8]) -> Result<Vec<u8>, Error> {
    let devices = cl::devices()?;
    let info = find_device(&devices, Some(device))?;
    let context = cl::Context::new(info.id)?;
    let program = cl::Program::from_il(&context, spirv)?;
    program.compile(info.id, "").map_err(|(code, log)| Error::Build {
        device: info.name.clone(),
        what: format!("ahead-of-time compilation (OpenCL error {code})"),
        log,
    })?;
    program.binary()
}

fn describe(d: &cl::DeviceInfo) -> String {
    format!("{} / {}", d.platform, d.name)
}

/// What a device name pattern is matched against: platform, device, and the configured
/// target it is (`pocl_cpu`, `intel_cpu_x86_64`), so that `pocl` and `intel` both work.
fn match_text(d: &cl::DeviceInfo) -> String {
    let target = device::Capabilities::of(d).target.unwrap_or_default();
    format!("{} / {} / {target}", d.platform, d.name).to_lowercase()
}

/// The device `wanted` names (part of its platform or device name), or the first that
/// accepts SPIR-V.
fn find_device<'d>(devices: &'d [cl::DeviceInfo], wanted: Option<&str>) -> Result<&'d cl::DeviceInfo, Error> {
    let chosen = match wanted {
        Some(w) => {
            let w = w.to_lowercase();
            devices.iter().find(|d| match_text(d).contains(&w))
        }
        None => devices.iter().find(|d| d.il_version.contains("SPIR-V")),
    };
    chosen.ok_or_else(|| Error::NoDevice {
        wanted: match wanted {
            Some(w) => format!("matching {w:?}"),
            None => "accepts SPIR-V".into(),
        },
        available: devices.iter().map(describe).collect(),
    })
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

    /// The device `wanted` names (part of its platform or device name), or `SYCL_DEVICE`'s,
    /// or the first that accepts SPIR-V.
    fn device(&self, wanted: Option<&str>) -> Result<Arc<DeviceState>, Error> {
        self.guard_vectorizer();
        let devices = cl::devices()?;
        let from_env = std::env::var(DEVICE_ENV).ok().filter(|v| !v.is_empty());
        let wanted = wanted.map(str::to_string).or(from_env.clone());
        let info = find_device(&devices, wanted.as_deref()).map_err(|e| match e {
            Error::NoDevice { available, .. } if from_env.is_some() && wanted == from_env => Error::NoDevice {
                wanted: format!("matching {DEVICE_ENV}={}", wanted.as_deref().unwrap_or_default()),
                available,
            },
            e => e,
        })?;
        let mut map = self.devices.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = map.get(&info.id) {
            return Ok(state.clone());
        }
        trace!("device", "{}", describe(info));
        let state = Arc::new(DeviceState::new(info)?);
        map.insert(info.id, state.clone());
        Ok(state)
    }
}
