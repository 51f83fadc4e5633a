//! Recorded work as OpenCL replays it: a command buffer (`cl_khr_command_buffer`) where the
//! device has one. (Stand-in until the command buffer lands: no device has graphs.)

use super::{Event, Kernel, Memory, OpenCl, Queue};
use crate::backend::api;
use crate::Error;

/// A command buffer being recorded for one queue.
pub(crate) enum GraphBuilder {}

/// A finalized command buffer of one queue.
pub(crate) enum Graph {}

impl api::GraphBuilder<OpenCl> for GraphBuilder {
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

impl api::Graph<OpenCl> for Graph {
    fn update_kernel(&mut self, _node: usize, _kernel: &Kernel) -> Result<bool, Error> {
        match *self {}
    }
}

impl Queue {
    /// [`api::Queue::graph`].
    pub(super) fn graph_builder(&self) -> Result<Result<GraphBuilder, String>, Error> {
        Ok(Err("command buffers are not implemented yet".into()))
    }

    /// [`api::Queue::replay`].
    pub(super) fn replay_graph(&self, graph: &Graph, _after: &[&Event]) -> Result<Event, Error> {
        match *graph {}
    }
}
