//! What a device can do, from its own queries: aspects (fp16, fp64, atomic64, image, …, and
//! the `target_*` aspect of the configured target it is), sub-group sizes, work-group limit,
//! whether it takes SPIR-V and links, whether it has fused multiply-add; which image forms it
//! prefers; and seed 003's check of an image's device requirements, with the seed's messages.

use std::collections::BTreeSet;

use sycl_format::aspects::{aspect_name, aspect_number, target_aspect};
use sycl_format::{DeviceRequirements, ImageFormat};

use crate::cl::DeviceInfo;

pub(crate) const CL_DEVICE_TYPE_CPU: u64 = 1 << 1;
pub(crate) const CL_DEVICE_TYPE_GPU: u64 = 1 << 2;
pub(crate) const CL_DEVICE_TYPE_ACCELERATOR: u64 = 1 << 3;
const CL_FP_FMA: u64 = 1 << 5;

/// An image form a device can use: its format and the target it was made for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Variant {
    pub format: ImageFormat,
    pub target: String,
}

impl Variant {
    pub(crate) fn spirv() -> Variant {
        Variant { format: ImageFormat::SpirV, target: "spir64".into() }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Capabilities {
    pub aspects: BTreeSet<u32>,
    pub sub_group_sizes: Vec<u32>,
    pub max_work_group_size: usize,
    /// Takes SPIR-V and links compiled objects: images are compiled one by one and linked
    /// by the driver. Otherwise the runtime links SPIR-V itself and translates.
    pub links_spirv: bool,
    /// The configured target this device is, if any (`intel_cpu_x86_64`, `pocl_cpu`, …).
    pub target: Option<&'static str>,
    /// Fused multiply-add in hardware: `CL_FP_FMA` among the single-precision capabilities
    /// (which PoCL reports when the processor has FMA; double precision always reports it), or
    /// a CPU device on a processor with FMA (Intel's CPU runtime does not report it, yet its own
    /// build of a source fuses `a * b + c` there).
    pub fma: bool,
}

impl Capabilities {
    pub(crate) fn of(info: &DeviceInfo) -> Capabilities {
        let mut aspects = BTreeSet::new();
        let mut add = |name: &str| {
            aspects.insert(aspect_number(name).expect("known aspect"));
        };
        if info.device_type & CL_DEVICE_TYPE_CPU != 0 {
            add("cpu");
        }
        if info.device_type & CL_DEVICE_TYPE_GPU != 0 {
            add("gpu");
        }
        if info.device_type & CL_DEVICE_TYPE_ACCELERATOR != 0 {
            add("accelerator");
        }
        let has_ext = |e: &str| info.extensions.split_whitespace().any(|x| x == e);
        if has_ext("cl_khr_fp16") {
            add("fp16");
        }
        if has_ext("cl_khr_fp64") {
            add("fp64");
        }
        if has_ext("cl_khr_int64_base_atomics") {
            add("atomic64");
        }
        if info.image_support {
            add("image");
        }
        if info.compiler_available {
            add("online_compiler");
        }
        if info.linker_available {
            add("online_linker");
        }
        add("queue_profiling");
        let target = if info.platform.contains("Intel(R) OpenCL") && info.device_type & CL_DEVICE_TYPE_CPU != 0 {
            Some("intel_cpu_x86_64")
        } else if info.platform.contains("Portable Computing Language") {
            Some("pocl_cpu")
        } else {
            None
        };
        if let Some(a) = target.and_then(target_aspect) {
            aspects.insert(a);
        }
        // Measured: the Intel CPU runtime links and runs SPV_INTEL_function_pointers across
        // modules. PoCL 3.1 builds such programs but its kernels miss the pointed-to functions:
        // the runtime lowers the calls to switches when it links a program for PoCL
        // (`sycl_spirv::lower_function_pointers`), which its ahead-of-time images cannot have.
        if matches!(target, Some("intel_cpu_x86_64" | "pocl_cpu")) {
            aspects.insert(aspect_number("function_pointers").expect("known aspect"));
        }
        Capabilities {
            aspects,
            sub_group_sizes: info.sub_group_sizes.iter().map(|s| *s as u32).collect(),
            max_work_group_size: info.max_work_group_size,
            links_spirv: info.il_version.contains("SPIR-V") && info.linker_available,
            target,
            fma: info.single_fp_config & CL_FP_FMA != 0 || (matches!(target, Some("intel_cpu_x86_64" | "pocl_cpu")) && host_has_fma()),
        }
    }

    /// Image forms in order of preference: the device's own ahead-of-time form, then SPIR-V.
    pub(crate) fn variants(&self) -> Vec<Variant> {
        let mut out = Vec::new();
        match self.target {
            Some("intel_cpu_x86_64") => {
                out.push(Variant { format: ImageFormat::Native, target: "intel_cpu_x86_64".into() })
            }
            Some("pocl_cpu") => out.push(Variant { format: ImageFormat::SpirBitcode, target: "pocl_cpu".into() }),
            _ => {}
        }
        out.push(Variant::spirv());
        out
    }

    /// Seed 003's check, in its order; the reason in the seed's words when the device cannot
    /// run an image with these requirements.
    pub(crate) fn check(&self, r: &DeviceRequirements) -> Result<(), String> {
        if let Some(fixed) = &r.fixed_target {
            if !fixed.iter().any(|a| self.aspects.contains(a)) {
                let names: Vec<String> =
                    fixed.iter().map(|a| aspect_name(*a).trim_start_matches("target_").to_string()).collect();
                return Err(format!(
                    "Kernel was compiled with '-fsycl-fixed-targets={}' but was submitted to a different device.",
                    names.join(",")
                ));
            }
        }
        if let Some(a) = r.aspects.iter().find(|a| !self.aspects.contains(a)) {
            return Err(format!(
                "Kernel uses optional feature corresponding to 'aspect::{}' but device does not support this aspect.",
                aspect_name(*a)
            ));
        }
        if let Some(s) = r.reqd_sub_group_sizes.iter().find(|s| !self.sub_group_sizes.contains(s)) {
            return Err(format!(
                "Kernel has a required sub-group size of '{s}' but device does not support this sub-group size."
            ));
        }
        if let Some(dims) = r
            .reqd_work_group_sizes
            .iter()
            .find(|dims| dims.iter().map(|d| *d as usize).product::<usize>() > self.max_work_group_size)
        {
            let dims: Vec<String> = dims.iter().map(u32::to_string).collect();
            return Err(format!(
                "Kernel has a required work-group size of '{}' but device does not support this work-group size (at most {} work-items).",
                dims.join(", "),
                self.max_work_group_size
            ));
        }
        Ok(())
    }
}

/// Whether this processor has fused multiply-add (a CPU device runs on it).
fn host_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(aspects: &[&str], sub_groups: &[u32], target: Option<&'static str>) -> Capabilities {
        let mut set: BTreeSet<u32> = aspects.iter().map(|a| aspect_number(a).unwrap()).collect();
        set.extend(target.and_then(target_aspect));
        let sub_group_sizes = sub_groups.to_vec();
        Capabilities { aspects: set, sub_group_sizes, max_work_group_size: 4096, links_spirv: false, target, fma: true }
    }

    #[test]
    fn messages_are_the_seeds() {
        let pocl = caps(&["cpu", "fp64"], &[], Some("pocl_cpu"));
        let fp16 = DeviceRequirements { aspects: vec![aspect_number("fp16").unwrap()], ..Default::default() };
        assert_eq!(
            pocl.check(&fp16).unwrap_err(),
            "Kernel uses optional feature corresponding to 'aspect::fp16' but device does not support this aspect."
        );
        let sg = DeviceRequirements { reqd_sub_group_sizes: vec![32], ..Default::default() };
        assert_eq!(
            pocl.check(&sg).unwrap_err(),
            "Kernel has a required sub-group size of '32' but device does not support this sub-group size."
        );
        let fixed = DeviceRequirements { fixed_target: target_aspect("intel_cpu_x86_64").map(|a| vec![a]), ..Default::default() };
        assert_eq!(
            pocl.check(&fixed).unwrap_err(),
            "Kernel was compiled with '-fsycl-fixed-targets=intel_cpu_x86_64' but was submitted to a different device."
        );
        let wg = DeviceRequirements { reqd_work_group_sizes: vec![vec![8192, 1, 1]], ..Default::default() };
        assert!(pocl.check(&wg).unwrap_err().starts_with("Kernel has a required work-group size of '8192, 1, 1'"));
        assert!(pocl.check(&DeviceRequirements::default()).is_ok());
        let intel = caps(&["cpu", "fp16", "fp64"], &[8, 16, 32], Some("intel_cpu_x86_64"));
        for r in [&fp16, &sg, &fixed] {
            assert!(intel.check(r).is_ok());
        }
    }
}
