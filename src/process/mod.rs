//! Start-up and the supervisor that forks, watches and replaces workers.

#[cfg(feature = "tls")]
pub(crate) mod certificate;
pub mod start;
pub(crate) mod supervisor;
