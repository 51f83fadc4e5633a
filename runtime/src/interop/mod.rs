//! Conversions with the GPU crates programs already use: cudarc (the `cudarc` feature) and
//! opencl3 (the `opencl3` feature), on top of the native handles (`Queue::from_native`,
//! `Buffer::native`, …), each without a copy and each safe.
//!
//! **Who owns what.** A queue made of another library's queue keeps that queue alive as
//! long as the queue (and every clone and buffer of it) lives: a cudarc `CudaStream` by a
//! clone of its `Arc` (so its `CudaContext` too), an opencl3 `CommandQueue` and `Context` by
//! the driver's reference counts (`clRetain…`), so the opencl3 values may be dropped at once.
//! Another library's memory given to a launch is borrowed until the launch is enqueued, as a
//! `&Buffer` is; the memory's own library frees it, after the work of the stream or queue it
//! frees it on. An opencl3 object made of ours (`Buffer::to_opencl3`,
//! `Queue::opencl3_queue`, …) holds a reference of its own, released when opencl3 drops it.
//!
//! **How work is ordered between the two libraries.** The cheap way, and the one the
//! conversions are built for: one stream or queue for both. A `Queue` made of cudarc's stream
//! (`Queue::from_cudarc`) or of opencl3's queue (`Queue::from_opencl3`) *is* that stream or
//! queue, so the toolkit's launches, cudarc's copies and cuBLAS calls, opencl3's reads and
//! writes run in the order the host gave them, with no event and no host wait between them.
//! Across two streams or queues, events order them: on CUDA, `Event::wait_in_cudarc` (a
//! cudarc stream waits for one of our events) and `Queue::wait_for_cudarc` (our queue waits
//! for a `CudaEvent`); on OpenCL, `Event::to_opencl3` gives opencl3 an event for its wait
//! lists, and an opencl3 event orders our later work through
//! `Queue::opencl3_queue()?.enqueue_barrier_with_wait_list(..)`. cudarc's own event tracking
//! (the read and write events each `CudaSlice` records when a context has several streams) is
//! kept as `cudarc.rs` says.

#[cfg(feature = "cudarc")]
pub(crate) mod cudarc;
#[cfg(feature = "opencl3")]
pub(crate) mod opencl3;
