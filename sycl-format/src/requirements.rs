//! The `SYCL/device requirements` property set (DPC++'s optional kernel features design): what a device must have to run an
//! image, and the aspect filter's rule for whether a configured target can.

use std::fmt;

use crate::aspects::{decode_u32s, encode_u32s};
use crate::{sets, Property, PropertySet, PropertyValue, TargetConfig};

/// The property listing the aspects every device must have ([`crate::aspects`] numbers).
pub const ASPECT: &str = "aspect";
/// The property listing the sub-group sizes a device must support.
pub const REQD_SUB_GROUP_SIZE: &str = "reqd_sub_group_size";
/// The property listing required work-group sizes: per entry, its dimension count (1 to 3),
/// then that many sizes.
pub const REQD_WORK_GROUP_SIZE: &str = "reqd_work_group_size";
/// The property listing the aspects of the targets the image is fixed to; a device needs
/// one of them.
pub const FIXED_TARGET: &str = "fixed_target";

/// Decoded device requirements; every list is a byte array of `u32`s in the property set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceRequirements {
    /// Aspects the device must have, every one ([`ASPECT`]).
    pub aspects: Vec<u32>,
    /// Sub-group sizes the device must support, every one ([`REQD_SUB_GROUP_SIZE`]).
    pub reqd_sub_group_sizes: Vec<u32>,
    /// Each entry: the sizes of one required work-group size, one to three dimensions.
    pub reqd_work_group_sizes: Vec<Vec<u32>>,
    /// Aspects of the targets the image is fixed to (`Some(empty)`: fixed to none).
    pub fixed_target: Option<Vec<u32>>,
}

impl DeviceRequirements {
    /// The property set, or `None` when there is nothing to require.
    pub fn to_property_set(&self) -> Option<PropertySet> {
        let mut properties = Vec::new();
        let mut add = |name: &str, values: &[u32]| {
            properties.push(Property::new(name, PropertyValue::Bytes(encode_u32s(values))));
        };
        if !self.aspects.is_empty() {
            add(ASPECT, &self.aspects);
        }
        if !self.reqd_sub_group_sizes.is_empty() {
            add(REQD_SUB_GROUP_SIZE, &self.reqd_sub_group_sizes);
        }
        if !self.reqd_work_group_sizes.is_empty() {
            // <dim_count> <dim0> ... per entry, as DPC++ lays it out.
            let flat: Vec<u32> = self
                .reqd_work_group_sizes
                .iter()
                .flat_map(|dims| std::iter::once(dims.len() as u32).chain(dims.iter().copied()))
                .collect();
            add(REQD_WORK_GROUP_SIZE, &flat);
        }
        if let Some(fixed) = &self.fixed_target {
            add(FIXED_TARGET, fixed);
        }
        (!properties.is_empty())
            .then(|| PropertySet { name: sets::DEVICE_REQUIREMENTS.to_string(), properties })
    }

    /// Reads the set back; malformed values are an error naming the property.
    pub fn from_property_set(set: &PropertySet) -> Result<DeviceRequirements, RequirementsError> {
        let mut out = DeviceRequirements::default();
        for p in &set.properties {
            let PropertyValue::Bytes(bytes) = &p.value else {
                return Err(RequirementsError::NotBytes { property: p.name.clone() });
            };
            let values = decode_u32s(bytes).ok_or_else(|| RequirementsError::NotWords {
                property: p.name.clone(),
                len: bytes.len(),
            })?;
            match p.name.as_str() {
                ASPECT => out.aspects = values,
                REQD_SUB_GROUP_SIZE => out.reqd_sub_group_sizes = values,
                REQD_WORK_GROUP_SIZE => {
                    let mut rest = values.as_slice();
                    while let Some((&n, tail)) = rest.split_first() {
                        let n = n as usize;
                        if !(1..=3).contains(&n) || tail.len() < n {
                            return Err(RequirementsError::Malformed { property: p.name.clone() });
                        }
                        out.reqd_work_group_sizes.push(tail[..n].to_vec());
                        rest = &tail[n..];
                    }
                }
                FIXED_TARGET => out.fixed_target = Some(values),
                _ => {} // a property from a newer writer: not a requirement this reader knows
            }
        }
        Ok(out)
    }

    /// DPC++'s aspect filter: whether target `entry` can run an image with these
    /// requirements (every aspect, every sub-group size, and one of the fixed targets).
    pub fn accepted_by(&self, entry: &TargetConfig) -> bool {
        self.aspects.iter().all(|a| entry.has_aspect(*a))
            && self.reqd_sub_group_sizes.iter().all(|s| entry.sub_group_sizes.contains(s))
            && self.fixed_target.as_ref().is_none_or(|f| f.iter().any(|a| entry.has_aspect(*a)))
    }
}

/// Why a `SYCL/device requirements` set cannot be read back: each names the property.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequirementsError {
    /// A value that is not a byte array.
    NotBytes {
        /// The property's name.
        property: String,
    },
    /// A byte array that is not a whole number of `u32`s.
    NotWords {
        /// The property's name.
        property: String,
        /// Its length in bytes.
        len: usize,
    },
    /// Required work-group sizes whose dimension counts do not add up.
    Malformed {
        /// The property's name.
        property: String,
    },
}

impl fmt::Display for RequirementsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequirementsError::NotBytes { property } => {
                write!(f, "property `{property}` is not a byte array")
            }
            RequirementsError::NotWords { property, len } => {
                write!(f, "property `{property}` has {len} bytes, not a multiple of 4")
            }
            RequirementsError::Malformed { property } => {
                write!(f, "property `{property}` is malformed")
            }
        }
    }
}

impl std::error::Error for RequirementsError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeviceConfig, Target};

    #[test]
    fn round_trip_and_layout() {
        let r = DeviceRequirements {
            aspects: vec![5],
            reqd_sub_group_sizes: vec![16],
            reqd_work_group_sizes: vec![vec![8, 1, 1]],
            fixed_target: Some(vec![1002]),
        };
        let set = r.to_property_set().unwrap();
        assert_eq!(
            set.get(REQD_WORK_GROUP_SIZE),
            Some(&PropertyValue::Bytes(encode_u32s(&[3, 8, 1, 1])))
        );
        assert_eq!(DeviceRequirements::from_property_set(&set).unwrap(), r);
        assert!(DeviceRequirements::default().to_property_set().is_none());
    }

    #[test]
    fn the_aspect_filter_follows_dpcpp() {
        let config = DeviceConfig::default_config();
        let (intel, pocl) = (
            config.target(Target::IntelCpuX86_64).unwrap(),
            config.target(Target::PoclCpu).unwrap(),
        );
        let fp16 = DeviceRequirements { aspects: vec![5], ..Default::default() };
        assert!(fp16.accepted_by(intel) && !fp16.accepted_by(pocl));
        let sg = DeviceRequirements { reqd_sub_group_sizes: vec![16], ..Default::default() };
        assert!(sg.accepted_by(intel) && !sg.accepted_by(pocl));
        let fixed = DeviceRequirements { fixed_target: Some(vec![1002]), ..Default::default() };
        assert!(!fixed.accepted_by(intel) && fixed.accepted_by(pocl));
        assert!(!DeviceRequirements { fixed_target: Some(vec![]), ..Default::default() }
            .accepted_by(pocl));
    }
}
