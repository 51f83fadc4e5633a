//! Building programs for a device from the plans `resolve` makes, and the caches that make
//! each build happen once: the per-device state ([`DeviceState`]). A plan is built one of
//! three ways:
//! - a device that takes SPIR-V and links: each image compiled once (`clCompileProgram`, or a
//!   native compiled object made ahead of time) and reused by every link that needs it, then
//!   `clLinkProgram`;
//! - a device that does not (PoCL): the images linked here with our own SPIR-V linker and
//!   translated to SPIR bitcode with `llvm-spirv`, then built;
//! - a self-contained ahead-of-time image for the device: built as it is.
//!
//! Linked programs are cached in memory under the nested key of DPC++'s dynamic-linking
//! design (kernel name → binary, options → program) and by image set, with one build per key
//! however many threads ask at once, and on disk (`disk`); compiled objects by image and
//! options; kernel objects by program, with the arguments last set on them. `spir` holds the runtime's own link and
//! translation for PoCL, `options` what a build is keyed by besides its images, `hint` what
//! to try after a driver refused device code.

#[cfg(test)]
mod code_identity;
pub(crate) mod disk;
mod hint;
mod options;
mod ptx;
mod spir;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sycl_format::{ImageFormat, Target};

pub(crate) use hint::Step;
pub(crate) use options::{Options, SpecValues};
pub(crate) use spir::{can_translate, for_ahead_of_time};

use crate::backend::{
    self, info, Capabilities, DeviceInfo, Failure, Kernel, Memory, Object, Program,
};
use crate::registry::{BinaryId, ImageId, Registry};
use crate::resolve::{self, ForDevice, Overridden, Plan};
use crate::trace::trace;
use crate::Error;
use disk::{DiskCache, KeyBuilder};
use hint::hint;
use spir::{link_to_spir, rewrite_for_device};

/// A digest of the sources that shape a program besides its images (this crate's, and
/// `sycl-spirv`'s and `sycl-format`'s when built from one checkout), made by the build script
/// (`code_identity.rs`): a persistent cache entry made by other code is never reused.
pub(crate) const CODE_IDENTITY: &str = env!("SYCL_RUNTIME_CODE_IDENTITY");

/// Per-device state: the opened device and the caches built on it.
pub(crate) struct DeviceState {
    pub name: String,
    /// The device as users see it (`Queue::device`).
    pub info: info::DeviceInfo,
    /// Platform, device and driver: what the persistent cache key needs of the device.
    identity: String,
    pub caps: Capabilities,
    /// `caps.forms()`, computed once: the linkable form last.
    forms: Vec<Target>,
    /// `caps.bundle_forms()`, computed once: the forms specialization values can be given to.
    specializable: Vec<Target>,
    pub device: backend::Device,
    caches: Mutex<Caches>,
}

/// Kernel objects of one program waiting for reuse, by kernel name.
type KernelPool = HashMap<String, Vec<PooledKernel>>;

/// A kernel object and the arguments last set on it: OpenCL keeps a kernel's arguments
/// between launches, so a launch with the same ones sets nothing again.
pub(crate) struct PooledKernel {
    pub kernel: Kernel,
    /// By argument index.
    pub set: Vec<SetArg>,
    /// The kernel's parameters, looked up at its first launch.
    pub signature: Option<Signature>,
}

/// A kernel's parameters as its image records them (`params: None`: no record, the driver
/// alone checks the arguments), and what the check read of the last arguments it accepted.
pub(crate) struct Signature {
    pub params: Option<Arc<[sycl_format::KernelParam]>>,
    /// One key per argument of the last launch the check accepted (`None` until one was): a
    /// launch whose arguments have the same keys passes without the check, which parses type
    /// names (a launch in a loop reads no string).
    pub accepted: Option<Vec<ArgKey>>,
    /// The parameters the kernel only reads through, as bits by index (`launch::kernel`'s
    /// `reads_only`): what the automatic ordering of a launch's buffers reads.
    pub reads: u64,
}

/// What the argument check reads of one argument.
#[derive(Clone, Copy, Eq)]
pub(crate) struct ArgKey {
    /// Its kind: a number the launch code gives each kind.
    pub kind: u8,
    /// Its Rust type's name.
    pub type_name: &'static str,
    /// A value's size in bytes (0 for the other kinds).
    pub size: usize,
}

impl PartialEq for ArgKey {
    fn eq(&self, other: &ArgKey) -> bool {
        // One type's name is one string in the binary: its address answers first.
        self.kind == other.kind
            && self.size == other.size
            && (std::ptr::eq(self.type_name, other.type_name) || self.type_name == other.type_name)
    }
}

/// An argument as it was set: the buffer (held weakly, so a pooled kernel never keeps a
/// buffer alive, and compared by identity, which the weak reference keeps unique) or the bytes.
pub(crate) enum SetArg {
    Mem(std::sync::Weak<Memory>),
    /// Another library's memory, by its handle.
    Native(crate::backend::native::NativeBuffer),
    Bytes(ArgBytes),
    /// Bytes of local memory.
    Local(usize),
}

/// A value argument's bytes: up to 16 (a scalar, a vector of four) without an allocation.
pub(crate) type ArgBytes = smallvec::SmallVec<[u8; 16]>;

/// A program being built or built: threads that want the same one wait on the slot.
type Slot = Arc<Mutex<Option<Arc<Program>>>>;

#[derive(Default)]
struct Caches {
    compiled: HashMap<CompileKey, Arc<Object>>,
    linked: HashMap<LinkKey, Slot>,
    /// The nested key of DPC++'s dynamic-linking design: kernel name → (binary, options) →
    /// program. A short list per kernel, searched without building a key.
    by_kernel: HashMap<String, Vec<KernelProgram>>,
    /// Kernel objects ready for reuse, by program and name: creating one per launch costs more
    /// than the launch. A kernel is taken while its arguments are set and enqueued.
    kernels: HashMap<ProgramAddress, ProgramKernels>,
}

/// What an image's compiled object is cached by: the image, the options it was compiled
/// with, and its definitions another image wins (made imports; none for most).
#[derive(Clone, PartialEq, Eq, Hash)]
struct CompileKey {
    image: ImageId,
    options: Options,
    overridden: Vec<String>,
}

/// What a linked program is cached by: its images, sorted, the options they were built with,
/// and the definitions overridden (so that another winner is another program).
#[derive(Clone, PartialEq, Eq, Hash)]
struct LinkKey {
    images: Vec<ImageId>,
    options: Options,
    overridden: Overridden,
}

/// A program that holds a kernel, as the kernel's list in [`Caches::by_kernel`] has it.
struct KernelProgram {
    /// A binary the program was built from: a launch finds the program from any of them.
    binary: BinaryId,
    /// The options it was built with (or, the same program, the options as the launch gave
    /// them).
    options: Options,
    program: Arc<Program>,
    /// Every binary the program was built from, so that closing any of them drops it.
    built_from: Vec<BinaryId>,
}

/// A program by its address: the key of its kernel objects waiting for reuse.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct ProgramAddress(usize);

impl ProgramAddress {
    fn of(program: &Arc<Program>) -> ProgramAddress {
        ProgramAddress(Arc::as_ptr(program) as usize)
    }
}

/// The kernel objects of one program waiting for reuse, by kernel name, and the program: the
/// entry holds it, so that its address cannot be another program's while they wait.
struct ProgramKernels {
    /// Never read: holding it is the point.
    _program: Arc<Program>,
    pool: KernelPool,
}

impl DeviceState {
    /// Whether the driver calls an event's completion callback for a command that ended
    /// abnormally, and soon: PoCL 3.1 calls none (measured: docs/PLATFORMS.md), and CUDA runs
    /// a stream's host callbacks after a fault when it gets to it (on an H200, up to 115 ms
    /// after a blocking wait in another process learned of the same fault), so the runtime
    /// watches such events itself (`launch::event`), asking their status every few
    /// milliseconds while they are awaited.
    pub(crate) fn failure_callbacks(&self) -> bool {
        self.info.backend == crate::Backend::OpenCl
            && !self.info.platform.contains("Portable Computing Language")
    }
}

impl DeviceState {
    /// The device a backend `found`, opened; `info` is how users see it.
    pub(crate) fn new(found: &DeviceInfo, info: info::DeviceInfo) -> Result<DeviceState, Error> {
        Ok(DeviceState::with(found, info, backend::Device::open(found)?))
    }

    /// The device `found`, opened as `device` (in a context of the runtime's own, or of a
    /// program's).
    pub(crate) fn with(
        found: &DeviceInfo,
        info: info::DeviceInfo,
        device: backend::Device,
    ) -> DeviceState {
        DeviceState {
            name: found.name.clone(),
            info,
            identity: found.identity.clone(),
            forms: found.caps.forms(),
            specializable: found.caps.bundle_forms(),
            caps: found.caps.clone(),
            device,
            caches: Mutex::default(),
        }
    }

    /// The device as error messages name it: its driver's name and the selector that picks
    /// it (`AMD EPYC 7B13 (`intel`)`), since two devices of one machine may share a name.
    pub(crate) fn describe(&self) -> String {
        format!("{} (`{}`)", self.name, self.info.selector)
    }

    fn caches(&self) -> std::sync::MutexGuard<'_, Caches> {
        self.caches.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops everything built from binaries that are no longer loaded.
    pub(crate) fn forget_unloaded(&self, registry: &Registry) {
        let mut caches = self.caches();
        caches.compiled.retain(|key, _| registry.contains(key.image.binary));
        caches.linked.retain(|key, _| key.images.iter().all(|id| registry.contains(id.binary)));
        for programs in caches.by_kernel.values_mut() {
            programs.retain(|p| p.built_from.iter().all(|b| registry.contains(*b)));
        }
        caches.kernels.clear();
    }

    /// The linked program that contains `kernel`.
    pub(crate) fn program_for(
        &self,
        registry: &Registry,
        disk: Option<&DiskCache>,
        kernel: &str,
        options: &Options,
    ) -> Result<Arc<Program>, Error> {
        let forms = self.forms(options);
        let root = forms.iter().find_map(|&t| registry.kernel_images(t, kernel).first());
        if let Some(root) = root {
            let hit = self.caches().by_kernel.get(kernel).and_then(|programs| {
                programs
                    .iter()
                    .find(|p| p.binary == root.binary && p.options == *options)
                    .map(|p| p.program.clone())
            });
            if let Some(program) = hit {
                trace!("cache-hit", "{kernel} on {}", self.name);
                return Ok(program);
            }
        }

        let plan = resolve::plan_kernel(registry, kernel, forms, self.for_device())?;
        let given = options;
        let options = &Options {
            flags: given.flags.clone(),
            spec: given.spec.checked(
                registry,
                plan.images(),
                &format!("kernel `{kernel}`"),
                true,
            )?,
        };

        let mut images = plan.images().to_vec();
        images.sort();
        let key =
            LinkKey { images, options: options.clone(), overridden: plan.overridden().clone() };
        let slot = self.caches().linked.entry(key).or_default().clone();
        let program = {
            let mut built = slot.lock().unwrap_or_else(|e| e.into_inner());
            match built.as_ref() {
                Some(program) => {
                    trace!("cache-hit", "{kernel} on {}: its images are already linked", self.name);
                    program.clone()
                }
                None => {
                    let program = match self.build(registry, disk, kernel, &plan, options) {
                        Err(e) if plan.target().cuda_arch().is_some() => {
                            self.build_without_native(registry, disk, kernel, options, e)?
                        }
                        built => built?,
                    };
                    let program = Arc::new(program);
                    *built = Some(program.clone());
                    program
                }
            }
        };

        // Every kernel of every image in the program now finds it, from every binary involved.
        let mut from: Vec<BinaryId> = plan.images().iter().map(|id| id.binary).collect();
        from.sort();
        from.dedup();
        let mut caches = self.caches();
        for &id in plan.images() {
            for k in registry.view(id).kernels() {
                let per_kernel = caches.by_kernel.entry(k.to_string()).or_default();
                // Under the options as given too, so a launch that sets a default again finds it.
                for key in [options, given] {
                    for &binary in &from {
                        if !per_kernel.iter().any(|p| p.binary == binary && p.options == *key) {
                            per_kernel.push(KernelProgram {
                                binary,
                                options: key.clone(),
                                program: program.clone(),
                                built_from: from.clone(),
                            });
                        }
                    }
                }
            }
        }
        Ok(program)
    }

    /// `kernel` built again from the device's linkable form (PTX), when its native objects
    /// failed (`native`): a driver older than the `ptxas` that made them refuses them, and
    /// the PTX beside them serves every driver. The PTX's error when it fails too.
    fn build_without_native(
        &self,
        registry: &Registry,
        disk: Option<&DiskCache>,
        kernel: &str,
        options: &Options,
        native: Error,
    ) -> Result<Program, Error> {
        let linkable = [self.caps.linkable()];
        let plan = match resolve::plan_kernel(registry, kernel, &linkable, self.for_device()) {
            Ok(plan) => plan,
            Err(_) => return Err(native),
        };
        trace!(
            "native-fallback",
            "{kernel} on {}: {native}; linking {}",
            self.name,
            plan.target().name()
        );
        self.build(registry, disk, kernel, &plan, options)
    }

    /// The device as resolution sees it.
    pub(crate) fn for_device(&self) -> ForDevice<'_> {
        ForDevice { name: &self.name, caps: &self.caps }
    }

    /// Image forms to try: with specialization constants set, only those the runtime can
    /// give values to (a GPU's native objects, the linkable form; an OpenCL driver's
    /// ahead-of-time binaries cannot be specialized).
    pub(crate) fn forms(&self, options: &Options) -> &[Target] {
        if options.spec.0.is_empty() {
            &self.forms
        } else {
            &self.specializable
        }
    }

    /// A kernel object of `program` for `name`: one returned earlier, or a new one.
    pub(crate) fn take_kernel(
        &self,
        program: &Arc<Program>,
        name: &str,
    ) -> Result<PooledKernel, Error> {
        let key = ProgramAddress::of(program);
        let pooled = self
            .caches()
            .kernels
            .get_mut(&key)
            .and_then(|kernels| kernels.pool.get_mut(name)?.pop());
        match pooled {
            Some(kernel) => Ok(kernel),
            None => {
                Ok(PooledKernel { kernel: program.kernel(name)?, set: Vec::new(), signature: None })
            }
        }
    }

    /// Gives a kernel object back once it is enqueued (the launch keeps its arguments).
    pub(crate) fn return_kernel(&self, program: &Arc<Program>, name: &str, kernel: PooledKernel) {
        let mut caches = self.caches();
        let ProgramKernels { pool, .. } = caches
            .kernels
            .entry(ProgramAddress::of(program))
            .or_insert_with(|| ProgramKernels { _program: program.clone(), pool: HashMap::new() });
        match pool.get_mut(name) {
            Some(kernels) => kernels.push(kernel),
            None => {
                pool.insert(name.to_string(), vec![kernel]);
            }
        }
    }

    /// The program of `plan`, for `kernel`: from the persistent cache, or linked (then stored).
    /// A program that is one native whole program is neither: loading it is cheaper than
    /// hashing it for the cache's key (0.04 ms against about 0.5 ms, measured on an H200).
    pub(crate) fn build(
        &self,
        registry: &Registry,
        disk: Option<&DiskCache>,
        kernel: &str,
        plan: &Plan,
        options: &Options,
    ) -> Result<Program, Error> {
        let disk = disk.filter(|_| !is_whole_native_program(registry, plan));
        let disk_key = disk.map(|_| self.disk_key(registry, plan, options));
        let cached = || -> Option<Program> {
            let (disk, key) = (disk?, disk_key.as_ref()?);
            let binary = disk.get(key)?;
            match self.build_binary(&binary, &options.flags, &["a cached program".to_string()]) {
                Ok(program) => {
                    let names: Vec<String> =
                        plan.images().iter().map(|&id| registry.describe(id)).collect();
                    trace!("persist-hit", "{kernel} on {}: {}", self.name, names.join(" + "));
                    Some(program)
                }
                Err(e) => {
                    trace!("cache-corrupt", "{key}: {e}; rebuilding");
                    None
                }
            }
        };
        if let Some(program) = cached() {
            return Ok(program);
        }
        // One build per program in the process at a time: a device of the same kind building
        // it now (another GPU of the model) stores it, and this one loads it then.
        let _building = disk.zip(disk_key.as_ref()).map(|(disk, key)| disk.building(key));
        if let Some(program) = cached() {
            return Ok(program);
        }

        let program = self.link_plan(registry, kernel, plan, options, &[], &options.flags)?;
        if let (Some(disk), Some(key)) = (disk, &disk_key) {
            match program.binary() {
                Ok(binary) => disk.put(key, &binary),
                Err(e) => log::warn!("persistent cache: reading the program binary: {e}"),
            }
        }
        Ok(program)
    }

    /// Links `plan`'s images into a program for `label` (a kernel, or a bundle), one of three
    /// ways: a self-contained ahead-of-time image built as it is; on a device that links, each
    /// image compiled (or taken from `given`, objects compiled before) and the objects linked
    /// with `link_flags`; otherwise linked here and translated to SPIR bitcode, then built.
    pub(crate) fn link_plan(
        &self,
        registry: &Registry,
        label: &str,
        plan: &Plan,
        options: &Options,
        given: &[(ImageId, Arc<Object>)],
        link_flags: &str,
    ) -> Result<Program, Error> {
        let names: Vec<String> = plan.images().iter().map(|&id| registry.describe(id)).collect();
        match (plan.target().format(), self.caps.links_images) {
            (ImageFormat::SpirBitcode, _) => {
                trace!("build", "{label} on {}: {}", self.name, names.join(" + "));
                let image = registry.view(plan.images()[0]);
                self.build_binary(image.data, &options.flags, &names)
            }
            (_, true) => {
                // An object compiled before serves only an image none of whose definitions
                // another image wins.
                let given_for = |id: &ImageId| {
                    let given = given.iter().find(|(g, _)| g == id).map(|(_, o)| o);
                    given.filter(|_| plan.overridden_in(*id).is_empty())
                };
                let missing: Vec<ImageId> =
                    plan.images().iter().copied().filter(|id| given_for(id).is_none()).collect();
                let mut compiled = self
                    .compile_images(registry, &missing, plan.overridden(), options)?
                    .into_iter();
                let objects: Vec<Arc<Object>> = plan
                    .images()
                    .iter()
                    .filter_map(|id| given_for(id).cloned().or_else(|| compiled.next()))
                    .collect();
                trace!("link", "{label} on {}: {}", self.name, names.join(" + "));
                self.link_objects(&objects, link_flags, &names)
            }
            (_, false) => {
                trace!(
                    "link",
                    "{label} on {} (linked by the runtime, translated to SPIR): {}",
                    self.name,
                    names.join(" + ")
                );
                let bitcode = link_to_spir(registry, label, plan, &options.spec, &self.caps)?;
                self.build_binary(&bitcode, &options.flags, &names)
            }
        }
    }

    /// Each image compiled once per options, specialization values and definitions
    /// `overridden` (made imports first: SPIR-V's linkage, PTX's `.extern`), or, for an
    /// ahead-of-time object, loaded; from the cache when it is there.
    pub(crate) fn compile_images(
        &self,
        registry: &Registry,
        images: &[ImageId],
        overridden: &Overridden,
        options: &Options,
    ) -> Result<Vec<Arc<Object>>, Error> {
        let mut objects = Vec::with_capacity(images.len());
        for &id in images {
            let lost = resolve::overridden_in(overridden, id);
            let key = CompileKey { image: id, options: options.clone(), overridden: lost.to_vec() };
            let cached = self.caches().compiled.get(&key).cloned();
            if let Some(object) = cached {
                objects.push(object);
                continue;
            }
            let image = registry.view(id);
            let failed = |f: Failure| {
                self.failed(
                    Step::Compile,
                    format!("compiling {}", registry.describe(id)),
                    &options.flags,
                    f,
                )
            };
            let object = match image.format {
                ImageFormat::Native => {
                    trace!(
                        "compile",
                        "{} on {} (ahead-of-time object)",
                        registry.describe(id),
                        self.name
                    );
                    let spec = options.spec.for_image(image);
                    self.device.load_object(image.data, &spec).map_err(failed)?
                }
                format => {
                    trace!("compile", "{} on {}", registry.describe(id), self.name);
                    // SPIR-V first gets the builtins the device's own build would call; PTX is
                    // taken as sycl-ld made it. Both get their overridden definitions made
                    // imports.
                    let code = match format {
                        ImageFormat::Ptx if lost.is_empty() => {
                            std::borrow::Cow::Borrowed(image.data)
                        }
                        ImageFormat::Ptx => {
                            let what = registry.describe(id);
                            let text = std::str::from_utf8(image.data).map_err(|_| {
                                Error::InvalidObject(format!("{what}: its PTX is not UTF-8"))
                            })?;
                            trace!("interpose", "{what}: {} made .extern", lost.join(", "));
                            let ptx = ptx::import_definitions(text, lost, &what)?;
                            std::borrow::Cow::Owned(ptx.into_bytes())
                        }
                        _ => rewrite_for_device(registry, id, lost, &self.caps)?,
                    };
                    let spec = options.spec.for_image(image);
                    self.device.compile(&code, &spec, &options.flags).map_err(failed)?
                }
            };
            let object = Arc::new(object);
            self.caches().compiled.insert(key, object.clone());
            objects.push(object);
        }
        Ok(objects)
    }

    pub(crate) fn link_objects(
        &self,
        objects: &[Arc<Object>],
        flags: &str,
        names: &[String],
    ) -> Result<Program, Error> {
        let refs: Vec<&Object> = objects.iter().map(|o| o.as_ref()).collect();
        self.device.link(&refs, flags).map_err(|f| {
            self.failed(Step::Link, format!("linking {}", names.join(" + ")), flags, f)
        })
    }

    pub(crate) fn build_binary(
        &self,
        binary: &[u8],
        flags: &str,
        names: &[String],
    ) -> Result<Program, Error> {
        self.device.load(binary, flags).map_err(|f| {
            self.failed(Step::Build, format!("building {}", names.join(" + ")), flags, f)
        })
    }

    /// A driver's refusal as the error users see: the step and what it was given, the driver's
    /// error and log, and what to try.
    pub(crate) fn failed(&self, step: Step, what: String, flags: &str, f: Failure) -> Error {
        Error::Build {
            device: self.name.clone(),
            what: format!("{what} ({})", f.error),
            hint: hint(step, f.bad_options, &f.log, flags),
            log: f.log,
        }
    }

    /// SHA-256 over this runtime's version and [`CODE_IDENTITY`] (every key starts with them,
    /// see [`KeyBuilder`]), the device and driver, the options, the image form and the sorted
    /// bytes of the program's images.
    fn disk_key(&self, registry: &Registry, plan: &Plan, options: &Options) -> String {
        let mut images: Vec<&[u8]> =
            plan.images().iter().map(|&id| registry.view(id).data).collect();
        images.sort();
        let mut key = KeyBuilder::new();
        key.part(self.identity.as_bytes())
            .part(options.flags.as_bytes())
            .part(format!("{:?}/{}", plan.target().format(), plan.target()).as_bytes());
        for (name, value) in &options.spec.0 {
            key.part(name.as_bytes()).part(value);
        }
        for image in images {
            key.part(image);
        }
        // Which definitions give way: the same images with another winner are another program.
        for (id, symbols) in plan.overridden() {
            key.part(b"overridden").part(registry.view(*id).data);
            for symbol in symbols {
                key.part(symbol.as_bytes());
            }
        }
        key.finish()
    }
}

/// Whether `plan` is one native NVIDIA image that `ptxas` made a whole program (an ELF
/// executable: it neither imports nor exports), which the driver loads without a link.
fn is_whole_native_program(registry: &Registry, plan: &Plan) -> bool {
    match plan.images() {
        [only] if plan.target().cuda_arch().is_some() => {
            sycl_format::cubin::is_whole_program(registry.view(*only).data)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::ArgKey;

    fn key(kind: u8, type_name: &'static str, size: usize) -> ArgKey {
        ArgKey { kind, type_name, size }
    }

    #[test]
    fn argument_keys_compare_type_names_by_text_and_kinds_and_sizes_exactly() {
        // The same name at two addresses (a type named in two crates' strings) is one type.
        let here: &'static str = "i32";
        let elsewhere: &'static str = String::from("i32").leak();
        assert!(!std::ptr::eq(here, elsewhere));
        assert!(key(1, here, 4) == key(1, elsewhere, 4));
        assert!(key(1, here, 4) != key(1, "u32", 4));
        assert!(key(1, here, 4) != key(0, here, 4), "a value is not a buffer");
        assert!(key(1, here, 4) != key(1, here, 8), "nor a value of another size");
    }
}
