//! Which names under the root changed on disk, from inotify, so the file
//! cache can serve a hit without a stat(2). The inotify descriptor is
//! registered with the reactor, and its task is woken in the same turn as
//! the connection whose request came after the change, ahead of it: the
//! kernel's ready list is in order, and so are the executor's tasks.

use std::cell::{Cell, RefCell};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use async_io::Async;
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};

/// What must be forgotten.
#[derive(Debug, PartialEq)]
pub enum Change {
    /// This name (relative to the root), anything under it, and the file a
    /// `.br`/`.gz` of this name is a variant of.
    Name(String),
    /// Everything under this directory ("" for the root).
    Under(Box<str>),
    /// Everything: events were lost.
    All,
}

pub struct Watch {
    inotify: Async<Inotify>,
    root: PathBuf,
    /// Watched directories, relative to the root ("" for the root itself).
    dirs: RefCell<Vec<(WatchDescriptor, Box<str>)>>,
    /// The watch limit was hit once (logged then; those files get a stat per request).
    limited: Cell<bool>,
}

const EVENTS: AddWatchFlags = AddWatchFlags::IN_MODIFY
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_CREATE)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_ONLYDIR);

impl Watch {
    /// `None` when the kernel offers no inotify (logged: every hit is then
    /// checked with a stat, as without a watch).
    pub fn new(root: &Path) -> Option<Watch> {
        let made = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(std::io::Error::from)
            .and_then(Async::new);
        match made {
            Ok(inotify) => Some(Watch {
                inotify,
                root: root.to_path_buf(),
                dirs: RefCell::new(Vec::new()),
                limited: Cell::new(false),
            }),
            Err(e) => {
                log::warn!("inotify: {e}; cached files are checked with a stat per request");
                None
            }
        }
    }

    /// Watches directory `dir` (relative, "" for the root); false when it
    /// cannot be watched, and the caller must check its files itself.
    pub fn watch(&self, dir: &str) -> bool {
        if self.dirs.borrow().iter().any(|(_, d)| &**d == dir) {
            return true;
        }
        let path = if dir.is_empty() {
            self.root.clone()
        } else {
            self.root.join(dir)
        };
        match self.inotify.get_ref().add_watch(&path, EVENTS) {
            Ok(wd) => {
                let mut dirs = self.dirs.borrow_mut();
                // The same directory reached by another name (a symlink)
                // shares its descriptor: keep one name for it.
                if !dirs.iter().any(|(w, _)| *w == wd) {
                    dirs.push((wd, dir.into()));
                }
                true
            }
            Err(Errno::ENOSPC) => {
                if !self.limited.replace(true) {
                    log::warn!(
                        "inotify watch limit reached (fs.inotify.max_user_watches); \
                         files in {} and other new directories are checked with a stat per request",
                        path.display()
                    );
                }
                false
            }
            Err(_) => false,
        }
    }

    /// Forgets every watch (the root was replaced).
    pub fn reset(&self) {
        for (wd, _) in self.dirs.borrow_mut().drain(..) {
            let _ = self.inotify.get_ref().rm_watch(wd);
        }
    }

    /// Waits for the kernel to report changes; what they concern.
    pub async fn changes(&self) -> Vec<Change> {
        let mut changes = Vec::new();
        while changes.is_empty() {
            if self.inotify.readable().await.is_err() {
                return vec![Change::All];
            }
            loop {
                match self.inotify.get_ref().read_events() {
                    Ok(events) => events.iter().for_each(|e| self.note(e, &mut changes)),
                    Err(Errno::EINTR) => {}
                    Err(Errno::EAGAIN) => break,
                    Err(_) => {
                        changes.push(Change::All);
                        break;
                    }
                }
            }
        }
        changes
    }

    fn note(&self, e: &InotifyEvent, changes: &mut Vec<Change>) {
        if e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            changes.push(Change::All);
            return;
        }
        let Some(dir) = self.dir_of(e.wd) else {
            return;
        };
        match &e.name {
            Some(name) => {
                let name = join(&dir, name);
                if e.mask.contains(AddWatchFlags::IN_ISDIR) {
                    // A directory renamed or removed: watches under its old
                    // name now point elsewhere, or nowhere.
                    self.forget_under(&name);
                }
                changes.push(Change::Name(name));
            }
            None => {
                if e.mask.intersects(
                    AddWatchFlags::IN_DELETE_SELF
                        | AddWatchFlags::IN_MOVE_SELF
                        | AddWatchFlags::IN_IGNORED
                        | AddWatchFlags::IN_UNMOUNT,
                ) {
                    self.forget_under(&dir);
                }
                changes.push(Change::Under(dir));
            }
        }
    }

    fn dir_of(&self, wd: WatchDescriptor) -> Option<Box<str>> {
        let dirs = self.dirs.borrow();
        dirs.iter().find(|(w, _)| *w == wd).map(|(_, d)| d.clone())
    }

    fn forget_under(&self, dir: &str) {
        self.dirs.borrow_mut().retain(|(wd, d)| {
            let gone = is_under(d, dir);
            if gone {
                let _ = self.inotify.get_ref().rm_watch(*wd);
            }
            !gone
        });
    }
}

/// Whether `rel` is `dir` or inside it ("" is the root, above everything).
pub fn is_under(rel: &str, dir: &str) -> bool {
    dir.is_empty()
        || rel
            .strip_prefix(dir)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The directory part of a relative name ("" for a name in the root).
pub fn dir_of(rel: &str) -> &str {
    rel.rfind('/').map_or("", |i| &rel[..i])
}

fn join(dir: &str, name: &OsStr) -> String {
    let name = String::from_utf8_lossy(name.as_bytes());
    if dir.is_empty() {
        name.into_owned()
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_directories() {
        assert_eq!(dir_of("index.html"), "");
        assert_eq!(dir_of("css/app.css"), "css");
        assert!(is_under("css/app.css", "css"));
        assert!(is_under("css", "css"));
        assert!(!is_under("css2/app.css", "css"));
        assert!(is_under("anything", ""));
    }

    #[test]
    fn a_change_on_disk_is_reported_once() {
        let dir = std::env::temp_dir().join(format!("marmoset-watch-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a.txt"), "1").unwrap();
        let watch = Watch::new(&dir).unwrap();
        assert!(watch.watch("sub"));
        std::fs::write(dir.join("sub/a.txt"), "2").unwrap();
        let within = |d| {
            async_io::block_on(futures_lite::future::or(
                async { Some(watch.changes().await) },
                async {
                    async_io::Timer::after(d).await;
                    None
                },
            ))
        };
        let seen = within(std::time::Duration::from_secs(10)).expect("a change");
        assert!(seen.contains(&Change::Name("sub/a.txt".into())), "{seen:?}");
        // Read once: nothing more is reported (for a while, at least).
        assert!(within(std::time::Duration::from_millis(200)).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
