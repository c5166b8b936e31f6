//! CGI/1.1 (RFC 3875): scripts under the configured prefixes run as child
//! processes; their output is parsed and streamed to the client.

pub(crate) mod exchange;
pub mod output;
pub(crate) mod spawn;
