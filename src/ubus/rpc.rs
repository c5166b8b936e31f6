//! uhttpd's JSON-RPC over ubus, answer for answer: `call` (object lookup,
//! then the session's ACL through `session.access`, then the invoke with
//! `ubus_rpc_session` added) and `list`, single or batched; the newer
//! `PREFIX/call/OBJECT` and `PREFIX/list[/OBJECT]` forms. Each answer is
//! JSON text, written as libubox would write it.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use crate::limits::UBUS_MAX_BATCH;
use crate::net::client::Client;
use crate::policy::failures::Failures;
use crate::ubus::blob::{self, Builder, T_ARRAY, T_BOOL, T_INT32, T_STRING, T_TABLE, Value};
use crate::ubus::bus::{Bus, Failure, Reply};
use crate::ubus::json::{self, write_list, write_string, write_value};
pub use crate::ubus::sessions::DEFAULT_SID;

/// The JSON-RPC errors uhttpd answers, with its messages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RpcError {
    Parse,
    Request,
    Method,
    Params,
    Internal,
    Object,
    Access,
    Timeout,
}

impl RpcError {
    fn code_and_message(self) -> (i32, &'static str) {
        match self {
            RpcError::Parse => (-32700, "Parse error"),
            RpcError::Request => (-32600, "Invalid request"),
            RpcError::Method => (-32601, "Method not found"),
            RpcError::Params => (-32602, "Invalid parameters"),
            RpcError::Internal => (-32603, "Internal error"),
            RpcError::Object => (-32000, "Object not found"),
            RpcError::Access => (-32002, "Access denied"),
            RpcError::Timeout => (-32003, "ubus request timed out"),
        }
    }

    fn of(f: Failure) -> RpcError {
        match f {
            Failure::Timeout => RpcError::Timeout,
            Failure::Lost | Failure::TooLarge => RpcError::Internal,
        }
    }
}

/// libubus's `ubus_strerror`.
pub fn ubus_strerror(code: i32) -> String {
    const TEXT: [&str; 14] = [
        "Success",
        "Invalid command",
        "Invalid argument",
        "Method not found",
        "Not found",
        "No response",
        "Permission denied",
        "Request timed out",
        "Operation not supported",
        "Unknown error",
        "Connection failed",
        "Out of memory",
        "Parsing message data failed",
        "System error",
    ];
    match usize::try_from(code).ok().and_then(|i| TEXT.get(i)) {
        Some(t) => (*t).to_string(),
        None => format!("Unknown error: {code}"),
    }
}

/// The ubus status standing for a failed exchange, where uhttpd would
/// have had one from libubus.
fn status_of(f: Failure) -> i32 {
    match f {
        Failure::Timeout => 7,
        Failure::Lost => 10,
        Failure::TooLarge => 11,
    }
}

/// uhttpd's bare error body for a failed exchange.
pub fn failure_body(f: Failure) -> Vec<u8> {
    bare_error(status_of(f), &ubus_strerror(status_of(f)))
}

/// `{"code":C,"message":"M"}`: uhttpd's bare error (GET forms).
pub fn bare_error(code: i32, message: &str) -> Vec<u8> {
    let mut out = b"{\"code\":".to_vec();
    out.extend_from_slice(code.to_string().as_bytes());
    out.extend_from_slice(b",\"message\":");
    write_string(&mut out, message.as_bytes());
    out.push(b'}');
    out
}

pub struct Rpc<'a> {
    pub bus: &'a Bus,
    pub timeout: Duration,
    /// Ask `session.access` before each call (off: uhttpd's `no_ubusauth`).
    pub auth: bool,
    /// Who asks: each `session.login` is a password check against its
    /// budget, as under an `auth` realm.
    pub client: Client,
    pub failures: &'a RefCell<Failures>,
    /// A login was not tried: the client is held back.
    pub held_login: Cell<bool>,
}

/// The user a `session.login` with `args` logged in, if `reply` made a
/// session.
fn logged_in_as<'a>(args: &'a [u8], reply: &Reply) -> Option<&'a str> {
    let made = matches!(
        blob::get(&reply.merged_data(), "ubus_rpc_session"),
        Some(Value::Str(_))
    );
    match blob::get(args, "username") {
        Some(Value::Str(user)) if reply.status == 0 && made => std::str::from_utf8(user).ok(),
        _ => None,
    }
}

/// One parsed request object: its id, method and params.
struct Parsed<'a> {
    id: Option<Value<'a>>,
    method: Option<&'a [u8]>,
    params: Option<Value<'a>>,
}

/// The `jsonrpc`, `method`, `params` and `id` of a request object (the
/// last of each; `jsonrpc` must be "2.0" and `method` a string, as
/// uhttpd's policy).
fn parse_request(table: &[u8]) -> Parsed<'_> {
    let id = blob::get(table, "id");
    let version_ok = blob::get(table, "jsonrpc") == Some(Value::Str(b"2.0"));
    let method = match blob::get(table, "method") {
        Some(Value::Str(m)) if version_ok => Some(m),
        _ => None,
    };
    Parsed {
        id,
        method,
        params: blob::get(table, "params"),
    }
}

fn head(out: &mut Vec<u8>, id: Option<Value<'_>>) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    write_value(out, id.unwrap_or(Value::Unspec), 0);
}

fn rpc_error(out: &mut Vec<u8>, id: Option<Value<'_>>, e: RpcError) {
    let (code, message) = e.code_and_message();
    head(out, id);
    out.extend_from_slice(b",\"error\":");
    out.extend_from_slice(&bare_error(code, message));
    out.push(b'}');
}

/// The JSON-RPC error for a request that could not be read at all.
pub fn parse_error() -> Vec<u8> {
    let mut out = Vec::new();
    rpc_error(&mut out, None, RpcError::Parse);
    out
}

/// Whether a `POST PREFIX` body calls only with sessions `known` accepts:
/// one request object or a batch, with at least one `call` and each
/// `call`'s session accepted (`list` needs none). Its own parse, before
/// the call slot is taken.
pub fn calls_with_sessions(body: &[u8], known: impl Fn(&[u8]) -> bool) -> bool {
    let mut b = Builder::default();
    if json::parse_into(body, b"", &mut b).is_err() {
        return false;
    }
    let session_of = |table: &[u8]| match parse_request(table) {
        Parsed {
            method: Some(b"call"),
            params: Some(Value::Array(params)),
            ..
        } => match blob::fields(params).next().map(|f| f.value) {
            Some(Value::Str(sid)) => Some(Some(sid.to_vec())),
            _ => None,
        },
        Parsed {
            method: Some(b"list"),
            ..
        } => Some(None),
        _ => None,
    };
    let mut calls = 0;
    let mut each = |table: &[u8]| match session_of(table) {
        Some(Some(sid)) => {
            calls += 1;
            known(&sid)
        }
        Some(None) => true,
        None => false,
    };
    let all = match blob::fields(&b.buf).next().map(|f| f.value) {
        Some(Value::Table(t)) => each(t),
        Some(Value::Array(items)) if blob::attrs(items).count() <= UBUS_MAX_BATCH => {
            blob::fields(items).all(|item| match item.value {
                Value::Table(t) => each(t),
                _ => false,
            })
        }
        _ => false,
    };
    all && calls > 0
}

/// The elements of an array or the members of a table.
fn list_of(v: Option<Value<'_>>) -> Option<&[u8]> {
    match v {
        Some(Value::Array(l) | Value::Table(l)) => Some(l),
        _ => None,
    }
}

impl Rpc<'_> {
    fn until(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// `POST PREFIX`: one request object or a batch of them.
    pub async fn post(&self, body: &[u8]) -> Vec<u8> {
        let mut b = Builder::default();
        if json::parse_into(body, b"", &mut b).is_err() {
            return parse_error();
        }
        let mut out = Vec::new();
        match blob::fields(&b.buf).next().map(|f| f.value) {
            Some(Value::Table(t)) => self.one(&mut out, t).await,
            Some(Value::Array(items)) if blob::attrs(items).count() > UBUS_MAX_BATCH => {
                rpc_error(&mut out, None, RpcError::Request)
            }
            Some(Value::Array(items)) => {
                out.push(b'[');
                for (i, item) in blob::fields(items).enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    match item.value {
                        Value::Table(t) => self.one(&mut out, t).await,
                        _ => rpc_error(&mut out, None, RpcError::Parse),
                    }
                }
                out.push(b']');
            }
            _ => return parse_error(),
        }
        out
    }

    /// One request object of `POST PREFIX`.
    async fn one(&self, out: &mut Vec<u8>, table: &[u8]) {
        let req = parse_request(table);
        let result = match req.method {
            None => Err(RpcError::Parse),
            Some(b"call") => self.legacy_call(out, &req).await,
            Some(b"list") => self.list(out, &req).await,
            Some(_) => Err(RpcError::Method),
        };
        if let Err(e) = result {
            rpc_error(out, req.id, e);
        }
    }

    /// `call` with params `[sid, object, method, {args}]`: `[status]` or
    /// `[status, {data}]`.
    async fn legacy_call(&self, out: &mut Vec<u8>, req: &Parsed<'_>) -> Result<(), RpcError> {
        let Some(Value::Array(params)) = req.params else {
            return Err(RpcError::Parse);
        };
        let mut p = blob::fields(params).map(|f| f.value);
        let (sid, object, method, args) = (p.next(), p.next(), p.next(), p.next());
        // Without the ACL check a missing, empty or non-string session is
        // the anonymous one, as uhttpd's `no_ubusauth`.
        let sid = match sid {
            Some(Value::Str(s)) if self.auth || !s.is_empty() => Some(s),
            _ if !self.auth => Some(DEFAULT_SID),
            _ => None,
        };
        let (
            Some(sid),
            Some(Value::Str(object)),
            Some(Value::Str(method)),
            Some(Value::Table(args)),
        ) = (sid, object, method, args)
        else {
            return Err(RpcError::Parse);
        };
        let reply = self.checked_invoke(sid, object, method, args).await?;
        head(out, req.id);
        out.extend_from_slice(b",\"result\":[");
        out.extend_from_slice(reply.status.to_string().as_bytes());
        let data = reply.merged_data();
        if !data.is_empty() {
            out.push(b',');
            write_list(out, &data, false, 0);
        }
        out.extend_from_slice(b"]}");
        Ok(())
    }

    /// `POST PREFIX/call/OBJECT` with the session of the bearer token: the
    /// request's `method` is the object's, `params` its arguments; a
    /// non-zero status is an error with libubus's message.
    pub async fn call(&self, object: &[u8], sid: &[u8], body: &[u8]) -> Vec<u8> {
        let mut b = Builder::default();
        if json::parse_into(body, b"", &mut b).is_err() {
            return parse_error();
        }
        let Some(Value::Table(table)) = blob::fields(&b.buf).next().map(|f| f.value) else {
            return parse_error();
        };
        let req = parse_request(table);
        let mut out = Vec::new();
        let result = match (req.method, req.params) {
            (None, _) => Err(RpcError::Parse),
            (Some(method), None) => self.checked_invoke(sid, object, method, &[]).await,
            (Some(method), params) => match list_of(params) {
                Some(args) => self.checked_invoke(sid, object, method, args).await,
                None => Err(RpcError::Params),
            },
        };
        match result {
            Err(e) => rpc_error(&mut out, req.id, e),
            Ok(reply) if reply.status != 0 => {
                head(&mut out, req.id);
                out.extend_from_slice(b",\"error\":");
                let text = ubus_strerror(reply.status);
                out.extend_from_slice(&bare_error(reply.status, &text));
                out.push(b'}');
            }
            Ok(reply) => {
                head(&mut out, req.id);
                out.extend_from_slice(b",\"result\":");
                let data = reply.merged_data();
                if data.is_empty() {
                    out.extend_from_slice(b"null");
                } else {
                    write_list(&mut out, &data, false, 0);
                }
                out.push(b'}');
            }
        }
        out
    }

    /// Lookup (-32000), access check (-32002), then the invoke with the
    /// session added to the arguments (-32602 if they hold one already).
    async fn checked_invoke(
        &self,
        sid: &[u8],
        object: &[u8],
        method: &[u8],
        args: &[u8],
    ) -> Result<Reply, RpcError> {
        let Some((id, kept)) = self
            .bus
            .lookup_id(object, self.until())
            .await
            .map_err(RpcError::of)?
        else {
            return Err(RpcError::Object);
        };
        if self.auth && !self.allowed(sid, object, method).await {
            return Err(RpcError::Access);
        }
        let mut b = Builder::default();
        for f in blob::attrs(args) {
            if blob::field(f).is_some_and(|f| f.name == b"ubus_rpc_session") {
                return Err(RpcError::Params);
            }
        }
        let login = object == b"session" && method == b"login";
        let counted = if login {
            if self.failures.borrow().held(self.client) {
                // Answered as rpcd answers a wrong password, whatever
                // this one is: a held client learns nothing from guessing.
                self.held_login.set(true);
                return Ok(Reply {
                    status: blob::S_PERMISSION_DENIED,
                    data: Vec::new(),
                });
            }
            Some(
                self.failures
                    .borrow_mut()
                    .count_logged(self.client, "ubus session.login"),
            )
        } else {
            None
        };
        blob::raw_attrs(args).for_each(|a| b.copy(a));
        b.string(b"ubus_rpc_session", sid);
        let reply = self
            .invoke_kept(object, (id, kept), method, &b.buf, self.until())
            .await;
        if let Ok(Some(r)) = &reply {
            if let (Some(counted), Some(user)) = (counted, logged_in_as(args, r)) {
                let mut f = self.failures.borrow_mut();
                f.refund(counted);
                f.trust(self.client, user);
            }
            self.note_session(object, method, sid, r);
        }
        match reply {
            // libubus ends the requests under way with status 7 (timeout)
            // when ubusd goes away, and uhttpd answers that as a result.
            Err(Failure::Lost) => Ok(Reply {
                status: 7,
                data: Vec::new(),
            }),
            r => r.map_err(RpcError::of)?.ok_or(RpcError::Object),
        }
    }

    /// A login's new session is known at once (the owner's next call
    /// finds room); a destroyed one is forgotten.
    fn note_session(&self, object: &[u8], method: &[u8], sid: &[u8], reply: &Reply) {
        if object != b"session" || reply.status != 0 {
            return;
        }
        match method {
            b"login" => {
                if let Some(Value::Str(made)) = blob::get(&reply.merged_data(), "ubus_rpc_session")
                {
                    self.bus.sessions.remember(made);
                }
            }
            b"destroy" => self.bus.sessions.forget(sid),
            _ => {}
        }
    }

    /// Invokes `method` of object `path`, whose id `found` was looked up
    /// (`true`: kept from an earlier call). A kept id ubusd no longer
    /// knows (the object was added again, with a new id) is looked up
    /// afresh and the call made once more: ubusd refused the first, so
    /// nothing ran twice. `None`: the object has gone.
    async fn invoke_kept(
        &self,
        path: &[u8],
        found: (u32, bool),
        method: &[u8],
        args: &[u8],
        until: Instant,
    ) -> Result<Option<Reply>, Failure> {
        let (mut id, mut kept) = found;
        loop {
            let reply = self.bus.invoke(id, method, args, until).await?;
            if reply.status == blob::S_NOT_FOUND && kept {
                self.bus.forget(path);
                match self.bus.lookup_id(path, until).await? {
                    Some((fresh, _)) if fresh != id => {
                        (id, kept) = (fresh, false);
                        continue;
                    }
                    None => return Ok(None),
                    Some(_) => {}
                }
            }
            return Ok(Some(reply));
        }
    }

    /// rpcd's verdict on `sid` calling `object`'s `function` (false when
    /// it cannot be asked, as uhttpd: half the call timeout).
    pub async fn allowed(&self, sid: &[u8], object: &[u8], function: &[u8]) -> bool {
        let until = Instant::now() + self.timeout / 2;
        let Ok(Some(found)) = self.bus.lookup_id(b"session", until).await else {
            return false;
        };
        let mut b = Builder::default();
        b.string(b"ubus_rpc_session", sid);
        b.string(b"scope", b"ubus");
        b.string(b"object", object);
        b.string(b"function", function);
        match self
            .invoke_kept(b"session", found, b"access", &b.buf, until)
            .await
        {
            Ok(Some(reply)) => {
                let data = reply.merged_data();
                let allowed = blob::get(&data, "access") == Some(Value::Bool(true));
                if allowed {
                    self.bus.sessions.remember(sid);
                }
                allowed
            }
            _ => false,
        }
    }

    /// `list`: without params (or with non-array ones) the object paths;
    /// with `[paths]` their methods and argument types.
    async fn list(&self, out: &mut Vec<u8>, req: &Parsed<'_>) -> Result<(), RpcError> {
        let mut result = Vec::new();
        match req.params {
            Some(Value::Array(paths)) => {
                result.push(b'{');
                let mut first = true;
                for f in blob::fields(paths) {
                    let Value::Str(path) = f.value else { continue };
                    let reply = self
                        .bus
                        .lookup(Some(path), self.until())
                        .await
                        .map_err(RpcError::of)?;
                    signatures(&mut result, &reply, true, &mut first);
                }
                result.push(b'}');
            }
            _ => {
                let reply = self
                    .bus
                    .lookup(None, self.until())
                    .await
                    .map_err(RpcError::of)?;
                result.push(b'[');
                let paths = reply.messages().filter_map(|m| m.objpath);
                for (i, path) in paths.enumerate() {
                    if i > 0 {
                        result.push(b',');
                    }
                    write_string(&mut result, path);
                }
                result.push(b']');
            }
        }
        head(out, req.id);
        out.extend_from_slice(b",\"result\":");
        out.extend_from_slice(&result);
        out.push(b'}');
        Ok(())
    }

    /// `GET PREFIX/list[/OBJECT]`: every object's signature by path, or
    /// one object's methods; `Err` is uhttpd's 500 body.
    pub async fn get_list(&self, object: Option<&[u8]>) -> Result<Vec<u8>, Vec<u8>> {
        let reply = match self.bus.lookup(object, self.until()).await {
            Ok(r) if r.status == 0 => r,
            Ok(r) => return Err(bare_error(r.status, &ubus_strerror(r.status))),
            Err(f) => return Err(failure_body(f)),
        };
        let mut out = b"{".to_vec();
        signatures(&mut out, &reply, object.is_none(), &mut true);
        out.push(b'}');
        Ok(out)
    }

    /// The object's id for a subscription, or uhttpd's error body.
    pub async fn subscribe_target(&self, sid: &[u8], object: &[u8]) -> Result<u32, Vec<u8>> {
        if self.auth && !self.allowed(sid, object, b":subscribe").await {
            // EACCES, as uhttpd's posix error.
            return Err(bare_error(-13, "Permission denied"));
        }
        match self.bus.lookup_id(object, self.until()).await {
            Ok(Some((id, _))) => Ok(id),
            Ok(None) => Err(bare_error(blob::S_NOT_FOUND, "Not found")),
            Err(f) => Err(failure_body(f)),
        }
    }
}

/// Writes each looked-up object's methods as `"method":{"arg":"type"}`,
/// inside `"path":{...}` when `by_path`; objects without a signature are
/// left out. `first` carries the comma state across calls.
fn signatures(out: &mut Vec<u8>, reply: &Reply, by_path: bool, first: &mut bool) {
    for m in reply.messages() {
        let (Some(path), Some(sig)) = (m.objpath, m.signature) else {
            continue;
        };
        if by_path {
            if !std::mem::take(first) {
                out.push(b',');
            }
            write_string(out, path);
            out.extend_from_slice(b":{");
        }
        let mut first_method = true;
        for method in blob::fields(sig) {
            let Value::Table(args) = method.value else {
                continue;
            };
            let fm: &mut bool = if by_path {
                &mut first_method
            } else {
                &mut *first
            };
            if !std::mem::take(fm) {
                out.push(b',');
            }
            if !method.name.is_empty() {
                write_string(out, method.name);
                out.push(b':');
            }
            out.push(b'{');
            let mut first_arg = true;
            for arg in blob::fields(args) {
                let Value::Int32(kind) = arg.value else {
                    continue;
                };
                let name = match u8::try_from(kind) {
                    Ok(T_BOOL) => "boolean",
                    Ok(T_INT32) => "number",
                    Ok(T_STRING) => "string",
                    Ok(T_ARRAY) => "array",
                    Ok(T_TABLE) => "object",
                    _ => "unknown",
                };
                if !std::mem::take(&mut first_arg) {
                    out.push(b',');
                }
                if !arg.name.is_empty() {
                    write_string(out, arg.name);
                    out.push(b':');
                }
                write_string(out, name.as_bytes());
            }
            out.push(b'}');
        }
        if by_path {
            out.push(b'}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_uhttpds_codes_messages_and_the_id() {
        let mut b = Builder::default();
        json::parse_into(br#"{"id":"a\"b","jsonrpc":"2.0"}"#, b"", &mut b).unwrap();
        let Some(Value::Table(t)) = blob::fields(&b.buf).next().map(|f| f.value) else {
            panic!("a table")
        };
        let mut out = Vec::new();
        rpc_error(&mut out, parse_request(t).id, RpcError::Access);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"jsonrpc":"2.0","id":"a\"b","error":{"code":-32002,"message":"Access denied"}}"#
        );
        assert_eq!(
            String::from_utf8(parse_error()).unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#
        );
        assert_eq!(ubus_strerror(4), "Not found");
        assert_eq!(ubus_strerror(-1), "Unknown error: -1");
    }
}
