//! The work-item functions: where a work-item is in the index space of its launch.
//!
//! Each is OpenCL C's builtin of the same name (`get_global_id` → [`global_id`]), which LLVM's
//! SPIR-V back end reads from a built-in variable (`GlobalInvocationId`, …). `size_t` is 64 bits
//! on these devices, hence `usize`. A dimension past the launch's (`dim >= work_dim()`) answers
//! 0 for the ids and 1 for the sizes, as in OpenCL C.

unsafe extern "C" {
    #[link_name = "_Z13get_global_idj"]
    safe fn get_global_id(dim: u32) -> usize;
    #[link_name = "_Z15get_global_sizej"]
    safe fn get_global_size(dim: u32) -> usize;
    #[link_name = "_Z12get_local_idj"]
    safe fn get_local_id(dim: u32) -> usize;
    #[link_name = "_Z14get_local_sizej"]
    safe fn get_local_size(dim: u32) -> usize;
    #[link_name = "_Z12get_group_idj"]
    safe fn get_group_id(dim: u32) -> usize;
    #[link_name = "_Z14get_num_groupsj"]
    safe fn get_num_groups(dim: u32) -> usize;
    #[link_name = "_Z17get_global_offsetj"]
    safe fn get_global_offset(dim: u32) -> usize;
    #[link_name = "_Z12get_work_dimv"]
    safe fn get_work_dim() -> u32;
}

/// This work-item's index in dimension `dim` of the whole launch (offset included).
#[inline(always)]
pub fn global_id(dim: u32) -> usize {
    get_global_id(dim)
}

/// The number of work-items of the launch in dimension `dim`.
#[inline(always)]
pub fn global_size(dim: u32) -> usize {
    get_global_size(dim)
}

/// This work-item's index in dimension `dim` of its work-group.
#[inline(always)]
pub fn local_id(dim: u32) -> usize {
    get_local_id(dim)
}

/// The number of work-items of this work-group in dimension `dim`.
#[inline(always)]
pub fn local_size(dim: u32) -> usize {
    get_local_size(dim)
}

/// This work-group's index in dimension `dim`.
#[inline(always)]
pub fn group_id(dim: u32) -> usize {
    get_group_id(dim)
}

/// The number of work-groups of the launch in dimension `dim`.
#[inline(always)]
pub fn num_groups(dim: u32) -> usize {
    get_num_groups(dim)
}

/// The launch's global offset in dimension `dim` (0 unless the host gave one).
#[inline(always)]
pub fn global_offset(dim: u32) -> usize {
    get_global_offset(dim)
}

/// The number of dimensions of the launch: 1, 2 or 3.
#[inline(always)]
pub fn work_dim() -> u32 {
    get_work_dim()
}
