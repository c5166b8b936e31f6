//! The process log (stderr, or syslog on devices) and the access log.

pub(crate) mod access_log;
pub(crate) mod logger;
