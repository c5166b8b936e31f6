//! CGI/1.1 (RFC 3875): scripts under the configured prefixes run as child
//! processes in their own process group; their output is parsed and
//! streamed to the client as it comes.

pub(crate) mod exchange;
pub mod output;
pub(crate) mod running;
pub(crate) mod script;
pub(crate) mod settings;
pub(crate) mod spawn;
