//! What users call: queues and buffers (`queue`), kernel bundles and specialization constants
//! (`bundle`), and kernel launches, plain or from a bundle (`kernel`). Each imports only those
//! before it.

pub(crate) mod queue;
pub(crate) mod bundle;
pub(crate) mod kernel;
