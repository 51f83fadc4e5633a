//! The process-wide state: the registry as discovery keeps it, the devices opened so far with
//! their caches, the persistent cache; and which device a selector picks among every
//! backend's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use crate::backend::native::NativeQueue;
use crate::backend::{self, info, select, DeviceHandle, DeviceInfo};
use crate::discovery::{Discovery, LoadState};
use crate::program::disk::DiskCache;
use crate::program::{DeviceState, Step};
use crate::registry::Registry;
use crate::trace::trace;
use crate::Error;

/// Environment variable that picks the device.
pub const DEVICE_ENV: &str = "SYCL_DEVICE";

/// Process-wide state, made at first use.
pub(crate) struct Runtime {
    /// Made at the first use of the registry (before the OpenCL drivers load, see
    /// [`Runtime::guard_vectorizer`]); kept up to date as libraries are opened and closed.
    discovery: RwLock<Option<Discovery>>,
    /// The devices opened in contexts of the runtime's own, by device (their context key is
    /// 0), kept for the life of the process.
    devices: Mutex<HashMap<(DeviceHandle, usize), Arc<Slot>>>,
    /// The devices opened in a context a program's queue was adopted in, by device and
    /// context: held by their queues, buffers and events alone, so that the context (and the
    /// programs built in it) is released when the last of them goes, as
    /// [`Queue::from_native`](crate::Queue::from_native) says. An entry whose state went
    /// stays until the next adoption prunes it; while a state lives it holds its context, so
    /// the context's number cannot be reused by another.
    adopted: Mutex<HashMap<(DeviceHandle, usize), Weak<DeviceState>>>,
    pub disk: Option<DiskCache>,
}

/// A device of the runtime's own: opened once, by the first thread that asks for it, while
/// threads that ask for other devices open theirs at the same time (opening a GPU takes its
/// driver a while: opening every GPU of a host from as many threads takes about as long as
/// opening one).
#[derive(Default)]
struct Slot {
    state: OnceLock<Arc<DeviceState>>,
    /// Held while the device is being opened.
    opening: Mutex<()>,
}

pub(crate) fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| Runtime {
        discovery: RwLock::new(None),
        devices: Mutex::default(),
        adopted: Mutex::default(),
        disk: DiskCache::open(),
    })
}

/// Compiles SPIR-V ahead of time into a compiled-object program binary for the OpenCL device
/// `selector` picks (see [`Queue::with_device`](crate::Queue::with_device)); used by `sycl-ld`
/// for native targets. The binary can be linked at run time with other objects of that device.
pub fn compile_object_for(selector: &str, spirv: &[u8]) -> Result<Vec<u8>, Error> {
    let devices = backend::devices()?;
    let i = find_device(&devices, Some((selector, &format!("device selector `{selector}`"))))?;
    let state = DeviceState::new(&devices[i], describe(&devices, i))?;
    let spirv = crate::program::for_ahead_of_time(spirv, &state.caps)?;
    let object = state
        .device
        .compile_ahead_of_time(&spirv)
        .map_err(|f| state.failed(Step::Compile, "ahead-of-time compilation".into(), "", f))?;
    object.binary()
}

fn candidates(devices: &[DeviceInfo]) -> Vec<select::Candidate<'_>> {
    devices
        .iter()
        .map(|d| select::Candidate {
            backend: d.backend,
            platform: &d.platform,
            vendor: &d.vendor,
            name: &d.name,
            device_type: d.device_type,
        })
        .collect()
}

/// Device `i` of `devices` as users see it, with the selector that picks it among them.
fn describe(devices: &[DeviceInfo], i: usize) -> info::DeviceInfo {
    info::DeviceInfo::new(&devices[i], select::selector_for(&candidates(devices), i))
}

/// The index of the device `wanted` picks (a selector, and where it came from), or of the
/// first that takes the images' linkable form itself: a CUDA GPU, else an OpenCL device that
/// accepts SPIR-V.
fn find_device(devices: &[DeviceInfo], wanted: Option<(&str, &str)>) -> Result<usize, Error> {
    let table = candidates(devices);
    let no_device =
        |e: select::SelectionError| Error::NoDevice { problem: e.problem, available: e.available };
    match wanted {
        Some((selector, source)) => select::select(&table, selector, source).map_err(no_device),
        None => devices.iter().position(|d| d.takes_linkable).ok_or_else(|| Error::NoDevice {
            problem: format!(
                "no device takes device images as they are (no CUDA GPU, no OpenCL device that accepts SPIR-V), so none \
                 is the default; pick one with {DEVICE_ENV}"
            ),
            available: select::table(&table),
        }),
    }
}

impl Runtime {
    /// The current registry: brought up to date when libraries were opened or closed since
    /// the last look (reading only what appeared), dropping every program built from a
    /// binary that went.
    pub(crate) fn registry(&self) -> Arc<Registry> {
        self.current().0
    }

    /// [`Runtime::registry`], with the loaded state it is of.
    pub(crate) fn current(&self) -> (Arc<Registry>, LoadState) {
        if let Some(discovery) = self.discovery.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if !discovery.is_stale() {
                return (discovery.registry().clone(), discovery.seen());
            }
        }
        let mut slot = self.discovery.write().unwrap_or_else(|e| e.into_inner());
        let discovery = match slot.as_mut() {
            None => slot.insert(Discovery::new()),
            Some(discovery) => {
                if discovery.is_stale() && discovery.refresh() {
                    let devices = self.devices.lock().unwrap_or_else(|e| e.into_inner());
                    for device in devices.values().filter_map(|slot| slot.state.get()) {
                        device.forget_unloaded(discovery.registry());
                    }
                    let adopted = self.adopted.lock().unwrap_or_else(|e| e.into_inner());
                    for device in adopted.values().filter_map(Weak::upgrade) {
                        device.forget_unloaded(discovery.registry());
                    }
                }
                discovery
            }
        };
        (discovery.registry().clone(), discovery.seen())
    }

    /// The Intel CPU runtime's vectorizer kills the process on a `select` between function
    /// pointers, and reads its switch once, when it loads: so before any OpenCL call, if the
    /// loaded device code calls through function pointers, it is turned off for the process
    /// (unless the user set `CL_CONFIG_USE_VECTORIZER` already). Libraries opened later
    /// cannot change it any more.
    fn guard_vectorizer(&self) {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if std::env::var_os("CL_CONFIG_USE_VECTORIZER").is_none()
                && self.registry().uses_function_pointers
            {
                trace!(
                    "vectorizer",
                    "off for this process: its device code calls through function pointers"
                );
                // The first OpenCL call has not happened yet, so no driver thread reads the
                // environment while it changes.
                std::env::set_var("CL_CONFIG_USE_VECTORIZER", "False");
            }
        });
    }

    /// The device `wanted` picks (a selector, see
    /// [`Queue::with_device`](crate::Queue::with_device)), or `SYCL_DEVICE`'s, or the default.
    pub(crate) fn device(&self, wanted: Option<&str>) -> Result<Arc<DeviceState>, Error> {
        self.guard_vectorizer();
        let devices = backend::devices()?;
        let from_env = std::env::var(DEVICE_ENV).ok().filter(|v| !v.trim().is_empty());
        let wanted = match (wanted, &from_env) {
            (Some(selector), _) => {
                Some((selector.to_string(), format!("Queue::with_device({selector:?})")))
            }
            (None, Some(selector)) => Some((selector.clone(), format!("{DEVICE_ENV}={selector}"))),
            (None, None) => None,
        };
        let i = find_device(
            &devices,
            wanted.as_ref().map(|(s, source)| (s.as_str(), source.as_str())),
        )?;
        self.opened(&devices, i)
    }

    /// Device `i` of `devices`, opened (once) in a context of the runtime's own.
    fn opened(&self, devices: &[DeviceInfo], i: usize) -> Result<Arc<DeviceState>, Error> {
        let info = &devices[i];
        let slot = {
            let mut map = self.devices.lock().unwrap_or_else(|e| e.into_inner());
            map.entry((info.handle, 0)).or_default().clone()
        };
        if let Some(state) = slot.state.get() {
            return Ok(state.clone());
        }
        let opening = slot.opening.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = slot.state.get() {
            return Ok(state.clone()); // another thread opened it meanwhile
        }
        trace!("device", "{} / {}", info.platform, info.name);
        let state = Arc::new(DeviceState::new(info, describe(devices, i))?);
        let _ = slot.state.set(state.clone());
        drop(opening);
        // Opening a device loads its driver's libraries: the registry looks at them now
        // rather than at the device's first launch, whose latency is the one that counts.
        self.current();
        Ok(state)
    }

    /// The device of a program's queue `native`, in the queue's context (the runtime's own
    /// device state when the context is the one it uses, as a CUDA device's primary context
    /// is), and the queue adopted.
    ///
    /// # Safety
    /// As [`crate::Queue::from_native`].
    pub(crate) unsafe fn adopt(
        &self,
        native: &NativeQueue,
        owner: &mut Option<backend::Owner>,
    ) -> Result<(Arc<DeviceState>, backend::Queue), Error> {
        self.guard_vectorizer();
        let devices = backend::devices()?;
        let handle = DeviceHandle::of_queue(native)?;
        let Some(i) = devices.iter().position(|d| d.handle == handle) else {
            return Err(Error::NoDevice {
                problem:
                    "Queue::from_native: the queue's device is none of those the runtime lists"
                        .into(),
                available: select::table(&candidates(&devices)),
            });
        };
        let own = self.opened(&devices, i)?;
        let context = native.context_key();
        let state = if own.device.context_key() == context {
            own
        } else {
            let mut map = self.adopted.lock().unwrap_or_else(|e| e.into_inner());
            match map.get(&(handle, context)).and_then(Weak::upgrade) {
                Some(state) => state,
                None => {
                    let info = &devices[i];
                    trace!("device", "{} / {} in a program's context", info.platform, info.name);
                    // SAFETY: the caller's promise, passed on.
                    let device = unsafe { backend::Device::adopt(info, native)? };
                    let state = Arc::new(DeviceState::with(info, describe(&devices, i), device));
                    // A CUDA context the runtime cannot retain may be destroyed and its
                    // number reused by another: such a state serves this queue only.
                    if state.device.holds_context() {
                        map.retain(|_, state| state.strong_count() > 0);
                        map.insert((handle, context), Arc::downgrade(&state));
                    }
                    state
                }
            }
        };
        // SAFETY: the caller's promise, passed on.
        let queue = unsafe { state.device.adopt_queue(native, owner)? };
        Ok((state, queue))
    }

    /// The selector that picks the device `device` describes, among the devices there are
    /// now (users may have changed the description's own); [`Error::NoDevice`] with every
    /// device when it is gone.
    pub(crate) fn selector_of(&self, device: &info::DeviceInfo) -> Result<String, Error> {
        self.guard_vectorizer();
        let devices = backend::devices()?;
        match devices.iter().position(|d| d.handle == device.handle) {
            Some(i) => Ok(select::selector_for(&candidates(&devices), i)),
            None => Err(Error::NoDevice {
                problem: format!(
                    "the device {} / {} (`{}`) is no longer there",
                    device.platform, device.name, device.selector
                ),
                available: select::table(&candidates(&devices)),
            }),
        }
    }

    /// Every device of every backend as users see it, each with the selector that picks it, in
    /// the order selectors number them (CUDA's, then OpenCL's in the ICD loader's order).
    pub(crate) fn devices(&self) -> Result<Vec<info::DeviceInfo>, Error> {
        // Enumerating loads the OpenCL drivers, which read the vectorizer's switch.
        self.guard_vectorizer();
        let devices = backend::devices()?;
        Ok((0..devices.len()).map(|i| describe(&devices, i)).collect())
    }
}
