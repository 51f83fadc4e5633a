//! Atomic read-modify-write operations on 32-bit integers in global or local memory, through
//! generic pointers, each returning the value it replaced.
//!
//! **Names**: `atomic_OP_TYPE`, with OP as OpenCL C names it (`add`, `sub`, `min`, `max`, `and`,
//! `or`, `xor`, `xchg`, `cmpxchg`) and TYPE the element's (`i32`, `u32`; `f32` for
//! [`atomic_add_f32`] only). The type is in every name because `min` and `max` compare signed or
//! unsigned by it.
//!
//! **What they call**: SPIR-V's own atomics in the form LLVM's SPIR-V back end takes them
//! (`__spirv_AtomicIAdd(p, scope, semantics, v)`, Itanium-mangled as clang would for OpenCL C
//! declarations `int __spirv_AtomicIAdd(int *, int, int, int)`), each with device scope and
//! relaxed semantics, which OpenCL C 1.2's `atomic_add` and the like promise. Not OpenCL C's
//! own names (`_Z10atomic_addPU3AS4Vii`): LLVM 22's back end leaves `atomic_min`, `atomic_max`
//! and `atomic_xchg` as calls to external functions that no device defines, and gives the
//! others work-group scope, too narrow for global memory.

/// SPIR-V `Scope::Device`: the operation is atomic for every work-item of the device.
const SCOPE_DEVICE: i32 = 1;
/// SPIR-V `MemorySemantics::None` (relaxed): the operation orders no other memory access.
const RELAXED: i32 = 0;

unsafe extern "C" {
    #[link_name = "_Z18__spirv_AtomicIAddPU3AS4iiii"]
    fn spirv_iadd_i32(p: *mut i32, scope: i32, semantics: i32, v: i32) -> i32;
    #[link_name = "_Z18__spirv_AtomicIAddPU3AS4jiij"]
    fn spirv_iadd_u32(p: *mut u32, scope: i32, semantics: i32, v: u32) -> u32;
    #[link_name = "_Z18__spirv_AtomicISubPU3AS4iiii"]
    fn spirv_isub_i32(p: *mut i32, scope: i32, semantics: i32, v: i32) -> i32;
    #[link_name = "_Z18__spirv_AtomicISubPU3AS4jiij"]
    fn spirv_isub_u32(p: *mut u32, scope: i32, semantics: i32, v: u32) -> u32;
    #[link_name = "_Z18__spirv_AtomicSMinPU3AS4iiii"]
    fn spirv_smin_i32(p: *mut i32, scope: i32, semantics: i32, v: i32) -> i32;
    #[link_name = "_Z18__spirv_AtomicUMinPU3AS4jiij"]
    fn spirv_umin_u32(p: *mut u32, scope: i32, semantics: i32, v: u32) -> u32;
    #[link_name = "_Z18__spirv_AtomicSMaxPU3AS4iiii"]
    fn spirv_smax_i32(p: *mut i32, scope: i32, semantics: i32, v: i32) -> i32;
    #[link_name = "_Z18__spirv_AtomicUMaxPU3AS4jiij"]
    fn spirv_umax_u32(p: *mut u32, scope: i32, semantics: i32, v: u32) -> u32;
    #[link_name = "_Z17__spirv_AtomicAndPU3AS4iiii"]
    fn spirv_and_i32(p: *mut i32, scope: i32, semantics: i32, v: i32) -> i32;
    #[link_name = "_Z17__spirv_AtomicAndPU3AS4jiij"]
    fn spirv_and_u32(p: *mut u32, scope: i32, semantics: i32, v: u32) -> u32;
    #[link_name = "_Z16__spirv_AtomicOrPU3AS4iiii"]
    fn spirv_or_i32(p: *mut i32, scope: i32, semantics: i32, v: i32) -> i32;
    #[link_name = "_Z16__spirv_AtomicOrPU3AS4jiij"]
    fn spirv_or_u32(p: *mut u32, scope: i32, semantics: i32, v: u32) -> u32;
    #[link_name = "_Z17__spirv_AtomicXorPU3AS4iiii"]
    fn spirv_xor_i32(p: *mut i32, scope: i32, semantics: i32, v: i32) -> i32;
    #[link_name = "_Z17__spirv_AtomicXorPU3AS4jiij"]
    fn spirv_xor_u32(p: *mut u32, scope: i32, semantics: i32, v: u32) -> u32;
    #[link_name = "_Z22__spirv_AtomicExchangePU3AS4iiii"]
    fn spirv_exchange_i32(p: *mut i32, scope: i32, semantics: i32, v: i32) -> i32;
    #[link_name = "_Z22__spirv_AtomicExchangePU3AS4jiij"]
    fn spirv_exchange_u32(p: *mut u32, scope: i32, semantics: i32, v: u32) -> u32;
    // SPIR-V's operand order: the value to store, then the one to compare with.
    #[link_name = "_Z29__spirv_AtomicCompareExchangePU3AS4iiiiii"]
    fn spirv_compare_exchange_i32(
        p: *mut i32,
        scope: i32,
        equal: i32,
        unequal: i32,
        v: i32,
        cmp: i32,
    ) -> i32;
    #[link_name = "_Z29__spirv_AtomicCompareExchangePU3AS4jiiijj"]
    fn spirv_compare_exchange_u32(
        p: *mut u32,
        scope: i32,
        equal: i32,
        unequal: i32,
        v: u32,
        cmp: u32,
    ) -> u32;
    #[link_name = "_Z18__spirv_AtomicLoadPU3AS4jii"]
    fn spirv_load_u32(p: *const u32, scope: i32, semantics: i32) -> u32;
}

/// Defines `atomic_OP_TYPE(p, v)` over the SPIR-V declaration `$spirv`, with its doc line.
macro_rules! read_modify_write {
    ($($(#[doc = $doc:literal])* $name:ident($ty:ty) = $spirv:ident;)*) => {
        $(
            $(#[doc = $doc])*
            ///
            /// # Safety
            ///
            /// `p` is valid for reads and writes of 4 bytes, aligned to 4, in global or local
            /// memory, and every access to `*p` that may happen at the same time is atomic.
            #[inline(always)]
            pub unsafe fn $name(p: *mut $ty, v: $ty) -> $ty {
                // SAFETY: the caller's contract is the builtin's.
                unsafe { $spirv(p, SCOPE_DEVICE, RELAXED, v) }
            }
        )*
    };
}

read_modify_write! {
    /// `*p = *p + v` (wrapping); returns the old `*p`.
    atomic_add_i32(i32) = spirv_iadd_i32;
    /// `*p = *p + v` (wrapping); returns the old `*p`.
    atomic_add_u32(u32) = spirv_iadd_u32;
    /// `*p = *p - v` (wrapping); returns the old `*p`.
    atomic_sub_i32(i32) = spirv_isub_i32;
    /// `*p = *p - v` (wrapping); returns the old `*p`.
    atomic_sub_u32(u32) = spirv_isub_u32;
    /// `*p = min(*p, v)`, signed; returns the old `*p`.
    atomic_min_i32(i32) = spirv_smin_i32;
    /// `*p = min(*p, v)`, unsigned; returns the old `*p`.
    atomic_min_u32(u32) = spirv_umin_u32;
    /// `*p = max(*p, v)`, signed; returns the old `*p`.
    atomic_max_i32(i32) = spirv_smax_i32;
    /// `*p = max(*p, v)`, unsigned; returns the old `*p`.
    atomic_max_u32(u32) = spirv_umax_u32;
    /// `*p = *p & v`; returns the old `*p`.
    atomic_and_i32(i32) = spirv_and_i32;
    /// `*p = *p & v`; returns the old `*p`.
    atomic_and_u32(u32) = spirv_and_u32;
    /// `*p = *p | v`; returns the old `*p`.
    atomic_or_i32(i32) = spirv_or_i32;
    /// `*p = *p | v`; returns the old `*p`.
    atomic_or_u32(u32) = spirv_or_u32;
    /// `*p = *p ^ v`; returns the old `*p`.
    atomic_xor_i32(i32) = spirv_xor_i32;
    /// `*p = *p ^ v`; returns the old `*p`.
    atomic_xor_u32(u32) = spirv_xor_u32;
    /// `*p = v`; returns the old `*p`.
    atomic_xchg_i32(i32) = spirv_exchange_i32;
    /// `*p = v`; returns the old `*p`.
    atomic_xchg_u32(u32) = spirv_exchange_u32;
}

/// `*p = if *p == cmp { v } else { *p }`; returns the old `*p` (equal to `cmp` when it stored).
///
/// # Safety
///
/// `p` is valid for reads and writes of 4 bytes, aligned to 4, in global or local memory, and
/// every access to `*p` that may happen at the same time is atomic.
#[inline(always)]
pub unsafe fn atomic_cmpxchg_i32(p: *mut i32, cmp: i32, v: i32) -> i32 {
    // SAFETY: the caller's contract is the builtin's.
    unsafe { spirv_compare_exchange_i32(p, SCOPE_DEVICE, RELAXED, RELAXED, v, cmp) }
}

/// `*p = if *p == cmp { v } else { *p }`; returns the old `*p` (equal to `cmp` when it stored).
///
/// # Safety
///
/// `p` is valid for reads and writes of 4 bytes, aligned to 4, in global or local memory, and
/// every access to `*p` that may happen at the same time is atomic.
#[inline(always)]
pub unsafe fn atomic_cmpxchg_u32(p: *mut u32, cmp: u32, v: u32) -> u32 {
    // SAFETY: the caller's contract is the builtin's.
    unsafe { spirv_compare_exchange_u32(p, SCOPE_DEVICE, RELAXED, RELAXED, v, cmp) }
}

/// `*p = *p + v` for a float; returns the old `*p`. Not a builtin (OpenCL C 1.2 has no float
/// atomics): an atomic load, then [`atomic_cmpxchg_u32`] on the bits in a loop until no other
/// work-item wrote `*p` in between. Under contention each retry costs a round trip to memory.
///
/// # Safety
///
/// `p` is valid for reads and writes of 4 bytes, aligned to 4, in global or local memory, and
/// every access to `*p` that may happen at the same time is atomic.
#[inline(always)]
pub unsafe fn atomic_add_f32(p: *mut f32, v: f32) -> f32 {
    let bits = p.cast::<u32>();
    // SAFETY: the caller's contract covers an atomic read of `*p`.
    let mut old = unsafe { spirv_load_u32(bits, SCOPE_DEVICE, RELAXED) };
    loop {
        let new = (f32::from_bits(old) + v).to_bits();
        // SAFETY: the caller's contract; bits are compared, so a NaN ends the loop too.
        let seen = unsafe { atomic_cmpxchg_u32(bits, old, new) };
        if seen == old {
            return f32::from_bits(old);
        }
        old = seen;
    }
}
