//! A small per-worker cache of opened files, so that a hot file costs no
//! system call instead of open, fstat, two variant probes and a read.
//!
//! While a file's directory is watched (inotify, `files/watch.rs`), a hit is
//! served as it is until the kernel reports a change of that name, which
//! drops the entry before the next lookup. Otherwise (no inotify, the watch
//! limit reached, a file with other hard links or reached through a
//! symlink, whose changes the directory's watch would not see) every hit is
//! checked against the file's current fingerprint (device, inode, size,
//! mtime and ctime, to the nanosecond), so a changed, replaced, truncated or
//! re-permissioned file is reopened at once, and the absence of a
//! precompressed variant (`X.br`, `X.gz`) is believed for a second.

use std::cell::{Cell, OnceCell, RefCell};
use std::fs::{File, Metadata};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::rc::Rc;
use std::time::Instant;

use nix::fcntl::AtFlags;
use nix::sys::stat::{FileStat, SFlag, fstatat};

use crate::files::watch::{self, Change, Watch};
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
    /// Its directory is watched: a variant created later drops this entry.
    watched: bool,
}

impl CachedFile {
    /// Whether the variant probes found none less than a second ago, so
    /// they can be skipped (the same second as an absent variant's entry).
    pub fn known_without_variants(&self) -> bool {
        self.no_variants
            .get()
            .is_some_and(|at| self.watched || at.elapsed() < ABSENT_FOR)
    }

    pub fn mark_without_variants(&self) {
        self.no_variants.set(Some(Instant::now()));
    }
}

/// How an entry is known to be current.
#[derive(Clone, Copy)]
enum Check {
    /// Its directory is watched: current until a change is reported.
    Watched,
    /// A file checked against its fingerprint on every hit.
    Stat(Fingerprint),
    /// An absence believed for a while from then.
    Since(Instant),
}

/// One name the cache knows: a file (which carries its own name) or an absence.
enum Entry {
    File(Rc<CachedFile>, Check),
    Absent(Box<str>, Check),
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
    /// `None` without inotify (or after it failed, or the cache was
    /// closed): every entry is then checked by stat or age.
    watch: RefCell<Option<Rc<Watch>>>,
}

impl FileCache {
    /// A cache whose entries under `root` are kept current by inotify where it can.
    pub fn watching(root: &std::path::Path) -> FileCache {
        FileCache {
            watch: RefCell::new(Watch::new(root).map(Rc::new)),
            ..FileCache::default()
        }
    }

    /// Looks `rel` up, checking a cached file against what is on disk now.
    pub fn get(&self, dir: &OwnedFd, rel: &str) -> Hit {
        self.catch_up();
        let mut entries = self.entries.borrow_mut();
        let Some(i) = entries.iter().position(|e| e.rel() == rel) else {
            return Hit::Miss;
        };
        let current = match &entries[i] {
            Entry::Absent(_, Check::Watched) => return Hit::Absent,
            Entry::Absent(_, Check::Since(at)) if at.elapsed() < ABSENT_FOR => return Hit::Absent,
            Entry::Absent(..) => None,
            Entry::File(cached, Check::Watched) => Some(cached.clone()),
            Entry::File(cached, check) => match fstatat(dir, rel, AtFlags::empty()) {
                Ok(st) if matches!(check, Check::Stat(fp) if Fingerprint::of_stat(&st) == *fp) => {
                    Some(cached.clone())
                }
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

    /// Drops what the kernel reports as changed; never returns (waits
    /// forever without inotify).
    pub async fn keep_current(&self) {
        let watch = self.watch.borrow().clone();
        while let Some(w) = &watch {
            if let Err(e) = w.changes(|c| self.drop_affected(c)).await {
                log::error!("inotify: {e}; cached files are checked with a stat per request");
                self.close();
                break;
            }
        }
        std::future::pending().await
    }

    /// Drops what changed if the kernel reported it in this reactor turn
    /// and the watch task has not run yet.
    fn catch_up(&self) {
        // Cloned (not borrowed) only when there is something to read:
        // `close` below takes the watch out.
        let Some(w) = self
            .watch
            .borrow()
            .as_ref()
            .filter(|w| w.stirred())
            .cloned()
        else {
            return;
        };
        if let Err(e) = w.catch_up(|c| self.drop_affected(c)) {
            log::error!("inotify: {e}; cached files are checked with a stat per request");
            self.close();
        }
    }

    /// Forgets everything and watches no more (a reload replaced this cache).
    pub fn close(&self) {
        self.clear();
        self.watch.borrow_mut().take();
    }

    fn drop_affected(&self, change: &Change) {
        self.entries.borrow_mut().retain(|e| {
            let hit = affected(e.rel(), change);
            if hit {
                self.forget_body(e);
            }
            !hit
        });
    }

    /// Forgets everything (the root was replaced by another directory).
    pub fn clear(&self) {
        let gone = std::mem::take(&mut *self.entries.borrow_mut());
        gone.iter().for_each(|e| self.forget_body(e));
        if let Some(w) = &*self.watch.borrow() {
            w.reset();
        }
    }

    /// How `rel` will be kept current: watched when its directory can be
    /// and a change of the file is seen there (one name, not a symlink).
    fn check_for(&self, dir: &OwnedFd, rel: &str, file: Option<&Metadata>) -> Option<Check> {
        let watch = self.watch.borrow().clone()?;
        if let Some(meta) = file {
            use std::os::unix::fs::MetadataExt;
            let own_name = meta.nlink() == 1
                && fstatat(dir, rel, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| {
                    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG
                });
            if !own_name {
                return None;
            }
        }
        watch.watch(watch::dir_of(rel)).then_some(Check::Watched)
    }

    /// Remembers a file just opened (and its bytes, if small and within budget).
    pub fn put_file(&self, dir: &OwnedFd, rel: &str, file: File, meta: Metadata) -> Rc<CachedFile> {
        // Watched from before its first use: a change after this lookup is
        // reported, one before it is in what was just opened.
        let check = self
            .check_for(dir, rel, Some(&meta))
            .unwrap_or(Check::Stat(Fingerprint::of_meta(&meta)));
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
            watched: matches!(check, Check::Watched),
        });
        self.insert(Entry::File(cached.clone(), check));
        cached
    }

    /// Remembers that a variant name does not exist (for a second when its
    /// directory is not watched).
    pub fn put_absent(&self, dir: &OwnedFd, rel: &str) {
        let check = self
            .check_for(dir, rel, None)
            .unwrap_or(Check::Since(Instant::now()));
        self.insert(Entry::Absent(rel.into(), check));
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

/// Whether `change` concerns the entry named `rel`.
fn affected(rel: &str, change: &Change) -> bool {
    match change {
        Change::All => true,
        // A new or removed `X.gz` changes what `X` is served as.
        Change::Name(name) => {
            rel == name
                || [".br", ".gz"]
                    .iter()
                    .any(|v| name.strip_suffix(v) == Some(rel))
        }
    }
}

/// Modification time in seconds and nanoseconds, never negative.
pub fn mtime(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.mtime().max(0) as u64, meta.mtime_nsec().max(0) as u64)
}
