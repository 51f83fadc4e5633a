//! The queue's commands over both drivers: each dispatched to the queue's own driver with the
//! buffers, kernel and events projected to it (a value of another backend is refused), and
//! what is the same for every backend: an empty copy is a marker (drivers refuse empty
//! copies), a fill the driver does not take is made of its fills and copies, and a wait for no
//! events enqueues nothing.

#[cfg(doc)]
use super::api;
use super::api::Queue as _;
use super::{another, events_of, Event, Kernel, Mapping, Memory, Queue};
use crate::Error;

impl Queue {
    /// [`api::Queue::launch`] of `kernel`, after the commands `after` stand for.
    pub(crate) fn enqueue(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[&Event],
    ) -> Result<Event, Error> {
        match self {
            Queue::OpenCl(q) => {
                let k = kernel.opencl()?;
                q.launch(k, global, local, offset, &events_of(after, Event::opencl)?)
                    .map(Event::OpenCl)
            }
            Queue::Cuda(s) => {
                let k = kernel.cuda()?;
                s.launch(k, global, local, offset, &events_of(after, Event::cuda)?).map(Event::Cuda)
            }
        }
    }

    /// [`api::Queue::flush`].
    pub(crate) fn flush(&self) -> Result<(), Error> {
        match self {
            Queue::OpenCl(q) => q.flush(),
            Queue::Cuda(s) => s.flush(),
        }
    }

    /// [`api::Queue::read_blocking`]; `None` too for a buffer of another backend (whose
    /// asynchronous read then refuses it).
    pub(crate) fn read_blocking(
        &self,
        mem: &Memory,
        offset: usize,
        out: &mut [u8],
    ) -> Option<Result<(), Error>> {
        match self {
            Queue::OpenCl(q) => q.read_blocking(mem.opencl().ok()?, offset, out),
            Queue::Cuda(s) => s.read_blocking(mem.cuda().ok()?, offset, out),
        }
    }

    /// [`api::Queue::read_async`]; for no bytes, an event that completes as a copy would
    /// (drivers refuse empty copies).
    ///
    /// # Safety
    /// As [`api::Queue::read_async`].
    pub(crate) unsafe fn read_async(
        &self,
        mem: &Memory,
        offset: usize,
        out: *mut u8,
        size: usize,
    ) -> Result<Event, Error> {
        if size == 0 {
            return self.marker();
        }
        // SAFETY: the caller keeps `out` as the backends require.
        unsafe {
            match self {
                Queue::OpenCl(q) => {
                    q.read_async(mem.opencl()?, offset, out, size).map(Event::OpenCl)
                }
                Queue::Cuda(s) => s.read_async(mem.cuda()?, offset, out, size).map(Event::Cuda),
            }
        }
    }

    /// [`api::Queue::write_async`]; for no bytes, an event that completes as a copy would.
    ///
    /// # Safety
    /// As [`api::Queue::write_async`].
    pub(crate) unsafe fn write_async(
        &self,
        mem: &Memory,
        offset: usize,
        data: *const u8,
        size: usize,
    ) -> Result<Event, Error> {
        if size == 0 {
            return self.marker();
        }
        // SAFETY: the caller keeps `data` as the backends require.
        unsafe {
            match self {
                Queue::OpenCl(q) => {
                    q.write_async(mem.opencl()?, offset, data, size).map(Event::OpenCl)
                }
                Queue::Cuda(s) => s.write_async(mem.cuda()?, offset, data, size).map(Event::Cuda),
            }
        }
    }

    /// [`api::Queue::wait_for`]; nothing for no events (OpenCL would enqueue a barrier that
    /// waits for nothing).
    pub(crate) fn wait_for(&self, after: &[&Event]) -> Result<(), Error> {
        if after.is_empty() {
            return Ok(());
        }
        match self {
            Queue::OpenCl(q) => q.wait_for(&events_of(after, Event::opencl)?),
            Queue::Cuda(s) => s.wait_for(&events_of(after, Event::cuda)?),
        }
    }

    /// Whether the queue can wait for `event` on the device: an event of its own driver
    /// context on OpenCL (a wait list takes no other), of any GPU on CUDA
    /// (`cuStreamWaitEvent` takes events of other contexts and devices); never an event of
    /// the other driver. What it cannot wait for, the host waits for (`launch/order.rs`).
    pub(crate) fn takes(&self, event: &Event) -> bool {
        match (self, event) {
            (Queue::OpenCl(q), Event::OpenCl(e)) => {
                matches!((q.context(), e.context()), (Ok(a), Ok(b)) if a == b)
            }
            (Queue::Cuda(_), Event::Cuda(_)) => true,
            _ => false,
        }
    }

    /// [`api::Queue::marker`].
    pub(crate) fn marker(&self) -> Result<Event, Error> {
        match self {
            Queue::OpenCl(q) => q.marker().map(Event::OpenCl),
            Queue::Cuda(s) => s.marker().map(Event::Cuda),
        }
    }

    /// [`api::Queue::map`] of `size` bytes, at least one.
    pub(crate) fn map(&self, mem: &Memory, size: usize, write: bool) -> Result<Mapping, Error> {
        let size = size.max(1);
        match self {
            Queue::OpenCl(q) => q.map(mem.opencl()?, size, write).map(Mapping::OpenCl),
            Queue::Cuda(s) => s.map(mem.cuda()?, size, write).map(Mapping::Cuda),
        }
    }

    /// [`api::Queue::unmap`]. A buffer of another backend is refused as its mapping is: the
    /// map was made of the buffer.
    pub(crate) fn unmap(&self, mem: &Memory, mapping: Mapping) -> Result<(), Error> {
        let wrong = |_| another("a mapping");
        match self {
            Queue::OpenCl(q) => q.unmap(mem.opencl().map_err(wrong)?, mapping.opencl()?),
            Queue::Cuda(s) => s.unmap(mem.cuda().map_err(wrong)?, mapping.cuda()?),
        }
    }

    /// [`api::Queue::copy`]; for no bytes, an event that completes as a copy would.
    pub(crate) fn copy(
        &self,
        (src, src_offset): (&Memory, usize),
        (dst, dst_offset): (&Memory, usize),
        size: usize,
        after: &[&Event],
    ) -> Result<Event, Error> {
        if size == 0 {
            return self.marker();
        }
        match self {
            Queue::OpenCl(q) => {
                let (src, dst) = ((src.opencl()?, src_offset), (dst.opencl()?, dst_offset));
                q.copy(src, dst, size, &events_of(after, Event::opencl)?).map(Event::OpenCl)
            }
            Queue::Cuda(s) => {
                let (src, dst) = ((src.cuda()?, src_offset), (dst.cuda()?, dst_offset));
                s.copy(src, dst, size, &events_of(after, Event::cuda)?).map(Event::Cuda)
            }
        }
    }

    /// Repeats `pattern` over `size` bytes of `mem` from `offset` (both multiples of the
    /// pattern's size, within `mem`) on the device, after everything enqueued before. The
    /// driver fills where it takes the pattern ([`api::Queue::fill`]); otherwise the first
    /// value is filled byte by byte, then copied over the range in doubling copies within the
    /// buffer (about log2 of the values' count).
    pub(crate) fn fill(
        &self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
    ) -> Result<Event, Error> {
        if size == 0 || pattern.is_empty() {
            return self.marker();
        }
        if let Some(filled) = self.driver_fill(mem, pattern, offset, size)? {
            return Ok(filled);
        }
        let mut last = None;
        for (i, byte) in pattern.iter().enumerate() {
            last = self.driver_fill(mem, std::slice::from_ref(byte), offset + i, 1)?;
        }
        let mut done = pattern.len();
        while done < size {
            let more = done.min(size - done);
            last = Some(self.copy((mem, offset), (mem, offset + done), more, &[])?);
            done += more;
        }
        last.ok_or_else(|| Error::InvalidArgument("a driver without a 1-byte fill".into()))
    }

    /// [`api::Queue::fill`]: the driver's own fill of `pattern`; `None` when it takes no such
    /// pattern.
    fn driver_fill(
        &self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
    ) -> Result<Option<Event>, Error> {
        Ok(match self {
            Queue::OpenCl(q) => q.fill(mem.opencl()?, pattern, offset, size)?.map(Event::OpenCl),
            Queue::Cuda(s) => s.fill(mem.cuda()?, pattern, offset, size)?.map(Event::Cuda),
        })
    }

    /// [`api::Queue::finish`].
    pub(crate) fn finish(&self) -> Result<(), Error> {
        match self {
            Queue::OpenCl(q) => q.finish(),
            Queue::Cuda(s) => s.finish(),
        }
    }
}
