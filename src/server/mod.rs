//! One worker process: the accept loop, its connections, the request pipeline.

pub(crate) mod conn;
pub(crate) mod frames;
pub(crate) mod router;
pub(crate) mod state;
pub(crate) mod worker;
