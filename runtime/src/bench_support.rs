//! Entry points for the benchmarks, which measure internals no user calls directly, and the
//! counting allocator the benchmark programs that count heap allocations install.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use sycl_format::ImageSet;

use crate::backend::Capabilities;
use crate::registry::Registry;
use crate::resolve::ForDevice;

/// The look every launch makes for libraries opened or closed and device-library files
/// loaded or unloaded since the kernel it keeps was resolved, for benchmarks that price it.
pub fn look_for_loads() {
    std::hint::black_box(crate::discovery::LoadState::now());
}

/// Finds and indexes the images of every loaded binary from scratch, as a process's
/// first discovery does; returns how many images there are.
pub fn discover() -> usize {
    crate::discovery::Discovery::new()
        .registry()
        .binaries
        .iter()
        .map(|b| b.image_count as usize)
        .sum()
}

/// The images a first launch of `kernel` on the device `selector` picks would link, in
/// link order, as the binaries hold them (PTX text for a CUDA GPU): for benchmarks that
/// make the same driver calls by hand. Opens the device; builds nothing.
pub fn linked_images(selector: &str, kernel: &str) -> Result<Vec<Vec<u8>>, crate::Error> {
    let runtime = crate::process::runtime();
    let device = runtime.device(Some(selector))?;
    let registry = runtime.registry();
    let plan = crate::resolve::plan_kernel(
        &registry,
        kernel,
        device.forms(&Default::default()),
        device.for_device(),
    )?;
    Ok(plan.images().iter().map(|&id| registry.image(id).data.clone()).collect())
}

/// A registry of synthetic binaries, to time resolution against its size.
pub struct SyntheticRegistry(Registry, Capabilities);

impl SyntheticRegistry {
    /// The registry of `binaries`, as if they were loaded in this order.
    pub fn new(binaries: Vec<(String, ImageSet)>) -> SyntheticRegistry {
        let device = Capabilities {
            aspects: Default::default(),
            sub_group_sizes: vec![],
            max_work_group_size: 4096,
            links_images: true,
            target: None,
            fma: false,
            compute_capability: None,
        };
        SyntheticRegistry(Registry::from_binaries(binaries), device)
    }

    /// Plans `kernel`'s program of SPIR-V images, as a launch does on a device that takes
    /// SPIR-V (whose image forms are computed once); returns how many images it links.
    pub fn collect(&self, kernel: &str) -> Result<usize, crate::Error> {
        let device = ForDevice { name: "synthetic", caps: &self.1 };
        let spirv = [sycl_format::Target::Spir64];
        crate::resolve::plan_kernel(&self.0, kernel, &spirv, device).map(|p| p.images().len())
    }
}

/// The system allocator, counting every allocation (and reallocation) made through it: a
/// benchmark program installs it (`#[global_allocator] static A: CountingAllocator =
/// CountingAllocator;`) to count the allocations of its Rust code, the runtime's included, on
/// any thread. The drivers allocate with their own `malloc`, which it does not see.
pub struct CountingAllocator;

/// Allocations made through [`CountingAllocator`] since the process started.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Allocations made through [`CountingAllocator`] so far (0 where it is not installed).
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

// SAFETY: every call goes to the system allocator unchanged; the counter allocates nothing.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's guarantees about `layout`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator (so from `System`) with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (so from `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}
