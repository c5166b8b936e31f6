//! Marmoset: a small HTTP/1.1 server for the web UI of embedded Linux devices.
//!
//! The folders are layers; each uses only those listed before it:
//!
//! - `limits`, `values`, `sys`: bounds, setting parsers, Unix calls
//!   (`no_unwind`: the stack walker the static musl builds leave out;
//!   `spare_blocks`: their allocator; `mips_mem`: the MIPS builds'
//!   `memcpy` and `bcmp`);
//! - `tls` (with the `tls` feature): certificates and the rustls settings;
//! - `http`: the protocol without I/O (requests, paths, conditions, heads);
//! - `policy`: address rules, Basic auth, per-path header rules;
//! - `files`: the document root, the file cache, listings;
//! - `logs`: the process log (stderr or syslog) and the access log;
//! - `net`: nonblocking socket I/O with deadlines, buffers, slots;
//! - `cgi`: CGI/1.1 scripts, from finding one to its answer;
//! - `proxy`: the reverse proxy to local backends, pool to tunnel;
//! - `ubus`: uhttpd's JSON-RPC endpoint over the ubus bus (for LuCI);
//! - `config`: the configuration, from its file and the command line;
//! - `server`: a worker, its connections and the request pipeline;
//! - `process`: start-up and the supervisor of the workers.
//!
//! Modules are private except the parsers the fuzz targets reach.

#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: spare_blocks::SpareBlocks = spare_blocks::SpareBlocks::new();

pub mod cgi;
pub mod config;
mod files;
pub mod http;
mod limits;
mod logs;
#[cfg(any(target_arch = "mips", test))]
mod mips_mem;
mod net;
#[cfg(all(
    target_env = "musl",
    panic = "abort",
    any(target_arch = "aarch64", target_arch = "x86_64")
))]
mod no_unwind;
mod policy;
pub mod process;
pub mod proxy;
mod server;
#[cfg(any(target_env = "musl", test))]
mod spare_blocks;
mod sys;
#[cfg(feature = "tls")]
mod tls;
pub mod ubus;
mod values;
