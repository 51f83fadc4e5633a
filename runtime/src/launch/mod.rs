//! What users call: queues, buffers and kernel launches (`queue`), kernel bundles and
//! specialization constants (`bundle`).

pub(crate) mod bundle;
pub(crate) mod queue;
