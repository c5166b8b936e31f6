//! A small per-worker cache of opened files, so that a hot file costs one
//! stat(2) per request instead of open, fstat, two variant probes and a read.
//!
//! Every hit is checked against the file's current fingerprint (device,
//! inode, size, mtime and ctime, to the nanosecond), so a changed, replaced,
//! truncated or re-permissioned file is reopened at once. Only the absence of
//! a precompressed variant (`X.br`, `X.gz`) is remembered for a second:
//! a variant added later is found within that second.

use std::cell::{Cell, OnceCell, RefCell};
use std::fs::{File, Metadata};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::rc::Rc;
use std::time::Instant;

use nix::fcntl::AtFlags;
use nix::sys::stat::{FileStat, fstatat};

use crate::http::conditional::Validators;
use crate::http::header::RuleLines;
use crate::limits::{ABSENT_FOR, BODY_BUDGET, CACHE_ENTRIES, SMALL_BODY};

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Fingerprint {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Fingerprint {
    fn of_meta(m: &Metadata) -> Fingerprint {
        Fingerprint {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size() as i64,
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    // stat field types differ between targets (32-bit glibc, musl).
    #[allow(clippy::unnecessary_cast)]
    fn of_stat(s: &FileStat) -> Fingerprint {
        Fingerprint {
            dev: s.st_dev as u64,
            ino: s.st_ino as u64,
            size: s.st_size as i64,
            mtime: (s.st_mtime as i64, s.st_mtime_nsec as i64),
            ctime: (s.st_ctime as i64, s.st_ctime_nsec as i64),
        }
    }
}

/// A cached regular file: shared descriptor, metadata, the bytes if small,
/// and what every response for it needs, worked out once per version.
pub struct CachedFile {
    pub file: Rc<File>,
    pub meta: Metadata,
    /// The whole content, when the file is small enough to be kept in memory.
    pub body: Option<Rc<[u8]>>,
    /// Its path relative to the root (an index file includes its own name).
    pub name: Box<str>,
    /// Its media type, from the name.
    pub content_type: &'static str,
    pub validators: Validators,
    /// What the config's rules do to its responses; filled by the router on first use.
    pub rules: OnceCell<Rc<RuleLines>>,
    /// The header lines of a plain 200 of it (see `Response::fields`),
    /// made by the router the first time it serves one.
    pub plain_fields: OnceCell<Rc<[u8]>>,
    /// When probes last found no precompressed variant of it.
    no_variants: Cell<Option<Instant>>,
}

impl CachedFile {
    /// Whether the variant probes found none less than a second ago, so
    /// they can be skipped (the same second as an absent variant's entry).
    pub fn known_without_variants(&self) -> bool {
        self.no_variants
            .get()
            .is_some_and(|at| at.elapsed() < ABSENT_FOR)
    }

    pub fn mark_without_variants(&self) {
        self.no_variants.set(Some(Instant::now()));
    }
}

/// One name the cache knows: a file (which carries its own name) or an absence.
enum Entry {
    File(Rc<CachedFile>, Fingerprint),
    Absent(Box<str>, Instant),
}

impl Entry {
    fn rel(&self) -> &str {
        match self {
            Entry::File(cached, _) => &cached.name,
            Entry::Absent(rel, _) => rel,
        }
    }
}

/// What the cache knows about a name.
pub enum Hit {
    File(Rc<CachedFile>),
    Absent,
    /// Not known, or changed: open it.
    Miss,
}

#[derive(Default)]
pub struct FileCache {
    entries: RefCell<Vec<Entry>>,
    body_bytes: Cell<usize>,
}

impl FileCache {
    /// Looks `rel` up, checking a cached file against what is on disk now.
    pub fn get(&self, dir: &OwnedFd, rel: &str) -> Hit {
        let mut entries = self.entries.borrow_mut();
        let Some(i) = entries.iter().position(|e| e.rel() == rel) else {
            return Hit::Miss;
        };
        let current = match &entries[i] {
            Entry::Absent(_, since) if since.elapsed() < ABSENT_FOR => return Hit::Absent,
            Entry::Absent(..) => None,
            Entry::File(cached, fp) => match fstatat(dir, rel, AtFlags::empty()) {
                Ok(st) if Fingerprint::of_stat(&st) == *fp => Some(cached.clone()),
                _ => None,
            },
        };
        match current {
            Some(cached) => {
                // Keep hot entries near the front, where the search starts.
                if i > 0 {
                    entries.swap(i, i - 1);
                }
                Hit::File(cached)
            }
            None => {
                let gone = entries.remove(i);
                self.forget_body(&gone);
                Hit::Miss
            }
        }
    }

    /// Remembers a file just opened (and its bytes, if small and within budget).
    pub fn put_file(&self, rel: &str, file: File, meta: Metadata) -> Rc<CachedFile> {
        let fp = Fingerprint::of_meta(&meta);
        let len = meta.len();
        let body = (len <= SMALL_BODY && self.body_bytes.get() + len as usize <= BODY_BUDGET)
            .then(|| {
                let mut bytes = vec![0u8; len as usize];
                file.read_exact_at(&mut bytes, 0)
                    .ok()
                    .map(|()| Rc::<[u8]>::from(bytes))
            })
            .flatten();
        if let Some(b) = &body {
            self.body_bytes.set(self.body_bytes.get() + b.len());
        }
        let (secs, nanos) = mtime(&meta);
        let validators = Validators::new(meta.ino(), len, secs, nanos);
        let cached = Rc::new(CachedFile {
            file: Rc::new(file),
            meta,
            body,
            name: rel.into(),
            content_type: crate::http::mime::for_name(rel),
            validators,
            rules: OnceCell::new(),
            plain_fields: OnceCell::new(),
            no_variants: Cell::new(None),
        });
        self.insert(Entry::File(cached.clone(), fp));
        cached
    }

    /// Remembers that a variant name does not exist, for a second.
    pub fn put_absent(&self, rel: &str) {
        self.insert(Entry::Absent(rel.into(), Instant::now()));
    }

    fn insert(&self, entry: Entry) {
        let mut entries = self.entries.borrow_mut();
        if let Some(i) = entries.iter().position(|e| e.rel() == entry.rel()) {
            let old = entries.remove(i);
            self.forget_body(&old);
        }
        if entries.len() >= CACHE_ENTRIES {
            if let Some(old) = entries.pop() {
                self.forget_body(&old);
            }
        }
        // New entries go in the middle: a burst of new names cannot push out the hot ones.
        let at = entries.len() / 2;
        entries.insert(at, entry);
    }

    fn forget_body(&self, e: &Entry) {
        if let Entry::File(cached, _) = e {
            if let Some(b) = &cached.body {
                self.body_bytes
                    .set(self.body_bytes.get().saturating_sub(b.len()));
            }
        }
    }
}

/// Modification time in seconds and nanoseconds, never negative.
pub fn mtime(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.mtime().max(0) as u64, meta.mtime_nsec().max(0) as u64)
}
