//! The encodings that `sycl-build`, `sycl-ld` and `sycl-runtime` exchange, defined once.
//!
//! Two payloads exist, both little-endian, both starting with an 8-byte magic and a `u32`
//! version:
//!
//! - a **device object** ([`DeviceObject`], magic [`DEVICE_OBJECT_MAGIC`]): one compiled device
//!   source, SPIR-V plus where it came from. `sycl-build` wraps it in an ELF relocatable object
//!   (section [`DEVICE_OBJECT_SECTION`]) inside a static archive, so it travels with the crate's
//!   ordinary link inputs, rlibs included; `sycl-ld` finds it there.
//! - an **image set** ([`ImageSet`], magic [`IMAGE_SET_MAGIC`]): the device images of one
//!   executable or shared library, each with its entry points and property sets. `sycl-ld`
//!   embeds it as the descriptor of an ELF note ([`NOTE_NAME`], [`NOTE_TYPE_IMAGES`]) in an
//!   allocated note section ([`IMAGE_NOTE_SECTION`]), which the static linker places in a
//!   `PT_NOTE` segment; the runtime reads it from the loaded segment in memory.
//!
//! Every decoder here checks each length against the bytes that remain before reading, so a
//! malformed payload yields a [`DecodeError`] and never an out-of-bounds read, a panic, or an
//! allocation larger than the input.

pub mod aspects;
pub mod c_types;
pub mod cubin;
mod codec;
mod config;
mod kernel_params;
mod note;
mod property;
pub mod requirements;
mod target;
mod view;

pub use codec::DecodeError;
pub use config::{ConfigError, DeviceConfig, TargetConfig, DEFAULT_DEVICE_CONFIG};
pub use kernel_params::{
    encode_kernel_params, kernel_signature, parse_kernel_params, KernelParam, KernelParamsError,
    ParamKind,
};
pub use note::{elf_note, find_notes, payload_hash, scope_marker_symbol};
pub use property::{Property, PropertySet, PropertyValue};
pub use requirements::{DeviceRequirements, RequirementsError};
pub use target::{sass_runs_on, CudaArch, Target, UnknownTarget};
pub use view::{ImageSetView, ImageView, PropertySetView, PropertyValueView};

use codec::{Decoder, Encoder};

/// Magic that starts a device-object payload.
pub const DEVICE_OBJECT_MAGIC: &[u8; 8] = b"SYCLDOBJ";
/// Version of the device-object payload this crate writes and reads.
pub const DEVICE_OBJECT_VERSION: u32 = 2;
/// Section of the ELF relocatable object that carries one device-object payload.
pub const DEVICE_OBJECT_SECTION: &str = ".sycl.device_object";
/// How the members that carry device objects in `sycl-build`'s archives are named (then the
/// source's index and file stem, then `.o`). `sycl-ld` reads this far to tell them from
/// rustc's codegen units (`*.rcgu.o`), which it skips unread.
pub const DEVICE_OBJECT_MEMBER_PREFIX: &str = "sycl-device-";

/// In a PTX image, each specialization constant `NAME` is a `.weak .const .b8` array of its
/// value's bytes, named this and `NAME`, initialised to its default; the runtime writes the
/// values it is given into the initialiser before the CUDA link (a PTX image holds no
/// `OpSpecConstant`, and no translator runs at run time).
pub const PTX_SPEC_CONSTANT_PREFIX: &str = "__sycl_spec_constant_";

/// A PTX line that declares a specialization constant's variable, as `sycl-ld` writes it:
/// `.weak .const .align 4 .b8 __sycl_spec_constant_scale[4] = {2, 0, 0, 0};`, or without an
/// initialiser (`llc` writes none for zeros). The one reader of that form: the runtime writes
/// values into it, and `sycl-ld` gives each an explicit initialiser before `ptxas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtxSpecConstant<'l> {
    /// The constant's name (without [`PTX_SPEC_CONSTANT_PREFIX`]).
    pub name: &'l str,
    /// Its size in bytes.
    pub size: usize,
    /// The declaration up to its size's `]`, without initialiser.
    pub declaration: &'l str,
    /// Whether the line gives an initial value.
    pub initialised: bool,
}

impl<'l> PtxSpecConstant<'l> {
    /// The constant `line` declares, if it declares one.
    pub fn of(line: &'l str) -> Option<PtxSpecConstant<'l>> {
        let line = line.trim_end();
        let rest = line.strip_prefix(".weak .const ")?;
        let named = &rest[rest.find(PTX_SPEC_CONSTANT_PREFIX)? + PTX_SPEC_CONSTANT_PREFIX.len()..];
        let (name, sized) = named.split_once('[')?;
        let (size, after) = sized.split_once(']')?;
        let initialised = after.trim_start().starts_with('=');
        if !(initialised || after.trim_start() == ";") || name.contains(char::is_whitespace) {
            return None;
        }
        let declaration = &line[..line.len() - after.len()];
        Some(PtxSpecConstant { name, size: size.parse().ok()?, declaration, initialised })
    }

    /// The declaration with `bytes` as its initialiser, as a line (no newline).
    pub fn with_value(&self, bytes: &[u8]) -> String {
        let bytes: Vec<String> = bytes.iter().map(u8::to_string).collect();
        format!("{} = {{{}}};", self.declaration, bytes.join(", "))
    }
}

/// The compute capability a PTX image (the `ptx64` target) is written for, and the oldest
/// NVIDIA GPU that runs it: 7.0 (`sm_70`), the first with the warp-synchronous instructions
/// sub-groups use. The CUDA driver compiles the PTX for the GPU at hand.
pub const PTX_COMPUTE_CAPABILITY: (u32, u32) = (7, 0);

/// The dynamic shared memory size a CUDA launch of a PTX image asks for: the local arguments'
/// `local_bytes` rounded up to 4, plus the launch's number of dimensions less one. A PTX
/// image's `get_work_dim` is `(%dynamic_smem_size & 3) + 1`: the count travels with the launch
/// (no module variable written before it, nothing shared between two launches), and a 1-D
/// launch asks for no more than its local arguments.
pub fn ptx_dynamic_shared_size(local_bytes: usize, dims: usize) -> usize {
    debug_assert!((1..=3).contains(&dims), "{dims} dimensions");
    local_bytes.next_multiple_of(4) + (dims - 1)
}

/// Magic that starts an image-set payload.
pub const IMAGE_SET_MAGIC: &[u8; 8] = b"SYCLIMGS";
/// The version of the image-set payload this crate writes, and the newest it reads. Version 2
/// added one image format, [`ImageFormat::Ptx`]. Version 3 moved every image's code after
/// all the images' descriptions (format, target, kernels, property sets, and where its code
/// lies), so that indexing a set reads a few contiguous kilobytes of descriptions instead of
/// walking megabytes of code: a binary with a thousand kernels starts that much sooner.
/// Readers of versions 1 and 2 refuse a version-3 set by its version.
pub const IMAGE_SET_VERSION: u32 = 3;
/// The oldest image-set version this crate reads.
pub const IMAGE_SET_OLDEST_VERSION: u32 = 1;
/// Allocated note section that carries the image set in a linked binary.
pub const IMAGE_NOTE_SECTION: &str = ".note.sycl.images";
/// Name of the ELF note that carries the image set (without its terminating NUL).
pub const NOTE_NAME: &str = "SYCL";
/// Type of the ELF note that carries the image set.
pub const NOTE_TYPE_IMAGES: u32 = 0x5359_0001;
/// Type of the ELF note that follows each image-set note: the set's [`payload_hash`], as
/// 8 little-endian bytes, so that the runtime identifies a loaded binary without hashing its
/// images (it hashes them itself when the note is missing).
pub const NOTE_TYPE_PAYLOAD_HASH: u32 = 0x5359_0002;

/// Property-set names, as DPC++ spells them.
pub mod sets {
    /// The functions the image defines for other images to call: one property per symbol,
    /// named by it, with the value 1 ([`PropertySet::symbols`](crate::PropertySet::symbols)).
    pub const EXPORTED_SYMBOLS: &str = "SYCL/exported symbols";
    /// The functions the image calls and another image must export, in the same layout as
    /// [`EXPORTED_SYMBOLS`].
    pub const IMPORTED_SYMBOLS: &str = "SYCL/imported symbols";
    /// What a device must have to run the image
    /// ([`DeviceRequirements`](crate::DeviceRequirements)).
    pub const DEVICE_REQUIREMENTS: &str = "SYCL/device requirements";
    /// The virtual-function set an outlined image defines (`virtual-functions-set`,
    /// `dummy-image`) or the sets its kernels use (`uses-virtual-functions-set`, a
    /// comma-separated list).
    pub const VIRTUAL_FUNCTIONS: &str = "SYCL/virtual functions";
    /// The image's specialization constants: one property per constant, named by it, whose
    /// `u32` value is its SPIR-V `SpecId`.
    pub const SPECIALIZATION_CONSTANTS: &str = "SYCL/specialization constants";
    /// The default values of the image's specialization constants: one property per constant,
    /// named by it, whose byte-array value is its default's bytes, little-endian.
    pub const SPECIALIZATION_CONSTANTS_DEFAULTS: &str =
        "SYCL/specialization constants default values";
    /// Ours (DPC++ has none): the image's reduced call graph, so that the runtime can
    /// find a call cycle (recursion) across the images it links without reading their code.
    /// The nodes are the image's functions that reach an import through direct calls or lie on
    /// a call cycle inside the image; one property per node, named by it (a kernel's name, an
    /// export's linkage name, otherwise a name unique in the image that is neither of those
    /// nor an import), whose string value lists the node's callees that are nodes or imported
    /// symbols (exactly as in `SYCL/imported symbols`), sorted, separated by
    /// [`CALL_GRAPH_SEPARATOR`]. An image whose graph has no node has no such set.
    pub const CALL_GRAPH: &str = "SYCL/call graph";
    /// Ours: in a [`Target::Ptx64Inlined`](crate::Target::Ptx64Inlined) image, each import
    /// compiled in, named by its symbol, whose string value is the [`payload_hash`](crate::payload_hash)
    /// of the PTX image that exported it, in hexadecimal (16 digits). The runtime uses the image
    /// instead of its plain PTX twin only when resolution picks exactly those images.
    pub const INLINED_IMPORTS: &str = "SYCL/inlined imports";
    /// What separates callees in a `SYCL/call graph` value.
    pub const CALL_GRAPH_SEPARATOR: char = '\n';
    /// Ours (DPC++'s `SYCL/kernel param opt info` is something else: which parameters its
    /// compiler dropped): each kernel's parameter list, so that the runtime can check a
    /// launch's arguments before the driver sees them. One property per kernel of the image,
    /// named by the kernel, whose string value has one line per parameter, in order, lines
    /// separated by [`KERNEL_ARGUMENTS_LINE_SEPARATOR`] (none after the last; a kernel without
    /// parameters has an empty value). A line is four fields separated by
    /// [`KERNEL_ARGUMENTS_FIELD_SEPARATOR`]:
    ///
    /// 1. the kind: `global`, `constant`, `local`, `scalar`, `struct`, `image`, `sampler` or
    ///    `other` ([`ParamKind`](crate::ParamKind));
    /// 2. the size in bytes as `clSetKernelArg` expects it, in decimal (0: unknown; for a
    ///    `local` pointer, the pointer's size);
    /// 3. the type in OpenCL C's words (`global int*`, `global const int*`, `int`, `float4`,
    ///    `struct Pt`), signedness aside, which SPIR-V does not record; a pointer to `const`
    ///    memory says so in OpenCL C's order, except a `constant` one (earlier writers wrote no
    ///    `const`: their pointers read as not `const`, and older readers match `const int` as a
    ///    type they do not know, which they accept);
    /// 4. the parameter's name, empty when the SPIR-V has none.
    ///
    /// For example `global\t8\tglobal int*\tout\nscalar\t4\tint\tn`. Neither the type nor the
    /// name contains a tab or a line break, so nothing is escaped. Fields after the fourth are
    /// reserved for later writers: readers ignore them. An unknown kind makes the value
    /// malformed. Images without kernels have no such set.
    pub const KERNEL_ARGUMENTS: &str = "SYCL/kernel arguments";
    /// What separates parameters in a `SYCL/kernel arguments` value.
    pub const KERNEL_ARGUMENTS_LINE_SEPARATOR: char = '\n';
    /// What separates a parameter's fields in a `SYCL/kernel arguments` value.
    pub const KERNEL_ARGUMENTS_FIELD_SEPARATOR: char = '\t';
}

/// How a link unit's entry points are grouped into device images (DPC++'s
/// `-fsycl-device-code-split`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SplitMode {
    /// One image per kernel (and per exported function).
    PerKernel,
    /// One image per source file.
    PerSource,
    /// One image for all kernels (and one for all exported functions).
    Off,
    /// `Off` when the code has indirect calls or function pointers, otherwise `PerSource`.
    Auto,
}

impl SplitMode {
    /// The mode as DPC++'s `-fsycl-device-code-split` spells it (`per_kernel`, `per_source`,
    /// `off`, `auto`), and as a device object records it.
    pub fn name(self) -> &'static str {
        match self {
            SplitMode::PerKernel => "per_kernel",
            SplitMode::PerSource => "per_source",
            SplitMode::Off => "off",
            SplitMode::Auto => "auto",
        }
    }

    /// The mode whose [`name`](Self::name) is `name`; `None` for an unknown name.
    pub fn parse(name: &str) -> Option<SplitMode> {
        [SplitMode::PerKernel, SplitMode::PerSource, SplitMode::Off, SplitMode::Auto]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

/// One compiled device source, as `sycl-build` produces it, with the build settings that the
/// link needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceObject {
    /// Package that compiled it (`CARGO_PKG_NAME`), for messages.
    pub package: String,
    /// The source path as given to the builder; also the module id that groups a source's
    /// functions under `per_source` split.
    pub source: String,
    /// The split mode the crate asked for (`None`: the default, `auto`).
    pub split: Option<SplitMode>,
    /// DPC++'s `-fsycl-fixed-targets` for this source (empty: none).
    pub fixed_targets: Vec<String>,
    /// Names of the targets to build images for ([`Target::BUILDABLE`]); empty:
    /// [`Target::DEFAULT`]. Names, not [`Target`]s, so that an object naming a target this
    /// build does not know still decodes; `sycl-ld` refuses the name when it links.
    pub targets: Vec<String>,
    /// The device configuration file's text when the crate chose one (`None`: the default).
    pub device_config: Option<String>,
    /// Relocatable SPIR-V.
    pub spirv: Vec<u8>,
}

impl DeviceObject {
    /// The payload (magic [`DEVICE_OBJECT_MAGIC`], version [`DEVICE_OBJECT_VERSION`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::new(DEVICE_OBJECT_MAGIC, DEVICE_OBJECT_VERSION);
        e.str(&self.package);
        e.str(&self.source);
        e.str(self.split.map_or("", SplitMode::name));
        e.strs(&self.fixed_targets);
        e.strs(&self.targets);
        e.str(self.device_config.as_deref().unwrap_or(""));
        e.bytes(&self.spirv);
        e.finish()
    }

    /// Reads a payload that [`encode`](Self::encode) wrote; any other version, a truncation,
    /// trailing bytes or an unknown split mode is an error.
    pub fn decode(bytes: &[u8]) -> Result<DeviceObject, DecodeError> {
        let mut d = Decoder::new(bytes, DEVICE_OBJECT_MAGIC, DEVICE_OBJECT_VERSION)?;
        let package = d.str()?;
        let source = d.str()?;
        let split = match d.str()?.as_str() {
            "" => None,
            name => Some(
                SplitMode::parse(name)
                    .ok_or_else(|| DecodeError::Invalid(format!("unknown split mode `{name}`")))?,
            ),
        };
        let fixed_targets = d.strs()?;
        let targets = d.strs()?;
        let device_config = Some(d.str()?).filter(|c| !c.is_empty());
        let spirv = d.bytes()?.to_vec();
        d.end()?;
        Ok(DeviceObject { package, source, split, fixed_targets, targets, device_config, spirv })
    }
}

/// How an image's code is represented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ImageFormat {
    /// SPIR-V, compiled by the device's driver at run time.
    SpirV,
    /// A device's own program binary, made ahead of time.
    Native,
    /// LLVM SPIR bitcode, for drivers that take SPIR but not SPIR-V.
    SpirBitcode,
    /// PTX assembly (text, without a terminating NUL) for NVIDIA GPUs through the CUDA driver,
    /// which compiles and links it at run time: kernels are `.visible .entry`, exports
    /// `.visible .func`, imports `.extern .func`. Since image-set version 2.
    Ptx,
}

impl ImageFormat {
    fn code(self) -> u32 {
        match self {
            ImageFormat::SpirV => 1,
            ImageFormat::Native => 2,
            ImageFormat::SpirBitcode => 3,
            ImageFormat::Ptx => 4,
        }
    }

    /// The oldest image-set version that has this format.
    fn since_version(self) -> u32 {
        match self {
            ImageFormat::Ptx => 2,
            _ => 1,
        }
    }

    /// The format of `code` in an image set of `version`.
    pub(crate) fn from_code(code: u32, version: u32) -> Result<ImageFormat, DecodeError> {
        let format = match code {
            1 => ImageFormat::SpirV,
            2 => ImageFormat::Native,
            3 => ImageFormat::SpirBitcode,
            4 => ImageFormat::Ptx,
            _ => return Err(DecodeError::Invalid(format!("unknown image format {code}"))),
        };
        if format.since_version() > version {
            return Err(DecodeError::Invalid(format!(
                "image format {code} in an image set of version {version}"
            )));
        }
        Ok(format)
    }

    /// The format's name in messages and listings (`spirv`, `native`, `spir-bc`, `ptx`).
    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::SpirV => "spirv",
            ImageFormat::Native => "native",
            ImageFormat::SpirBitcode => "spir-bc",
            ImageFormat::Ptx => "ptx",
        }
    }
}

/// One device image: code, the kernels it defines, and its property sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// How [`data`](Self::data) represents the code.
    pub format: ImageFormat,
    /// The name of the [`Target`] the image is for. A name, not a [`Target`], so that an image
    /// for a target this build does not know still decodes.
    pub target: String,
    /// Kernels defined by this image (its offload entries).
    pub kernels: Vec<String>,
    /// The image's property sets ([`sets`] names them), in the order they were written.
    pub property_sets: Vec<PropertySet>,
    /// The code, in [`format`](Self::format).
    pub data: Vec<u8>,
}

impl Image {
    /// The property set called `name`, if the image has one.
    pub fn property_set(&self, name: &str) -> Option<&PropertySet> {
        self.property_sets.iter().find(|set| set.name == name)
    }

    /// Names of the properties of set `name` (for the symbol sets, the symbols).
    pub fn property_names<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.property_set(name)
            .into_iter()
            .flat_map(|set| set.properties.iter().map(|p| p.name.as_str()))
    }

    /// The symbols of `SYCL/exported symbols`: the functions the image defines for others.
    pub fn exported_symbols(&self) -> impl Iterator<Item = &str> + '_ {
        self.property_names(sets::EXPORTED_SYMBOLS)
    }

    /// The symbols of `SYCL/imported symbols`: the functions another image must define.
    pub fn imported_symbols(&self) -> impl Iterator<Item = &str> + '_ {
        self.property_names(sets::IMPORTED_SYMBOLS)
    }

    /// For an outlined virtual-function set image: the set's name and whether it is the
    /// dummy (empty bodies) version.
    pub fn virtual_functions_set(&self) -> Option<(&str, bool)> {
        let set = self.property_set(sets::VIRTUAL_FUNCTIONS)?;
        let Some(PropertyValue::String(name)) = set.get("virtual-functions-set") else {
            return None;
        };
        Some((name.as_str(), matches!(set.get("dummy-image"), Some(PropertyValue::U32(1)))))
    }

    /// The virtual-function sets the image's kernels use.
    pub fn uses_virtual_functions_sets(&self) -> Vec<&str> {
        match self
            .property_set(sets::VIRTUAL_FUNCTIONS)
            .and_then(|s| s.get("uses-virtual-functions-set"))
        {
            Some(PropertyValue::String(list)) => {
                list.split(',').filter(|s| !s.is_empty()).collect()
            }
            _ => vec![],
        }
    }

    /// The image's reduced call graph (`SYCL/call graph`): each node with its callees.
    pub fn call_graph(&self) -> Vec<(&str, Vec<&str>)> {
        let nodes = self.property_set(sets::CALL_GRAPH).into_iter().flat_map(|set| &set.properties);
        nodes
            .map(|p| match &p.value {
                PropertyValue::String(callees) => {
                    (p.name.as_str(), call_graph_callees(callees).collect())
                }
                _ => (p.name.as_str(), vec![]),
            })
            .collect()
    }

    /// Kernel `kernel`'s parameters (`SYCL/kernel arguments`): `None` when the image records
    /// none for it (an image made before the set existed, or a kernel it does not define),
    /// an error when the record is malformed.
    pub fn kernel_params(
        &self,
        kernel: &str,
    ) -> Option<Result<Vec<KernelParam>, KernelParamsError>> {
        let value = self.property_set(sets::KERNEL_ARGUMENTS)?.get(kernel)?;
        Some(match value {
            PropertyValue::String(value) => parse_kernel_params(value),
            _ => Err(KernelParamsError::NotAString { kernel: kernel.to_string() }),
        })
    }

    /// The image's device requirements (none when it has no such set).
    pub fn requirements(&self) -> Result<DeviceRequirements, RequirementsError> {
        match self.property_set(sets::DEVICE_REQUIREMENTS) {
            Some(set) => DeviceRequirements::from_property_set(set),
            None => Ok(DeviceRequirements::default()),
        }
    }
}

/// The callees in a `SYCL/call graph` value.
pub fn call_graph_callees(value: &str) -> impl Iterator<Item = &str> {
    value.split(sets::CALL_GRAPH_SEPARATOR).filter(|c| !c.is_empty())
}

/// The images embedded in one executable or shared library.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageSet {
    /// The images, in the order the payload holds them.
    pub images: Vec<Image>,
}

impl ImageSet {
    /// The payload (version [`IMAGE_SET_VERSION`]): the image count, the images' descriptions,
    /// then their code, each part with its length before it.
    pub fn encode(&self) -> Vec<u8> {
        let mut descriptions = Encoder::bare();
        let mut code = Vec::with_capacity(self.images.iter().map(|i| i.data.len()).sum());
        for image in &self.images {
            image.encode_description(&mut descriptions);
            descriptions.u32(len_u32(code.len()));
            descriptions.u32(len_u32(image.data.len()));
            code.extend_from_slice(&image.data);
        }
        let mut e = Encoder::new(IMAGE_SET_MAGIC, IMAGE_SET_VERSION);
        e.u32(len_u32(self.images.len()));
        e.bytes(&descriptions.finish());
        e.bytes(&code);
        e.finish()
    }

    /// Reads a payload, copying every field out ([`ImageSetView::parse`] reads it in place).
    pub fn decode(bytes: &[u8]) -> Result<ImageSet, DecodeError> {
        let view = ImageSetView::parse(bytes)?;
        Ok(ImageSet { images: view.images.iter().map(ImageView::to_image).collect() })
    }
}

impl Image {
    /// The image's description as every version writes it: format, target, kernels, property
    /// sets (its code follows, inline before version 3, as an offset and length from 3 on).
    fn encode_description(&self, e: &mut Encoder) {
        e.u32(self.format.code());
        e.str(&self.target);
        e.strs(&self.kernels);
        e.u32(len_u32(self.property_sets.len()));
        for set in &self.property_sets {
            set.encode(e);
        }
    }
}

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).expect("device payload field larger than 4 GiB")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_constant_declarations_are_read_with_or_without_an_initialiser() {
        let line = ".weak .const .align 4 .b8 __sycl_spec_constant_scale[4] = {2, 0, 0, 0};\n";
        let c = PtxSpecConstant::of(line).unwrap();
        assert_eq!((c.name, c.size, c.initialised), ("scale", 4, true));
        assert_eq!(c.declaration, ".weak .const .align 4 .b8 __sycl_spec_constant_scale[4]");
        assert_eq!(
            c.with_value(&[3, 0, 0, 0]),
            ".weak .const .align 4 .b8 __sycl_spec_constant_scale[4] = {3, 0, 0, 0};"
        );
        let bare =
            PtxSpecConstant::of(".weak .const .align 8 .b8 __sycl_spec_constant_z[8];").unwrap();
        assert_eq!((bare.name, bare.size, bare.initialised), ("z", 8, false));
        for other in [
            ".global .align 4 .b8 __sycl_spec_constant_s[4];",
            ".weak .const .align 4 .b8 table[4];",
            ".weak .const .align 4 .b8 __sycl_spec_constant_s[x];",
        ] {
            assert_eq!(PtxSpecConstant::of(other), None, "{other}");
        }
    }

    fn sample_set() -> ImageSet {
        ImageSet {
            images: vec![
                Image {
                    format: ImageFormat::SpirV,
                    target: "spir64".into(),
                    kernels: vec!["app_kernel".into()],
                    property_sets: vec![
                        PropertySet::symbols(sets::IMPORTED_SYMBOLS, ["LibDeviceFunc"]),
                        PropertySet {
                            name: sets::DEVICE_REQUIREMENTS.into(),
                            properties: vec![
                                Property::new("aspect", PropertyValue::Bytes(vec![1, 2, 3])),
                                Property::new("note", PropertyValue::String("x".into())),
                            ],
                        },
                    ],
                    data: vec![0x03, 0x02, 0x23, 0x07, 9, 9],
                },
                Image {
                    format: ImageFormat::Native,
                    target: "x86_64".into(),
                    kernels: vec![],
                    property_sets: vec![],
                    data: vec![],
                },
            ],
        }
    }

    #[test]
    fn image_set_round_trip() {
        let set = sample_set();
        assert_eq!(ImageSet::decode(&set.encode()).unwrap(), set);
    }

    #[test]
    fn each_image_reads_alone_from_its_offset() {
        let set = sample_set();
        let bytes = set.encode();
        let view = ImageSetView::parse(&bytes).unwrap();
        for (image, read) in set.images.iter().zip(&view.images) {
            assert_eq!(&ImageSetView::image_at(&bytes, read.offset).unwrap().to_image(), image);
        }
        // Anywhere else: an error, never a panic or a read past the end.
        for offset in (0..bytes.len() + 8).filter(|o| view.images.iter().all(|i| i.offset != *o)) {
            if let Ok(image) = ImageSetView::image_at(&bytes, offset) {
                assert!(image.data.len() <= bytes.len());
            }
        }
    }

    #[test]
    fn device_object_round_trip() {
        let mut object = DeviceObject {
            package: "helpers".into(),
            source: "src/helpers.cl".into(),
            split: Some(SplitMode::PerSource),
            fixed_targets: vec!["pocl_cpu".into()],
            targets: vec!["spir64".into(), "intel_cpu_x86_64".into()],
            device_config: Some("[x]\naspects = []\n".into()),
            spirv: vec![1, 2, 3, 4],
        };
        assert_eq!(DeviceObject::decode(&object.encode()).unwrap(), object);
        object.split = None;
        object.device_config = None;
        assert_eq!(DeviceObject::decode(&object.encode()).unwrap(), object);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = sample_set().encode();
        for len in 0..bytes.len() {
            assert!(ImageSet::decode(&bytes[..len]).is_err(), "prefix of {len} bytes decoded");
        }
    }

    #[test]
    fn trailing_bytes_are_an_error() {
        let mut bytes = sample_set().encode();
        bytes.push(0);
        assert!(matches!(ImageSet::decode(&bytes), Err(DecodeError::Trailing(1))));
    }

    #[test]
    fn wrong_magic_and_future_version_are_named() {
        let mut bytes = sample_set().encode();
        bytes[8] = 4;
        let err = ImageSet::decode(&bytes).unwrap_err();
        assert!(matches!(err, DecodeError::Version { found: 4, oldest: 1, supported: 3 }));
        assert_eq!(err.to_string(), "unknown version 4 (this build reads versions 1 to 3)");
        bytes[0] = b'X';
        assert!(matches!(ImageSet::decode(&bytes), Err(DecodeError::Magic)));
    }

    /// `set` in the layout of versions 1 and 2: each image's code inline, after its description.
    fn encode_inline(set: &ImageSet, version: u32) -> Vec<u8> {
        let mut e = Encoder::new(IMAGE_SET_MAGIC, version);
        e.u32(len_u32(set.images.len()));
        for image in &set.images {
            image.encode_description(&mut e);
            e.bytes(&image.data);
        }
        e.finish()
    }

    #[test]
    fn a_set_is_written_with_all_code_after_all_descriptions() {
        let set = sample_set();
        let bytes = set.encode();
        assert_eq!(bytes[8..12], IMAGE_SET_VERSION.to_le_bytes());
        let code: Vec<u8> = set.images.iter().flat_map(|i| i.data.iter().copied()).collect();
        assert!(bytes.ends_with(&code), "the code, image after image, ends the payload");
        assert_eq!(ImageSet::decode(&bytes).unwrap(), set);
    }

    #[test]
    fn versions_1_and_2_are_still_read() {
        let mut set = sample_set();
        assert_eq!(ImageSet::decode(&encode_inline(&set, 1)).unwrap(), set);
        set.images[1].format = ImageFormat::Ptx;
        set.images[1].target = "ptx64".into();
        let bytes = encode_inline(&set, 2);
        assert_eq!(ImageSet::decode(&bytes).unwrap(), set);
        let view = ImageSetView::parse(&bytes).unwrap();
        assert_eq!(
            ImageSetView::image_at(&bytes, view.images[1].offset).unwrap().to_image(),
            set.images[1]
        );
        // A PTX image in a version-1 set is refused: no version-1 writer made one.
        let err = ImageSet::decode(&encode_inline(&set, 1)).unwrap_err();
        assert_eq!(err.to_string(), "image format 4 in an image set of version 1");
    }

    #[test]
    fn code_outside_the_code_part_is_refused() {
        let set =
            ImageSet { images: vec![Image { data: vec![7; 8], ..sample_set().images[1].clone() }] };
        let mut bytes = set.encode();
        // The last description's code length, just before the code part's length and code.
        let at = bytes.len() - 8 - 4 - 4;
        bytes[at..at + 4].copy_from_slice(&9u32.to_le_bytes());
        let err = ImageSet::decode(&bytes).unwrap_err();
        assert_eq!(err.to_string(), "image code at 0+9 outside the 8 bytes of code");
        bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        bytes[at - 4..at].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(ImageSet::decode(&bytes).is_err());
    }

    #[test]
    fn lying_count_is_refused_before_allocating() {
        let mut e = Encoder::new(IMAGE_SET_MAGIC, IMAGE_SET_VERSION);
        e.u32(u32::MAX);
        assert!(ImageSet::decode(&e.finish()).is_err());
    }

    #[test]
    fn symbol_accessors() {
        let set = sample_set();
        let image = &set.images[0];
        assert_eq!(image.imported_symbols().collect::<Vec<_>>(), ["LibDeviceFunc"]);
        assert_eq!(image.exported_symbols().count(), 0);
    }

    #[test]
    fn call_graphs_survive_encoding_and_read_the_same_in_place() {
        let mut set = sample_set();
        let graph = [("f", vec!["LibDeviceFunc", "helper"]), ("helper", vec!["f"])];
        set.images[0]
            .property_sets
            .push(PropertySet::call_graph(graph.iter().map(|(n, c)| (*n, c.iter()))));
        let value = set.images[0].property_set(sets::CALL_GRAPH).unwrap().get("f");
        assert_eq!(value, Some(&PropertyValue::String("LibDeviceFunc\nhelper".into())));
        let bytes = set.encode();
        let decoded = ImageSet::decode(&bytes).unwrap();
        assert_eq!(decoded.images[0].call_graph(), graph.to_vec());
        assert!(decoded.images[1].call_graph().is_empty());
        let view = ImageSetView::parse(&bytes).unwrap();
        let image = view.images[0];
        let in_place: Vec<(&str, Vec<&str>)> =
            image.call_graph().map(|(n, c)| (n, c.collect())).collect();
        assert_eq!(in_place, graph.to_vec());
    }

    #[test]
    fn kernel_params_survive_encoding_and_read_the_same_in_place() {
        let param = |kind, size, ty: &str, name: &str| KernelParam {
            kind,
            size,
            ty: ty.into(),
            name: name.into(),
        };
        let params = vec![
            param(ParamKind::Global, 8, "global int*", "out"),
            param(ParamKind::Local, 8, "local float*", ""),
        ];
        let mut set = sample_set();
        let kernels: [(&str, &[KernelParam]); 2] = [("app_kernel", &params), ("empty", &[])];
        set.images[0].property_sets.push(PropertySet::kernel_arguments(kernels));
        set.images[1].property_sets.push(PropertySet {
            name: sets::KERNEL_ARGUMENTS.into(),
            properties: vec![
                Property::new("bad", PropertyValue::String("global\t8".into())),
                Property::new("number", PropertyValue::U32(3)),
            ],
        });
        let bytes = set.encode();
        let decoded = ImageSet::decode(&bytes).unwrap();
        let view = ImageSetView::parse(&bytes).unwrap();
        for (image, seen) in decoded.images.iter().zip(&view.images) {
            for kernel in ["app_kernel", "empty", "bad", "number", "missing"] {
                assert_eq!(image.kernel_params(kernel), seen.kernel_params(kernel), "{kernel}");
            }
        }
        let (first, second) = (&decoded.images[0], &decoded.images[1]);
        assert_eq!(first.kernel_params("app_kernel"), Some(Ok(params)));
        assert_eq!(
            first.kernel_params("empty"),
            Some(Ok(vec![])),
            "no parameters is not no record"
        );
        assert_eq!(first.kernel_params("missing"), None);
        assert_eq!(
            second.kernel_params("app_kernel"),
            None,
            "no record in an image without the set"
        );
        assert!(second
            .kernel_params("bad")
            .unwrap()
            .unwrap_err()
            .to_string()
            .contains("expected 4 tab-separated fields"));
        assert_eq!(
            second.kernel_params("number").unwrap().unwrap_err().to_string(),
            "the `SYCL/kernel arguments` record of kernel `number` is not a string"
        );
    }
}
