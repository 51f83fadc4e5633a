//! Recorded work over both drivers: a graph built for one queue in the driver's own form (a
//! CUDA graph, an OpenCL command buffer), each call dispatched to the queue's driver with the
//! kernel and buffers projected to it (a value of another backend is refused).

#[cfg(doc)]
use super::api;
use super::api::{Graph as _, GraphBuilder as _, Queue as _};
use super::{cuda, events_of, opencl, Event, Kernel, Memory, Queue};
use crate::Error;

/// A graph being built for one queue ([`api::GraphBuilder`]), with the count of commands
/// added, which number them.
pub(crate) struct GraphBuilder {
    driver: Builder,
    added: usize,
}

enum Builder {
    OpenCl(opencl::GraphBuilder),
    Cuda(cuda::GraphBuilder),
}

/// A graph built for one queue ([`api::Graph`]).
pub(crate) enum Graph {
    OpenCl(opencl::Graph),
    Cuda(cuda::Graph),
}

impl Queue {
    /// [`api::Queue::graph`].
    pub(crate) fn graph(&self) -> Result<Result<GraphBuilder, String>, Error> {
        let driver = match self {
            Queue::OpenCl(q) => q.graph()?.map(Builder::OpenCl),
            Queue::Cuda(s) => s.graph()?.map(Builder::Cuda),
        };
        Ok(driver.map(|driver| GraphBuilder { driver, added: 0 }))
    }

    /// [`api::Queue::replay`] of `graph`, after the commands `after` stand for.
    pub(crate) fn replay(&self, graph: &Graph, after: &[&Event]) -> Result<Event, Error> {
        match (self, graph) {
            (Queue::OpenCl(q), Graph::OpenCl(g)) => {
                q.replay(g, &events_of(after, Event::opencl)?).map(Event::OpenCl)
            }
            (Queue::Cuda(s), Graph::Cuda(g)) => {
                s.replay(g, &events_of(after, Event::cuda)?).map(Event::Cuda)
            }
            _ => Err(super::another("a graph")),
        }
    }
}

impl GraphBuilder {
    /// The number of the command added next.
    fn added(&mut self) -> usize {
        self.added += 1;
        self.added - 1
    }

    /// [`api::GraphBuilder::kernel`]; the command's number.
    pub(crate) fn kernel(
        &mut self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[usize],
    ) -> Result<usize, Error> {
        match &mut self.driver {
            Builder::OpenCl(b) => b.kernel(kernel.opencl()?, global, local, offset, after),
            Builder::Cuda(b) => b.kernel(kernel.cuda()?, global, local, offset, after),
        }?;
        Ok(self.added())
    }

    /// [`api::GraphBuilder::copy`] of at least one byte; the command's number.
    pub(crate) fn copy(
        &mut self,
        (src, src_offset): (&Memory, usize),
        (dst, dst_offset): (&Memory, usize),
        size: usize,
        after: &[usize],
    ) -> Result<usize, Error> {
        match &mut self.driver {
            Builder::OpenCl(b) => {
                b.copy((src.opencl()?, src_offset), (dst.opencl()?, dst_offset), size, after)
            }
            Builder::Cuda(b) => {
                b.copy((src.cuda()?, src_offset), (dst.cuda()?, dst_offset), size, after)
            }
        }?;
        Ok(self.added())
    }

    /// A fill of `pattern` over `size` bytes of `mem` from `offset`, as [`Queue::fill`] makes
    /// it: the driver's fill where it takes the pattern, otherwise the first value filled
    /// byte by byte and copied over the range in doubling copies, one after another; the
    /// number of its last command.
    pub(crate) fn fill(
        &mut self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
        after: &[usize],
    ) -> Result<usize, Error> {
        if self.driver_fill(mem, pattern, offset, size, after)? {
            return Ok(self.added());
        }
        let mut last = None;
        for (i, byte) in pattern.iter().enumerate() {
            let deps = last.as_ref().map_or(after, std::slice::from_ref);
            if !self.driver_fill(mem, std::slice::from_ref(byte), offset + i, 1, deps)? {
                return Err(Error::InvalidArgument("a driver without a 1-byte fill".into()));
            }
            last = Some(self.added());
        }
        let mut done = pattern.len();
        while done < size {
            let more = done.min(size - done);
            let deps = last.as_ref().map_or(after, std::slice::from_ref);
            last = Some(self.copy((mem, offset), (mem, offset + done), more, deps)?);
            done += more;
        }
        last.ok_or_else(|| Error::InvalidArgument("a fill of no bytes".into()))
    }

    /// [`api::GraphBuilder::fill`].
    fn driver_fill(
        &mut self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
        after: &[usize],
    ) -> Result<bool, Error> {
        match &mut self.driver {
            Builder::OpenCl(b) => b.fill(mem.opencl()?, pattern, offset, size, after),
            Builder::Cuda(b) => b.fill(mem.cuda()?, pattern, offset, size, after),
        }
    }

    /// [`api::GraphBuilder::finish`].
    pub(crate) fn finish(self) -> Result<Graph, Error> {
        Ok(match self.driver {
            Builder::OpenCl(b) => Graph::OpenCl(b.finish()?),
            Builder::Cuda(b) => Graph::Cuda(b.finish()?),
        })
    }
}

impl Graph {
    /// [`api::Graph::update_kernel`].
    pub(crate) fn update_kernel(&mut self, node: usize, kernel: &Kernel) -> Result<bool, Error> {
        match self {
            Graph::OpenCl(g) => g.update_kernel(node, kernel.opencl()?),
            Graph::Cuda(g) => g.update_kernel(node, kernel.cuda()?),
        }
    }
}
