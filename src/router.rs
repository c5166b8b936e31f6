//! The request pipeline. It reads top to bottom: method, path, then the file
//! with its conditions and range. Each step either answers or hands on.

use std::os::unix::fs::MetadataExt;

use crate::conditional::{self, Conditions, Validators};
use crate::config::Config;
use crate::mime;
use crate::path::{self, CleanPath, PathError};
use crate::range::{self, Ranged};
use crate::request::{Method, Request};
use crate::response::{Body, ContentRange, Response};
use crate::static_files::{self, Lookup, Opened, Root};
use crate::status::Status;

/// What a worker serves: the configuration and the open root.
pub struct Site {
    pub config: &'static Config,
    pub root: Root,
}

impl Site {
    pub fn new(config: &'static Config) -> Site {
        Site {
            config,
            root: Root::new(&config.root, config.symlinks),
        }
    }
}

pub fn respond(site: &Site, req: &Request<'_>) -> Response {
    match req.method {
        Method::Get | Method::Head => {}
        Method::Unknown => return Response::status(Status::NotImplemented),
        Method::Post | Method::OtherKnown => {
            let mut r = Response::status(Status::MethodNotAllowed);
            r.allow = Some("GET, HEAD");
            return r;
        }
    }
    let (raw_path, query) = path::split_query(req.target);
    let path = match path::clean(raw_path) {
        Ok(p) => p,
        Err(PathError::BadRequest) => return Response::status(Status::BadRequest),
        Err(PathError::Hidden) => return Response::status(Status::NotFound),
        Err(PathError::TooLong) => return Response::status(Status::UriTooLong),
    };
    match site.root.lookup(&path, &site.config.index) {
        Lookup::File(opened) => serve_file(req, opened),
        Lookup::DirWithoutSlash => redirect_to_directory(&path, query),
        Lookup::DirWithoutIndex => Response::status(Status::NotFound),
        Lookup::Missing(status) => Response::status(status),
    }
}

fn serve_file(req: &Request<'_>, opened: Opened) -> Response {
    let Opened { file, meta, name } = opened;
    let len = meta.len();
    let (secs, nanos) = static_files::mtime(&meta);
    let validators = Validators::new(meta.ino(), len, secs, nanos);
    let conditions = Conditions {
        if_match: req.header("if-match"),
        if_none_match: req.header("if-none-match"),
        if_modified_since: req.header("if-modified-since"),
        if_unmodified_since: req.header("if-unmodified-since"),
    };
    let status = match conditional::evaluate(&conditions, &validators) {
        conditional::Outcome::Proceed => Status::Ok,
        conditional::Outcome::NotModified => Status::NotModified,
        conditional::Outcome::PreconditionFailed => {
            return Response::status(Status::PreconditionFailed);
        }
    };
    let ranged = match (status, req.method) {
        (Status::Ok, Method::Get) => range::evaluate(
            req.header("range"),
            req.header("if-range"),
            &validators,
            len,
        ),
        _ => Ranged::Full,
    };
    let (status, body, content_range) = match ranged {
        _ if status == Status::NotModified => (status, Body::Empty, None),
        Ranged::Full => (
            Status::Ok,
            Body::File {
                file,
                offset: 0,
                len,
            },
            None,
        ),
        Ranged::Part(first, last) => (
            Status::PartialContent,
            Body::File {
                file,
                offset: first,
                len: last - first + 1,
            },
            Some(ContentRange::Part {
                first,
                last,
                total: len,
            }),
        ),
        Ranged::Unsatisfiable => {
            let mut r = Response::status(Status::RangeNotSatisfiable);
            r.content_range = Some(ContentRange::Unsatisfied { total: len });
            return r;
        }
    };
    let mut r = Response::new(status, body);
    r.content_type = Some(mime::for_name(&name));
    r.last_modified = Some(secs);
    r.etag = Some(validators.etag);
    r.accept_ranges = true;
    r.content_range = content_range;
    r
}

/// `/docs` names a directory: send the client to `/docs/`, query kept.
fn redirect_to_directory(path: &CleanPath, query: Option<&[u8]>) -> Response {
    let mut location = String::with_capacity(path.as_str().len() + 8);
    location.push('/');
    path::encode_into(&mut location, path.as_str());
    location.push('/');
    if let Some(q) = query.filter(|q| q.iter().all(|b| b.is_ascii_graphic())) {
        location.push('?');
        location.push_str(std::str::from_utf8(q).unwrap_or(""));
    }
    let mut r = Response::status(Status::MovedPermanently);
    r.location = Some(location);
    r
}
