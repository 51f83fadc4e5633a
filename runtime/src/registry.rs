//! The device images of the loaded binaries, indexed: kernels and exported symbols map to the
//! images that define them, per image form, in the dynamic loader's order (executable,
//! LD_PRELOAD'ed libraries, needed libraries in load order, dlopen'ed ones in the order they
//! were opened, then device-library files), so the first provider is the one the loader would
//! pick for a host symbol. `discovery` finds the binaries and keeps the registry up to date.
//!
//! A registry is an immutable snapshot. Each binary is read once, when it is first found
//! ([`Binary::read`]): its payloads are checked and each image's form and place recorded; the
//! names an image defines are read where its payload holds them when its form is first looked
//! up, and the form's index points into the payloads (a process whose devices take one form
//! of three reads the names of a third of the images, and indexes those alone). The registry
//! that follows a library's opening or closing is assembled from the binaries that stay
//! without reading them again. A binary keeps its id while it
//! stays loaded, so programs built from it stay cached; a closed one's id disappears, and with
//! it every program built from it. A binary whose payload is malformed is recorded with its
//! error and contributes no images; every other binary works as usual.
//!
//! This module never touches the loader: it only indexes what it is given.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use hashbrown::HashTable;
use sycl_format::{
    requirements, sets, DecodeError, Image, ImageSet, ImageSetView, ImageView, Target,
};

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

/// Where a name lies in a binary: which of its byte sources (a payload, or the table of names
/// of images given as values) and the range. The index refers to names this way rather than
/// holding copies: it holds one per kernel and export of every image.
#[derive(Debug, Clone, Copy)]
struct Span {
    source: u32,
    start: u32,
    end: u32,
}

impl Span {
    /// `text`'s place in `bytes`, source `source`, when it lies inside (a view of them).
    fn within(source: u32, bytes: &[u8], text: &[u8]) -> Option<Span> {
        let start = (text.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
        let end = start.checked_add(text.len()).filter(|&end| end <= bytes.len())?;
        Some(Span { source, start: u32::try_from(start).ok()?, end: u32::try_from(end).ok()? })
    }
}

/// What discovery records of one image: its form, where its description lies, and where its
/// kernel's name lies when it defines exactly one (as each image of a binary split per kernel
/// does). Its other names are read from its payload when its form's exports are first looked
/// up ([`Registry::index_others`]): discovery writes 20 bytes per image rather than a record of
/// every name, and a process reads the names of the forms its devices use alone (of a binary's
/// 3,000 images in three forms, 1,000 for a GPU; every page of records written is a fault).
struct ImageRecord {
    /// Its form: the target it was made for; `None` for a target this runtime does not know
    /// (a newer `sycl-ld`'s) or a format that is not its target's, which no device uses and
    /// nothing indexes.
    target: Option<Target>,
    /// Its payload: an index into the binary's sources.
    source: u32,
    /// Where its description starts there ([`ImageView::offset`]).
    offset: u32,
    /// Its one kernel's name there, when it defines exactly one (an empty range otherwise:
    /// the kernels' index reads the image's own list).
    kernel: Range<u32>,
}

/// The records of a binary's images, as they are made.
#[derive(Default)]
struct Records {
    images: Vec<ImageRecord>,
    uses_function_pointers: bool,
    /// The last image's target as written, and what it names: images come grouped by form,
    /// so most are told apart from the previous one without searching the targets.
    last_target: Option<(String, Option<Target>)>,
}

impl Records {
    /// Records `image` of `payload`, the binary's source `source`. Only an image an OpenCL
    /// driver may compile (not of CUDA's forms) is asked whether it calls through function
    /// pointers: that is what the Intel CPU runtime's vectorizer must know
    /// (`Runtime::guard_vectorizer`), and the forms of a GPU are left unread.
    fn push(&mut self, source: u32, payload: &[u8], image: &ImageView<'_>) {
        let named = match &self.last_target {
            Some((name, named)) if name == image.target => *named,
            _ => {
                let named = Target::from_name(image.target);
                self.last_target = Some((image.target.to_string(), named));
                named
            }
        };
        let target = named.filter(|t| t.format() == image.format);
        let cuda_only = matches!(
            target,
            Some(
                Target::Ptx64
                    | Target::Ptx64Inlined
                    | Target::NvidiaGpu(_)
                    | Target::NvidiaGpuInlined(_)
            )
        );
        if !cuda_only && !self.uses_function_pointers {
            let requirements = image.property_set(sets::DEVICE_REQUIREMENTS);
            self.uses_function_pointers = calls_through_pointers(
                match requirements.and_then(|set| set.get(requirements::ASPECT)) {
                    Some(sycl_format::PropertyValueView::Bytes(bytes)) => Some(bytes),
                    _ => None,
                },
            );
        }
        let mut kernels = image.kernel_bytes();
        let kernel = match (kernels.next(), kernels.next()) {
            (Some(one), None) => Span::within(source, payload, one).map(|s| s.start..s.end),
            _ => None,
        };
        let offset = image.offset as u32;
        self.images.push(ImageRecord { target, source, offset, kernel: kernel.unwrap_or(0..0) });
    }
}

/// Whether a `SYCL/device requirements` aspect list (little-endian `u32`s) holds the
/// `function_pointers` aspect.
fn calls_through_pointers(aspects: Option<&[u8]>) -> bool {
    static FUNCTION_POINTERS: OnceLock<u32> = OnceLock::new();
    let wanted = *FUNCTION_POINTERS.get_or_init(|| {
        sycl_format::aspects::aspect_number("function_pointers").expect("known aspect")
    });
    aspects.is_some_and(|bytes| {
        bytes.chunks_exact(4).any(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) == wanted)
    })
}

/// A loaded executable or shared library, or a device-library file, that carries device
/// images. Shared by every registry made while it stays loaded.
pub(crate) struct Binary {
    pub id: BinaryId,
    pub name: String,
    /// Its image-set payloads (checked; see [`Payload`]), where its images' names lie (each
    /// image is copied out when first needed); for images given as values, one payload of
    /// their descriptions without their code, encoded for the names.
    sources: Vec<Payload>,
    images: Images,
    records: Vec<ImageRecord>,
    pub image_count: u32,
    pub error: Option<String>,
    /// Address ranges of its loaded segments.
    pub ranges: Vec<(usize, usize)>,
    /// Whether any image an OpenCL driver may compile calls through function pointers (needs
    /// aspect `function_pointers`).
    pub uses_function_pointers: bool,
}

impl Binary {
    /// A loaded object's binary, from its payloads (as discovery keeps them, see [`Payload`]):
    /// each payload checked and each image's form and place recorded, in one pass. A
    /// malformed payload leaves the binary without images, its error recorded.
    pub(crate) fn read(
        id: BinaryId,
        name: String,
        payloads: Result<Vec<Payload>, DecodeError>,
        ranges: Vec<(usize, usize)>,
    ) -> Binary {
        let mut records = Records::default();
        let read = payloads.and_then(|payloads| {
            for (source, payload) in payloads.iter().enumerate() {
                records.images.reserve(ImageSetView::count_hint(payload));
                ImageSetView::parse_each(payload, |image| {
                    records.push(source as u32, payload, &image);
                    Ok(())
                })?;
            }
            Ok(payloads)
        });
        let images = Images::InPayloads { copied: OnceLock::new() };
        match read {
            Ok(sources) => Binary::new(id, name, sources, images, ranges, records),
            Err(e) => Binary {
                error: Some(e.to_string()),
                ..Binary::new(id, name, vec![], images, ranges, Records::default())
            },
        }
    }

    /// A binary of images given as values (a device-library file, or a benchmark's): their
    /// descriptions encoded without their code, which the index reads as it reads a loaded
    /// binary's payload.
    pub(crate) fn of_images(id: BinaryId, name: String, images: Arc<[Image]>) -> Binary {
        let described = ImageSet {
            images: images
                .iter()
                .map(|image| Image {
                    format: image.format,
                    target: image.target.clone(),
                    kernels: image.kernels.clone(),
                    property_sets: image.property_sets.clone(),
                    data: Vec::new(),
                })
                .collect(),
        };
        let payload = Payload::Copied(Arc::from(described.encode()));
        let mut records = Records::default();
        ImageSetView::parse_each(&payload, |image| {
            records.push(0, &payload, &image);
            Ok(())
        })
        .expect("a payload just encoded");
        Binary::new(id, name, vec![payload], Images::Given(images), vec![], records)
    }

    fn new(
        id: BinaryId,
        name: String,
        sources: Vec<Payload>,
        images: Images,
        ranges: Vec<(usize, usize)>,
        records: Records,
    ) -> Binary {
        Binary {
            id,
            name,
            sources,
            images,
            image_count: records.images.len() as u32,
            records: records.images,
            error: None,
            ranges,
            uses_function_pointers: records.uses_function_pointers,
        }
    }

    /// Image `index`, copied out of its payload at the first call: a launch copies the images
    /// it links, not the binary's thousand others.
    pub(crate) fn image(&self, index: u32) -> &Image {
        match &self.images {
            Images::Given(images) => &images[index as usize],
            Images::InPayloads { copied } => {
                let table =
                    copied.get_or_init(|| self.records.iter().map(|_| OnceLock::new()).collect());
                table[index as usize].get_or_init(|| Box::new(self.view(index).to_image()))
            }
        }
    }

    /// Image `index` read in place, from the payload checked when the binary was read.
    fn view(&self, index: u32) -> ImageView<'_> {
        let record = &self.records[index as usize];
        let mut view =
            ImageSetView::image_at(&self.sources[record.source as usize], record.offset as usize)
                .expect("an image of a payload checked when the binary was read");
        // Images given as values have their descriptions encoded without their code.
        if let Images::Given(images) = &self.images {
            view.data = &images[index as usize].data;
        }
        view
    }

    /// Where `name`, read from image `index`'s view, lies in its payload. A view's names lie
    /// in its payload; a reader's bug that broke this would leave the name out of the index,
    /// said so.
    fn span(&self, index: u32, name: &[u8]) -> Option<Span> {
        let source = self.records[index as usize].source;
        let span = Span::within(source, &self.sources[source as usize], name);
        if span.is_none() {
            log::warn!("{}: a name outside its payload, not indexed", self.name);
        }
        span
    }

    fn bytes(&self, span: Span) -> &[u8] {
        &self.sources[span.source as usize][span.start as usize..span.end as usize]
    }

    /// The names of its images' kernels, each image's in turn (repeated across forms).
    fn kernel_names(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.image_count).flat_map(|index| self.view(index).kernel_bytes())
    }
}

/// An image-set payload: where the executable maps it (which stays mapped for the life of
/// the process), or copied out of a shared library (which can be closed). The executable's
/// payloads, often the largest, are never copied.
#[derive(Clone)]
pub(crate) enum Payload {
    Mapped(&'static [u8]),
    Copied(Arc<[u8]>),
}

impl std::ops::Deref for Payload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Payload::Mapped(bytes) => bytes,
            Payload::Copied(bytes) => bytes,
        }
    }
}

/// A binary's images as values: given whole, or copied out of its payloads one at a time.
enum Images {
    Given(Arc<[Image]>),
    /// The images copied so far: the table made at the first copy, so that discovery
    /// allocates none. Each entry is a pointer's size: the table of a binary with thousands
    /// of images is a few pages, not the hundreds of kilobytes of as many empty images (each
    /// page written costs a fault).
    InPayloads {
        copied: OnceLock<Box<[OnceLock<Box<Image>>]>>,
    },
}

/// One name of the index and the images it names, in loader order. The name itself stays in
/// its binary: the entry says where (the binary's position in the registry, and the span),
/// with the name's whole hash, compared before the name so that a probe of a large index
/// never follows an entry's pointers to another binary's name unless it is the one.
struct Named {
    hash: u64,
    binary: u32,
    span: Span,
    ids: Ids,
}

/// Images by kernel or symbol name, for one image form: the entries in the order first met,
/// found through a table of their positions. A table of positions is a tenth of a table of
/// entries, and the entries lie packed: an index of 1,000 names writes 14 pages rather than 25
/// (each page first written is a fault, at a first launch).
#[derive(Default)]
struct ByName {
    table: HashTable<u32>,
    entries: Vec<Named>,
}

impl ByName {
    /// Room for `names` more names.
    fn reserve(&mut self, names: usize) {
        let entries = &self.entries;
        self.table.reserve(names, |&i| entries[i as usize].hash);
        self.entries.reserve(names);
    }
}

type Hasher = foldhash::fast::RandomState;

fn bytes_of<'b>(binaries: &'b [Arc<Binary>], named: &Named) -> &'b [u8] {
    binaries[named.binary as usize].bytes(named.span)
}

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

/// Adds image `id` under the name at `span` of the binary at `binary` in `binaries`.
fn insert(
    names: &mut ByName,
    hasher: &Hasher,
    binaries: &[Arc<Binary>],
    binary: u32,
    span: Span,
    id: ImageId,
) -> bool {
    let bytes = binaries[binary as usize].bytes(span);
    let hash = hasher.hash_one(bytes);
    let ByName { table, entries } = names;
    let same = |&i: &u32| {
        let named = &entries[i as usize];
        named.hash == hash && bytes_of(binaries, named) == bytes
    };
    match table.entry(hash, same, |&i| entries[i as usize].hash) {
        hashbrown::hash_table::Entry::Occupied(found) => {
            let ids = &mut entries[*found.get() as usize].ids;
            let shared = ids.as_slice().iter().any(|other| other.binary != id.binary);
            ids.push(id);
            shared
        }
        hashbrown::hash_table::Entry::Vacant(slot) => {
            slot.insert(entries.len() as u32);
            entries.push(Named { hash, binary, span, ids: Ids::One([id]) });
            false
        }
    }
}

/// The images `name` names in `names`.
fn lookup<'r>(
    names: &'r ByName,
    hasher: &Hasher,
    binaries: &[Arc<Binary>],
    name: &str,
) -> &'r [ImageId] {
    let bytes = name.as_bytes();
    let hash = hasher.hash_one(bytes);
    let same = |&i: &u32| {
        let named = &names.entries[i as usize];
        named.hash == hash && bytes_of(binaries, named) == bytes
    };
    names.table.find(hash, same).map_or(&[], |&i| names.entries[i as usize].ids.as_slice())
}

/// The names of one image form other than its kernels, indexed at the first lookup of one:
/// a launch of a kernel that imports nothing and uses no virtual functions reads none.
#[derive(Default)]
struct Others {
    exports: ByName,
    /// Whether a symbol is exported by images of more than one binary.
    shared_exports: bool,
    /// Virtual-function set → the images that provide it (real and dummy).
    sets: HashMap<String, Vec<ImageId>>,
    /// Virtual-function set → the images whose kernels use it.
    set_users: HashMap<String, Vec<ImageId>>,
}

/// An image form of a registry: how many of its images there are, and its indexes once made.
struct Form {
    target: Target,
    images: usize,
    kernels: OnceLock<ByName>,
    others: OnceLock<Others>,
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
    /// By image form, then by name: looked up on every launch without building a key. A
    /// form's kernels are indexed when first looked up, its exports and virtual-function sets
    /// when one of those is: a process whose devices take one form of three indexes a third of
    /// the images, and a kernel that imports nothing reads no image's exports.
    forms: Vec<Form>,
    hasher: Hasher,
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
        for (binary, _) in &members {
            for target in binary.records.iter().filter_map(|r| r.target) {
                match registry.forms.iter_mut().find(|f| f.target == target) {
                    Some(form) => form.images += 1,
                    None => registry.forms.push(Form {
                        target,
                        images: 1,
                        kernels: OnceLock::new(),
                        others: OnceLock::new(),
                    }),
                }
            }
        }
        registry.position.reserve(members.len());
        registry.binaries.reserve(members.len());
        for (binary, group) in members {
            if let Some(group) = group {
                registry.local_groups.insert(binary.id, group);
            }
            registry.uses_function_pointers |= binary.uses_function_pointers;
            registry.position.insert(binary.id, registry.binaries.len());
            registry.binaries.push(binary);
        }
        registry
    }

    /// A registry of the given binaries, in this order, as if they were loaded (benchmarks).
    pub(crate) fn from_binaries(binaries: Vec<(String, ImageSet)>) -> Registry {
        let members = binaries
            .into_iter()
            .map(|(name, set)| {
                (Arc::new(Binary::of_images(BinaryId::fresh(), name, set.images.into())), None)
            })
            .collect();
        Registry::assemble(members, HashMap::new())
    }

    /// The form `target`, when some image has it.
    fn form(&self, target: Target) -> Option<&Form> {
        self.forms.iter().find(|f| f.target == target)
    }

    /// The kernels of `target`'s images, indexed at the first call.
    fn kernels(&self, target: Target) -> Option<&ByName> {
        let form = self.form(target)?;
        Some(form.kernels.get_or_init(|| self.index_kernels(target, form.images)))
    }

    /// The other names of `target`'s images, indexed at the first call.
    fn others(&self, target: Target) -> Option<&Others> {
        Some(self.form(target)?.others.get_or_init(|| self.index_others(target)))
    }

    /// The images of form `target` of every binary, in order, each with its id.
    fn images_of(&self, target: Target) -> impl Iterator<Item = (u32, &Binary, u32)> {
        self.binaries.iter().enumerate().flat_map(move |(at, binary)| {
            let records = binary.records.iter().enumerate();
            records
                .filter(move |(_, record)| record.target == Some(target))
                .map(move |(image, _)| (at as u32, &**binary, image as u32))
        })
    }

    /// Indexes the kernels of the images of form `target` (`images` of them): an image's one
    /// kernel from its record, several read where its payload holds them.
    fn index_kernels(&self, target: Target, images: usize) -> ByName {
        let mut kernels = ByName::default();
        // Most images define one kernel: the table is sized once.
        kernels.reserve(images);
        for (at, binary, image) in self.images_of(target) {
            let id = ImageId { binary: binary.id, image };
            let record = &binary.records[image as usize];
            if !record.kernel.is_empty() {
                let (start, end) = (record.kernel.start, record.kernel.end);
                let span = Span { source: record.source, start, end };
                insert(&mut kernels, &self.hasher, &self.binaries, at, span, id);
                continue;
            }
            for name in binary.view(image).kernel_bytes() {
                if let Some(span) = binary.span(image, name) {
                    insert(&mut kernels, &self.hasher, &self.binaries, at, span, id);
                }
            }
        }
        kernels
    }

    /// Indexes the exports and virtual-function sets of the images of form `target`, read
    /// where their payloads hold them.
    fn index_others(&self, target: Target) -> Others {
        let mut index = Others::default();
        for (at, binary, image) in self.images_of(target) {
            let id = ImageId { binary: binary.id, image };
            let view = binary.view(image);
            let (mut exports, mut virtual_functions) = (None, false);
            for set in view.property_sets() {
                match set.name {
                    sets::EXPORTED_SYMBOLS if exports.is_none() => exports = Some(set),
                    sets::VIRTUAL_FUNCTIONS => virtual_functions = true,
                    _ => {}
                }
            }
            for name in exports.iter().flat_map(|set| set.name_bytes()) {
                if let Some(span) = binary.span(image, name) {
                    index.shared_exports |=
                        insert(&mut index.exports, &self.hasher, &self.binaries, at, span, id);
                }
            }
            if virtual_functions {
                if let Some((set, _)) = view.virtual_functions_set() {
                    index.sets.entry(set.to_string()).or_default().push(id);
                }
                for set in view.uses_virtual_functions_sets() {
                    index.set_users.entry(set.to_string()).or_default().push(id);
                }
            }
        }
        index
    }

    /// The `RTLD_LOCAL` group of `binary`, when it has one.
    pub(crate) fn local_group(&self, binary: BinaryId) -> Option<&[BinaryId]> {
        if self.local_groups.is_empty() {
            return None;
        }
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
        self.binaries
            .iter()
            .map(|b| &**b)
            .find(|b| b.ranges.iter().any(|&(start, end)| (start..end).contains(&address)))
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

    /// The form of image `id` (`None` for a target this runtime does not know, or a format
    /// that is not its target's), from what was recorded when its binary was read: the image
    /// is not copied out of its payload.
    pub(crate) fn form_of(&self, id: ImageId) -> Option<Target> {
        self.binary(id.binary).records[id.image as usize].target
    }

    /// Image `id` as a value, copied out of its payload at the first call (and kept).
    pub(crate) fn image(&self, id: ImageId) -> &Image {
        self.binary(id.binary).image(id.image)
    }

    /// Image `id` read in place, nothing copied: what reads a few of its properties, or its
    /// code once, needs no copy (a first launch's copies of a 16 KiB native image cost about
    /// 20 us each on an H200 host, a page fault per 4 KiB).
    pub(crate) fn view(&self, id: ImageId) -> ImageView<'_> {
        self.binary(id.binary).view(id.image)
    }

    /// `libhelpers.so image 0`, for traces and messages.
    pub(crate) fn describe(&self, id: ImageId) -> String {
        let name = &self.binary(id.binary).name;
        format!("{} image {}", name.rsplit('/').next().unwrap_or(name), id.image)
    }

    /// Images of this form that define `kernel`, in loader order.
    pub(crate) fn kernel_images(&self, target: Target, kernel: &str) -> &[ImageId] {
        self.kernels(target).map_or(&[], |k| lookup(k, &self.hasher, &self.binaries, kernel))
    }

    /// Images of this form that export `symbol`, in loader order.
    /// Whether some symbol is exported by images of form `target` of more than one binary: only
    /// then may a definition give way to another binary's (`resolve`'s one definition rule).
    pub(crate) fn has_shared_exports(&self, target: Target) -> bool {
        self.others(target).is_some_and(|o| o.shared_exports)
    }

    pub(crate) fn providers(&self, target: Target, symbol: &str) -> &[ImageId] {
        self.others(target)
            .map_or(&[], |o| lookup(&o.exports, &self.hasher, &self.binaries, symbol))
    }

    /// Images of this form that provide virtual-function set `set` (real and dummy).
    pub(crate) fn set_images(&self, target: Target, set: &str) -> &[ImageId] {
        self.others(target).and_then(|o| o.sets.get(set)).map_or(&[], Vec::as_slice)
    }

    /// Images of this form whose kernels use virtual-function set `set`.
    pub(crate) fn set_users(&self, target: Target, set: &str) -> &[ImageId] {
        self.others(target).and_then(|o| o.set_users.get(set)).map_or(&[], Vec::as_slice)
    }

    /// Up to three kernel names of any loaded image close to `wanted` (a misspelt name), the
    /// closest first: within an edit distance of a third of its length (at least 2).
    pub(crate) fn similar_kernels(&self, wanted: &str) -> Vec<String> {
        let names = self.binaries.iter().flat_map(|b| b.kernel_names());
        closest(wanted, names.filter_map(|name| std::str::from_utf8(name).ok()))
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

/// The names among `names` closest to `wanted` (what a misspelt kernel name meant): edit
/// distance at most a third of its length (two at least), three at most, closest first.
pub(crate) fn closest<'a>(wanted: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let most = (wanted.chars().count() / 3).max(2);
    let mut found: Vec<(usize, &str)> = Vec::new();
    for name in names {
        if name == wanted || found.iter().any(|(_, f)| *f == name) {
            continue;
        }
        let distance = edit_distance(wanted, name);
        if distance <= most {
            found.push((distance, name));
        }
    }
    found.sort();
    found.into_iter().take(3).map(|(_, name)| name.to_string()).collect()
}

/// The Levenshtein distance between `a` and `b`, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use sycl_format::{Image, ImageFormat, PropertySet};

    #[test]
    fn a_misspelt_kernel_name_is_told_the_closest_names() {
        assert_eq!(edit_distance("add_one", "add_one"), 0);
        assert_eq!(edit_distance("adone", "add_one"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        let set = |kernels: &[&str]| ImageSet { images: vec![image(kernels, &[])] };
        let registry = Registry::from_binaries(vec![
            ("/bin/app".into(), set(&["add_one", "scale", "saxpy"])),
            ("/lib/libk.so".into(), set(&["add_two", "reduce"])),
        ]);
        assert_eq!(registry.similar_kernels("add_owe"), ["add_one", "add_two"]);
        assert_eq!(registry.similar_kernels("sacle"), ["scale"]);
        assert!(registry.similar_kernels("completely_else").is_empty());
    }

    fn image(kernels: &[&str], exports: &[&str]) -> Image {
        Image {
            format: ImageFormat::SpirV,
            target: Target::Spir64.name().into(),
            kernels: kernels.iter().map(|k| k.to_string()).collect(),
            property_sets: vec![PropertySet::symbols(
                sets::EXPORTED_SYMBOLS,
                exports.iter().copied(),
            )],
            data: vec![1, 2, 3],
        }
    }

    fn payload(images: Vec<Image>) -> Payload {
        Payload::Copied(Arc::from(ImageSet { images }.encode()))
    }

    #[test]
    fn a_read_binary_indexes_names_inside_its_payload() {
        let binary = Binary::read(
            BinaryId::fresh(),
            "liba.so".into(),
            Ok(vec![payload(vec![
                image(&["k1"], &["f"]),
                image(&["k2"], &[]),
                image(&["k3", "k4"], &["g"]),
            ])]),
            vec![],
        );
        assert_eq!(binary.image_count, 3);
        assert_eq!(binary.records[0].kernel.len(), 2, "one kernel's name, recorded");
        assert!(binary.records[2].kernel.is_empty(), "two kernels: read from the image");
        assert_eq!(binary.sources.len(), 1, "names are not copied out of the payload");
        let registry = Registry::assemble(vec![(Arc::new(binary), None)], HashMap::new());
        let spirv = Target::Spir64;
        assert_eq!(registry.kernel_images(spirv, "k2").len(), 1);
        assert_eq!(registry.providers(spirv, "f").len(), 1);
        assert!(registry.kernel_images(spirv, "f").is_empty());
        assert_eq!(registry.kernel_images(spirv, "k4"), registry.kernel_images(spirv, "k3"));
        assert_eq!(registry.kernel_images(spirv, "k4")[0].image, 2);
        assert_eq!(registry.providers(spirv, "g").len(), 1);
        assert_eq!(registry.image(registry.kernel_images(spirv, "k2")[0]).kernels, ["k2"]);
    }

    #[test]
    fn only_images_an_opencl_driver_compiles_are_asked_about_function_pointers() {
        let calls_through_pointers = |target: Target| {
            let requirements = sycl_format::DeviceRequirements {
                aspects: vec![sycl_format::aspects::aspect_number("function_pointers").unwrap()],
                ..Default::default()
            };
            let image = Image {
                format: target.format(),
                target: target.name().into(),
                property_sets: vec![requirements.to_property_set().unwrap()],
                ..image(&["k"], &[])
            };
            let binary = Binary::read(
                BinaryId::fresh(),
                "liba.so".into(),
                Ok(vec![payload(vec![image])]),
                vec![],
            );
            binary.uses_function_pointers
        };
        assert!(calls_through_pointers(Target::Spir64));
        assert!(calls_through_pointers(Target::IntelCpuX86_64));
        assert!(!calls_through_pointers(Target::Ptx64), "the vectorizer never sees PTX");
        assert!(!calls_through_pointers(Target::NvidiaGpu(sycl_format::CudaArch::Sm90)));
    }

    #[test]
    fn a_malformed_payload_leaves_the_binary_without_images() {
        let mut bytes = ImageSet { images: vec![image(&["k"], &[])] }.encode();
        bytes.truncate(bytes.len() - 1);
        let binary = Binary::read(
            BinaryId::fresh(),
            "libbad.so".into(),
            Ok(vec![Payload::Copied(Arc::from(bytes))]),
            vec![],
        );
        assert_eq!(binary.image_count, 0);
        assert!(binary.error.is_some());
        assert!(binary.records.is_empty() && binary.sources.is_empty());
    }

    #[test]
    fn assembling_again_keeps_loader_order_and_drops_what_went() {
        let a = Arc::new(Binary::read(
            BinaryId::fresh(),
            "liba.so".into(),
            Ok(vec![payload(vec![image(&[], &["f"])])]),
            vec![],
        ));
        let b = Arc::new(Binary::of_images(
            BinaryId::fresh(),
            "libb.so".into(),
            vec![image(&["k"], &["f"])].into(),
        ));
        let spirv = Target::Spir64;
        let both = Registry::assemble(vec![(a.clone(), None), (b.clone(), None)], HashMap::new());
        assert_eq!(
            both.providers(spirv, "f").iter().map(|i| i.binary).collect::<Vec<_>>(),
            [a.id, b.id]
        );
        let only_b = Registry::assemble(vec![(b.clone(), None)], HashMap::new());
        assert_eq!(
            only_b.providers(spirv, "f").iter().map(|i| i.binary).collect::<Vec<_>>(),
            [b.id]
        );
        assert!(!only_b.contains(a.id));
    }

    #[test]
    fn local_groups_limit_visibility_both_ways() {
        let ids: Vec<Arc<Binary>> = (0..3)
            .map(|i| {
                Arc::new(Binary::of_images(
                    BinaryId::fresh(),
                    format!("lib{i}.so"),
                    vec![image(&[], &[])].into(),
                ))
            })
            .collect();
        let (global, local, dep) = (ids[0].id, ids[1].id, ids[2].id);
        let group: Box<[BinaryId]> = vec![local, dep].into();
        let registry = Registry::assemble(
            vec![
                (ids[0].clone(), None),
                (ids[1].clone(), Some(group.clone())),
                (ids[2].clone(), Some(group)),
            ],
            HashMap::new(),
        );
        assert!(registry.visible(local, global), "a local library sees global exports");
        assert!(registry.visible(local, dep), "and its group's");
        assert!(!registry.visible(global, local), "a global one does not see a local library's");
    }
}
