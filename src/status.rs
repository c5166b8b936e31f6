//! The status codes Marmoset sends, with their reason phrases.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Created,
    Accepted,
    NoContent,
    PartialContent,
    MovedPermanently,
    Found,
    SeeOther,
    NotModified,
    TemporaryRedirect,
    PermanentRedirect,
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    Conflict,
    Gone,
    PreconditionFailed,
    ContentTooLarge,
    UriTooLong,
    RangeNotSatisfiable,
    UnprocessableContent,
    TooManyRequests,
    HeaderFieldsTooLarge,
    InternalServerError,
    NotImplemented,
    BadGateway,
    ServiceUnavailable,
    GatewayTimeout,
    VersionNotSupported,
}

impl Status {
    pub fn code(self) -> u16 {
        use Status::*;
        match self {
            Ok => 200,
            Created => 201,
            Accepted => 202,
            NoContent => 204,
            PartialContent => 206,
            MovedPermanently => 301,
            Found => 302,
            SeeOther => 303,
            NotModified => 304,
            TemporaryRedirect => 307,
            PermanentRedirect => 308,
            BadRequest => 400,
            Unauthorized => 401,
            Forbidden => 403,
            NotFound => 404,
            MethodNotAllowed => 405,
            RequestTimeout => 408,
            Conflict => 409,
            Gone => 410,
            PreconditionFailed => 412,
            ContentTooLarge => 413,
            UriTooLong => 414,
            RangeNotSatisfiable => 416,
            UnprocessableContent => 422,
            TooManyRequests => 429,
            HeaderFieldsTooLarge => 431,
            InternalServerError => 500,
            NotImplemented => 501,
            BadGateway => 502,
            ServiceUnavailable => 503,
            GatewayTimeout => 504,
            VersionNotSupported => 505,
        }
    }

    pub fn reason(self) -> &'static str {
        use Status::*;
        match self {
            Ok => "OK",
            Created => "Created",
            Accepted => "Accepted",
            NoContent => "No Content",
            PartialContent => "Partial Content",
            MovedPermanently => "Moved Permanently",
            Found => "Found",
            SeeOther => "See Other",
            NotModified => "Not Modified",
            TemporaryRedirect => "Temporary Redirect",
            PermanentRedirect => "Permanent Redirect",
            BadRequest => "Bad Request",
            Unauthorized => "Unauthorized",
            Forbidden => "Forbidden",
            NotFound => "Not Found",
            MethodNotAllowed => "Method Not Allowed",
            RequestTimeout => "Request Timeout",
            Conflict => "Conflict",
            Gone => "Gone",
            PreconditionFailed => "Precondition Failed",
            ContentTooLarge => "Content Too Large",
            UriTooLong => "URI Too Long",
            RangeNotSatisfiable => "Range Not Satisfiable",
            UnprocessableContent => "Unprocessable Content",
            TooManyRequests => "Too Many Requests",
            HeaderFieldsTooLarge => "Request Header Fields Too Large",
            InternalServerError => "Internal Server Error",
            NotImplemented => "Not Implemented",
            BadGateway => "Bad Gateway",
            ServiceUnavailable => "Service Unavailable",
            GatewayTimeout => "Gateway Timeout",
            VersionNotSupported => "HTTP Version Not Supported",
        }
    }

    pub fn from_code(code: u16) -> Option<Status> {
        use Status::*;
        const ALL: [Status; 32] = [
            Ok,
            Created,
            Accepted,
            NoContent,
            PartialContent,
            MovedPermanently,
            Found,
            SeeOther,
            NotModified,
            TemporaryRedirect,
            PermanentRedirect,
            BadRequest,
            Unauthorized,
            Forbidden,
            NotFound,
            MethodNotAllowed,
            RequestTimeout,
            Conflict,
            Gone,
            PreconditionFailed,
            ContentTooLarge,
            UriTooLong,
            RangeNotSatisfiable,
            UnprocessableContent,
            TooManyRequests,
            HeaderFieldsTooLarge,
            InternalServerError,
            NotImplemented,
            BadGateway,
            ServiceUnavailable,
            GatewayTimeout,
            VersionNotSupported,
        ];
        ALL.into_iter().find(|s| s.code() == code)
    }

    /// Statuses whose response never has a body (RFC 9110 section 15).
    pub fn has_body(self) -> bool {
        !matches!(self, Status::NotModified | Status::NoContent)
    }
}
