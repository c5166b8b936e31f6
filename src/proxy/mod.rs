//! A reverse proxy to local backends (a unix socket or a loopback or LAN
//! address) under configured path prefixes: requests re-framed and sent
//! over HTTP/1.1 on pooled connections, answers checked and streamed back,
//! upgraded connections (WebSocket) tunnelled.

pub mod answer;
pub(crate) mod backend;
pub(crate) mod exchange;
pub(crate) mod outgoing;
pub(crate) mod pool;
pub(crate) mod relay;
pub(crate) mod settings;
pub(crate) mod streams;
pub(crate) mod tunnel;
