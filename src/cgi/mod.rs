//! CGI/1.1 (RFC 3875): scripts under the configured prefixes run as child
//! processes in their own process group; their output is parsed and
//! streamed to the client as it comes. An SCGI handler answers its prefix
//! the same way, from a process that is already running.

pub(crate) mod exchange;
pub(crate) mod luci;
pub mod output;
pub(crate) mod running;
pub mod scgi;
pub(crate) mod script;
pub(crate) mod settings;
pub(crate) mod spawn;
