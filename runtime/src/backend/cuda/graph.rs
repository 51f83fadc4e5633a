//! Recorded work as CUDA replays it: a CUDA graph built node by node, instantiated once.
//! (Stand-in until the graph lands: no device has graphs.)

use super::{Cuda, Event, Kernel, Memory, Stream};
use crate::backend::api;
use crate::Error;

/// A CUDA graph being built for one queue.
pub(crate) enum GraphBuilder {}

/// A instantiated CUDA graph of one queue.
pub(crate) enum Graph {}

impl api::GraphBuilder<Cuda> for GraphBuilder {
    fn kernel(
        &mut self,
        _kernel: &Kernel,
        _global: &[usize],
        _local: Option<&[usize]>,
        _offset: Option<&[usize]>,
        _after: &[usize],
    ) -> Result<(), Error> {
        match *self {}
    }

    fn copy(
        &mut self,
        _src: (&Memory, usize),
        _dst: (&Memory, usize),
        _size: usize,
        _after: &[usize],
    ) -> Result<(), Error> {
        match *self {}
    }

    fn fill(
        &mut self,
        _mem: &Memory,
        _pattern: &[u8],
        _offset: usize,
        _size: usize,
        _after: &[usize],
    ) -> Result<bool, Error> {
        match *self {}
    }

    fn finish(self) -> Result<Graph, Error> {
        match self {}
    }
}

impl api::Graph<Cuda> for Graph {
    fn update_kernel(&mut self, _node: usize, _kernel: &Kernel) -> Result<bool, Error> {
        match *self {}
    }
}

impl Stream {
    /// [`api::Queue::graph`].
    pub(super) fn graph_builder(&self) -> Result<Result<GraphBuilder, String>, Error> {
        Ok(Err("CUDA graphs are not implemented yet".into()))
    }

    /// [`api::Queue::replay`].
    pub(super) fn replay_graph(&self, graph: &Graph, _after: &[&Event]) -> Result<Event, Error> {
        match *graph {}
    }
}
