//! Each device as users see it, `sycl_runtime::DeviceInfo`: what its backend found out, as plain
//! data, with the selector that picks it. It is made here, below the room that keeps each
//! device's state (`program::DeviceState` holds its device's description, which a queue lends
//! out); what users call with it (`devices`, `Queue::on`) is `launch::device`'s. Nothing here
//! talks to a driver.

use sycl_format::aspects::aspect_name;

use super::caps::{CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use super::{Backend, DeviceHandle};

/// A device: what its driver reports of it, and the selector that picks it. Made by
/// [`devices`](crate::devices) (every device) and [`Queue::device`](crate::Queue::device) (a
/// queue's); [`Queue::on`](crate::Queue::on) opens a queue on it.
///
/// Two descriptions are equal when they describe the same device the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// The driver the device is reached through.
    pub backend: Backend,
    /// The platform's name, as its driver reports it (`Intel(R) OpenCL`, `Portable Computing
    /// Language`; `CUDA` for the CUDA backend's GPUs).
    pub platform: String,
    /// The device's name, as its driver reports it.
    pub name: String,
    /// What kind of device it is.
    pub device_type: DeviceType,
    /// The aspects it has, by the names of `sycl_format::aspects` (SYCL 2020's, such as
    /// `"fp16"` and `"fp64"`, `"usm_device_allocations"` where
    /// [`Queue::malloc_device`](crate::Queue::malloc_device) works, and the `target_*` aspect
    /// of the configured target it is), in the order of their numbers.
    pub aspects: Vec<String>,
    /// The sub-group sizes it supports (empty when its driver offers none to choose from).
    pub sub_group_sizes: Vec<usize>,
    /// The most work-items a work-group may have on it (a kernel may allow fewer: see
    /// [`Queue::kernel_work_group_sizes`](crate::Queue::kernel_work_group_sizes)).
    pub max_work_group_size: usize,
    /// Its global memory, in bytes.
    pub global_mem_bytes: u64,
    /// The local (shared) memory a work-group may have, in bytes: on a CUDA GPU the opt-in
    /// limit, to which a launch raises a kernel's.
    pub local_mem_bytes: u64,
    /// The most bytes one buffer may hold (OpenCL's `CL_DEVICE_MAX_MEM_ALLOC_SIZE`, often a
    /// quarter of the global memory; on CUDA the global memory).
    pub max_alloc_bytes: u64,
    /// Where a view ([`Buffer::slice`](crate::Buffer::slice)) may start: its first byte's
    /// offset in the buffer is a multiple of this (OpenCL's `CL_DEVICE_MEM_BASE_ADDR_ALIGN`, in
    /// bytes: often 128; 1 on CUDA, whose views are pointers).
    pub view_align_bytes: u64,
    /// Its compute units (OpenCL compute units; a GPU's streaming multiprocessors).
    pub compute_units: u32,
    /// A CUDA GPU's compute capability, (major, minor): `Some((9, 0))` on an H100. `None` on
    /// every other backend.
    pub compute_capability: Option<(u32, u32)>,
    /// The selector that picks this device alone, for `SYCL_DEVICE` or
    /// [`Queue::with_device`](crate::Queue::with_device): `intel`, `pocl`, `cuda:1`; the same
    /// strings [`Error::NoDevice`](crate::Error::NoDevice) lists.
    pub selector: String,
    /// The device as its driver knows it, which [`Queue::on`](crate::Queue::on) opens.
    pub(crate) handle: DeviceHandle,
}

/// What kind of device a device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceType {
    /// A CPU (Intel's CPU runtime, PoCL).
    Cpu,
    /// A GPU.
    Gpu,
    /// An accelerator (an FPGA, a DSP, …).
    Accelerator,
    /// Anything else its driver reports.
    Other,
}

impl DeviceType {
    /// The type of `CL_DEVICE_TYPE_*` bits, read as selection reads them: CPU first, then GPU,
    /// then accelerator.
    pub(crate) fn from_bits(bits: u64) -> DeviceType {
        if bits & CL_DEVICE_TYPE_CPU != 0 {
            DeviceType::Cpu
        } else if bits & CL_DEVICE_TYPE_GPU != 0 {
            DeviceType::Gpu
        } else if bits & CL_DEVICE_TYPE_ACCELERATOR != 0 {
            DeviceType::Accelerator
        } else {
            DeviceType::Other
        }
    }
}

impl std::fmt::Display for DeviceType {
    /// `cpu`, `gpu`, `accelerator` or `other`: the words of selectors and of
    /// [`Error::NoDevice`](crate::Error::NoDevice)'s list.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Gpu => "gpu",
            DeviceType::Accelerator => "accelerator",
            DeviceType::Other => "other",
        })
    }
}

impl DeviceInfo {
    /// The description of `found`, which `selector` picks alone.
    pub(crate) fn new(found: &super::DeviceInfo, selector: String) -> DeviceInfo {
        let limits = found.limits;
        DeviceInfo {
            backend: found.backend,
            platform: found.platform.clone(),
            name: found.name.clone(),
            device_type: DeviceType::from_bits(found.device_type),
            aspects: found.caps.aspects.iter().map(|&a| aspect_name(a)).collect(),
            sub_group_sizes: found.caps.sub_group_sizes.iter().map(|&s| s as usize).collect(),
            max_work_group_size: found.caps.max_work_group_size,
            global_mem_bytes: limits.global_mem_bytes,
            local_mem_bytes: limits.local_mem_bytes,
            max_alloc_bytes: limits.max_alloc_bytes,
            view_align_bytes: limits.view_align_bytes,
            compute_units: limits.compute_units,
            compute_capability: limits.compute_capability,
            selector,
            handle: found.handle,
        }
    }

    /// Whether the device has the aspect called `name` (`"fp16"`, `"fp64"`, `"atomic64"`, …;
    /// see [`DeviceInfo::aspects`]).
    pub fn has_aspect(&self, name: &str) -> bool {
        self.aspects.iter().any(|a| a == name)
    }

    /// The device's driver handle: its OpenCL platform and device id, or its CUDA device.
    /// Root devices are not reference counted: the handle stays valid for the process.
    pub fn native(&self) -> Result<super::native::NativeDevice, crate::Error> {
        self.handle.native()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use sycl_format::aspects::aspect_number;
    use sycl_format::Target;

    use super::super::api::Limits;
    use super::super::Capabilities;
    use super::*;

    fn found(device_type: u64, aspects: &[&str], limits: Limits) -> super::super::DeviceInfo {
        super::super::DeviceInfo {
            handle: DeviceHandle::Cuda(3),
            backend: Backend::Cuda,
            name: "NVIDIA H100 80GB HBM3".into(),
            platform: "CUDA".into(),
            vendor: "NVIDIA Corporation".into(),
            device_type,
            identity: String::new(),
            takes_linkable: true,
            caps: Capabilities {
                aspects: aspects.iter().map(|a| aspect_number(a).unwrap()).collect::<BTreeSet<_>>(),
                sub_group_sizes: vec![32],
                max_work_group_size: 1024,
                links_images: true,
                target: Some(Target::Ptx64),
                fma: true,
                compute_capability: Some((9, 0)),
            },
            limits,
        }
    }

    #[test]
    fn a_description_is_the_backends_findings_as_plain_data() {
        let limits = Limits {
            global_mem_bytes: 80 << 30,
            local_mem_bytes: 227 << 10,
            max_alloc_bytes: 80 << 30,
            view_align_bytes: 1,
            compute_units: 132,
            compute_capability: Some((9, 0)),
        };
        let found = found(CL_DEVICE_TYPE_GPU, &["target_ptx64", "fp64", "gpu"], limits);
        let info = DeviceInfo::new(&found, "cuda:1".into());
        assert_eq!(info.backend, Backend::Cuda);
        assert_eq!((info.platform.as_str(), info.name.as_str()), ("CUDA", "NVIDIA H100 80GB HBM3"));
        assert_eq!(info.device_type, DeviceType::Gpu);
        assert_eq!(info.aspects, ["gpu", "fp64", "target_ptx64"], "by number, by name");
        assert!(info.has_aspect("fp64") && !info.has_aspect("fp16"));
        assert_eq!((info.sub_group_sizes.as_slice(), info.max_work_group_size), (&[32][..], 1024));
        assert_eq!((info.global_mem_bytes, info.local_mem_bytes), (80 << 30, 227 << 10));
        assert_eq!((info.compute_units, info.compute_capability), (132, Some((9, 0))));
        assert_eq!((info.max_alloc_bytes, info.view_align_bytes), (80 << 30, 1));
        assert_eq!(info.selector, "cuda:1");
        assert_eq!(info.handle, DeviceHandle::Cuda(3));
        assert_eq!(info.clone(), info);
        assert_ne!(DeviceInfo::new(&found, "cuda".into()), info);
    }

    #[test]
    fn device_types_read_the_bits_as_selectors_do() {
        let cases = [
            (CL_DEVICE_TYPE_CPU, DeviceType::Cpu, "cpu"),
            (CL_DEVICE_TYPE_GPU, DeviceType::Gpu, "gpu"),
            (CL_DEVICE_TYPE_ACCELERATOR, DeviceType::Accelerator, "accelerator"),
            (CL_DEVICE_TYPE_CPU | CL_DEVICE_TYPE_GPU, DeviceType::Cpu, "cpu"),
            (1 << 4, DeviceType::Other, "other"),
            (0, DeviceType::Other, "other"),
        ];
        for (bits, ty, word) in cases {
            assert_eq!(DeviceType::from_bits(bits), ty, "{bits:#x}");
            assert_eq!(ty.to_string(), word);
        }
        assert_eq!(
            (Backend::OpenCl.to_string(), Backend::Cuda.to_string()),
            ("OpenCL".into(), "CUDA".into())
        );
    }
}
