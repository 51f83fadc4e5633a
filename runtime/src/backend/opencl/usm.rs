//! Device allocations on OpenCL: memory at a fixed device address, which a program may store
//! in device memory and a kernel may follow (`Queue::malloc_device`). Two flavours of one
//! mechanism ([`Flavour`]), each with its own entry points for allocating, freeing, setting a
//! kernel argument, copying and filling:
//! - `cl_intel_unified_shared_memory` ("USM"), where a device lists it and reports access to
//!   device allocations (`CL_DEVICE_DEVICE_MEM_CAPABILITIES_INTEL`): Intel's OpenCL runtimes
//!   (its CPU runtime here);
//! - else OpenCL 2.0's coarse-grained buffer SVM (shared virtual memory), where the device
//!   reports it (`CL_DEVICE_SVM_CAPABILITIES`): PoCL here. Coarse grain is the baseline of
//!   every SVM device; nothing here relies on finer grains (the host never touches the memory
//!   through its address, so it needs no map of it either).
//!
//! NVIDIA's OpenCL has neither.
//!
//! What each operation becomes (Intel's, then SVM's): an allocation `clDeviceMemAllocINTEL`,
//! `clSVMAlloc`; a kernel argument `clSetKernelArgMemPointerINTEL`,
//! `clSetKernelArgSVMPointer`; a read, a write and a copy between allocations
//! `clEnqueueMemcpyINTEL`, `clEnqueueSVMMemcpy` (which take device and host pointers alike:
//! device memory is not host memory in general, so no host access goes through the pointer
//! itself); a copy between an allocation and a buffer object maps the buffer's range (without
//! blocking), copies to or from the mapped host memory with the flavour's copy, and unmaps
//! it, three commands in order on the queue (no temporary memory; where the device shares the
//! host's memory, as a CPU device does, the map is the buffer itself); a fill
//! `clEnqueueMemFillINTEL`, `clEnqueueSVMMemFill`, which take the patterns
//! `clEnqueueFillBuffer` takes, at addresses aligned to the pattern's size; a map a copy into
//! host memory of the runtime's, written back at the unmap when mapped for writing, as CUDA's
//! map is; a view the address plus the offset, from any byte (both flavours take an address
//! inside an allocation as a kernel argument).
//!
//! A kernel may follow any address of an allocation of its context, not only those its
//! arguments name. Intel's: every kernel of a device with them is made with
//! `CL_KERNEL_EXEC_INFO_INDIRECT_DEVICE_ACCESS_INTEL` ([`indirect_access`]). SVM's: the
//! driver must be told every allocation a kernel may reach (`CL_KERNEL_EXEC_INFO_SVM_PTRS`),
//! so a kernel of an SVM device is given the context's live allocations before a launch
//! ([`SvmKernel::before_launch`]) whenever they changed since its last launch (a counter of
//! the changes says when: a launch where nothing changed costs one atomic load).
//!
//! An allocation is freed (`clMemFreeINTEL`, `clSVMFree`, which the driver does not defer)
//! once the commands that may use it completed, without the host waiting: one dropped before
//! they did waits, with their events, in its [`Heap`], which frees what completed at each
//! later allocation and free of the context, and the rest, after waiting for them, when it
//! goes. `cl_khr_command_buffer` cannot name device allocations: while one lives in a
//! context, graphs on its queues are replayed by the runtime command by command
//! ([`live_in`]).

use std::alloc::Layout;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cl3::types::{
    cl_bool, cl_command_queue, cl_context, cl_device_id, cl_event, cl_int, cl_kernel, cl_mem,
    cl_platform_id, cl_program, cl_uint, CL_BLOCKING, CL_FALSE, CL_NON_BLOCKING, CL_TRUE,
};

use super::device::device_words;
use super::{
    cl_err, extension_function, info_ptr, Context, Event, Function, Mapping, Memory, PerPlatform,
    Queue,
};
use crate::backend::api::{Event as _, Whole};
use crate::{DriverCode, Error};

/// `CL_DEVICE_DEVICE_MEM_CAPABILITIES_INTEL`, and its bit for access.
const CL_DEVICE_DEVICE_MEM_CAPABILITIES_INTEL: u32 = 0x4191;
const CL_UNIFIED_SHARED_MEMORY_ACCESS_INTEL: u64 = 1;
/// `clSetKernelExecInfo`'s name for letting a kernel follow addresses its arguments do not
/// name.
const CL_KERNEL_EXEC_INFO_INDIRECT_DEVICE_ACCESS_INTEL: u32 = 0x4201;

type AllocFn = <cl3::ext::clDeviceMemAllocINTEL_fn as Function>::Fn;
type FreeFn = <cl3::ext::clMemFreeINTEL_fn as Function>::Fn;
type SetArgFn = <cl3::ext::clSetKernelArgMemPointerINTEL_fn as Function>::Fn;
type MemcpyFn = <cl3::ext::clEnqueueMemcpyINTEL_fn as Function>::Fn;
type FillFn = <cl3::ext::clEnqueueMemFillINTEL_fn as Function>::Fn;

/// The extension's entry points of one platform.
struct Entries {
    alloc: AllocFn,
    free: FreeFn,
    blocking_free: FreeFn,
    set_arg: SetArgFn,
    memcpy: MemcpyFn,
    fill: FillFn,
}

/// The entry points of `platform`, looked up at its first device allocation.
fn entries(platform: cl_platform_id) -> Result<&'static Entries, String> {
    static LOADED: PerPlatform<Entries> = PerPlatform::new();
    LOADED.get(platform, |platform| {
        let address = |name| extension_function(platform, name);
        // SAFETY: each address is the platform's own function of that name, whose C signature
        // (cl_intel_unified_shared_memory's) is the type it is cast to; a function pointer has
        // the size of a data pointer on every OpenCL platform.
        unsafe {
            use std::mem::transmute as cast;
            Ok(Entries {
                alloc: cast::<*mut c_void, AllocFn>(address(c"clDeviceMemAllocINTEL")?),
                free: cast::<*mut c_void, FreeFn>(address(c"clMemFreeINTEL")?),
                blocking_free: cast::<*mut c_void, FreeFn>(address(c"clMemBlockingFreeINTEL")?),
                set_arg: cast::<*mut c_void, SetArgFn>(address(c"clSetKernelArgMemPointerINTEL")?),
                memcpy: cast::<*mut c_void, MemcpyFn>(address(c"clEnqueueMemcpyINTEL")?),
                fill: cast::<*mut c_void, FillFn>(address(c"clEnqueueMemFillINTEL")?),
            })
        }
    })
}

/// `Ok` for `CL_SUCCESS`, else the error of `call`.
fn check(code: cl_int, call: &'static str) -> Result<(), Error> {
    match code {
        cl3::error_codes::CL_SUCCESS => Ok(()),
        code => Err(cl_err(call)(code)),
    }
}

/// Where a device's allocations come from.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    /// `cl_intel_unified_shared_memory`.
    Intel,
    /// Coarse-grained buffer SVM.
    Svm,
}

/// How `device` gives device allocations: `cl_intel_unified_shared_memory` where it lists it
/// and reports access to device allocations, else coarse-grained buffer SVM where it reports
/// that; `None` for neither. Asked of the driver once per device.
fn kind_of(device: cl_device_id) -> Option<Kind> {
    static KNOWN: Mutex<Vec<(usize, Option<Kind>)>> = Mutex::new(Vec::new());
    let mut known = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&(_, kind)) = known.iter().find(|(d, _)| *d == device as usize) {
        return kind;
    }
    let extensions = cl3::device::get_device_info(device, cl3::device::CL_DEVICE_EXTENSIONS)
        .map(String::from)
        .unwrap_or_default();
    let intel = extensions.split_whitespace().any(|e| e == "cl_intel_unified_shared_memory")
        && device_words(device, CL_DEVICE_DEVICE_MEM_CAPABILITIES_INTEL)
            .first()
            .is_some_and(|caps| caps & CL_UNIFIED_SHARED_MEMORY_ACCESS_INTEL != 0);
    // A device before OpenCL 2.0 answers no SVM capabilities: none.
    let svm = device_words(device, cl3::device::CL_DEVICE_SVM_CAPABILITIES)
        .first()
        .is_some_and(|caps| caps & cl3::device::CL_DEVICE_SVM_COARSE_GRAIN_BUFFER != 0);
    let kind = match (intel, svm) {
        (true, _) => Some(Kind::Intel),
        (false, true) => Some(Kind::Svm),
        (false, false) => None,
    };
    known.push((device as usize, kind));
    kind
}

/// Whether `device` has device allocations, of either flavour.
pub(crate) fn supports_usm(device: cl_device_id) -> bool {
    kind_of(device).is_some()
}

/// Lets `kernel`, of `program`, follow any address of a device allocation of its context:
/// on a device with Intel's, by setting it so once; on an SVM device, by the
/// [`SvmKernel`] returned, whose [`SvmKernel::before_launch`] names the allocations before
/// each launch; nothing elsewhere.
pub(super) fn indirect_access(
    program: cl_program,
    kernel: cl_kernel,
) -> Result<Option<SvmKernel>, Error> {
    let devices: Vec<isize> =
        cl3::program::get_program_info(program, cl3::program::CL_PROGRAM_DEVICES)
            .map(Vec::from)
            .map_err(cl_err("clGetProgramInfo"))?;
    let kinds: Vec<Option<Kind>> =
        devices.iter().map(|&device| kind_of(device as cl_device_id)).collect();
    if kinds.contains(&Some(Kind::Intel)) {
        let on: cl_bool = CL_TRUE;
        // SAFETY: a live kernel; the value is a `cl_bool` of the size given, read during the
        // call.
        unsafe {
            cl3::kernel::set_kernel_exec_info(
                kernel,
                CL_KERNEL_EXEC_INFO_INDIRECT_DEVICE_ACCESS_INTEL,
                size_of::<cl_bool>(),
                (&on as *const cl_bool).cast(),
            )
        }
        .map_err(cl_err("clSetKernelExecInfo"))?;
    }
    if !kinds.contains(&Some(Kind::Svm)) {
        return Ok(None);
    }
    let context = info_ptr::<c_void>(
        cl3::program::get_program_info(program, cl3::program::CL_PROGRAM_CONTEXT),
        "clGetProgramInfo",
    )?;
    Ok(Some(SvmKernel { context: context as usize, seen: AtomicU64::new(0) }))
}

/// A live device allocation: its context, its address, and whether it is SVM.
struct Live {
    context: usize,
    ptr: usize,
    svm: bool,
}

/// The live device allocations of every context.
static LIVE: Mutex<Vec<Live>> = Mutex::new(Vec::new());

/// How many times an SVM allocation was made or freed (changed under the lock of [`LIVE`]):
/// a kernel that saw this count at its last launch names the same allocations as then.
static SVM_CHANGES: AtomicU64 = AtomicU64::new(0);

/// Whether a device allocation of `context` lives: then a command buffer, which cannot name
/// one, is not made for its queues.
pub(super) fn live_in(context: cl_context) -> bool {
    let live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
    live.iter().any(|a| a.context == context as usize)
}

/// What a kernel of an SVM device needs to follow the addresses of its context's allocations:
/// the context, and the count of changes ([`SVM_CHANGES`]) its list was last set at.
pub(crate) struct SvmKernel {
    context: usize,
    seen: AtomicU64,
}

impl SvmKernel {
    /// Names the context's live SVM allocations to `kernel` (`CL_KERNEL_EXEC_INFO_SVM_PTRS`)
    /// where they changed since its last launch: a kernel may then follow any of their
    /// addresses. With none alive, the list is left as it was (OpenCL takes no empty list; a
    /// list of freed allocations that no live address reaches is never followed).
    pub(super) fn before_launch(&self, kernel: cl_kernel) -> Result<(), Error> {
        if self.seen.load(Ordering::Acquire) == SVM_CHANGES.load(Ordering::Acquire) {
            return Ok(());
        }
        let live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        let changes = SVM_CHANGES.load(Ordering::Acquire);
        let ptrs: Vec<*mut c_void> = live
            .iter()
            .filter(|a| a.svm && a.context == self.context)
            .map(|a| a.ptr as *mut c_void)
            .collect();
        drop(live);
        if !ptrs.is_empty() {
            // SAFETY: a live kernel; the value is `ptrs.len()` SVM pointers of its context,
            // read during the call.
            unsafe {
                cl3::kernel::set_kernel_exec_info(
                    kernel,
                    cl3::kernel::CL_KERNEL_EXEC_INFO_SVM_PTRS,
                    size_of_val(ptrs.as_slice()),
                    ptrs.as_ptr().cast(),
                )
            }
            .map_err(cl_err("clSetKernelExecInfo"))?;
        }
        self.seen.store(changes, Ordering::Release);
        Ok(())
    }
}

/// A device's way to device allocations: Intel's entry points, or SVM's (OpenCL's own).
enum Flavour {
    Intel(&'static Entries),
    Svm,
}

/// A context's device allocations of one device: where they come from, and those dropped
/// before the commands that use them completed, freed once they have.
pub(crate) struct Heap {
    /// Retained: the allocations are of it.
    context: Context,
    device: cl_device_id,
    flavour: Flavour,
    /// Dropped allocations, each with the events of the commands that may still use it.
    deferred: Mutex<Vec<(usize, Vec<Event>)>>,
}

// SAFETY: the context and device are thread-safe OpenCL handles (OpenCL 2.x, appendix A.2);
// the deferred frees are behind a lock.
unsafe impl Send for Heap {}
// SAFETY: as above.
unsafe impl Sync for Heap {}

impl Heap {
    /// The device allocations of `device` in `context`, or `Error::Unsupported` where the
    /// device has none, naming it (`name`).
    pub(super) fn new(
        context: cl_context,
        device: cl_device_id,
        name: &str,
    ) -> Result<Heap, Error> {
        let unsupported = |why: String| {
            Error::Unsupported(format!(
                "device allocations on OpenCL device {name:?}: {why}; CUDA GPUs, Intel's \
                 OpenCL runtimes and OpenCL devices with SVM, such as PoCL's \
                 (DeviceInfo::aspects lists usm_device_allocations), have them, or store \
                 indices into a Buffer in place of addresses"
            ))
        };
        let flavour = match kind_of(device) {
            None => {
                return Err(unsupported(
                    "it has neither cl_intel_unified_shared_memory nor coarse-grained buffer \
                     SVM"
                    .into(),
                ))
            }
            Some(Kind::Svm) => Flavour::Svm,
            Some(Kind::Intel) => {
                let platform = info_ptr(
                    cl3::device::get_device_info(device, cl3::device::CL_DEVICE_PLATFORM),
                    "clGetDeviceInfo",
                )?;
                Flavour::Intel(entries(platform).map_err(|why| {
                    unsupported(format!("it lists cl_intel_unified_shared_memory, but {why}"))
                })?)
            }
        };
        // SAFETY: a live context, retained once for the heap (released when it drops).
        unsafe { cl3::context::retain_context(context) }.map_err(cl_err("clRetainContext"))?;
        Ok(Heap { context: Context(context), device, flavour, deferred: Mutex::new(Vec::new()) })
    }

    /// `size` bytes (at least one) of device memory, at an address of the device's default
    /// alignment.
    pub(super) fn alloc(self: &Arc<Heap>, size: usize) -> Result<Usm, Error> {
        self.sweep(&mut self.deferred.lock().unwrap_or_else(PoisonError::into_inner));
        let ptr = match self.flavour {
            Flavour::Intel(entries) => {
                let mut code = 0;
                // SAFETY: a live context holding the device; no properties; `code` is an
                // out-pointer to a local.
                let ptr = unsafe {
                    (entries.alloc)(
                        self.context.0,
                        self.device,
                        ptr::null(),
                        size.max(1),
                        0,
                        &mut code,
                    )
                };
                check(code, "clDeviceMemAllocINTEL")?;
                ptr
            }
            // SAFETY: a live context; no host pointer; coarse grain, the default alignment.
            Flavour::Svm => unsafe {
                cl3::memory::svm_alloc(
                    self.context.0,
                    cl3::memory::CL_MEM_READ_WRITE,
                    size.max(1),
                    0,
                )
            }
            // clSVMAlloc answers NULL, with no code: called an allocation failure.
            .map_err(|_| Error::Driver {
                call: "clSVMAlloc",
                code: DriverCode::OpenCl(cl3::error_codes::CL_MEM_OBJECT_ALLOCATION_FAILURE),
                error: format!(
                    "no SVM allocation of {size} bytes (the device's memory is full, or the \
                     size passes CL_DEVICE_MAX_MEM_ALLOC_SIZE): free buffers, or allocate less"
                ),
            })?,
        };
        let svm = matches!(self.flavour, Flavour::Svm);
        let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        live.push(Live { context: self.context.0 as usize, ptr: ptr as usize, svm });
        if svm {
            SVM_CHANGES.fetch_add(1, Ordering::AcqRel);
        }
        drop(live);
        Ok(Usm { ptr, heap: self.clone(), whole: None, after: Mutex::new(None) })
    }

    /// Frees the allocation at `ptr` now.
    ///
    /// # Safety
    /// Allocated by this heap, freed once, after every command that may use it completed.
    unsafe fn free(&self, ptr: *mut c_void) {
        match self.flavour {
            // SAFETY: the caller's promise.
            Flavour::Intel(entries) => unsafe {
                (entries.free)(self.context.0, ptr);
            },
            // SAFETY: as above.
            Flavour::Svm => unsafe {
                let _ = cl3::memory::svm_free(self.context.0, ptr);
            },
        }
    }

    /// Frees the allocation at `ptr` once the commands `after` stands for completed (at once
    /// where they have). With `None` (memory no buffer owned), after everything the device
    /// was given, the host waiting for it, on Intel's; at once on SVM, which has no such
    /// free (no command was given the memory).
    fn release(&self, ptr: *mut c_void, after: Option<Vec<Event>>) {
        let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = live.iter().position(|a| a.ptr == ptr as usize) {
            if live.swap_remove(i).svm {
                SVM_CHANGES.fetch_add(1, Ordering::AcqRel);
            }
        }
        drop(live);
        match (after, &self.flavour) {
            // SAFETY: allocated once, freed once; the driver waits for the commands that
            // use it.
            (None, Flavour::Intel(entries)) => unsafe {
                (entries.blocking_free)(self.context.0, ptr);
            },
            // SAFETY: allocated once, freed once; no command was given it.
            (None, Flavour::Svm) => unsafe { self.free(ptr) },
            (Some(after), _) => {
                let mut deferred = self.deferred.lock().unwrap_or_else(PoisonError::into_inner);
                deferred.push((ptr as usize, after));
                self.sweep(&mut deferred);
            }
        }
    }

    /// Frees the deferred allocations whose commands all completed (a failed command is
    /// complete).
    fn sweep(&self, deferred: &mut Vec<(usize, Vec<Event>)>) {
        deferred.retain_mut(|(ptr, after)| {
            after.retain(|e| !e.is_complete().unwrap_or(true));
            if !after.is_empty() {
                return true;
            }
            // SAFETY: allocated once, freed once, after every command that may use it.
            unsafe { self.free(*ptr as *mut c_void) };
            false
        });
    }
}

impl Drop for Heap {
    /// Every deferred allocation freed, after the commands that use it.
    fn drop(&mut self) {
        let deferred =
            std::mem::take(self.deferred.get_mut().unwrap_or_else(PoisonError::into_inner));
        for (ptr, after) in deferred {
            for event in &after {
                if let Err(e) = event.wait() {
                    log::warn!("a command on a dropped device allocation failed: {e}");
                }
            }
            // SAFETY: allocated once, freed once, after the commands that use it.
            unsafe { self.free(ptr as *mut c_void) };
        }
    }
}

/// A device allocation, or a view of one.
pub(crate) struct Usm {
    /// The device address of the first byte.
    pub(super) ptr: *mut c_void,
    heap: Arc<Heap>,
    /// For a view, the memory of the allocation, kept alive while the view is; `None` for the
    /// allocation itself, freed when it drops.
    whole: Option<Whole>,
    /// What `free_after` said: the commands that may still use the allocation when it goes.
    after: Mutex<Option<Vec<Event>>>,
}

// SAFETY: the address is the device's, which no host code reads or writes through; the heap
// is `Send + Sync`; the rest is behind a lock.
unsafe impl Send for Usm {}
// SAFETY: as above.
unsafe impl Sync for Usm {}

impl Usm {
    /// The device address `offset` bytes in.
    fn at(&self, offset: usize) -> *mut c_void {
        self.ptr.cast::<u8>().wrapping_add(offset).cast()
    }

    /// `offset` bytes in, as memory of its own that keeps `whole` (this memory's owner)
    /// alive.
    pub(super) fn view(&self, offset: usize, whole: Whole) -> Usm {
        let after = Mutex::new(None);
        Usm { ptr: self.at(offset), heap: self.heap.clone(), whole: Some(whole), after }
    }

    /// [`crate::backend::api::Memory::free_after`]: the allocation goes after `uses`.
    pub(super) fn free_after(&self, uses: Vec<Event>) {
        if self.whole.is_none() {
            *self.after.lock().unwrap_or_else(PoisonError::into_inner) = Some(uses);
        }
    }

    /// Sets the kernel's argument `index` to this memory's address.
    pub(super) fn set_arg(&self, kernel: cl_kernel, index: u32) -> Result<(), Error> {
        match self.heap.flavour {
            Flavour::Intel(entries) => check(
                // SAFETY: a live kernel; the driver takes the address itself as the pointer
                // argument.
                unsafe { (entries.set_arg)(kernel, index, self.ptr) },
                "clSetKernelArgMemPointerINTEL",
            ),
            Flavour::Svm => {
                // SAFETY: as above (an address inside an SVM allocation of the kernel's
                // context).
                unsafe { cl3::kernel::set_kernel_arg_svm_pointer(kernel, index, self.ptr) }
                    .map_err(cl_err("clSetKernelArgSVMPointer"))
            }
        }
    }

    /// Copies `size` bytes from `src` to `dst` (device or host addresses) on `queue`, after
    /// `waits`; blocking: returns once the copy is done.
    ///
    /// # Safety
    /// Both ranges are `size` bytes of memory that stays allocated until the copy is done (for
    /// host memory, that nothing else touches meanwhile).
    unsafe fn memcpy(
        &self,
        queue: cl_command_queue,
        blocking: bool,
        (dst, src): (*mut c_void, *const c_void),
        size: usize,
        waits: &[cl_event],
    ) -> Result<Event, Error> {
        let mut event = ptr::null_mut();
        let blocking = if blocking { CL_BLOCKING } else { CL_NON_BLOCKING };
        let (n, list) =
            (waits.len() as cl_uint, if waits.is_empty() { ptr::null() } else { waits.as_ptr() });
        match self.heap.flavour {
            Flavour::Intel(entries) => {
                // SAFETY: the caller's promise for the ranges; `waits` holds live events;
                // `event` is an out-pointer to a local.
                let code = unsafe {
                    (entries.memcpy)(queue, blocking, dst, src, size, n, list, &mut event)
                };
                check(code, "clEnqueueMemcpyINTEL").map(|()| Event(event))
            }
            // SAFETY: as above.
            Flavour::Svm => unsafe {
                cl3::command_queue::enqueue_svm_mem_cpy(queue, blocking, dst, src, size, n, list)
            }
            .map(Event)
            .map_err(cl_err("clEnqueueSVMMemcpy")),
        }
    }

    /// Copies `size` bytes from `offset` to `out`, without blocking.
    ///
    /// # Safety
    /// As [`crate::backend::api::Queue::read_async`].
    pub(super) unsafe fn read(
        &self,
        queue: &Queue,
        offset: usize,
        out: *mut u8,
        size: usize,
    ) -> Result<Event, Error> {
        // SAFETY: the caller's promise for `out`; the range lies within the allocation.
        unsafe { self.memcpy(queue.0, false, (out.cast(), self.at(offset)), size, &[]) }
    }

    /// Copies `size` bytes from `data` to `offset`, without blocking.
    ///
    /// # Safety
    /// As [`crate::backend::api::Queue::write_async`].
    pub(super) unsafe fn write(
        &self,
        queue: &Queue,
        offset: usize,
        data: *const u8,
        size: usize,
    ) -> Result<Event, Error> {
        // SAFETY: the caller's promise for `data`; the range lies within the allocation.
        unsafe { self.memcpy(queue.0, false, (self.at(offset), data.cast()), size, &[]) }
    }

    /// The driver's fill of `pattern` over `size` bytes from `offset`; `None` for a pattern
    /// it does not take, or an address not aligned to the pattern's size.
    pub(super) fn fill(
        &self,
        queue: &Queue,
        pattern: &[u8],
        offset: usize,
        size: usize,
    ) -> Result<Option<Event>, Error> {
        let at = self.at(offset);
        if !super::queue::fills(pattern) || !(at as usize).is_multiple_of(pattern.len()) {
            return Ok(None);
        }
        let (from, n) = (pattern.as_ptr().cast(), pattern.len());
        match self.heap.flavour {
            Flavour::Intel(entries) => {
                let mut event = ptr::null_mut();
                // SAFETY: a live queue; the range lies within the allocation (the caller
                // checked); the driver copies the pattern before returning; `event` is an
                // out-pointer to a local.
                let code = unsafe {
                    (entries.fill)(queue.0, at, from, n, size, 0, ptr::null(), &mut event)
                };
                check(code, "clEnqueueMemFillINTEL").map(|()| Some(Event(event)))
            }
            // SAFETY: as above.
            Flavour::Svm => unsafe {
                cl3::command_queue::enqueue_svm_mem_fill(queue.0, at, from, n, size, 0, ptr::null())
            }
            .map(|event| Some(Event(event)))
            .map_err(cl_err("clEnqueueSVMMemFill")),
        }
    }

    /// The first `size` bytes copied into host memory of the runtime's, after everything
    /// enqueued before; with `write`, written back by [`Usm::unmap`].
    pub(super) fn map(&self, queue: &Queue, size: usize, write: bool) -> Result<Mapping, Error> {
        let copy = HostCopy::new(size);
        // SAFETY: `size` bytes of the allocation into the copy, which holds as many; a
        // blocking copy, done when this returns.
        unsafe { self.memcpy(queue.0, true, (copy.at.cast(), self.ptr), size, &[])? };
        Ok(Mapping { at: copy.at.cast(), copy: Some((copy, write)) })
    }

    /// Ends a [`Usm::map`]: what the host wrote copied back, when it was mapped for writing.
    pub(super) fn unmap(&self, queue: &Queue, mapping: Mapping) -> Result<(), Error> {
        let Some((copy, true)) = &mapping.copy else { return Ok(()) };
        // SAFETY: the copy's bytes into the allocation, from its start (the map's range); a
        // blocking copy, done before the copy goes.
        unsafe { self.memcpy(queue.0, true, (self.ptr, copy.at.cast()), copy.layout.size(), &[]) }
            .map(drop)
    }
}

impl Drop for Usm {
    fn drop(&mut self) {
        if self.whole.is_none() {
            let after = self.after.get_mut().unwrap_or_else(PoisonError::into_inner).take();
            self.heap.release(self.ptr, after);
        }
    }
}

/// Copies `size` bytes from `src` at its offset to `dst` at its offset on `queue`, after
/// `waits`, where either is a device allocation: the flavour's copy between two, and
/// between one and a buffer object through a map of the buffer's range.
pub(super) fn copy(
    queue: &Queue,
    (src, src_offset): (&Memory, usize),
    (dst, dst_offset): (&Memory, usize),
    size: usize,
    waits: &[cl_event],
) -> Result<Event, Error> {
    match (src, dst) {
        // SAFETY: two ranges of live allocations (the caller checked them), which their owners
        // free only after the copy's event completed.
        (Memory::Usm(s), Memory::Usm(d)) => unsafe {
            s.memcpy(queue.0, false, (d.at(dst_offset), s.at(src_offset)), size, waits)
        },
        (Memory::Object(s), Memory::Usm(d)) => {
            through_map(queue, (s.0, src_offset), d, d.at(dst_offset), false, size, waits)
        }
        (Memory::Usm(s), Memory::Object(d)) => {
            through_map(queue, (d.0, dst_offset), s, s.at(src_offset), true, size, waits)
        }
        (Memory::Object(_), Memory::Object(_)) => {
            Err(Error::InvalidArgument("a copy between buffer objects is not a USM copy".into()))
        }
    }
}

/// Copies `size` bytes between the buffer object `buffer` at its offset and `at` in the device
/// allocation `usm` (into the buffer with `into_buffer`), through a map of the buffer's range:
/// mapped without blocking after `waits`, copied to or from the mapped memory, unmapped; the
/// unmap's event.
fn through_map(
    queue: &Queue,
    (buffer, offset): (cl_mem, usize),
    usm: &Usm,
    at: *mut c_void,
    into_buffer: bool,
    size: usize,
    waits: &[cl_event],
) -> Result<Event, Error> {
    use cl3::memory::{CL_MAP_READ, CL_MAP_WRITE_INVALIDATE_REGION};
    let flags = if into_buffer { CL_MAP_WRITE_INVALIDATE_REGION } else { CL_MAP_READ };
    let mut mapped = ptr::null_mut();
    let list = if waits.is_empty() { ptr::null() } else { waits.as_ptr() };
    // SAFETY: a live buffer of the queue's context whose range the caller checked; `mapped`
    // is an out-pointer to a local; `waits` holds live events.
    let map = unsafe {
        cl3::command_queue::enqueue_map_buffer(
            queue.0,
            buffer,
            CL_FALSE,
            flags,
            offset,
            size,
            &mut mapped,
            waits.len() as cl_uint,
            list,
        )
    }
    .map_err(cl_err("clEnqueueMapBuffer"))?;
    drop(Event(map));
    let (dst, src) = match into_buffer {
        true => (mapped, at.cast_const()),
        false => (at, mapped.cast_const()),
    };
    // SAFETY: the mapped range (valid once the map, enqueued before on this in-order queue,
    // completed; unmapped only after this copy) and `size` bytes of the allocation.
    let copied = unsafe { usm.memcpy(queue.0, false, (dst, src), size, &[]) };
    // SAFETY: the pointer the map returned, unmapped once, after the copy (in order).
    let unmapped = unsafe {
        cl3::command_queue::enqueue_unmap_mem_object(queue.0, buffer, mapped, 0, ptr::null())
    }
    .map(Event)
    .map_err(cl_err("clEnqueueUnmapMemObject"));
    copied.and(unmapped)
}

/// Host memory a device allocation's map copies into: page-aligned, so that it holds values
/// of any alignment; freed when it drops.
pub(crate) struct HostCopy {
    at: *mut u8,
    layout: Layout,
}

// SAFETY: plain host memory owned by this value alone.
unsafe impl Send for HostCopy {}
// SAFETY: as above; `&HostCopy` gives out nothing.
unsafe impl Sync for HostCopy {}

impl HostCopy {
    /// `size` bytes (at least one).
    fn new(size: usize) -> HostCopy {
        let layout = Layout::from_size_align(size.max(1), 4096)
            .unwrap_or_else(|_| panic!("a map of {size} bytes overflows the address space"));
        // SAFETY: a layout of non-zero size.
        let at = unsafe { std::alloc::alloc(layout) };
        if at.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        HostCopy { at, layout }
    }
}

impl Drop for HostCopy {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`, freed once.
        unsafe { std::alloc::dealloc(self.at, self.layout) };
    }
}
