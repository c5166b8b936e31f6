//! Who may see what: address rules, Basic auth, and the per-path rules
//! (headers, redirects, error pages) from the configuration.

pub(crate) mod access;
pub(crate) mod auth;
pub(crate) mod rules;
