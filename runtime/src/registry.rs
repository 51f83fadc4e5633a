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
use std::sync::{Arc, Mutex};

use sycl_format::{Image, ImageSet};

use crate::device::Variant;
use crate::loaded::{loaded_objects, loader_counters};
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
    pub images: Vec<Arc<Image>>,
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
    /// By image form, then by name: looked up on every launch without building a key.
    kernels: HashMap<Variant, HashMap<String, Vec<ImageId>>>,
    exports: HashMap<Variant, HashMap<String, Vec<ImageId>>>,
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
}

/// For each loaded object: `None` when its symbols are in the global scope, or for one
/// opened `RTLD_LOCAL` its group: itself and what it needs, transitively. An object is local
/// when the marker symbol of its images (see `sycl_format::scope_marker_symbol`) is not
/// visible in the global scope. The executable and objects without images are global.
fn local_groups(objects: &[crate::loaded::LoadedObject], ids: &[BinaryId]) -> Vec<Option<Vec<BinaryId>>> {
    let by_file: HashMap<&str, usize> =
        objects.iter().enumerate().map(|(i, o)| (o.name.rsplit('/').next().unwrap_or(&o.name), i)).collect();
    objects
        .iter()
        .enumerate()
        .map(|(i, object)| {
            let payloads = object.payloads.as_deref().unwrap_or(&[]);
            let global = i == 0
                || payloads.is_empty()
                || payloads.iter().any(|p| object.defines_globally(&sycl_format::scope_marker_symbol(p)));
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

/// A loaded object's identity: name, load address, hash of its payloads.
type LoadKey = (String, usize, u64);

/// Ids handed out so far, by identity.
fn binary_id(name: &str, base: usize, payloads: &[Vec<u8>]) -> BinaryId {
    static IDS: Mutex<Option<HashMap<LoadKey, u64>>> = Mutex::new(None);
    let hash = payloads.iter().fold(payloads.len() as u64, |h, p| h.rotate_left(5) ^ sycl_format::payload_hash(p));
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
        let ids: Vec<BinaryId> =
            objects.iter().map(|o| binary_id(&o.name, o.base, o.payloads.as_deref().unwrap_or(&[]))).collect();
        let groups = local_groups(&objects, &ids);
        let files = crate::library::files();
        registry.files_generation = files.generation;
        for (index, object) in objects.into_iter().enumerate() {
            let decoded = object.payloads.as_ref().map_err(|e| e.to_string()).and_then(|payloads| {
                let mut images = Vec::new();
                for payload in payloads {
                    images.extend(ImageSet::decode(payload).map_err(|e| e.to_string())?.images);
                }
                Ok(images)
            });
            let id = ids[index];
            let local_group = groups[index].clone();
            match decoded {
                Ok(images) if images.is_empty() => {}
                Ok(images) => {
                    trace!(
                        "discover",
                        "{}: {} image{}{}",
                        object.name,
                        images.len(),
                        if images.len() == 1 { "" } else { "s" },
                        if local_group.is_some() { " (RTLD_LOCAL)" } else { "" }
                    );
                    let images = images.into_iter().map(Arc::new).collect();
                    let ranges = object.ranges.clone();
                    registry.add(Binary { id, name: object.name, images, error: None, local_group, ranges });
                }
                Err(error) => {
                    trace!("discover", "{}: malformed device images ignored: {error}", object.name);
                    log::warn!("{}: malformed device images ignored: {error}", object.name);
                    registry.position.insert(id, registry.binaries.len());
                    let ranges = object.ranges.clone();
                    let binary = Binary { id, name: object.name, images: vec![], error: Some(error), local_group, ranges };
                    registry.binaries.push(binary);
                }
            }
        }
        // Device-library files come last in resolution order, in the order they were loaded.
        for file in &files.list {
            let name = file.path.display().to_string();
            let id = binary_id(&name, usize::MAX - file.id as usize, &[]);
            let local_group = (file.scope == crate::library::LibraryScope::Own).then(|| vec![id]);
            trace!("discover", "{name}: {} image(s) from a device library file", file.images.len());
            let images = file.images.iter().cloned().map(Arc::new).collect();
            registry.file_binaries.insert(file.id, id);
            registry.add(Binary { id, name, images, error: None, local_group, ranges: vec![] });
        }
        registry
    }

    /// A registry of the given binaries, in this order, as if they were loaded (benchmarks).
    pub(crate) fn from_binaries(binaries: Vec<(String, ImageSet)>) -> Registry {
        let mut registry = Registry::default();
        for (i, (name, set)) in binaries.into_iter().enumerate() {
            let id = binary_id(&name, i, &[]);
            let images = set.images.into_iter().map(Arc::new).collect();
            registry.add(Binary { id, name, images, error: None, local_group: None, ranges: vec![] });
        }
        registry
    }

    /// Whether libraries were opened or closed since this registry was made.
    pub(crate) fn is_stale(&self) -> bool {
        loader_counters() != self.counters || crate::library::files().generation != self.files_generation
    }

    fn add(&mut self, binary: Binary) {
        for (i, image) in binary.images.iter().enumerate() {
            let id = ImageId { binary: binary.id, image: i as u32 };
            let variant = Variant { format: image.format, target: image.target.clone() };
            for kernel in &image.kernels {
                self.kernels.entry(variant.clone()).or_default().entry(kernel.clone()).or_default().push(id);
            }
            for symbol in image.exported_symbols() {
                self.exports.entry(variant.clone()).or_default().entry(symbol.to_string()).or_default().push(id);
            }
            if let Some((set, _)) = image.virtual_functions_set() {
                self.sets.entry((variant.clone(), set.to_string())).or_default().push(id);
            }
            for set in image.uses_virtual_functions_sets() {
                self.set_users.entry((variant.clone(), set.to_string())).or_default().push(id);
            }
        }
        self.position.insert(binary.id, self.binaries.len());
        self.binaries.push(binary);
    }

    /// Whether images of `requester` may use exports of `provider`: a library opened
    /// `RTLD_LOCAL` sees everything global plus its own group, and is seen by its group only.
    pub(crate) fn visible(&self, requester: BinaryId, provider: BinaryId) -> bool {
        match &self.binary(provider).local_group {
            None => true,
            Some(_) => self.binary(requester).local_group.as_ref().is_some_and(|group| group.contains(&provider)),
        }
    }

    /// Whether any image calls through function pointers (needs aspect `function_pointers`).
    pub(crate) fn uses_function_pointers(&self) -> bool {
        let aspect = sycl_format::aspects::aspect_number("function_pointers").expect("known aspect");
        self.binaries.iter().flat_map(|b| &b.images).any(|i| i.requirements().is_ok_and(|r| r.aspects.contains(&aspect)))
    }

    /// The binary whose loaded segments contain `address`.
    pub(crate) fn binary_containing(&self, address: usize) -> Option<&Binary> {
        self.binaries.iter().find(|b| b.ranges.iter().any(|&(start, end)| (start..end).contains(&address)))
    }

    pub(crate) fn contains(&self, binary: BinaryId) -> bool {
        self.position.contains_key(&binary)
    }

    pub(crate) fn binary(&self, id: BinaryId) -> &Binary {
        &self.binaries[self.position[&id]]
    }

    pub(crate) fn image(&self, id: ImageId) -> &Arc<Image> {
        &self.binary(id.binary).images[id.image as usize]
    }

    /// `libhelpers.so image 0`, for traces and messages.
    pub(crate) fn describe(&self, id: ImageId) -> String {
        let name = &self.binary(id.binary).name;
        format!("{} image {}", name.rsplit('/').next().unwrap_or(name), id.image)
    }

    /// Images of this form that define `kernel`, in loader order.
    pub(crate) fn kernel_images(&self, variant: &Variant, kernel: &str) -> &[ImageId] {
        self.kernels.get(variant).and_then(|m| m.get(kernel)).map_or(&[], Vec::as_slice)
    }

    /// Images of this form that export `symbol`, in loader order.
    pub(crate) fn providers(&self, variant: &Variant, symbol: &str) -> &[ImageId] {
        self.exports.get(variant).and_then(|m| m.get(symbol)).map_or(&[], Vec::as_slice)
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
