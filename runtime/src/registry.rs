//! The device images of every loaded binary, indexed at first use and again whenever the
//! loader's counts show a library was opened or closed: kernels and exported symbols map to
//! the images that define them, per image form, in the dynamic loader's order (executable,
//! LD_PRELOAD'ed libraries, needed libraries in load order, dlopen'ed ones in the order they
//! were opened), so the first provider is the one the loader would pick for a host symbol.
//!
//! A binary keeps the same id across rediscoveries while it stays loaded (same file, address
//! and images), so programs built from it stay cached; a closed one's id disappears, and with
//! it every program built from it. A binary whose payload is malformed is recorded with its
//! error and contributes no images; every other binary works as usual.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use sycl_format::{sets, DeviceRequirements, Image, ImageFormat, ImageSet, ImageSetView, ImageView, PropertySet};

use crate::device::Variant;
use crate::loaded::{loaded_objects, loader_counters, GlobalScope};
use crate::trace::trace;

/// A loaded binary, stable while it stays loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BinaryId(u64);

/// An image: which binary and which image in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ImageId {
    pub binary: BinaryId,
    pub image: u32,
}

/// A loaded executable or shared library that carries device images.
pub(crate) struct Binary {
    pub id: BinaryId,
    pub name: String,
    /// Its image-set payloads, copied out of the loaded object and checked. Discovery indexes
    /// them in place; the images are copied out of them when first needed.
    payloads: Vec<Arc<[u8]>>,
    images: OnceLock<Arc<[Image]>>,
    pub image_count: u32,
    pub error: Option<String>,
    /// For a library opened `RTLD_LOCAL`: itself and the libraries it depends on, the only
    /// binaries whose exports its images may use and that may use its exports.
    pub local_group: Option<Vec<BinaryId>>,
    /// Address ranges of its loaded segments.
    pub ranges: Vec<(usize, usize)>,
}

#[derive(Default)]
pub(crate) struct Registry {
    pub binaries: Vec<Binary>,
    position: HashMap<BinaryId, usize>,
    /// By image form, then by name: looked up on every launch without building a key. With
    /// foldhash rather than SipHash: the keys are names from loaded binaries, and discovery
    /// inserts every one of them.
    kernels: Vec<(Variant, ByName)>,
    exports: Vec<(Variant, ByName)>,
    /// Virtual-function set → the images that provide it (real and dummy).
    sets: HashMap<(Variant, String), Vec<ImageId>>,
    /// Virtual-function set → the images whose kernels use it.
    set_users: HashMap<(Variant, String), Vec<ImageId>>,
    /// `(dlpi_adds, dlpi_subs)` when this registry was made.
    pub counters: (u64, u64),
    /// The device-library files' generation when this registry was made.
    pub files_generation: u64,
    /// Binary id of each loaded device-library file, by load id.
    pub file_binaries: HashMap<u64, BinaryId>,
    /// Whether any image calls through function pointers (needs aspect `function_pointers`).
    pub uses_function_pointers: bool,
}

/// For each loaded object: `None` when its symbols are in the global scope, or for one
/// opened `RTLD_LOCAL` its group: itself and what it needs, transitively. An object is local
/// when the marker symbol of its images (see `sycl_format::scope_marker_symbol`) is not
/// visible in the global scope. The executable and objects without images are global.
fn local_groups(objects: &[crate::loaded::LoadedObject], ids: &[BinaryId]) -> Vec<Option<Vec<BinaryId>>> {
    let by_file: HashMap<&str, usize> =
        objects.iter().enumerate().map(|(i, o)| (o.name.rsplit('/').next().unwrap_or(&o.name), i)).collect();
    let scope = GlobalScope::open();
    objects
        .iter()
        .enumerate()
        .map(|(i, object)| {
            let global = i == 0
                || object.payloads.as_ref().map_or(true, Vec::is_empty)
                || scope.as_ref().is_none_or(|scope| {
                    object.payload_hashes.iter().any(|h| scope.defines(object, &sycl_format::scope_marker_symbol(*h)))
                });
            if global {
                return None;
            }
            let mut group = vec![i];
            let mut next = 0;
            while next < group.len() {
                for needed in &objects[group[next]].needed {
                    if let Some(&j) = by_file.get(needed.as_str()) {
                        if !group.contains(&j) {
                            group.push(j);
                        }
                    }
                }
                next += 1;
            }
            Some(group.into_iter().map(|j| ids[j]).collect())
        })
        .collect()
}

/// Images by kernel or symbol name, in loader order.
type ByName = HashMap<String, Ids, foldhash::fast::RandomState>;

/// The images of one name: almost always one, kept without an allocation of its own.
enum Ids {
    One([ImageId; 1]),
    Many(Vec<ImageId>),
}

impl Ids {
    fn push(&mut self, id: ImageId) {
        match self {
            Ids::One([first]) => *self = Ids::Many(vec![*first, id]),
            Ids::Many(ids) => ids.push(id),
        }
    }

    fn as_slice(&self) -> &[ImageId] {
        match self {
            Ids::One(one) => one,
            Ids::Many(ids) => ids,
        }
    }
}

/// The names of `variant`'s map in `maps` (one per image form: a short list).
fn by_name<'m>(maps: &'m mut Vec<(Variant, ByName)>, format: ImageFormat, target: &str) -> &'m mut ByName {
    let at = match maps.iter().position(|(v, _)| v.format == format && v.target == target) {
        Some(at) => at,
        None => {
            maps.push((Variant { format, target: target.to_string() }, ByName::default()));
            maps.len() - 1
        }
    };
    &mut maps[at].1
}

/// What the registry indexes of one image: from a view of a loaded payload, or from an image
/// of a device-library file.
struct Indexed<'s, K, E, U> {
    format: ImageFormat,
    target: &'s str,
    kernels: K,
    exports: E,
    set: Option<&'s str>,
    uses: U,
    uses_function_pointers: bool,
}

fn calls_through_pointers(requirements: Option<&PropertySet>) -> bool {
    requirements.is_some_and(|set| {
        let aspect = sycl_format::aspects::aspect_number("function_pointers").expect("known aspect");
        DeviceRequirements::from_property_set(set).is_ok_and(|r| r.aspects.contains(&aspect))
    })
}

impl Binary {
    fn new(id: BinaryId, name: String, local_group: Option<Vec<BinaryId>>, ranges: Vec<(usize, usize)>) -> Binary {
        Binary { id, name, payloads: vec![], images: OnceLock::new(), image_count: 0, error: None, local_group, ranges }
    }

    /// The images, copied out of the payloads at the first call.
    pub(crate) fn images(&self) -> &[Image] {
        self.images.get_or_init(|| {
            // The payloads were checked when indexed, and are ours: reading them again cannot fail.
            let views = self.payloads.iter().filter_map(|p| ImageSetView::parse(p).ok());
            views.flat_map(|view| view.images.iter().map(ImageView::to_image).collect::<Vec<_>>()).collect()
        })
    }
}

/// A loaded object's identity: name, load address, hash of its payloads.
type LoadKey = (String, usize, u64);

/// Ids handed out so far, by identity.
fn binary_id(name: &str, base: usize, payload_hashes: &[u64]) -> BinaryId {
    static IDS: Mutex<Option<HashMap<LoadKey, u64>>> = Mutex::new(None);
    let hash = payload_hashes.iter().fold(payload_hashes.len() as u64, |h, p| h.rotate_left(5) ^ p);
    let key = (name.to_string(), base, hash);
    let mut ids = IDS.lock().unwrap_or_else(|e| e.into_inner());
    let ids = ids.get_or_insert_with(HashMap::new);
    let next = ids.len() as u64;
    BinaryId(*ids.entry(key).or_insert(next))
}

impl Registry {
    pub(crate) fn discover() -> Registry {
        let counters = loader_counters();
        let mut registry = Registry { counters, ..Registry::default() };
        let objects = loaded_objects();
        let ids: Vec<BinaryId> = objects.iter().map(|o| binary_id(&o.name, o.base, &o.payload_hashes)).collect();
        let groups = local_groups(&objects, &ids);
        let files = crate::library::files();
        registry.files_generation = crate::library::generation();
        // The kernel index sized once for every image (most are JIT SPIR-V, one kernel each).
        let images: usize =
            objects.iter().flat_map(|o| o.payloads.iter().flatten()).map(|p| ImageSetView::count_hint(p)).sum();
        let spirv = Variant::spirv();
        by_name(&mut registry.kernels, spirv.format, &spirv.target).reserve(images);
        for (index, object) in objects.into_iter().enumerate() {
            let mut binary = Binary::new(ids[index], object.name, groups[index].clone(), object.ranges);
            match object.payloads {
                Ok(payloads) if payloads.is_empty() => continue,
                Ok(payloads) => binary.payloads = payloads,
                Err(e) => binary.error = Some(e.to_string()),
            }
            registry.add(binary);
        }
        // Device-library files come last in resolution order, in the order they were loaded.
        for file in &files.list {
            let name = file.path.display().to_string();
            let id = binary_id(&name, usize::MAX - file.id as usize, &[]);
            let local_group = (file.scope == crate::library::LibraryScope::Own).then(|| vec![id]);
            trace!("discover", "{name}: {} image(s) from a device library file", file.images.len());
            let binary = Binary::new(id, name, local_group, vec![]);
            let _ = binary.images.set(file.images.clone());
            registry.file_binaries.insert(file.id, id);
            registry.add(binary);
        }
        registry
    }

    /// A registry of the given binaries, in this order, as if they were loaded (benchmarks).
    pub(crate) fn from_binaries(binaries: Vec<(String, ImageSet)>) -> Registry {
        let mut registry = Registry::default();
        for (i, (name, set)) in binaries.into_iter().enumerate() {
            let binary = Binary::new(binary_id(&name, i, &[]), name, None, vec![]);
            let _ = binary.images.set(set.images.into());
            registry.add(binary);
        }
        registry
    }

    /// Whether libraries were opened or closed since this registry was made.
    pub(crate) fn is_stale(&self) -> bool {
        loader_counters() != self.counters || crate::library::generation() != self.files_generation
    }

    /// Indexes `binary`'s images and appends it. Payloads are read in place; a malformed one
    /// leaves the binary without images, its error recorded.
    fn add(&mut self, mut binary: Binary) {
        let mut count = 0u32;
        if let Some(images) = binary.images.get().cloned() {
            for image in images.iter() {
                let id = ImageId { binary: binary.id, image: count };
                self.index(
                    id,
                    Indexed {
                        format: image.format,
                        target: &image.target,
                        kernels: image.kernels.iter().map(String::as_str),
                        exports: image.exported_symbols(),
                        set: image.virtual_functions_set().map(|(set, _)| set),
                        uses: image.uses_virtual_functions_sets().into_iter(),
                        uses_function_pointers: calls_through_pointers(image.property_set(sets::DEVICE_REQUIREMENTS)),
                    },
                );
                count += 1;
            }
        } else if binary.error.is_none() {
            let views: Result<Vec<ImageSetView<'_>>, _> =
                binary.payloads.iter().map(|p| ImageSetView::parse(p)).collect();
            match views {
                Ok(views) => {
                    for image in views.iter().flat_map(|v| &v.images) {
                        let id = ImageId { binary: binary.id, image: count };
                        let requirements = image.property_set(sets::DEVICE_REQUIREMENTS).map(|s| s.to_property_set());
                        self.index(
                            id,
                            Indexed {
                                format: image.format,
                                target: image.target,
                                kernels: image.kernels(),
                                exports: image.exported_symbols(),
                                set: image.virtual_functions_set().map(|(set, _)| set),
                                uses: image.uses_virtual_functions_sets(),
                                uses_function_pointers: calls_through_pointers(requirements.as_ref()),
                            },
                        );
                        count += 1;
                    }
                }
                Err(e) => binary.error = Some(e.to_string()),
            }
        }
        match &binary.error {
            Some(error) => {
                trace!("discover", "{}: malformed device images ignored: {error}", binary.name);
                log::warn!("{}: malformed device images ignored: {error}", binary.name);
                binary.payloads.clear();
                count = 0;
            }
            None => trace!(
                "discover",
                "{}: {count} image{}{}",
                binary.name,
                if count == 1 { "" } else { "s" },
                if binary.local_group.is_some() { " (RTLD_LOCAL)" } else { "" }
            ),
        }
        binary.image_count = count;
        self.position.insert(binary.id, self.binaries.len());
        self.binaries.push(binary);
    }

    fn index<'s>(
        &mut self,
        id: ImageId,
        image: Indexed<'s, impl Iterator<Item = &'s str>, impl Iterator<Item = &'s str>, impl Iterator<Item = &'s str>>,
    ) {
        let insert = |names: &mut ByName, name: &str| match names.get_mut(name) {
            Some(ids) => ids.push(id),
            None => {
                names.insert(name.to_string(), Ids::One([id]));
            }
        };
        let kernels = by_name(&mut self.kernels, image.format, image.target);
        image.kernels.for_each(|k| insert(kernels, k));
        let mut exports = image.exports.peekable();
        if exports.peek().is_some() {
            let by_export = by_name(&mut self.exports, image.format, image.target);
            exports.for_each(|e| insert(by_export, e));
        }
        let variant = || Variant { format: image.format, target: image.target.to_string() };
        if let Some(set) = image.set {
            self.sets.entry((variant(), set.to_string())).or_default().push(id);
        }
        for set in image.uses {
            self.set_users.entry((variant(), set.to_string())).or_default().push(id);
        }
        self.uses_function_pointers |= image.uses_function_pointers;
    }

    /// Whether images of `requester` may use exports of `provider`: a library opened
    /// `RTLD_LOCAL` sees everything global plus its own group, and is seen by its group only.
    pub(crate) fn visible(&self, requester: BinaryId, provider: BinaryId) -> bool {
        match &self.binary(provider).local_group {
            None => true,
            Some(_) => self.binary(requester).local_group.as_ref().is_some_and(|group| group.contains(&provider)),
        }
    }

    /// The binary whose loaded segments contain `address`.
    pub(crate) fn binary_containing(&self, address: usize) -> Option<&Binary> {
        self.binaries.iter().find(|b| b.ranges.iter().any(|&(start, end)| (start..end).contains(&address)))
    }

    /// Whether `binary` is a device-library file rather than a loaded object.
    pub(crate) fn is_file_library(&self, binary: BinaryId) -> bool {
        self.file_binaries.values().any(|&b| b == binary)
    }

    pub(crate) fn contains(&self, binary: BinaryId) -> bool {
        self.position.contains_key(&binary)
    }

    pub(crate) fn binary(&self, id: BinaryId) -> &Binary {
        &self.binaries[self.position[&id]]
    }

    pub(crate) fn image(&self, id: ImageId) -> &Image {
        &self.binary(id.binary).images()[id.image as usize]
    }

    /// `libhelpers.so image 0`, for traces and messages.
    pub(crate) fn describe(&self, id: ImageId) -> String {
        let name = &self.binary(id.binary).name;
        format!("{} image {}", name.rsplit('/').next().unwrap_or(name), id.image)
    }

    /// Images of this form that define `kernel`, in loader order.
    pub(crate) fn kernel_images(&self, variant: &Variant, kernel: &str) -> &[ImageId] {
        let names = self.kernels.iter().find(|(v, _)| v == variant);
        names.and_then(|(_, m)| m.get(kernel)).map_or(&[], Ids::as_slice)
    }

    /// Images of this form that export `symbol`, in loader order.
    pub(crate) fn providers(&self, variant: &Variant, symbol: &str) -> &[ImageId] {
        let names = self.exports.iter().find(|(v, _)| v == variant);
        names.and_then(|(_, m)| m.get(symbol)).map_or(&[], Ids::as_slice)
    }

    /// Images of this form that provide virtual-function set `set` (real and dummy).
    pub(crate) fn set_images(&self, variant: &Variant, set: &str) -> &[ImageId] {
        self.sets.get(&(variant.clone(), set.to_string())).map_or(&[], Vec::as_slice)
    }

    /// Images of this form whose kernels use virtual-function set `set`.
    pub(crate) fn set_users(&self, variant: &Variant, set: &str) -> &[ImageId] {
        self.set_users.get(&(variant.clone(), set.to_string())).map_or(&[], Vec::as_slice)
    }

    /// The binaries searched for symbols, for error messages (unreadable ones say so).
    pub(crate) fn searched(&self) -> Vec<String> {
        self.binaries
            .iter()
            .map(|b| match &b.error {
                None => b.name.clone(),
                Some(e) => format!("{} (unreadable: {e})", b.name),
            })
            .collect()
    }
}
