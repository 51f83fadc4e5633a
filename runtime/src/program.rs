//! Building programs for a device, and the caches that make each build happen once.
//!
//! A kernel's images are collected (see `resolve`), checked against the device's
//! capabilities (seed 003, before any device code is touched), then built one of three ways:
//! - a device that takes SPIR-V and links: each image compiled once (`clCompileProgram`, or a
//!   native compiled object made ahead of time) and reused by every link that needs it, then
//!   `clLinkProgram`;
//! - a device that does not (PoCL): the images linked here with our own SPIR-V linker and
//!   translated to SPIR bitcode with `llvm-spirv`, then built;
//! - a self-contained ahead-of-time image for the device: built as it is.
//!
//! Linked programs are cached in memory under the seed's nested key (kernel name → binary,
//! options → program) and by image set, with one build per key however many threads ask at
//! once, and on disk (see `cache`).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

use sycl_format::ImageFormat;

use crate::cache::{DiskCache, KeyBuilder};
use crate::cl::{self, Context, DeviceId, DeviceInfo, Program};
use crate::device::{Capabilities, Variant};
use crate::registry::{BinaryId, ImageId, Registry};
use crate::resolve::{self, Collected};
use crate::trace::trace;
use crate::Error;

/// Build options (raw OpenCL flags) and specialization-constant values: part of every key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Options {
    pub flags: String,
    pub spec: SpecValues,
}

/// Values of named specialization constants, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct SpecValues(pub BTreeMap<String, Vec<u8>>);

impl SpecValues {
    /// These values without those equal to their constant's default in `images`: a default
    /// set explicitly is the default, so it shares the program (and the cache entries) built
    /// without it.
    pub(crate) fn without_defaults(&self, registry: &Registry, images: &[ImageId]) -> SpecValues {
        let is_default = |name: &str, value: &[u8]| {
            images.iter().any(|&id| {
                registry
                    .image(id)
                    .property_set(sycl_format::sets::SPECIALIZATION_CONSTANTS_DEFAULTS)
                    .and_then(|defaults| defaults.get(name))
                    .is_some_and(|d| matches!(d, sycl_format::PropertyValue::Bytes(d) if d == value))
            })
        };
        SpecValues(self.0.iter().filter(|(name, value)| !is_default(name, value)).map(|(n, v)| (n.clone(), v.clone())).collect())
    }

    /// `(SpecId, bytes)` for the constants `image` has.
    fn for_image(&self, image: &sycl_format::Image) -> Vec<(u32, &[u8])> {
        let Some(ids) = image.property_set(sycl_format::sets::SPECIALIZATION_CONSTANTS) else { return vec![] };
        self.0
            .iter()
            .filter_map(|(name, bytes)| match ids.get(name) {
                Some(sycl_format::PropertyValue::U32(id)) => Some((*id, bytes.as_slice())),
                _ => None,
            })
            .collect()
    }
}

/// Per-device state: the context and the caches built in it.
pub(crate) struct DeviceState {
    pub id: DeviceId,
    pub name: String,
    /// Platform, device and driver: what the persistent cache key needs of the device.
    identity: String,
    pub caps: Capabilities,
    /// `caps.variants()`, computed once: SPIR-V last.
    variants: Vec<Variant>,
    pub context: Context,
    caches: Mutex<Caches>,
}

/// Kernel objects of one program waiting for reuse, by kernel name.
type KernelPool = HashMap<String, Vec<PooledKernel>>;

/// A kernel object and the arguments last set on it: OpenCL keeps a kernel's arguments
/// between launches, so a launch with the same ones sets nothing again.
pub(crate) struct PooledKernel {
    pub kernel: crate::cl::Kernel,
    /// By argument index.
    pub set: Vec<SetArg>,
    /// The kernel's parameters, looked up at its first launch.
    pub signature: Option<Signature>,
}

/// A kernel's parameters as its image records them (`None`: no record, the driver alone
/// checks the arguments).
pub(crate) struct Signature(pub Option<Arc<[sycl_format::KernelParam]>>);

/// An argument as it was set: the buffer (held weakly, so a pooled kernel never keeps a
/// buffer alive, and compared by identity, which the weak reference keeps unique) or the bytes.
pub(crate) enum SetArg {
    Mem(std::sync::Weak<crate::cl::Mem>),
    Bytes(Vec<u8>),
    /// Bytes of local memory.
    Local(usize),
}

/// A program and every binary it was built from.
type BuiltFrom = (Arc<Program>, Vec<BinaryId>);

/// A program being built or built: threads that want the same one wait on the slot.
type Slot = Arc<Mutex<Option<Arc<Program>>>>;

#[derive(Default)]
struct Caches {
    compiled: HashMap<(ImageId, Options), Arc<Program>>,
    linked: HashMap<(Vec<ImageId>, Options), Slot>,
    /// The seed's nested key: kernel name → (binary, options) → program, with every binary
    /// the program was built from (so that closing any of them drops it). A short list per
    /// kernel, searched without building a key.
    by_kernel: HashMap<String, Vec<(BinaryId, Options, BuiltFrom)>>,
    /// Kernel objects ready for reuse, by program and name: creating one per launch costs more
    /// than the launch. A kernel is taken while its arguments are set and enqueued.
    kernels: HashMap<usize, (Arc<Program>, KernelPool)>,
}

impl DeviceState {
    pub(crate) fn new(info: &DeviceInfo) -> Result<DeviceState, Error> {
        let caps = Capabilities::of(info);
        Ok(DeviceState {
            id: info.id,
            name: info.name.clone(),
            identity: format!("{}\n{}\n{}", info.platform, info.name, info.driver_version),
            variants: caps.variants(),
            caps,
            context: Context::new(info.id)?,
            caches: Mutex::default(),
        })
    }

    fn caches(&self) -> std::sync::MutexGuard<'_, Caches> {
        self.caches.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops everything built from binaries that are no longer loaded.
    pub(crate) fn forget_unloaded(&self, registry: &Registry) {
        let mut caches = self.caches();
        caches.compiled.retain(|(id, _), _| registry.contains(id.binary));
        caches.linked.retain(|(ids, _), _| ids.iter().all(|id| registry.contains(id.binary)));
        for programs in caches.by_kernel.values_mut() {
            programs.retain(|(_, _, (_, from))| from.iter().all(|b| registry.contains(*b)));
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
        let variants = self.variants(options);
        let root = variants.iter().find_map(|v| registry.kernel_images(v, kernel).first());
        if let Some(root) = root {
            let hit = self.caches().by_kernel.get(kernel).and_then(|programs| {
                programs.iter().find(|(b, o, _)| *b == root.binary && o == options).map(|(_, _, (p, _))| p.clone())
            });
            if let Some(program) = hit {
                trace!("cache-hit", "{kernel} on {}", self.name);
                return Ok(program);
            }
        }

        let compatible = |image: &sycl_format::Image| image.requirements().is_ok_and(|r| self.caps.check(&r).is_ok());
        let collected = resolve::collect(registry, kernel, variants, &compatible)?;
        self.check(registry, kernel, &collected.images)?;
        let given = options;
        let options = &Options { flags: given.flags.clone(), spec: given.spec.without_defaults(registry, &collected.images) };

        let mut key = collected.images.clone();
        key.sort();
        let slot = self.caches().linked.entry((key, options.clone())).or_default().clone();
        let program = {
            let mut built = slot.lock().unwrap_or_else(|e| e.into_inner());
            match built.as_ref() {
                Some(program) => {
                    trace!("cache-hit", "{kernel} on {}: its images are already linked", self.name);
                    program.clone()
                }
                None => {
                    let program = Arc::new(self.build(registry, disk, kernel, &collected, options)?);
                    *built = Some(program.clone());
                    program
                }
            }
        };

        // Every kernel of every image in the program now finds it, from every binary involved.
        let mut from: Vec<BinaryId> = collected.images.iter().map(|id| id.binary).collect();
        from.sort();
        from.dedup();
        let mut caches = self.caches();
        for &id in &collected.images {
            for k in &registry.image(id).kernels {
                let per_kernel = caches.by_kernel.entry(k.clone()).or_default();
                // Under the options as given too, so a launch that sets a default again finds it.
                for key in [options, given] {
                    for &binary in &from {
                        if !per_kernel.iter().any(|(b, o, _)| *b == binary && o == key) {
                            per_kernel.push((binary, key.clone(), (program.clone(), from.clone())));
                        }
                    }
                }
            }
        }
        Ok(program)
    }

    /// Image forms to try: with specialization constants set, only SPIR-V (ahead-of-time
    /// images cannot be specialized).
    pub(crate) fn variants(&self, options: &Options) -> &[Variant] {
        if options.spec.0.is_empty() {
            &self.variants
        } else {
            &self.variants[self.variants.len() - 1..]
        }
    }

    /// A kernel object of `program` for `name`: one returned earlier, or a new one.
    pub(crate) fn take_kernel(&self, program: &Arc<Program>, name: &str) -> Result<PooledKernel, Error> {
        let key = Arc::as_ptr(program) as usize;
        let pooled = self.caches().kernels.get_mut(&key).and_then(|(_, pool)| pool.get_mut(name)?.pop());
        match pooled {
            Some(kernel) => Ok(kernel),
            None => Ok(PooledKernel { kernel: crate::cl::Kernel::new(program, name)?, set: Vec::new(), signature: None }),
        }
    }

    /// Gives a kernel object back once it is enqueued (the launch keeps its arguments).
    pub(crate) fn return_kernel(&self, program: &Arc<Program>, name: &str, kernel: PooledKernel) {
        let mut caches = self.caches();
        // The entry holds the program, so its address cannot be reused while kernels of it wait.
        let (_, pool) = caches.kernels.entry(Arc::as_ptr(program) as usize).or_insert_with(|| (program.clone(), HashMap::new()));
        match pool.get_mut(name) {
            Some(kernels) => kernels.push(kernel),
            None => {
                pool.insert(name.to_string(), vec![kernel]);
            }
        }
    }

    /// Seed 003's check of every image against the device, and the check for call cycles
    /// across them, before any device code is used.
    pub(crate) fn check(&self, registry: &Registry, kernel: &str, images: &[ImageId]) -> Result<(), Error> {
        for &id in images {
            let requirements = registry.image(id).requirements().map_err(|e| Error::KernelNotSupported {
                kernel: kernel.to_string(),
                device: self.name.clone(),
                reason: format!("{}: malformed device requirements: {e}", registry.describe(id)),
            })?;
            self.caps.check(&requirements).map_err(|reason| Error::KernelNotSupported {
                kernel: kernel.to_string(),
                device: self.name.clone(),
                reason,
            })?;
        }
        // Recursion is refused here too, for every device: PoCL's compiler dies of it.
        crate::cycles::check(registry, kernel, images)
    }

    pub(crate) fn build(
        &self,
        registry: &Registry,
        disk: Option<&DiskCache>,
        kernel: &str,
        collected: &Collected,
        options: &Options,
    ) -> Result<Program, Error> {
        let names: Vec<String> = collected.images.iter().map(|&id| registry.describe(id)).collect();
        let disk_key = disk.map(|_| self.disk_key(registry, collected, options));
        if let (Some(disk), Some(key)) = (disk, &disk_key) {
            if let Some(binary) = disk.get(key) {
                match self.build_binary(&binary, &options.flags, &["a cached program".to_string()]) {
                    Ok(program) => {
                        trace!("persist-hit", "{kernel} on {}: {}", self.name, names.join(" + "));
                        return Ok(program);
                    }
                    Err(e) => trace!("cache-corrupt", "{key}: {e}; rebuilding"),
                }
            }
        }

        let program = match (&collected.variant.format, self.caps.links_spirv) {
            (ImageFormat::SpirBitcode, _) => {
                trace!("build", "{kernel} on {}: {}", self.name, names.join(" + "));
                let image = registry.image(collected.images[0]);
                self.build_binary(&image.data, &options.flags, &names)?
            }
            (_, true) => {
                let objects = self.compile_images(registry, &collected.images, options)?;
                trace!("link", "{kernel} on {}: {}", self.name, names.join(" + "));
                self.link_objects(&objects, &options.flags, &names)?
            }
            (_, false) => {
                trace!("link", "{kernel} on {} (linked by the runtime, translated to SPIR): {}", self.name, names.join(" + "));
                let bitcode = link_to_spir(registry, kernel, &collected.images, &options.spec, &self.caps)?;
                self.build_binary(&bitcode, &options.flags, &names)?
            }
        };

        if let (Some(disk), Some(key)) = (disk, &disk_key) {
            match program.binary() {
                Ok(binary) => disk.put(key, &binary),
                Err(e) => log::warn!("persistent cache: reading the program binary: {e}"),
            }
        }
        Ok(program)
    }

    /// Each image compiled once per options and specialization values (or, for an
    /// ahead-of-time object, loaded), from the cache when it is there.
    pub(crate) fn compile_images(
        &self,
        registry: &Registry,
        images: &[ImageId],
        options: &Options,
    ) -> Result<Vec<Arc<Program>>, Error> {
        let mut objects = Vec::with_capacity(images.len());
        for &id in images {
            let cached = self.caches().compiled.get(&(id, options.clone())).cloned();
            if let Some(object) = cached {
                objects.push(object);
                continue;
            }
            let image = registry.image(id);
            let program = match image.format {
                ImageFormat::Native => {
                    trace!("compile", "{} on {} (ahead-of-time object)", registry.describe(id), self.name);
                    Program::from_binary(&self.context, self.id, &image.data)?
                }
                _ => {
                    trace!("compile", "{} on {}", registry.describe(id), self.name);
                    let il = rewrite_for_device(registry, id, &self.caps)?;
                    let program = Program::from_il(&self.context, &il)?;
                    for (spec_id, bytes) in options.spec.for_image(image) {
                        program.set_spec_constant(spec_id, bytes)?;
                    }
                    program.compile(self.id, &options.flags).map_err(|(code, log)| {
                        let hint = hint(Step::Compile, code, &log, &options.flags);
                        Error::Build {
                            device: self.name.clone(),
                            what: format!("compiling {} (clCompileProgram: {})", registry.describe(id), cl::error_name(code)),
                            log,
                            hint,
                        }
                    })?;
                    program
                }
            };
            let program = Arc::new(program);
            self.caches().compiled.insert((id, options.clone()), program.clone());
            objects.push(program);
        }
        Ok(objects)
    }

    pub(crate) fn link_objects(&self, objects: &[Arc<Program>], flags: &str, names: &[String]) -> Result<Program, Error> {
        let refs: Vec<&Program> = objects.iter().map(|p| p.as_ref()).collect();
        Program::link(&self.context, self.id, &refs, flags).map_err(|(code, log)| Error::Build {
            device: self.name.clone(),
            what: format!("linking {} (clLinkProgram: {})", names.join(" + "), cl::error_name(code)),
            hint: hint(Step::Link, code, &log, flags),
            log,
        })
    }

    pub(crate) fn build_binary(&self, binary: &[u8], options: &str, names: &[String]) -> Result<Program, Error> {
        let program = Program::from_binary(&self.context, self.id, binary)?;
        program.build(self.id, options).map_err(|(code, log)| Error::Build {
            device: self.name.clone(),
            what: format!("building {} (clBuildProgram: {})", names.join(" + "), cl::error_name(code)),
            hint: hint(Step::Build, code, &log, options),
            log,
        })?;
        Ok(program)
    }

    /// SHA-256 over the sorted bytes of the program's images, the image form, the device and
    /// driver, the options and this runtime's version.
    fn disk_key(&self, registry: &Registry, collected: &Collected, options: &Options) -> String {
        let mut images: Vec<&[u8]> = collected.images.iter().map(|&id| registry.image(id).data.as_slice()).collect();
        images.sort();
        let mut key = KeyBuilder::default();
        key.part(env!("CARGO_PKG_VERSION").as_bytes())
            .part(self.identity.as_bytes())
            .part(options.flags.as_bytes())
            .part(format!("{:?}/{}", collected.variant.format, collected.variant.target).as_bytes());
        if collected.variant.format == ImageFormat::SpirV {
            key.part(SPIR_REWRITES.as_bytes());
        }
        for (name, value) in &options.spec.0 {
            key.part(name.as_bytes()).part(value);
        }
        for image in images {
            key.part(image);
        }
        key.finish()
    }
}

/// What the runtime rewrites in SPIR-V before a driver sees it ([`rewrite_for_device`],
/// [`link_to_spir`]), part of the persistent cache's key: a program built before a rule changed
/// is not reused.
pub(crate) const SPIR_REWRITES: &str =
    "spir-rewrites 3: function pointers (PoCL), generic builtins, mad as fma with FMA (every SPIR-V device), \
     half_* as full precision and mem_fence as PoCL's _cl_mem_fence (PoCL)";

/// One image's SPIR-V as a device that links SPIR-V gets it ([`rewrite_builtins`]); the image
/// as it is when nothing applies, or when it does not load: the driver then says what is wrong
/// with it, in its build log.
fn rewrite_for_device<'a>(registry: &'a Registry, id: ImageId, caps: &Capabilities) -> Result<std::borrow::Cow<'a, [u8]>, Error> {
    let data = &registry.image(id).data;
    let Ok(mut module) = sycl_spirv::load(data) else { return Ok(std::borrow::Cow::Borrowed(data)) };
    Ok(match rewrite_builtins(&mut module, caps, &registry.describe(id))? {
        true => std::borrow::Cow::Owned(sycl_spirv::assemble(&module)),
        false => std::borrow::Cow::Borrowed(data),
    })
}

/// The builtins a device gets as its own build of the source would call them (see
/// [`SPIR_REWRITES`]); traced, and whether anything changed:
/// - Under OpenCL C 2.0 every builtin taking a pointer takes a generic one: PoCL 3.1's library
///   has none for the generic address space, and Intel's CPU runtime builds no atomic on one
///   from SPIR-V. Each gets a global, local or private pointer.
/// - PoCL 3.1's library (a device that does not link SPIR-V) defines `mem_fence` and the
///   `half_*` functions only under other names (`_cl_mem_fence`, `_cl_half_sqrt`, …): `half_*`
///   become full precision, and the program gets a `mem_fence` that calls PoCL's.
/// - clang's contractions (`llvm.fmuladd`) reach the device as `mad`, which PoCL computes
///   unfused and Intel fuses only in part, where their own builds fuse them on hardware with
///   FMA: `fma` there.
fn rewrite_builtins(module: &mut sycl_spirv::dr::Module, caps: &Capabilities, what: &str) -> Result<bool, Error> {
    let generic = sycl_spirv::lower_generic_builtins(module).map_err(|e| Error::Translate(e.to_string()))?;
    let renamed = if caps.links_spirv { 0 } else { sycl_spirv::lower_renamed_builtins(module) };
    let fused = if caps.fma { sycl_spirv::fuse_mad(module) } else { 0 };
    let changed = generic + renamed + fused > 0;
    if changed {
        trace!(
            "spir-rewrite",
            "{what}: {generic} builtin(s) on generic pointers made specific, {renamed} half_* or fence(s) given PoCL's \
             builtins, {fused} mad as fma"
        );
    }
    Ok(changed)
}

/// The driver step that failed, for [`hint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Compile,
    Link,
    Build,
}

/// What to try after the driver refused device code, from the step, the code and its log.
pub(crate) fn hint(step: Step, code: i32, log: &str, flags: &str) -> String {
    use cl3::error_codes::{CL_INVALID_BUILD_OPTIONS, CL_INVALID_LINKER_OPTIONS};
    let lower = log.to_lowercase();
    if code == CL_INVALID_BUILD_OPTIONS || code == CL_INVALID_LINKER_OPTIONS {
        return format!("the build options `{flags}` are not valid for this device: check the options given to the launch or the bundle");
    }
    if lower.contains("symbols not found") || lower.contains("undefined") || lower.contains("unresolved") {
        return "a function these images call is defined by none of them: the library that exports it must be loaded \
                and visible to them (SYCL_TRACE=1 shows how each import resolved; `sycl-ld inspect FILE` lists what a \
                binary exports and imports)"
            .into();
    }
    if lower.contains("recurs") {
        return "device code may not call itself, directly or through other functions (OpenCL C forbids recursion): \
                remove the call cycle the log names"
            .into();
    }
    let flags = if flags.is_empty() { String::new() } else { format!(" with the options `{flags}`") };
    match step {
        Step::Compile => format!(
            "the device's compiler refused this image{flags}: the log names what it could not take; `sycl-ld inspect \
             BINARY` shows the image, and SYCL_TRACE=1 which kernel needed it"
        ),
        Step::Link => format!(
            "the driver could not link these images{flags}: SYCL_TRACE=1 shows which images were collected and how each \
             import resolved; a symbol defined twice or with different types in two libraries is a common cause"
        ),
        Step::Build => format!(
            "the driver could not build this program{flags}: the log names what it could not take; SYCL_TRACE=1 shows \
             which images it was made from"
        ),
    }
}

/// Links SPIR-V images with our own linker and translates the result to SPIR bitcode, for
/// devices that take neither SPIR-V nor a link step; specialization values are baked in.
/// Builtins the device's library lacks are rewritten into ones it has, and `mad` computed as
/// the device's own build of the source computes it (see [`SPIR_REWRITES`]).
pub(crate) fn link_to_spir(
    registry: &Registry,
    kernel: &str,
    images: &[ImageId],
    spec: &SpecValues,
    caps: &Capabilities,
) -> Result<Vec<u8>, Error> {
    let mut inputs = Vec::with_capacity(images.len());
    for &id in images {
        let module = sycl_spirv::load(&registry.image(id).data)
            .map_err(|e| Error::Translate(format!("{}: {e}", registry.describe(id))))?;
        inputs.push(sycl_spirv::LinkInput { name: registry.describe(id), module });
    }
    let mut linked = sycl_spirv::link(inputs).map_err(|e| Error::Translate(e.to_string()))?;
    // PoCL's kernel compiler cannot take calls through pointers; the whole program is here, so
    // they become switches over the functions whose addresses are taken.
    sycl_spirv::lower_function_pointers(&mut linked.module).map_err(|e| Error::Translate(e.to_string()))?;
    rewrite_builtins(&mut linked.module, caps, kernel)?;
    // Lowering turns calls through pointers into direct calls: a cycle through a pointer (which
    // the images' call graphs cannot show) is now one PoCL's compiler would die of.
    if let Some(cycle) = sycl_spirv::call_cycle(&linked.module) {
        let describe = |id: &u32| {
            let binary = linked.origins.get(id).map(|&i| registry.binary(images[i].binary).name.as_str());
            let binary = binary.map_or("made by the runtime", |b| b.rsplit('/').next().unwrap_or(b));
            format!("{} ({binary})", sycl_spirv::function_name(&linked.module, *id))
        };
        let mut path: Vec<String> = cycle.iter().map(describe).collect();
        path.push(describe(&cycle[0]));
        return Err(Error::CallCycle { kernel: kernel.to_string(), cycle: path });
    }
    let mut baked = Vec::new();
    for &id in images {
        for (spec_id, bytes) in spec.for_image(registry.image(id)) {
            let Some(ty) = sycl_spirv::spec::llvm_type_of(&linked.module, spec_id) else { continue };
            let text = spec_value_text(&ty, bytes)
                .ok_or_else(|| Error::InvalidArgument(format!("specialization constant {spec_id}: {} bytes for {ty}", bytes.len())))?;
            let arg = format!("{spec_id}:{ty}:{text}");
            if !baked.contains(&arg) {
                baked.push(arg);
            }
        }
    }
    let spirv = sycl_spirv::assemble(&linked.module);
    let tool = llvm_spirv()?;
    let dir = tempfile::tempdir().map_err(|e| Error::Translate(format!("temporary directory: {e}")))?;
    let (input, output) = (dir.path().join("program.spv"), dir.path().join("program.bc"));
    std::fs::write(&input, spirv).map_err(|e| Error::Translate(format!("{}: {e}", input.display())))?;
    let mut cmd = Command::new(&tool);
    cmd.arg("-r").arg(&input).arg("-o").arg(&output);
    if !baked.is_empty() {
        cmd.arg(format!("--spec-const={}", baked.join(" ")));
    }
    let out = cmd.output().map_err(|e| Error::Translate(format!("running {}: {e}", tool.display())))?;
    if !out.status.success() {
        return Err(Error::Translate(format!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr))));
    }
    std::fs::read(&output).map_err(|e| Error::Translate(format!("{}: {e}", output.display())))
}

/// A specialization value as `llvm-spirv --spec-const` reads it.
fn spec_value_text(ty: &str, bytes: &[u8]) -> Option<String> {
    let arr = |n: usize| -> Option<[u8; 8]> {
        let mut a = [0u8; 8];
        a.get_mut(..n)?.copy_from_slice(bytes.get(..n)?);
        (bytes.len() == n).then_some(a)
    };
    Some(match ty {
        "i1" | "i8" => i8::from_le_bytes([arr(1)?[0]]).to_string(),
        "i16" => i16::from_le_bytes(arr(2)?[..2].try_into().ok()?).to_string(),
        "i32" => i32::from_le_bytes(arr(4)?[..4].try_into().ok()?).to_string(),
        "i64" => i64::from_le_bytes(arr(8)?).to_string(),
        "f32" => format!("{:?}", f32::from_le_bytes(arr(4)?[..4].try_into().ok()?)),
        "f64" => format!("{:?}", f64::from_le_bytes(arr(8)?)),
        _ => return None,
    })
}

/// Whether the translator for devices without SPIR-V is available.
pub(crate) fn can_translate() -> bool {
    llvm_spirv().is_ok()
}

/// `$SYCL_LLVM_SPIRV`, or `llvm-spirv-15` on PATH.
fn llvm_spirv() -> Result<PathBuf, Error> {
    if let Some(path) = std::env::var_os("SYCL_LLVM_SPIRV").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    which::which("llvm-spirv-15").map_err(|_| {
        Error::Translate(
            "llvm-spirv-15 not found on PATH (Debian package llvm-spirv-15, or set SYCL_LLVM_SPIRV); \
             it translates SPIR-V for devices without SPIR-V support"
                .into(),
        )
    })
}
