//! Who may see what: the names the device answers to, address rules,
//! Basic auth, and the per-path rules
//! (headers, redirects, error pages) from the configuration.

pub(crate) mod access;
pub(crate) mod auth;
pub(crate) mod failures;
pub(crate) mod hosts;
pub(crate) mod origin;
pub(crate) mod prefix;
pub(crate) mod rules;
