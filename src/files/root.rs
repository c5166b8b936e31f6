//! Opening files under the root: symlink policy, directories and index
//! files, and the metadata a response needs.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::sys::stat::Mode;

use crate::files::cache::{CachedFile, FileCache, Hit};
use crate::http::path::CleanPath;
use crate::http::status::Status;
use crate::limits::MAX_PATH;
use crate::net::deadline::Deadlines;

/// Where symlinks may lead (the `symlinks` setting).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Symlinks {
    /// Followed only while they stay inside the root.
    Inside,
    /// Followed anywhere (trusted images that link /www/data to /tmp, say).
    Anywhere,
}

/// An open regular file and what we know of it, shared with the file cache.
pub type Opened = Rc<CachedFile>;

pub enum Lookup {
    File(Opened),
    /// A directory asked for without its trailing slash.
    DirWithoutSlash,
    /// A directory without an index file.
    DirWithoutIndex,
    Missing(Status),
}

/// The document root as an open directory. It is reopened once a second so a
/// root that is removed and recreated (a remounted flash partition) is found again.
pub struct Root {
    path: PathBuf,
    symlinks: Symlinks,
    /// The worker's clock: a lookup reads no clock of its own.
    clock: &'static Deadlines,
    dir: RefCell<Option<(OwnedFd, Instant)>>,
    /// Whether the kernel has openat2 (Linux 5.6+); older kernels get the fallback check.
    has_openat2: std::cell::Cell<bool>,
    cache: FileCache,
    /// Device and inode of the directory last opened as the root.
    #[allow(clippy::type_complexity)]
    identity: std::cell::Cell<Option<(u64, u64)>>,
}

impl Root {
    pub fn new(path: &Path, symlinks: Symlinks, clock: &'static Deadlines) -> Root {
        Root {
            path: path.to_path_buf(),
            symlinks,
            clock,
            dir: RefCell::new(None),
            has_openat2: std::cell::Cell::new(true),
            cache: FileCache::watching(path),
            identity: std::cell::Cell::new(None),
        }
    }

    /// Lets go of the open root, the cached files and the watch.
    pub fn close(&self) {
        self.dir.borrow_mut().take();
        self.cache.close();
    }

    /// Keeps the file cache current; a task for the worker's lifetime.
    pub async fn keep_current(&self) {
        self.cache.keep_current().await
    }

    /// Finds what `path` names under the root, trying the index names for a directory.
    pub fn lookup(&self, path: &CleanPath, index: &[String]) -> Lookup {
        self.refresh();
        let slot = self.dir.borrow();
        let Some((dir, _)) = slot.as_ref() else {
            return Lookup::Missing(Status::NotFound);
        };
        let rel = if path.is_root() { "." } else { path.as_str() };
        match self.open_regular(dir, rel) {
            // `page.html/` names no file, as open(2) says (ENOTDIR): served,
            // the page's relative links would resolve under it.
            Ok(Found::File(_)) if path.trailing_slash => return Lookup::Missing(Status::NotFound),
            Ok(Found::File(c)) => return Lookup::File(c),
            Ok(Found::Dir) => {}
            Ok(Found::Other) => return Lookup::Missing(Status::NotFound),
            Err(status) => return Lookup::Missing(status),
        }
        if !path.trailing_slash && !path.is_root() {
            return Lookup::DirWithoutSlash;
        }
        for name in index {
            let Some(full) = index_path(path, name) else {
                return Lookup::Missing(Status::UriTooLong);
            };
            match self.open_regular(dir, &full) {
                Ok(Found::File(c)) => return Lookup::File(c),
                Ok(_) | Err(Status::NotFound) => continue,
                Err(status) => return Lookup::Missing(status),
            }
        }
        Lookup::DirWithoutIndex
    }

    /// Opens one regular file by its clean relative name (error pages, the
    /// SPA fallback); anything else is NotFound.
    pub fn open_file(&self, rel: &str) -> Result<Opened, Status> {
        self.open_named(rel, false)
    }

    /// The metadata of what `rel` names (a file, a directory), without
    /// keeping it open or cached (CGI scripts: they are run, never served).
    pub fn entry_meta(&self, rel: &str) -> Result<std::fs::Metadata, Status> {
        self.refresh();
        let slot = self.dir.borrow();
        let (dir, _) = slot.as_ref().ok_or(Status::NotFound)?;
        Ok(self.open_uncached(dir, rel)?.1)
    }

    /// Opens a precompressed variant (`X.br`, `X.gz`); its absence is
    /// remembered for a second, since most files have none.
    pub fn open_variant(&self, rel: &str) -> Result<Opened, Status> {
        self.open_named(rel, true)
    }

    fn open_named(&self, rel: &str, remember_absence: bool) -> Result<Opened, Status> {
        self.refresh();
        let slot = self.dir.borrow();
        let (dir, _) = slot.as_ref().ok_or(Status::NotFound)?;
        if remember_absence {
            if let Hit::Absent = self.cache.get(dir, rel) {
                return Err(Status::NotFound);
            }
        }
        match self.open_regular(dir, rel) {
            Ok(Found::File(c)) => Ok(c),
            Ok(Found::Dir | Found::Other) | Err(Status::NotFound) => {
                if remember_absence {
                    self.cache.put_absent(dir, rel);
                }
                Err(Status::NotFound)
            }
            Err(status) => Err(status),
        }
    }

    /// Reopens the root if the cached handle is older than a second.
    fn refresh(&self) {
        let mut slot = self.dir.borrow_mut();
        if slot
            .as_ref()
            .is_some_and(|(_, at)| self.clock.now().saturating_duration_since(*at).as_secs() < 1)
        {
            return;
        }
        *slot = match open_dir(&self.path) {
            Ok(fd) => {
                // Another directory now (a remounted partition, a symlink
                // switched): the cache and its watches describe the old one.
                // stat field types differ between targets (32-bit glibc, musl).
                #[allow(clippy::unnecessary_cast)]
                let id = nix::sys::stat::fstat(&fd)
                    .map(|st| (st.st_dev as u64, st.st_ino as u64))
                    .ok();
                if self.identity.replace(id) != id {
                    self.cache.clear();
                }
                Some((fd, self.clock.now()))
            }
            Err(e) => {
                log::warn!("document root {}: {e}", self.path.display());
                None
            }
        };
    }

    fn open_regular(&self, dir: &OwnedFd, rel: &str) -> Result<Found, Status> {
        if let Hit::File(c) = self.cache.get(dir, rel) {
            return Ok(Found::File(c));
        }
        let (file, meta) = self.open_uncached(dir, rel)?;
        if meta.is_file() {
            Ok(Found::File(self.cache.put_file(dir, rel, file, meta)))
        } else if meta.is_dir() {
            Ok(Found::Dir)
        } else {
            Ok(Found::Other)
        }
    }

    fn open_uncached(&self, dir: &OwnedFd, rel: &str) -> Result<(File, std::fs::Metadata), Status> {
        // O_NONBLOCK: opening a FIFO someone left in the root must not hang the worker.
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK;
        let fd = match self.symlinks {
            Symlinks::Anywhere => openat(dir.as_fd(), rel, flags, Mode::empty()),
            Symlinks::Inside => self.open_beneath(dir, rel, flags),
        }
        .map_err(errno_status)?;
        let file = File::from(fd);
        let meta = file
            .metadata()
            .map_err(|e| errno_status(Errno::from_raw(e.raw_os_error().unwrap_or(0))))?;
        Ok((file, meta))
    }

    /// Opens `rel` so that no symlink can lead outside the root.
    fn open_beneath(&self, dir: &OwnedFd, rel: &str, flags: OFlag) -> nix::Result<OwnedFd> {
        if self.has_openat2.get() {
            let how = OpenHow::new()
                .flags(flags)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
            match openat2(dir.as_fd(), rel, how) {
                Err(Errno::ENOSYS) => self.has_openat2.set(false),
                other => return other,
            }
        }
        // Kernels before 5.6: open, then check where the descriptor really points.
        let fd = openat(dir.as_fd(), rel, flags, Mode::empty())?;
        let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|_| Errno::EACCES)?;
        let root = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))
            .map_err(|_| Errno::EACCES)?;
        if real == root || real.starts_with(&root) {
            Ok(fd)
        } else {
            Err(Errno::EXDEV)
        }
    }
}

enum Found {
    File(Opened),
    Dir,
    Other,
}

fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let fd = nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    Ok(fd)
}

/// The relative name of index file `name` in directory `dir`.
pub fn index_path(dir: &CleanPath, name: &str) -> Option<heapless::String<MAX_PATH>> {
    let mut full = heapless::String::new();
    if !dir.is_root() {
        full.push_str(dir.as_str()).ok()?;
        full.push('/').ok()?;
    }
    full.push_str(name).ok()?;
    Some(full)
}

/// `name` with a suffix (`.gz`), written into `buf`, if it fits. The caller
/// owns the buffer: a path-sized value returned by value costs a 2 KiB copy.
pub fn with_suffix<'b>(
    buf: &'b mut heapless::String<MAX_PATH>,
    name: &str,
    suffix: &str,
) -> Option<&'b str> {
    buf.clear();
    buf.push_str(name).ok()?;
    buf.push_str(suffix).ok()?;
    Some(buf.as_str())
}

/// How a failed open is answered.
fn errno_status(e: Errno) -> Status {
    match e {
        Errno::ENOENT | Errno::ENOTDIR => Status::NotFound,
        // EXDEV: openat2 refused a path leaving the root; ELOOP: a symlink loop or magic link.
        Errno::EACCES | Errno::EPERM | Errno::EXDEV | Errno::ELOOP => Status::Forbidden,
        Errno::ENAMETOOLONG => Status::UriTooLong,
        e => {
            log::warn!("open failed: {e}");
            Status::InternalServerError
        }
    }
}
