//! Recorded work as CUDA replays it: a CUDA graph built node by node (`cuGraphCreate`,
//! `cuGraphAddKernelNode`, `cuGraphAddMemcpyNode`, `cuGraphAddMemsetNode`), instantiated
//! once (`cuGraphInstantiateWithFlags`), and launched whole on the queue's stream
//! (`cuGraphLaunch`), each replay's event made as a launch's is.
//!
//! Node by node rather than by stream capture (`cuStreamBeginCapture`, then the eager calls):
//! - the runtime knows each command's dependencies already (from the buffers it uses), so each
//!   node gets exactly those, and commands that do not depend on each other come out as
//!   parallel branches; one captured stream would make a chain of them;
//! - capture has traps this avoids: a captured stream made to wait for an event recorded
//!   outside the capture (as the runtime's waits across queues are), work on the legacy
//!   default stream from another thread while a capture is under way (in the global capture
//!   mode), or a module loaded or unloaded during it, invalidates the capture or leaves the
//!   context unusable until it ends;
//! - adding a node gives its handle, which `cuGraphExecKernelNodeSetParams` needs to give a
//!   kernel node new arguments in the instantiated graph without building it again.
//!
//! The driver copies a kernel node's argument values when the node is added (and again when
//! it is updated), so the kernel may be set again for the next node at once. A graph keeps
//! its context and the module of every function it launches; dropping it destroys the
//! instantiated graph, then the graph (the driver frees an instantiated graph still running
//! once it completes). A replay enqueued while the last one runs runs after it: the driver
//! orders the launches of one instantiated graph. A kernel that fails inside a graph leaves
//! the context's sticky error, which the replay's event (and every later call) returns, as an
//! eager launch's does.

use std::ptr;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUresult};

use super::context::Context;
use super::event::End;
use super::program::Loaded;
use super::stream::memset_unit;
use super::{check, Cuda, Event, Kernel, Memory, Stream};
use crate::backend::api;
use crate::Error;

/// A CUDA graph: what its instantiation was made from, whose node handles name the nodes an
/// update changes. Destroyed on drop.
struct Template {
    context: Arc<Context>,
    raw: sys::CUgraph,
}

impl Drop for Template {
    fn drop(&mut self) {
        if self.context.bind().is_ok() {
            // SAFETY: created once, destroyed once, after the instantiation made of it (an
            // instantiated graph does not need the graph it was made of).
            unsafe {
                let _ = sys::cuGraphDestroy(self.raw);
            }
        }
    }
}

/// What an update needs of a kernel node besides the kernel: its function and shape.
#[derive(Clone, Copy)]
struct Launch {
    function: sys::CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    /// The launch's dimensions, which its dynamic shared memory size carries.
    dims: usize,
}

impl Launch {
    /// The node's parameters with `kernel`'s arguments as now set and `shared` bytes of
    /// dynamic shared memory. `kernelParams` points into `kernel` (read by the call the
    /// parameters are given to, which copies the values).
    fn params(&self, kernel: &Kernel, shared: u32) -> sys::CUDA_KERNEL_NODE_PARAMS {
        sys::CUDA_KERNEL_NODE_PARAMS {
            func: self.function,
            gridDimX: self.grid[0],
            gridDimY: self.grid[1],
            gridDimZ: self.grid[2],
            blockDimX: self.block[0],
            blockDimY: self.block[1],
            blockDimZ: self.block[2],
            sharedMemBytes: shared,
            kernelParams: kernel.params.as_ptr().cast_mut(),
            extra: ptr::null_mut(),
            // Both ignored when `func` is given.
            kern: ptr::null_mut(),
            ctx: ptr::null_mut(),
        }
    }
}

/// A command's node.
struct Node {
    raw: sys::CUgraphNode,
    /// For a kernel, what an update needs.
    launch: Option<Launch>,
}

/// What a graph keeps of its commands, from the first node added on.
struct Nodes {
    template: Template,
    /// Each command's node, in the order added (the indices `after` gives).
    nodes: Vec<Node>,
    /// The module of every function a node launches, kept loaded with the graph.
    modules: Vec<Arc<Loaded>>,
    /// The name of the last kernel added, noted as the last launched by each replay (which a
    /// fault's trace names).
    last_kernel: Option<Arc<str>>,
}

/// A CUDA graph being built for one queue.
pub(crate) struct GraphBuilder(Nodes);

/// An instantiated CUDA graph of one queue.
pub(crate) struct Graph {
    exec: sys::CUgraphExec,
    /// Dropped after `exec` is destroyed ([`Graph::drop`]).
    nodes: Nodes,
}

// SAFETY: graph and node handles may be used from any thread with their context current; a
// builder is used by one thread at a time (`&mut self`).
unsafe impl Send for GraphBuilder {}

// SAFETY: as above. A `CUgraph` or `CUgraphExec` is not synchronized by the driver: updates
// take `&mut self`, and the runtime replays a graph (`&self`) only under its own lock for that
// graph, so no two calls on one graph run at once.
unsafe impl Send for Graph {}

// SAFETY: as above.
unsafe impl Sync for Graph {}

impl Drop for Graph {
    fn drop(&mut self) {
        if self.nodes.template.context.bind().is_ok() {
            // SAFETY: instantiated once, destroyed once; a replay still running is not ended
            // but freed when it completes (`cuGraphExecDestroy`, CUDA driver API, graph
            // management).
            unsafe {
                let _ = sys::cuGraphExecDestroy(self.exec);
            }
        }
    }
}

impl GraphBuilder {
    /// Adds the node `add` makes (given where to write the node, its dependencies and their
    /// number) after the commands numbered `after`; `call` names the driver's call.
    fn add(
        &mut self,
        call: &'static str,
        after: &[usize],
        launch: Option<Launch>,
        add: impl FnOnce(*mut sys::CUgraphNode, *const sys::CUgraphNode, usize) -> CUresult,
    ) -> Result<(), Error> {
        let nodes = &mut self.0.nodes;
        let deps = after
            .iter()
            .map(|&i| {
                nodes.get(i).map(|n| n.raw).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "graph command {} after command {i}, which is not added before it",
                        nodes.len()
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.0.template.context.bind()?;
        let mut raw = ptr::null_mut();
        check(call, add(&mut raw, deps.as_ptr(), deps.len()))?;
        nodes.push(Node { raw, launch });
        Ok(())
    }
}

impl api::GraphBuilder<Cuda> for GraphBuilder {
    /// Shaped as [`api::Queue::launch`] shapes it: an offset other than zero is refused.
    fn kernel(
        &mut self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        offset: Option<&[usize]>,
        after: &[usize],
    ) -> Result<(), Error> {
        let (grid, block) = kernel.shape(global, local, offset)?;
        let dims = global.len();
        let launch = Launch { function: kernel.function, grid, block, dims };
        let shared = kernel.dynamic_shared(dims, &self.0.template.context)?;
        let params = launch.params(kernel, shared);
        let graph = self.0.template.raw;
        self.add("cuGraphAddKernelNode", after, Some(launch), |node, deps, count| {
            // SAFETY: a live graph, `count` nodes of it at `deps`; `kernelParams` holds one
            // pointer per kernel parameter, each to a value of the parameter's size (the
            // argument check compared them with the kernel's record), alive until the call
            // returns (the driver copies the values into the node).
            unsafe { sys::cuGraphAddKernelNode_v2(node, graph, deps, count, &params) }
        })?;
        if !self.0.modules.iter().any(|m| Arc::ptr_eq(m, &kernel.module)) {
            self.0.modules.push(kernel.module.clone());
        }
        self.0.last_kernel = Some(kernel.name.clone());
        Ok(())
    }

    fn copy(
        &mut self,
        (src, src_offset): (&Memory, usize),
        (dst, dst_offset): (&Memory, usize),
        size: usize,
        after: &[usize],
    ) -> Result<(), Error> {
        let device = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
        // One row of `size` bytes from device memory to device memory.
        let copy = sys::CUDA_MEMCPY3D {
            srcXInBytes: 0,
            srcY: 0,
            srcZ: 0,
            srcLOD: 0,
            srcMemoryType: device,
            srcHost: ptr::null(),
            srcDevice: src.address + src_offset as u64,
            srcArray: ptr::null_mut(),
            reserved0: ptr::null_mut(),
            srcPitch: 0,
            srcHeight: 0,
            dstXInBytes: 0,
            dstY: 0,
            dstZ: 0,
            dstLOD: 0,
            dstMemoryType: device,
            dstHost: ptr::null_mut(),
            dstDevice: dst.address + dst_offset as u64,
            dstArray: ptr::null_mut(),
            reserved1: ptr::null_mut(),
            dstPitch: 0,
            dstHeight: 0,
            WidthInBytes: size,
            Height: 1,
            Depth: 1,
        };
        let (graph, context) = (self.0.template.raw, self.0.template.context.raw);
        self.add("cuGraphAddMemcpyNode", after, None, |node, deps, count| {
            // SAFETY: a live graph, `count` nodes of it at `deps`; two allocations of the
            // context, whose ranges the caller checked.
            unsafe { sys::cuGraphAddMemcpyNode(node, graph, deps, count, &copy, context) }
        })
    }

    /// A pattern that repeats 1, 2 or 4 bytes, as [`api::Queue::fill`] takes them.
    fn fill(
        &mut self,
        mem: &Memory,
        pattern: &[u8],
        offset: usize,
        size: usize,
        after: &[usize],
    ) -> Result<bool, Error> {
        let Some((unit, value)) = memset_unit(pattern) else { return Ok(false) };
        // One row of `size / unit` units.
        let memset = sys::CUDA_MEMSET_NODE_PARAMS {
            dst: mem.address + offset as u64,
            pitch: 0,
            value,
            elementSize: unit,
            width: size / unit as usize,
            height: 1,
        };
        let (graph, context) = (self.0.template.raw, self.0.template.context.raw);
        self.add("cuGraphAddMemsetNode", after, None, |node, deps, count| {
            // SAFETY: a live graph, `count` nodes of it at `deps`; units within the allocation
            // (the caller checked the range, a multiple of the pattern's size and so of
            // `unit`).
            unsafe { sys::cuGraphAddMemsetNode(node, graph, deps, count, &memset, context) }
        })?;
        Ok(true)
    }

    fn finish(self) -> Result<Graph, Error> {
        let nodes = self.0;
        nodes.template.context.bind()?;
        let mut exec = ptr::null_mut();
        // SAFETY: a live graph; an out-pointer to a local.
        check("cuGraphInstantiateWithFlags", unsafe {
            sys::cuGraphInstantiateWithFlags(&mut exec, nodes.template.raw, 0)
        })?;
        Ok(Graph { exec, nodes })
    }
}

impl api::Graph<Cuda> for Graph {
    /// `cuGraphExecKernelNodeSetParams`, for the replays enqueued from now on (those enqueued
    /// already keep the arguments they had); `Ok(false)` for a node that is not a launch of
    /// the kernel's function.
    fn update_kernel(&mut self, node: usize, kernel: &Kernel) -> Result<bool, Error> {
        let Some(&Node { raw, launch: Some(launch) }) = self.nodes.nodes.get(node) else {
            return Ok(false);
        };
        if launch.function != kernel.function {
            return Ok(false);
        }
        let context = &self.nodes.template.context;
        context.bind()?;
        let shared = kernel.dynamic_shared(launch.dims, context)?;
        let params = launch.params(kernel, shared);
        // SAFETY: a live instantiated graph and a kernel node of the graph it was made of;
        // the parameters as for `cuGraphAddKernelNode` (the driver copies the values).
        check("cuGraphExecKernelNodeSetParams", unsafe {
            sys::cuGraphExecKernelNodeSetParams_v2(self.exec, raw, &params)
        })?;
        Ok(true)
    }
}

impl Stream {
    /// [`api::Queue::graph`]: every stream has one.
    pub(super) fn graph_builder(&self) -> Result<Result<GraphBuilder, String>, Error> {
        let context = &self.shared.context;
        context.bind()?;
        let mut raw = ptr::null_mut();
        // SAFETY: an out-pointer to a local; the context is bound.
        check("cuGraphCreate", unsafe { sys::cuGraphCreate(&mut raw, 0) })?;
        let template = Template { context: context.clone(), raw };
        Ok(Ok(GraphBuilder(Nodes {
            template,
            nodes: Vec::new(),
            modules: Vec::new(),
            last_kernel: None,
        })))
    }

    /// [`api::Queue::replay`]: as [`api::Queue::launch`] enqueues a kernel, with the context
    /// always bound (one replay stands for many launches), and an event that stands for the
    /// replay as a launch's does for the launch (its number until asked about; timed on a
    /// profiled stream).
    pub(super) fn replay_graph(&self, graph: &Graph, after: &[&Event]) -> Result<Event, Error> {
        let nodes = &graph.nodes;
        if !Arc::ptr_eq(&nodes.template.context, &self.shared.context) {
            return Err(Error::InvalidArgument(
                "a CUDA graph replayed on a queue of another context than it was built for".into(),
            ));
        }
        self.shared.context.bind()?;
        self.wait_events(after)?;
        let start = self.start()?;
        // SAFETY: a live instantiated graph and a live stream of its context; the runtime
        // replays one graph from one thread at a time (see `Graph`'s `Sync`).
        let code = unsafe { sys::cuGraphLaunch(graph.exec, self.shared.raw) };
        self.shared.named(check("cuGraphLaunch", code))?;
        if let Some(name) = &nodes.last_kernel {
            self.shared.launched(name);
        }
        match start {
            Some(timing) => self.timed(timing),
            None => Ok(self.event(End::Launch, None)),
        }
    }
}
