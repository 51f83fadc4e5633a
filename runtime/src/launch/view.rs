//! Views: some of a buffer's values as memory of their own ([`BufferView`], from
//! [`Buffer::slice`] and [`Buffer::split_at`]), read, written, copied, filled and given to
//! kernels as a buffer is; [`AsView`], which every call that takes a buffer's values takes
//! (a buffer, or a view); and copies, the one path for all of them: on the device within a
//! device, between CUDA GPUs (a peer copy), and staged through host memory between any other
//! two devices.
//!
//! A view is a buffer's reference and a range: making one allocates nothing and asks the
//! driver nothing. Only a launch needs the view as a memory object of its own (an OpenCL
//! sub-buffer, which must start at a multiple of the device's base alignment; on CUDA an
//! address), made at its first launch and kept with the view.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use smallvec::smallvec;

use super::event::Event;
use super::order::{ordered, Access};
use super::queue::{as_bytes, Buffer, Pod};
use crate::backend::{self, Memory};
use crate::{Backend, Error};

/// Some of a [`Buffer`]'s values ([`Buffer::slice`], [`Buffer::split_at`]), which it borrows:
/// read, written, copied and filled as a buffer is (`read_into`, `write`, `copy_from`, `fill`,
/// and their `*_async` forms), and a kernel argument of its own, whose pointer starts at the
/// view's first value.
///
/// Its commands are ordered as its buffer's (they share one record of uses: the crate's
/// [Ordering](crate#ordering)). A launch that writes a buffer or a view may not also take an
/// overlapping view of it (OpenCL leaves such a launch undefined): [`crate::Launch::run`]
/// refuses it. There is no mutable view: writing takes `&self`, as it does for a buffer (the
/// ordering, not the borrow checker, keeps commands on one buffer apart), so two views of one
/// buffer are written at once without a split borrow.
///
/// On OpenCL, a view given to a kernel must start at a multiple of the device's base address
/// alignment ([`DeviceInfo::view_align_bytes`](crate::DeviceInfo::view_align_bytes): 128 bytes
/// on most devices): a launch refuses another, saying so. Every other call takes a view
/// anywhere.
pub struct BufferView<'b, T: Pod> {
    pub(super) buffer: &'b Buffer<T>,
    /// Where the view starts, in values of the buffer.
    first: usize,
    len: usize,
    /// The view as a kernel argument's memory (the buffer's own for a view of all of it),
    /// made at its first launch; or why the device cannot make it.
    kernel_mem: OnceLock<Result<Arc<Memory>, String>>,
}

/// A buffer's values, or some of them: what calls that take device memory take
/// ([`BufferView::copy_from`], [`Buffer::copy_from`], …): a [`Buffer`] (all its values) or a
/// [`BufferView`].
pub trait AsView<T: Pod> {
    /// The values as a view.
    fn as_view(&self) -> BufferView<'_, T>;
}

impl<T: Pod> AsView<T> for Buffer<T> {
    fn as_view(&self) -> BufferView<'_, T> {
        BufferView::new(self, 0, self.len())
    }
}

impl<T: Pod> AsView<T> for BufferView<'_, T> {
    fn as_view(&self) -> BufferView<'_, T> {
        BufferView::new(self.buffer, self.first, self.len)
    }
}

impl<'b, T: Pod> BufferView<'b, T> {
    /// Values `first..first + len` of `buffer`, which the caller checked lie within it.
    pub(super) fn new(buffer: &'b Buffer<T>, first: usize, len: usize) -> BufferView<'b, T> {
        BufferView { buffer, first, len, kernel_mem: OnceLock::new() }
    }

    /// How many values it spans.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it spans none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer it is a view of.
    pub fn buffer(&self) -> &'b Buffer<T> {
        self.buffer
    }

    /// The values of the buffer it spans.
    pub fn range(&self) -> Range<usize> {
        self.first..self.first + self.len
    }

    /// Where it starts in its buffer, in bytes.
    pub(super) fn start_bytes(&self) -> usize {
        self.first * size_of::<T>()
    }

    /// Its size in bytes (within a buffer, whose size did not overflow).
    pub(super) fn size_bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// The values at `range` of this view (counted from its start), as a view of the buffer.
    pub fn slice(&self, range: Range<usize>) -> Result<BufferView<'b, T>, Error> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::InvalidArgument(format!(
                "viewing values {}..{} of a view of {}",
                range.start, range.end, self.len
            )));
        }
        Ok(BufferView::new(self.buffer, self.first + range.start, range.len()))
    }

    /// The view in two at `mid`: its values before `mid`, and from `mid` on.
    pub fn split_at(&self, mid: usize) -> Result<(BufferView<'b, T>, BufferView<'b, T>), Error> {
        if mid > self.len {
            return Err(Error::InvalidArgument(format!(
                "splitting a view of {} values at {mid}",
                self.len
            )));
        }
        Ok((self.slice(0..mid)?, self.slice(mid..self.len)?))
    }

    /// Copies the view's values to the host, after everything submitted to its buffer's queue
    /// before and every command of another queue that writes the buffer.
    pub fn read(&self) -> Result<Vec<T>, Error> {
        let mut out = super::queue::zeroed(self.len);
        self.read_into(&mut out)?;
        Ok(out)
    }

    /// Copies the view's values into `out`, which holds exactly as many, after everything
    /// submitted to its buffer's queue before and every command of another queue that writes
    /// the buffer; allocates nothing.
    pub fn read_into(&self, out: &mut [T]) -> Result<(), Error> {
        check_host("reading", self.len, out.len())?;
        let offset = self.start_bytes();
        let out = super::queue::as_bytes_mut(out);
        let buffer = self.buffer;
        let copy = buffer.ordered(Access::Read, |queue| {
            match queue.read_blocking(buffer.mem(), offset, out) {
                // CUDA's own blocking read (staged through page-locked memory when large),
                // made while the buffer's record is held; a marker after it stands for it.
                Some(read) => read.and_then(|()| queue.marker()),
                // SAFETY: `out` (exclusively borrowed for this call) holds `out.len()` bytes,
                // and the view lies within the buffer; the copy is waited for below, before
                // `out` can go. Enqueued and recorded first, so that a command another thread
                // gives another queue meanwhile comes after it.
                None => unsafe {
                    queue.read_async(buffer.mem(), offset, out.as_mut_ptr(), out.len())
                },
            }
        })?;
        copy.wait()
    }

    /// Overwrites the view's values with `data`, which holds exactly as many, after
    /// everything submitted to its buffer's queue before and every command of another queue
    /// that uses the buffer.
    pub fn write(&self, data: &[T]) -> Result<(), Error> {
        check_host("writing", self.len, data.len())?;
        let offset = self.start_bytes();
        let data = as_bytes(data);
        let buffer = self.buffer;
        let copy = buffer.ordered(Access::Write, |queue| {
            // SAFETY: `data` (borrowed for this call) holds the bytes written, within the
            // buffer (the view lies within it); the copy is waited for below, before `data`
            // can go.
            unsafe { queue.write_async(buffer.mem(), offset, data.as_ptr(), data.len()) }
        })?;
        copy.wait()
    }

    /// Copies every value of `src` (a buffer or a view of as many values, of any device) into
    /// this view; returns when the copy is done. See [`BufferView::copy_from_async`].
    pub fn copy_from(&self, src: &impl AsView<T>) -> Result<(), Error> {
        self.copy_from_async(src)?.wait()
    }

    /// Starts copying every value of `src`, a buffer or a view of as many values, into this
    /// view: after everything submitted to this buffer's queue before and every command of
    /// another queue that writes `src` or uses this buffer; the event of its completion, on
    /// this buffer's queue.
    ///
    /// Within a device the driver copies, and the host does not wait. Between two CUDA GPUs
    /// it is a peer copy (`cuMemcpyPeerAsync`, with peer access enabled once per pair where
    /// the GPUs have it), and the host does not wait either. Between other devices (OpenCL
    /// devices, or an OpenCL device and a GPU) the copy goes through host memory: the source
    /// is mapped (on a CPU device, its own memory: no copy) and written into the destination,
    /// and the host waits for both before this returns. Overlapping ranges of one buffer are
    /// refused (copying a range onto itself changes nothing, and is ordered as a read).
    pub fn copy_from_async(&self, src: &impl AsView<T>) -> Result<Event, Error> {
        let src = src.as_view();
        if src.len != self.len {
            return Err(Error::InvalidArgument(format!(
                "copying {} values into {} values: a copy takes as many as it writes (a view \
                 of either: slice)",
                src.len, self.len
            )));
        }
        let event = copy(&src, self)?;
        Ok(Event::new(event, self.buffer.queue().state()))
    }

    /// Sets every value of the view to `value`, on the device; returns when it is done.
    pub fn fill(&self, value: T) -> Result<(), Error> {
        self.fill_async(value)?.wait()
    }

    /// [`BufferView::fill`] without waiting: the event of the fill's completion, after
    /// everything submitted to the buffer's queue before (see [`Buffer::fill_async`] for the
    /// values the driver does not fill itself).
    pub fn fill_async(&self, value: T) -> Result<Event, Error> {
        let pattern = as_bytes(std::slice::from_ref(&value));
        let event = self.buffer.fill_bytes(pattern, self.start_bytes(), self.size_bytes())?;
        Ok(Event::new(event, self.buffer.queue().state()))
    }

    /// The view's memory for a kernel argument: the buffer's own for a view of all of it,
    /// otherwise made now (an OpenCL sub-buffer, a CUDA address) and kept; why not where the
    /// device cannot make it.
    pub(super) fn kernel_mem(&self) -> Result<&Arc<Memory>, &str> {
        let made = self.kernel_mem.get_or_init(|| {
            let root = self.buffer.mem();
            if self.first == 0 && self.len == self.buffer.len() {
                return Ok(root.clone());
            }
            self.check_aligned()?;
            Memory::view(root, self.start_bytes(), self.size_bytes())
                .map(Arc::new)
                .map_err(|e| e.to_string())
        });
        made.as_ref().map_err(String::as_str)
    }

    /// That the device can start a kernel's memory where the view starts.
    fn check_aligned(&self) -> Result<(), String> {
        let size = size_of::<T>();
        let device = &self.buffer.queue().inner.device;
        let align = match self.buffer.mem().views_anywhere() {
            true => 1, // a device allocation: an address plus the offset
            false => device.info.view_align_bytes.max(1),
        };
        if self.is_empty() || (self.start_bytes() as u64).is_multiple_of(align) {
            return Ok(());
        }
        // In values too, where the alignment is a whole number of them.
        let values = match size as u64 {
            0 => String::new(),
            s if align.is_multiple_of(s) => {
                format!("; {} values of {}", align / s, std::any::type_name::<T>())
            }
            _ => String::new(),
        };
        Err(format!(
            "a view from value {} (byte {}): {} starts a kernel's views only at multiples of \
             {align} bytes (DeviceInfo::view_align_bytes{values}): start the view there, or \
             pass the offset to the kernel (views anywhere are read, written, copied and \
             filled)",
            self.first,
            self.start_bytes(),
            device.describe(),
        ))
    }
}

/// That the host side holds `host` values, as many as the device side's `len`.
fn check_host(what: &str, len: usize, host: usize) -> Result<(), Error> {
    match len == host {
        true => Ok(()),
        false => Err(Error::InvalidArgument(format!(
            "{what} {len} values of a buffer with {host} on the host"
        ))),
    }
}

/// Whether copying `src` into `dst` (as many values) within one buffer changes nothing: the
/// same values, or none. Other overlapping ranges of one buffer are an error, which no driver
/// copies; `what` begins its message (`copying`, `a recorded copy of`).
pub(super) fn copies_nothing<T: Pod>(
    src: &BufferView<'_, T>,
    dst: &BufferView<'_, T>,
    what: &str,
) -> Result<bool, Error> {
    let (from, to, size) = (src.start_bytes(), dst.start_bytes(), dst.size_bytes());
    if !Arc::ptr_eq(&src.buffer.alloc, &dst.buffer.alloc) {
        return Ok(false);
    }
    if from == to || size == 0 {
        return Ok(true);
    }
    if from < to + size && to < from + size {
        return Err(Error::InvalidArgument(format!(
            "{what} values {:?} onto values {:?} of one buffer: the ranges overlap; copy \
             through another buffer",
            src.range(),
            dst.range()
        )));
    }
    Ok(false)
}

/// Copies `src` into `dst`, of as many values, on `dst`'s queue after the conflicting uses of
/// both buffers (on any device): by the driver within a device and between CUDA GPUs,
/// otherwise staged through host memory ([`staged`]).
fn copy<T: Pod>(src: &BufferView<'_, T>, dst: &BufferView<'_, T>) -> Result<backend::Event, Error> {
    if copies_nothing(src, dst, "copying")? {
        // Nothing changes, but the event still comes after what the queue was given before,
        // and what other queues write the buffer.
        return dst.buffer.settle(Access::Read);
    }
    let (src_queue, dst_queue) = (&src.buffer.queue().inner, &dst.buffer.queue().inner);
    let by_driver = Arc::ptr_eq(&src_queue.device, &dst_queue.device)
        || [&src_queue.device, &dst_queue.device].iter().all(|d| d.info.backend == Backend::Cuda);
    if !by_driver {
        // A map a forgotten guard left in place is ended on its own buffer's queue (`ordered`
        // would end it on the destination's, of another device). No other map can begin
        // while this copy borrows both buffers.
        src.buffer.end_map()?;
        dst.buffer.end_map()?;
    }
    let (from, to, size) = (src.start_bytes(), dst.start_bytes(), dst.size_bytes());
    let mut uses =
        smallvec![(&src.buffer.alloc.uses, Access::Read), (&dst.buffer.alloc.uses, Access::Write)];
    ordered(&dst_queue.queue, dst_queue.id, &mut uses, &[], |waits| match by_driver {
        true => dst_queue.queue.copy((src.buffer.mem(), from), (dst.buffer.mem(), to), size, waits),
        false => staged(src, dst, waits),
    })
}

/// Copies `src` into `dst`, of two devices that cannot copy between them,
/// through host memory, after `waits` (the conflicting uses `dst`'s queue can wait for; the
/// source's other uses, of its own device, `ordered` waited for on the host): `src`'s buffer
/// mapped on its queue (on a CPU device its own memory: no copy; on CUDA a copy into
/// page-locked memory, after that queue's earlier commands), written into `dst` on its queue,
/// both waited for, the map ended. Both buffers' records are held throughout (the host waits
/// with them held, as for CUDA's blocking read), so that no command of another thread comes
/// between.
fn staged<T: Pod>(
    src: &BufferView<'_, T>,
    dst: &BufferView<'_, T>,
    waits: &[&backend::Event],
) -> Result<backend::Event, Error> {
    let (src_queue, dst_queue) = (&src.buffer.queue().inner.queue, &dst.buffer.queue().inner.queue);
    let (from, to, size) = (src.start_bytes(), dst.start_bytes(), dst.size_bytes());
    dst_queue.wait_for(waits)?;
    if size == 0 {
        return dst_queue.marker();
    }
    let mapping = src_queue.map(src.buffer.mem(), from + size, false)?;
    // SAFETY: the map holds the source buffer's first `from + size` bytes, and the
    // destination's range lies within its buffer; the write is waited for before the map ends,
    // below.
    let written = unsafe {
        dst_queue.write_async(dst.buffer.mem(), to, mapping.as_ptr().add(from).cast_const(), size)
    }
    .and_then(|event| event.wait().map(|()| event));
    let unmapped = src_queue.unmap(src.buffer.mem(), mapping);
    let event = written?;
    unmapped.map(|()| event)
}

/// A buffer's reads, writes, copies, fills and views: each through a view of the values it
/// names (all of them, but for the ranges), the one path.
impl<T: Pod> Buffer<T> {
    /// Copies the buffer to the host, after everything submitted to its queue before and
    /// every command of another queue that writes it.
    pub fn read(&self) -> Result<Vec<T>, Error> {
        self.as_view().read()
    }

    /// Copies the buffer into `out`, which holds exactly [`Buffer::len`] values, after
    /// everything submitted to its queue before and every command of another queue that
    /// writes it; allocates nothing.
    pub fn read_into(&self, out: &mut [T]) -> Result<(), Error> {
        self.as_view().read_into(out)
    }

    /// Copies the values at `range` into `out`, which holds as many, after everything
    /// submitted to its queue before and every command of another queue that writes the
    /// buffer; allocates nothing. (`buffer.slice(range)?.read_into(out)`.)
    pub fn read_range(&self, range: std::ops::Range<usize>, out: &mut [T]) -> Result<(), Error> {
        self.check_range("reading", &range, out.len())?;
        self.slice(range)?.read_into(out)
    }

    /// Overwrites the buffer with `data`, which must have exactly `len` elements.
    pub fn write(&self, data: &[T]) -> Result<(), Error> {
        if data.len() != self.len() {
            return Err(Error::InvalidArgument(format!(
                "writing {} elements into a buffer of {}",
                data.len(),
                self.len()
            )));
        }
        self.as_view().write(data)
    }

    /// Overwrites the values from `offset` on with `data`, after everything submitted to the
    /// buffer's queue before and every command of another queue that uses the buffer.
    pub fn write_at(&self, offset: usize, data: &[T]) -> Result<(), Error> {
        let range = offset..offset.saturating_add(data.len());
        self.check_range("writing", &range, data.len())?;
        self.slice(range)?.write(data)
    }

    /// Copies every value of `src` (a buffer or a view of as many values, of any device)
    /// into this one; returns when the copy is done. See [`BufferView::copy_from_async`].
    pub fn copy_from(&self, src: &impl AsView<T>) -> Result<(), Error> {
        self.copy_from_async(src)?.wait()
    }

    /// [`Buffer::copy_from`] without waiting: the event of the copy's completion, on this
    /// buffer's queue, after everything submitted to it before and every command of another
    /// queue that writes `src` or uses this buffer. Within a device, and between CUDA GPUs
    /// (a peer copy), the host does not wait; between other devices the copy is staged
    /// through host memory, which the host waits for ([`BufferView::copy_from_async`]).
    pub fn copy_from_async(&self, src: &impl AsView<T>) -> Result<Event, Error> {
        self.as_view().copy_from_async(src)
    }

    /// Sets every value to `value`, on the device; returns when it is done.
    pub fn fill(&self, value: T) -> Result<(), Error> {
        self.fill_async(value)?.wait()
    }

    /// [`Buffer::fill`] without waiting: the event of the fill's completion, after everything
    /// submitted to the buffer's queue before. The driver fills where it takes the value's
    /// size as a pattern (OpenCL: 1, 2, 4, … 128 bytes; CUDA: a value that repeats 1, 2 or 4
    /// bytes); any other value (a 12-byte `[f32; 3]`, an `f64` on CUDA) is still filled on the
    /// device, without the host: its first copy byte by byte, then copies of what is filled
    /// over the rest, each twice as long as the one before.
    pub fn fill_async(&self, value: T) -> Result<Event, Error> {
        self.as_view().fill_async(value)
    }

    /// The values at `range`, as a view: read, written, copied, filled, and given to kernels
    /// (`q.launch(k).arg(&buffer.slice(10..20)?)`, an OpenCL sub-buffer or a CUDA address
    /// plus the offset). A view is made anywhere in the buffer, and allocates nothing; as a
    /// kernel argument on OpenCL it must start at a multiple of the device's base address
    /// alignment ([`DeviceInfo::view_align_bytes`](crate::DeviceInfo::view_align_bytes): 128
    /// bytes on most devices), which the launch checks. An empty range anywhere in the buffer
    /// is a view of no values.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Result<BufferView<'_, T>, Error> {
        self.check_range("viewing", &range, range.len())?;
        Ok(BufferView::new(self, range.start, range.len()))
    }

    /// The buffer in two views at `mid`: its values before `mid`, and from `mid` on (for
    /// double buffering, halves on two queues, a halo and its interior). Both are written
    /// through `&self`, as the buffer is: no mutable form is needed.
    pub fn split_at(&self, mid: usize) -> Result<(BufferView<'_, T>, BufferView<'_, T>), Error> {
        self.as_view().split_at(mid)
    }
}
