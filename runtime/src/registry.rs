//! The device images of the loaded binaries, indexed: kernels and exported symbols map to the
//! images that define them, per image form, in the dynamic loader's order (executable,
//! LD_PRELOAD'ed libraries, needed libraries in load order, dlopen'ed ones in the order they
//! were opened, then device-library files), so the first provider is the one the loader would
//! pick for a host symbol. `discovery` finds the binaries and keeps the registry up to date.
//!
//! A registry is an immutable snapshot. Each binary is read and indexed once, when it is first
//! found ([`Binary::read`]): what its images define is kept as names pointing into its copied
//! payloads, so the registry that follows a library's opening or closing is assembled from the
//! binaries that stay without reading or parsing them again. A binary keeps its id while it
//! stays loaded, so programs built from it stay cached; a closed one's id disappears, and with
//! it every program built from it. A binary whose payload is malformed is recorded with its
//! error and contributes no images; every other binary works as usual.
//!
//! This module never touches the loader: it only indexes what it is given.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use sycl_format::{requirements, sets, DecodeError, Image, ImageFormat, ImageSet, ImageSetView, ImageView};

use crate::device::Variant;

/// A loaded binary, stable while it stays loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BinaryId(u64);

impl BinaryId {
    /// An id never handed out before: a library opened again after it was closed is a new
    /// binary, so nothing cached for the old one can be mistaken for it.
    pub(crate) fn fresh() -> BinaryId {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        BinaryId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// An image: which binary and which image in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ImageId {
    pub binary: BinaryId,
    pub image: u32,
}

/// A name inside a binary's payload (or, for images given as values, its table of names),
/// shared rather than copied: the index holds one per kernel and export of every image.
/// Hashed and compared as bytes, so it is looked up by `str::as_bytes`.
#[derive(Clone)]
struct Name {
    bytes: Arc<[u8]>,
    start: u32,
    end: u32,
}

impl Name {
    /// `text`, when it lies inside `bytes` (a view of them); otherwise a copy of it.
    fn within(bytes: &Arc<[u8]>, text: &str) -> Name {
        let start = (text.as_ptr() as usize).wrapping_sub(bytes.as_ptr() as usize);
        match start.checked_add(text.len()).and_then(|end| u32::try_from(end).ok()) {
            Some(end) if (end as usize) <= bytes.len() => Name { bytes: bytes.clone(), start: start as u32, end },
            _ => Name { bytes: Arc::from(text.as_bytes()), start: 0, end: text.len() as u32 },
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[self.start as usize..self.end as usize]
    }

    fn to_text(&self) -> String {
        String::from_utf8_lossy(self.as_bytes()).into_owned()
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Name {}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl Borrow<[u8]> for Name {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// What the index needs of one image, recorded when its binary is read.
struct ImageRecord {
    /// Index into the binary's `variants`.
    variant: u32,
    /// Ranges of the binary's `names`.
    kernels: Range<u32>,
    exports: Range<u32>,
    /// Virtual-function sets its kernels use.
    uses: Range<u32>,
    /// The virtual-function set it provides (index into `names`).
    set: Option<u32>,
}

/// The records of a binary's images, as they are made.
#[derive(Default)]
struct Records {
    variants: Vec<Variant>,
    images: Vec<ImageRecord>,
    names: Vec<Name>,
    uses_function_pointers: bool,
}

impl Records {
    fn range(&mut self, names: impl Iterator<Item = Name>) -> Range<u32> {
        let start = self.names.len() as u32;
        self.names.extend(names);
        start..self.names.len() as u32
    }

    fn push(
        &mut self,
        format: ImageFormat,
        target: &str,
        kernels: impl Iterator<Item = Name>,
        exports: impl Iterator<Item = Name>,
        set: Option<Name>,
        uses: impl Iterator<Item = Name>,
    ) {
        let variant = match self.variants.iter().position(|v| v.format == format && v.target == target) {
            Some(at) => at,
            None => {
                self.variants.push(Variant { format, target: target.to_string() });
                self.variants.len() - 1
            }
        } as u32;
        let kernels = self.range(kernels);
        let exports = self.range(exports);
        let uses = self.range(uses);
        let set = set.map(|name| {
            self.names.push(name);
            self.names.len() as u32 - 1
        });
        self.images.push(ImageRecord { variant, kernels, exports, uses, set });
    }
}

/// Whether a `SYCL/device requirements` aspect list (little-endian `u32`s) holds the
/// `function_pointers` aspect.
fn calls_through_pointers(aspects: Option<&[u8]>) -> bool {
    static FUNCTION_POINTERS: OnceLock<u32> = OnceLock::new();
    let wanted = *FUNCTION_POINTERS.get_or_init(|| sycl_format::aspects::aspect_number("function_pointers").expect("known aspect"));
    aspects.is_some_and(|bytes| bytes.chunks_exact(4).any(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) == wanted))
}

/// A loaded executable or shared library, or a device-library file, that carries device
/// images. Shared by every registry made while it stays loaded.
pub(crate) struct Binary {
    pub id: BinaryId,
    pub name: String,
    /// Its image-set payloads, copied out of the loaded object and checked. Indexed in place;
    /// the images are copied out of them when first needed.
    payloads: Vec<Arc<[u8]>>,
    images: OnceLock<Arc<[Image]>>,
    variants: Vec<Variant>,
    records: Vec<ImageRecord>,
    names: Vec<Name>,
    pub image_count: u32,
    pub error: Option<String>,
    /// Address ranges of its loaded segments.
    pub ranges: Vec<(usize, usize)>,
    /// Whether any image calls through function pointers (needs aspect `function_pointers`).
    pub uses_function_pointers: bool,
}

impl Binary {
    fn new(id: BinaryId, name: String, ranges: Vec<(usize, usize)>, records: Records) -> Binary {
        Binary {
            id,
            name,
            payloads: vec![],
            images: OnceLock::new(),
            image_count: records.images.len() as u32,
            variants: records.variants,
            records: records.images,
            names: records.names,
            error: None,
            ranges,
            uses_function_pointers: records.uses_function_pointers,
        }
    }

    /// A loaded object's binary, from its payloads (already copied out of the object): each
    /// payload checked and its images indexed in place, in one pass. A malformed payload
    /// leaves the binary without images, its error recorded.
    pub(crate) fn read(
        id: BinaryId,
        name: String,
        payloads: Result<Vec<Arc<[u8]>>, DecodeError>,
        ranges: Vec<(usize, usize)>,
    ) -> Binary {
        let mut records = Records::default();
        let indexed = payloads.and_then(|payloads| {
            for payload in &payloads {
                for image in &ImageSetView::parse(payload)?.images {
                    record_view(&mut records, payload, image);
                }
            }
            Ok(payloads)
        });
        match indexed {
            Ok(payloads) => Binary { payloads, ..Binary::new(id, name, ranges, records) },
            Err(e) => Binary { error: Some(e.to_string()), ..Binary::new(id, name, ranges, Records::default()) },
        }
    }

    /// A binary of images given as values (a device-library file, or a benchmark's).
    pub(crate) fn of_images(id: BinaryId, name: String, images: Arc<[Image]>) -> Binary {
        // One table holds every name, so that the index shares it as it shares payloads.
        let mut table = String::new();
        let mut at = |text: &str| {
            let start = table.len();
            table.push_str(text);
            start..table.len()
        };
        type Spans = Vec<Range<usize>>;
        let spans: Vec<(Spans, Spans, Option<Range<usize>>, Spans)> = images
            .iter()
            .map(|image| {
                (
                    image.kernels.iter().map(|k| at(k)).collect(),
                    image.exported_symbols().map(&mut at).collect(),
                    image.virtual_functions_set().map(|(set, _)| at(set)),
                    image.uses_virtual_functions_sets().into_iter().map(&mut at).collect(),
                )
            })
            .collect();
        let table: Arc<[u8]> = Arc::from(table.into_bytes());
        let name_of = |span: Range<usize>| Name { bytes: table.clone(), start: span.start as u32, end: span.end as u32 };
        let mut records = Records::default();
        for (image, (kernels, exports, set, uses)) in images.iter().zip(spans) {
            records.push(
                image.format,
                &image.target,
                kernels.into_iter().map(name_of),
                exports.into_iter().map(name_of),
                set.map(name_of),
                uses.into_iter().map(name_of),
            );
            let aspects = image.property_set(sets::DEVICE_REQUIREMENTS).and_then(|set| set.get(requirements::ASPECT));
            records.uses_function_pointers |= calls_through_pointers(match aspects {
                Some(sycl_format::PropertyValue::Bytes(bytes)) => Some(bytes),
                _ => None,
            });
        }
        let binary = Binary::new(id, name, vec![], records);
        let _ = binary.images.set(images);
        binary
    }

    /// The images, copied out of the payloads at the first call.
    pub(crate) fn images(&self) -> &[Image] {
        self.images.get_or_init(|| {
            // The payloads were checked when indexed, and are ours: reading them again cannot fail.
            let views = self.payloads.iter().filter_map(|p| ImageSetView::parse(p).ok());
            views.flat_map(|view| view.images.iter().map(ImageView::to_image).collect::<Vec<_>>()).collect()
        })
    }

    fn names(&self, range: &Range<u32>) -> &[Name] {
        &self.names[range.start as usize..range.end as usize]
    }
}

/// Records one image of a checked payload, reading its property sets once.
fn record_view(records: &mut Records, payload: &Arc<[u8]>, image: &ImageView<'_>) {
    let (mut exports, mut aspects, mut virtual_functions) = (None, None, false);
    for set in image.property_sets() {
        match set.name {
            sets::EXPORTED_SYMBOLS if exports.is_none() => exports = Some(set),
            sets::DEVICE_REQUIREMENTS if aspects.is_none() => {
                aspects = Some(match set.get(requirements::ASPECT) {
                    Some(sycl_format::PropertyValueView::Bytes(bytes)) => Some(bytes),
                    _ => None,
                })
            }
            sets::VIRTUAL_FUNCTIONS => virtual_functions = true,
            _ => {}
        }
    }
    let name = |text: &str| Name::within(payload, text);
    let (set, uses): (Option<Name>, Vec<Name>) = if virtual_functions {
        (image.virtual_functions_set().map(|(set, _)| name(set)), image.uses_virtual_functions_sets().map(name).collect())
    } else {
        (None, Vec::new())
    };
    records.push(
        image.format,
        image.target,
        image.kernels().map(name),
        exports.into_iter().flat_map(|set| set.names()).map(name),
        set,
        uses.into_iter(),
    );
    records.uses_function_pointers |= calls_through_pointers(aspects.flatten());
}

/// Images by kernel or symbol name, in loader order.
type ByName = HashMap<Name, Ids, foldhash::fast::RandomState>;

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
fn by_name<'m>(maps: &'m mut Vec<(Variant, ByName)>, variant: &Variant) -> &'m mut ByName {
    let at = match maps.iter().position(|(v, _)| v == variant) {
        Some(at) => at,
        None => {
            maps.push((variant.clone(), ByName::default()));
            maps.len() - 1
        }
    };
    &mut maps[at].1
}

fn insert(names: &mut ByName, name: &Name, id: ImageId) {
    match names.entry(name.clone()) {
        std::collections::hash_map::Entry::Occupied(mut ids) => ids.get_mut().push(id),
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(Ids::One([id]));
        }
    }
}

/// The binaries of a registry, in resolution order, each with its `RTLD_LOCAL` group: `None`
/// when its exports serve everyone, otherwise the binaries whose exports it may use and that
/// may use its own (itself included).
pub(crate) type Members = Vec<(Arc<Binary>, Option<Box<[BinaryId]>>)>;

#[derive(Default)]
pub(crate) struct Registry {
    /// In resolution order.
    pub binaries: Vec<Arc<Binary>>,
    position: HashMap<BinaryId, usize, foldhash::fast::RandomState>,
    /// The groups of the binaries that have one (see [`Members`]); usually none.
    local_groups: HashMap<BinaryId, Box<[BinaryId]>, foldhash::fast::RandomState>,
    /// By image form, then by name: looked up on every launch without building a key.
    kernels: Vec<(Variant, ByName)>,
    exports: Vec<(Variant, ByName)>,
    /// Virtual-function set → the images that provide it (real and dummy).
    sets: HashMap<(Variant, String), Vec<ImageId>>,
    /// Virtual-function set → the images whose kernels use it.
    set_users: HashMap<(Variant, String), Vec<ImageId>>,
    /// Binary id of each loaded device-library file, by load id.
    pub file_binaries: HashMap<u64, BinaryId>,
    /// Whether any image calls through function pointers (needs aspect `function_pointers`).
    pub uses_function_pointers: bool,
}

impl Registry {
    /// The registry of `members`, in this order, from what each binary recorded when it was
    /// read: nothing is parsed here.
    pub(crate) fn assemble(members: Members, file_binaries: HashMap<u64, BinaryId>) -> Registry {
        let mut registry = Registry { file_binaries, ..Registry::default() };
        // The kernel index sized once for every image (most are JIT SPIR-V, one kernel each).
        let images = members.iter().map(|(b, _)| b.records.len()).sum();
        by_name(&mut registry.kernels, &Variant::spirv()).reserve(images);
        registry.position.reserve(members.len());
        for (binary, group) in members {
            registry.index(&binary);
            if let Some(group) = group {
                registry.local_groups.insert(binary.id, group);
            }
            registry.position.insert(binary.id, registry.binaries.len());
            registry.binaries.push(binary);
        }
        registry
    }

    /// A registry of the given binaries, in this order, as if they were loaded (benchmarks).
    pub(crate) fn from_binaries(binaries: Vec<(String, ImageSet)>) -> Registry {
        let members = binaries
            .into_iter()
            .map(|(name, set)| (Arc::new(Binary::of_images(BinaryId::fresh(), name, set.images.into())), None))
            .collect();
        Registry::assemble(members, HashMap::new())
    }

    fn index(&mut self, binary: &Binary) {
        for (image, record) in binary.records.iter().enumerate() {
            let id = ImageId { binary: binary.id, image: image as u32 };
            let variant = &binary.variants[record.variant as usize];
            let kernels = by_name(&mut self.kernels, variant);
            for name in binary.names(&record.kernels) {
                insert(kernels, name, id);
            }
            if !record.exports.is_empty() {
                let exports = by_name(&mut self.exports, variant);
                for name in binary.names(&record.exports) {
                    insert(exports, name, id);
                }
            }
            if let Some(set) = record.set {
                let set = binary.names[set as usize].to_text();
                self.sets.entry((variant.clone(), set)).or_default().push(id);
            }
            for set in binary.names(&record.uses) {
                self.set_users.entry((variant.clone(), set.to_text())).or_default().push(id);
            }
        }
        self.uses_function_pointers |= binary.uses_function_pointers;
    }

    /// The `RTLD_LOCAL` group of `binary`, when it has one.
    pub(crate) fn local_group(&self, binary: BinaryId) -> Option<&[BinaryId]> {
        self.local_groups.get(&binary).map(|group| &group[..])
    }

    /// Whether images of `requester` may use exports of `provider`: a library opened
    /// `RTLD_LOCAL` sees everything global plus its own group, and is seen by its group only.
    pub(crate) fn visible(&self, requester: BinaryId, provider: BinaryId) -> bool {
        if self.local_groups.is_empty() || !self.local_groups.contains_key(&provider) {
            return true;
        }
        self.local_group(requester).is_some_and(|group| group.contains(&provider))
    }

    /// The binary whose loaded segments contain `address`.
    pub(crate) fn binary_containing(&self, address: usize) -> Option<&Binary> {
        self.binaries.iter().map(|b| &**b).find(|b| b.ranges.iter().any(|&(start, end)| (start..end).contains(&address)))
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
        names.and_then(|(_, m)| m.get(kernel.as_bytes())).map_or(&[], Ids::as_slice)
    }

    /// Images of this form that export `symbol`, in loader order.
    pub(crate) fn providers(&self, variant: &Variant, symbol: &str) -> &[ImageId] {
        let names = self.exports.iter().find(|(v, _)| v == variant);
        names.and_then(|(_, m)| m.get(symbol.as_bytes())).map_or(&[], Ids::as_slice)
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

#[cfg(test)]
mod tests {
    use super::*;
    use sycl_format::{Image, PropertySet};

    fn image(kernels: &[&str], exports: &[&str]) -> Image {
        Image {
            format: ImageFormat::SpirV,
            target: "spir64".into(),
            kernels: kernels.iter().map(|k| k.to_string()).collect(),
            property_sets: vec![PropertySet::symbols(sets::EXPORTED_SYMBOLS, exports.iter().copied())],
            data: vec![1, 2, 3],
        }
    }

    fn payload(images: Vec<Image>) -> Arc<[u8]> {
        Arc::from(ImageSet { images }.encode())
    }

    #[test]
    fn a_read_binary_indexes_names_inside_its_payload() {
        let binary = Binary::read(
            BinaryId::fresh(),
            "liba.so".into(),
            Ok(vec![payload(vec![image(&["k1"], &["f"]), image(&["k2"], &[])])]),
            vec![],
        );
        assert_eq!(binary.image_count, 2);
        assert!(binary.names.iter().all(|n| Arc::ptr_eq(&n.bytes, &binary.payloads[0])), "names are not copied");
        let registry = Registry::assemble(vec![(Arc::new(binary), None)], HashMap::new());
        let spirv = Variant::spirv();
        assert_eq!(registry.kernel_images(&spirv, "k2").len(), 1);
        assert_eq!(registry.providers(&spirv, "f").len(), 1);
        assert!(registry.kernel_images(&spirv, "f").is_empty());
        assert_eq!(registry.image(registry.kernel_images(&spirv, "k2")[0]).kernels, ["k2"]);
    }

    #[test]
    fn a_malformed_payload_leaves_the_binary_without_images() {
        let mut bytes = ImageSet { images: vec![image(&["k"], &[])] }.encode();
        bytes.truncate(bytes.len() - 1);
        let binary = Binary::read(BinaryId::fresh(), "libbad.so".into(), Ok(vec![Arc::from(bytes)]), vec![]);
        assert_eq!(binary.image_count, 0);
        assert!(binary.error.is_some());
        assert!(binary.images().is_empty());
    }

    #[test]
    fn assembling_again_keeps_loader_order_and_drops_what_went() {
        let a = Arc::new(Binary::read(BinaryId::fresh(), "liba.so".into(), Ok(vec![payload(vec![image(&[], &["f"])])]), vec![]));
        let b = Arc::new(Binary::of_images(BinaryId::fresh(), "libb.so".into(), vec![image(&["k"], &["f"])].into()));
        let spirv = Variant::spirv();
        let both = Registry::assemble(vec![(a.clone(), None), (b.clone(), None)], HashMap::new());
        assert_eq!(both.providers(&spirv, "f").iter().map(|i| i.binary).collect::<Vec<_>>(), [a.id, b.id]);
        let only_b = Registry::assemble(vec![(b.clone(), None)], HashMap::new());
        assert_eq!(only_b.providers(&spirv, "f").iter().map(|i| i.binary).collect::<Vec<_>>(), [b.id]);
        assert!(!only_b.contains(a.id));
    }

    #[test]
    fn local_groups_limit_visibility_both_ways() {
        let ids: Vec<Arc<Binary>> =
            (0..3).map(|i| Arc::new(Binary::of_images(BinaryId::fresh(), format!("lib{i}.so"), vec![image(&[], &[])].into()))).collect();
        let (global, local, dep) = (ids[0].id, ids[1].id, ids[2].id);
        let group: Box<[BinaryId]> = vec![local, dep].into();
        let registry = Registry::assemble(
            vec![(ids[0].clone(), None), (ids[1].clone(), Some(group.clone())), (ids[2].clone(), Some(group))],
            HashMap::new(),
        );
        assert!(registry.visible(local, global), "a local library sees global exports");
        assert!(registry.visible(local, dep), "and its group's");
        assert!(!registry.visible(global, local), "a global one does not see a local library's");
    }
}
