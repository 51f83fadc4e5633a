//! Kernel bundles (DPC++'s SYCL modules design, which became SYCL 2020's `kernel_bundle`)
//! and specialization constants.
//!
//! A bundle is a cheap handle to shared state: a device (its context), a set of device images
//! and, by state, what has been done with them. The state is a type parameter, so an
//! operation that needs an executable bundle does not compile with another:
//! [`Input`] (images as they were embedded; specialization constants can be set),
//! [`Object`] (compiled; imports may be unresolved), [`Executable`] (linked: every import
//! resolved, kernels ready to launch). [`compile`], [`link`], [`build`] and [`join`] move
//! between them, as the design's free functions do. Two bundles are equal when they are for the
//! same device, in the same state, with the same images.
//!
//! A bundle's images are of one form, the first the device specializes and links at run time
//! that has them: a GPU's native objects where the binaries carry them for its architecture,
//! else its linkable form (SPIR-V, PTX).

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::sync::Arc;

use sycl_format::{Image, ImageFormat, Target};

use super::queue::{as_bytes, Pod, Queue};
use crate::backend::{self, Program};
use crate::discovery::files::DeviceLibrary;
use crate::process::runtime;
use crate::program::{can_translate, DeviceState, Options, SpecValues};
use crate::registry::{ImageId, Registry};
use crate::resolve;
use crate::trace::trace;
use crate::Error;

mod sealed {
    pub trait Sealed {}
}

/// A bundle state.
pub trait BundleState: sealed::Sealed + Send + Sync + 'static {
    /// The state's name, as SYCL's `bundle_state` spells it.
    const NAME: &'static str;
}

/// Images as embedded: may have unresolved imports; specialization constants can be set.
pub struct Input;
/// Compiled images: may have unresolved imports.
pub struct Object;
/// Linked images: every import resolved, kernels ready to launch.
pub struct Executable;

impl sealed::Sealed for Input {}
impl sealed::Sealed for Object {}
impl sealed::Sealed for Executable {}
impl BundleState for Input {
    const NAME: &'static str = "input";
}
impl BundleState for Object {
    const NAME: &'static str = "object";
}
impl BundleState for Executable {
    const NAME: &'static str = "executable";
}

/// A named specialization constant of type `T`; sycl-build generates one per
/// `SYCL_SPEC_CONSTANT` (`kernels::spec::NAME`).
pub struct SpecConstant<T: Pod> {
    name: &'static str,
    _t: PhantomData<fn() -> T>,
}

impl<T: Pod> SpecConstant<T> {
    /// The constant of this name (as `SYCL_SPEC_CONSTANT` declared it).
    pub const fn new(name: &'static str) -> SpecConstant<T> {
        SpecConstant { name, _t: PhantomData }
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl<T: Pod> Clone for SpecConstant<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Pod> Copy for SpecConstant<T> {}

/// A build property: typed, not a flag string; [`BuildProperty::OpenClFlags`] is the
/// explicit, backend-specific escape.
#[derive(Clone)]
pub enum BuildProperty {
    /// Build with debug information.
    Debug,
    /// Every build log goes to this sink.
    Log(Arc<dyn Fn(&str) + Send + Sync>),
    /// Raw OpenCL compiler and linker flags (backend-specific).
    OpenClFlags(String),
}

impl BuildProperty {
    /// A log sink from a closure.
    pub fn log(sink: impl Fn(&str) + Send + Sync + 'static) -> BuildProperty {
        BuildProperty::Log(Arc::new(sink))
    }
}

fn flags_of(properties: &[BuildProperty]) -> String {
    let mut flags = Vec::new();
    for p in properties {
        match p {
            BuildProperty::Debug => flags.push("-g".to_string()),
            BuildProperty::OpenClFlags(f) => flags.push(f.clone()),
            BuildProperty::Log(_) => {}
        }
    }
    flags.join(" ")
}

/// Passes a build failure's log to every log sink, then returns it.
fn logged(properties: &[BuildProperty], e: Error) -> Error {
    if let Error::Build { log, .. } = &e {
        for p in properties {
            if let BuildProperty::Log(sink) = p {
                sink(log);
            }
        }
    }
    e
}

/// A device image of a bundle, as [`KernelBundle::images`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceImage {
    /// The binary that embeds it.
    pub binary: String,
    /// Its index among that binary's images.
    pub index: u32,
    /// Its format (SPIR-V, PTX, …).
    pub format: ImageFormat,
    /// The target it was made for (`spir64`, `ptx64`, …).
    pub target: String,
    /// The kernels it defines.
    pub kernels: Vec<String>,
    /// The device functions it exports.
    pub exported: Vec<String>,
    /// The device functions it imports.
    pub imported: Vec<String>,
    /// Specialization values the image is (or will be) built with, by name.
    pub specialization: BTreeMap<String, Vec<u8>>,
}

/// A device image selector: among the images that define a kernel, the index of the one to use.
pub(crate) type ImageSelector = dyn Fn(&[DeviceImage]) -> usize;

/// A linked program of an executable bundle, with the images and specialization values it
/// was built from.
#[derive(Clone)]
struct Linked {
    images: Vec<ImageId>,
    spec: SpecValues,
    program: Arc<Program>,
}

struct Inner {
    queue: Queue,
    registry: Arc<Registry>,
    /// Sorted, without duplicates.
    images: Vec<ImageId>,
    spec: SpecValues,
    flags: String,
    /// Object state: the compiled image objects (devices that link); empty otherwise.
    objects: Vec<(ImageId, Arc<backend::Object>)>,
    /// Executable state: the linked programs.
    programs: Vec<Linked>,
}

/// A set of device images for one device, in state `S`. `Send + Sync`: a cheap handle to
/// shared, immutable state.
pub struct KernelBundle<S: BundleState> {
    inner: Arc<Inner>,
    _s: PhantomData<S>,
}

impl<S: BundleState> Clone for KernelBundle<S> {
    fn clone(&self) -> Self {
        KernelBundle { inner: self.inner.clone(), _s: PhantomData }
    }
}

impl<S: BundleState> PartialEq for KernelBundle<S> {
    /// The design's equality: same device, same state (the type), same images.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner.queue.state(), &other.inner.queue.state())
            && self.inner.images == other.inner.images
    }
}

impl<S: BundleState> std::fmt::Debug for KernelBundle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelBundle")
            .field("state", &S::NAME)
            .field("device", &self.inner.queue.device_name())
            .field("kernels", &self.kernel_names())
            .finish()
    }
}

fn bundle<S: BundleState>(inner: Inner) -> KernelBundle<S> {
    KernelBundle { inner: Arc::new(inner), _s: PhantomData }
}

impl<S: BundleState> KernelBundle<S> {
    fn device(&self) -> Arc<DeviceState> {
        self.inner.queue.state()
    }

    fn image(&self, id: ImageId) -> &Image {
        self.inner.registry.image(id)
    }

    /// Whether a kernel of this name is in the bundle.
    pub fn has_kernel(&self, name: &str) -> bool {
        self.inner.images.iter().any(|&id| self.image(id).kernels.iter().any(|k| k == name))
    }

    /// The kernels of the bundle, sorted.
    pub fn kernel_names(&self) -> Vec<String> {
        let names: BTreeSet<&String> =
            self.inner.images.iter().flat_map(|&id| &self.image(id).kernels).collect();
        names.into_iter().cloned().collect()
    }

    /// The bundle's device images. An executable bundle lists each image once per program
    /// built from it (joined executables may hold one image specialized two ways).
    pub fn images(&self) -> Vec<DeviceImage> {
        self.image_entries().into_iter().map(|(_, image)| image).collect()
    }

    /// Images with the program each belongs to (executable bundles).
    fn image_entries(&self) -> Vec<(Option<usize>, DeviceImage)> {
        let describe = |id: ImageId, spec: &SpecValues| {
            let registry = &self.inner.registry;
            let image = registry.image(id);
            DeviceImage {
                binary: registry.binary(id.binary).name.clone(),
                index: id.image,
                format: image.format,
                target: image.target.clone(),
                kernels: image.kernels.clone(),
                exported: image.exported_symbols().map(str::to_string).collect(),
                imported: image.imported_symbols().map(str::to_string).collect(),
                specialization: spec.0.clone(),
            }
        };
        if self.inner.programs.is_empty() {
            self.inner.images.iter().map(|&id| (None, describe(id, &self.inner.spec))).collect()
        } else {
            self.inner
                .programs
                .iter()
                .enumerate()
                .flat_map(|(p, linked)| {
                    linked.images.iter().map(move |&id| (Some(p), describe(id, &linked.spec)))
                })
                .collect()
        }
    }

    /// Whether any image of the bundle has specialization constants.
    pub fn has_spec_constants(&self) -> bool {
        self.inner.images.iter().any(|&id| {
            self.image(id).property_set(sycl_format::sets::SPECIALIZATION_CONSTANTS).is_some()
        })
    }

    /// Whether the bundle holds no image.
    pub fn is_empty(&self) -> bool {
        self.inner.images.is_empty()
    }
}

impl KernelBundle<Input> {
    /// Every image of the binary that contains `address` (see [`crate::this_module!`]).
    #[doc(hidden)]
    pub fn of_binary_containing(
        queue: &Queue,
        address: usize,
    ) -> Result<KernelBundle<Input>, Error> {
        let registry = runtime().registry();
        let images = match registry.binary_containing(address) {
            Some(binary) => {
                (0..binary.image_count).map(|image| ImageId { binary: binary.id, image }).collect()
            }
            None => vec![],
        };
        Ok(input(queue, registry, images, Keep::Runnable))
    }

    /// Every image of a loaded device-library file that the device can run.
    fn of_device_library(queue: &Queue, library: u64) -> KernelBundle<Input> {
        let registry = runtime().registry();
        let images = match registry.file_binaries.get(&library) {
            Some(&binary) => (0..registry.binary(binary).image_count)
                .map(|image| ImageId { binary, image })
                .collect(),
            None => vec![],
        };
        input(queue, registry, images, Keep::Runnable)
    }

    /// Sets a specialization constant's value for everything built from this bundle (a new
    /// handle; the old one keeps its values). The value is part of every cache key.
    pub fn with_spec_constant<T: Pod>(
        &self,
        constant: SpecConstant<T>,
        value: T,
    ) -> KernelBundle<Input> {
        let mut spec = self.inner.spec.clone();
        spec.0.insert(constant.name.to_string(), as_bytes(std::slice::from_ref(&value)).to_vec());
        bundle(Inner { spec, ..self.inner.shallow() })
    }
}

impl DeviceLibrary {
    /// An input bundle of this library's images.
    pub fn kernel_bundle(&self, queue: &Queue) -> KernelBundle<Input> {
        KernelBundle::of_device_library(queue, self.id)
    }
}

impl Inner {
    /// The form of its images (all have one), when it has any.
    fn form(&self) -> Option<Target> {
        self.registry.form_of(*self.images.first()?)
    }

    fn shallow(&self) -> Inner {
        Inner {
            queue: self.queue.clone(),
            registry: self.registry.clone(),
            images: self.images.clone(),
            spec: self.spec.clone(),
            flags: self.flags.clone(),
            objects: self.objects.clone(),
            programs: self.programs.clone(),
        }
    }
}

impl KernelBundle<Executable> {
    /// `kernel_not_found` for `kernel`, naming the bundle and its closest kernels.
    fn not_found(&self, kernel: &str) -> Error {
        let entries = self.image_entries();
        let names = entries.iter().flat_map(|(_, image)| image.kernels.iter().map(String::as_str));
        Error::KernelNotFound {
            kernel: kernel.to_string(),
            searched: vec![format!("{self:?}")],
            similar: crate::registry::closest(kernel, names),
        }
    }

    /// Whether `kernel` is in the bundle; `kernel_not_found` otherwise.
    pub fn get_kernel(&self, kernel: &str) -> Result<String, Error> {
        if self.has_kernel(kernel) {
            Ok(kernel.to_string())
        } else {
            Err(self.not_found(kernel))
        }
    }

    /// The program for `kernel`: among the images that define it, the one `select` picks
    /// (by default the first).
    pub(crate) fn program_for(
        &self,
        kernel: &str,
        select: Option<&ImageSelector>,
    ) -> Result<Arc<Program>, Error> {
        let candidates: Vec<(Option<usize>, DeviceImage)> = self
            .image_entries()
            .into_iter()
            .filter(|(_, i)| i.kernels.iter().any(|k| k == kernel))
            .collect();
        if candidates.is_empty() {
            return Err(self.not_found(kernel));
        }
        let choice = match select {
            Some(select) => {
                let images: Vec<DeviceImage> = candidates.iter().map(|(_, i)| i.clone()).collect();
                let pick = select(&images);
                candidates.get(pick).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "the image selector chose {pick} of {} images",
                        images.len()
                    ))
                })?
            }
            None => &candidates[0],
        };
        choice.0.map(|p| self.inner.programs[p].program.clone()).ok_or_else(|| {
            Error::KernelNotFound {
                kernel: kernel.to_string(),
                searched: vec![format!("{self:?}")],
                similar: vec![],
            }
        })
    }

    pub(crate) fn device_is(&self, queue: &Queue) -> bool {
        Arc::ptr_eq(&self.device(), &queue.state())
    }

    /// The registry the bundle's images come from.
    pub(crate) fn registry(&self) -> Arc<Registry> {
        self.inner.registry.clone()
    }
}

/// The one image form of a bundle's images on a device: the first of the device's
/// [`bundle_forms`](crate::backend::Capabilities::bundle_forms) (a GPU's native forms, then its
/// linkable form: SPIR-V, PTX) in which `wanted` finds what it looks for.
///
/// A native form only serves when every binary with images of the linkable form has images
/// of it too: a bundle's imports resolve within its one form, so a library built without the
/// native target makes the bundle PTX (as it makes a launch's program PTX).
fn bundle_form(queue: &Queue, registry: &Registry, wanted: impl Fn(Target) -> bool) -> Target {
    let caps = &queue.state().caps;
    let linkable = caps.linkable();
    let everywhere = |form: Target| {
        form == linkable
            || registry.binaries.iter().all(|b| {
                let image = |image| ImageId { binary: b.id, image };
                let of = |form| (0..b.image_count).any(|i| is_of(registry, image(i), form));
                !of(linkable) || of(form)
            })
    };
    caps.bundle_forms()
        .into_iter()
        .find(|&form| everywhere(form) && wanted(form))
        .unwrap_or(linkable)
}

fn is_of(registry: &Registry, id: ImageId, form: Target) -> bool {
    registry.form_of(id) == Some(form)
}

/// Which images an input bundle keeps: those of the kernels asked for, or every image the
/// device can run (a whole binary's bundle leaves out what needs an aspect the device lacks,
/// as DPC++'s `get_kernel_bundle` does, rather than failing its compile for one kernel).
#[derive(Clone, Copy, PartialEq)]
enum Keep {
    Asked,
    Runnable,
}

fn input(
    queue: &Queue,
    registry: Arc<Registry>,
    mut images: Vec<ImageId>,
    keep: Keep,
) -> KernelBundle<Input> {
    // Only one form the device compiles, specializes and links at run time: bundles are
    // compiled and linked for their device at run time.
    let form =
        bundle_form(queue, &registry, |form| images.iter().any(|&id| is_of(&registry, id, form)));
    images.retain(|&id| is_of(&registry, id, form));
    if keep == Keep::Runnable {
        let state = queue.state();
        let device = state.for_device();
        images.retain(|&id| device.can_run(registry.view(id)));
    }
    images.sort();
    images.dedup();
    bundle(Inner {
        queue: queue.clone(),
        registry,
        images,
        spec: SpecValues::default(),
        flags: String::new(),
        objects: vec![],
        programs: vec![],
    })
}

/// An input bundle of every image of every loaded binary that the queue's device can run (one
/// needing an aspect the device lacks, such as `fp16`, is left out, as DPC++'s
/// `get_kernel_bundle` leaves out incompatible images).
pub fn get_kernel_bundle(queue: &Queue) -> KernelBundle<Input> {
    let registry = runtime().registry();
    let images = registry
        .binaries
        .iter()
        .flat_map(|b| (0..b.image_count).map(move |image| ImageId { binary: b.id, image }))
        .collect();
    input(queue, registry, images, Keep::Runnable)
}

/// An input bundle of the images that define `kernels` (not the images they import from:
/// [`link`] finds those). A kernel no image defines is `kernel_not_found`; one whose image
/// needs what the device lacks, and which the device's form therefore left out, is
/// `kernel_not_supported`, as a launch would say.
pub fn get_kernel_bundle_for(
    queue: &Queue,
    kernels: &[&str],
) -> Result<KernelBundle<Input>, Error> {
    let registry = runtime().registry();
    let device = queue.state();
    let form = bundle_form(queue, &registry, |form| {
        kernels.iter().all(|kernel| !registry.kernel_images(form, kernel).is_empty())
    });
    let mut images = Vec::new();
    for kernel in kernels {
        let found = registry.kernel_images(form, kernel);
        if found.is_empty() {
            return Err(resolve::not_found(&registry, kernel, device.for_device()));
        }
        images.extend_from_slice(found);
    }
    Ok(input(queue, registry, images, Keep::Asked))
}

/// Whether a bundle in state `S` can be had for this queue's device from the loaded binaries:
/// input needs images; object and executable also a device that can compile and link them.
pub fn has_kernel_bundle<S: BundleState>(queue: &Queue) -> bool {
    let has_images = !get_kernel_bundle(queue).is_empty();
    let device = queue.state();
    match S::NAME {
        "input" => has_images,
        _ => has_images && (device.caps.links_images || can_translate()),
    }
}

/// Compiles an input bundle (with its specialization values) into an object bundle. Imports
/// may stay unresolved.
pub fn compile(
    input: &KernelBundle<Input>,
    properties: &[BuildProperty],
) -> Result<KernelBundle<Object>, Error> {
    let device = input.device();
    let flags = flags_of(properties);
    let spec = input.inner.spec.checked(
        &input.inner.registry,
        &input.inner.images,
        "the bundle",
        false,
    )?;
    let options = Options { flags: flags.clone(), spec };
    let objects = if device.caps.links_images {
        let compiled = device
            .compile_images(&input.inner.registry, &input.inner.images, &Vec::new(), &options)
            .map_err(|e| logged(properties, e))?;
        input.inner.images.iter().copied().zip(compiled).collect()
    } else {
        vec![] // linked by the runtime and translated at link time
    };
    Ok(bundle(Inner { flags, objects, ..input.inner.shallow() }))
}

/// Links object bundles into an executable bundle: imports are resolved across the given
/// objects, then against the exports of the loaded libraries; an import nobody exports is an
/// error. Linking nothing, or bundles of different devices, is an error.
pub fn link(
    objects: &[&KernelBundle<Object>],
    properties: &[BuildProperty],
) -> Result<KernelBundle<Executable>, Error> {
    let first = objects.first().ok_or_else(|| Error::InvalidObject("link of no bundles".into()))?;
    let device = first.device();
    if objects.iter().any(|o| !Arc::ptr_eq(&o.device(), &device)) {
        return Err(Error::InvalidObject("link of bundles for different devices".into()));
    }
    let spec = first.inner.spec.clone();
    if objects.iter().any(|o| o.inner.spec != spec) {
        return Err(Error::InvalidObject(
            "link of bundles with different specialization values".into(),
        ));
    }
    let registry = first.inner.registry.clone();
    let mut images: Vec<ImageId> =
        objects.iter().flat_map(|o| o.inner.images.iter().copied()).collect();
    images.sort();
    images.dedup();
    let Some(&any) = images.first() else {
        return Err(Error::InvalidObject("link of empty bundles".into()));
    };
    let form = registry.form_of(any).unwrap_or(device.caps.linkable());
    if !images.iter().all(|&id| is_of(&registry, id, form)) {
        return Err(Error::InvalidObject(
            "link of bundles of different image forms (native code and PTX): make them all \
             from the same binaries"
                .into(),
        ));
    }

    // Every import resolved within the bundle first, then against the loaded libraries'
    // exports, by the one resolver launches use (sets, strict mode, the checks).
    let plan = resolve::plan_bundle(&registry, &images, form, device.for_device())?;
    let flags = [first.inner.flags.clone(), flags_of(properties)].join(" ").trim().to_string();
    let options = Options {
        flags: flags.clone(),
        spec: spec.checked(&registry, plan.images(), "the bundle", true)?,
    };
    let given: Vec<(ImageId, Arc<backend::Object>)> =
        objects.iter().flat_map(|o| o.inner.objects.iter().cloned()).collect();
    // Build properties are compiler options; clLinkProgram takes almost none of them.
    let program = device
        .link_plan(&registry, "(bundle)", &plan, &options, &given, "")
        .map_err(|e| logged(properties, e))?;
    let mut images = plan.images().to_vec();
    images.sort();
    let programs =
        vec![Linked { images: images.clone(), spec: spec.clone(), program: Arc::new(program) }];
    Ok(bundle(Inner { images, flags, objects: vec![], programs, ..first.inner.shallow() }))
}

/// Compiles and links an input bundle. A bundle of native NVIDIA objects that fail (the GPU
/// cannot run them, or its driver refuses them) is built again from the same binaries' PTX,
/// as a launch would be.
pub fn build(
    input: &KernelBundle<Input>,
    properties: &[BuildProperty],
) -> Result<KernelBundle<Executable>, Error> {
    // The object keeps the flags it was compiled with, which its link adds to its own: the
    // link is given the log sinks alone (given the flags again, it passed each one twice).
    let logs: Vec<BuildProperty> =
        properties.iter().filter(|p| matches!(p, BuildProperty::Log(_))).cloned().collect();
    let build = |input| compile(input, properties).and_then(|object| link(&[&object], &logs));
    match build(input) {
        Err(native) if input.inner.form().is_some_and(|f| f.cuda_arch().is_some()) => {
            let Some(linkable) = in_linkable_form(input) else { return Err(native) };
            let device = input.device();
            trace!(
                "native-fallback",
                "(bundle) on {}: {native}; building {}",
                device.name,
                device.caps.linkable().name()
            );
            build(&linkable)
        }
        built => built,
    }
}

/// `input` with each image replaced by the image of the device's linkable form in the same
/// binary that defines the same kernels and exports; `None` when one has no such image.
fn in_linkable_form(input: &KernelBundle<Input>) -> Option<KernelBundle<Input>> {
    let registry = &input.inner.registry;
    let form = input.device().caps.linkable();
    let same = |a: &Image, b: &Image| {
        a.kernels == b.kernels && a.exported_symbols().eq(b.exported_symbols())
    };
    let mut images = Vec::with_capacity(input.inner.images.len());
    for &id in &input.inner.images {
        let binary = registry.binary(id.binary);
        let found = (0..binary.image_count)
            .map(|image| ImageId { binary: id.binary, image })
            .find(|&other| {
                is_of(registry, other, form) && same(registry.image(id), registry.image(other))
            })?;
        images.push(found);
    }
    images.sort();
    images.dedup();
    Some(bundle(Inner { images, ..input.inner.shallow() }))
}

/// One bundle with the images of all. Joining nothing or bundles of different devices is an
/// error, and so is joining input or object bundles with different specialization values
/// (executables keep each program's own: joining is how one kernel comes specialized two
/// ways, for an image selector to choose from).
pub fn join<S: BundleState>(bundles: &[&KernelBundle<S>]) -> Result<KernelBundle<S>, Error> {
    let first = bundles.first().ok_or_else(|| Error::InvalidObject("join of no bundles".into()))?;
    for b in bundles {
        if !Arc::ptr_eq(&b.device(), &first.device()) {
            return Err(Error::InvalidObject("join of bundles for different devices".into()));
        }
        if S::NAME != Executable::NAME && b.inner.spec != first.inner.spec {
            return Err(Error::InvalidObject(
                "join of bundles with different specialization values".into(),
            ));
        }
    }
    let mut inner = first.inner.shallow();
    for b in &bundles[1..] {
        inner.images.extend(b.inner.images.iter().copied());
        inner.objects.extend(b.inner.objects.iter().cloned());
        inner.programs.extend(b.inner.programs.iter().cloned());
    }
    inner.images.sort();
    inner.images.dedup();
    Ok(bundle(inner))
}

/// The input bundle of the binary (executable or shared library) this expands in, as the
/// design's `this_module` gives the current translation unit's: every image of it the queue's
/// device can run (one needing an aspect the device lacks, such as `fp16`, is left out).
#[macro_export]
macro_rules! this_module {
    ($queue:expr) => {{
        static ANCHOR: u8 = 0;
        $crate::KernelBundle::<$crate::Input>::of_binary_containing(
            $queue,
            &ANCHOR as *const u8 as usize,
        )
    }};
}
