//! Recorded work over both drivers: a graph built for one queue in the driver's own form (a
//! CUDA graph, an OpenCL command buffer), each call dispatched to the queue's driver with the
//! kernel and buffers projected to it (a value of another backend is refused).

#[cfg(doc)]
use super::api;
use super::api::{Graph as _, GraphBuilder as _, Queue as _};
use super::{cuda, events_of, opencl, Event, Kernel, Memory, Queue};
use crate::Error;

/// A graph being built for one queue ([`api::GraphBuilder`]).
pub(crate) enum GraphBuilder {
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
        Ok(match self {
            Queue::OpenCl(q) => q.graph()?.map(GraphBuilder::OpenCl),
            Queue::Cuda(s) => s.graph()?.map(GraphBuilder::Cuda),
        })
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
    /// [`api::GraphBuilder::kernel`].
    pub(crate) fn kernel(
        &mut self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[usize],
    ) -> Result<(), Error> {
        match self {
            GraphBuilder::OpenCl(b) => b.kernel(kernel.opencl()?, global, local, offset, after),
            GraphBuilder::Cuda(b) => b.kernel(kernel.cuda()?, global, local, offset, after),
        }
    }

    /// [`api::GraphBuilder::copy`].
    pub(crate) fn copy(
        &mut self,
        (src, src_offset): (&Memory, usize),
        (dst, dst_offset): (&Memory, usize),
        size: usize,
        after: &[usize],
    ) -> Result<(), Error> {
        match self {
            GraphBuilder::OpenCl(b) => {
                b.copy((src.opencl()?, src_offset), (dst.opencl()?, dst_offset), size, after)
            }
            GraphBuilder::Cuda(b) => {
                b.copy((src.cuda()?, src_offset), (dst.cuda()?, dst_offset), size, after)
            }
        }
    }

    /// [`api::GraphBuilder::fill`].
    pub(crate) fn fill(
        &mut self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
        after: &[usize],
    ) -> Result<bool, Error> {
        match self {
            GraphBuilder::OpenCl(b) => b.fill(mem.opencl()?, pattern, offset, size, after),
            GraphBuilder::Cuda(b) => b.fill(mem.cuda()?, pattern, offset, size, after),
        }
    }

    /// [`api::GraphBuilder::finish`].
    pub(crate) fn finish(self) -> Result<Graph, Error> {
        Ok(match self {
            GraphBuilder::OpenCl(b) => Graph::OpenCl(b.finish()?),
            GraphBuilder::Cuda(b) => Graph::Cuda(b.finish()?),
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
