//! Start-up and the supervisor that forks, watches and replaces workers.

pub mod start;
pub(crate) mod supervisor;
