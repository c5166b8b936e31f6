//! The document root: opening files safely, the per-worker file cache,
//! directory listings.

pub(crate) mod cache;
pub(crate) mod listing;
pub(crate) mod root;
