//! Device aspects (SYCL 2020 `enum class aspect`), with DPC++'s numbering where DPC++ has
//! the aspect, so property values read the same as DPC++'s. Targets named by fixed targets
//! and device configuration entries get aspects of their own (`target_*`), as DPC++'s optional kernel features design asks
//! ("each target device has a corresponding aspect").

/// (name, number) of every aspect this toolkit knows.
pub const ASPECTS: &[(&str, u32)] = &[
    ("cpu", 1),
    ("gpu", 2),
    ("accelerator", 3),
    ("custom", 4),
    ("fp16", 5),
    ("fp64", 6),
    ("image", 9),
    ("online_compiler", 10),
    ("online_linker", 11),
    ("queue_profiling", 12),
    ("usm_device_allocations", 13),
    ("usm_host_allocations", 14),
    ("usm_shared_allocations", 15),
    ("usm_system_allocations", 17),
    ("atomic64", 28),
    // Calls through function pointers (SPV_INTEL_function_pointers): no device advertises it,
    // so the runtime grants it to the devices that run it: the Intel CPU runtime, and PoCL
    // through the runtime's lowering of pointers to switches (`sycl_spirv::lower_function_pointers`).
    ("function_pointers", 1100),
    ("target_intel_cpu_x86_64", 1001),
    ("target_pocl_cpu", 1002),
    ("target_nvidia_gpu_sm_90", 1003),
    ("target_ptx64", 1004),
    ("target_nvidia_gpu_sm_70", 1005),
    ("target_nvidia_gpu_sm_75", 1006),
    ("target_nvidia_gpu_sm_80", 1007),
    ("target_nvidia_gpu_sm_86", 1008),
    ("target_nvidia_gpu_sm_89", 1009),
    ("target_nvidia_gpu_sm_100", 1010),
    ("target_nvidia_gpu_sm_120", 1011),
];

/// The number of the aspect called `name`.
pub fn aspect_number(name: &str) -> Option<u32> {
    ASPECTS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// The name of aspect `number`, or the number itself for an aspect this build does not know.
pub fn aspect_name(number: u32) -> String {
    ASPECTS
        .iter()
        .find(|(_, v)| *v == number)
        .map_or_else(|| number.to_string(), |(n, _)| n.to_string())
}

/// The aspect that stands for target `target` (a [`Target`](crate::Target) or a device
/// configuration entry's name) in a `fixed_target` property.
pub fn target_aspect(target: impl AsRef<str>) -> Option<u32> {
    aspect_number(&format!("target_{}", target.as_ref()))
}

/// A `u32` array property value (aspects, sub-group sizes, work-group sizes), little-endian,
/// as DPC++'s `SYCL/device requirements` byte arrays are.
pub fn encode_u32s(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The inverse of [`encode_u32s`]; `None` when the length is not a multiple of 4.
pub fn decode_u32s(bytes: &[u8]) -> Option<Vec<u32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_agree() {
        for (name, number) in ASPECTS {
            assert_eq!(aspect_number(name), Some(*number));
            assert_eq!(aspect_name(*number), *name);
        }
        assert_eq!(aspect_name(4242), "4242");
        assert_eq!(target_aspect(crate::Target::PoclCpu), Some(1002));
        assert_eq!(target_aspect("nvidia_gpu_sm_90"), Some(1003));
    }

    #[test]
    fn u32_arrays_round_trip() {
        assert_eq!(decode_u32s(&encode_u32s(&[5, 6, 1001])).unwrap(), [5, 6, 1001]);
        assert_eq!(decode_u32s(&[1, 2, 3]), None);
    }
}
