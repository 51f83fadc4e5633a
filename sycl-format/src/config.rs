//! The device configuration file (DPC++'s optional kernel features design): one entry per target with the aspects it has
//! and the sub-group sizes it supports. TOML here instead of DPC++'s YAML; aspects may be
//! given by name or by number, as DPC++ allows. The default file ships with `sycl-build`
//! (`sycl-build/device-config.toml`); a user file replaces it.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use crate::aspects::{aspect_number, target_aspect};

/// The default configuration, filled from what the devices we run on report.
pub const DEFAULT_DEVICE_CONFIG: &str = include_str!("../device-config.toml");

/// A device configuration: what each configured target has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Each entry by its name: the [`Target`](crate::Target)s images are made for, and others
    /// that only fixed targets name.
    pub targets: BTreeMap<String, TargetConfig>,
}

/// One entry of a device configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetConfig {
    /// Aspect numbers, including the target's own `target_*` aspect.
    pub aspects: Vec<u32>,
    /// The sub-group sizes the target supports, ascending.
    pub sub_group_sizes: Vec<u32>,
    /// The aspect that stands for this target in `fixed_target` properties.
    pub target_aspect: Option<u32>,
}

impl TargetConfig {
    /// Whether the target has aspect number `aspect`.
    pub fn has_aspect(&self, aspect: u32) -> bool {
        self.aspects.contains(&aspect)
    }
}

/// Why a device configuration file's text is not one. Each names the file (`origin`, as given
/// to [`DeviceConfig::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The text is not TOML, or not of the configuration's shape (an unknown field, a value of
    /// the wrong type). The message includes the TOML error's, which [`source`] returns for
    /// its details (where in the text, what was expected).
    ///
    /// [`source`]: std::error::Error::source
    Toml {
        /// The file, as the caller names it.
        origin: String,
        /// What the TOML reader found.
        source: toml::de::Error,
    },
    /// An entry names an aspect by a name no aspect has.
    UnknownAspect {
        /// The file, as the caller names it.
        origin: String,
        /// The entry's name.
        target: String,
        /// The name as written.
        aspect: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Toml { origin, source } => write!(f, "{origin}: {source}"),
            ConfigError::UnknownAspect { origin, target, aspect } => {
                write!(f, "{origin}: target `{target}`: unknown aspect `{aspect}`")
            }
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Toml { source, .. } => Some(source),
            ConfigError::UnknownAspect { .. } => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AspectRef {
    Number(u32),
    Name(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    #[serde(default)]
    description: Option<String>,
    aspects: Vec<AspectRef>,
    #[serde(rename = "sub-group-sizes", default)]
    sub_group_sizes: Vec<u32>,
    #[serde(rename = "target-aspect", default)]
    target_aspect: Option<u32>,
}

impl DeviceConfig {
    /// Parses a configuration file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<DeviceConfig, ConfigError> {
        let raw: BTreeMap<String, RawTarget> = toml::from_str(text)
            .map_err(|source| ConfigError::Toml { origin: origin.to_string(), source })?;
        let mut targets = BTreeMap::new();
        for (name, raw) in raw {
            let _ = raw.description;
            let mut aspects = Vec::new();
            for a in raw.aspects {
                aspects.push(match a {
                    AspectRef::Number(n) => n,
                    AspectRef::Name(s) => {
                        aspect_number(&s).ok_or_else(|| ConfigError::UnknownAspect {
                            origin: origin.to_string(),
                            target: name.clone(),
                            aspect: s,
                        })?
                    }
                });
            }
            let target_aspect = raw.target_aspect.or_else(|| target_aspect(&name));
            if let Some(t) = target_aspect {
                if !aspects.contains(&t) {
                    aspects.push(t);
                }
            }
            aspects.sort_unstable();
            aspects.dedup();
            let mut sub_group_sizes = raw.sub_group_sizes;
            sub_group_sizes.sort_unstable();
            targets.insert(name, TargetConfig { aspects, sub_group_sizes, target_aspect });
        }
        Ok(DeviceConfig { targets })
    }

    /// The default configuration ([`DEFAULT_DEVICE_CONFIG`]).
    pub fn default_config() -> DeviceConfig {
        DeviceConfig::parse(DEFAULT_DEVICE_CONFIG, "the default device configuration")
            .expect("the default device configuration parses")
    }

    /// The entry of target `name`: a [`Target`](crate::Target), or any name the file has an
    /// entry for (a fixed target such as `nvidia_gpu_sm_90` need not be a target images are
    /// made for).
    pub fn target(&self, name: impl AsRef<str>) -> Option<&TargetConfig> {
        self.targets.get(name.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Target;

    #[test]
    fn default_config_has_our_devices() {
        let config = DeviceConfig::default_config();
        let intel = config.target(Target::IntelCpuX86_64).unwrap();
        assert!(intel.has_aspect(aspect_number("fp16").unwrap()));
        assert_eq!(intel.sub_group_sizes, [4, 8, 16, 32, 64]);
        let pocl = config.target(Target::PoclCpu).unwrap();
        assert!(!pocl.has_aspect(aspect_number("fp16").unwrap()));
        assert!(pocl.has_aspect(1002), "an entry has its own target aspect");
        assert!(pocl.sub_group_sizes.is_empty());
        for target in Target::BUILDABLE.iter().filter(|t| t.is_ahead_of_time()) {
            assert!(config.target(target).is_some(), "{target} has an entry");
        }
        let ptx = config.target(Target::Ptx64).unwrap();
        for (aspect, has) in [
            ("gpu", true),
            ("fp64", true),
            ("atomic64", true),
            ("function_pointers", true),
            ("fp16", true),
            ("image", false),
        ] {
            assert_eq!(ptx.has_aspect(aspect_number(aspect).unwrap()), has, "ptx64 {aspect}");
        }
        assert_eq!(ptx.target_aspect, aspect_number("target_ptx64"));
        assert_eq!(ptx.sub_group_sizes, [32], "warps");
    }

    #[test]
    fn numbers_and_names_mix_and_errors_name_the_file() {
        let c = DeviceConfig::parse(
            "[x]\naspects = [6, \"fp16\"]\nsub-group-sizes = [16, 8]\n",
            "f.toml",
        )
        .unwrap();
        assert_eq!(c.target("x").unwrap().aspects, [5, 6]);
        assert_eq!(c.target("x").unwrap().sub_group_sizes, [8, 16]);
        let err = DeviceConfig::parse("[x]\naspects = [\"warp_drive\"]\n", "f.toml").unwrap_err();
        assert_eq!(err.to_string(), "f.toml: target `x`: unknown aspect `warp_drive`");
        assert!(std::error::Error::source(&err).is_none());
        let err = DeviceConfig::parse("[x]\nfrobnicate = 1\n", "f.toml").unwrap_err();
        assert!(err.to_string().starts_with("f.toml: "), "{err}");
        let toml = std::error::Error::source(&err).expect("the TOML error");
        assert_eq!(err.to_string(), format!("f.toml: {toml}"));
    }
}
