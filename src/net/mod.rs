//! Nonblocking I/O pieces a connection is built from: the socket with its
//! deadlines, the deadline table, wake-ups, the buffer pool.

pub(crate) mod buffers;
pub(crate) mod client;
pub(crate) mod deadline;
pub(crate) mod hangup;
pub(crate) mod input;
#[cfg(feature = "tls")]
pub(crate) mod ktls;
pub(crate) mod local;
pub(crate) mod notify;
pub(crate) mod pace;
pub(crate) mod reclaim;
pub(crate) mod share;
pub(crate) mod slots;
pub(crate) mod sock;
#[cfg(feature = "tls")]
pub(crate) mod tls;
