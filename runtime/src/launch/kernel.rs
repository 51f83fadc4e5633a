//! Kernel launches: arguments and their check against the kernel's recorded parameters,
//! ranges, and the path from a kernel's name to an enqueued kernel object (the last launch
//! kept, then the device's caches, then resolution and a build).

use std::marker::PhantomData;
use std::sync::Arc;

use sycl_format::{c_types, KernelParam, ParamKind};

use super::bundle::{DeviceImage, Executable, ImageSelector, KernelBundle, SpecConstant};
use super::event::Event;
use super::order::{ordered, Access, Accesses, Uses};
use super::queue::{as_bytes, Allocation, Buffer, LastLaunch, Pod, Queue, KEPT_KERNELS};
use super::view::BufferView;
use crate::backend::native::NativeBuffer;
use crate::backend::{self, Memory, Program};
use crate::discovery::LoadState;
use crate::process::runtime;
use crate::program::{
    ArgBytes, ArgKey, DeviceState, Options, PooledKernel, SetArg, Signature, SpecValues,
};
use crate::registry::Registry;
use crate::trace::trace;
use crate::Error;

impl<'q, S> Launch<'q, NoGlobalRange, S> {
    /// A launch of `kernel` on `queue` with nothing set yet, going to `sink`.
    #[inline]
    pub(super) fn new(queue: &'q Queue, kernel: &'q str, sink: S) -> Self {
        Launch {
            queue,
            kernel,
            args: Args::new(),
            global: Range::new(&[]),
            local: None,
            offset: None,
            spec: None,
            bundle: None,
            after: Vec::new(),
            sink,
            _range: PhantomData,
        }
    }
}

/// What a launch is started on: a [`Queue`], which runs it ([`Eager`]), or a graph's
/// [`crate::Recorder`], which records it ([`crate::Recording`]). The typed launchers
/// `sycl_build` generates take either.
pub trait Launcher<'q> {
    /// Where its launches go.
    type Sink;

    /// Starts a launch of `kernel` ([`Queue::launch`], [`crate::Recorder::launch`]).
    fn launch(&'q self, kernel: &'q str) -> Launch<'q, NoGlobalRange, Self::Sink>;
}

impl<'q> Launcher<'q> for Queue {
    type Sink = Eager;

    #[inline]
    fn launch(&'q self, kernel: &'q str) -> Launch<'q, NoGlobalRange> {
        Launch::new(self, kernel, Eager)
    }
}

impl Queue {
    /// Starts a launch of `kernel`; add its arguments and its global range, then
    /// [`Launch::run`]. A launch without a global range cannot run: `run` exists only once
    /// [`Launch::global`] gave one.
    ///
    /// ```compile_fail,E0599
    /// # fn f(q: &sycl_runtime::Queue, out: &sycl_runtime::Buffer<i32>) -> Result<(), sycl_runtime::Error> {
    /// // error: no method named `run` found for struct `Launch<'_, NoGlobalRange>`
    /// q.launch("k").arg(out).run()?;
    /// # Ok(()) }
    /// ```
    ///
    /// (rustdoc on the stable toolchain checks only that this fails to compile:
    /// `tests/tests/compile_fail.rs` checks the error, with a generated launcher, in
    /// `fixtures/misuse/examples/run_without_global_range.rs`.)
    #[inline]
    pub fn launch<'q>(&'q self, kernel: &'q str) -> Launch<'q, NoGlobalRange> {
        Launch::new(self, kernel, Eager)
    }

    /// Submits what was enqueued to the device without waiting for it (OpenCL's `clFlush`;
    /// the CUDA driver submits at once).
    pub fn flush(&self) -> Result<(), Error> {
        self.inner.queue.flush()
    }
}

/// A value a kernel can take as an argument: a buffer (for a `global` or `constant` pointer),
/// [`Local`] memory (for a `local` pointer), or a plain value (a scalar, a vector or a
/// `#[repr(C)]` struct passed by value).
///
/// `'a` is how long the argument stays borrowed: a launch borrows its buffers until it runs
/// (and holds no reference count on them, so that a launch costs no atomic operation per
/// buffer).
pub trait KernelArg<'a> {
    #[doc(hidden)]
    fn to_arg(&self) -> ArgValue<'a>;
}

/// A kernel argument, ready to be set.
pub struct ArgValue<'a>(pub(super) Arg<'a>);

/// A launch's arguments: up to 8 without an allocation.
type Args<'a> = smallvec::SmallVec<[ArgValue<'a>; 8]>;

pub(super) enum Arg<'a> {
    /// A buffer or a view of one: the memory the kernel gets, the device it lives on, its
    /// element type, and where it lies in its allocation, whose uses it shares.
    Mem(&'a Arc<Memory>, &'a Arc<DeviceState>, &'static str, Span<'a>),
    /// The value's bytes and its Rust type.
    Bytes(ArgBytes, &'static str),
    /// Bytes of local memory per work-group, and the element type.
    Local(usize, &'static str),
    /// A view the device cannot give a kernel (on OpenCL, one that starts off the device's
    /// base alignment): why, and its element type. Refused by every launch.
    Unusable(&'a str, &'static str),
    /// Another library's memory (a cudarc slice, an opencl3 buffer): its driver handle, its
    /// driver context (told apart by number), its element type, and the stream it belongs
    /// to (a cudarc slice's, by number; 0: none), on which alone a launch may use it.
    Native(NativeBuffer, usize, &'static str, usize),
}

/// Where a buffer argument lies: its allocation, and its bytes there.
#[derive(Clone, Copy)]
pub(super) struct Span<'a> {
    pub(super) alloc: &'a Arc<Allocation>,
    pub(super) start: usize,
    pub(super) len: usize,
}

impl<'a> Span<'a> {
    pub(super) fn uses(&self) -> &'a Uses {
        &self.alloc.uses
    }

    fn overlaps(&self, other: &Span<'_>) -> bool {
        Arc::ptr_eq(self.alloc, other.alloc)
            && self.start < other.start + other.len
            && other.start < self.start + self.len
    }
}

impl<'a> ArgValue<'a> {
    /// Another library's memory `of` as a pointer argument: its handle `mem` in the driver
    /// context numbered `context` (as a queue's context is numbered), holding values of `T`.
    /// Borrows `of` until the launch runs.
    /// `stream` is the number of the one stream the memory may be used on (a cudarc slice's
    /// own, whose uses cudarc tracks), 0 for any.
    #[cfg_attr(not(any(feature = "cudarc", feature = "opencl3")), allow(dead_code))]
    pub(crate) fn native<T: Pod, O: ?Sized>(
        _of: &'a O,
        mem: NativeBuffer,
        context: usize,
        stream: usize,
    ) -> ArgValue<'a> {
        ArgValue(Arg::Native(mem, context, std::any::type_name::<T>(), stream))
    }
}

impl Arg<'_> {
    /// What [`check_arguments`] reads of it.
    fn key(&self) -> ArgKey {
        let (kind, type_name, size) = match self {
            Arg::Mem(_, _, ty, _) | Arg::Unusable(_, ty) => (0, *ty, 0),
            Arg::Bytes(bytes, ty) => (1, *ty, bytes.len()),
            Arg::Local(_, ty) => (2, *ty, 0),
            Arg::Native(_, _, ty, _) => (3, *ty, 0),
        };
        ArgKey { kind, type_name, size }
    }

    fn describe(&self) -> String {
        match self {
            Arg::Mem(_, _, ty, _) | Arg::Native(_, _, ty, _) | Arg::Unusable(_, ty) => {
                format!("a buffer of {ty}")
            }
            Arg::Bytes(bytes, ty) => format!("{ty} ({} bytes)", bytes.len()),
            Arg::Local(bytes, ty) => format!("local memory of {ty} ({bytes} bytes)"),
        }
    }
}

impl<'a, T: Pod> KernelArg<'a> for &'a Buffer<T> {
    fn to_arg(&self) -> ArgValue<'a> {
        let buffer: &'a Buffer<T> = self;
        let span = Span { alloc: &buffer.alloc, start: 0, len: buffer.len() * size_of::<T>() };
        ArgValue(Arg::Mem(
            buffer.mem(),
            &buffer.queue().inner.device,
            std::any::type_name::<T>(),
            span,
        ))
    }
}

impl<'a, T: Pod> KernelArg<'a> for &'a BufferView<'_, T> {
    fn to_arg(&self) -> ArgValue<'a> {
        let view: &'a BufferView<'_, T> = self;
        let device = &view.buffer.queue().inner.device;
        let ty = std::any::type_name::<T>();
        let span =
            Span { alloc: &view.buffer.alloc, start: view.start_bytes(), len: view.size_bytes() };
        ArgValue(match view.kernel_mem() {
            Ok(mem) => Arg::Mem(mem, device, ty, span),
            Err(why) => Arg::Unusable(why, ty),
        })
    }
}

impl<T: Pod> KernelArg<'_> for T {
    fn to_arg(&self) -> ArgValue<'static> {
        ArgValue(Arg::Bytes(
            ArgBytes::from_slice(as_bytes(std::slice::from_ref(self))),
            std::any::type_name::<T>(),
        ))
    }
}

/// Local (work-group) memory for a kernel's `local T*` parameter: `len` values of `T` for each
/// work-group, allocated by the driver at launch.
#[derive(Debug, Clone, Copy)]
pub struct Local<T: Pod> {
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> Local<T> {
    /// `len` values of `T` for each work-group.
    pub fn new(len: usize) -> Local<T> {
        Local { len, _t: PhantomData }
    }
}

impl<T: Pod> KernelArg<'_> for Local<T> {
    fn to_arg(&self) -> ArgValue<'static> {
        // A size past the address space saturates: no device has that much, and the launch
        // refuses it.
        let bytes = self.len.saturating_mul(std::mem::size_of::<T>());
        ArgValue(Arg::Local(bytes, std::any::type_name::<T>()))
    }
}

/// Whether argument `arg` cannot go to a launch on `own` (its queue's stream numbered
/// `stream`): memory of another device, driver context or stream, or local memory of no bytes
/// or more than a work-group of the device may have.
#[inline]
fn refused(arg: &Arg<'_>, own: &Arc<DeviceState>, stream: usize) -> bool {
    match arg {
        Arg::Mem(_, device, ..) => !Arc::ptr_eq(device, own),
        Arg::Native(_, context, _, of) => {
            *context != own.device.context_key() || (*of != 0 && *of != stream)
        }
        Arg::Local(bytes, _) => *bytes == 0 || local_limit(own).is_some_and(|l| *bytes as u64 > l),
        Arg::Unusable(..) => true,
        Arg::Bytes(..) => false,
    }
}

/// The local memory a work-group may have on `device`, when its driver says.
fn local_limit(device: &DeviceState) -> Option<u64> {
    Some(device.info.local_mem_bytes).filter(|&l| l > 0)
}

/// The error of argument `i`, which [`refused`] refuses on `own`; out of the launch's path.
#[cold]
#[inline(never)]
fn refused_argument(kernel: &str, i: usize, arg: &Arg<'_>, own: &DeviceState) -> Error {
    Error::InvalidArgument(match arg {
        Arg::Local(0, ty) => format!(
            "kernel `{kernel}` argument {i}: local memory of no {ty} values: a local argument \
             takes at least one (Local::<{ty}>::new(len) with len > 0)"
        ),
        Arg::Local(usize::MAX, ty) => format!(
            "kernel `{kernel}` argument {i}: local memory of {ty} values whose size overflows \
             the address space; {} gives a work-group at most {} bytes",
            own.describe(),
            own.info.local_mem_bytes
        ),
        Arg::Local(bytes, ty) => format!(
            "kernel `{kernel}` argument {i}: local memory of {bytes} bytes ({ty} values) is more \
             than {} gives a work-group ({} bytes, the kernel's own local variables included)",
            own.describe(),
            own.info.local_mem_bytes
        ),
        Arg::Unusable(why, _) => format!("kernel `{kernel}` argument {i}: {why}"),
        Arg::Mem(_, device, ..) if device.info.handle == own.info.handle => format!(
            "kernel `{kernel}` argument {i}: a buffer made in another driver context of {} than \
             the launch's queue (a queue adopted with Queue::from_native works in the program's \
             context): make the buffer on a queue of the launch's context",
            device.describe()
        ),
        Arg::Mem(_, device, ..) => format!(
            "kernel `{kernel}` argument {i}: a buffer of {} given to a launch on {}: copy it to a \
             buffer of the launch's device (read, then write)",
            device.describe(),
            own.describe()
        ),
        Arg::Native(_, context, ..) if *context == own.device.context_key() => format!(
            "kernel `{kernel}` argument {i}: cudarc memory of another stream than the launch's \
             queue on {}: cudarc orders a slice's uses on its own stream only; launch on a queue \
             of the slice's stream (Queue::from_cudarc(slice.stream())), or lend the slice to \
             this queue with Queue::with_tracking",
            own.describe()
        ),
        _ => format!(
            "kernel `{kernel}` argument {i}: memory of another driver context than the launch's \
             queue on {}: make the queue from the library's own (Queue::from_native, or the \
             cudarc/opencl3 conversions)",
            own.describe()
        ),
    })
}

/// The error of a launch the driver refused: a work-group larger than the kernel takes on
/// the device named with both sizes (the driver says only that the size is invalid), any
/// other error of the driver with the kernel's name; out of the launch's path.
#[cold]
#[inline(never)]
fn launch_error(
    kernel: &str,
    error: Error,
    object: &backend::Kernel,
    local: Option<&[usize]>,
    own: &DeviceState,
) -> Error {
    let items = local.map(|l| l.iter().product::<usize>());
    if let (Some(items), Ok((most, _))) = (items, object.work_group_sizes(&own.device)) {
        if items > most {
            return Error::InvalidArgument(format!(
                "kernel `{kernel}`: a work-group of {items} work-items ({:?}) is more than it \
                 takes on {} (at most {most}: Queue::kernel_work_group_sizes); the driver said \
                 {error}",
                local.unwrap_or_default(),
                own.describe()
            ));
        }
    }
    match error {
        Error::Driver { call, code, error } => {
            Error::KernelCall { kernel: kernel.to_string(), call, code, error }
        }
        e => e,
    }
}

/// Checks a launch's arguments against the kernel's parameters as its image records them,
/// so that a mistake is named before the driver answers with a bare error code.
pub(super) fn check_arguments(
    kernel: &str,
    params: &[KernelParam],
    args: &[ArgValue<'_>],
) -> Result<(), Error> {
    if params.len() != args.len() {
        return Err(Error::InvalidArgument(format!(
            "kernel `{kernel}` takes {} argument{} {}; got {}",
            params.len(),
            if params.len() == 1 { "" } else { "s" },
            sycl_format::kernel_signature(params),
            args.len()
        )));
    }
    for (i, (param, ArgValue(arg))) in params.iter().zip(args).enumerate() {
        let wanted = match (param.kind, arg) {
            (
                ParamKind::Global | ParamKind::Constant,
                Arg::Mem(_, _, ty, _) | Arg::Native(_, _, ty, _) | Arg::Unusable(_, ty),
            )
            | (ParamKind::Local, Arg::Local(_, ty)) => match pointee_mismatch(param, ty) {
                None => continue,
                Some(pointee) => {
                    let what =
                        if param.kind == ParamKind::Local { "local memory" } else { "a buffer" };
                    format!("{what} of {pointee}")
                }
            },
            (ParamKind::Scalar | ParamKind::Struct, Arg::Bytes(bytes, ty))
                if param.size == 0 || bytes.len() == param.size as usize =>
            {
                if c_types::matches(&param.ty, ty) {
                    continue;
                }
                described(&param.ty, param.size)
            }
            (ParamKind::Global | ParamKind::Constant, _) => "a buffer (`&Buffer<T>`)".to_string(),
            (ParamKind::Local, _) => {
                "local memory (`sycl_runtime::Local::<T>::new(len)`)".to_string()
            }
            (ParamKind::Scalar | ParamKind::Struct, _) => described(&param.ty, param.size),
            (kind, _) => format!("a {} argument, which launches cannot pass yet", kind.name()),
        };
        return Err(Error::InvalidArgument(format!(
            "kernel `{kernel}` argument {i} ({}) takes {wanted}; got {}",
            param.declaration(),
            arg.describe()
        )));
    }
    Ok(())
}

/// The pointee of pointer parameter `param` in words, with the Rust types that match it,
/// when values of `ty` are certainly not it (`None`: they may be).
fn pointee_mismatch(param: &KernelParam, ty: &str) -> Option<String> {
    let pointee = c_types::pointee(&param.ty)?;
    (!c_types::matches_memory(pointee, ty)).then(|| described(pointee, 0))
}

/// OpenCL C type `c` as a message names it: `int (i32 or u32)`, `float4 ([f32; 4])`,
/// `struct Pt (16 bytes: a #[repr(C)] type of that layout)`.
fn described(c: &str, size: u32) -> String {
    let rust = c_types::CType::parse(c).rust_names();
    if !rust.is_empty() {
        return format!("{c} ({})", rust.join(" or "));
    }
    match size {
        0 => format!("{c} (a #[repr(C)] type of its layout)"),
        size => format!("{c} ({size} bytes: a #[repr(C)] type of its layout)"),
    }
}

/// The kernel's parameters from the first image of a form the device uses that records them
/// (`None`: no image does, so the driver alone checks the arguments).
pub(crate) fn signature(
    device: &DeviceState,
    registry: &Registry,
    kernel: &str,
) -> Option<Arc<[KernelParam]>> {
    for &target in device.forms(&Options::default()) {
        for &id in registry.kernel_images(target, kernel) {
            match registry.view(id).kernel_params(kernel) {
                Some(Ok(params)) => return Some(params.into()),
                Some(Err(e)) => log::warn!(
                    "{}: malformed parameters of kernel `{kernel}`: {e}",
                    registry.describe(id)
                ),
                None => {}
            }
        }
    }
    None
}

type Selector = Box<ImageSelector>;

/// A kernel launch being put together; `R` says whether it has its global range yet
/// ([`NoGlobalRange`] until [`Launch::global`], then [`GlobalRange`]): only a launch with one
/// can [`run`](Launch::run).
///
/// `S` says where it goes: enqueued now ([`Eager`], from [`Queue::launch`]), or into a graph
/// being recorded ([`crate::Recording`], from [`crate::Recorder::launch`]).
pub struct Launch<'q, R = GlobalRange, S = Eager> {
    pub(super) queue: &'q Queue,
    pub(super) kernel: &'q str,
    pub(super) args: Args<'q>,
    pub(super) global: Range,
    pub(super) local: Option<Range>,
    /// Where the global ids start (zero by default).
    pub(super) offset: Option<Range>,
    /// Specialization values (`None` until one is set: a launch drops nothing for them).
    pub(super) spec: Option<SpecValues>,
    pub(super) bundle: Option<(KernelBundle<Executable>, Option<Selector>)>,
    /// Events the launch waits for (empty for most: nothing is allocated).
    pub(super) after: Vec<Event>,
    pub(super) sink: S,
    _range: PhantomData<R>,
}

/// A [`Launch`] that [`Launch::run`] enqueues at once.
pub struct Eager;

/// A [`Launch`] that has no global range yet, and so cannot run.
pub struct NoGlobalRange;

/// A [`Launch`] with its global range: ready to run.
pub struct GlobalRange;

impl<'q, R, S> Launch<'q, R, S> {
    /// Appends the next argument.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn arg(mut self, arg: impl KernelArg<'q>) -> Self {
        self.push_arg(arg.to_arg());
        self
    }

    /// Appends an argument made already.
    #[inline]
    pub(crate) fn push_arg(&mut self, arg: ArgValue<'q>) {
        self.args.push(arg);
    }

    /// The global range: one to three dimensions (`[n]`, `[w, h]`, `[w, h, d]`).
    #[inline]
    pub fn global<const N: usize>(self, dims: [usize; N]) -> Launch<'q, GlobalRange, S> {
        let Launch { queue, kernel, args, local, offset, spec, bundle, after, sink, .. } = self;
        Launch {
            queue,
            kernel,
            args,
            global: Range::new(&dims),
            local,
            offset,
            spec,
            bundle,
            after,
            sink,
            _range: PhantomData,
        }
    }

    /// The work-group size (by default the driver chooses).
    #[inline]
    pub fn local<const N: usize>(mut self, dims: [usize; N]) -> Self {
        self.local = Some(Range::new(&dims));
        self
    }

    /// Where the global ids start: `get_global_id(d)` runs over `offset[d]..offset[d] +
    /// global[d]`, as many dimensions as the global range (OpenCL devices; a CUDA device
    /// refuses a non-zero offset at [`Launch::run`]).
    pub fn offset<const N: usize>(mut self, dims: [usize; N]) -> Self {
        self.offset = Some(Range::new(&dims));
        self
    }

    /// Sets a specialization constant for this launch (part of the program's cache key).
    pub fn spec_constant<T: Pod>(mut self, constant: SpecConstant<T>, value: T) -> Self {
        self.spec
            .get_or_insert_default()
            .0
            .insert(constant.name().to_string(), as_bytes(std::slice::from_ref(&value)).to_vec());
        self
    }

    /// Runs the kernel only after the commands `events` stand for completed: events of any
    /// queue, of any device. Two queues' work is ordered this way without the host waiting,
    /// but for an event of another device that the queue's driver cannot wait for (another
    /// OpenCL device, or the other driver), which [`Launch::run`] waits for on the host.
    pub fn after(mut self, events: &[&Event]) -> Self {
        self.after.extend(events.iter().map(|&e| e.clone()));
        self
    }

    /// Takes the kernel from this executable bundle only (`kernel_not_found` if it is not
    /// there), as `use_module` in DPC++'s SYCL-modules design.
    pub fn use_kernel_bundle(mut self, bundle: &KernelBundle<Executable>) -> Self {
        self.bundle = Some((bundle.clone(), None));
        self
    }

    /// [`Launch::use_kernel_bundle`] with a device image selector: among the bundle's images
    /// that define the kernel, `select` returns the index of the one to use.
    pub fn use_kernel_bundle_with(
        mut self,
        bundle: &KernelBundle<Executable>,
        select: impl Fn(&[DeviceImage]) -> usize + 'static,
    ) -> Self {
        self.bundle = Some((bundle.clone(), Some(Box::new(select))));
        self
    }
}

impl Launch<'_, GlobalRange> {
    /// Resolves, builds (or takes from the cache) and enqueues the kernel; the event of its
    /// completion. The host does not wait for the kernel: [`Event::wait`], a read of a buffer
    /// (which waits for everything the queue was given before it), or [`Queue::wait`] does.
    pub fn run(self) -> Result<Event, Error> {
        // Read in place: moving the launch's fields out would copy its inline arguments.
        let (queue, kernel) = (self.queue, self.kernel);
        check_ranges(kernel, &self.global, self.local.as_ref(), self.offset.as_ref())?;
        let after: Vec<&backend::Event> = self.after.iter().map(|e| &e.event).collect();
        let ranges = Ranges {
            global: self.global.dims(),
            local: self.local.as_ref().map(Range::dims),
            offset: self.offset.as_ref().map(Range::dims),
        };
        if self.bundle.is_none() && self.spec.as_ref().is_none_or(|s| s.0.is_empty()) {
            return queue.launch_plain(kernel, &self.args, ranges, &after);
        }
        let (registry, program) = self.program()?;
        let device = &queue.inner.device;
        let mut k = device.take_kernel(&program, kernel)?;
        let event = queue.enqueue(&registry, kernel, &mut k, &self.args, ranges, &after)?;
        device.return_kernel(&program, kernel, k);
        Ok(Event::new(event, device.clone()))
    }
}

impl<R, S> Launch<'_, R, S> {
    /// The registry and program the kernel comes from: its bundle's, or resolved and built
    /// (or taken from the caches) with the launch's specialization values.
    pub(super) fn program(&self) -> Result<(Arc<Registry>, Arc<Program>), Error> {
        let (queue, kernel) = (self.queue, self.kernel);
        let spec = self.spec.as_ref().filter(|s| !s.0.is_empty());
        Ok(match &self.bundle {
            Some((bundle, select)) => {
                if !bundle.device_is(queue) {
                    return Err(Error::InvalidArgument(format!(
                        "kernel {kernel}: the bundle is for another device"
                    )));
                }
                if spec.is_some() {
                    return Err(Error::InvalidArgument(format!(
                        "kernel {kernel}: set specialization constants on the bundle's input, not on a launch that uses a bundle"
                    )));
                }
                (bundle.registry(), bundle.program_for(kernel, select.as_deref())?)
            }
            None => {
                let rt = runtime();
                let options =
                    Options { flags: String::new(), spec: spec.cloned().unwrap_or_default() };
                let registry = rt.registry();
                let program = queue.inner.device.program_for(
                    &registry,
                    rt.disk.as_ref(),
                    kernel,
                    &options,
                )?;
                (registry, program)
            }
        })
    }
}

impl Queue {
    /// A launch without bundle or specialization values: the kernel as one of the queue's last
    /// such launches resolved it, when nothing was loaded or unloaded since (enqueued under
    /// the queue's lock, with no other lock taken), otherwise resolved now (and then kept for
    /// the next launches).
    fn launch_plain(
        &self,
        kernel: &str,
        args: &[ArgValue<'_>],
        ranges: Ranges<'_>,
        after: &[&backend::Event],
    ) -> Result<Event, Error> {
        let device = &self.inner.device;
        let seen = LoadState::now();
        let mut kept = self.inner.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = kept.iter().rposition(|l| l.seen == seen && l.kernel == kernel) {
            trace!("cache-hit", "{kernel} on {}", device.name);
            let last = &mut kept[i];
            let enqueued =
                self.enqueue(&last.registry, kernel, &mut last.object, args, ranges, after);
            if enqueued.is_err() {
                kept.remove(i); // its arguments may be half set: never launched again
            }
            return Ok(Event::new(enqueued?, device.clone()));
        }
        drop(kept);
        let rt = runtime();
        let (registry, seen) = rt.current();
        let program =
            device.program_for(&registry, rt.disk.as_ref(), kernel, &Options::default())?;
        let mut object = device.take_kernel(&program, kernel)?;
        let event = self.enqueue(&registry, kernel, &mut object, args, ranges, after)?;
        let now = LastLaunch { kernel: kernel.to_string(), registry, seen, program, object };
        let mut kept = self.inner.last.lock().unwrap_or_else(|e| e.into_inner());
        // Kept kernels resolved before libraries were opened or closed, one another thread
        // kept meanwhile for this kernel, and the oldest beyond the limit go back to their
        // pools (unless their registry is gone).
        let mut gone: Vec<LastLaunch> =
            kept.extract_if(.., |l| l.seen != now.seen || l.kernel == now.kernel).collect();
        let current = now.registry.clone();
        kept.push(now);
        if kept.len() > KEPT_KERNELS {
            gone.push(kept.remove(0));
        }
        drop(kept);
        for l in gone.into_iter().filter(|l| Arc::ptr_eq(&l.registry, &current)) {
            device.return_kernel(&l.program, &l.kernel, l.object);
        }
        Ok(Event::new(event, device.clone()))
    }

    /// Sets the arguments and enqueues after `after`. When it fails, the caller drops
    /// `object`: it is never pooled with arguments it may not have.
    fn enqueue(
        &self,
        registry: &Registry,
        kernel: &str,
        object: &mut PooledKernel,
        args: &[ArgValue<'_>],
        Ranges { global, local, offset }: Ranges<'_>,
        after: &[&backend::Event],
    ) -> Result<backend::Event, Error> {
        let mut uses = self.check(registry, kernel, object, args)?;
        set_arguments(object, args).map_err(|(i, e)| {
            Error::InvalidArgument(format!("kernel `{kernel}` argument {i}: {e}"))
        })?;
        let queue = &self.inner.queue;
        ordered(queue, self.inner.id, &mut uses, after, |waits| {
            queue.enqueue(&object.kernel, global, local, offset, waits)
        })
        .map_err(|e| launch_error(kernel, e, &object.kernel, local, &self.inner.device))
    }

    /// Checks a launch of `object` (kernel `kernel`, from `registry`) with `args` on this
    /// queue: the arguments against the kernel's recorded parameters (once per list of
    /// argument types: the object remembers the last it accepted), then [`checked_uses`].
    #[inline]
    pub(super) fn check<'a>(
        &self,
        registry: &Registry,
        kernel: &str,
        object: &mut PooledKernel,
        args: &'a [ArgValue<'_>],
    ) -> Result<Accesses<'a>, Error> {
        let own = &self.inner.device;
        let signature = object.signature.get_or_insert_with(|| {
            let params = signature(own, registry, kernel);
            let reads = params.as_deref().map_or(0, reads_only);
            Signature { params, accepted: None, reads }
        });
        if let Some(params) = &signature.params {
            let keys = || args.iter().map(|a| a.0.key());
            if !signature.accepted.as_ref().is_some_and(|a| a.iter().copied().eq(keys())) {
                check_arguments(kernel, params, args)?;
                let accepted = signature.accepted.get_or_insert_default();
                accepted.clear();
                accepted.extend(keys());
            }
        }
        checked_uses(
            kernel,
            own,
            self.inner.stream,
            signature.params.as_deref(),
            signature.reads,
            args,
        )
    }
}

/// What a launch of `kernel` with `args` on `own` (its queue's stream numbered `stream`) uses,
/// once its arguments passed the parameter check: the buffers, each read (through a
/// parameter the kernel only reads, by the bits of `reads`) or written; refused: an argument
/// of another device, context or stream, local memory the device cannot give, overlapping
/// buffers the launch writes, and on CUDA a kernel without a record of its `params`.
#[inline]
pub(super) fn checked_uses<'a>(
    kernel: &str,
    own: &Arc<DeviceState>,
    stream: usize,
    params: Option<&[KernelParam]>,
    reads: u64,
    args: &'a [ArgValue<'_>],
) -> Result<Accesses<'a>, Error> {
    // CUDA takes a launch's arguments as bytes it cannot check: without the kernel's record
    // of its parameters, a wrong argument would be read as whatever it is.
    if params.is_none() && own.info.backend == crate::Backend::Cuda {
        return Err(unrecorded_parameters(kernel, own));
    }
    if let Some(i) = args.iter().position(|ArgValue(arg)| refused(arg, own, stream)) {
        return Err(refused_argument(kernel, i, &args[i].0, own));
    }
    let mut uses = Accesses::new();
    for (i, ArgValue(arg)) in args.iter().enumerate() {
        if let Arg::Mem(.., span) = arg {
            let only_reads = i < 64 && reads & (1 << i) != 0;
            uses.push((span.uses(), if only_reads { Access::Read } else { Access::Write }));
        }
    }
    if uses.len() > 1 {
        check_overlaps(kernel, args, &uses)?;
    }
    Ok(uses)
}

/// The parameters a kernel only reads through, as bits by index (parameters from the 64th
/// on count as written): a `constant` pointer, or a `global` pointer to `const`.
pub(super) fn reads_only(params: &[KernelParam]) -> u64 {
    params
        .iter()
        .take(64)
        .enumerate()
        .filter(|(_, p)| p.reads_only())
        .fold(0, |bits, (i, _)| bits | 1 << i)
}

/// That no two buffer arguments of one allocation overlap where the launch writes either
/// (a buffer and a view of it, two overlapping views): OpenCL leaves such a launch undefined.
/// The same buffer (or view) twice is one memory object, which OpenCL takes.
fn check_overlaps(kernel: &str, args: &[ArgValue<'_>], uses: &Accesses<'_>) -> Result<(), Error> {
    let mems = || {
        args.iter().enumerate().filter_map(|(i, ArgValue(arg))| match arg {
            Arg::Mem(mem, .., span) => Some((i, *mem, *span)),
            _ => None,
        })
    };
    let writes = |span: &Span<'_>| {
        uses.iter().any(|(u, access)| std::ptr::eq(*u, span.uses()) && *access == Access::Write)
    };
    for (i, a, span_a) in mems() {
        for (j, b, span_b) in mems().filter(|(j, ..)| *j > i) {
            if !Arc::ptr_eq(a, b) && span_a.overlaps(&span_b) && writes(&span_a) {
                return Err(Error::InvalidArgument(format!(
                    "kernel `{kernel}` arguments {i} and {j}: a buffer and a view of it (or two \
                     views) that overlap (bytes {}..{} and {}..{}), in a launch that writes \
                     them: OpenCL leaves such a launch undefined; pass the buffer once and the \
                     offsets as values, or views that do not overlap",
                    span_a.start,
                    span_a.start + span_a.len,
                    span_b.start,
                    span_b.start + span_b.len
                )));
            }
        }
    }
    Ok(())
}

/// The error of a CUDA launch of a kernel whose images record no parameters; out of the
/// launch's path.
#[cold]
#[inline(never)]
fn unrecorded_parameters(kernel: &str, own: &DeviceState) -> Error {
    Error::InvalidArgument(format!(
        "kernel `{kernel}` on {}: its images carry no record of its parameters (SYCL/kernel \
         arguments), so its arguments cannot be checked, and CUDA would read each as whatever \
         it is: relink the binary with this toolkit's sycl-ld, which records them",
        own.describe()
    ))
}

impl Queue {
    /// Runs `kernel` of a program built outside the registry (a test's source), with `args`.
    pub(crate) fn run_program(
        &self,
        program: &Arc<Program>,
        kernel: &str,
        args: &[ArgValue],
        global: &[usize],
    ) -> Result<(), Error> {
        let mut object =
            PooledKernel { kernel: program.kernel(kernel)?, set: Vec::new(), signature: None };
        set_arguments(&mut object, args).map_err(|(i, e)| {
            Error::InvalidArgument(format!("kernel `{kernel}` argument {i}: {e}"))
        })?;
        self.inner.queue.enqueue(&object.kernel, global, None, None, &[])?.wait()
    }
}

/// A launch's global range, work-group size and offset, as checked.
#[derive(Clone, Copy)]
pub(super) struct Ranges<'a> {
    pub(super) global: &'a [usize],
    pub(super) local: Option<&'a [usize]>,
    pub(super) offset: Option<&'a [usize]>,
}

/// A global range or a work-group size: up to three dimensions, kept without allocating (a
/// launch is built for every kernel run). More than three are refused at `run`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Range {
    dims: [usize; 3],
    len: usize,
}

impl Range {
    #[inline]
    fn new(dims: &[usize]) -> Range {
        let mut out = Range { dims: [0; 3], len: dims.len() };
        for (slot, d) in out.dims.iter_mut().zip(dims) {
            *slot = *d;
        }
        out
    }

    #[inline]
    pub(super) fn dims(&self) -> &[usize] {
        &self.dims[..self.len.min(3)]
    }
}

/// A global range of one to three dimensions; a work-group size (when given) of as many, each
/// dividing the global size in its dimension, as OpenCL requires; an offset (when given) of as
/// many.
pub(super) fn check_ranges(
    kernel: &str,
    global: &Range,
    local: Option<&Range>,
    offset: Option<&Range>,
) -> Result<(), Error> {
    if global.len == 0 || global.len > 3 {
        return Err(Error::InvalidArgument(format!(
            "kernel `{kernel}`: a global range has one to three dimensions, not {}",
            global.len
        )));
    }
    if global.dims().iter().try_fold(1usize, |n, &d| n.checked_mul(d)).is_none() {
        return Err(Error::InvalidArgument(format!(
            "kernel `{kernel}`: the global range {:?} has more work-items than a size holds \
             ({})",
            global.dims(),
            usize::MAX
        )));
    }
    for (what, range) in [("the work-group size", local), ("the offset", offset)] {
        if let Some(range) = range.filter(|r| r.len != global.len) {
            return Err(Error::InvalidArgument(format!(
                "kernel `{kernel}`: {what} {:?} has {} dimension(s), the global range {:?} has {}",
                range.dims(),
                range.len,
                global.dims(),
                global.len
            )));
        }
    }
    let Some(local) = local else { return Ok(()) };
    if let Some(d) = (0..global.len).find(|&d| local.dims[d] == 0) {
        return Err(Error::InvalidArgument(format!(
            "kernel `{kernel}`: the work-group size {:?} is 0 in dimension {d}: a work-group has \
             at least one work-item in each dimension",
            local.dims()
        )));
    }
    if let Some(d) = (0..global.len).find(|&d| !global.dims[d].is_multiple_of(local.dims[d])) {
        return Err(Error::InvalidArgument(format!(
            "kernel `{kernel}`: the work-group size {:?} does not divide the global range {:?} (dimension {d}: {} is not a \
             multiple of {}); round the global range up to a multiple and skip the extra work-items in the kernel",
            local.dims(),
            global.dims(),
            global.dims[d],
            local.dims[d]
        )));
    }
    Ok(())
}

/// Sets the arguments that differ from those last set on the kernel object.
fn set_arguments(k: &mut PooledKernel, args: &[ArgValue<'_>]) -> Result<(), (usize, Error)> {
    k.set.truncate(args.len());
    for (i, arg) in args.iter().enumerate() {
        let unchanged = match (&arg.0, k.set.get(i)) {
            (Arg::Mem(mem, ..), Some(SetArg::Mem(was))) => {
                std::ptr::eq(was.as_ptr(), Arc::as_ptr(mem))
            }
            (Arg::Bytes(bytes, _), Some(SetArg::Bytes(was))) => was == bytes,
            (Arg::Local(size, _), Some(SetArg::Local(was))) => was == size,
            (Arg::Native(mem, ..), Some(SetArg::Native(was))) => was == mem,
            _ => false,
        };
        if unchanged {
            continue;
        }
        let now = match &arg.0 {
            Arg::Mem(mem, ..) => {
                k.kernel.set_mem(i as u32, mem).map(|()| SetArg::Mem(Arc::downgrade(mem)))
            }
            Arg::Bytes(bytes, _) => {
                k.kernel.set_bytes(i as u32, bytes).map(|()| SetArg::Bytes(bytes.clone()))
            }
            Arg::Native(mem, ..) => {
                k.kernel.set_native(i as u32, *mem).map(|()| SetArg::Native(*mem))
            }
            Arg::Local(size, _) => {
                k.kernel.set_local(i as u32, *size).map(|()| SetArg::Local(*size))
            }
            Arg::Unusable(why, _) => Err(Error::InvalidArgument(why.to_string())),
        }
        .map_err(|e| (i, e))?;
        match k.set.get_mut(i) {
            Some(slot) => *slot = now,
            None => k.set.push(now),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(kind: ParamKind, size: u32, ty: &str, name: &str) -> KernelParam {
        KernelParam { kind, size, ty: ty.into(), name: name.into() }
    }

    fn check_args(params: &[KernelParam], args: &[ArgValue<'_>]) -> Result<(), String> {
        check_arguments("k", params, args).map_err(|e| e.to_string())
    }

    #[test]
    fn values_and_local_memory_of_the_wrong_type_are_refused_naming_both() {
        let n = [param(ParamKind::Scalar, 4, "int", "n")];
        assert_eq!(check_args(&n, &[5i32.to_arg()]), Ok(()));
        assert_eq!(check_args(&n, &[5u32.to_arg()]), Ok(()), "SPIR-V has no signedness");
        assert_eq!(
            check_args(&n, &[5.0f32.to_arg()]).unwrap_err(),
            "invalid argument: kernel `k` argument 0 (int n) takes int (i32 or u32); got f32 (4 bytes)"
        );
        let v = [param(ParamKind::Scalar, 16, "float4", "v")];
        assert_eq!(check_args(&v, &[[1f32; 4].to_arg()]), Ok(()));
        assert!(check_args(&v, &[[1i32; 4].to_arg()])
            .unwrap_err()
            .ends_with("takes float4 ([f32; 4]); got [i32; 4] (16 bytes)"));
        let pt = [param(ParamKind::Struct, 8, "struct Pt", "p")];
        #[derive(Clone, Copy)]
        #[repr(C)]
        struct Pt {
            x: f32,
            y: f32,
        }
        // SAFETY: two f32s, no padding.
        unsafe impl Pod for Pt {}
        assert_eq!(check_args(&pt, &[Pt { x: 1.0, y: 2.0 }.to_arg()]), Ok(()));
        // A struct's layout is the program's: any value of its size goes.
        assert_eq!(check_args(&pt, &[[1f32; 2].to_arg()]), Ok(()));
        assert!(check_args(&pt, &[7u32.to_arg()]).unwrap_err().ends_with(
            "takes struct Pt (8 bytes: a #[repr(C)] type of its layout); got u32 (4 bytes)"
        ));
        let scratch = [param(ParamKind::Local, 8, "local int*", "scratch")];
        assert_eq!(check_args(&scratch, &[Local::<u32>::new(4).to_arg()]), Ok(()));
        assert_eq!(
            check_args(&scratch, &[Local::<f64>::new(4).to_arg()]).unwrap_err(),
            "invalid argument: kernel `k` argument 0 (local int* scratch) takes local memory of int (i32 or u32); \
             got local memory of f64 (32 bytes)"
        );
    }

    fn check(global: &[usize], local: Option<&[usize]>) -> Result<(), String> {
        check_ranges("k", &Range::new(global), local.map(Range::new).as_ref(), None)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn ranges_are_checked_with_both_sizes_named() {
        assert_eq!(check(&[64], None), Ok(()));
        assert_eq!(check(&[64, 8], Some(&[16, 8])), Ok(()));
        assert_eq!(
            check(&[100], Some(&[16])).unwrap_err(),
            "invalid argument: kernel `k`: the work-group size [16] does not divide the global range [100] (dimension 0: \
             100 is not a multiple of 16); round the global range up to a multiple and skip the extra work-items in the kernel"
        );
        assert!(check(&[64, 64], Some(&[8, 0]))
            .unwrap_err()
            .contains("the work-group size [8, 0] is 0 in dimension 1"));
        assert!(check(&[1 << 33, 1 << 33], None).unwrap_err().contains(
            "the global range [8589934592, 8589934592] has more work-items than a size holds"
        ));
        assert!(check(&[64, 64], Some(&[8])).unwrap_err().contains(
            "the work-group size [8] has 1 dimension(s), the global range [64, 64] has 2"
        ));
        assert!(check(&[1, 1, 1, 1], None).unwrap_err().contains("one to three dimensions, not 4"));
        assert!(check(&[], None).unwrap_err().contains("one to three dimensions, not 0"));
    }
}
