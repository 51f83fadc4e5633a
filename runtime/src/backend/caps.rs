//! What a device can do, as its backend found out from its queries: aspects (fp16, fp64,
//! atomic64, image, …, and the `target_*` aspect of the configured target it is), sub-group
//! sizes, work-group limit, whether its driver links images, whether it has fused
//! multiply-add; which image forms it takes, in order; and the check of an image's device
//! requirements that DPC++'s optional-kernel-features design describes, with its messages.
//! Nothing here is specific to a backend.

use std::collections::BTreeSet;

use sycl_format::aspects::aspect_name;
use sycl_format::{CudaArch, DeviceRequirements, Target};

pub(crate) const CL_DEVICE_TYPE_CPU: u64 = 1 << 1;
pub(crate) const CL_DEVICE_TYPE_GPU: u64 = 1 << 2;
pub(crate) const CL_DEVICE_TYPE_ACCELERATOR: u64 = 1 << 3;

#[derive(Debug, Clone)]
pub(crate) struct Capabilities {
    pub aspects: BTreeSet<u32>,
    pub sub_group_sizes: Vec<u32>,
    pub max_work_group_size: usize,
    /// The driver compiles images one by one (their linkable form: SPIR-V on OpenCL, PTX on
    /// CUDA) and links the objects. Otherwise (PoCL) the runtime links SPIR-V itself and
    /// translates the program.
    pub links_images: bool,
    /// The configured target this device is, if any (`intel_cpu_x86_64`, `pocl_cpu`, …).
    pub target: Option<Target>,
    /// Fused multiply-add in hardware, which the device's own build of a source uses for
    /// `a * b + c`: the runtime then computes `mad` as `fma` too.
    pub fma: bool,
    /// A CUDA GPU's compute capability, which says which native images it runs.
    pub compute_capability: Option<(u32, u32)>,
}

impl Capabilities {
    /// Image forms (targets) in order of preference: the device's own ahead-of-time forms (a
    /// GPU's native ones, the architecture closest to the GPU's first), then the form it
    /// links at run time ([`Capabilities::linkable`], last).
    pub(crate) fn forms(&self) -> Vec<Target> {
        let mut out = Vec::new();
        if let Some(own @ (Target::IntelCpuX86_64 | Target::PoclCpu)) = self.target {
            out.push(own);
        }
        out.extend(self.native_gpu_forms());
        out.push(self.linkable());
        out
    }

    /// The forms a kernel bundle may hold, in order of preference: forms the runtime
    /// specializes and links itself (a GPU's native ones), then the linkable form.
    pub(crate) fn bundle_forms(&self) -> Vec<Target> {
        self.native_gpu_forms().chain([self.linkable()]).collect()
    }

    /// The native NVIDIA targets whose images this device runs, the closest architecture first.
    pub(crate) fn native_gpu_forms(&self) -> impl Iterator<Item = Target> + '_ {
        let cc = self.compute_capability.filter(|_| self.target == Some(Target::Ptx64));
        CudaArch::ALL
            .into_iter()
            .rev()
            .filter(move |arch| cc.is_some_and(|cc| arch.runs_on(cc)))
            .map(Target::NvidiaGpu)
    }

    /// The form the device compiles, specializes and links at run time, which kernel bundles
    /// hold: PTX for a CUDA device (`ptx64`), SPIR-V for every other.
    pub(crate) fn linkable(&self) -> Target {
        match self.target {
            Some(Target::Ptx64) => Target::Ptx64,
            _ => Target::Spir64,
        }
    }

    /// The optional-kernel-features design's check, in its order; the reason in the design's
    /// words when the device cannot run an image with these requirements.
    pub(crate) fn check(&self, r: &DeviceRequirements) -> Result<(), String> {
        if let Some(fixed) = &r.fixed_target {
            if !fixed.iter().any(|a| self.aspects.contains(a)) {
                let names: Vec<String> = fixed
                    .iter()
                    .map(|a| aspect_name(*a).trim_start_matches("target_").to_string())
                    .collect();
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
        if let Some(dims) = r.reqd_work_group_sizes.iter().find(|dims| {
            dims.iter().map(|d| *d as usize).product::<usize>() > self.max_work_group_size
        }) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use sycl_format::aspects::{aspect_number, target_aspect};

    fn caps(aspects: &[&str], sub_groups: &[u32], target: Option<Target>) -> Capabilities {
        let mut set: BTreeSet<u32> = aspects.iter().map(|a| aspect_number(a).unwrap()).collect();
        set.extend(target.and_then(target_aspect));
        let sub_group_sizes = sub_groups.to_vec();
        Capabilities {
            aspects: set,
            sub_group_sizes,
            max_work_group_size: 4096,
            links_images: false,
            target,
            fma: true,
            compute_capability: None,
        }
    }

    #[test]
    fn messages_are_the_designs() {
        let pocl = caps(&["cpu", "fp64"], &[], Some(Target::PoclCpu));
        let fp16 = DeviceRequirements {
            aspects: vec![aspect_number("fp16").unwrap()],
            ..Default::default()
        };
        assert_eq!(
            pocl.check(&fp16).unwrap_err(),
            "Kernel uses optional feature corresponding to 'aspect::fp16' but device does not support this aspect."
        );
        let sg = DeviceRequirements { reqd_sub_group_sizes: vec![32], ..Default::default() };
        assert_eq!(
            pocl.check(&sg).unwrap_err(),
            "Kernel has a required sub-group size of '32' but device does not support this sub-group size."
        );
        let fixed = DeviceRequirements {
            fixed_target: target_aspect(Target::IntelCpuX86_64).map(|a| vec![a]),
            ..Default::default()
        };
        assert_eq!(
            pocl.check(&fixed).unwrap_err(),
            "Kernel was compiled with '-fsycl-fixed-targets=intel_cpu_x86_64' but was submitted to a different device."
        );
        let wg = DeviceRequirements {
            reqd_work_group_sizes: vec![vec![8192, 1, 1]],
            ..Default::default()
        };
        assert!(pocl
            .check(&wg)
            .unwrap_err()
            .starts_with("Kernel has a required work-group size of '8192, 1, 1'"));
        assert!(pocl.check(&DeviceRequirements::default()).is_ok());
        let intel = caps(&["cpu", "fp16", "fp64"], &[8, 16, 32], Some(Target::IntelCpuX86_64));
        for r in [&fp16, &sg, &fixed] {
            assert!(intel.check(r).is_ok());
        }
    }

    #[test]
    fn a_gpu_prefers_the_native_forms_it_runs_the_closest_first_then_ptx() {
        let mut gpu = caps(&["gpu"], &[32], Some(Target::Ptx64));
        assert_eq!(gpu.forms(), [Target::Ptx64]);
        gpu.compute_capability = Some((8, 9));
        let names: Vec<&str> = gpu.forms().iter().map(|t| t.name()).collect();
        assert_eq!(names, ["nvidia_gpu_sm_89", "nvidia_gpu_sm_86", "nvidia_gpu_sm_80", "ptx64"]);
        let intel = caps(&["cpu"], &[8], Some(Target::IntelCpuX86_64));
        assert_eq!(intel.forms(), [Target::IntelCpuX86_64, Target::Spir64]);
    }
}
