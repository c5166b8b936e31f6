//! The ubus JSON-RPC endpoint (uhttpd's `/ubus`, which LuCI talks to): the
//! wire format, JSON both ways, the worker's bus connection, the JSON-RPC
//! methods and the HTTP exchange.

pub mod asked;
pub mod blob;
pub mod bus;
pub mod exchange;
pub mod json;
pub mod rpc;
pub mod settings;
