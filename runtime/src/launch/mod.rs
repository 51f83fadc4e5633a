//! What users call: events of asynchronous commands (`event`), the automatic ordering of the
//! commands that use a buffer (`order`), queues and buffers (`queue`), views and copies of
//! buffers' values, between devices too (`view`),
//! host memory for fast copies, asynchronous copies through it and maps of buffers (`host`),
//! the devices and what they can do (`device`), kernel bundles and specialization constants
//! (`bundle`), kernel launches, plain or from a bundle (`kernel`), what the generated typed
//! launchers are written against (`typed`), and recorded work replayed whole (`graph`). Each
//! imports only those before it.

pub(crate) mod event;
pub(crate) mod order;
pub(crate) mod queue;
pub(crate) mod view;
pub(crate) mod host;
pub(crate) mod device;
pub(crate) mod bundle;
pub(crate) mod kernel;
pub(crate) mod typed;
pub(crate) mod graph;
