//! OpenCL kernels: a kernel of a program with its arguments (buffer objects, or device
//! allocations by address), which the driver keeps between launches; on an SVM device, with
//! what names its context's allocations to it before a launch (`usm.rs`).

use std::ffi::{c_void, CString};
use std::ptr;

use cl3::types::{cl_kernel, cl_mem};

use super::usm::{indirect_access, SvmKernel};
use super::{cl_err, Device, Memory, OpenCl, Program};
use crate::backend::api;
use crate::Error;

/// An owned kernel (released when it drops); on an SVM device, with its [`SvmKernel`].
pub(crate) struct Kernel(pub(crate) cl_kernel, Option<SvmKernel>);

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: the kernel was created by us, is owned by this value alone, and is released
        // exactly once, here.
        unsafe {
            let _ = cl3::kernel::release_kernel(self.0);
        }
    }
}

// SAFETY: a kernel may move between threads; it is used by one at a time. Kernels are not
// Sync (setting arguments races), so they are only Send.
unsafe impl Send for Kernel {}

impl Kernel {
    /// The kernel `name` of `program`; on a device with device allocations, one that may
    /// follow their addresses wherever it finds them (`usm.rs`).
    pub(crate) fn new(program: &Program, name: &str) -> Result<Kernel, Error> {
        let name = CString::new(name).map_err(|_| Error::KernelNotFound {
            kernel: name.into(),
            searched: vec![],
            similar: vec![],
        })?;
        let mut kernel = cl3::kernel::create_kernel(program.0, &name)
            .map(|kernel| Kernel(kernel, None))
            .map_err(cl_err("clCreateKernel"))?;
        kernel.1 = indirect_access(program.0, kernel.0)?;
        Ok(kernel)
    }

    /// Readies the kernel for a launch: on an SVM device, names its context's allocations to
    /// it where they changed since its last launch.
    pub(super) fn before_launch(&self) -> Result<(), Error> {
        match &self.1 {
            Some(svm) => svm.before_launch(self.0),
            None => Ok(()),
        }
    }
}

impl api::Kernel<OpenCl> for Kernel {
    fn work_group_sizes(&self, device: &Device) -> Result<(usize, usize), Error> {
        let size = |param| {
            let value = cl3::kernel::get_kernel_work_group_info(self.0, device.id().0, param)
                .map_err(cl_err("clGetKernelWorkGroupInfo"))?;
            match value {
                cl3::info_type::InfoType::Size(size) => Ok(size),
                _ => Err(cl_err("clGetKernelWorkGroupInfo")(cl3::error_codes::CL_INVALID_VALUE)),
            }
        };
        Ok((
            size(cl3::kernel::CL_KERNEL_WORK_GROUP_SIZE)?,
            size(cl3::kernel::CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE)?,
        ))
    }

    /// A buffer object by its handle, a device allocation by its address.
    fn set_mem(&mut self, index: u32, mem: &Memory) -> Result<(), Error> {
        match mem {
            Memory::Object(m) => self.set_native(index, m.0),
            Memory::Usm(m) => m.set_arg(self.0, index),
        }
    }

    /// A buffer argument by its handle (one of this kernel's context).
    fn set_native(&mut self, index: u32, mem: cl_mem) -> Result<(), Error> {
        // SAFETY: a buffer argument is passed as a pointer to its `cl_mem` handle.
        unsafe {
            cl3::kernel::set_kernel_arg(
                self.0,
                index,
                std::mem::size_of::<cl_mem>(),
                (&mem as *const cl_mem).cast::<c_void>(),
            )
        }
        .map_err(cl_err("clSetKernelArg"))
    }

    fn set_local(&mut self, index: u32, size: usize) -> Result<(), Error> {
        // SAFETY: a NULL value with a size asks the driver to allocate that much local memory.
        unsafe { cl3::kernel::set_kernel_arg(self.0, index, size, ptr::null()) }
            .map_err(cl_err("clSetKernelArg"))
    }

    fn set_bytes(&mut self, index: u32, bytes: &[u8]) -> Result<(), Error> {
        // SAFETY: the driver copies `bytes.len()` bytes and checks the size against the
        // parameter's type, failing with CL_INVALID_ARG_SIZE on a mismatch.
        unsafe { cl3::kernel::set_kernel_arg(self.0, index, bytes.len(), bytes.as_ptr().cast()) }
            .map_err(cl_err("clSetKernelArg"))
    }
}
