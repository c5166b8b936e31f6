//! HTTP Basic authentication (RFC 7617): realms per path prefix, users from
//! htpasswd-style files. Hashes are checked by the C library's crypt(3)
//! (musl and libxcrypt both do `$1$`, `$5$`, `$6$` and bcrypt `$2b$`/`$2y$`)
//! on a short-lived thread, since bcrypt and sha-crypt take long on small
//! CPUs; successes are cached briefly and failures rate-limited per address.

use std::ffi::{CStr, CString, c_char};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use async_io::Async;
use futures_lite::AsyncReadExt;

use crate::http::request::{Field, Request};
use crate::policy::access::under;

/// How long a successful check is remembered.
const CACHE_TTL: Duration = Duration::from_secs(60);
/// Cached successes at most (per worker).
const CACHE_MAX: usize = 256;
/// Failures an address may have within `FAIL_WINDOW` before it is refused (429).
const FAIL_LIMIT: u32 = 5;
const FAIL_WINDOW: Duration = Duration::from_secs(60);
/// Addresses tracked for failures at most (per worker).
const FAIL_MAX: usize = 1024;

/// A hash of a real format for unknown users, so that they take as long as known ones.
const DECOY: &str = "$6$decoydecoy$H6UbnN.2rX4.GZ4xGIVIWOhzCZ0HoWwVsAgOsbBbGxl7jHH5pOj4/qbNodi2iWx4vdyRd0hUjkh6HTwr9ANCA0";

#[derive(Debug, Clone, PartialEq)]
pub struct Realm {
    pub prefix: String,
    pub name: String,
    pub file: PathBuf,
}

/// Parses `PREFIX "Realm name" /path/to/htpasswd`.
pub fn parse_realm(value: &str) -> Result<Realm, String> {
    let usage = "expected PREFIX \"Realm\" /path/to/htpasswd";
    let (prefix, rest) = value.split_once(char::is_whitespace).ok_or(usage)?;
    let rest = rest.trim_start().strip_prefix('"').ok_or(usage)?;
    let (name, file) = rest.split_once('"').ok_or(usage)?;
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

/// Checks that a realm's htpasswd file can be read, so that a typo is a
/// config error rather than a realm nobody can log in to. Regular files
/// only: opening a FIFO or a device could block or have effects.
pub fn check_file(path: &Path) -> Result<(), String> {
    let cannot = |e: std::io::Error| format!("htpasswd file {}: {e}", path.display());
    if !std::fs::metadata(path).map_err(cannot)?.is_file() {
        return Err(format!(
            "htpasswd file {}: not a regular file",
            path.display()
        ));
    }
    std::fs::File::open(path).map_err(cannot)?;
    Ok(())
}

/// What a request under a realm gets.
pub enum Decision {
    /// Not protected, or a good password (the user).
    Pass(Option<String>),
    /// 401 with this realm's challenge.
    Challenge(&'static str),
    /// 429: too many failures from this address.
    Limited,
    /// A password to check against a hash, off the worker thread.
    Verify(Pending),
}

pub struct Pending {
    pub user: String,
    password: String,
    hash: String,
    tag: u64,
    realm: usize,
}

/// The answer of a verification, handed back to `check`.
pub struct Checked {
    tag: u64,
    user: String,
    ok: bool,
}

impl Pending {
    /// Runs crypt(3) on a thread of its own and waits for it without blocking the worker.
    pub async fn run(self) -> Checked {
        let ok = verify_off_thread(self.password, self.hash).await;
        Checked {
            tag: self.tag,
            user: self.user,
            ok: ok && self.realm != usize::MAX,
        }
    }
}

/// `(user, hash)` pairs of one htpasswd file.
type Users = Vec<(String, String)>;

/// Per-worker state: users per file, cached successes, failure counts.
pub struct Auth {
    realms: &'static [Realm],
    /// Per realm: the file's mtime when read, and its `(user, hash)` lines.
    users: Vec<Option<(SystemTime, Users)>>,
    /// `(credentials tag, user, valid until)`; small, so a Vec (no hash map code in the binary).
    cache: Vec<(u64, String, Instant)>,
    /// `(address, failures, window start)`.
    failures: Vec<(IpAddr, u32, Instant)>,
    keys: RandomState,
}

impl Auth {
    pub fn new(realms: &'static [Realm]) -> Auth {
        Auth {
            realms,
            users: vec![None; realms.len()],
            cache: Vec::new(),
            failures: Vec::new(),
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
        let Some(i) = self.realms.iter().position(|r| under(path, &r.prefix)) else {
            return Decision::Pass(None);
        };
        let realm: &'static Realm = &self.realms[i];
        if self.limited(client) {
            return Decision::Limited;
        }
        let Some(header) = req.get(Field::Authorization) else {
            return Decision::Challenge(&realm.name);
        };
        let tag = self.tag(i, header);
        if let Some(v) = verdict.filter(|v| v.tag == tag) {
            if v.ok {
                self.remember(tag, &v.user);
                return Decision::Pass(Some(v.user));
            }
            log::warn!(
                "auth: wrong password for user {:?} from {client} (realm {:?})",
                v.user,
                realm.name
            );
            self.fail(client);
            return Decision::Challenge(&realm.name);
        }
        // A changed password file clears the cache, so check it first.
        self.users(i);
        if let Some((_, user, until)) = self.cache.iter().find(|(t, _, _)| *t == tag) {
            if *until > Instant::now() {
                return Decision::Pass(Some(user.clone()));
            }
        }
        let Some((user, password)) = basic_credentials(header) else {
            log::warn!(
                "auth: malformed credentials from {client} (realm {:?})",
                realm.name
            );
            self.fail(client);
            return Decision::Challenge(&realm.name);
        };
        let known = self
            .users(i)
            .iter()
            .find(|(u, _)| *u == user)
            .map(|(_, h)| h.clone());
        let (hash, realm_index) = match known {
            Some(h) => (h, i),
            None => {
                log::warn!(
                    "auth: unknown user {user:?} from {client} (realm {:?})",
                    realm.name
                );
                (DECOY.to_string(), usize::MAX)
            }
        };
        Decision::Verify(Pending {
            user,
            password,
            hash,
            tag,
            realm: realm_index,
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
        if self.cache.len() >= CACHE_MAX {
            self.cache.remove(0);
        }
        self.cache.push((tag, user.to_string(), now + CACHE_TTL));
    }

    fn limited(&self, client: IpAddr) -> bool {
        self.failures
            .iter()
            .any(|(a, n, since)| *a == client && *n >= FAIL_LIMIT && since.elapsed() < FAIL_WINDOW)
    }

    fn fail(&mut self, client: IpAddr) {
        self.failures
            .retain(|(_, _, since)| since.elapsed() < FAIL_WINDOW);
        match self.failures.iter_mut().find(|(a, _, _)| *a == client) {
            Some(entry) => entry.1 += 1,
            None => {
                if self.failures.len() >= FAIL_MAX {
                    self.failures.remove(0);
                }
                self.failures.push((client, 1, Instant::now()));
            }
        }
    }

    /// The users of realm `i`, re-read when the file changes.
    fn users(&mut self, i: usize) -> &Users {
        let file = &self.realms[i].file;
        let mtime = std::fs::metadata(file).and_then(|m| m.modified()).ok();
        let stale = match (&self.users[i], mtime) {
            (Some((seen, _)), Some(m)) => *seen != m,
            _ => true,
        };
        if stale {
            let map = read_htpasswd(file);
            self.users[i] = Some((mtime.unwrap_or(SystemTime::UNIX_EPOCH), map));
            // A changed file may have changed passwords: forget what was cached.
            self.cache.clear();
        }
        &self.users[i]
            .get_or_insert_with(|| (SystemTime::UNIX_EPOCH, Vec::new()))
            .1
    }
}

/// `user:hash` lines; comments and unsupported hash formats are skipped.
fn read_htpasswd(path: &std::path::Path) -> Users {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            log::error!("auth: {}: {e}", path.display());
            return Vec::new();
        }
    };
    let mut users = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((user, hash)) = line.split_once(':') else {
            log::warn!("auth: {}:{}: not `user:hash`", path.display(), n + 1);
            continue;
        };
        let hash = hash.split(':').next().unwrap_or("");
        if !["$1$", "$5$", "$6$", "$2b$", "$2y$", "$2a$"]
            .iter()
            .any(|p| hash.starts_with(p))
        {
            log::warn!(
                "auth: {}:{}: unsupported hash format for {user}",
                path.display(),
                n + 1
            );
            continue;
        }
        users.retain(|(u, _): &(String, String)| u != user);
        users.push((user.to_string(), hash.to_string()));
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

fn crypt_matches(password: &str, hash: &str) -> bool {
    let (Ok(key), Ok(setting)) = (CString::new(password), CString::new(hash)) else {
        return false;
    };
    let Ok(_guard) = CRYPT.lock() else {
        return false;
    };
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

async fn verify_off_thread(password: String, hash: String) -> bool {
    let Ok((ours, theirs)) = UnixStream::pair() else {
        return false;
    };
    let Ok(ours) = Async::new(ours) else {
        return false;
    };
    let spawned = std::thread::Builder::new()
        .name("auth".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            log::debug!("auth: verifying a password");
            let ok = crypt_matches(&password, &hash);
            let _ = (&theirs).write_all(&[u8::from(ok)]);
        });
    if spawned.is_err() {
        return false;
    }
    let mut answer = [0u8; 1];
    (&ours).read_exact(&mut answer).await.is_ok() && answer[0] == 1
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
        assert_eq!(
            (r.prefix.as_str(), r.name.as_str()),
            ("/admin/", "Device admin")
        );
        assert!(parse_realm("/admin/ Device /x").is_err());
        assert!(parse_realm("/admin/ \"x\\\" /x").is_err());
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
