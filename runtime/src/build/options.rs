//! What a build is keyed by besides its images: build options (raw OpenCL flags) and the
//! values of named specialization constants.

use std::collections::BTreeMap;

use crate::backend::SpecValue;
use crate::registry::{ImageId, Registry};

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
    pub(super) fn for_image(&self, image: &sycl_format::Image) -> Vec<SpecValue<'_>> {
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
