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
    /// `nvidia_gpu_sm_XX`: native code for NVIDIA GPUs of one architecture, a relocatable SASS
    /// object (an ELF `ET_REL` cubin) made at link time by `ptxas -c` from the image's PTX;
    /// linked at run time by the CUDA driver's linker without JIT. Runs on GPUs of the same
    /// major compute capability and at least its minor ([`CudaArch::runs_on`]).
    NvidiaGpu(CudaArch),
    /// `nvidia_gpu_sm_XX+inlined`: the native form of a [`Target::Ptx64Inlined`] twin, made
    /// beside an [`Target::NvidiaGpu`] image as the PTX twin is beside a PTX image.
    NvidiaGpuInlined(CudaArch),
}

/// An NVIDIA GPU architecture that native images are made for: its SASS runs on GPUs whose
/// compute capability has the same major version and at least its minor version, as CUDA's
/// binary compatibility rule says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CudaArch {
    /// Volta: V100.
    Sm70,
    /// Turing: T4, the RTX 20 series.
    Sm75,
    /// Ampere: A100, A30.
    Sm80,
    /// Ampere: the RTX 30 series, A10, A40.
    Sm86,
    /// Ada: L4, L40, the RTX 40 series.
    Sm89,
    /// Hopper: H100, H200.
    Sm90,
    /// Blackwell: B200.
    Sm100,
    /// Blackwell: the RTX 50 series, RTX PRO 6000.
    Sm120,
}

/// Whether SASS for the architecture numbered `arch` (90 for sm_90, as a cubin's header says)
/// runs on a GPU of compute capability `(major, minor)`: the same major version, and at least
/// the minor version (CUDA's rule for SASS).
pub const fn sass_runs_on(arch: u32, (major, minor): (u32, u32)) -> bool {
    arch / 10 == major && arch % 10 <= minor
}

impl CudaArch {
    /// Every architecture, oldest first.
    pub const ALL: [CudaArch; 8] = [
        CudaArch::Sm70,
        CudaArch::Sm75,
        CudaArch::Sm80,
        CudaArch::Sm86,
        CudaArch::Sm89,
        CudaArch::Sm90,
        CudaArch::Sm100,
        CudaArch::Sm120,
    ];

    /// The compute capability the architecture's code is made for: `(9, 0)` for sm_90.
    pub const fn compute_capability(self) -> (u32, u32) {
        match self {
            CudaArch::Sm70 => (7, 0),
            CudaArch::Sm75 => (7, 5),
            CudaArch::Sm80 => (8, 0),
            CudaArch::Sm86 => (8, 6),
            CudaArch::Sm89 => (8, 9),
            CudaArch::Sm90 => (9, 0),
            CudaArch::Sm100 => (10, 0),
            CudaArch::Sm120 => (12, 0),
        }
    }

    /// The architecture as `ptxas -arch` and a cubin's header name it: `sm_90`.
    pub const fn name(self) -> &'static str {
        match self {
            CudaArch::Sm70 => "sm_70",
            CudaArch::Sm75 => "sm_75",
            CudaArch::Sm80 => "sm_80",
            CudaArch::Sm86 => "sm_86",
            CudaArch::Sm89 => "sm_89",
            CudaArch::Sm90 => "sm_90",
            CudaArch::Sm100 => "sm_100",
            CudaArch::Sm120 => "sm_120",
        }
    }

    /// The number a cubin's ELF header holds for the architecture: 90 for sm_90.
    pub const fn number(self) -> u32 {
        let (major, minor) = self.compute_capability();
        major * 10 + minor
    }

    /// Whether the architecture's code runs on a GPU of compute capability `cc` (see
    /// [`sass_runs_on`]).
    pub const fn runs_on(self, cc: (u32, u32)) -> bool {
        sass_runs_on(self.number(), cc)
    }

    /// The architecture whose code a GPU of compute capability `cc` runs best: the newest that
    /// runs on it.
    pub fn best_for(cc: (u32, u32)) -> Option<CudaArch> {
        CudaArch::ALL.into_iter().rev().find(|a| a.runs_on(cc))
    }
}

impl Target {
    /// Every target, in the order messages list them.
    pub const ALL: &'static [Target] = &{
        let mut all = [Target::Spir64; 5 + 2 * CudaArch::ALL.len()];
        let fixed = [
            Target::Spir64,
            Target::IntelCpuX86_64,
            Target::PoclCpu,
            Target::Ptx64,
            Target::Ptx64Inlined,
        ];
        let mut i = 0;
        while i < fixed.len() {
            all[i] = fixed[i];
            i += 1;
        }
        let mut a = 0;
        while a < CudaArch::ALL.len() {
            all[5 + 2 * a] = Target::NvidiaGpu(CudaArch::ALL[a]);
            all[6 + 2 * a] = Target::NvidiaGpuInlined(CudaArch::ALL[a]);
            a += 1;
        }
        all
    };

    /// The targets a build may ask for (`sycl_build::Build::targets`, `SYCL_LD_TARGETS`):
    /// every one but the twins ([`Target::Ptx64Inlined`], [`Target::NvidiaGpuInlined`]),
    /// which `sycl-ld` makes on its own.
    pub const BUILDABLE: &'static [Target] = &{
        let mut out = [Target::Spir64; 4 + CudaArch::ALL.len()];
        out[1] = Target::IntelCpuX86_64;
        out[2] = Target::PoclCpu;
        out[3] = Target::Ptx64;
        let mut a = 0;
        while a < CudaArch::ALL.len() {
            out[4 + a] = Target::NvidiaGpu(CudaArch::ALL[a]);
            a += 1;
        }
        out
    };

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
            Target::NvidiaGpu(arch) => match arch {
                CudaArch::Sm70 => "nvidia_gpu_sm_70",
                CudaArch::Sm75 => "nvidia_gpu_sm_75",
                CudaArch::Sm80 => "nvidia_gpu_sm_80",
                CudaArch::Sm86 => "nvidia_gpu_sm_86",
                CudaArch::Sm89 => "nvidia_gpu_sm_89",
                CudaArch::Sm90 => "nvidia_gpu_sm_90",
                CudaArch::Sm100 => "nvidia_gpu_sm_100",
                CudaArch::Sm120 => "nvidia_gpu_sm_120",
            },
            Target::NvidiaGpuInlined(arch) => match arch {
                CudaArch::Sm70 => "nvidia_gpu_sm_70+inlined",
                CudaArch::Sm75 => "nvidia_gpu_sm_75+inlined",
                CudaArch::Sm80 => "nvidia_gpu_sm_80+inlined",
                CudaArch::Sm86 => "nvidia_gpu_sm_86+inlined",
                CudaArch::Sm89 => "nvidia_gpu_sm_89+inlined",
                CudaArch::Sm90 => "nvidia_gpu_sm_90+inlined",
                CudaArch::Sm100 => "nvidia_gpu_sm_100+inlined",
                CudaArch::Sm120 => "nvidia_gpu_sm_120+inlined",
            },
        }
    }

    /// The twin target of a target whose images may get twins with their imports compiled in
    /// (`ptx64` → `ptx64+inlined`, `nvidia_gpu_sm_90` → `nvidia_gpu_sm_90+inlined`).
    pub const fn inlined(self) -> Option<Target> {
        match self {
            Target::Ptx64 => Some(Target::Ptx64Inlined),
            Target::NvidiaGpu(arch) => Some(Target::NvidiaGpuInlined(arch)),
            _ => None,
        }
    }

    /// The architecture of a native NVIDIA target (or its twin).
    pub const fn cuda_arch(self) -> Option<CudaArch> {
        match self {
            Target::NvidiaGpu(arch) | Target::NvidiaGpuInlined(arch) => Some(arch),
            _ => None,
        }
    }

    /// The target called `name`, if this build knows it.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.iter().copied().find(|t| t.name() == name)
    }

    /// The target called `name`, if a build may ask for it ([`Target::BUILDABLE`]); the error
    /// lists those that it may ask for.
    pub fn buildable(name: &str) -> Result<Target, UnknownTarget> {
        Target::from_name(name)
            .filter(|t| Target::BUILDABLE.contains(t))
            .ok_or_else(|| UnknownTarget { name: name.to_string(), known: Target::BUILDABLE })
    }

    /// The form of the target's images.
    pub const fn format(self) -> ImageFormat {
        match self {
            Target::Spir64 => ImageFormat::SpirV,
            Target::IntelCpuX86_64 | Target::NvidiaGpu(_) | Target::NvidiaGpuInlined(_) => {
                ImageFormat::Native
            }
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
            .ok_or_else(|| UnknownTarget { name: name.to_string(), known: Target::ALL })
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
        for &target in Target::ALL {
            assert_eq!(Target::from_name(target.name()), Some(target));
            assert_eq!(target.name().parse::<Target>(), Ok(target));
            assert_eq!(target.to_string(), target.name());
        }
        let names: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(
            names[..7],
            [
                "spir64",
                "intel_cpu_x86_64",
                "pocl_cpu",
                "ptx64",
                "ptx64+inlined",
                "nvidia_gpu_sm_70",
                "nvidia_gpu_sm_70+inlined"
            ]
        );
        assert_eq!(names.len(), 5 + 2 * CudaArch::ALL.len());
        assert_eq!(Target::from_name("nvidia_gpu_sm_90"), Some(Target::NvidiaGpu(CudaArch::Sm90)));
        for arch in CudaArch::ALL {
            let target = Target::NvidiaGpu(arch);
            assert_eq!(target.name(), format!("nvidia_gpu_{}", arch.name()));
            assert_eq!(target.inlined().unwrap().name(), format!("{}+inlined", target.name()));
            assert_eq!(target.cuda_arch(), Some(arch));
        }
        let image_target: String = "ptx64".into();
        assert!(image_target == Target::Ptx64 && *"ptx64" == Target::Ptx64);
        assert!("ptx64" != Target::Ptx64Inlined);
    }

    #[test]
    fn unknown_names_are_errors_that_list_the_known_ones() {
        assert!("sm_90".parse::<Target>().unwrap_err().to_string().starts_with(
            "unknown target `sm_90` (known: spir64, intel_cpu_x86_64, pocl_cpu, ptx64, ptx64+inlined, nvidia_gpu_sm_70, "
        ));
        assert_eq!(Target::buildable("pocl_cpu"), Ok(Target::PoclCpu));
        assert_eq!(Target::buildable("nvidia_gpu_sm_86"), Ok(Target::NvidiaGpu(CudaArch::Sm86)));
        for name in ["ptx64+inlined", "nvidia_gpu_sm_90+inlined", "SPIR64", ""] {
            assert_eq!(
                Target::buildable(name).unwrap_err().to_string(),
                format!(
                    "unknown target `{name}` (known: spir64, intel_cpu_x86_64, pocl_cpu, ptx64, \
                     nvidia_gpu_sm_70, nvidia_gpu_sm_75, nvidia_gpu_sm_80, nvidia_gpu_sm_86, \
                     nvidia_gpu_sm_89, nvidia_gpu_sm_90, nvidia_gpu_sm_100, nvidia_gpu_sm_120)"
                )
            );
        }
    }

    #[test]
    fn each_target_has_its_image_form() {
        let forms: Vec<(Target, ImageFormat, bool)> =
            Target::ALL.iter().map(|t| (*t, t.format(), t.is_ahead_of_time())).collect();
        assert_eq!(
            forms[..7],
            [
                (Target::Spir64, ImageFormat::SpirV, false),
                (Target::IntelCpuX86_64, ImageFormat::Native, true),
                (Target::PoclCpu, ImageFormat::SpirBitcode, true),
                (Target::Ptx64, ImageFormat::Ptx, true),
                (Target::Ptx64Inlined, ImageFormat::Ptx, true),
                (Target::NvidiaGpu(CudaArch::Sm70), ImageFormat::Native, true),
                (Target::NvidiaGpuInlined(CudaArch::Sm70), ImageFormat::Native, true),
            ]
        );
        assert_eq!(Target::DEFAULT, Target::Spir64);
    }

    #[test]
    fn native_code_runs_on_its_major_version_from_its_minor_on() {
        assert!(CudaArch::Sm80.runs_on((8, 6)) && CudaArch::Sm86.runs_on((8, 9)));
        assert!(!CudaArch::Sm86.runs_on((8, 0)) && !CudaArch::Sm80.runs_on((9, 0)));
        assert!(!CudaArch::Sm90.runs_on((10, 0)));
        assert!(sass_runs_on(120, (12, 1)) && !sass_runs_on(120, (9, 0)));
        assert_eq!(CudaArch::best_for((9, 0)), Some(CudaArch::Sm90));
        assert_eq!(CudaArch::best_for((8, 7)), Some(CudaArch::Sm86));
        assert_eq!(CudaArch::best_for((12, 1)), Some(CudaArch::Sm120));
        assert_eq!(CudaArch::best_for((6, 1)), None);
        assert_eq!(CudaArch::Sm100.number(), 100);
    }
}
