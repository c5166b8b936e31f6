//! Every bound the server enforces, with the reason beside it.

use std::time::Duration;

/// Request head buffer: request line plus headers. 8 KiB is what nginx and
/// uhttpd accept by default; larger heads get 414/431.
pub const HEAD_BUF: usize = 8192;

/// Longest request line (method, target, version). Beyond it: 414.
pub const MAX_REQUEST_LINE: usize = 4096;

/// Headers per request. Browsers send about 15; beyond this: 431.
pub const MAX_HEADERS: usize = 48;

/// Longest decoded path. Linux PATH_MAX is 4096; the root prefix needs room too.
pub const MAX_PATH: usize = 2048;

/// A request body on a static path is read and thrown away up to this size,
/// so the next pipelined request can be parsed; larger bodies get 413 and close.
pub const MAX_DISCARDED_BODY: u64 = 1 << 20;

/// Longest pause between accept errors such as EMFILE, so a full descriptor
/// table never turns the accept loop into a busy loop.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Default connection limit. An idle keep-alive connection costs about 1 KiB
/// here (no buffer is held while idle) plus the kernel's socket, so 1024 fit
/// a 64 MB device; a browser opens about 6 per page. A hostile client can
/// make one hold more, up to about 85 KiB over TLS: SECURITY.md's memory
/// ceiling says what to choose on a small device.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// One client (an IPv4 address, or an IPv6 /64) holds at most this part
/// of a worker's connections (`max-connections` / `workers`), and never
/// fewer than `CLIENT_SHARE_MIN`: a quarter of the shipped device's 256
/// is 64, ten browsers' worth. A new connection past its share is closed
/// at once; the others keep at least three quarters for everyone else.
pub const CLIENT_SHARE_PART: usize = 4;
pub const CLIENT_SHARE_MIN: usize = 8;

/// A crashing worker is restarted, but not faster than this.
pub const RESPAWN_DELAY: Duration = Duration::from_millis(500);

/// Accept errors (EMFILE) are logged at most this often.
pub const ACCEPT_WARNING_EVERY: Duration = Duration::from_secs(10);

/// A connection that closes reads what the client still sends for this
/// long, or this many bytes, so unread bytes do not turn the close into a
/// reset that destroys the response in flight.
pub const LINGER_TIME: Duration = Duration::from_secs(2);
pub const LINGER_BYTES: usize = 64 * 1024;

/// One read from or write to a CGI script's pipes: a pipe holds 64 KiB,
/// and 16 KiB fills an output buffer (`OUT_BUF`).
pub const PIPE_CHUNK: usize = 16 * 1024;

/// Longest line of a script's stderr logged as one line.
pub const STDERR_LINE: u64 = 1024;

/// A script's exit is noticed through SIGCHLD; this is the backstop if
/// that wake-up is lost.
pub const REAP_BACKSTOP: Duration = Duration::from_millis(200);

/// Workers still alive after SIGKILL at stop (stuck in the kernel) are
/// sent it again this often.
pub const KILL_AGAIN: Duration = Duration::from_secs(1);

/// Files the file cache keeps per worker.
pub const CACHE_ENTRIES: usize = 64;
/// Files up to this size are kept in memory (the UI's HTML, CSS and JS).
pub const SMALL_BODY: u64 = 12 * 1024;
/// Memory for kept bodies, per worker.
pub const BODY_BUDGET: usize = 256 * 1024;
/// How long "this variant does not exist" is believed.
pub const ABSENT_FOR: Duration = Duration::from_secs(1);

/// Answers decompressed on the fly at once per worker (a `.gz`-only file
/// to a client that does not take gzip: curl without `--compressed`, a
/// script's fetch), about 51 KiB each (`http/gunzip.rs`); past it 503
/// with Retry-After. Browsers take gzip and never need one.
pub const MAX_INFLATING: usize = 8;

/// After this many connections at once, the free memory they leave is
/// given back to the system once they have fallen to a quarter of it
/// (`sys::return_free_memory`): a flood's buffers do not stay resident.
pub const FLOOD_CONNECTIONS: usize = 64;

/// Output buffer size: headers plus a small file body in one write; larger
/// bodies go out with sendfile(2) after the headers.
pub const OUT_BUF: usize = 16 * 1024;

/// Buffers of each kind the pool keeps for reuse beyond those in use; the rest are freed.
pub const POOL_KEEP: usize = 16;

/// Blocks kept for the next request's future (`server/frames.rs`), about
/// 5.5 KiB each: enough for a burst of keep-alive clients, little when idle.
pub const FRAMES_KEEP: usize = 8;

/// The deadline table's tick: a deadline fires at most two of these late,
/// and the worker's clock is read once per tick while anything waits.
pub const TICK: Duration = Duration::from_millis(250);

/// Sets of matching rules whose lines a worker keeps. A site has a handful;
/// past this, lines are made per response (correct, only slower).
pub const KEPT_RULE_LINES: usize = 64;

/// Longest chunk-size line (with its extensions) of a chunked body; its
/// trailer lines are held to `MAX_TRAILERS` only.
pub const MAX_CHUNK_LINE: usize = 4096;

/// Longest trailer section of a chunked request body; past it: 413. A
/// trailer section is a header section: the same bound as a request head
/// (`HEAD_BUF`). It is never passed on, only read past, and without a cap
/// a client could hold a backend connection or a script slot for as long
/// as it sends trailer lines.
pub const MAX_TRAILERS: usize = HEAD_BUF;

/// Largest chunked request body a script is given, whatever `cgi-max-body`
/// allows: such a body is decoded in memory before the script starts (its
/// `CONTENT_LENGTH` must be known), one per running script. A body with
/// `Content-Length` streams instead, so raising `cgi-max-body` for firmware
/// uploads (tens of MB) must not let a chunked one take that much memory.
/// Browsers send uploads with `Content-Length`.
pub const MAX_CGI_CHUNKED_BODY: u64 = 1 << 20;

/// A script request from a client that runs its share of the scripts
/// (half of `cgi-max`) waits this long for one of its own to end, then
/// 503: a browser's parallel requests to LuCI take turns instead of
/// failing, and a client flooding requests holds only its share.
pub const CGI_SHARE_WAIT: Duration = Duration::from_secs(10);
/// Local redirects (`Location: /path` from a script) followed for one
/// request; a loop of scripts redirecting to each other ends in a 500.
pub const MAX_LOCAL_REDIRECTS: u32 = 5;

/// Basic auth: how long a good login is remembered, and how many are (per
/// worker). A browser sends the same credentials with every request; a
/// remembered login costs no hash.
pub const AUTH_CACHE_TTL: Duration = Duration::from_secs(60);
pub const AUTH_CACHE_MAX: usize = 256;

/// The longest Basic auth user name and password checked, in bytes; longer
/// ones get 401 without hashing, as a wrong password does. The sha-crypt
/// and MD5-based formats cost time in proportion to the password's length
/// (a 5 KB one costs several times a short one), and no person types 256
/// bytes; bcrypt reads only the first 72.
pub const AUTH_MAX_CREDENTIAL: usize = 256;

/// Checks of wrong passwords from one client (an address, or an off-link
/// IPv6 /64: `net::client`) within `AUTH_FAIL_WINDOW`, whatever the user
/// names, before every Basic auth request from it gets 429 for the rest of
/// the window; across all workers (each allows its share). Enough for a
/// person's typos; it keeps online guessing to a few passwords a minute
/// per client.
pub const AUTH_FAIL_LIMIT: u32 = 5;
pub const AUTH_FAIL_WINDOW: Duration = Duration::from_secs(60);
/// Checks of wrong passwords from all the clients of one network (a link's
/// /64 or IPv4 subnet, an off-link /48 or /24) within
/// `AUTH_NET_FAIL_WINDOW`, before its addresses that have not logged in
/// lately get 429 for the rest of the window: 120 an hour for a host
/// however many addresses it takes in that network. Four people's typos.
pub const AUTH_NET_FAIL_LIMIT: u32 = 20;
pub const AUTH_NET_FAIL_WINDOW: Duration = Duration::from_secs(600);
/// Clients and networks the limiter tracks per worker, 40 bytes each. A
/// new one past this replaces the one with the fewest failures, so a flood
/// of new addresses does not free a held one.
pub const AUTH_FAIL_CLIENTS: usize = 1024;
pub const AUTH_FAIL_NETS: usize = 256;
/// An address whose login was good is held back only by its own count, not
/// its network's, for this long after it (a browser's login is checked
/// again each `AUTH_CACHE_TTL` while it is used); at most this many per
/// worker (48 bytes each), and this many per user, its latest, so that
/// one account exempts only a few addresses of a host that takes many.
pub const AUTH_TRUSTED_FOR: Duration = Duration::from_secs(24 * 60 * 60);
pub const AUTH_TRUSTED: usize = 64;
pub const AUTH_TRUSTED_PER_USER: usize = 4;

/// Threads per worker that verify passwords. One: a bcrypt or sha-crypt
/// check keeps a core busy for tens of milliseconds (hundreds on a device),
/// so a flood of logins costs at most one core per worker, a fixed amount
/// of memory, and the worker thread goes on serving.
pub const AUTH_THREADS: usize = 1;
/// Checks waiting for a thread; past this, 503. Room for a browser's first
/// parallel requests with a new login (about 6); a longer queue would only
/// make everyone wait longer during a flood.
pub const AUTH_QUEUE: usize = 8;

/// Entries a directory listing shows (directories first, then by name):
/// a page of this many is about 250 KB. Past it, the page says how many
/// more there are.
pub const MAX_LISTED: usize = 1000;

/// A listing page is kept this long and shared by every client that asks
/// for it meanwhile, so clients that do not read cost one page, not one
/// each.
pub const LISTING_FRESH: Duration = Duration::from_secs(1);

/// With several workers, one at its share of the connection limit waits
/// this long before closing an idle connection for a new client: another
/// worker with room takes the client meanwhile.
pub const RECLAIM_AFTER: Duration = Duration::from_millis(100);

/// TLS: sessions the server remembers per worker for TLS 1.2 resumption
/// by session id (a few hundred bytes each); the oldest go first. Such a
/// client resumes only on the worker that made its session; tickets (TLS
/// 1.3, and 1.2 clients that take one) are not stored and open on any.
#[cfg(feature = "tls")]
pub const TLS_SESSIONS: usize = 256;

/// TLS 1.3 tickets sent after a full handshake: one is enough for a
/// browser's next connection, each costs a record and a few hundred bytes.
#[cfg(feature = "tls")]
pub const TLS_TICKETS: usize = 1;

/// TLS tickets are sealed under a key used this long (seconds), then
/// replaced by the next of its chain (`tls/tickets.rs`); a ticket is
/// accepted until the end of the period after its own. Six hours, as
/// rustls's own ticketer: what a process holds opens no ticket sealed
/// before the previous period.
#[cfg(feature = "tls")]
pub const TLS_TICKET_KEY_LIFE: u32 = 6 * 60 * 60;

/// TLS: received bytes are read this much at a time. A ClientHello fits
/// one read; a connection's buffer grows by this while a record comes in
/// and goes back to the worker's pool once it is decrypted, so an idle
/// connection holds none.
#[cfg(feature = "tls")]
pub const TLS_READ: usize = 4096;

/// TLS: the most received bytes held before they decrypt to something,
/// once the handshake is done: one whole record, 16 KiB of plaintext with
/// its header and the most its AEAD adds (TLS 1.3's padding and tag; TLS
/// 1.2 adds 24). A client sends no large handshake message after the
/// handshake (a key update is a few bytes).
#[cfg(feature = "tls")]
pub const TLS_HELD: usize = TLS_RECORD + 256 + 5;

/// TLS: the most received bytes held while the handshake runs. A client's
/// messages are a ClientHello (about 0.5 KiB, up to 2 KiB with a
/// post-quantum key share or a large session ticket) and its small last
/// flight; 16 KiB leaves an 8-fold margin and is one full record. rustls
/// would join a handshake message of up to 64 KiB from many records, so
/// every handshaking client could hold that until the head timeout.
#[cfg(feature = "tls")]
pub const TLS_HANDSHAKE_HELD: usize = TLS_RECORD + 5;

/// TLS: plaintext encrypted per record going out, so a record and its
/// overhead (at most 29 bytes for TLS 1.2 AES-GCM) fit one output buffer.
#[cfg(feature = "tls")]
pub const TLS_CHUNK: usize = OUT_BUF - 64;

/// TLS with the kernel's records (kTLS): records sent on one connection,
/// counted from above, before it is closed. rustls stops an AES-GCM key at
/// 2^24 records (its confidentiality limit) and the kernel neither counts
/// nor updates keys: half of that, up to 128 GiB in full records.
#[cfg(feature = "tls")]
pub const KTLS_RECORDS: u64 = 1 << 23;

/// TLS: the most plaintext one record carries (RFC 8446 section 5.1).
#[cfg(feature = "tls")]
pub const TLS_RECORD: usize = 16 * 1024;

/// Proxy: idle connections a worker keeps per route for the next request.
/// A browser sends about 6 requests at once; more kept would mostly sit.
pub const PROXY_IDLE: usize = 4;
/// A kept backend connection older than this is closed, not reused:
/// under Node's 5 s keep-alive default, so a backend rarely closes one
/// just as a request goes out on it.
pub const PROXY_IDLE_FOR: Duration = Duration::from_secs(4);
/// Proxy: body bytes read and sent at once, each way: an output buffer's
/// worth, and all a connection holds of a body, whatever its size.
pub const PROXY_CHUNK: usize = 16 * 1024;
/// Header fields in a backend's answer head; past it: 502.
pub const MAX_ANSWER_FIELDS: usize = 64;
/// CGI and proxy: the least average pace of a request body, in bytes per
/// second the server waits on the client (`cgi-body-rate`,
/// `proxy-body-rate`). 1 KiB/s is 8 kbit/s, a fifth of a GPRS uplink
/// (about 40 kbit/s), the slowest link a device is commonly managed over:
/// a 16 MiB firmware image at exactly this pace takes 4.5 hours and
/// still passes, while a body trickled at a byte every few seconds is cut
/// once the grace (`header-timeout`) is spent.
pub const DEFAULT_BODY_RATE: u64 = 1024;
/// Proxy: a client that closed its side while its request waits for the
/// answer head keeps the backend connection this much longer, not
/// `proxy-timeout`: a script that half-closes after its request (as `nc`
/// does) still gets a prompt backend's answer.
pub const PROXY_GONE_GRACE: Duration = Duration::from_secs(2);
/// Proxy: an answer without a length (chunked, or until the close) still
/// coming after this long is long-lived (a stream, a log tail) and moves
/// into the long-lived answers' budget, or is cut when that is full.
/// Ten seconds is more than any page's API call takes on a device.
pub const PROXY_LONG_AFTER: Duration = Duration::from_secs(10);

/// Largest ubus message after its 8-byte header (its attributes, padded):
/// ubusd's own limit (`UBUS_MAX_MSGLEN`, 1 MiB); a longer one from the bus
/// is a protocol error that closes the connection.
#[cfg(feature = "ubus")]
pub const UBUS_MAX_MESSAGE: usize = 1 << 20;

/// Largest JSON-RPC request body on the ubus endpoint: uhttpd's
/// `UH_UBUS_MAX_POST_SIZE` (64 KiB); a larger one is answered -32700.
#[cfg(feature = "ubus")]
pub const UBUS_MAX_BODY: usize = 64 * 1024;

/// Nesting of arrays and objects in a request: json-c's default tokener
/// depth, which uhttpd parses with.
#[cfg(feature = "ubus")]
pub const UBUS_JSON_DEPTH: usize = 32;

/// Nesting written out of a bus reply (the writer recurses): far deeper
/// than any rpcd answer; deeper values are written as null.
#[cfg(feature = "ubus")]
pub const UBUS_REPLY_DEPTH: usize = 64;

/// What one call may collect from the bus (all DATA replies of an invoke,
/// or a lookup's object list with signatures): a few ubusd messages'
/// worth; beyond it the call answers -32603.
#[cfg(feature = "ubus")]
pub const UBUS_MAX_REPLY: usize = 2 << 20;

/// Endpoint requests talking to the bus at once per worker, each holding
/// its body and reply: LuCI keeps a few in flight per page; beyond this
/// 503 with Retry-After.
#[cfg(feature = "ubus")]
pub const UBUS_MAX_CALLS: usize = 64;

/// Of those, the most one client holds at once (a quarter, as the
/// proxy's default share): a browser sends about 6 at a time.
#[cfg(feature = "ubus")]
pub const UBUS_CALLS_PER_CLIENT: usize = 16;

/// Of those, the most requests without a session the endpoint knows
/// (`session.login`, `list`, an unknown or anonymous session) at once,
/// and the most of them one client holds: a flood of password guesses
/// holds at most this, and the rest of the calls stay for sessions. A
/// browser's burst (at most 6 connections to a host) fits one share,
/// as it must for a session the worker has not seen yet (after a start
/// or a reload).
#[cfg(feature = "ubus")]
pub const UBUS_ANONYMOUS_CALLS: usize = 24;
#[cfg(feature = "ubus")]
pub const UBUS_ANONYMOUS_PER_CLIENT: usize = 8;

/// How long such a request waits for a place when they are all taken
/// (503 after). Places free as rpcd answers; the waiting client holding
/// the fewest goes first, so a client with none (the owner logging in)
/// is next whatever a flood holds. As many wait at most as there are
/// places (`ubus/calls.rs`), so each wake-up costs little.
#[cfg(feature = "ubus")]
pub const UBUS_ANONYMOUS_WAIT: Duration = Duration::from_secs(5);

/// Sessions the endpoint knows per worker (rpcd accepted them in a
/// `session.access` check or made them at a login), and for how long
/// after the last time: rpcd's default session timeout. A new one past
/// the count replaces the least recent. Only a password makes one.
#[cfg(feature = "ubus")]
pub const UBUS_SESSIONS_KEPT: usize = 64;
#[cfg(feature = "ubus")]
pub const UBUS_SESSION_KEPT_FOR: Duration = Duration::from_secs(300);

/// Event streams (`/subscribe/`) open at once per worker; each holds a
/// client connection and a subscriber object on the bus.
#[cfg(feature = "ubus")]
pub const UBUS_MAX_SUBSCRIBERS: usize = 32;

/// Requests in one JSON-RPC batch: LuCI batches a page's calls, a few
/// dozen; a larger batch is answered -32600. The 64 KiB body already
/// bounds it; this bounds the time one request holds a call slot.
#[cfg(feature = "ubus")]
pub const UBUS_MAX_BATCH: usize = 256;

/// Event text waiting for one stream's client; a client that does not
/// read it ends its stream.
#[cfg(feature = "ubus")]
pub const UBUS_EVENT_QUEUE: usize = 64 * 1024;

/// Object ids kept per bus connection (looked up once, forgotten when the
/// connection or the object changes): a LuCI session uses about 20.
#[cfg(feature = "ubus")]
pub const UBUS_IDS_KEPT: usize = 64;
