//! Marmoset: a small HTTP/1.1 server for the web UI of embedded Linux devices.
//!
//! Start-up is in `start`. The request path: `worker` (accept) → `conn`
//! (one connection) → `request` (parse, framing) → `router` (the pipeline)
//! → `static_files`, `cgi`. The configuration: `config`, `cli`, `rules`.
//! The modules are public so the fuzz targets can reach the parsers.

pub mod access;
pub mod access_log;
pub mod auth;
pub mod buffers;
pub mod cgi;
pub mod cgi_output;
pub mod chunked;
pub mod cli;
pub mod clock;
pub mod conditional;
pub mod config;
pub mod conn;
pub mod deadline;
pub mod file_cache;
pub mod gunzip;
pub mod httpdate;
pub mod limits;
pub mod listing;
pub mod logging;
pub mod mime;
pub mod negotiate;
pub mod notify;
pub mod path;
pub mod range;
pub mod request;
pub mod response;
pub mod router;
pub mod rules;
pub mod sock;
pub mod spawn;
pub mod start;
pub mod static_files;
pub mod status;
pub mod supervisor;
pub mod sys;
pub mod worker;
