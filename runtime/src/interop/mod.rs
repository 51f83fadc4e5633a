//! Conversions with the GPU crates programs already use: [cudarc](https://docs.rs/cudarc)
//! 0.19 (the `cudarc` feature) and [opencl3](https://docs.rs/opencl3) 0.12 (the `opencl3`
//! feature), on top of the native handles ([`Queue::from_native`], [`Buffer::native`], …),
//! each without a copy and each safe. The conversions are methods of the runtime's own types:
//!
//! | with cudarc | with opencl3 |
//! |---|---|
//! | [`Queue::from_cudarc`]: a `CudaStream` as a queue | [`Queue::from_opencl3`]: a `Context` and `CommandQueue` as a queue |
//! | [`Launch::cudarc_arg`], or a typed launcher: a `CudaSlice`, `CudaView` or `CudaViewMut` as a kernel argument | [`Launch::opencl3_arg`], or a typed launcher: an opencl3 `Buffer` as a kernel argument |
//! | [`Queue::buffer_from_cudarc`]: a `CudaSlice` as a [`Buffer`] | [`Buffer::from_opencl3`]: an opencl3 `Buffer` as a [`Buffer`] |
//! | a [`Buffer`] is cudarc's `DevicePtr` and `DevicePtrMut` (cuBLAS and cudarc's copies take it) | [`Buffer::to_opencl3`], [`Queue::opencl3_queue`], [`Queue::opencl3_context`]: ours as opencl3's |
//! | [`Event::wait_in_cudarc`], [`Queue::wait_for_cudarc`]: events across the two | [`Event::to_opencl3`]: our event in opencl3's wait lists |
//! | [`Queue::with_tracking`]: a cudarc slice lent to a queue of another stream | |
//!
//! # Who owns what
//!
//! A queue made of another library's queue keeps that queue alive as long as the queue (and
//! every clone and buffer of it) lives: a cudarc `CudaStream` by a clone of its `Arc` (so its
//! `CudaContext` too), an opencl3 `CommandQueue` and `Context` by the driver's reference counts
//! (`clRetain…`), so the opencl3 values may be dropped at once. Another library's memory given
//! to a launch is borrowed until the launch is enqueued, as a `&Buffer` is; the memory's own
//! library frees it, after the work of the stream or queue it frees it on. An opencl3 object
//! made of ours ([`Buffer::to_opencl3`], [`Queue::opencl3_queue`], …) holds a reference of its
//! own, released when opencl3 drops it.
//!
//! # How work is ordered between the two libraries
//!
//! The cheap way, and the one the conversions are built for: one stream or queue for both. A
//! [`Queue`] made of cudarc's stream ([`Queue::from_cudarc`]) or of opencl3's queue
//! ([`Queue::from_opencl3`]) *is* that stream or queue, so the toolkit's launches, cudarc's
//! copies and cuBLAS calls, opencl3's reads and writes run in the order the host gave them,
//! with no event and no host wait between them. Across two streams or queues, events order
//! them: on CUDA, [`Event::wait_in_cudarc`] (a cudarc stream waits for one of our events) and
//! [`Queue::wait_for_cudarc`] (our queue waits for a `CudaEvent`); on OpenCL,
//! [`Event::to_opencl3`] gives opencl3 an event for its wait lists, and an opencl3 event orders
//! our later work through `Queue::opencl3_queue()?.enqueue_barrier_with_wait_list(..)`.
//! cudarc's own event tracking (the read and write events each `CudaSlice` records when a
//! context has several streams) is kept as [cudarc: one stream](#cudarc-one-stream) says.
//!
//! # cudarc
//!
//! A `CudaStream` as a [`Queue`], cudarc's memory as kernel arguments and as a [`Buffer`], a
//! [`Buffer`] as cudarc's device memory (so cuBLAS and cudarc's copies take it), and events
//! across the two. The runtime's cudarc is built for CUDA 12.8 bindings (`cuda-12080`); a
//! program's cudarc must use the same version feature.
//!
//! **Ownership.** [`Queue::from_cudarc`] keeps a clone of the stream's `Arc` (and so its
//! `CudaContext`) as long as the queue, its clones and its buffers live. cudarc's memory stays
//! cudarc's: a launch borrows a `&CudaSlice` until it is enqueued, and cudarc frees the slice
//! on the slice's stream (`cuMemFreeAsync`), after the work that stream was given.
//!
//! ## cudarc: one stream
//!
//! cudarc orders a slice's uses across streams with two events per slice, `read` and `write`,
//! which `DevicePtr::device_ptr(&stream)` makes `stream` wait for (the last write) and records
//! again once the use is enqueued (the `SyncOnDrop` it returns); it does so only while the
//! context has several streams (`new_stream`, `fork`). A kernel argument is made before the
//! launch knows its queue, and nothing of it runs after the launch is enqueued, so a
//! `&CudaSlice`, `&CudaView` or `&CudaViewMut` argument cannot record those events after the
//! kernel. The rule, then: **launch on a queue of the slice's own stream**
//! (`Queue::from_cudarc(slice.stream())`). There the kernel runs after what cudarc enqueued on
//! the stream before and before what it enqueues after, the slice's free included; making the
//! argument also makes the slice's stream wait for the slice's last write on any other stream,
//! as cudarc's own reads do. What the rule does not give: another stream's later cudarc use of
//! the slice is not ordered after the kernel (the slice's events do not cover it). For that, or
//! to launch on another stream of the context, lend the slice through
//! [`Queue::with_tracking`]: the queue's stream first waits for the slice stream's work so far
//! (its allocation included) and for the slice's last reads and writes, the launches run, then
//! the slice's stream waits for the queue's work and the slice's `write` event is recorded on
//! the queue's stream after them, as cudarc's own `SyncOnDrop` does.
//!
//! **How a slice is passed.** To a typed launcher, as any memory ([`DeviceMemory`] for
//! `&CudaSlice<T>`, `&CudaView<T>`, `&CudaViewMut<T>`); through the string API with
//! [`Launch::cudarc_arg`]`(&slice)` (not `.arg`: every [`Pod`] value is a
//! [`KernelArg`], and the compiler cannot rule out that a cudarc reference is one).
//!
//! **Our buffers in cudarc.** A [`Buffer`] is cudarc device memory (`DevicePtr`,
//! `DevicePtrMut`): cuBLAS calls and cudarc's copies take `&buffer` and `&mut buffer`. Used on
//! its queue's own stream it costs nothing; on another stream of the queue's context, the
//! stream first waits for the queue's work (an event), and the host waits for the stream when
//! the use's `SyncOnDrop` drops, so the queue's later work comes after it. Either way the use
//! counts as one of the buffer's (a read for `DevicePtr`, a write for `DevicePtrMut`): it comes
//! after other queues' conflicting commands, and theirs given later wait for what the buffer's
//! queue was given by then, cudarc's work included. cudarc's traits cannot return an error, so
//! a buffer of an OpenCL device, or of another context than cudarc's stream, panics there. The
//! reverse, [`Queue::buffer_from_cudarc`], makes a `CudaSlice` a [`Buffer`] that owns it, with
//! the same waits at both ends when the streams differ, and the slice's `write` event recorded
//! after the toolkit's work when the buffer goes.
//!
//! **Events.** A `CudaEvent` cannot be made from a driver event, so [`Event::wait_in_cudarc`]
//! makes a cudarc stream wait for one of our events (`cuStreamWaitEvent` on
//! [`Event::native`]) and [`Queue::wait_for_cudarc`] makes a queue wait for a `CudaEvent`.
//!
//! **Contexts.** On CUDA the runtime works in each device's primary context, the one cudarc's
//! `CudaContext::new` uses, so handles pass between the two unchanged; a stream of another
//! context (`new_non_primary`) makes a queue with program caches of its own, and memory of
//! another context than the queue's is refused, naming the remedy.
//!
//! # opencl3
//!
//! opencl3's context and command queue as a [`Queue`], its buffers as kernel arguments and as
//! [`Buffer`]s, and our queue, buffers and events as opencl3's objects.
//!
//! **Ownership.** OpenCL counts references, so every conversion takes one of its own:
//! [`Queue::from_opencl3`] retains the queue and the context (opencl3's values may be dropped
//! at once), [`Buffer::from_opencl3`] retains the memory object, and the opencl3 values made of
//! ours ([`Queue::opencl3_context`], [`Queue::opencl3_queue`], [`Buffer::to_opencl3`],
//! [`Event::to_opencl3`]) each hold a reference that opencl3 releases when it drops them. An
//! opencl3 buffer given to a launch is borrowed until the launch is enqueued; the kernel holds
//! the memory object until it ran (OpenCL retains a kernel's arguments).
//!
//! **How a buffer is passed.** To a typed launcher, as any memory ([`DeviceMemory`] for
//! `&opencl3::memory::Buffer<T>`); through the string API with
//! [`Launch::opencl3_arg`]`(&buffer)` (not `.arg`: every [`Pod`] value is a [`KernelArg`],
//! and the compiler cannot rule out that an opencl3 reference is one).
//!
//! **Ordering.** A queue made of opencl3's queue is that in-order queue: opencl3's reads,
//! writes and kernels and the toolkit's launches run in the order the host enqueued them, with
//! no event and no host wait between them. Across queues, [`Event::to_opencl3`] gives opencl3
//! an event for its wait lists, and an opencl3 event orders the toolkit's later work through a
//! barrier on this queue: `q.opencl3_queue()?.enqueue_barrier_with_wait_list(..)`.
//!
//! **One buffer per memory object.** A [`Buffer`] keeps the record of its uses that orders
//! commands on several queues (the crate's [Ordering](crate#ordering)); two buffers of one
//! memory object would keep two, and their maps could hand out `&mut [T]` and `&[T]` of the
//! same bytes. So every live buffer's memory object is noted, and [`Buffer::from_opencl3`]
//! (and [`Buffer::from_native`]) refuse one that a buffer already holds, or a sub-buffer of
//! it.

// The types the docs above name, for their links.
#[cfg(doc)]
use crate::{Buffer, DeviceMemory, Event, KernelArg, Launch, Pod, Queue};

#[cfg(feature = "cudarc")]
pub(crate) mod cudarc;
#[cfg(feature = "opencl3")]
pub(crate) mod opencl3;
