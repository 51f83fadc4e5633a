//! Recorded work: [`Queue::record`] gives a closure a [`Recorder`], whose launches, copies and
//! fills are checked as eager ones are (arguments, ranges, devices, resolution and linking
//! across libraries) and kept, not run; the [`Graph`] they make replays them whole with
//! [`Graph::run`], on any queue of the device, with no check and no lookup.
//!
//! Inside a graph, a command comes after the earlier commands that use one of its buffers in
//! a conflicting way (read after write, write after read, write after write: the rule of the
//! crate's automatic ordering), and after nothing else: independent commands are parallel
//! branches. A replay as a whole is ordered like one command that uses every buffer of the
//! graph (through `order`'s `ordered_unborrowed`), after the conflicting uses of other queues.
//!
//! A graph holds what it uses: each buffer's allocation (`queue::Allocation`, freed when the
//! buffer and every graph that recorded it are gone), each kernel's program (so a library's
//! kernels stay loaded in the driver after the library is closed: a replay still runs them).
//! It does not borrow the buffers, so a replay refuses a buffer that is mapped (a guard may be
//! using its memory).
//!
//! Each queue a graph runs on gets it built once, in the driver's own form where the driver
//! has one (a CUDA graph, an OpenCL command buffer: `backend::graph`), otherwise as the list of
//! its commands, each kernel with its own object and arguments set once, enqueued one by one.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use sycl_format::KernelParam;

use super::event::Event;
use super::kernel::{
    check_arguments, check_ranges, checked_uses, Arg, ArgValue, GlobalRange, KernelArg, Launch,
    Launcher, NoGlobalRange, Range, Span,
};
use super::order::{ordered_unborrowed, Access, Accesses, Uses};
#[cfg(doc)]
use super::queue::Buffer;
use super::queue::{as_bytes, Allocation, Pod, Queue};
use super::view::{copies_nothing, AsView, BufferView};
use crate::backend::{self, Memory, Program};
use crate::program::{ArgBytes, DeviceState, PooledKernel};
use crate::registry::Registry;
use crate::trace::trace;
use crate::Error;

/// The variable that decides whether graphs on OpenCL devices are built as the driver's
/// command buffers: `1` wherever a device has them, `0` nowhere; unset, everywhere but on CPU
/// devices, whose drivers replay a command buffer slower than they run the same launches
/// (Intel's CPU runtime 1.4 times, PoCL 1.8 times as long: `docs/PLATFORMS.md`), where the
/// runtime's own replay of the checked commands is faster.
pub const COMMAND_BUFFERS_ENV: &str = "SYCL_COMMAND_BUFFERS";

/// How many queues a graph stays built for at once; the one replayed on least recently goes
/// first (a driver keeps what it needs of it until its replays complete).
const BUILT_QUEUES: usize = 4;

impl Queue {
    /// Records what `record` enqueues on its [`Recorder`] (launches, copies, fills) as a
    /// [`Graph`], running none of it: every check an eager command makes is made now (a
    /// wrong argument, range, buffer of another device or unresolved import fails here), so
    /// that a replay ([`Graph::run`]) makes none. An error of `record` is the error of
    /// `record`, and no graph is made.
    ///
    /// The graph keeps alive every buffer and program it uses; it runs on any queue of this
    /// queue's device.
    pub fn record(
        &self,
        record: impl FnOnce(&mut Recorder) -> Result<(), Error>,
    ) -> Result<Graph, Error> {
        let mut recorder = Recorder { queue: self.clone(), state: RefCell::default() };
        let recorded = record(&mut recorder);
        let state = recorder.state.into_inner();
        let device = &self.inner.device;
        for k in state.kernels {
            device.return_kernel(&k.program, &k.name, k.object);
        }
        recorded?;
        let graph = Graph::new(device.clone(), state.nodes);
        trace!(
            "graph-record",
            "{} command(s), {} kernel launch(es), {} buffer(s) on {}",
            graph.nodes.len(),
            graph.nodes.iter().filter(|n| matches!(n.command, Command::Kernel(_))).count(),
            graph.buffers.len(),
            device.name
        );
        Ok(graph)
    }
}

/// What [`Queue::record`]'s closure enqueues work on: launches ([`Recorder::launch`]),
/// copies and fills, recorded into the graph in the order given.
pub struct Recorder {
    queue: Queue,
    state: RefCell<RecordState>,
}

#[derive(Default)]
struct RecordState {
    nodes: Vec<Node>,
    /// The kernels of the plain launches recorded so far (no bundle, no specialization
    /// values), each resolved once, given back to the device's pool at the end.
    kernels: Vec<Resolved>,
}

/// A kernel as a recording resolved it: its program, and an object of it (whose check
/// remembers the argument types it last accepted).
struct Resolved {
    name: String,
    registry: Arc<Registry>,
    program: Arc<Program>,
    object: PooledKernel,
}

/// A [`Launch`] that [`Launch::run`] records into a graph ([`Recorder::launch`]).
pub struct Recording<'r>(&'r Recorder);

/// A command of a [`Graph`], as [`Launch::run`] returned it while recording: what
/// [`Graph::set_arg`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphNode(usize);

impl Recorder {
    /// Starts a launch of `kernel` to record, as [`Queue::launch`] starts one to run: the
    /// same arguments, ranges, specialization values and bundles, and the same checks, made
    /// by [`Launch::run`], which records it. It cannot wait for events ([`Launch::after`]):
    /// order a replay after other work with [`Queue::wait_for`] before [`Graph::run`].
    pub fn launch<'r>(&'r self, kernel: &'r str) -> Launch<'r, NoGlobalRange, Recording<'r>> {
        Launch::new(&self.queue, kernel, Recording(self))
    }

    /// Records a copy of `src` into `dst`, as [`Buffer::copy_from`] makes one: buffers or
    /// views ([`Buffer::slice`]) of this recorder's device, of as many values, that do not
    /// overlap.
    pub fn copy<T: Pod>(
        &self,
        src: &impl AsView<T>,
        dst: &impl AsView<T>,
    ) -> Result<GraphNode, Error> {
        let (src, dst) = (src.as_view(), dst.as_view());
        for (what, view) in [("source", &src), ("destination", &dst)] {
            self.check_device(&format!("a recorded copy's {what}"), view)?;
        }
        if src.len() != dst.len() {
            return Err(Error::InvalidArgument(format!(
                "a recorded copy of {} values into {}: a copy takes as many as it writes",
                src.len(),
                dst.len()
            )));
        }
        let (from, to, size) = (src.start_bytes(), dst.start_bytes(), dst.size_bytes());
        let (src_alloc, dst_alloc) = (&src.buffer().alloc, &dst.buffer().alloc);
        if copies_nothing(&src, &dst, "a recorded copy of")? || size == 0 {
            // Nothing changes: a command of no bytes, which orders nothing.
            return Ok(self.push(Command::Copy { from, to, size: 0 }, NodeUses::new()));
        }
        let uses = [(src_alloc.clone(), Access::Read), (dst_alloc.clone(), Access::Write)];
        Ok(self.push(Command::Copy { from, to, size }, uses.into_iter().collect()))
    }

    /// Records a fill of every value of `dst` (a buffer or a view of this recorder's device)
    /// with `value`, as [`Buffer::fill`] makes one.
    pub fn fill<T: Pod>(&self, dst: &impl AsView<T>, value: T) -> Result<GraphNode, Error> {
        let dst = dst.as_view();
        self.check_device("a recorded fill's buffer", &dst)?;
        let pattern = ArgBytes::from_slice(as_bytes(std::slice::from_ref(&value)));
        let (at, size) = (dst.start_bytes(), dst.size_bytes());
        if size == 0 {
            return Ok(self.push(Command::Fill { pattern, at, size }, NodeUses::new()));
        }
        let uses = [(dst.buffer().alloc.clone(), Access::Write)];
        Ok(self.push(Command::Fill { pattern, at, size }, uses.into_iter().collect()))
    }

    /// That `view` is memory of the graph's device.
    fn check_device<T: Pod>(&self, what: &str, view: &BufferView<'_, T>) -> Result<(), Error> {
        let device = &self.queue.inner.device;
        let of = &view.buffer().queue().inner.device;
        match Arc::ptr_eq(of, device) {
            true => Ok(()),
            false => Err(Error::InvalidArgument(format!(
                "{what} is a buffer of {}, not of the graph's device ({}): copy it to a buffer \
                 of the graph's device first",
                of.describe(),
                device.describe()
            ))),
        }
    }

    /// Adds a command; its node.
    fn push(&self, command: Command, uses: NodeUses) -> GraphNode {
        let mut state = self.state.borrow_mut();
        state.nodes.push(Node { command, uses });
        GraphNode(state.nodes.len() - 1)
    }
}

impl<'r> Launcher<'r> for Recorder {
    type Sink = Recording<'r>;

    fn launch(&'r self, kernel: &'r str) -> Launch<'r, NoGlobalRange, Recording<'r>> {
        Recorder::launch(self, kernel)
    }
}

impl<'r> Launch<'r, GlobalRange, Recording<'r>> {
    /// Checks the launch as [`Launch::run`] of an eager one does (arguments, ranges,
    /// resolution, the build of its program) and records it; its node in the graph.
    pub fn run(self) -> Result<GraphNode, Error> {
        let (queue, kernel) = (self.queue, self.kernel);
        check_ranges(kernel, &self.global, self.local.as_ref(), self.offset.as_ref())?;
        if !self.after.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "kernel `{kernel}`: a recorded launch cannot wait for events (Launch::after): \
                 a graph's commands wait only for each other; make the queue that runs the \
                 graph wait for them (Queue::wait_for) before Graph::run"
            )));
        }
        if let Some(i) = self.args.iter().position(|a| matches!(a.0, Arg::Native(..))) {
            return Err(Error::InvalidArgument(format!(
                "kernel `{kernel}` argument {i}: another library's memory (a cudarc slice, an \
                 opencl3 buffer) cannot be recorded: a graph keeps its memory alive, and this \
                 memory is only borrowed; record a Buffer instead"
            )));
        }
        let recorder = self.sink.0;
        let device = &queue.inner.device;
        let plain = self.bundle.is_none() && self.spec.as_ref().is_none_or(|s| s.0.is_empty());
        if !plain {
            // From a bundle, or with specialization values: resolved as an eager launch is.
            let (registry, program) = self.program()?;
            let mut object = device.take_kernel(&program, kernel)?;
            let recorded = self.node(&registry, &program, &mut object);
            device.return_kernel(&program, kernel, object);
            let (recorded, uses) = recorded?;
            return Ok(recorder.push(Command::Kernel(recorded), uses));
        }
        let mut state = recorder.state.borrow_mut();
        if !state.kernels.iter().any(|k| k.name == kernel) {
            let rt = crate::process::runtime();
            let registry = rt.registry();
            let program = device.program_for(
                &registry,
                rt.disk.as_ref(),
                kernel,
                &crate::program::Options::default(),
            )?;
            let object = device.take_kernel(&program, kernel)?;
            state.kernels.push(Resolved { name: kernel.into(), registry, program, object });
        }
        let k = state.kernels.iter_mut().rfind(|k| k.name == kernel).expect("found or added");
        let (recorded, uses) = self.node(&k.registry, &k.program, &mut k.object)?;
        drop(state);
        Ok(recorder.push(Command::Kernel(recorded), uses))
    }

    /// The launch checked (with `object`, of `program` from `registry`) as a recorded one.
    fn node(
        &self,
        registry: &Registry,
        program: &Arc<Program>,
        object: &mut PooledKernel,
    ) -> Result<(KernelNode, NodeUses), Error> {
        let uses = self.queue.check(registry, self.kernel, object, &self.args)?;
        let uses = uses.iter().map(|(u, access)| (allocation(&self.args, u), *access)).collect();
        let signature = object.signature.as_ref().expect("set by the check");
        let recorded = KernelNode {
            name: self.kernel.into(),
            program: program.clone(),
            params: signature.params.clone(),
            reads: signature.reads,
            args: self.args.iter().map(NodeArg::of).collect(),
            global: self.global,
            local: self.local,
            offset: self.offset,
        };
        Ok((recorded, uses))
    }
}

/// The allocation of `args` whose uses are `uses`.
fn allocation(args: &[ArgValue<'_>], uses: &Uses) -> Arc<Allocation> {
    args.iter()
        .find_map(|a| match &a.0 {
            Arg::Mem(.., span) if std::ptr::eq(span.uses(), uses) => Some(span.alloc.clone()),
            _ => None,
        })
        .expect("every use is of an argument")
}

/// The buffers a command uses, and how.
type NodeUses = smallvec::SmallVec<[(Arc<Allocation>, Access); 4]>;

/// A recorded command and the buffers it uses.
struct Node {
    command: Command,
    uses: NodeUses,
}

/// A copy or fill of no bytes uses no buffer, and is left out of the driver's graph and of
/// the replayed commands (nothing comes after it).
enum Command {
    Kernel(KernelNode),
    /// Of `size` bytes of `uses[0]` from byte `from` into `uses[1]` from byte `to`.
    Copy {
        from: usize,
        to: usize,
        size: usize,
    },
    /// Of `size` bytes of `uses[0]` from byte `at`.
    Fill {
        pattern: ArgBytes,
        at: usize,
        size: usize,
    },
}

/// A recorded launch: what its replays need, and what an update checks.
struct KernelNode {
    name: String,
    program: Arc<Program>,
    params: Option<Arc<[KernelParam]>>,
    /// The parameters the kernel only reads through (see `kernel::reads_only`).
    reads: u64,
    args: Vec<NodeArg>,
    global: Range,
    local: Option<Range>,
    offset: Option<Range>,
}

/// A recorded argument, owning what the argument borrowed.
enum NodeArg {
    Mem { mem: Arc<Memory>, alloc: Arc<Allocation>, start: usize, len: usize, ty: &'static str },
    Bytes(ArgBytes, &'static str),
    Local(usize, &'static str),
}

impl NodeArg {
    fn of(arg: &ArgValue<'_>) -> NodeArg {
        match &arg.0 {
            Arg::Mem(mem, _, ty, span) => NodeArg::Mem {
                mem: Arc::clone(mem),
                alloc: span.alloc.clone(),
                start: span.start,
                len: span.len,
                ty,
            },
            Arg::Bytes(bytes, ty) => NodeArg::Bytes(bytes.clone(), ty),
            Arg::Local(size, ty) => NodeArg::Local(*size, ty),
            Arg::Native(..) | Arg::Unusable(..) => unreachable!("refused before recording"),
        }
    }

    /// The argument as a launch gives it, for the checks; `device` is the graph's.
    fn as_arg<'a>(&'a self, device: &'a Arc<DeviceState>) -> ArgValue<'a> {
        ArgValue(match self {
            NodeArg::Mem { mem, alloc, start, len, ty } => {
                Arg::Mem(mem, device, ty, Span { alloc, start: *start, len: *len })
            }
            NodeArg::Bytes(bytes, ty) => Arg::Bytes(bytes.clone(), ty),
            NodeArg::Local(size, ty) => Arg::Local(*size, ty),
        })
    }
}

impl KernelNode {
    /// Sets the recorded arguments on `kernel`, an object of this node's kernel.
    fn set_arguments(&self, kernel: &mut backend::Kernel) -> Result<(), Error> {
        for (i, arg) in self.args.iter().enumerate() {
            let index = i as u32;
            match arg {
                NodeArg::Mem { mem, .. } => kernel.set_mem(index, mem),
                NodeArg::Bytes(bytes, _) => kernel.set_bytes(index, bytes),
                NodeArg::Local(size, _) => kernel.set_local(index, *size),
            }
            .map_err(|e| {
                Error::InvalidArgument(format!("kernel `{}` argument {i}: {e}", self.name))
            })?;
        }
        Ok(())
    }
}

/// Recorded work of one device, replayed whole by [`Graph::run`]; made by [`Queue::record`].
///
/// `Send + Sync`: several threads may run one graph, on one queue or several; each replay is
/// ordered after the conflicting uses of its buffers, earlier replays included.
pub struct Graph {
    device: Arc<DeviceState>,
    nodes: Vec<Node>,
    /// For each node, the earlier nodes it comes after (those it conflicts with directly).
    deps: Vec<Vec<usize>>,
    /// Every buffer of the graph, once, written when any command writes it.
    buffers: Vec<(Arc<Allocation>, Access)>,
    /// The graph as built for the queues it ran on, most recently run last.
    built: Mutex<Vec<Built>>,
}

/// A graph built for one queue.
struct Built {
    /// The queue's number.
    queue: u64,
    replay: Replay,
}

enum Replay {
    /// The driver's own graph, and each node's number in it (its last command's).
    Driver(backend::Graph, Vec<usize>),
    /// Each node's kernel object, its arguments set (none for a copy or a fill), enqueued in
    /// order on the queue.
    Commands(Vec<Option<backend::Kernel>>),
}

impl Graph {
    fn new(device: Arc<DeviceState>, nodes: Vec<Node>) -> Graph {
        let deps = dependencies(&nodes);
        let buffers = union(&nodes);
        Graph { device, nodes, deps, buffers, built: Mutex::new(Vec::new()) }
    }

    /// How many commands it holds.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Replays every command on `queue` (a queue of the device it was recorded on), after
    /// everything the queue was given before and the conflicting uses of its buffers on other
    /// queues; the event of its completion. The host does not wait. The first run on a queue
    /// builds the graph for it (a CUDA graph, an OpenCL command buffer, or the list of its
    /// commands where the driver has neither; `SYCL_TRACE` says which).
    ///
    /// Errors: a queue of another device; a buffer of the graph that is mapped (drop the
    /// guard first: a replay does not borrow the buffers it writes).
    pub fn run(&self, queue: &Queue) -> Result<Event, Error> {
        let own = &queue.inner;
        if !Arc::ptr_eq(&own.device, &self.device) {
            return Err(Error::InvalidArgument(format!(
                "a graph recorded on {} run on a queue of {}: run it on a queue of its own \
                 device, or record it again there",
                self.device.describe(),
                own.device.describe()
            )));
        }
        let built = self.built_for(queue)?;
        let replay = &built.last().expect("built above").replay;
        let mut accesses: Accesses<'_> =
            self.buffers.iter().map(|(alloc, access)| (&alloc.uses, *access)).collect();
        let mapped = |uses: &Uses| self.mapped(uses);
        let event = ordered_unborrowed(&own.queue, own.id, &mut accesses, &mapped, |waits| {
            self.replay(replay, &own.queue, waits)
        })?;
        drop(built);
        Ok(Event::new(event, self.device.clone()))
    }

    /// The graph's builds, the one for `queue` last (built now if it was not).
    fn built_for(&self, queue: &Queue) -> Result<MutexGuard<'_, Vec<Built>>, Error> {
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        let id = queue.inner.id;
        match built.iter().position(|b| b.queue == id) {
            Some(i) => {
                let b = built.remove(i);
                built.push(b);
            }
            None => {
                let replay = self.build(&queue.inner.queue)?;
                if built.len() == BUILT_QUEUES {
                    built.remove(0);
                }
                built.push(Built { queue: id, replay });
            }
        }
        Ok(built)
    }

    /// The error of a replay that meets a mapped buffer, `uses`'s.
    fn mapped(&self, uses: &Uses) -> Error {
        let at = self.buffers.iter().position(|(a, _)| std::ptr::eq(&a.uses, uses));
        Error::InvalidArgument(format!(
            "a graph's buffer ({} of its {}) is mapped (a Mapped or MappedMut guard of it lives, \
             or was forgotten): a replay does not borrow the buffers it uses; drop the guard \
             before Graph::run (after a forgotten guard, any read or write of the buffer ends \
             its map)",
            at.map_or(0, |i| i + 1),
            self.buffers.len()
        ))
    }

    /// The graph built for `queue`: the driver's graph where it has one and it is taken
    /// ([`COMMAND_BUFFERS_ENV`]), else the commands.
    fn build(&self, queue: &backend::Queue) -> Result<Replay, Error> {
        let info = &self.device.info;
        let driver = match (info.backend, std::env::var(COMMAND_BUFFERS_ENV).as_deref()) {
            (crate::Backend::Cuda, _) => queue.graph()?,
            (crate::Backend::OpenCl, Ok("0")) => Err(format!("{COMMAND_BUFFERS_ENV}=0")),
            (crate::Backend::OpenCl, Ok("1")) => queue.graph()?,
            (crate::Backend::OpenCl, _) if info.device_type == crate::DeviceType::Cpu => {
                Err(format!(
                    "a CPU device, whose driver replays a command buffer slower than it runs \
                     the launches; {COMMAND_BUFFERS_ENV}=1 takes it"
                ))
            }
            (crate::Backend::OpenCl, _) => queue.graph()?,
        };
        let replay = match driver {
            Ok(builder) => {
                let replay = self.build_driver(builder)?;
                trace!(
                    "graph-build",
                    "{} command(s) on {}: {}",
                    self.nodes.len(),
                    self.device.name,
                    match self.device.info.backend {
                        crate::Backend::Cuda => "a CUDA graph",
                        crate::Backend::OpenCl => "an OpenCL command buffer",
                    }
                );
                replay
            }
            Err(why) => {
                let replay = self.build_commands()?;
                trace!(
                    "graph-build",
                    "{} command(s) on {}: replayed one by one ({why})",
                    self.nodes.len(),
                    self.device.name
                );
                replay
            }
        };
        Ok(replay)
    }

    /// The graph in the driver's form, through `builder`.
    fn build_driver(&self, mut builder: backend::GraphBuilder) -> Result<Replay, Error> {
        let mut numbers: Vec<usize> = Vec::with_capacity(self.nodes.len());
        for (node, deps) in self.nodes.iter().zip(&self.deps) {
            let after: smallvec::SmallVec<[usize; 8]> = deps.iter().map(|&d| numbers[d]).collect();
            let number = match &node.command {
                Command::Kernel(k) => {
                    let mut object = self.device.take_kernel(&k.program, &k.name)?;
                    // What the pool remembers of the object's arguments is no longer so.
                    object.set.clear();
                    k.set_arguments(&mut object.kernel)?;
                    let number = builder.kernel(
                        &object.kernel,
                        k.global.dims(),
                        k.local.as_ref().map(Range::dims),
                        k.offset.as_ref().map(Range::dims),
                        &after,
                    );
                    self.device.return_kernel(&k.program, &k.name, object);
                    number?
                }
                // Left out: no command depends on it.
                Command::Copy { size: 0, .. } | Command::Fill { size: 0, .. } => usize::MAX,
                Command::Copy { from, to, size } => {
                    let (src, dst) = (node.uses[0].0.uses.root(), node.uses[1].0.uses.root());
                    builder.copy((src, *from), (dst, *to), *size, &after)?
                }
                Command::Fill { pattern, at, size } => {
                    builder.fill(node.uses[0].0.uses.root(), pattern, *at, *size, &after)?
                }
            };
            numbers.push(number);
        }
        Ok(Replay::Driver(builder.finish()?, numbers))
    }

    /// The graph as its commands: a kernel object of each launch, its arguments set.
    fn build_commands(&self) -> Result<Replay, Error> {
        let mut kernels = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            kernels.push(match &node.command {
                Command::Kernel(k) => {
                    let mut kernel = k.program.kernel(&k.name)?;
                    k.set_arguments(&mut kernel)?;
                    Some(kernel)
                }
                Command::Copy { .. } | Command::Fill { .. } => None,
            });
        }
        Ok(Replay::Commands(kernels))
    }

    /// Enqueues `replay` on `queue` after `waits`; the event of its last command.
    fn replay(
        &self,
        replay: &Replay,
        queue: &backend::Queue,
        waits: &[&backend::Event],
    ) -> Result<backend::Event, Error> {
        let kernels = match replay {
            Replay::Driver(graph, _) => return queue.replay(graph, waits),
            Replay::Commands(kernels) => kernels,
        };
        queue.wait_for(waits)?;
        let mut last = None;
        for (node, kernel) in self.nodes.iter().zip(kernels) {
            let root = |i: usize| node.uses[i].0.uses.root();
            last = Some(match (&node.command, kernel) {
                (Command::Copy { size: 0, .. } | Command::Fill { size: 0, .. }, _) => continue,
                (Command::Kernel(k), Some(kernel)) => queue.enqueue(
                    kernel,
                    k.global.dims(),
                    k.local.as_ref().map(Range::dims),
                    k.offset.as_ref().map(Range::dims),
                    &[],
                )?,
                (Command::Copy { from, to, size }, _) => {
                    queue.copy((root(0), *from), (root(1), *to), *size, &[])?
                }
                (Command::Fill { pattern, at, size }, _) => {
                    queue.fill(root(0), pattern, *at, *size)?
                }
                (Command::Kernel(_), None) => unreachable!("a kernel's object is built with it"),
            });
        }
        match last {
            Some(event) => Ok(event),
            None => queue.marker(),
        }
    }

    /// Gives argument `index` of the launch recorded as `node` the value `arg`, for the
    /// replays from now on, without recording again: another buffer, view or value of the
    /// type the kernel takes there, checked as a launch checks it. Where the change makes the
    /// graph's commands depend on each other differently (a buffer another command uses),
    /// the graph is built again at its next run; otherwise the driver's graph is updated in
    /// place (CUDA), or built again where the driver cannot (OpenCL).
    ///
    /// Errors: `node` is not a launch of this graph, `index` is not one of its arguments, an
    /// argument the launch would refuse.
    pub fn set_arg<'a>(
        &mut self,
        node: GraphNode,
        index: usize,
        arg: impl KernelArg<'a>,
    ) -> Result<(), Error> {
        let arg = arg.to_arg();
        if matches!(arg.0, Arg::Native(..)) {
            return Err(Error::InvalidArgument(
                "another library's memory cannot be recorded in a graph: give a Buffer".into(),
            ));
        }
        let device = self.device.clone();
        let Some(Command::Kernel(k)) = self.nodes.get(node.0).map(|n| &n.command) else {
            return Err(Error::InvalidArgument(format!(
                "graph node {} is not a kernel launch of this graph ({} commands)",
                node.0,
                self.nodes.len()
            )));
        };
        if index >= k.args.len() {
            return Err(Error::InvalidArgument(format!(
                "kernel `{}` has {} argument(s): no argument {index}",
                k.name,
                k.args.len()
            )));
        }
        let (new, uses) = {
            let mut args: Vec<ArgValue<'_>> = k.args.iter().map(|a| a.as_arg(&device)).collect();
            args[index] = arg;
            if let Some(params) = &k.params {
                check_arguments(&k.name, params, &args)?;
            }
            let uses = checked_uses(&k.name, &device, 0, k.params.as_deref(), k.reads, &args)?;
            let uses: NodeUses =
                uses.iter().map(|(u, access)| (allocation(&args, u), *access)).collect();
            (NodeArg::of(&args[index]), uses)
        };
        let Command::Kernel(k) = &mut self.nodes[node.0].command else { unreachable!() };
        k.args[index] = new;
        self.nodes[node.0].uses = uses;
        self.updated(node.0)
    }

    /// Brings the builds up to date after node `node`'s arguments changed: each build is
    /// updated in place where its driver can, and dropped (to be built again at its queue's
    /// next run) where it cannot, or where the nodes now depend on each other differently.
    fn updated(&mut self, node: usize) -> Result<(), Error> {
        let deps = dependencies(&self.nodes);
        self.buffers = union(&self.nodes);
        let built = self.built.get_mut().unwrap_or_else(|e| e.into_inner());
        let Command::Kernel(k) = &self.nodes[node].command else { unreachable!() };
        if deps != self.deps {
            self.deps = deps;
            built.clear();
            return Ok(());
        }
        let mut object = self.device.take_kernel(&k.program, &k.name)?;
        // What the pool remembers of the object's arguments is no longer so.
        object.set.clear();
        let mut outcome = k.set_arguments(&mut object.kernel);
        built.retain_mut(|b| {
            let in_place = match &mut b.replay {
                _ if outcome.is_err() => Ok(false),
                Replay::Driver(graph, numbers) => {
                    graph.update_kernel(numbers[node], &object.kernel)
                }
                Replay::Commands(kernels) => match &mut kernels[node] {
                    Some(kernel) => k.set_arguments(kernel).map(|()| true),
                    None => Ok(false),
                },
            };
            in_place.unwrap_or_else(|e| {
                outcome = Err(e);
                false
            })
        });
        self.device.return_kernel(&k.program, &k.name, object);
        outcome
    }
}

/// For each node, the earlier nodes it must come after: per buffer, a write comes after the
/// last write and the reads since; a read after the last write.
fn dependencies(nodes: &[Node]) -> Vec<Vec<usize>> {
    #[derive(Default)]
    struct Last {
        write: Option<usize>,
        reads: Vec<usize>,
    }
    let mut last: HashMap<*const Allocation, Last> = HashMap::new();
    let mut deps = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let mut mine: Vec<usize> = Vec::new();
        let mut accesses: smallvec::SmallVec<[(*const Allocation, Access); 4]> =
            node.uses.iter().map(|(a, access)| (Arc::as_ptr(a), *access)).collect();
        // One buffer used twice is used once, as a writer when either use writes.
        accesses.sort_unstable();
        accesses.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 = kept.1.max(later.1);
            }
            same
        });
        for (alloc, access) in accesses {
            let last = last.entry(alloc).or_default();
            mine.extend(last.write);
            match access {
                Access::Read => last.reads.push(i),
                Access::Write => {
                    mine.append(&mut last.reads);
                    last.write = Some(i);
                }
            }
        }
        mine.sort_unstable();
        mine.dedup();
        deps.push(mine);
    }
    deps
}

/// Every buffer of `nodes` once, as a writer when any node writes it.
fn union(nodes: &[Node]) -> Vec<(Arc<Allocation>, Access)> {
    let mut all: Vec<(Arc<Allocation>, Access)> = Vec::new();
    let mut at: HashMap<*const Allocation, usize> = HashMap::new();
    for (alloc, access) in nodes.iter().flat_map(|n| &n.uses) {
        match at.get(&Arc::as_ptr(alloc)) {
            Some(&i) => all[i].1 = all[i].1.max(*access),
            None => {
                at.insert(Arc::as_ptr(alloc), all.len());
                all.push((alloc.clone(), *access));
            }
        }
    }
    all
}
