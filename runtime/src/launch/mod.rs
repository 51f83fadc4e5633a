//! What users call: events of asynchronous commands (`event`), queues and buffers (`queue`),
//! the devices and what they can do (`device`), kernel bundles and specialization constants
//! (`bundle`), and kernel launches, plain or from a bundle (`kernel`). Each imports only those
//! before it.

pub(crate) mod event;
pub(crate) mod queue;
pub(crate) mod device;
pub(crate) mod bundle;
pub(crate) mod kernel;
