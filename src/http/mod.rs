//! HTTP/1.1 without I/O: request parsing and framing, paths, dates,
//! conditions and ranges, content negotiation, response heads.

pub mod chunked;
pub(crate) mod claims;
pub(crate) mod clock;
pub mod conditional;
pub(crate) mod gunzip;
pub(crate) mod header;
pub mod httpdate;
pub(crate) mod mime;
pub mod negotiate;
pub mod path;
pub mod range;
pub mod request;
pub(crate) mod response;
pub mod status;
#[cfg(feature = "tls")]
pub(crate) mod to_https;
