//! Devices as data: [`devices`] lists every device of every backend ([`DeviceInfo`]: backend,
//! platform, name, type, aspects, limits and the selector that picks it), [`Queue::on`] opens a
//! queue on one, [`Queue::device`] says which a queue is on, and
//! [`Queue::kernel_work_group_sizes`] gives a kernel's work-group limits there.
//!
//! The descriptions are made below (`backend::info`), so that each device's state holds its
//! own; this module never asks a driver anything itself, and opens devices only through the
//! path every queue takes (`process::Runtime::device`), so a device is opened once per process
//! however it is asked for.

pub use crate::backend::info::{DeviceInfo, DeviceType};
pub use crate::backend::Backend;

use super::queue::Queue;
use crate::process::runtime;
use crate::program::Options;
use crate::Error;

/// Every device of every backend, in the order selectors number them: CUDA's GPUs first (when
/// `libcuda.so.1` finds any), then each OpenCL platform's devices in the ICD loader's order.
/// These are the devices, and the selectors, that [`Error::NoDevice`] lists.
///
/// ```no_run
/// for device in sycl_runtime::devices()? {
///     println!("{:8} {} / {} ({})", device.selector, device.platform, device.name, device.device_type);
/// }
/// # Ok::<(), sycl_runtime::Error>(())
/// ```
///
/// A backend whose driver fails to start is left out (and traced), unless no other has a
/// device: then its error is returned.
pub fn devices() -> Result<Vec<DeviceInfo>, Error> {
    runtime().devices()
}

/// A kernel's work-group limits on a device, from
/// [`Queue::kernel_work_group_sizes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WorkGroupSizes {
    /// The most work-items a work-group of this kernel may have on the device (at most the
    /// device's [`DeviceInfo::max_work_group_size`]; fewer where the kernel needs more of the
    /// device per work-item). OpenCL's `CL_KERNEL_WORK_GROUP_SIZE`; CUDA's
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
    pub max: usize,
    /// Work-groups of a multiple of this many work-items run best. OpenCL's
    /// `CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE`; the warp size on CUDA.
    pub preferred_multiple: usize,
}

impl Queue {
    /// A queue on exactly the device `device` describes (from [`devices`]), opened as
    /// [`Queue::with_device`] opens it: both share the device and its caches.
    ///
    /// ```no_run
    /// let devices = sycl_runtime::devices()?;
    /// let fp16 = devices.iter().find(|d| d.has_aspect("fp16")).expect("a device with half");
    /// let q = sycl_runtime::Queue::on(fp16)?;
    /// assert_eq!(q.device(), fp16);
    /// # Ok::<(), sycl_runtime::Error>(())
    /// ```
    ///
    /// [`Error::NoDevice`] when the device is no longer there.
    pub fn on(device: &DeviceInfo) -> Result<Queue, Error> {
        // The selector that picks the device now, not the description's own (a public field
        // its owner may have changed): the device is picked by its driver's handle.
        let selector = runtime().selector_of(device)?;
        let queue = Queue::with_device(&selector)?;
        if queue.device().handle != device.handle {
            return Err(Error::NoDevice {
                problem: format!(
                    "the devices changed while a queue was opened on {} / {}: `{selector}` now \
                     picks {} / {}",
                    device.platform,
                    device.name,
                    queue.device().platform,
                    queue.device().name
                ),
                available: Vec::new(),
            });
        }
        Ok(queue)
    }

    /// The device this queue is on.
    pub fn device(&self) -> &DeviceInfo {
        &self.inner.device.info
    }

    /// `kernel`'s work-group limits on this queue's device: the largest work-group it can be
    /// launched with, and the multiple its work-groups run best at. Builds the kernel's program
    /// as a plain launch of it would (no specialization values), and keeps it for the launches.
    ///
    /// ```no_run
    /// # let q = sycl_runtime::Queue::new()?;
    /// let sizes = q.kernel_work_group_sizes("app_kernel")?;
    /// let largest_preferred = sizes.max / sizes.preferred_multiple * sizes.preferred_multiple;
    /// println!("work-groups of up to {}, best {largest_preferred}", sizes.max);
    /// # Ok::<(), sycl_runtime::Error>(())
    /// ```
    pub fn kernel_work_group_sizes(&self, kernel: &str) -> Result<WorkGroupSizes, Error> {
        let rt = runtime();
        let registry = rt.registry();
        let state = &self.inner.device;
        let program =
            state.program_for(&registry, rt.disk.as_ref(), kernel, &Options::default())?;
        let object = state.take_kernel(&program, kernel)?;
        let sizes = object.kernel.work_group_sizes(&state.device);
        // A query sets no argument: the kernel object goes back for the next launch.
        state.return_kernel(&program, kernel, object);
        let (max, preferred_multiple) = sizes?;
        Ok(WorkGroupSizes { max, preferred_multiple })
    }
}

#[cfg(test)]
mod tests {
    //! On the devices of the machine the tests run on (both CPU devices here, and the GPUs of a
    //! GPU machine): this test binary carries no device images, so nothing is built.

    use std::sync::Arc;

    use super::*;
    use crate::backend::DeviceHandle;

    fn all() -> Vec<DeviceInfo> {
        let devices = devices().expect("the devices of this machine");
        assert!(!devices.is_empty(), "no device on this machine");
        devices
    }

    #[test]
    fn each_selector_picks_its_device_and_queue_on_opens_the_same_one() {
        for info in all() {
            let by_selector = Queue::with_device(&info.selector)
                .unwrap_or_else(|e| panic!("{}: {e}", info.selector));
            assert_eq!(by_selector.device(), &info, "`{}` picks another device", info.selector);
            let on = Queue::on(&info).unwrap_or_else(|e| panic!("{}: {e}", info.selector));
            assert_eq!(on.device(), &info);
            assert!(
                Arc::ptr_eq(&on.state(), &by_selector.state()),
                "{}: opened twice",
                info.selector
            );
        }
    }

    #[test]
    fn the_devices_are_those_no_device_lists_in_its_order() {
        let devices = all();
        let Err(Error::NoDevice { available, .. }) = Queue::with_device("no-such-platform") else {
            panic!("`no-such-platform` picked a device");
        };
        assert_eq!(available.len(), devices.len(), "{available:#?}");
        for (line, info) in available.iter().zip(&devices) {
            let (selector, rest) = line.split_once(' ').unwrap();
            assert_eq!(selector, info.selector);
            let described = format!("{} / {} ({})", info.platform, info.name, info.device_type);
            assert_eq!(rest.trim_start(), described);
        }
    }

    #[test]
    fn a_queue_is_on_its_device_whatever_its_description_says_and_never_on_one_gone() {
        let info = all().remove(0);
        let mut renamed = info.clone();
        renamed.selector = "no-such-platform".into();
        renamed.name = "renamed".into();
        let q = Queue::on(&renamed).unwrap();
        assert_eq!(q.device(), &info, "the handle, not the fields, picks the device");

        let mut gone = info;
        gone.handle = DeviceHandle::Cuda(4096);
        match Queue::on(&gone) {
            Err(Error::NoDevice { problem, available }) => {
                assert!(problem.contains("is no longer there"), "{problem}");
                assert_eq!(available.len(), all().len());
            }
            other => panic!("a queue on a device that is not there: {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn a_kernel_no_image_defines_has_no_work_group_sizes() {
        let q = Queue::on(&all()[0]).unwrap();
        match q.kernel_work_group_sizes("no_such_kernel") {
            Err(Error::KernelNotFound { kernel, .. }) => assert_eq!(kernel, "no_such_kernel"),
            other => panic!("{other:?}"),
        }
    }
}
