//! Which names under the root changed on disk, from inotify, so the file
//! cache can serve a hit without a stat(2). The inotify descriptor is
//! registered with the reactor, and becomes ready no later than the
//! connection whose request came after the change: the reactor finds both
//! in the same wait, or the descriptor first. Waking the watch task then
//! marks the watch stirred, before any task of that turn runs, so a
//! connection served ahead of the watch task reads the changes itself
//! (`catch_up`).

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use async_io::Async;
use futures_lite::future;
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

/// What must be forgotten.
#[derive(Debug, PartialEq)]
pub enum Change {
    /// The file of this name (relative to the root), and the file a
    /// `.br`/`.gz` of this name is a variant of.
    Name(String),
    /// Everything.
    All,
}

pub struct Watch {
    inotify: Async<Inotify>,
    root: PathBuf,
    /// Watched directories, relative to the root ("" for the root itself).
    dirs: RefCell<Vec<(WatchDescriptor, Box<str>)>>,
    /// The watch limit was hit once (logged then; those files get a stat per request).
    limited: Cell<bool>,
    /// The descriptor was found readable since the changes were last read.
    stirred: Arc<AtomicBool>,
    /// The watch task's waker and the one made from it (`stir_for`).
    stir: RefCell<Option<(Waker, Waker)>>,
}

/// The watch task's waker, which marks the watch stirred first.
struct Stir {
    stirred: Arc<AtomicBool>,
    task: Waker,
}

impl Wake for Stir {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.stirred.store(true, Ordering::Relaxed);
        self.task.wake_by_ref();
    }
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
                stirred: Arc::default(),
                stir: RefCell::new(None),
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
                        "inotify watch limit reached at {}; files there and in later directories are checked with a stat per request",
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

    /// Waits for the kernel to report changes, and hands each to `each`.
    /// Interest is registered before every read, so a change after a read
    /// that found nothing makes the armed descriptor ready. And every
    /// wake-up reads: async-io counts an event delivered in the reactor
    /// tick the interest was registered in as possibly old and would wait
    /// one more turn, while the connection woken in that same turn is served.
    pub async fn changes(&self, mut each: impl FnMut(&Change)) -> std::io::Result<()> {
        loop {
            // A readiness async-io kept from before is taken, and the
            // interest registered again (it answers Pending once it is).
            future::poll_fn(|cx| {
                let stir = self.stir_for(cx.waker());
                let mut cx = Context::from_waker(&stir);
                loop {
                    match self.inotify.poll_readable(&mut cx) {
                        Poll::Ready(Ok(())) => {}
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Pending => return Poll::Ready(Ok(())),
                    }
                }
            })
            .await?;
            if self.read_changes(&mut each)? {
                return Ok(());
            }
            // Nothing yet: until the wake-up registered above.
            let mut asleep = false;
            future::poll_fn(|_| {
                if std::mem::replace(&mut asleep, true) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
        }
    }

    /// Reads the changes now if the descriptor was found readable since
    /// they were last read: the watch task may not have run yet.
    pub fn catch_up(&self, mut each: impl FnMut(&Change)) -> std::io::Result<()> {
        if self.stirred.load(Ordering::Relaxed) {
            self.read_changes(&mut each)?;
        }
        Ok(())
    }

    /// The waker that marks the watch stirred, then wakes `task`: the same
    /// one while the task's is the same, since async-io wakes a waker it
    /// is given a different one in place of.
    fn stir_for(&self, task: &Waker) -> Waker {
        let mut kept = self.stir.borrow_mut();
        if let Some(stir) = kept.as_ref().filter(|s| s.0.will_wake(task)) {
            return stir.1.clone();
        }
        let stir = Waker::from(Arc::new(Stir {
            stirred: self.stirred.clone(),
            task: task.clone(),
        }));
        *kept = Some((task.clone(), stir.clone()));
        stir
    }

    pub fn stirred(&self) -> bool {
        self.stirred.load(Ordering::Relaxed)
    }

    /// Reads every change queued; whether there was any.
    fn read_changes(&self, each: &mut impl FnMut(&Change)) -> std::io::Result<bool> {
        self.stirred.store(false, Ordering::Relaxed);
        let mut buf = [0u8; 4096];
        let mut found = false;
        loop {
            match nix::unistd::read(self.inotify.get_ref(), &mut buf) {
                Ok(n) => {
                    found = true;
                    records(&buf[..n], |wd, mask, name| self.note(wd, mask, name, each));
                }
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => return Ok(found),
                Err(e) => {
                    each(&Change::All);
                    return Err(e.into());
                }
            }
        }
    }

    fn note(&self, wd: i32, mask: AddWatchFlags, name: &[u8], each: &mut impl FnMut(&Change)) {
        match self.dir_of(wd) {
            // A watch already forgotten, saying it is gone.
            None if !mask.contains(AddWatchFlags::IN_Q_OVERFLOW) => {}
            Some(dir) if !name.is_empty() && !mask.contains(AddWatchFlags::IN_ISDIR) => {
                each(&Change::Name(join(&dir, name)));
            }
            // A directory created, renamed or removed, or events lost: what
            // the names and the watches stand for may have moved. Rare on a
            // device, so start again.
            _ => {
                self.reset();
                each(&Change::All);
            }
        }
    }

    fn dir_of(&self, wd: i32) -> Option<Box<str>> {
        let dirs = self.dirs.borrow();
        dirs.iter()
            .find(|(w, _)| w.as_raw() == wd)
            .map(|(_, d)| d.clone())
    }
}

/// The directory part of a relative name ("" for a name in the root).
pub fn dir_of(rel: &str) -> &str {
    rel.rfind('/').map_or("", |i| &rel[..i])
}

/// Calls `each(wd, mask, name)` for every `struct inotify_event` in `bytes`
/// (the name without its NUL padding; empty for the directory itself).
fn records(mut bytes: &[u8], mut each: impl FnMut(i32, AddWatchFlags, &[u8])) {
    const HEAD: usize = 16;
    let word = |b: &[u8], i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    while bytes.len() >= HEAD {
        let len = word(bytes, 12) as usize;
        let Some(name) = bytes.get(HEAD..HEAD + len) else {
            return;
        };
        let name = name.split(|&b| b == 0).next().unwrap_or_default();
        each(
            word(bytes, 0) as i32,
            AddWatchFlags::from_bits_truncate(word(bytes, 4)),
            name,
        );
        bytes = &bytes[HEAD + len..];
    }
}

fn join(dir: &str, name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
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
                async {
                    let mut seen = Vec::new();
                    watch.changes(|c| seen.push(format!("{c:?}"))).await.ok()?;
                    Some(seen)
                },
                async {
                    async_io::Timer::after(d).await;
                    None
                },
            ))
        };
        let seen = within(std::time::Duration::from_secs(10)).expect("a change");
        assert!(
            seen.contains(&r#"Name("sub/a.txt")"#.to_string()),
            "{seen:?}"
        );
        // Read once: nothing more is reported (for a while, at least).
        assert!(within(std::time::Duration::from_millis(200)).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
