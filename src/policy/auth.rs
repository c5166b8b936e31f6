//! HTTP Basic authentication (RFC 7617): realms per path prefix, users from
//! htpasswd-style files. Hashes are checked by the C library's crypt(3)
//! (musl and libxcrypt both do `$1$`, `$5$`, `$6$` and bcrypt `$2b$`/`$2y$`),
//! and Apache's `$apr1$` here, since neither libc knows it. Checks run on a
//! small pool of threads with a bounded queue, since bcrypt and sha-crypt
//! take long on small CPUs; successes are cached briefly, and failures are
//! limited per client and per client network (see `failures`), counted
//! when a check starts.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime};

use async_io::Async;
use futures_lite::AsyncReadExt;

use crate::http::request::{Field, Request};
use crate::limits::{
    AUTH_CACHE_MAX, AUTH_CACHE_TTL, AUTH_FAIL_LIMIT, AUTH_MAX_CREDENTIAL, AUTH_NET_FAIL_LIMIT,
    AUTH_QUEUE, AUTH_THREADS,
};
use crate::net::client::OnLink;
use crate::policy::failures::{Counted, Failures, Limits};
use crate::policy::prefix;

/// For a realm without users: a hash of a real format, so that unknown
/// users still cost a verification.
const DECOY: &str = "$6$decoydecoy$H6UbnN.2rX4.GZ4xGIVIWOhzCZ0HoWwVsAgOsbBbGxl7jHH5pOj4/qbNodi2iWx4vdyRd0hUjkh6HTwr9ANCA0";

/// Hash formats accepted in htpasswd files.
const FORMATS: [&str; 7] = ["$apr1$", "$1$", "$5$", "$6$", "$2b$", "$2y$", "$2a$"];

#[derive(Debug, Clone, PartialEq)]
pub struct Realm {
    pub prefix: String,
    /// Shared with the challenges that carry it.
    pub name: Rc<str>,
    pub file: PathBuf,
}

/// Parses `PREFIX "Realm name" /path/to/htpasswd`.
pub fn parse_realm(value: &str) -> Result<Realm, String> {
    let usage = "expected PREFIX \"Realm\" /path/to/htpasswd";
    let (prefix, rest) = value.split_once(char::is_whitespace).ok_or(usage)?;
    let rest = rest.trim_start().strip_prefix('"').ok_or(usage)?;
    let (name, file) = rest.split_once('"').ok_or(usage)?;
    // The name ends at the second quote: anything glued to it, or another
    // quote later, means a quote inside the name, which the challenge's
    // quoted string could not carry as written.
    if file.contains('"') || !file.is_empty() && !file.starts_with(char::is_whitespace) {
        return Err(format!("a realm cannot contain `\"`; {usage}"));
    }
    let file = file.trim();
    if !prefix.starts_with('/') || file.is_empty() {
        return Err(usage.into());
    }
    if name.is_empty() || name.bytes().any(|b| b.is_ascii_control() || b == b'\\') {
        return Err(
            "the realm must be non-empty, without control characters or backslashes".into(),
        );
    }
    Ok(Realm {
        prefix: prefix.into(),
        name: name.into(),
        file: PathBuf::from(file),
    })
}

/// Checks that a realm's htpasswd file can be read and that every entry is
/// a hash this server verifies, so that a typo, a plain-text password or a
/// weak format is a config error rather than a user who cannot log in.
/// Regular files only: opening a FIFO or a device could block or have effects.
pub fn check_file(path: &Path) -> Result<(), String> {
    let cannot = |e: std::io::Error| format!("htpasswd file {}: {e}", path.display());
    if !std::fs::metadata(path).map_err(cannot)?.is_file() {
        return Err(format!(
            "htpasswd file {}: not a regular file",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(cannot)?;
    for (n, line) in text.lines().enumerate() {
        entry(line).map_err(|e| format!("{}:{}: {e}", path.display(), n + 1))?;
    }
    Ok(())
}

/// One line of an htpasswd file: `None` for blanks and comments.
fn entry(line: &str) -> Result<Option<(&str, &str)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let Some((user, hash)) = line.split_once(':') else {
        return Err("expected `user:hash`".into());
    };
    let hash = hash.split(':').next().unwrap_or("");
    if hash.starts_with("{SHA}") {
        return Err(format!(
            "user {user:?}: {{SHA}} (unsalted SHA-1) is too weak to accept; make the entry with `htpasswd -B` (bcrypt)"
        ));
    }
    if !FORMATS.iter().any(|p| hash.starts_with(p)) {
        return Err(format!(
            "user {user:?}: not a supported hash (a plain-text password?); make the entry with `htpasswd -B` (bcrypt)"
        ));
    }
    Ok(Some((user, hash)))
}

/// What a request under a realm gets.
pub enum Decision {
    /// Not protected, or a good password (the user).
    Pass(Option<String>),
    /// 401 with this realm's challenge.
    Challenge(Rc<str>),
    /// 429: too many failures from this client, or from its network.
    Limited,
    /// 503: the verification queue is full.
    Busy,
    /// A password being checked off the worker thread: wait for it, then ask again.
    Verify(Pending),
}

pub struct Pending {
    pub user: String,
    /// Where the pool writes its answer.
    answer: UnixStream,
    tag: u64,
    /// False for an unknown user, whose decoy check never passes.
    known: bool,
    /// `None` when the same credentials were already being checked.
    counted: Option<Counted>,
}

/// The answer of a verification, handed back to `check`.
pub struct Checked {
    tag: u64,
    user: String,
    ok: bool,
    counted: Option<Counted>,
}

impl Pending {
    /// Waits for the pool's answer without blocking the worker.
    pub async fn run(self) -> Checked {
        let mut answer = [0u8; 1];
        let ok = match Async::new(self.answer) {
            Ok(s) => (&s).read_exact(&mut answer).await.is_ok() && answer[0] == 1,
            Err(_) => false,
        };
        Checked {
            tag: self.tag,
            user: self.user,
            ok: ok && self.known,
            counted: self.counted,
        }
    }
}

/// `(user, hash)` pairs of one htpasswd file.
type Users = Vec<(String, String)>;

/// One realm's file as last read.
struct File {
    mtime: SystemTime,
    users: Users,
    /// What an unknown user's password is checked against (see `decoy_for`).
    decoy: String,
}

/// Per-worker state: users per file, cached successes, failure counts.
pub struct Auth {
    realms: Vec<Realm>,
    files: Vec<Option<File>>,
    /// `(credentials tag, user, valid until)`; small, so a Vec (no hash map code in the binary).
    cache: Vec<(u64, String, Instant)>,
    /// The process's counts, kept across reloads (shared with the
    /// generations before and after this one).
    failures: Rc<RefCell<Failures>>,
    /// Who a peer address is.
    links: OnLink,
    keys: RandomState,
}

/// Worker `slot` of `workers`' share of the failure limits. Each worker
/// keeps its own tables, and a client's connections may reach any worker,
/// so each limit is divided: the shares add up to `AUTH_FAIL_LIMIT` and
/// `AUTH_NET_FAIL_LIMIT` (with at least one try per worker when there are
/// more workers than tries).
pub fn fail_share(slot: usize, workers: usize) -> Limits {
    let share = |limit: u32| {
        let n = workers.max(1) as u32;
        let extra = u32::from((slot as u32) < limit % n);
        (limit / n + extra).max(1)
    };
    Limits {
        client: share(AUTH_FAIL_LIMIT),
        net: share(AUTH_NET_FAIL_LIMIT),
    }
}

impl Auth {
    pub fn new(realms: &[Realm], failures: Rc<RefCell<Failures>>, links: OnLink) -> Auth {
        Auth {
            realms: realms.to_vec(),
            files: realms.iter().map(|_| None).collect(),
            cache: Vec::new(),
            failures,
            links,
            keys: RandomState::new(),
        }
    }

    /// Decides for a request for `path` from `client`; `verdict` is the result
    /// of the verification this same request asked for, if any.
    pub fn check(
        &mut self,
        req: &Request<'_>,
        path: &str,
        client: IpAddr,
        verdict: Option<Checked>,
    ) -> Decision {
        let Some(i) = self
            .realms
            .iter()
            .position(|r| prefix::covers(path, &r.prefix))
        else {
            return Decision::Pass(None);
        };
        let realm = self.realms[i].name.clone();
        let header = req.get(Field::Authorization);
        let tag = header.map(|h| self.tag(i, h));
        let who = self.links.client(client);
        // The answer to a check this request started: given even if the
        // client has been held back since, as the check was within its share.
        if let Some(v) = verdict.filter(|v| Some(v.tag) == tag) {
            if v.ok {
                if let Some(counted) = v.counted {
                    self.failures.borrow_mut().refund(counted);
                }
                self.failures.borrow_mut().trust(who, &v.user);
                self.remember(v.tag, &v.user);
                return Decision::Pass(Some(v.user));
            }
            log::warn!(
                "auth: wrong password for user {:?} from {client} (realm {:?})",
                v.user,
                realm
            );
            return Decision::Challenge(realm);
        }
        // Before the cache: a held client's answers must not depend on its
        // guess, or a guess matching a login cached for its owner would
        // still tell itself apart. Per client, not per client and user, so
        // that switching names buys no more guesses (and no more hashing).
        if self.failures.borrow().held(who) {
            return Decision::Limited;
        }
        let (Some(header), Some(tag)) = (header, tag) else {
            return Decision::Challenge(realm);
        };
        // A changed password file clears the cache, so check it first.
        self.file(i);
        if let Some((_, user, until)) = self.cache.iter().find(|(t, _, _)| *t == tag) {
            if *until > Instant::now() {
                // A login checked for another address is as good from this one.
                let user = user.clone();
                self.failures.borrow_mut().trust(who, &user);
                return Decision::Pass(Some(user));
            }
        }
        let Some((user, password)) = basic_credentials(header) else {
            // Nothing to hash and nothing guessed: not counted.
            log::warn!(
                "auth: malformed credentials from {client} (realm {:?})",
                realm
            );
            return Decision::Challenge(realm);
        };
        if user.len() > AUTH_MAX_CREDENTIAL || password.len() > AUTH_MAX_CREDENTIAL {
            // A guess all the same, counted as one, but no hashing work:
            // no password this long is accepted.
            log::warn!(
                "auth: user name or password over {AUTH_MAX_CREDENTIAL} bytes from {client} (realm {:?})",
                realm
            );
            self.failures.borrow_mut().count(who);
            return Decision::Challenge(realm);
        }
        let file = self.file(i);
        let known = file.users.iter().find(|(u, _)| *u == user);
        let hash = known.map_or(&file.decoy, |(_, h)| h).clone();
        let known = known.is_some();
        if !known {
            log::warn!(
                "auth: unknown user {user:?} from {client} (realm {:?})",
                realm
            );
        }
        let Some((answer, again)) = submit(password, hash, tag) else {
            return Decision::Busy;
        };
        // Counted now, not when the answer comes: parallel guesses cannot
        // all start before the first is counted. The same credentials
        // already being checked (a browser's parallel requests) are one guess.
        let counted = (!again).then(|| self.failures.borrow_mut().count_logged(who, "auth"));
        Decision::Verify(Pending {
            user,
            answer,
            tag,
            known,
            counted,
        })
    }

    /// A keyed hash of the credentials: the cache never holds a password.
    fn tag(&self, realm: usize, header: &[u8]) -> u64 {
        let mut h = self.keys.build_hasher();
        h.write_usize(realm);
        h.write(header);
        h.finish()
    }

    fn remember(&mut self, tag: u64, user: &str) {
        let now = Instant::now();
        self.cache.retain(|(t, _, until)| *until > now && *t != tag);
        if self.cache.len() >= AUTH_CACHE_MAX {
            self.cache.remove(0);
        }
        self.cache
            .push((tag, user.to_string(), now + AUTH_CACHE_TTL));
    }

    /// Realm `i`'s file, re-read when it changes.
    fn file(&mut self, i: usize) -> &File {
        let path = &self.realms[i].file;
        let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        let stale = match (&self.files[i], mtime) {
            (Some(f), Some(m)) => f.mtime != m,
            _ => true,
        };
        if stale {
            let users = read_htpasswd(path);
            let decoy = decoy_for(&users);
            self.files[i] = Some(File {
                mtime: mtime.unwrap_or(SystemTime::UNIX_EPOCH),
                users,
                decoy,
            });
            // A changed file may have changed passwords: forget what was cached.
            self.cache.clear();
        }
        self.files[i].get_or_insert_with(|| File {
            mtime: SystemTime::UNIX_EPOCH,
            users: Vec::new(),
            decoy: DECOY.into(),
        })
    }
}

/// The hash an unknown user's password is checked against: the realm's first
/// entry with its digest changed. Same algorithm, cost and salt, so the same
/// work as a real user of the realm (a realm mixing kinds looks like its
/// first user); another digest, so no password matches it (and the result
/// is ignored anyway).
fn decoy_for(users: &Users) -> String {
    let Some((_, hash)) = users.first() else {
        return DECOY.into();
    };
    let mut decoy = hash.clone();
    let last = if decoy.pop() == Some('.') { '/' } else { '.' };
    decoy.push(last);
    decoy
}

/// `user:hash` lines; comments and entries `check_file` refuses are skipped
/// (the file may have changed since the start).
fn read_htpasswd(path: &Path) -> Users {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            log::error!("auth: {}: {e}", path.display());
            return Vec::new();
        }
    };
    let mut users: Users = Vec::new();
    for (n, line) in text.lines().enumerate() {
        match entry(line) {
            Ok(Some((user, hash))) => {
                users.retain(|(u, _)| u != user);
                users.push((user.to_string(), hash.to_string()));
            }
            Ok(None) => {}
            Err(e) => log::warn!("auth: {}:{}: {e}; skipped", path.display(), n + 1),
        }
    }
    users
}

/// Decodes `Basic base64(user:password)`.
fn basic_credentials(header: &[u8]) -> Option<(String, String)> {
    let (scheme, rest) = header.split_at(header.iter().position(|&b| b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let decoded = base64(crate::http::request::trim(rest))?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    if user.is_empty() || user.chars().any(char::is_control) {
        return None;
    }
    Some((user.to_string(), password.to_string()))
}

/// Standard base64 with padding (RFC 4648 section 4).
fn base64(input: &[u8]) -> Option<Vec<u8>> {
    if input.len() % 4 != 0 {
        return None;
    }
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(input.len() / 4 * 3);
    for (i, quad) in input.chunks(4).enumerate() {
        let last = i == input.len() / 4 - 1;
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            n = n << 6 | value(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - pad]);
    }
    Some(out)
}

// musl has crypt(3) in libc; glibc systems have it in libcrypt (libxcrypt).
#[cfg_attr(target_env = "gnu", link(name = "crypt"))]
unsafe extern "C" {
    fn crypt(key: *const c_char, salt: *const c_char) -> *mut c_char;
}

/// crypt(3) keeps its result in a static buffer.
static CRYPT: Mutex<()> = Mutex::new(());

fn verify(password: &str, hash: &str) -> bool {
    if hash.starts_with("$apr1$") {
        return apr1(password.as_bytes(), hash)
            .is_some_and(|h| constant_time_eq(h.as_bytes(), hash.as_bytes()));
    }
    crypt_matches(password, hash)
}

fn crypt_matches(password: &str, hash: &str) -> bool {
    let (Ok(key), Ok(setting)) = (CString::new(password), CString::new(hash)) else {
        return false;
    };
    let _guard = lock(&CRYPT);
    // SAFETY: both pointers are valid NUL-terminated strings for the call; the
    // result is copied out before the lock is released.
    let out = unsafe { crypt(key.as_ptr(), setting.as_ptr()) };
    if out.is_null() {
        return false;
    }
    // SAFETY: a non-null crypt result is a NUL-terminated string in libc's buffer.
    let out = unsafe { CStr::from_ptr(out) }.to_bytes();
    constant_time_eq(out, hash.as_bytes())
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A poisoned lock only means a verification panicked; the data is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A password to check, and where to write the answer.
struct Job {
    password: String,
    hash: String,
    tag: u64,
    answer: UnixStream,
}

/// The pool's state. One per process, and the pool lives in workers only:
/// threads do not survive fork, so they are started at the first check.
struct Queue {
    jobs: Vec<Job>,
    /// Tags of the checks queued or running.
    tags: Vec<u64>,
    threads: usize,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    jobs: Vec::new(),
    tags: Vec::new(),
    threads: 0,
});
static READY: Condvar = Condvar::new();

/// Queues a check: the end the answer arrives on, and whether the same
/// credentials are already queued or running. `None` when the queue is full.
fn submit(password: String, hash: String, tag: u64) -> Option<(UnixStream, bool)> {
    let mut q = lock(&QUEUE);
    if q.jobs.len() >= AUTH_QUEUE {
        return None;
    }
    if q.threads < AUTH_THREADS {
        let spawned = std::thread::Builder::new()
            .name("auth".into())
            .stack_size(64 * 1024)
            .spawn(hasher);
        match spawned {
            Ok(_) => q.threads += 1,
            Err(e) if q.threads == 0 => {
                log::error!("auth: cannot start a thread: {e}");
                return None;
            }
            Err(_) => {}
        }
    }
    let (ours, answer) = UnixStream::pair().ok()?;
    let again = q.tags.contains(&tag);
    q.tags.push(tag);
    q.jobs.push(Job {
        password,
        hash,
        tag,
        answer,
    });
    READY.notify_one();
    Some((ours, again))
}

/// A pool thread: checks queued passwords, oldest first, for ever.
fn hasher() {
    loop {
        let job = {
            let mut q = lock(&QUEUE);
            while q.jobs.is_empty() {
                q = READY.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
            q.jobs.remove(0)
        };
        log::debug!("auth: verifying a password");
        let ok = verify(&job.password, &job.hash);
        // Done before the answer goes: the client's next request with the
        // same credentials is a new guess, and must be counted as one.
        {
            let mut q = lock(&QUEUE);
            if let Some(p) = q.tags.iter().position(|&t| t == job.tag) {
                q.tags.swap_remove(p);
            }
        }
        // The client may have gone: nobody reads the answer then.
        let _ = (&job.answer).write_all(&[u8::from(ok)]);
    }
}

/// Apache's `$apr1$`: md5crypt (`$1$`) with another magic string, which the
/// libcs' crypt(3) do not know. The setting's salt is up to 8 characters.
fn apr1(password: &[u8], setting: &str) -> Option<String> {
    const MAGIC: &[u8] = b"$apr1$";
    let rest = setting.as_bytes().strip_prefix(MAGIC)?;
    let salt = &rest[..rest.iter().take(8).take_while(|&&b| b != b'$').count()];
    let alt = md5(&[password, salt, password].concat());
    let mut ctx = [password, MAGIC, salt].concat();
    for chunk in password.chunks(16) {
        ctx.extend_from_slice(&alt[..chunk.len()]);
    }
    let mut n = password.len();
    while n > 0 {
        ctx.push(if n & 1 == 1 { 0 } else { password[0] });
        n >>= 1;
    }
    let mut digest = md5(&ctx);
    for i in 0..1000 {
        let (first, last): (&[u8], &[u8]) = if i & 1 == 1 {
            (password, &digest)
        } else {
            (&digest, password)
        };
        let mut ctx = first.to_vec();
        if i % 3 != 0 {
            ctx.extend_from_slice(salt);
        }
        if i % 7 != 0 {
            ctx.extend_from_slice(password);
        }
        ctx.extend_from_slice(last);
        digest = md5(&ctx);
    }
    let mut out = [MAGIC, salt, b"$"].concat();
    let d = digest;
    let mut put = |v: u32, n: usize| {
        for k in 0..n {
            out.push(
                b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                    [(v >> (6 * k)) as usize & 63],
            );
        }
    };
    for (a, b, c) in [(0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)] {
        put(
            u32::from(d[a]) << 16 | u32::from(d[b]) << 8 | u32::from(d[c]),
            4,
        );
    }
    put(u32::from(d[11]), 2);
    String::from_utf8(out).ok()
}

/// MD5 (RFC 1321), for `$apr1$` only.
fn md5(data: &[u8]) -> [u8; 16] {
    const S: [[u32; 4]; 4] = [
        [7, 12, 17, 22],
        [5, 9, 14, 20],
        [4, 11, 16, 23],
        [6, 10, 15, 21],
    ];
    // floor(abs(sin(i + 1)) * 2^32)
    const K: [u32; 64] = [
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
        0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
        0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
        0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
        0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
        0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
        0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
        0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
        0xeb86d391,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&(data.len() as u64).wrapping_mul(8).to_le_bytes());
    let mut state: [u32; 4] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];
    for block in msg.chunks_exact(64) {
        let word = |g: usize| {
            let b = &block[g * 4..];
            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
        };
        let [mut a, mut b, mut c, mut d] = state;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(K[i]).wrapping_add(word(g));
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i / 16][i % 4]));
        }
        for (s, v) in state.iter_mut().zip([a, b, c, d]) {
            *s = s.wrapping_add(v);
        }
    }
    let mut out = [0u8; 16];
    for (o, s) in out.chunks_exact_mut(4).zip(state) {
        o.copy_from_slice(&s.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decoding() {
        assert_eq!(base64(b"YWRtaW46c2VjcmV0").unwrap(), b"admin:secret");
        assert_eq!(base64(b"YQ==").unwrap(), b"a");
        assert_eq!(base64(b"YWI=").unwrap(), b"ab");
        assert!(base64(b"YQ=").is_none());
        assert!(base64(b"Y===").is_none());
        assert!(base64(b"YQ==YQ==").is_none());
        assert!(base64(b"a!cd").is_none());
    }

    #[test]
    fn credentials() {
        assert_eq!(
            basic_credentials(b"Basic YWRtaW46c2VjcmV0"),
            Some(("admin".into(), "secret".into()))
        );
        assert_eq!(
            basic_credentials(b"basic YWRtaW46OnA6"),
            Some(("admin".into(), ":p:".into()))
        );
        assert_eq!(basic_credentials(b"Bearer abc"), None);
        assert_eq!(basic_credentials(b"Basic bm9jb2xvbg=="), None);
    }

    #[test]
    fn realms_parse() {
        let r = parse_realm("/admin/ \"Device admin\" /etc/marmoset/htpasswd").unwrap();
        assert_eq!((r.prefix.as_str(), &*r.name), ("/admin/", "Device admin"));
        assert!(parse_realm("/admin/ Device /x").is_err());
        assert!(parse_realm("/admin/ \"x\\\" /x").is_err());
    }

    #[test]
    fn a_quote_inside_the_realm_is_refused() {
        for bad in [
            "/a/ \"R\"x\" /etc/htpasswd",
            "/a/ \"R\"x /etc/htpasswd",
            "/a/ \"R\" x\" /etc/htpasswd",
        ] {
            let e = parse_realm(bad).unwrap_err();
            assert!(e.contains("cannot contain `\"`"), "{bad}: {e}");
        }
        assert_eq!(
            parse_realm("/a/ \"R x\"  /etc/my htpasswd").unwrap().file,
            PathBuf::from("/etc/my htpasswd")
        );
    }

    #[test]
    fn the_decoy_is_of_the_realms_kind_and_cost() {
        let users = |hash: &str| vec![("u".to_string(), hash.to_string())];
        // `htpasswd -nbB -C 10 u secret`.
        let bcrypt10 = "$2y$10$6q0lmvciECdRWS9eQjrJiejN4ZHaEFGNpHXW2p.mVEUHM5Slz1xUO";
        let decoy = decoy_for(&users(bcrypt10));
        assert!(decoy.starts_with("$2y$10$"), "{decoy}");
        assert_eq!(decoy.len(), bcrypt10.len());
        // The salt (and so the work) is the user's; the digest is not.
        assert_eq!(decoy[..29], bcrypt10[..29]);
        assert!(!crypt_matches("secret", &decoy));
        let sha = "$6$rounds=20000$saltsalt$abc.";
        assert_eq!(decoy_for(&users(sha)), "$6$rounds=20000$saltsalt$abc/");
        let apr1 = "$apr1$05HueDOk$1.QO9fyNVXQLQHqUwU2Or/";
        assert!(decoy_for(&users(apr1)).starts_with("$apr1$05HueDOk$"));
        assert!(!verify("pass", &decoy_for(&users(apr1))));
        assert_eq!(decoy_for(&Vec::new()), DECOY);
    }

    #[test]
    fn apr1_matches_htpasswd_and_openssl() {
        for (password, hash) in [
            // `htpasswd -nbm user pass`, `htpasswd -nbm u ''`.
            ("pass", "$apr1$05HueDOk$1.QO9fyNVXQLQHqUwU2Or/"),
            ("", "$apr1$RrvqCEpR$8bAhkIrTMHb8kB0RNPwWW/"),
            // `openssl passwd -apr1 -salt saltsalt secret`, and a password
            // longer than a digest with a short salt.
            ("secret", "$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0"),
            (
                "a much longer password of more than sixteen bytes",
                "$apr1$ab$heEN4dT9WYarC6Ga8vhKc1",
            ),
        ] {
            assert!(verify(password, hash), "{hash}");
            assert!(!verify("Pass", hash), "{hash}");
        }
        assert!(!verify("x", "$apr1$"));
        // RFC 1321's test suite.
        let hex = |d: [u8; 16]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(
            hex(md5(
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890"
            )),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
    }

    #[test]
    fn htpasswd_entries() {
        assert_eq!(entry("  # c"), Ok(None));
        assert_eq!(entry("u:$apr1$x$y:extra"), Ok(Some(("u", "$apr1$x$y"))));
        assert!(entry("admin:secret").unwrap_err().contains("plain-text"));
        assert!(
            entry("admin:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=")
                .unwrap_err()
                .contains("SHA-1")
        );
        assert!(entry("admin:").is_err());
        assert!(entry("admin").unwrap_err().contains("user:hash"));
    }

    #[test]
    fn the_failure_limit_is_divided_among_workers() {
        assert_eq!(fail_share(0, 1).client, AUTH_FAIL_LIMIT);
        assert_eq!(fail_share(0, 1).net, AUTH_NET_FAIL_LIMIT);
        for workers in 1..=AUTH_FAIL_LIMIT as usize {
            let total: u32 = (0..workers)
                .map(|slot| fail_share(slot, workers).client)
                .sum();
            assert_eq!(total, AUTH_FAIL_LIMIT, "{workers} workers");
            let total: u32 = (0..workers).map(|slot| fail_share(slot, workers).net).sum();
            assert_eq!(total, AUTH_NET_FAIL_LIMIT, "{workers} workers");
        }
        assert_eq!(fail_share(63, 64).client, 1, "at least one try per worker");
    }

    #[test]
    fn crypt_knows_the_formats() {
        // `openssl passwd -1 / -5 / -6 -salt saltsalt secret`.
        for hash in [
            "$1$saltsalt$9xy1btjgzLYfb7hivXtC//",
            "$5$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA",
            "$6$saltsalt$TVLlQcbpFVof5W3Yz4DTP6gRstiNuHwwTt6GLc1E5n0U0aDehy0S5knV8wiOQSpT0Y77vwPZN.Pq.H91p5hVO1",
            // `htpasswd -nbB -C 5`.
            "$2y$05$JFuLC2n0h7ugorwnW2VY9u218RfNIlJE22gjfPuLv0U4esAoA5daa",
        ] {
            assert!(crypt_matches("secret", hash), "{hash}");
            assert!(!crypt_matches("Secret", hash), "{hash}");
        }
        assert!(!crypt_matches("x", "plain"));
    }
}
