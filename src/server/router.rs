//! The request pipeline. It reads top to bottom; each step either answers
//! or hands on:
//!
//! 1. method: unknown ones get 501;
//! 2. path: decoded and normalised, or 400/404/414;
//! 3. address rules (403), cross-origin requests with unsafe methods (403),
//!    then Basic auth (401, 429, 503);
//! 4. redirect rules from the config;
//! 5. the ubus endpoint (`ubus PREFIX`), answered with the bus;
//! 6. reverse proxy prefixes (every method but CONNECT), to their backends;
//! 7. SCGI handlers, then CGI scripts, under their prefixes (GET, HEAD, POST);
//! 8. static files for GET and HEAD (405 otherwise): a precompressed variant
//!    when the client takes one, a `.gz` alone decompressed for a client that
//!    does not, the directory index or listing, the SPA fallback, or the
//!    error page; conditions and range apply to the representation chosen;
//! 9. the config's Cache-Control and header rules (not on proxied answers).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

use crate::cgi::script::{self, Job};
use crate::config::Config;
use crate::files::cache;
use crate::files::listing;
use crate::files::root::{self, Lookup, Opened, Root};
use crate::http::conditional::{self, Conditions, Validators};
use crate::http::gunzip::{Gunzip, Inflation};
use crate::http::header::{self, HeaderLine, RuleLines};
use crate::http::mime;
use crate::http::negotiate::{self, Encodings};
use crate::http::path::{self, CleanPath, PathError};
use crate::http::range::{self, Ranged};
use crate::http::request::{Field, Method, Request};
use crate::http::response::{self, Body, ContentRange, Response, StatusHeader};
use crate::http::status::Status;
use crate::limits::{KEPT_RULE_LINES, LISTING_FRESH};
use crate::net::deadline::Deadlines;
use crate::policy::access::{self, Verdict};
use crate::policy::auth::{self, Auth, Decision};
use crate::policy::failures::Failures;
use crate::policy::rules::Matched;
use crate::proxy::outgoing::{self, Forward};
#[cfg(feature = "ubus")]
use crate::ubus::asked::{self, Asked, Refusal};

/// What a worker serves: the configuration, the open root, auth state.
/// The last listing page made: its directory, when, the page.
type KeptListing = (String, Instant, Rc<[u8]>);

pub struct Site {
    pub config: Rc<Config>,
    pub root: Root,
    auth: RefCell<Auth>,
    /// What the rules do to a head, made once for each set of matching
    /// rules: an error page or a redirect takes them from here, not a new
    /// allocation per response.
    rule_lines: RefCell<Vec<(Matched, Rc<RuleLines>)>>,
    listing: RefCell<Option<KeptListing>>,
    /// The port of the first TLS listener, where `redirect-https` sends
    /// plain requests.
    #[cfg(feature = "tls")]
    pub https_port: Option<u16>,
}

impl Site {
    /// The site of a configuration, counting login failures in `failures`.
    pub fn new(
        config: Rc<Config>,
        failures: Rc<RefCell<Failures>>,
        clock: &'static Deadlines,
    ) -> Site {
        Site {
            root: Root::new(&config.root, config.symlinks, clock),
            auth: RefCell::new(Auth::new(&config.realms, failures, config.links.clone())),
            rule_lines: RefCell::new(Vec::new()),
            listing: RefCell::new(None),
            #[cfg(feature = "tls")]
            https_port: None,
            config,
        }
    }

    /// The listing page of directory `name`, made at most once per
    /// `LISTING_FRESH` while clients keep asking for it.
    fn listing(&self, name: &str) -> std::io::Result<Rc<[u8]>> {
        if let Some((kept, made, page)) = &*self.listing.borrow() {
            if kept == name && made.elapsed() < LISTING_FRESH {
                return Ok(page.clone());
            }
        }
        let page: Rc<[u8]> = listing::render(&self.config.root.join(name), name)?.into();
        *self.listing.borrow_mut() = Some((name.to_string(), Instant::now(), page.clone()));
        Ok(page)
    }

    /// What the config's rules do to a response for `name`.
    fn rule_lines(&self, name: &str) -> Rc<RuleLines> {
        let rules = &self.config.rules;
        let m = rules.matched(name);
        if let Some((_, lines)) = self.rule_lines.borrow().iter().find(|(k, _)| *k == m) {
            return lines.clone();
        }
        let lines = Rc::new(rules.lines_for(m));
        let mut kept = self.rule_lines.borrow_mut();
        if kept.len() < KEPT_RULE_LINES {
            kept.push((m, lines.clone()));
        }
        lines
    }
}

/// The two ends of the connection a request came on.
pub struct Client {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    /// The request came over TLS.
    #[cfg(feature = "tls")]
    pub tls: bool,
}

impl Client {
    /// Whether the request came over TLS (never, in a build without it).
    fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls;
        #[cfg(not(feature = "tls"))]
        false
    }
}

/// What the pipeline decided.
// The common variant is the large one; boxing it would allocate per request.
#[allow(clippy::large_enum_variant)]
pub enum Routed {
    Respond(Response),
    Cgi(Box<Job>),
    /// A request for a backend, its head ready to send.
    Proxy(Box<Forward>),
    /// A password to check before deciding (the caller runs it and asks again).
    Verify(auth::Pending),
    /// A request for the ubus endpoint.
    #[cfg(feature = "ubus")]
    Ubus(Box<Asked>),
}

pub fn route(
    site: &Site,
    req: &Request<'_>,
    client: &Client,
    verdict: Option<auth::Checked>,
) -> Routed {
    if req.method == Method::Unknown {
        return Routed::Respond(finish(site, Response::status(Status::NotImplemented), ""));
    }
    // A name that is not the device's: a page rebinding its own name to
    // the device's address (see `policy::hosts`).
    if let Some(hosts) = &site.config.allowed_hosts {
        if req
            .authority
            .or_else(|| req.get(Field::Host))
            .is_some_and(|host| !hosts.allows(host))
        {
            let r = Response::status(Status::MisdirectedRequest);
            return Routed::Respond(finish(site, r, ""));
        }
    }
    let (raw_path, query) = path::split_query(req.target);
    let mut path = CleanPath::default();
    match path::clean_into(raw_path, &mut path) {
        Ok(()) => {}
        Err(PathError::BadRequest) => {
            return Routed::Respond(finish(site, Response::status(Status::BadRequest), ""));
        }
        Err(PathError::Hidden) => return Routed::Respond(error(site, Status::NotFound, "")),
        Err(PathError::TooLong) => {
            return Routed::Respond(finish(site, Response::status(Status::UriTooLong), ""));
        }
    };
    let shown = path.shown();
    #[cfg(feature = "tls")]
    if let Some(r) = to_https(site, req, client, shown, query) {
        return Routed::Respond(finish(site, r, path.as_str()));
    }
    if access::check(&site.config.access, shown, client.peer.ip()) == Verdict::Deny {
        return Routed::Respond(error(site, Status::Forbidden, path.as_str()));
    }
    // Before auth: a forged request costs no password check, and its page
    // gets no login prompt.
    // With `ubus-cors on` the endpoint answers other origins itself.
    let ubus = &site.config.ubus;
    if site
        .config
        .cross_origin
        .refuses(req, shown, client.is_tls())
        && !(cfg!(feature = "ubus") && ubus.cors && ubus.rest(shown).is_some())
    {
        return Routed::Respond(error(site, Status::Forbidden, path.as_str()));
    }
    let user = match site
        .auth
        .borrow_mut()
        .check(req, shown, client.peer.ip(), verdict)
    {
        Decision::Pass(user) => user,
        Decision::Verify(pending) => return Routed::Verify(pending),
        Decision::Challenge(realm) => {
            return Routed::Respond(challenge(site, realm, path.as_str()));
        }
        Decision::Limited => {
            let mut r = Response::status(Status::TooManyRequests);
            r.add_header(header::RETRY_AFTER_LOGINS);
            return Routed::Respond(finish(site, r, path.as_str()));
        }
        // 503, not 429: the queue is full of everyone's checks, and this
        // client may have sent nothing wrong. The queue drains in moments.
        Decision::Busy => {
            let mut r = Response::status(Status::ServiceUnavailable);
            r.add_header(const { HeaderLine::new("\r\nRetry-After: 1") });
            return Routed::Respond(finish(site, r, path.as_str()));
        }
    };
    if let Some(r) = redirect(site, shown, query) {
        return Routed::Respond(finish(site, r, path.as_str()));
    }
    #[cfg(feature = "ubus")]
    if let Some(rest) = ubus.rest(shown) {
        return match asked::decide(ubus, req, rest) {
            Ok(asked) => Routed::Ubus(Box::new(asked)),
            Err(Refusal::NotFound) => Routed::Respond(error(site, Status::NotFound, path.as_str())),
            Err(Refusal::NotAllowed(allow)) => {
                Routed::Respond(not_allowed(site, allow, path.as_str()))
            }
        };
    }
    if let Some((index, _)) = site.config.proxy.route_for(shown) {
        let origin = outgoing::Origin {
            peer: client.peer.ip(),
            tls: client.is_tls(),
        };
        return match Forward::new(index, req, &origin) {
            Ok(mut forward) => {
                forward.logged_in = user.is_some();
                Routed::Proxy(Box::new(forward))
            }
            Err(Status::MethodNotAllowed) => Routed::Respond(not_allowed(
                site,
                "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH",
                path.as_str(),
            )),
            Err(status) => Routed::Respond(finish(site, Response::status(status), path.as_str())),
        };
    }
    // An SCGI handler takes its prefix before scripts do: LuCI's handler
    // answers `/cgi-bin/luci` where the script of that name also lives.
    let script = script::find_handler(&site.config.scgi, shown)
        .map(Ok)
        .or_else(|| script::find(&site.config.cgi, &site.root, &path, shown));
    if let Some(script) = script {
        return match (script, req.method) {
            (Ok(script), Method::Get | Method::Head | Method::Post) => {
                let caller = script::Caller {
                    peer: client.peer,
                    local: client.local,
                    remote_user: user.as_deref(),
                    #[cfg(feature = "tls")]
                    tls: client.tls,
                };
                Routed::Cgi(Box::new(Job::new(&site.config.root, script, req, &caller)))
            }
            (Ok(_), _) => Routed::Respond(not_allowed(site, "GET, HEAD, POST", path.as_str())),
            (Err(status), _) => Routed::Respond(error(site, status, path.as_str())),
        };
    }
    if !matches!(req.method, Method::Get | Method::Head) {
        return Routed::Respond(not_allowed(site, "GET, HEAD", path.as_str()));
    }
    Routed::Respond(static_file(site, req, &path, query))
}

/// A static path: the file, its variants, or what stands in for it.
fn static_file(site: &Site, req: &Request<'_>, path: &CleanPath, query: Option<&[u8]>) -> Response {
    let enc = negotiate::accept_encoding(req.get(Field::AcceptEncoding));
    match site.root.lookup(path, &site.config.index) {
        Lookup::File(opened) => serve_file(site, req, opened, enc),
        Lookup::DirWithoutSlash => finish(site, redirect_to_directory(path, query), path.as_str()),
        Lookup::DirWithoutIndex => {
            let gz_index = site.config.index.iter().find_map(|n| {
                root::index_path(path, n).and_then(|name| gz_only(site, req, &name, enc))
            });
            if let Some(r) = gz_index {
                return r;
            }
            if site.config.rules.listing {
                return listing(site, path);
            }
            error(site, Status::NotFound, path.as_str())
        }
        Lookup::Missing(Status::NotFound) => {
            // `x.js/` names no file, compressed or not (see `Root::lookup`).
            let gz = (!path.trailing_slash)
                .then(|| gz_only(site, req, path.as_str(), enc))
                .flatten();
            gz.or_else(|| spa_fallback(site, req, path, enc))
                .unwrap_or_else(|| error(site, Status::NotFound, path.as_str()))
        }
        Lookup::Missing(status) => error(site, status, path.as_str()),
    }
}

fn not_allowed(site: &Site, allow: &'static str, name: &str) -> Response {
    let mut r = Response::status(Status::MethodNotAllowed);
    r.status_header = Some(StatusHeader::Allow(allow));
    finish(site, r, name)
}

fn challenge(site: &Site, realm: Rc<str>, name: &str) -> Response {
    let mut r = Response::status(Status::Unauthorized);
    r.status_header = Some(StatusHeader::Challenge(realm));
    finish(site, r, name)
}

/// Serves a file, or its best precompressed variant.
fn serve_file(site: &Site, req: &Request<'_>, original: Opened, enc: Encodings) -> Response {
    let (chosen, has_variants) = variant(site, &original, enc);
    // One response, changed in place: on MIPS a move of it is a copy.
    let sent = chosen.as_ref().map_or(&original, |(_, v)| v);
    let mut r = representation(req, sent, original.content_type);
    if let Some((coding, _)) = chosen {
        r.add_header(coding);
    }
    if has_variants {
        r.add_header(header::VARY_ENCODING);
    }
    finish_file(site, &mut r, &original);
    r
}

/// The best variant the client takes (`X.br` before `X.gz`) with its
/// Content-Encoding line, and whether the path has any; a variant older than
/// the original is ignored.
fn variant(site: &Site, original: &Opened, enc: Encodings) -> (Option<(HeaderLine, Opened)>, bool) {
    if original.known_without_variants() {
        return (None, false);
    }
    let mut any = false;
    let mut buf = heapless::String::new();
    for (suffix, coding, accepted) in [
        (".br", header::BROTLI, enc.br),
        (".gz", header::GZIP, enc.gzip),
    ] {
        let Some(name) = root::with_suffix(&mut buf, &original.name, suffix) else {
            continue;
        };
        let Ok(v) = site.root.open_variant(name) else {
            continue;
        };
        // Whole seconds: tools that copy the original's time (brotli, touch -r on
        // some filesystems) drop the nanoseconds.
        if cache::mtime(&v.meta).0 < cache::mtime(&original.meta).0 {
            continue;
        }
        any = true;
        if accepted {
            return (Some((coding, v)), true);
        }
    }
    if !any {
        original.mark_without_variants();
    }
    (None, any)
}

/// A tree that ships only `X.gz`: as is to a client taking gzip, else
/// decompressed on the fly.
fn gz_only(site: &Site, req: &Request<'_>, name: &str, enc: Encodings) -> Option<Response> {
    let mut buf = heapless::String::new();
    let gz = site
        .root
        .open_variant(root::with_suffix(&mut buf, name, ".gz")?)
        .ok()?;
    let mut r = if enc.gzip {
        let mut r = representation(req, &gz, mime::for_name(name));
        r.add_header(header::GZIP);
        r
    } else {
        gunzipped(req, gz, name)
    };
    r.add_header(header::VARY_ENCODING);
    Some(finish(site, r, name))
}

fn gunzipped(req: &Request<'_>, gz: Opened, name: &str) -> Response {
    let v = gz.validators.other_representation();
    match conditional::evaluate(&conditions(req), &v) {
        conditional::Outcome::Proceed => {}
        conditional::Outcome::NotModified => return not_modified(v),
        conditional::Outcome::PreconditionFailed => {
            return Response::status(Status::PreconditionFailed);
        }
    }
    // Each inflation holds about 51 KiB: past the cap, a moment's wait.
    let Some(inflation) = Inflation::take() else {
        let mut r = Response::status(Status::ServiceUnavailable);
        r.add_header(header::RETRY_SOON);
        return r;
    };
    let mut r = match Gunzip::open(gz.file.clone(), gz.meta.len(), inflation) {
        Ok((stream, len)) => Response::new(
            Status::Ok,
            Body::Gunzip {
                stream: Box::new(stream),
                len,
            },
        ),
        Err(e) => {
            log::warn!("{name}.gz: {e}");
            return Response::status(Status::InternalServerError);
        }
    };
    r.content_type = Some(mime::for_name(name));
    r.validators = Some(v);
    r
}

/// One file as a response: validators, conditions, range. The common ways
/// out (200, 206, 304) return what they call, so the response is written
/// where it goes (a move of it is a copy on MIPS).
fn representation(req: &Request<'_>, f: &Opened, content_type: &'static str) -> Response {
    let len = f.meta.len();
    let validators = &f.validators;
    match conditional::evaluate(&conditions(req), validators) {
        conditional::Outcome::Proceed => {}
        conditional::Outcome::NotModified => return not_modified(validators.clone()),
        conditional::Outcome::PreconditionFailed => {
            return Response::status(Status::PreconditionFailed);
        }
    }
    let ranged = match req.method {
        Method::Get => range::evaluate(
            req.get(Field::Range),
            req.get(Field::IfRange),
            validators,
            len,
        ),
        _ => Ranged::Full,
    };
    match ranged {
        Ranged::Full => file_part(f, content_type, (0, len), None),
        Ranged::Part(first, last) => file_part(
            f,
            content_type,
            (first, last - first + 1),
            Some(ContentRange::Part {
                first,
                last,
                total: len,
            }),
        ),
        Ranged::Unsatisfiable => {
            let mut r = Response::status(Status::RangeNotSatisfiable);
            r.status_header = Some(StatusHeader::ContentRange(ContentRange::Unsatisfied {
                total: len,
            }));
            r
        }
    }
}

/// `len` bytes of `f` from `offset`: all of it (200), or the range asked
/// for (206). Spelled out whole: built from `Response::new` (with `..` or
/// by changing it after), the answer is made aside and moved, a `memcpy`
/// per request on MIPS (ARCHITECTURE.md, "A file's response written where
/// it goes").
fn file_part(
    f: &Opened,
    content_type: &'static str,
    (offset, len): (u64, u64),
    range: Option<ContentRange>,
) -> Response {
    Response {
        status: if range.is_some() {
            Status::PartialContent
        } else {
            Status::Ok
        },
        content_type: Some(content_type),
        validators: Some(f.validators.clone()),
        status_header: range.map(StatusHeader::ContentRange),
        accept_ranges: true,
        extra: heapless::Vec::new(),
        rules: None,
        fields: None,
        body: Body::File {
            file: f.file.clone(),
            bytes: f.body.clone(),
            offset,
            len,
        },
        close: false,
    }
}

fn conditions<'a>(req: &Request<'a>) -> Conditions<'a> {
    Conditions {
        if_match: req.get(Field::IfMatch),
        if_none_match: req.get(Field::IfNoneMatch),
        if_modified_since: req.get(Field::IfModifiedSince),
        if_unmodified_since: req.get(Field::IfUnmodifiedSince),
    }
}

fn not_modified(v: Validators) -> Response {
    let mut r = Response::new(Status::NotModified, Body::Empty);
    r.validators = Some(v);
    r
}

/// A GET for a route of a single-page app (no such file, no extension,
/// HTML accepted) gets the app's fallback page with 200.
fn spa_fallback(
    site: &Site,
    req: &Request<'_>,
    path: &CleanPath,
    enc: Encodings,
) -> Option<Response> {
    let fallback = site.config.rules.spa_fallback.as_deref()?;
    if path.file_name().contains('.') || !negotiate::accepts_html(req.get(Field::Accept)) {
        return None;
    }
    let opened = site.root.open_file(fallback.trim_start_matches('/')).ok()?;
    Some(serve_file(site, req, opened, enc))
}

/// An error the pipeline did not route: a head refused before routing, a
/// script that failed or could not run. Answered as any error on `name`.
pub fn failure(site: &Site, status: Status, script: &str) -> Response {
    error(site, status, script)
}

/// An error answer: the configured page for the status, else the built-in one.
fn error(site: &Site, status: Status, path: &str) -> Response {
    let custom = site
        .config
        .rules
        .error_page(status)
        .and_then(|p| site.root.open_file(p.trim_start_matches('/')).ok());
    let mut r = match custom {
        Some(page) => {
            let mut r = Response::new(
                status,
                Body::File {
                    len: page.meta.len(),
                    file: page.file.clone(),
                    bytes: page.body.clone(),
                    offset: 0,
                },
            );
            r.content_type = Some(page.content_type);
            r
        }
        None => Response::status(status),
    };
    r.add_header(header::NO_CACHE);
    finish(site, r, path)
}

fn listing(site: &Site, path: &CleanPath) -> Response {
    match site.listing(path.as_str()) {
        Ok(html) => {
            let mut r = Response::new(Status::Ok, Body::Shared(html));
            r.content_type = Some("text/html; charset=utf-8");
            r.add_header(header::NO_CACHE);
            finish(site, r, path.as_str())
        }
        Err(e) => {
            log::warn!("listing /{}: {e}", path.as_str());
            error(site, Status::InternalServerError, path.as_str())
        }
    }
}

/// `redirect-https`: every request on a plain listener but an ACME
/// challenge goes to the same URL over HTTPS (308: the method and body
/// are kept), before any rule or password is looked at.
#[cfg(feature = "tls")]
fn to_https(
    site: &Site,
    req: &Request<'_>,
    client: &Client,
    shown: &str,
    query: Option<&[u8]>,
) -> Option<Response> {
    use crate::http::to_https;
    if client.tls || site.config.tls.redirect_https.is_none() || to_https::is_acme_challenge(shown)
    {
        return None;
    }
    let host = req.authority.or_else(|| req.get(Field::Host));
    let mut location = to_https::location(host, client.local.ip(), site.https_port?, shown);
    push_query(&mut location, query);
    let mut r = Response::status(Status::PermanentRedirect);
    r.status_header = Some(StatusHeader::Location(location));
    Some(r)
}

/// A configured redirect for the path, with the query kept.
fn redirect(site: &Site, shown: &str, query: Option<&[u8]>) -> Option<Response> {
    let (mut location, status) = site.config.rules.redirect(shown)?;
    if !location.contains('?') {
        push_query(&mut location, query);
    }
    let mut r = Response::status(status);
    r.status_header = Some(StatusHeader::Location(location));
    Some(r)
}

/// `/docs` names a directory: send the client to `/docs/`, query kept.
fn redirect_to_directory(path: &CleanPath, query: Option<&[u8]>) -> Response {
    let mut location = String::with_capacity(path.as_str().len() + 8);
    location.push('/');
    path::encode_into(&mut location, path.as_str());
    location.push('/');
    push_query(&mut location, query);
    let mut r = Response::status(Status::MovedPermanently);
    r.status_header = Some(StatusHeader::Location(location));
    r
}

/// Appends `?query` when it is plain visible ASCII (never CR, LF or NUL).
fn push_query(location: &mut String, query: Option<&[u8]>) {
    if let Some(q) = query.filter(|q| q.iter().all(|b| b.is_ascii_graphic())) {
        if let Ok(q) = std::str::from_utf8(q) {
            location.push('?');
            location.push_str(q);
        }
    }
}

/// Gives a response the config's Cache-Control (for files) and header
/// rules for `name`: the served file, or the requested path, relative to the root.
fn finish(site: &Site, mut r: Response, name: &str) -> Response {
    r.rules = Some(site.rule_lines(name));
    r
}

/// `finish` for a cached file: what its rules do is worked out once, and
/// so are the header lines of a plain 200 of it. In place: on MIPS a
/// move of a response is a copy of it.
fn finish_file(site: &Site, r: &mut Response, f: &Opened) {
    let rules = f.rules.get_or_init(|| site.rule_lines(&f.name));
    r.rules = Some(rules.clone());
    if is_plain(r, f) {
        let fields = f.plain_fields.get_or_init(|| {
            let mut lines = Vec::new();
            response::write_fields(&mut lines, r);
            Rc::from(lines)
        });
        r.fields = Some(fields.clone());
    }
}

/// The whole of `f` with nothing of this request's in its head: every such
/// response has the same header lines (content type, length, validators,
/// rules), all fixed by the file's version. A body of `f`'s own file got
/// `f`'s validators from `representation`.
fn is_plain(r: &Response, f: &Opened) -> bool {
    let whole_file = match &r.body {
        Body::File {
            file, offset, len, ..
        } => Rc::ptr_eq(file, &f.file) && *offset == 0 && *len == f.meta.len(),
        _ => false,
    };
    whole_file
        && r.status == Status::Ok
        && r.extra.is_empty()
        && r.status_header.is_none()
        // The same static string when it is the file's own: compared by
        // address, not byte by byte.
        && r.content_type.is_some_and(|t| std::ptr::eq(t, f.content_type))
        && r.accept_ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_match_the_same_rules_share_their_lines() {
        let site = Site::new(
            Rc::default(),
            Rc::new(RefCell::new(Failures::new(auth::fail_share(0, 1)))),
            Box::leak(Box::default()),
        );
        // Two missing pages, as a scan of a device would ask for.
        let a = site.rule_lines("wp-login.php");
        let b = site.rule_lines("admin/setup.cgi");
        assert!(Rc::ptr_eq(&a, &b), "one set of lines for both");
        // An HTML name matches another cache rule: its own lines.
        let html = site.rule_lines("missing.html");
        assert!(!Rc::ptr_eq(&a, &html));
        assert!(Rc::ptr_eq(&html, &site.rule_lines("other.html")));
        assert_eq!(site.rule_lines.borrow().len(), 2);
    }
}
