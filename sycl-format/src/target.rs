//! The targets device images are made for, as one list: each target's name, as build scripts,
//! `SYCL_LD_TARGETS`, the device configuration and an image's `target` field spell it, and the
//! form its images take.
//!
//! On the wire a target stays a string ([`Image::target`](crate::Image::target),
//! [`DeviceObject::targets`](crate::DeviceObject::targets)), so that a binary naming a target
//! this build does not know (one made by a newer `sycl-ld`) still decodes: the decoders never
//! parse a target name, and code that acts on a target parses it where it needs to.

use std::fmt;
use std::str::FromStr;

use crate::ImageFormat;

/// A target device images are made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// `spir64`: SPIR-V, compiled by the device's driver at run time. What a build makes when
    /// it names no target.
    Spir64,
    /// `intel_cpu_x86_64`: the Intel CPU OpenCL runtime's compiled-object program binaries,
    /// made at link time.
    IntelCpuX86_64,
    /// `pocl_cpu`: LLVM SPIR bitcode, which PoCL builds at run time; made at link time.
    PoclCpu,
    /// `ptx64`: PTX for NVIDIA GPUs through the CUDA driver, made at link time with LLVM 16
    /// and libclc.
    Ptx64,
    /// `ptx64+inlined`: a PTX image made with the functions it imports from shared libraries
    /// on its link line compiled in (see [`sets::INLINED_IMPORTS`](crate::sets::INLINED_IMPORTS)).
    /// No build asks for it and no device lists it among its image forms: `sycl-ld` makes it
    /// beside a [`Target::Ptx64`] image, and only the runtime's check that resolution picked
    /// those very functions uses it.
    Ptx64Inlined,
}

impl Target {
    /// Every target, in the order messages list them.
    pub const ALL: [Target; 5] = [
        Target::Spir64,
        Target::IntelCpuX86_64,
        Target::PoclCpu,
        Target::Ptx64,
        Target::Ptx64Inlined,
    ];

    /// The targets a build may ask for (`sycl_build::Build::targets`, `SYCL_LD_TARGETS`):
    /// every one but [`Target::Ptx64Inlined`], which `sycl-ld` makes on its own.
    pub const BUILDABLE: [Target; 4] =
        [Target::Spir64, Target::IntelCpuX86_64, Target::PoclCpu, Target::Ptx64];

    /// What a build makes when it names no target.
    pub const DEFAULT: Target = Target::Spir64;

    /// The target's name, as build scripts, the device configuration and images spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Target::Spir64 => "spir64",
            Target::IntelCpuX86_64 => "intel_cpu_x86_64",
            Target::PoclCpu => "pocl_cpu",
            Target::Ptx64 => "ptx64",
            Target::Ptx64Inlined => "ptx64+inlined",
        }
    }

    /// The target called `name`, if this build knows it.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The target called `name`, if a build may ask for it ([`Target::BUILDABLE`]); the error
    /// lists those that it may ask for.
    pub fn buildable(name: &str) -> Result<Target, UnknownTarget> {
        Target::from_name(name)
            .filter(|t| Target::BUILDABLE.contains(t))
            .ok_or_else(|| UnknownTarget { name: name.to_string(), known: &Target::BUILDABLE })
    }

    /// The form of the target's images.
    pub const fn format(self) -> ImageFormat {
        match self {
            Target::Spir64 => ImageFormat::SpirV,
            Target::IntelCpuX86_64 => ImageFormat::Native,
            Target::PoclCpu => ImageFormat::SpirBitcode,
            Target::Ptx64 | Target::Ptx64Inlined => ImageFormat::Ptx,
        }
    }

    /// Whether `sycl-ld` makes the target's images at link time, for the images its entry in
    /// the device configuration accepts: every target but [`Target::Spir64`], whose images are
    /// the post-linked SPIR-V itself and run wherever a driver takes SPIR-V.
    pub const fn is_ahead_of_time(self) -> bool {
        !matches!(self, Target::Spir64)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Target {
    type Err = UnknownTarget;

    /// Any target of [`Target::ALL`]; the error lists them.
    fn from_str(name: &str) -> Result<Target, UnknownTarget> {
        Target::from_name(name)
            .ok_or_else(|| UnknownTarget { name: name.to_string(), known: &Target::ALL })
    }
}

/// The name, so that a target goes wherever a target name does
/// (`sycl_build::Build::targets([Target::Spir64, Target::Ptx64])`).
impl AsRef<str> for Target {
    fn as_ref(&self) -> &str {
        self.name()
    }
}

/// A target name as an image or a device object holds it names `target`.
impl PartialEq<Target> for str {
    fn eq(&self, target: &Target) -> bool {
        self == target.name()
    }
}

/// A target name as an image or a device object holds it names `target`.
impl PartialEq<Target> for &str {
    fn eq(&self, target: &Target) -> bool {
        *self == target.name()
    }
}

/// A target name as an image or a device object holds it names `target`.
impl PartialEq<Target> for String {
    fn eq(&self, target: &Target) -> bool {
        self == target.name()
    }
}

/// A target name this build does not know (or that a build may not ask for), with those it
/// could have been.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTarget {
    /// The name as given.
    pub name: String,
    /// The targets the name was looked for among.
    pub known: &'static [Target],
}

impl fmt::Display for UnknownTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = self.known.iter().map(|t| t.name()).collect();
        write!(f, "unknown target `{}` (known: {})", self.name, known.join(", "))
    }
}

impl std::error::Error for UnknownTarget {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_the_wire_spelling() {
        for target in Target::ALL {
            assert_eq!(Target::from_name(target.name()), Some(target));
            assert_eq!(target.name().parse::<Target>(), Ok(target));
            assert_eq!(target.to_string(), target.name());
        }
        let names: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["spir64", "intel_cpu_x86_64", "pocl_cpu", "ptx64", "ptx64+inlined"]);
        let image_target: String = "ptx64".into();
        assert!(image_target == Target::Ptx64 && *"ptx64" == Target::Ptx64);
        assert!("ptx64" != Target::Ptx64Inlined);
    }

    #[test]
    fn unknown_names_are_errors_that_list_the_known_ones() {
        assert_eq!(
            "sm_90".parse::<Target>().unwrap_err().to_string(),
            "unknown target `sm_90` (known: spir64, intel_cpu_x86_64, pocl_cpu, ptx64, ptx64+inlined)"
        );
        assert_eq!(Target::buildable("pocl_cpu"), Ok(Target::PoclCpu));
        for name in ["ptx64+inlined", "SPIR64", ""] {
            assert_eq!(
                Target::buildable(name).unwrap_err().to_string(),
                format!(
                    "unknown target `{name}` (known: spir64, intel_cpu_x86_64, pocl_cpu, ptx64)"
                )
            );
        }
    }

    #[test]
    fn each_target_has_its_image_form() {
        let forms: Vec<(Target, ImageFormat, bool)> =
            Target::ALL.iter().map(|t| (*t, t.format(), t.is_ahead_of_time())).collect();
        assert_eq!(
            forms,
            [
                (Target::Spir64, ImageFormat::SpirV, false),
                (Target::IntelCpuX86_64, ImageFormat::Native, true),
                (Target::PoclCpu, ImageFormat::SpirBitcode, true),
                (Target::Ptx64, ImageFormat::Ptx, true),
                (Target::Ptx64Inlined, ImageFormat::Ptx, true),
            ]
        );
        assert_eq!(Target::DEFAULT, Target::Spir64);
    }
}
