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

pub(crate) mod disk;
mod spir;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use sycl_format::ImageFormat;

pub(crate) use spir::{can_translate, link_to_spir};

use crate::backend::{
    self, Capabilities, DeviceInfo, Failure, Kernel, Memory, Object, Program, SpecValue,
};
use crate::registry::{BinaryId, ImageId, Registry, Variant};
use crate::resolve::{self, Collected};
use crate::trace::trace;
use crate::Error;
use disk::{DiskCache, KeyBuilder};
use spir::{rewrite_for_device, SPIR_REWRITES};

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
                    .is_some_and(
                        |d| matches!(d, sycl_format::PropertyValue::Bytes(d) if d == value),
                    )
            })
        };
        SpecValues(
            self.0
                .iter()
                .filter(|(name, value)| !is_default(name, value))
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect(),
        )
    }

    /// The values of the constants `image` has.
    fn for_image(&self, image: &sycl_format::Image) -> Vec<SpecValue<'_>> {
        let Some(ids) = image.property_set(sycl_format::sets::SPECIALIZATION_CONSTANTS) else {
            return vec![];
        };
        self.0
            .iter()
            .filter_map(|(name, bytes)| match ids.get(name) {
                Some(sycl_format::PropertyValue::U32(id)) => {
                    Some(SpecValue { name, id: *id, bytes })
                }
                _ => None,
            })
            .collect()
    }
}

/// Per-device state: the opened device and the caches built on it.
pub(crate) struct DeviceState {
    pub name: String,
    /// Platform, device and driver: what the persistent cache key needs of the device.
    identity: String,
    pub caps: Capabilities,
    /// `caps.variants()`, computed once: SPIR-V last.
    variants: Vec<Variant>,
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

/// A kernel's parameters as its image records them (`None`: no record, the driver alone
/// checks the arguments).
pub(crate) struct Signature(pub Option<Arc<[sycl_format::KernelParam]>>);

/// An argument as it was set: the buffer (held weakly, so a pooled kernel never keeps a
/// buffer alive, and compared by identity, which the weak reference keeps unique) or the bytes.
pub(crate) enum SetArg {
    Mem(std::sync::Weak<Memory>),
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
    compiled: HashMap<(ImageId, Options), Arc<Object>>,
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
        Ok(DeviceState {
            name: info.name.clone(),
            identity: info.identity.clone(),
            variants: info.caps.variants(),
            caps: info.caps.clone(),
            device: backend::Device::open(info)?,
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
                programs
                    .iter()
                    .find(|(b, o, _)| *b == root.binary && o == options)
                    .map(|(_, _, (p, _))| p.clone())
            });
            if let Some(program) = hit {
                trace!("cache-hit", "{kernel} on {}", self.name);
                return Ok(program);
            }
        }

        let collected = self.images_for(registry, kernel, variants)?;
        let given = options;
        let options = &Options {
            flags: given.flags.clone(),
            spec: given.spec.without_defaults(registry, &collected.images),
        };

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
                    let program =
                        Arc::new(self.build(registry, disk, kernel, &collected, options)?);
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

    /// The images a launch of `kernel` links, in link order: the kernel's image and the
    /// providers of its imports as resolution picks them (or the image with them compiled in),
    /// each checked against the device.
    pub(crate) fn images_for(
        &self,
        registry: &Registry,
        kernel: &str,
        variants: &[Variant],
    ) -> Result<Collected, Error> {
        let compatible = |image: &sycl_format::Image| {
            image.requirements().is_ok_and(|r| self.caps.check(&r).is_ok())
        };
        let collected = match resolve::collect(registry, kernel, variants, &compatible) {
            Ok(collected) => collected,
            Err(Error::KernelNotFound { kernel, searched }) => {
                // An ahead-of-time target's aspect filter leaves out what the device cannot
                // run: the SPIR-V image then says why, as seed 003's check would.
                if let Some(&spirv) = registry.kernel_images(&Variant::spirv(), &kernel).first() {
                    self.check(registry, &kernel, &[spirv])?;
                }
                return Err(Error::KernelNotFound { kernel, searched });
            }
            Err(e) => return Err(e),
        };
        self.check(registry, kernel, &collected.images)?;
        Ok(with_inlined_imports(registry, kernel, collected))
    }

    /// Image forms to try: with specialization constants set, only the linkable form
    /// (ahead-of-time images cannot be specialized).
    pub(crate) fn variants(&self, options: &Options) -> &[Variant] {
        if options.spec.0.is_empty() {
            &self.variants
        } else {
            &self.variants[self.variants.len() - 1..]
        }
    }

    /// A kernel object of `program` for `name`: one returned earlier, or a new one.
    pub(crate) fn take_kernel(
        &self,
        program: &Arc<Program>,
        name: &str,
    ) -> Result<PooledKernel, Error> {
        let key = Arc::as_ptr(program) as usize;
        let pooled =
            self.caches().kernels.get_mut(&key).and_then(|(_, pool)| pool.get_mut(name)?.pop());
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
        // The entry holds the program, so its address cannot be reused while kernels of it wait.
        let (_, pool) = caches
            .kernels
            .entry(Arc::as_ptr(program) as usize)
            .or_insert_with(|| (program.clone(), HashMap::new()));
        match pool.get_mut(name) {
            Some(kernels) => kernels.push(kernel),
            None => {
                pool.insert(name.to_string(), vec![kernel]);
            }
        }
    }

    /// Seed 003's check of every image against the device, and the check for call cycles
    /// across them, before any device code is used.
    pub(crate) fn check(
        &self,
        registry: &Registry,
        kernel: &str,
        images: &[ImageId],
    ) -> Result<(), Error> {
        for &id in images {
            let requirements =
                registry.image(id).requirements().map_err(|e| Error::KernelNotSupported {
                    kernel: kernel.to_string(),
                    device: self.name.clone(),
                    reason: format!(
                        "{}: malformed device requirements: {e}",
                        registry.describe(id)
                    ),
                })?;
            self.caps.check(&requirements).map_err(|reason| Error::KernelNotSupported {
                kernel: kernel.to_string(),
                device: self.name.clone(),
                reason,
            })?;
        }
        // Recursion is refused here too, for every device: PoCL's compiler dies of it.
        resolve::check_cycles(registry, kernel, images)
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
                match self.build_binary(&binary, &options.flags, &["a cached program".to_string()])
                {
                    Ok(program) => {
                        trace!("persist-hit", "{kernel} on {}: {}", self.name, names.join(" + "));
                        return Ok(program);
                    }
                    Err(e) => trace!("cache-corrupt", "{key}: {e}; rebuilding"),
                }
            }
        }

        let program = match (&collected.variant.format, self.caps.links_images) {
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
                trace!(
                    "link",
                    "{kernel} on {} (linked by the runtime, translated to SPIR): {}",
                    self.name,
                    names.join(" + ")
                );
                let bitcode =
                    link_to_spir(registry, kernel, &collected.images, &options.spec, &self.caps)?;
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
    ) -> Result<Vec<Arc<Object>>, Error> {
        let mut objects = Vec::with_capacity(images.len());
        for &id in images {
            let cached = self.caches().compiled.get(&(id, options.clone())).cloned();
            if let Some(object) = cached {
                objects.push(object);
                continue;
            }
            let image = registry.image(id);
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
                    self.device.load_object(&image.data).map_err(failed)?
                }
                format => {
                    trace!("compile", "{} on {}", registry.describe(id), self.name);
                    // SPIR-V first gets the builtins the device's own build would call; PTX is
                    // taken as sycl-ld made it.
                    let code = match format {
                        ImageFormat::Ptx => std::borrow::Cow::Borrowed(image.data.as_slice()),
                        _ => rewrite_for_device(registry, id, &self.caps)?,
                    };
                    let spec = options.spec.for_image(image);
                    self.device.compile(&code, &spec, &options.flags).map_err(failed)?
                }
            };
            let object = Arc::new(object);
            self.caches().compiled.insert((id, options.clone()), object.clone());
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

    /// SHA-256 over the sorted bytes of the program's images, the image form, the device and
    /// driver, the options and this runtime's version.
    fn disk_key(&self, registry: &Registry, collected: &Collected, options: &Options) -> String {
        let mut images: Vec<&[u8]> =
            collected.images.iter().map(|&id| registry.image(id).data.as_slice()).collect();
        images.sort();
        let mut key = KeyBuilder::default();
        key.part(env!("CARGO_PKG_VERSION").as_bytes())
            .part(self.identity.as_bytes())
            .part(options.flags.as_bytes())
            .part(
                format!("{:?}/{}", collected.variant.format, collected.variant.target).as_bytes(),
            );
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

/// The kernel's PTX image with its imports compiled in (`sycl-ld`'s `ptx64+inlined` twin of
/// the kernel's image, from the same binary) instead of it and the images it imports from, when
/// resolution picked exactly the images the twin compiled in (by hash); otherwise `collected`
/// as it is. Images the rest of the collection still imports from stay.
fn with_inlined_imports(registry: &Registry, kernel: &str, collected: Collected) -> Collected {
    if collected.variant.format != ImageFormat::Ptx {
        return collected;
    }
    let root = collected.images[0];
    let variant =
        Variant { format: ImageFormat::Ptx, target: sycl_format::PTX_INLINED_TARGET.into() };
    let Some(&twin) =
        registry.kernel_images(&variant, kernel).iter().find(|t| t.binary == root.binary)
    else {
        return collected;
    };
    let Some(recorded) = registry.image(twin).property_set(sycl_format::sets::INLINED_IMPORTS)
    else {
        return collected;
    };
    let rest = &collected.images[1..];
    let exports =
        |id: ImageId, symbol: &str| registry.image(id).exported_symbols().any(|e| e == symbol);
    let mut inlined: Vec<ImageId> = Vec::new();
    for property in &recorded.properties {
        let provider = rest.iter().copied().find(|&id| exports(id, &property.name));
        let hash = provider
            .map(|id| format!("{:016x}", sycl_format::payload_hash(&registry.image(id).data)));
        match (provider, &property.value) {
            (Some(id), sycl_format::PropertyValue::String(recorded))
                if hash.as_deref() == Some(recorded.as_str()) =>
            {
                if !inlined.contains(&id) {
                    inlined.push(id);
                }
            }
            _ => {
                trace!(
                    "inline",
                    "{kernel}: {} not used: {} resolved to another image than it compiled in",
                    registry.describe(twin),
                    property.name
                );
                return collected;
            }
        }
    }
    let others: Vec<ImageId> = rest.iter().copied().filter(|id| !inlined.contains(id)).collect();
    let still_imported = |provider: ImageId| {
        others.iter().any(|&o| registry.image(o).imported_symbols().any(|s| exports(provider, s)))
    };
    let names: Vec<String> = inlined.iter().map(|&id| registry.describe(id)).collect();
    trace!("inline", "{kernel}: {} has {} compiled in", registry.describe(twin), names.join(" + "));
    let mut images = vec![twin];
    images.extend(rest.iter().copied().filter(|&id| !inlined.contains(&id) || still_imported(id)));
    Collected { variant, images }
}

/// The driver step that failed, for [`hint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Compile,
    Link,
    Build,
}

/// What to try after the driver refused device code, from the step, whether it refused the
/// options, and its log.
pub(crate) fn hint(step: Step, bad_options: bool, log: &str, flags: &str) -> String {
    let lower = log.to_lowercase();
    if bad_options {
        return format!(
            "the build options `{flags}` are not valid for this device: check the options given to the launch or the bundle"
        );
    }
    if lower.contains("symbols not found")
        || lower.contains("undefined")
        || lower.contains("unresolved")
    {
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
    let flags =
        if flags.is_empty() { String::new() } else { format!(" with the options `{flags}`") };
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

#[cfg(test)]
mod tests {
    use super::*;
    use sycl_format::{
        sets, Image, ImageSet, Property, PropertySet, PropertyValue, PTX_INLINED_TARGET,
    };

    fn ptx(target: &str, kernels: &[&str], sets: Vec<PropertySet>, data: &[u8]) -> Image {
        let kernels = kernels.iter().map(|k| k.to_string()).collect();
        Image {
            format: ImageFormat::Ptx,
            target: target.into(),
            kernels,
            property_sets: sets,
            data: data.to_vec(),
        }
    }

    /// An app whose kernel imports `f`, with a twin that compiled in the image `libf.so` exports
    /// it from; `first`, when given, is a library loaded before it that exports another `f`.
    fn loaded(first: Option<&[u8]>) -> Registry {
        let plain = ptx(
            "ptx64",
            &["k"],
            vec![PropertySet::symbols(sets::IMPORTED_SYMBOLS, ["f"])],
            b"plain",
        );
        let hash = format!("{:016x}", sycl_format::payload_hash(b"f from libf"));
        let inlined = PropertySet {
            name: sets::INLINED_IMPORTS.into(),
            properties: vec![Property::new("f", PropertyValue::String(hash))],
        };
        let twin = ptx(PTX_INLINED_TARGET, &["k"], vec![inlined], b"twin");
        let provider = |data: &[u8]| ImageSet {
            images: vec![ptx(
                "ptx64",
                &[],
                vec![PropertySet::symbols(sets::EXPORTED_SYMBOLS, ["f"])],
                data,
            )],
        };
        let mut binaries = vec![("app".to_string(), ImageSet { images: vec![twin, plain] })];
        if let Some(data) = first {
            binaries.push(("preloaded.so".into(), provider(data)));
        }
        binaries.push(("libf.so".into(), provider(b"f from libf")));
        Registry::from_binaries(binaries)
    }

    fn collect(registry: &Registry) -> Collected {
        let variants = [Variant { format: ImageFormat::Ptx, target: "ptx64".into() }];
        resolve::collect(registry, "k", &variants, &|_| true).unwrap()
    }

    #[test]
    fn the_inlined_twin_replaces_exactly_the_images_it_compiled_in() {
        let registry = loaded(None);
        let inlined = with_inlined_imports(&registry, "k", collect(&registry));
        assert_eq!(inlined.variant.target, PTX_INLINED_TARGET);
        assert_eq!(inlined.images.len(), 1);
        assert_eq!(registry.image(inlined.images[0]).data, b"twin");

        // Another `f` first in loader order (LD_PRELOAD): the images resolution picked.
        let registry = loaded(Some(b"another f"));
        let collected = collect(&registry);
        let kept = with_inlined_imports(&registry, "k", collected.clone());
        assert_eq!(kept.variant.target, "ptx64");
        assert_eq!(kept.images, collected.images);
        assert_eq!(registry.image(kept.images[1]).data, b"another f");
    }
}
