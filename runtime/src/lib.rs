//! `sycl-runtime`: runs kernels whose device code lives in this executable and in the shared
//! libraries it loaded, linking across them at run time.
//!
//! At first use the runtime reads the device images that `sycl-ld` embedded in every loaded
//! binary (from memory, in the dynamic loader's order), indexes kernels and exported symbols,
//! and for each kernel collects the images that resolve its imports, compiles each once,
//! links them through the device's driver (OpenCL, or the CUDA driver for NVIDIA GPUs) and
//! caches the program.
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
//! Environment: `SYCL_DEVICE` picks the device (`intel`, `pocl`, `cuda`, `cpu`, `pocl:0`: see
//! [`Queue::with_device`]); `SYCL_TRACE=1` prints one line per event (`sycl: discover …`).

// The rooms, in pipeline order; each imports only those above it (and `error`, `trace`).
mod backend;
mod build;
mod discovery;
mod error;
mod launch;
mod process;
mod registry;
mod resolve;
mod trace;

pub use build::disk::{
    DIR_ENV as CACHE_DIR_ENV, DISABLE_ENV as CACHE_DISABLE_ENV,
    MAX_BYTES_ENV as CACHE_MAX_BYTES_ENV,
};
pub use discovery::files::{
    load_device_library, load_device_library_with, DeviceLibrary, LibraryScope,
};
pub use error::Error;
pub use launch::bundle::{
    build, compile, get_kernel_bundle, get_kernel_bundle_for, has_kernel_bundle, join, link,
    BuildProperty, BundleState, DeviceImage, Executable, Input, KernelBundle, Object, SpecConstant,
};
pub use launch::queue::{Buffer, GlobalRange, KernelArg, Launch, Local, NoGlobalRange, Pod, Queue};
pub use process::{compile_object_for, DEVICE_ENV};
pub use resolve::STRICT_ENV;

/// Entry points for the fuzz targets, which check decoders no user calls directly.
#[doc(hidden)]
pub mod fuzz_support {
    /// Checks `bytes` as the persistent-cache entry of `key`; the payload when it is intact.
    pub fn decode_cache_entry<'a>(bytes: &'a [u8], key: &str) -> Result<&'a [u8], String> {
        crate::build::disk::decode_entry(bytes, key)
    }

    /// The bytes the persistent cache writes for `payload` under `key`.
    pub fn encode_cache_entry(key: &str, payload: &[u8]) -> Vec<u8> {
        crate::build::disk::encode_entry(key, payload)
    }
}

/// Entry points for the tests, which make the driver fail in ways loaded images should not.
#[doc(hidden)]
pub mod test_support {
    use std::sync::Arc;

    use crate::backend::{Device, Object, Program};
    use crate::build::Step;
    use crate::Error;

    /// Compiles each OpenCL C source for the OpenCL device `selector` picks and links the
    /// objects as the runtime links images, so a test sees the error a link the driver refuses
    /// gives.
    pub fn link_sources(selector: &str, sources: &[&str]) -> Result<(), Error> {
        let state = crate::process::runtime().device(Some(selector))?;
        let Device::OpenCl(device) = &state.device else {
            return Err(Error::InvalidArgument(format!("`{selector}` is not an OpenCL device")));
        };
        let mut objects = Vec::new();
        for source in sources {
            let object = device.compile_source(source).map_err(|f| {
                state.failed(Step::Compile, format!("compiling source {}", objects.len()), "", f)
            })?;
            objects.push(Arc::new(Object::OpenCl(object)));
        }
        let names: Vec<String> = (0..objects.len()).map(|i| format!("source {i}")).collect();
        state.link_objects(&objects, "", &names).map(drop)
    }

    /// Builds OpenCL C `source` on the queue's (OpenCL) device as the driver builds a source
    /// itself (`clCreateProgramWithSource`, `clBuildProgram` with `options`) and runs `kernel`
    /// over `global` work-items, so that a test can compare the driver's own build of a source
    /// with the program the runtime makes of the same source's images.
    pub fn run_source(
        queue: &crate::Queue,
        source: &str,
        options: &str,
        kernel: &str,
        args: &[&dyn crate::KernelArg],
        global: usize,
    ) -> Result<(), Error> {
        let state = queue.device();
        let Device::OpenCl(device) = &state.device else {
            return Err(Error::InvalidArgument("building a source needs an OpenCL device".into()));
        };
        let program = device
            .build_source(source, options)
            .map_err(|f| state.failed(Step::Build, "building a source".into(), options, f))?;
        let args: Vec<_> = args.iter().map(|a| a.to_arg()).collect();
        queue.run_program(&Arc::new(Program::OpenCl(program)), kernel, &args, &[global])
    }
}

/// Entry points for the benchmarks, which measure internals no user calls directly.
#[doc(hidden)]
pub mod bench_support {
    use sycl_format::ImageSet;

    use crate::registry::{Registry, Variant};

    /// Finds and indexes the images of every loaded binary from scratch, as a process's
    /// first discovery does; returns how many images there are.
    pub fn discover() -> usize {
        crate::discovery::Discovery::new()
            .registry()
            .binaries
            .iter()
            .map(|b| b.image_count as usize)
            .sum()
    }

    /// The images a first launch of `kernel` on the device `selector` picks would link, in
    /// link order, as the binaries hold them (PTX text for a CUDA GPU): for benchmarks that
    /// make the same driver calls by hand. Opens the device; builds nothing.
    pub fn linked_images(selector: &str, kernel: &str) -> Result<Vec<Vec<u8>>, crate::Error> {
        let runtime = crate::process::runtime();
        let device = runtime.device(Some(selector))?;
        let registry = runtime.registry();
        let collected =
            device.images_for(&registry, kernel, device.variants(&Default::default()))?;
        Ok(collected.images.iter().map(|&id| registry.image(id).data.clone()).collect())
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

/// Includes the kernel-name constants that `sycl_build::Build::compile(NAME)` generated.
#[macro_export]
macro_rules! include_kernels {
    ($name:literal) => {
        include!(concat!(env!("OUT_DIR"), "/sycl-kernels-", $name, ".rs"));
    };
}
