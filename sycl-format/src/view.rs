//! Image sets read in place: every field borrowed from the payload, nothing copied. The
//! runtime indexes each loaded binary's kernels and symbols this way and copies an image's
//! code only when a build needs it; [`ImageSet::decode`] is the same walk with every field
//! copied out. [`ImageSetView::parse`] checks the whole payload, so reading a view it returned
//! cannot fail.

use crate::codec::{DecodeError, Decoder};
use crate::property::{TYPE_BYTE_ARRAY, TYPE_STRING, TYPE_UINT32};
use crate::{
    sets, Image, ImageFormat, KernelParam, KernelParamsError, Property, PropertySet, PropertyValue,
    IMAGE_SET_MAGIC, IMAGE_SET_OLDEST_VERSION, IMAGE_SET_VERSION,
};

/// A checked image-set payload.
#[derive(Debug, Clone)]
pub struct ImageSetView<'a> {
    /// The images, in the order the payload holds them.
    pub images: Vec<ImageView<'a>>,
}

impl<'a> ImageSetView<'a> {
    /// How many images a payload says it holds, read from its header alone (bounded by its
    /// size): enough to size an index before reading the images.
    pub fn count_hint(bytes: &[u8]) -> usize {
        Decoder::with_versions(bytes, IMAGE_SET_MAGIC, IMAGE_SET_OLDEST_VERSION..=IMAGE_SET_VERSION)
            .and_then(|(mut d, _)| d.count(16))
            .unwrap_or(0)
    }

    /// Reads and checks a whole payload, as [`ImageSet::decode`](crate::ImageSet::decode)
    /// does, without copying anything out of it.
    pub fn parse(bytes: &'a [u8]) -> Result<ImageSetView<'a>, DecodeError> {
        let mut images = Vec::with_capacity(ImageSetView::count_hint(bytes));
        ImageSetView::parse_each(bytes, |image| {
            images.push(image);
            Ok(())
        })?;
        Ok(ImageSetView { images })
    }

    /// [`parse`](Self::parse), handing each image to `each` as it is read instead of
    /// gathering them: an index of a large set allocates nothing here. An error from `each`
    /// stops the parse and is returned. Until the whole payload is checked, `each` may see
    /// images of a payload that turns out malformed.
    pub fn parse_each(
        bytes: &'a [u8],
        mut each: impl FnMut(ImageView<'a>) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        let (mut d, version) = Decoder::with_versions(
            bytes,
            IMAGE_SET_MAGIC,
            IMAGE_SET_OLDEST_VERSION..=IMAGE_SET_VERSION,
        )?;
        // Each image takes at least 16 bytes, so a count larger than that allows is a lie.
        let count = d.count(16)?;
        match Parts::read(&mut d, version)? {
            Some(Parts { descriptions, code }) => {
                let mut descriptions = Decoder::raw(descriptions);
                for _ in 0..count {
                    each(read_image(&mut descriptions, version, Some(code))?)?;
                }
                descriptions.end()?;
            }
            None => {
                for _ in 0..count {
                    each(read_image(&mut d, version, None)?)?;
                }
            }
        }
        d.end()
    }

    /// The one image at `offset` ([`ImageView::offset`] of a view [`parse`](Self::parse)
    /// returned for the same payload): read without walking the images before it.
    pub fn image_at(bytes: &'a [u8], offset: usize) -> Result<ImageView<'a>, DecodeError> {
        let (mut d, version) = Decoder::with_versions(
            bytes,
            IMAGE_SET_MAGIC,
            IMAGE_SET_OLDEST_VERSION..=IMAGE_SET_VERSION,
        )?;
        d.count(16)?;
        match Parts::read(&mut d, version)? {
            Some(Parts { descriptions, code }) => {
                read_image(&mut Decoder::at(descriptions, offset), version, Some(code))
            }
            None => read_image(&mut Decoder::at(bytes, offset), version, None),
        }
    }
}

/// A version-3 payload's two parts after the count: the images' descriptions and their code.
struct Parts<'a> {
    descriptions: &'a [u8],
    code: &'a [u8],
}

impl<'a> Parts<'a> {
    /// The parts, read where `d` stands after the count (`None` before version 3, whose
    /// images each hold their code).
    fn read(d: &mut Decoder<'a>, version: u32) -> Result<Option<Parts<'a>>, DecodeError> {
        if version < 3 {
            return Ok(None);
        }
        let descriptions = d.bytes()?;
        let code = d.bytes()?;
        Ok(Some(Parts { descriptions, code }))
    }
}

/// One image, checked, from where `d` stands: its code inline (before version 3) or where its
/// description says in `code`.
fn read_image<'a>(
    d: &mut Decoder<'a>,
    version: u32,
    code: Option<&'a [u8]>,
) -> Result<ImageView<'a>, DecodeError> {
    let offset = d.position();
    let format = ImageFormat::from_code(d.u32()?, version)?;
    let target = d.str_ref()?;
    let kernels = List::read(d, 4, |d| d.str_bytes().map(drop))?;
    let sets = List::read(d, 8, |d| {
        d.str_bytes()?;
        List::read(d, 12, |d| {
            let name = d.str_bytes()?;
            match d.u32()? {
                TYPE_UINT32 => d.u32().map(drop),
                TYPE_BYTE_ARRAY => d.bytes().map(drop),
                TYPE_STRING => d.str_bytes().map(drop),
                other => Err(DecodeError::Invalid(format!(
                    "property `{}` has unknown type {other}",
                    String::from_utf8_lossy(name)
                ))),
            }
        })
        .map(drop)
    })?;
    let data = match code {
        None => d.bytes()?,
        Some(code) => {
            let (start, len) = (d.u32()? as usize, d.u32()? as usize);
            start.checked_add(len).and_then(|end| code.get(start..end)).ok_or_else(|| {
                DecodeError::Invalid(format!(
                    "image code at {start}+{len} outside the {} bytes of code",
                    code.len()
                ))
            })?
        }
    };
    Ok(ImageView { offset, format, target, kernels, sets, data })
}

/// A list as encoded (a count, then its elements), kept as its bytes once checked.
#[derive(Debug, Clone, Copy)]
struct List<'a> {
    count: usize,
    bytes: &'a [u8],
}

impl<'a> List<'a> {
    /// Reads a list whose elements take at least `min_size` bytes each, checking each with
    /// `element`.
    fn read(
        d: &mut Decoder<'a>,
        min_size: usize,
        mut element: impl FnMut(&mut Decoder<'a>) -> Result<(), DecodeError>,
    ) -> Result<List<'a>, DecodeError> {
        let count = d.count(min_size)?;
        let start = d.position();
        for _ in 0..count {
            element(d)?;
        }
        Ok(List { count, bytes: d.since(start) })
    }

    /// The elements again, each read by `element` (which cannot fail on checked bytes; if it
    /// did, the iteration would stop).
    fn iter<T, F>(self, element: F) -> impl Iterator<Item = T> + use<'a, T, F>
    where
        F: Fn(&mut Decoder<'a>) -> Result<T, DecodeError>,
    {
        let mut d = Decoder::raw(self.bytes);
        (0..self.count).map_while(move |_| element(&mut d).ok())
    }
}

/// One image, read in place.
#[derive(Debug, Clone, Copy)]
pub struct ImageView<'a> {
    /// Where its description starts, for [`ImageSetView::image_at`].
    pub offset: usize,
    /// How [`data`](Self::data) represents the code.
    pub format: ImageFormat,
    /// The name of the [`Target`](crate::Target) the image is for, as written (see
    /// [`Image::target`](crate::Image::target)).
    pub target: &'a str,
    kernels: List<'a>,
    sets: List<'a>,
    /// The code, in [`format`](Self::format), borrowed from the payload.
    pub data: &'a [u8],
}

impl<'a> ImageView<'a> {
    /// Kernels defined by this image.
    pub fn kernels(&self) -> impl Iterator<Item = &'a str> {
        self.kernels.iter(|d| d.str_ref())
    }

    /// Kernels defined by this image, as bytes: the names [`ImageView::kernels`] gives, without
    /// checking them again (the view was checked when parsed), for indexes that compare bytes.
    pub fn kernel_bytes(&self) -> impl Iterator<Item = &'a [u8]> {
        self.kernels.iter(|d| d.bytes())
    }

    /// The image's property sets, in the order they were written.
    pub fn property_sets(&self) -> impl Iterator<Item = PropertySetView<'a>> {
        self.sets.iter(|d| {
            let name = d.str_ref()?;
            // Checked when the view was parsed: stepped over here, not checked again.
            let properties = List::read(d, 12, skip_property)?;
            Ok(PropertySetView { name, properties })
        })
    }

    /// The property set called `name`, if the image has one.
    pub fn property_set(&self, name: &str) -> Option<PropertySetView<'a>> {
        self.property_sets().find(|set| set.name == name)
    }

    /// The symbols of `SYCL/exported symbols`: the functions the image defines for others.
    pub fn exported_symbols(&self) -> impl Iterator<Item = &'a str> {
        self.property_set(sets::EXPORTED_SYMBOLS).into_iter().flat_map(|set| set.names())
    }

    /// The symbols of `SYCL/imported symbols`: the functions another image must define.
    pub fn imported_symbols(&self) -> impl Iterator<Item = &'a str> {
        self.property_set(sets::IMPORTED_SYMBOLS).into_iter().flat_map(|set| set.names())
    }

    /// The image's device requirements (none when it has no such set), as
    /// [`Image::requirements`](crate::Image::requirements) reads them.
    pub fn requirements(&self) -> Result<crate::DeviceRequirements, crate::RequirementsError> {
        match self.property_set(sets::DEVICE_REQUIREMENTS) {
            Some(set) => crate::DeviceRequirements::from_property_set(&set.to_property_set()),
            None => Ok(crate::DeviceRequirements::default()),
        }
    }

    /// For an outlined virtual-function set image: the set's name and whether it is the
    /// dummy (empty bodies) version.
    pub fn virtual_functions_set(&self) -> Option<(&'a str, bool)> {
        let set = self.property_set(sets::VIRTUAL_FUNCTIONS)?;
        let Some(PropertyValueView::String(name)) = set.get("virtual-functions-set") else {
            return None;
        };
        Some((name, matches!(set.get("dummy-image"), Some(PropertyValueView::U32(1)))))
    }

    /// The virtual-function sets the image's kernels use.
    pub fn uses_virtual_functions_sets(&self) -> impl Iterator<Item = &'a str> {
        let list = match self
            .property_set(sets::VIRTUAL_FUNCTIONS)
            .and_then(|s| s.get("uses-virtual-functions-set"))
        {
            Some(PropertyValueView::String(list)) => list,
            _ => "",
        };
        list.split(',').filter(|s| !s.is_empty())
    }

    /// The image's reduced call graph (`SYCL/call graph`): each node with its callees.
    pub fn call_graph(&self) -> impl Iterator<Item = (&'a str, impl Iterator<Item = &'a str>)> {
        let nodes =
            self.property_set(sets::CALL_GRAPH).into_iter().flat_map(|set| set.properties());
        nodes.map(|(node, value)| {
            let callees = match value {
                PropertyValueView::String(list) => list,
                _ => "",
            };
            (node, crate::call_graph_callees(callees))
        })
    }

    /// Kernel `kernel`'s parameters (`SYCL/kernel arguments`), as
    /// [`Image::kernel_params`] reads them.
    pub fn kernel_params(
        &self,
        kernel: &str,
    ) -> Option<Result<Vec<KernelParam>, KernelParamsError>> {
        let value = self.property_set(sets::KERNEL_ARGUMENTS)?.get(kernel)?;
        Some(match value {
            PropertyValueView::String(value) => crate::parse_kernel_params(value),
            _ => Err(KernelParamsError::NotAString { kernel: kernel.to_string() }),
        })
    }

    /// The image with every field copied out.
    pub fn to_image(&self) -> Image {
        Image {
            format: self.format,
            target: self.target.to_string(),
            kernels: self.kernels().map(str::to_string).collect(),
            property_sets: self.property_sets().map(|set| set.to_property_set()).collect(),
            data: self.data.to_vec(),
        }
    }
}

/// A property set, read in place.
#[derive(Debug, Clone, Copy)]
pub struct PropertySetView<'a> {
    /// The set's name (`SYCL/…`; [`crate::sets`] lists those this toolkit reads and writes).
    pub name: &'a str,
    properties: List<'a>,
}

impl<'a> PropertySetView<'a> {
    /// Each property's name and value, in the order they were written.
    pub fn properties(&self) -> impl Iterator<Item = (&'a str, PropertyValueView<'a>)> {
        self.properties.iter(read_property)
    }

    /// The names of the properties (for the symbol sets, the symbols).
    pub fn names(&self) -> impl Iterator<Item = &'a str> {
        self.properties().map(|(name, _)| name)
    }

    /// [`PropertySetView::names`] as bytes, not checked again (see [`ImageView::kernel_bytes`]).
    pub fn name_bytes(&self) -> impl Iterator<Item = &'a [u8]> {
        self.properties.iter(|d| {
            let name = d.bytes()?;
            skip_value(d)?;
            Ok(name)
        })
    }

    /// The value of the first property called `name`, if the set has one.
    pub fn get(&self, name: &str) -> Option<PropertyValueView<'a>> {
        self.properties().find(|(n, _)| *n == name).map(|(_, value)| value)
    }

    /// The set with every name and value copied out.
    pub fn to_property_set(&self) -> PropertySet {
        let properties =
            self.properties().map(|(name, value)| Property::new(name, value.to_value())).collect();
        PropertySet { name: self.name.to_string(), properties }
    }
}

/// A property value, read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropertyValueView<'a> {
    /// An unsigned 32-bit integer ([`PropertyValue::U32`]).
    U32(u32),
    /// A byte array ([`PropertyValue::Bytes`]), borrowed from the payload.
    Bytes(&'a [u8]),
    /// UTF-8 text ([`PropertyValue::String`]), borrowed from the payload.
    String(&'a str),
}

impl PropertyValueView<'_> {
    /// The value copied out.
    pub fn to_value(self) -> PropertyValue {
        match self {
            PropertyValueView::U32(v) => PropertyValue::U32(v),
            PropertyValueView::Bytes(v) => PropertyValue::Bytes(v.to_vec()),
            PropertyValueView::String(v) => PropertyValue::String(v.to_string()),
        }
    }
}

/// Steps over a property of a checked payload.
fn skip_property(d: &mut Decoder<'_>) -> Result<(), DecodeError> {
    d.bytes()?;
    skip_value(d)
}

fn skip_value(d: &mut Decoder<'_>) -> Result<(), DecodeError> {
    match d.u32()? {
        TYPE_UINT32 => d.u32().map(drop),
        TYPE_BYTE_ARRAY | TYPE_STRING => d.bytes().map(drop),
        other => Err(DecodeError::Invalid(format!("unknown property type {other}"))),
    }
}

fn read_property<'a>(d: &mut Decoder<'a>) -> Result<(&'a str, PropertyValueView<'a>), DecodeError> {
    let name = d.str_ref()?;
    let value = match d.u32()? {
        TYPE_UINT32 => PropertyValueView::U32(d.u32()?),
        TYPE_BYTE_ARRAY => PropertyValueView::Bytes(d.bytes()?),
        TYPE_STRING => PropertyValueView::String(d.str_ref()?),
        other => {
            return Err(DecodeError::Invalid(format!("property `{name}` has unknown type {other}")))
        }
    };
    Ok((name, value))
}
