//! The status codes Marmoset sends, with their reason phrases.

/// One table gives the enum, the codes, the reasons and the lookup by code.
macro_rules! statuses {
    ($($name:ident = $code:literal $reason:literal,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Status {
            $($name,)*
        }

        impl Status {
            const ALL: &'static [Status] = &[$(Status::$name,)*];

            pub fn code(self) -> u16 {
                match self {
                    $(Status::$name => $code,)*
                }
            }

            /// `HTTP/1.1 200 OK`: the status line written in one piece
            /// (always our own version, RFC 9110 section 2.5).
            pub fn line(self) -> &'static str {
                match self {
                    $(Status::$name => concat!("HTTP/1.1 ", $code, " ", $reason),)*
                }
            }
        }
    };
}

statuses! {
    Ok = 200 "OK",
    Created = 201 "Created",
    Accepted = 202 "Accepted",
    NoContent = 204 "No Content",
    PartialContent = 206 "Partial Content",
    MovedPermanently = 301 "Moved Permanently",
    Found = 302 "Found",
    SeeOther = 303 "See Other",
    NotModified = 304 "Not Modified",
    TemporaryRedirect = 307 "Temporary Redirect",
    PermanentRedirect = 308 "Permanent Redirect",
    BadRequest = 400 "Bad Request",
    Unauthorized = 401 "Unauthorized",
    Forbidden = 403 "Forbidden",
    NotFound = 404 "Not Found",
    MethodNotAllowed = 405 "Method Not Allowed",
    RequestTimeout = 408 "Request Timeout",
    Conflict = 409 "Conflict",
    Gone = 410 "Gone",
    PreconditionFailed = 412 "Precondition Failed",
    ContentTooLarge = 413 "Content Too Large",
    UriTooLong = 414 "URI Too Long",
    RangeNotSatisfiable = 416 "Range Not Satisfiable",
    MisdirectedRequest = 421 "Misdirected Request",
    UnprocessableContent = 422 "Unprocessable Content",
    TooManyRequests = 429 "Too Many Requests",
    HeaderFieldsTooLarge = 431 "Request Header Fields Too Large",
    InternalServerError = 500 "Internal Server Error",
    NotImplemented = 501 "Not Implemented",
    BadGateway = 502 "Bad Gateway",
    ServiceUnavailable = 503 "Service Unavailable",
    GatewayTimeout = 504 "Gateway Timeout",
    VersionNotSupported = 505 "HTTP Version Not Supported",
}

impl Status {
    /// The reason phrase, the tail of the status line (which keeps the only copy).
    pub fn reason(self) -> &'static str {
        self.line().get("HTTP/1.1 200 ".len()..).unwrap_or_default()
    }

    pub fn from_code(code: u16) -> Option<Status> {
        Status::ALL.iter().copied().find(|s| s.code() == code)
    }

    /// Statuses whose response never has a body (RFC 9110 section 15).
    pub fn has_body(self) -> bool {
        !matches!(self, Status::NotModified | Status::NoContent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_is_found_by_its_own_code_only() {
        for &s in Status::ALL {
            assert_eq!(Status::from_code(s.code()), Some(s), "{s:?}");
            assert!((200..600).contains(&s.code()));
            assert!(!s.reason().is_empty());
        }
        assert_eq!(Status::from_code(418), None);
    }

    #[test]
    fn the_status_line_is_version_code_and_reason() {
        for &s in Status::ALL {
            assert_eq!(s.line(), format!("HTTP/1.1 {} {}", s.code(), s.reason()));
        }
    }
}
