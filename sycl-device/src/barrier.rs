//! The work-group barriers: OpenCL C's `barrier(flags)`, an `OpControlBarrier` of work-group
//! scope.
//!
//! Every work-item of a work-group must reach the same barrier, the same number of times,
//! before any goes on: a barrier under a condition that differs between the work-items of a
//! group, or in a loop whose trip count does, is undefined behaviour (on most devices a hang),
//! hence `unsafe`. Compiling for nvptx64, rustc marks every function and declaration
//! `convergent` (as clang does OpenCL C's `barrier`), which keeps LLVM's optimizations from
//! making a call depend on more conditions than the source did.

/// `CLK_LOCAL_MEM_FENCE`: the barrier also orders the work-group's accesses to local memory.
const CLK_LOCAL_MEM_FENCE: u32 = 1;
/// `CLK_GLOBAL_MEM_FENCE`: the barrier also orders the work-group's accesses to global memory.
const CLK_GLOBAL_MEM_FENCE: u32 = 2;

unsafe extern "C" {
    #[link_name = "_Z7barrierj"]
    fn opencl_barrier(flags: u32);
}

/// Waits until every work-item of the work-group has reached this barrier; their accesses to
/// local and global memory before it are then visible to all of them after it.
///
/// Its uniformity is the caller's to keep, so a call is `unsafe`:
///
/// ```compile_fail,E0133
/// sycl_device::barrier();
/// ```
///
/// # Safety
///
/// Every work-item of the work-group reaches this call, the same number of times.
#[inline(always)]
pub unsafe fn barrier() {
    // SAFETY: the caller keeps the barrier uniform across the work-group.
    unsafe { opencl_barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE) }
}

/// [`barrier`] that orders accesses to local memory only (`CLK_LOCAL_MEM_FENCE`).
///
/// # Safety
///
/// Every work-item of the work-group reaches this call, the same number of times.
#[inline(always)]
pub unsafe fn barrier_local() {
    // SAFETY: the caller keeps the barrier uniform across the work-group.
    unsafe { opencl_barrier(CLK_LOCAL_MEM_FENCE) }
}

/// [`barrier`] that orders accesses to global memory only (`CLK_GLOBAL_MEM_FENCE`).
///
/// # Safety
///
/// Every work-item of the work-group reaches this call, the same number of times.
#[inline(always)]
pub unsafe fn barrier_global() {
    // SAFETY: the caller keeps the barrier uniform across the work-group.
    unsafe { opencl_barrier(CLK_GLOBAL_MEM_FENCE) }
}
