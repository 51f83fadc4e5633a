//! CUDA kernels: a function of a loaded module with its arguments, kept between launches as
//! the parameter pointers `cuLaunchKernel` reads, and the shape of a launch (grid and block).

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUdevice_attribute};

use super::context::Context;
use super::program::Loaded;
use super::{check, Cuda, Device, Memory};
use crate::backend::api;
use crate::Error;

/// A kernel argument as set.
enum Slot {
    Bytes(Vec<u8>),
    /// Bytes of local memory per work-group.
    Local(usize),
}

/// A kernel function with its arguments, kept between launches.
pub(crate) struct Kernel {
    /// Its module, kept loaded by the kernel and by every graph that launches it.
    pub(super) module: Arc<Loaded>,
    pub(super) function: sys::CUfunction,
    /// The kernel's name, which a stream keeps for its last launch (see
    /// [`StreamShared::last_kernel`](super::stream::StreamShared::last_kernel)).
    pub(super) name: Arc<str>,
    /// The most work-items a block of it may have (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`,
    /// which its registers may make smaller than the device's limit).
    pub(super) max_threads: u32,
    args: Vec<Slot>,
    /// What `cuLaunchKernel` reads, made again whenever an argument is set (a launch in a
    /// loop reuses it): one pointer per parameter, to the bytes of a value in `args` or to a
    /// local argument's offset in `offsets`. Both live in heap buffers that stay put until the
    /// next set.
    pub(super) params: Vec<*mut c_void>,
    /// Each local argument's offset in the dynamic shared memory (0 for the others).
    offsets: Vec<u64>,
    /// The local arguments' bytes in all.
    pub(super) local_bytes: usize,
    /// The dynamic shared memory the function is allowed (48 KiB until raised); a kernel is
    /// used by one thread at a time.
    pub(super) max_dynamic_shared: Cell<usize>,
}

// SAFETY: a function handle may be used from any thread with its context current; a kernel is
// used by one thread at a time (it is taken from a pool for a launch).
unsafe impl Send for Kernel {}

impl Kernel {
    /// `function` of `module`, named `name`, with no argument set.
    pub(super) fn new(
        module: Arc<Loaded>,
        function: sys::CUfunction,
        name: &str,
        max_threads: u32,
    ) -> Kernel {
        Kernel {
            module,
            function,
            name: name.into(),
            max_threads,
            args: Vec::new(),
            params: Vec::new(),
            offsets: Vec::new(),
            local_bytes: 0,
            max_dynamic_shared: Cell::new(48 << 10),
        }
    }

    fn slot(&mut self, index: u32) -> &mut Slot {
        let index = index as usize;
        while self.args.len() <= index {
            self.args.push(Slot::Bytes(Vec::new()));
        }
        &mut self.args[index]
    }

    /// Sets argument `index` to `bytes`.
    fn set(&mut self, index: u32, bytes: &[u8]) {
        match self.slot(index) {
            // The same buffer again: a value that changes every launch allocates nothing.
            Slot::Bytes(was) => {
                was.clear();
                was.extend_from_slice(bytes);
            }
            slot => *slot = Slot::Bytes(bytes.to_vec()),
        }
        self.prepare();
    }

    /// The grid and the block of a launch over `global` in work-groups of `local` (of
    /// [`default_local`] when `None`); an offset other than zero is refused.
    pub(super) fn shape(
        &self,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
    ) -> Result<([u32; 3], [u32; 3]), Error> {
        if offset.is_some_and(|o| o.iter().any(|&d| d != 0)) {
            // The ptx64 target's get_global_id and get_global_offset know no offset.
            return Err(Error::InvalidArgument(
                "a global offset on a CUDA device: its kernels' get_global_id knows none; \
                 add the offset to the index in the kernel, or pass it as an argument"
                    .into(),
            ));
        }
        let local = match local {
            Some(given) => {
                let mut l = [1; 3];
                l[..given.len()].copy_from_slice(given);
                l
            }
            None => default_local(global),
        };
        launch_shape(&self.name, self.max_threads, global, &local)
    }

    /// The dynamic shared memory of a launch of `dims` dimensions with the arguments as now
    /// set (`sycl_format::ptx_dynamic_shared_size`), which the function is first allowed, in
    /// `context` (its module's), when it is more than it was.
    pub(super) fn dynamic_shared(&self, dims: usize, context: &Context) -> Result<u32, Error> {
        let shared = sycl_format::ptx_dynamic_shared_size(self.local_bytes, dims);
        if shared > self.max_dynamic_shared.get() {
            context.bind()?;
            // SAFETY: a live function; the driver checks the size against the device.
            check("cuFuncSetAttribute", unsafe {
                sys::cuFuncSetAttribute(
                    self.function,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared as i32,
                )
            })?;
            self.max_dynamic_shared.set(shared);
        }
        Ok(shared as u32)
    }

    /// Makes `params`, `offsets` and `local_bytes` of the arguments as now set. Local
    /// arguments become offsets into the dynamic shared memory, each aligned to 16 bytes.
    fn prepare(&mut self) {
        let mut shared = 0usize;
        self.offsets.clear();
        for arg in &self.args {
            let offset = match arg {
                Slot::Bytes(_) => 0,
                Slot::Local(size) => {
                    shared = shared.next_multiple_of(16);
                    let at = shared as u64;
                    shared += size;
                    at
                }
            };
            self.offsets.push(offset);
        }
        self.local_bytes = shared;
        self.params.clear();
        for (arg, offset) in self.args.iter_mut().zip(&mut self.offsets) {
            self.params.push(match arg {
                Slot::Bytes(bytes) => bytes.as_mut_ptr().cast(),
                Slot::Local(_) => (offset as *mut u64).cast(),
            });
        }
    }
}

impl api::Kernel<Cuda> for Kernel {
    fn work_group_sizes(&self, _device: &Device) -> Result<(usize, usize), Error> {
        let context = &self.module.context;
        context.bind()?;
        let mut warp = 0;
        // SAFETY: the device of a live context; an out-pointer to a local.
        check("cuDeviceGetAttribute", unsafe {
            sys::cuDeviceGetAttribute(
                &mut warp,
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_WARP_SIZE,
                context.device,
            )
        })?;
        Ok((self.max_threads as usize, warp as usize))
    }

    /// The memory's address.
    fn set_mem(&mut self, index: u32, mem: &Memory) -> Result<(), Error> {
        self.set(index, &mem.address.to_ne_bytes());
        Ok(())
    }

    /// The address.
    fn set_native(&mut self, index: u32, address: sys::CUdeviceptr) -> Result<(), Error> {
        self.set(index, &address.to_ne_bytes());
        Ok(())
    }

    /// An offset into the launch's dynamic shared memory (see [`Kernel::prepare`]).
    fn set_local(&mut self, index: u32, size: usize) -> Result<(), Error> {
        *self.slot(index) = Slot::Local(size);
        self.prepare();
        Ok(())
    }

    fn set_bytes(&mut self, index: u32, bytes: &[u8]) -> Result<(), Error> {
        self.set(index, bytes);
        Ok(())
    }
}

/// Work-group sizes when the launch gives none: as large as divides the global size, up to
/// 256 work-items in all, first dimension first.
pub(super) fn default_local(global: &[usize]) -> [usize; 3] {
    let mut local = [1; 3];
    let mut budget = 256;
    for (d, &g) in global.iter().enumerate() {
        local[d] = (1..=budget.min(g)).rev().find(|b| g % b == 0).unwrap_or(1);
        budget /= local[d];
    }
    local
}

/// The grid and the block of a launch of `kernel` (which takes blocks of at most
/// `max_threads` work-items) over `global` work-items in work-groups of `local`: each within
/// what CUDA takes (`u32`), and the block no larger than the kernel takes.
pub(super) fn launch_shape(
    kernel: &str,
    max_threads: u32,
    global: &[usize],
    local: &[usize; 3],
) -> Result<([u32; 3], [u32; 3]), Error> {
    let (mut grid, mut block) = ([1u32; 3], [1u32; 3]);
    for d in 0..global.len() {
        let groups = global[d] / local[d];
        grid[d] = u32::try_from(groups).map_err(|_| {
            Error::InvalidArgument(format!("{groups} work-groups in dimension {d}"))
        })?;
        block[d] = u32::try_from(local[d]).map_err(|_| {
            Error::InvalidArgument(format!(
                "{} work-items per work-group in dimension {d}",
                local[d]
            ))
        })?;
    }
    let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
    if threads > u64::from(max_threads) {
        let shape = block[..global.len().max(1)].iter().map(u32::to_string).collect::<Vec<_>>();
        return Err(Error::InvalidArgument(format!(
            "a work-group of {threads} work-items ({}) for kernel `{kernel}`, which takes at most \
             {max_threads} per work-group on this GPU: launch it with smaller work-groups",
            shape.join("×")
        )));
    }
    Ok((grid, block))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_checked_as_grids_are_and_against_the_kernel() {
        let shape = |global: &[usize], local: [usize; 3]| launch_shape("k", 1024, global, &local);
        assert_eq!(shape(&[4096], [256, 1, 1]).unwrap(), ([16, 1, 1], [256, 1, 1]));
        assert_eq!(shape(&[64, 64], [32, 32, 1]).unwrap(), ([2, 2, 1], [32, 32, 1]));
        assert_eq!(
            shape(&[1 << 33], [1 << 32, 1, 1]).unwrap_err().to_string(),
            "invalid argument: 4294967296 work-items per work-group in dimension 0",
            "truncated to u32, this block would be 0 work-items"
        );
        assert_eq!(
            shape(&[1 << 40], [128, 1, 1]).unwrap_err().to_string(),
            "invalid argument: 8589934592 work-groups in dimension 0"
        );
        assert_eq!(
            launch_shape("saxpy", 768, &[4096, 4], &[512, 2, 1]).unwrap_err().to_string(),
            "invalid argument: a work-group of 1024 work-items (512×2) for kernel `saxpy`, which \
             takes at most 768 per work-group on this GPU: launch it with smaller work-groups"
        );
        assert!(launch_shape("saxpy", 768, &[4096, 4], &[384, 2, 1]).is_ok());
    }

    #[test]
    fn default_work_groups_divide_the_global_size_within_256_work_items() {
        assert_eq!(default_local(&[1024]), [256, 1, 1]);
        assert_eq!(default_local(&[1000]), [250, 1, 1]);
        assert_eq!(default_local(&[1009]), [1, 1, 1]);
        assert_eq!(default_local(&[64, 64]), [64, 4, 1]);
        assert_eq!(default_local(&[8, 8, 8]), [8, 8, 4]);
    }
}
