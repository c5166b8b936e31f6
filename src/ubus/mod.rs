//! The ubus JSON-RPC endpoint (uhttpd's `/ubus`, which LuCI talks to): the
//! wire format, JSON both ways, the worker's bus connection, the JSON-RPC
//! methods and the HTTP exchange.

//!
//! Only its settings are in a build without the `ubus` feature, which
//! refuses them.

#[cfg(feature = "ubus")]
pub mod asked;
#[cfg(feature = "ubus")]
pub mod blob;
#[cfg(feature = "ubus")]
pub mod bus;
#[cfg(feature = "ubus")]
pub mod calls;
#[cfg(feature = "ubus")]
mod decimal;
#[cfg(feature = "ubus")]
pub mod exchange;
#[cfg(feature = "ubus")]
pub mod json;
#[cfg(feature = "ubus")]
pub mod rpc;
#[cfg(feature = "ubus")]
pub mod sessions;
pub mod settings;
