//! What a build is keyed by besides its images: build options (raw OpenCL flags) and the
//! values of named specialization constants.

use std::collections::BTreeMap;

use crate::backend::SpecValue;
use crate::registry::{ImageId, Registry};
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
    /// These values for a build of `images` (`whose` names them in an error: "kernel `k`",
    /// "the bundle"), checked: each names a constant one of the images declares (unless
    /// `whole` is false: images compiled apart from the libraries they import, which may
    /// declare it), with a value of the size of its default. A misspelt name would otherwise
    /// leave the default in place, and a value of another type reach the driver. Those equal
    /// to their constant's default are left out: a default set explicitly is the default, so
    /// it shares the program (and the cache entries) built without it.
    pub(crate) fn checked(
        &self,
        registry: &Registry,
        images: &[ImageId],
        whose: &str,
        whole: bool,
    ) -> Result<SpecValues, Error> {
        // Each image's constants, by name, with their defaults.
        let declared = || {
            images.iter().filter_map(|&id| {
                registry
                    .image(id)
                    .property_set(sycl_format::sets::SPECIALIZATION_CONSTANTS_DEFAULTS)
            })
        };
        let default_of = |name: &str| {
            declared().find_map(|set| match set.get(name)? {
                sycl_format::PropertyValue::Bytes(d) => Some(d.as_slice()),
                _ => None,
            })
        };
        let mut kept = BTreeMap::new();
        for (name, value) in &self.0 {
            match default_of(name) {
                None if !whole => {
                    kept.insert(name.clone(), value.clone());
                }
                None => {
                    let declared: Vec<String> = declared()
                        .flat_map(|set| set.properties.iter().map(|p| format!("`{}`", p.name)))
                        .collect();
                    return Err(Error::InvalidArgument(format!(
                        "specialization constant `{name}`: the images of {whose} declare no \
                         constant of that name (they declare {}); the generated \
                         kernels::spec constants name each one as the device source does",
                        if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
                    )));
                }
                Some(default) if default.len() != value.len() => {
                    return Err(Error::InvalidArgument(format!(
                        "specialization constant `{name}` of {whose} holds {} bytes; got a \
                         value of {} bytes: give it a value of its type",
                        default.len(),
                        value.len()
                    )));
                }
                Some(default) if default == value.as_slice() => {}
                Some(_) => {
                    kept.insert(name.clone(), value.clone());
                }
            }
        }
        Ok(SpecValues(kept))
    }

    /// The values of the constants `image` has.
    pub(super) fn for_image(&self, image: sycl_format::ImageView<'_>) -> Vec<SpecValue<'_>> {
        if self.0.is_empty() {
            return vec![];
        }
        let Some(ids) = image.property_set(sycl_format::sets::SPECIALIZATION_CONSTANTS) else {
            return vec![];
        };
        self.0
            .iter()
            .filter_map(|(name, bytes)| match ids.get(name) {
                Some(sycl_format::PropertyValueView::U32(id)) => {
                    Some(SpecValue { name, id, bytes })
                }
                _ => None,
            })
            .collect()
    }
}
