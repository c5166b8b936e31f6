//! The document root: opening files safely, the per-worker file cache and
//! the inotify watch that keeps it current, directory listings.

pub(crate) mod cache;
pub(crate) mod listing;
pub(crate) mod root;
pub(crate) mod watch;
