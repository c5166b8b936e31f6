//! The native ubus endpoint (uhttpd's `/ubus` JSON-RPC) through the real
//! binary, against the stand-in ubusd of `tests/ubus/standin.py` (its
//! objects and sessions are described at the top of that file): the answers
//! and errors as uhttpd writes them, the REST-like paths, event streams,
//! timeouts, ubusd restarting, broken and oversized replies, the settings,
//! and values whose bytes differ by byte order (the cross stage runs this
//! under big-endian qemu-user). The endpoint is the `ubus` cargo feature:
//! `cargo test --features ubus --test ubus` (with `tls` too for HTTPS).
#![cfg(feature = "ubus")]

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use common::json::Json;
use common::ubus::*;
use common::*;

const WAIT: Duration = Duration::from_secs(20);

fn j(text: &str) -> Json {
    Json::parse(text).unwrap()
}

fn assert_same(got: &Json, want: &str) {
    assert!(got.same(&j(want)), "got {got:?}\nwant {want}");
}

#[test]
fn a_call_answers_as_uhttpd_over_plain_and_tls() {
    for t in Transport::all() {
        let dir = TempDir::new("ubus-call");
        let bus = UbusStandin::start(&dir);
        let s = ubus_server(t, &dir, &bus, "");
        // The exact text, as uhttpd's JSON writer gives it.
        let r = post(
            &s,
            "/ubus",
            &call_body(1, ADMIN, "test", "echo", r#"{"a":1}"#),
            &[],
        );
        assert_eq!(r.status, 200, "{t:?}: {}\n{}", r.text(), s.log_text());
        assert!(
            r.header("content-type")
                .is_some_and(|c| c.starts_with("application/json")),
            "{:?}",
            r.headers
        );
        assert_eq!(
            r.text(),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"result":[0,{{"a":1,"ubus_rpc_session":"{ADMIN}"}}]}}"#
            ),
            "{t:?}"
        );
        // The ACL was asked with the call's session, object and function.
        let asked = bus.wait_for(WAIT, |l| {
            l.starts_with("invoke session access")
                && l.contains(&format!(r#""ubus_rpc_session": "{ADMIN}""#))
                && l.contains(r#""object": "test""#)
                && l.contains(r#""function": "echo""#)
        });
        assert!(asked, "{}", bus.log());
        // A status without data: [status]; with data: [status, {data}].
        assert_eq!(
            call(&s, ADMIN, "test", "fail", r#"{"code":0}"#).get("result"),
            &j("[0]")
        );
        assert_eq!(
            call(&s, ADMIN, "test", "fail", r#"{"code":7}"#).get("result"),
            &j("[7]")
        );
        assert_eq!(
            call(&s, ADMIN, "test", "fail", r#"{"data":true}"#).get("result"),
            &j(r#"[9,{"detail":"failed on request"}]"#)
        );
        // A method the object lacks is ubus's status 3, not a JSON-RPC error.
        assert_eq!(
            call(&s, ADMIN, "test", "nosuch", "{}").get("result"),
            &j("[3]")
        );
        // The id comes back as sent, null when absent.
        let a = rpc(
            &s,
            &format!(
                r#"{{"jsonrpc":"2.0","id":"x\"y","method":"call","params":["{ADMIN}","system","board",{{}}]}}"#
            ),
        );
        assert_eq!(a.get("id"), &Json::Str("x\"y".into()));
        assert_eq!(
            a.get("result").at(1).get("board_name").str(),
            Some("marmoset,standin")
        );
        let a = rpc(
            &s,
            &format!(
                r#"{{"jsonrpc":"2.0","method":"call","params":["{ADMIN}","test","fail",{{"code":0}}]}}"#
            ),
        );
        assert!(a.has("id") && a.get("id") == &Json::Null, "{a:?}");
        s.assert_healthy();
    }
}

#[test]
fn list_gives_paths_then_signatures_with_uhttpds_type_names() {
    let dir = TempDir::new("ubus-list");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    let a = rpc(&s, r#"{"jsonrpc":"2.0","id":1,"method":"list"}"#);
    assert_eq!(
        a.get("result"),
        &j(r#"["session","system","test","test.events"]"#)
    );
    let a = rpc(
        &s,
        r#"{"jsonrpc":"2.0","id":2,"method":"list","params":["test"]}"#,
    );
    let test = a.get("result").get("test");
    assert_eq!(a.get("result").keys(), ["test"]);
    assert_same(
        test.get("echo"),
        r#"{"string":"string","number":"number","boolean":"boolean","array":"array",
            "object":"object","int64":"unknown","double":"unknown"}"#,
    );
    assert_same(test.get("types"), "{}");
    assert!(test.has("slow") && test.has("oversized"), "{a:?}");
    // A pattern, and a path nothing has.
    let a = rpc(
        &s,
        r#"{"jsonrpc":"2.0","id":3,"method":"list","params":["test*","nosuch","system"]}"#,
    );
    assert_eq!(a.get("result").keys(), ["test", "test.events", "system"]);
    assert_same(
        a.get("result").get("test.events").get("emit"),
        r#"{"event":"string","data":"object","reply":"boolean"}"#,
    );
    let a = rpc(
        &s,
        r#"{"jsonrpc":"2.0","id":4,"method":"list","params":["nosuch"]}"#,
    );
    assert_eq!(a.get("result"), &j("{}"));
    // list needs no session.
    bus.settle(&s);
    assert_eq!(bus.count("invoke session access"), 0, "{}", bus.log());
}

#[test]
fn each_error_is_uhttpds_code_and_message() {
    let dir = TempDir::new("ubus-errors");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    let text = |body: &str| {
        let r = post(&s, "/ubus", body, &[]);
        assert_eq!(r.status, 200, "{body}: {}", r.text());
        r.text()
    };
    // Not JSON, or JSON that is no object nor array: parse error, id null.
    for bad in ["{", "5", "\"call\"", "nul", "{\"jsonrpc\":\"2.0\",}"] {
        assert_eq!(
            text(bad),
            error_text("null", -32700, "Parse error"),
            "{bad}"
        );
    }
    // A request object that is not one (no "2.0", no method, a call whose
    // params are not [sid, object, method, {args}]): uhttpd answers these
    // -32700 too; it has -32600 "Invalid request" in its table but no path
    // to it.
    for bad in [
        r#"{"id":1,"method":"list"}"#.to_string(),
        r#"{"jsonrpc":"1.0","id":1,"method":"list"}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":1}"#.to_string(),
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"call","params":["{ADMIN}","test","echo"]}}"#),
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"call","params":["{ADMIN}","test","echo",[]]}}"#
        ),
        r#"{"jsonrpc":"2.0","id":1,"method":"call","params":{}}"#.to_string(),
    ] {
        assert_eq!(text(&bad), error_text("1", -32700, "Parse error"), "{bad}");
    }
    assert_eq!(
        text(r#"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":[]}"#),
        error_text("1", -32601, "Method not found")
    );
    // Arguments may not name the session: the endpoint adds it.
    assert_eq!(
        text(&call_body(
            2,
            ADMIN,
            "test",
            "echo",
            &format!(r#"{{"x":1,"ubus_rpc_session":"{ADMIN}"}}"#)
        )),
        error_text("2", -32602, "Invalid parameters")
    );
    assert_eq!(
        text(&call_body(3, ADMIN, "nosuch", "echo", "{}")),
        error_text("3", -32000, "Object not found")
    );
    // Unknown objects are looked up before the ACL is asked.
    assert_eq!(
        text(&call_body(4, READER, "nosuch", "echo", "{}")),
        error_text("4", -32000, "Object not found")
    );
    // The ACL says no: for this session, for an unknown session, for the
    // anonymous one.
    for sid in [READER, "cccccccccccccccccccccccccccccccc", ANONYMOUS, ""] {
        assert_eq!(
            text(&call_body(5, sid, "test", "fail", "{}")),
            error_text("5", -32002, "Access denied"),
            "{sid}"
        );
    }
    assert_eq!(
        call(&s, READER, "test", "echo", "{}").get("result").at(0),
        &j("0")
    );
    bus.settle(&s);
    assert!(
        !bus.lines()
            .iter()
            .any(|l| l.starts_with("invoke test fail")),
        "a denied call reached the object:\n{}",
        bus.log()
    );
    s.assert_healthy();
}

#[test]
fn a_body_over_64_kib_is_a_parse_error() {
    let dir = TempDir::new("ubus-64k");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    // One byte over uhttpd's 64 KiB.
    let r = post(&s, "/ubus", &sized_call(65537), &[]);
    assert_eq!(
        (r.status, r.text()),
        (200, error_text("null", -32700, "Parse error"))
    );
    let call = call_body(1, ADMIN, "test", "echo", r#"{"k":"v"}"#);
    let huge = format!("[{}]", vec![call.as_str(); 1000].join(","));
    assert_eq!(
        post(&s, "/ubus", &huge, &[]).text(),
        error_text("null", -32700, "Parse error")
    );
    s.assert_healthy();
    assert_eq!(
        call_of(&s).get("result").at(0),
        &j("0"),
        "the endpoint serves on"
    );
}

#[test]
fn a_body_of_64_kib_is_taken() {
    let dir = TempDir::new("ubus-64k-in");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    // LuCI's larger requests (uci changes, file writes) run to tens of KiB.
    for size in [10_000, 65536] {
        let a = rpc(&s, &sized_call(size));
        let pad = a.get("result").at(1).get("pad").str().map(str::len);
        assert_eq!(pad, Some(size - 119), "{size}: {a:?}");
    }
}

/// An echo call of exactly `n` bytes (padded inside the JSON: uhttpd
/// refuses any byte after the request's closing brace).
fn sized_call(n: usize) -> String {
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"call","params":["{ADMIN}","test","echo",{{"k":"v","pad":""#
    );
    let tail = r#""}]}"#;
    format!("{head}{}{tail}", "x".repeat(n - head.len() - tail.len()))
}

fn call_of(s: &Server) -> Json {
    call(s, ADMIN, "test", "echo", "{}")
}

#[test]
fn a_batch_answers_each_request_in_order() {
    let dir = TempDir::new("ubus-batch");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    let batch = format!(
        "[{},{},5,{},{},{}]",
        call_body(1, ADMIN, "test", "echo", r#"{"n":1}"#),
        r#"{"jsonrpc":"2.0","id":2,"method":"nope"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"list"}"#,
        call_body(4, READER, "test", "fail", "{}"),
        call_body(6, ADMIN, "nosuch", "x", "{}"),
    );
    let a = rpc(&s, &batch);
    assert_eq!(a.len(), 6, "{a:?}");
    assert_same(
        a.at(0),
        &format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":[0,{{"n":1,"ubus_rpc_session":"{ADMIN}"}}]}}"#
        ),
    );
    assert_eq!(a.at(1), &j(&error_text("2", -32601, "Method not found")));
    assert_eq!(a.at(2), &j(&error_text("null", -32700, "Parse error")));
    assert_eq!(a.at(3).get("id"), &j("3"));
    assert_eq!(a.at(3).get("result").len(), 4);
    assert_eq!(a.at(4), &j(&error_text("4", -32002, "Access denied")));
    assert_eq!(a.at(5), &j(&error_text("6", -32000, "Object not found")));
    assert_eq!(rpc(&s, "[]"), j("[]"));
}

#[test]
fn call_and_list_by_path_with_a_bearer_session() {
    let dir = TempDir::new("ubus-rest");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    let bearer = format!("Authorization: Bearer {ADMIN}");
    let r = post(
        &s,
        "/ubus/call/test",
        r#"{"jsonrpc":"2.0","id":7,"method":"echo","params":{"x":1}}"#,
        &[&bearer],
    );
    assert_eq!(
        json_of(&r, &s),
        j(&format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"x":1,"ubus_rpc_session":"{ADMIN}"}}}}"#
        ))
    );
    // No data: result null. A ubus error: its status and ubus's words.
    let r = post(
        &s,
        "/ubus/call/test",
        r#"{"jsonrpc":"2.0","id":8,"method":"fail","params":{"code":0}}"#,
        &[&bearer],
    );
    assert_eq!(r.text(), r#"{"jsonrpc":"2.0","id":8,"result":null}"#);
    let r = post(
        &s,
        "/ubus/call/test",
        r#"{"jsonrpc":"2.0","id":9,"method":"fail","params":{"code":7}}"#,
        &[&bearer],
    );
    assert_eq!(r.text(), error_text("9", 7, "Request timed out"));
    let r = post(
        &s,
        "/ubus/call/test",
        r#"{"jsonrpc":"2.0","id":10,"method":"nosuch","params":{}}"#,
        &[&bearer],
    );
    assert_eq!(r.text(), error_text("10", 3, "Method not found"));
    let r = post(
        &s,
        "/ubus/call/nosuch",
        r#"{"jsonrpc":"2.0","id":11,"method":"x","params":{}}"#,
        &[&bearer],
    );
    assert_eq!(r.text(), error_text("11", -32000, "Object not found"));
    let r = post(
        &s,
        "/ubus/call/test",
        &format!(
            r#"{{"jsonrpc":"2.0","id":12,"method":"echo","params":{{"ubus_rpc_session":"{ADMIN}"}}}}"#
        ),
        &[&bearer],
    );
    assert_eq!(r.text(), error_text("12", -32602, "Invalid parameters"));
    // Without a bearer (or with another scheme) the session is the
    // anonymous one, which may call system.board only.
    for auth in [None, Some(format!("Authorization: Basic {ADMIN}"))] {
        let headers: Vec<&str> = auth.iter().map(String::as_str).collect();
        let r = post(
            &s,
            "/ubus/call/test",
            r#"{"jsonrpc":"2.0","id":13,"method":"echo","params":{}}"#,
            &headers,
        );
        assert_eq!(r.text(), error_text("13", -32002, "Access denied"));
        let r = post(
            &s,
            "/ubus/call/system",
            r#"{"jsonrpc":"2.0","id":14,"method":"board"}"#,
            &headers,
        );
        assert_eq!(
            json_of(&r, &s).get("result").get("hostname").str(),
            Some("standin")
        );
    }
    // GET list: every object's signature, or one object's.
    let all = s.get("/ubus/list", &[]);
    let a = json_of(&all, &s);
    assert_eq!(a.keys(), ["session", "system", "test", "test.events"]);
    assert_same(
        a.get("session").get("access"),
        r#"{"ubus_rpc_session":"string","scope":"string","object":"string","function":"string"}"#,
    );
    let a = json_of(&s.get("/ubus/list/test.events", &[]), &s);
    assert_eq!(a.keys(), ["emit", "subscribers"]);
    let r = s.get("/ubus/list/nosuch", &[]);
    assert_eq!(
        (r.status, r.text()),
        (500, r#"{"code":4,"message":"Not found"}"#.to_string())
    );
    assert_eq!(s.get("/ubus/other", &[]).status, 404);
    assert_eq!(s.get("/ubusx", &[]).status, 404, "not the endpoint");
    // Other methods: 405 with what is allowed.
    for method in ["PUT", "DELETE", "OPTIONS"] {
        let out = s.raw(format!("{method} /ubus HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes());
        assert!(out.starts_with("HTTP/1.1 405"), "{method}: {out}");
        let allow = out
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("allow:"))
            .unwrap_or_else(|| panic!("{method}: no Allow: {out}"));
        assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
        assert!(
            !allow.contains("OPTIONS"),
            "OPTIONS only with CORS on: {allow}"
        );
    }
}

#[test]
fn a_subscription_streams_events_and_needs_subscribe_access() {
    for t in Transport::all() {
        let dir = TempDir::new("ubus-sse");
        let bus = UbusStandin::start(&dir);
        let s = ubus_server(t, &dir, &bus, "");
        let bearer = format!("Authorization: Bearer {ADMIN}");
        let mut events = EventStream::open(&s, "/ubus/subscribe/test.events", &[&bearer]);
        assert_eq!(events.head.status, 200, "{t:?}: {:?}", events.head);
        assert!(
            events
                .head
                .header("content-type")
                .is_some_and(|c| c.starts_with("text/event-stream")),
            "{:?}",
            events.head.headers
        );
        assert!(
            bus.wait_line("subscribe test.events", WAIT),
            "{}",
            bus.log()
        );
        assert!(
            bus.lines()
                .iter()
                .any(|l| l.starts_with("invoke session access")
                    && l.contains(r#""object": "test.events""#)
                    && l.contains(r#""function": ":subscribe""#)),
            "{}",
            bus.log()
        );
        // One without a reply (as netifd sends), one asking for replies.
        let a = call(
            &s,
            ADMIN,
            "test.events",
            "emit",
            r#"{"event":"tick","data":{"n":1,"s":"a\nb"}}"#,
        );
        assert_eq!(a.get("result").at(1), &j(r#"{"subscribers":1}"#), "{a:?}");
        assert!(
            events.wait_for("event: tick\ndata: {\"n\":1,\"s\":\"a\\nb\"}\n\n", WAIT),
            "{t:?}: {:?}\n{}",
            events.text,
            s.log_text()
        );
        call(
            &s,
            READER,
            "test.events",
            "emit",
            r#"{"event":"link.up","data":{"port":[1,2]},"reply":true}"#,
        );
        assert!(
            events.wait_for("event: link.up\ndata: {\"port\":[1,2]}\n\n", WAIT),
            "{:?}",
            events.text
        );
        assert!(
            bus.wait_line("notification answered by", WAIT),
            "a notification asking for a reply got none:\n{}",
            bus.log()
        );
        // Calls go on beside the stream.
        assert_eq!(call_of(&s).get("result").at(0), &j("0"));
        // Refused without ":subscribe": errno's EACCES as uhttpd writes it.
        let r = s.get(
            "/ubus/subscribe/test.events",
            &[&format!("Authorization: Bearer {READER}")],
        );
        assert_eq!(
            (r.status, r.text()),
            (
                200,
                r#"{"code":-13,"message":"Permission denied"}"#.to_string()
            )
        );
        let r = s.get("/ubus/subscribe/test.events", &[]);
        assert!(r.text().contains("-13"), "anonymous: {}", r.text());
        bus.settle(&s);
        assert_eq!(bus.count("subscribe test.events"), 1, "{}", bus.log());
        // The stream's end ends the subscription.
        drop(events);
        let ended = wait_until(WAIT, || {
            call(&s, ADMIN, "test.events", "subscribers", "{}")
                .get("result")
                .at(1)
                == &j(r#"{"count":0}"#)
        });
        assert!(
            ended,
            "the subscription outlived its stream:\n{}",
            bus.log()
        );
    }
}

/// A thread posting `body` to /ubus; its answer comes on `tx` tagged.
fn post_in_thread(
    s: &Server,
    tag: &'static str,
    body: String,
    tx: &mpsc::Sender<(&'static str, String)>,
) {
    answer_in_thread(s.open(), tag, body, tx);
}

/// `post_in_thread` on connection `c`.
fn answer_in_thread(
    mut c: Conn,
    tag: &'static str,
    body: String,
    tx: &mpsc::Sender<(&'static str, String)>,
) {
    let tx = tx.clone();
    std::thread::spawn(move || {
        send_post(&mut c, "/ubus", body.as_bytes(), &[]);
        let _ = c.tcp().set_read_timeout(Some(Duration::from_secs(60)));
        let text =
            read_response(&mut c, false).map_or_else(|| "no answer".to_string(), |r| r.text());
        let _ = tx.send((tag, text));
    });
}

#[test]
fn a_slow_call_times_out_while_other_calls_are_answered() {
    let dir = TempDir::new("ubus-timeout");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "ubus-timeout 4\nworkers 1\n");
    let (tx, rx) = mpsc::channel();
    post_in_thread(
        &s,
        "slow",
        call_body(1, ADMIN, "test", "slow", r#"{"seconds":10}"#),
        &tx,
    );
    assert!(bus.wait_line("invoke test slow", WAIT), "{}", bus.log());
    // Another client on the same (only) worker is answered meanwhile.
    post_in_thread(
        &s,
        "echo",
        call_body(2, ADMIN, "test", "echo", r#"{"n":2}"#),
        &tx,
    );
    let (first, text) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(first, "echo", "the slow call held the worker: {text}");
    assert!(text.contains(r#""n":2"#), "{text}");
    let (_, text) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(text, error_text("1", -32003, "ubus request timed out"));
    // Its late reply, when it comes, is no answer to a later call.
    assert!(bus.wait_line("reply test slow", WAIT), "{}", bus.log());
    for n in 3..6 {
        let a = rpc(
            &s,
            &call_body(n, ADMIN, "test", "echo", &format!(r#"{{"n":{n}}}"#)),
        );
        assert_eq!(a.get("id"), &j(&n.to_string()));
        assert_eq!(a.get("result").at(1).get("n"), &j(&n.to_string()), "{a:?}");
    }
}

#[test]
fn ubusd_restarting_fails_the_calls_in_flight_and_the_next_ones_work() {
    let dir = TempDir::new("ubus-restart");
    let mut bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "ubus-timeout 50\n");
    let before = call(&s, ADMIN, "test", "instance", "{}");
    assert_eq!(before.get("result").at(1).get("generation"), &j("1"));
    let old_test_id = bus.object_id("test");
    let (tx, rx) = mpsc::channel();
    post_in_thread(
        &s,
        "slow",
        call_body(1, ADMIN, "test", "slow", r#"{"seconds":40}"#),
        &tx,
    );
    assert!(bus.wait_line("invoke test slow", WAIT), "{}", bus.log());
    bus.kill();
    // At once (long before the 50 s timeout) uhttpd's answer: its libubus
    // ends the requests of a lost connection with status 7 (timeout),
    // which uhttpd writes as the result [7].
    let (_, text) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(text, r#"{"jsonrpc":"2.0","id":1,"result":[7]}"#);
    // With no ubusd: an error answer, and the rest of the server serves.
    let a = call(&s, ADMIN, "test", "echo", "{}");
    assert!(a.has("error"), "{a:?}");
    s.assert_healthy();
    bus.restart();
    assert_ne!(bus.object_id("test"), old_test_id, "the stand-in's ids");
    let after = call(&s, ADMIN, "test", "instance", "{}");
    assert_eq!(
        after.get("result").at(1).get("generation"),
        &j("2"),
        "{after:?}\n{}",
        s.log_text()
    );
    assert_ne!(
        after.get("result").at(1).get("client"),
        before.get("result").at(1).get("client"),
        "a new bus connection"
    );
    // The objects were looked up again, not called by their old ids.
    bus.settle(&s);
    assert!(
        !bus.lines().iter().any(|l| l.contains("no such object")),
        "{}",
        bus.log()
    );
    assert_eq!(
        call(&s, READER, "test", "fail", "{}"),
        j(&error_text("1", -32002, "Access denied"))
    );
}

#[test]
fn the_largest_reply_ubus_carries_arrives_whole() {
    let dir = TempDir::new("ubus-big");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    // Its blob is exactly 1 MiB, as libubus and ubusd take (the 8-byte
    // message header comes on top).
    let a = call(&s, ADMIN, "test", "big", "{}");
    assert_eq!(a.get("result").at(0), &j("0"), "{}", s.log_text());
    let data = a.get("result").at(1).get("data").str().unwrap_or("");
    assert_eq!(data.len(), 1048576 - 29);
    assert!(data.bytes().all(|b| b == b'x'));
}

#[test]
fn broken_replies_are_clean_errors() {
    let dir = TempDir::new("ubus-broken");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    // A reply whose attributes' lengths do not hold together: an error
    // (JSON-RPC's, or a failing ubus status), never a part of it.
    for kind in ["overrun", "short", "name"] {
        let a = rpc(
            &s,
            &call_body(
                3,
                ADMIN,
                "test",
                "malformed",
                &format!(r#"{{"kind":"{kind}"}}"#),
            ),
        );
        assert_eq!(a.get("id"), &j("3"));
        let failed = a.has("error") || a.get("result").at(0).i64().is_some_and(|c| c != 0);
        assert!(failed, "{kind}: {a:?}");
        assert_eq!(call_of(&s).get("result").at(0), &j("0"), "after {kind}");
    }
    // Attributes well framed but not as their type says: a clean answer
    // either way, and the server carries on.
    for kind in ["int", "nostring"] {
        let a = rpc(
            &s,
            &call_body(
                4,
                ADMIN,
                "test",
                "malformed",
                &format!(r#"{{"kind":"{kind}"}}"#),
            ),
        );
        assert_eq!(a.get("id"), &j("4"), "{kind}");
        assert_eq!(call_of(&s).get("result").at(0), &j("0"), "after {kind}");
    }
    s.assert_healthy();
}

#[test]
fn an_oversized_reply_is_refused_and_the_next_call_works() {
    let dir = TempDir::new("ubus-oversized");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    // Over 1 MiB: refused, and the next call works.
    let a = rpc(&s, &call_body(5, ADMIN, "test", "oversized", "{}"));
    assert_eq!(a.get("id"), &j("5"));
    assert!(
        a.has("error") || a.get("result").at(0).i64().is_some_and(|c| c != 0),
        "{a:?}"
    );
    assert_eq!(call_of(&s).get("result").at(0), &j("0"), "{}", s.log_text());
    s.assert_healthy();
}

#[test]
fn auth_off_asks_no_acl() {
    let dir = TempDir::new("ubus-noauth");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "ubus-auth off\n");
    let warned = s.wait_log("ubus-auth", Duration::from_secs(5));
    assert!(
        warned
            && s.log_text()
                .lines()
                .any(|l| l.contains("warn") && l.contains("ubus-auth")),
        "no warning that the ACL is off:\n{}",
        s.log_text()
    );
    assert_eq!(
        call(&s, READER, "test", "fail", "{}").get("result"),
        &j("[9]")
    );
    // An empty session becomes the anonymous one, as in uhttpd.
    let a = call(&s, "", "test", "echo", "{}");
    assert_eq!(
        a.get("result").at(1).get("ubus_rpc_session").str(),
        Some(ANONYMOUS)
    );
    let mut events = EventStream::open(&s, "/ubus/subscribe/test.events", &[]);
    assert_eq!(events.head.status, 200);
    assert!(
        bus.wait_line("subscribe test.events", WAIT),
        "{}",
        bus.log()
    );
    call(&s, "", "test.events", "emit", r#"{"event":"e"}"#);
    assert!(
        events.wait_for("event: e\ndata: {}\n\n", WAIT),
        "{:?}",
        events.text
    );
    bus.settle(&s);
    assert_eq!(bus.count("invoke session access"), 0, "{}", bus.log());
}

#[test]
fn cors_on_answers_preflights_and_lets_other_origins_post() {
    let dir = TempDir::new("ubus-cors");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "ubus-cors on\n");
    let out = s.raw(
        b"OPTIONS /ubus HTTP/1.1\r\nHost: t\r\nOrigin: http://ui.example\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\nConnection: close\r\n\r\n",
    );
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    for h in [
        "Access-Control-Allow-Origin: http://ui.example\r\n",
        "Access-Control-Allow-Headers: content-type\r\n",
        "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n",
        "Access-Control-Allow-Credentials: true\r\n",
        "Content-Length: 0\r\n",
    ] {
        assert!(out.contains(h), "{h}: {out}");
    }
    // A method uhttpd does not offer gets no CORS headers.
    let out = s.raw(
        b"OPTIONS /ubus HTTP/1.1\r\nHost: t\r\nOrigin: http://ui.example\r\nAccess-Control-Request-Method: DELETE\r\nConnection: close\r\n\r\n",
    );
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(!out.contains("Access-Control-Allow-Origin"), "{out}");
    let r = post(
        &s,
        "/ubus",
        &call_body(1, ADMIN, "test", "echo", "{}"),
        &["Origin: http://ui.example"],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://ui.example")
    );
    assert_eq!(json_of(&r, &s).get("result").at(0), &j("0"));

    // Off (the default): no CORS headers, and the cross-origin guard
    // refuses another site's POST.
    let dir = TempDir::new("ubus-nocors");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    let r = post(
        &s,
        "/ubus",
        &call_body(1, ADMIN, "test", "echo", "{}"),
        &["Origin: http://ui.example"],
    );
    assert_eq!(r.status, 403, "{}", r.text());
    bus.settle(&s);
    assert_eq!(bus.count("invoke test echo"), 0);
    let r = post(&s, "/ubus", &call_body(1, ADMIN, "test", "echo", "{}"), &[]);
    assert_eq!(r.header("access-control-allow-origin"), None);
}

#[test]
fn the_settings_are_checked_at_their_line() {
    let (code, err) = check_conf(
        "ubus /ubus /var/run/ubus/ubus.sock\nubus-timeout 30\nubus-cors on\nubus-auth off\n",
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = check_conf("ubus /ubus\n");
    assert_eq!(code, Some(0), "the socket has a default: {err}");
    for (conf, at) in [
        ("root /tmp\nubus ubus\n", "m.conf:2: ubus"),
        ("ubus\n", "m.conf:1: ubus"),
        ("ubus /ubus\nroot /tmp\nubus /other\n", "m.conf:3: ubus"),
        ("ubus /ubus /s extra\n", "m.conf:1: ubus"),
        ("ubus-timeout 0\n", "m.conf:1: ubus-timeout"),
        ("root /tmp\nubus-timeout soon\n", "m.conf:2: ubus-timeout"),
        ("ubus-timeout -1\n", "m.conf:1: ubus-timeout"),
        ("ubus-cors maybe\n", "m.conf:1: ubus-cors"),
        ("ubus-auth 2\n", "m.conf:1: ubus-auth"),
    ] {
        let (code, err) = check_conf(conf);
        assert_eq!(code, Some(2), "{conf:?}: {err}");
        assert!(err.contains(at), "{conf:?}: {err}");
    }
}

#[test]
fn values_cross_the_bus_in_network_byte_order() {
    let dir = TempDir::new("ubus-bytes");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    // JSON to blobmsg: the types libubox picks, the bytes big-endian.
    let a = call(
        &s,
        ADMIN,
        "test",
        "describe",
        r#"{"i32":-19088744,"max":2147483647,"min":-2147483648,"over":2147483648,
            "i64":-81985529216486896,"d":-1234.5678,"t":true,"f":false,"n":null,
            "s":"\u00e9","a":[1,[-1]],"o":{"x":16909060}}"#,
    );
    let double = (-1234.5678f64)
        .to_be_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    assert_same(
        a.get("result").at(1),
        &format!(
            r#"{{"i32":"int32 fedcba98","max":"int32 7fffffff","min":"int32 80000000",
                "over":"int64 0000000080000000","i64":"int64 fedcba9876543210",
                "d":"double {double}","t":"bool 01","f":"bool 00","n":"unspec ",
                "s":"string c3a900","a":["int32 00000001",["int32 ffffffff"]],
                "o":{{"x":"int32 01020304"}},"ubus_rpc_session":"string {}00"}}"#,
            ADMIN
                .bytes()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
    );
    // blobmsg to JSON: every type, from the bus's bytes.
    let a = call(&s, ADMIN, "test", "types", "{}");
    let v = a.get("result").at(1);
    assert_eq!(v.get("int8"), &Json::Bool(true));
    assert_eq!(v.get("false"), &Json::Bool(false));
    assert_eq!(v.get("int16").i64(), Some(-12345));
    assert_eq!(v.get("int32").i64(), Some(-19088744));
    assert_eq!(v.get("int64").i64(), Some(-81985529216486896));
    assert_eq!(v.get("int64_small").i64(), Some(7));
    assert_eq!(v.get("uint_like").i64(), Some(0x01020304));
    let d = v.get("double").f64().unwrap_or(0.0);
    assert!((d + 1234.5678).abs() < 1e-6, "{d}");
    assert_eq!(
        v.get("string").str(),
        Some("tab\there \"quoted\" back\\slash\nnew line \u{1} caf\u{e9} \u{1f600}")
    );
    assert_same(
        v.get("table"),
        r#"{"array":[1,"two",{"three":3},[4]],"empty_table":{},"empty_array":[]}"#,
    );
    assert!(v.has("null") && v.get("null") == &Json::Null, "{v:?}");
    // And back: what the endpoint sends, ubus returns, the endpoint writes.
    let args = r#"{"i32":-19088744,"i64":-81985529216486896,"u":4294967295,"d":-1234.5678,
        "s":"tab\t \"q\" \\ \/ \u00e9 \ud83d\ude00 \u0001","b":[true,false,null],
        "nested":{"a":[1,[2,{"b":{}}]],"e":[]}}"#;
    let a = call(&s, ADMIN, "test", "echo", args);
    let mut want = j(args);
    if let Json::Obj(m) = &mut want {
        m.push(("ubus_rpc_session".into(), Json::Str(ADMIN.into())));
    }
    assert!(a.get("result").at(1).same(&want), "{a:?}");
}

/// A double is read as the nearest one to its text and written back as
/// uhttpd writes it (six decimals), so that values six decimals carry read
/// back as the same double, at the ends of the range too; one out of range
/// is written as `null`, never as `inf`. Run in the release build as well
/// (`cargo test --release`): optimized code rounds differently.
#[test]
fn doubles_cross_the_endpoint_exactly() {
    let dir = TempDir::new("ubus-doubles");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    let texts = [
        "1.7976931348623157e308",
        "1e308",
        "8.98846567431158e307",
        "1.7976931348623158e308",
        "9007199254740993.0",
        "123456789012345678901234567890e-10",
        "-1234.5678",
        "0.1",
        "2.2250738585072014e-308",
        "4.9406564584124654e-324",
        "3.14159265358979e-100",
        "7.0e-10",
    ];
    let args: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| format!(r#""d{i}":{t}"#))
        .collect();
    let args = format!("{{{}}}", args.join(","));
    // JSON to blobmsg: the nearest double, byte for byte.
    let a = call(&s, ADMIN, "test", "describe", &args);
    for (i, t) in texts.iter().enumerate() {
        let bytes: String = t
            .parse::<f64>()
            .unwrap()
            .to_be_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            a.get("result").at(1).get(&format!("d{i}")).str(),
            Some(format!("double {bytes}").as_str()),
            "{t}"
        );
    }
    // And back: the text the endpoint writes reads as the same double.
    let a = call(&s, ADMIN, "test", "echo", &args);
    for (i, t) in texts.iter().enumerate().take(8) {
        let got = a.get("result").at(1).get(&format!("d{i}"));
        assert_eq!(got.f64(), t.parse::<f64>().ok(), "{t}: {got:?}");
    }
    let a = rpc(
        &s,
        &call_body(1, ADMIN, "test", "echo", r#"{"big":1e999,"small":-1e999}"#),
    );
    assert_same(
        a.get("result").at(1),
        &format!(r#"{{"big":null,"small":null,"ubus_rpc_session":"{ADMIN}"}}"#),
    );
}

#[test]
fn curl_makes_calls_on_one_kept_alive_connection() {
    for t in Transport::all() {
        let dir = TempDir::new("ubus-curl");
        let bus = UbusStandin::start(&dir);
        let s = ubus_server(t, &dir, &bus, "");
        let body = dir.write("body.json", call_body(1, ADMIN, "system", "board", "{}"));
        let url = s.url("/ubus");
        let mut cmd = std::process::Command::new("curl");
        cmd.args([
            "-sS",
            "--max-time",
            "20",
            "-H",
            "Content-Type: application/json",
        ]);
        #[cfg(feature = "tls")]
        if let Some(tls) = &s.tls {
            cmd.arg("--cacert").arg(&tls.ca);
        }
        let data = format!("@{}", body.display());
        cmd.args([
            "--data-binary",
            &data,
            "-w",
            "\n@@ %{http_code} %{num_connects}\n",
        ]);
        cmd.args([&url, &url, &url]);
        let out = cmd.output().expect("curl is installed");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (marks, bodies): (Vec<&str>, Vec<&str>) = text
            .lines()
            .filter(|l| !l.is_empty())
            .partition(|l| l.starts_with("@@ "));
        assert_eq!(
            marks,
            ["@@ 200 1", "@@ 200 0", "@@ 200 0"],
            "{t:?}: one connection for the three: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(bodies.len(), 3, "{text}");
        for b in bodies {
            assert_eq!(
                j(b).get("result").at(1).get("hostname").str(),
                Some("standin"),
                "{b}"
            );
        }
    }
}

#[test]
fn the_stand_in_passes_its_own_checks() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ubus/standin.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg("--self-test")
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn calls_at_once_on_one_worker_each_get_their_own_answer() {
    let dir = TempDir::new("ubus-many");
    let bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "workers 1\n");
    let (tx, rx) = mpsc::channel();
    // Each from an address of its own: one client holds a share of the
    // calls in flight.
    let from = |i: u32| s.open_from(&format!("127.0.1.{}", i + 1));
    // Slow ones answered in the reverse of their order, echoes between.
    let slow = ["0.6", "0.4", "0.2"];
    for (i, secs) in slow.iter().enumerate() {
        let body = call_body(
            100 + i as u32,
            ADMIN,
            "test",
            "slow",
            &format!(r#"{{"seconds":{secs}}}"#),
        );
        answer_in_thread(from(100 + i as u32), "slow", body, &tx);
    }
    for n in 0..16u32 {
        answer_in_thread(
            from(n),
            "echo",
            call_body(n, ADMIN, "test", "echo", &format!(r#"{{"n":{n}}}"#)),
            &tx,
        );
    }
    let mut echoes = Vec::new();
    let mut slept = Vec::new();
    for _ in 0..slow.len() + 16 {
        let (tag, text) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        let a = j(&text);
        if tag == "echo" {
            // Its id and its argument agree: no answer went to another call.
            assert_eq!(a.get("result").at(1).get("n"), a.get("id"), "{text}");
            echoes.push(a.get("id").i64().unwrap_or(-1));
        } else {
            let id = a.get("id").i64().unwrap_or(0) as usize;
            let got = a.get("result").at(1).get("slept").f64();
            assert_eq!(
                got,
                slow.get(id.wrapping_sub(100)).and_then(|s| s.parse().ok()),
                "{text}"
            );
            slept.push(id);
        }
    }
    echoes.sort();
    assert_eq!(echoes, (0..16).collect::<Vec<i64>>());
    assert_eq!(slept.len(), 3);
}

#[test]
fn an_event_stream_does_not_outlive_its_ubusd_silently() {
    let dir = TempDir::new("ubus-sse-restart");
    let mut bus = UbusStandin::start(&dir);
    let s = ubus_server(Transport::Plain, &dir, &bus, "");
    let bearer = format!("Authorization: Bearer {ADMIN}");
    let mut events = EventStream::open(&s, "/ubus/subscribe/test.events", &[&bearer]);
    assert_eq!(events.head.status, 200);
    assert!(
        bus.wait_line("subscribe test.events", WAIT),
        "{}",
        bus.log()
    );
    bus.restart();
    // Either the stream ends (as uhttpd ends it when its subscription goes),
    // so that the client subscribes again, or it carries on with the new
    // ubusd's events; never open and deaf.
    let ended =
        |e: &mut EventStream| !e.wait_for("\u{0}never", Duration::from_millis(300)) && e.closed();
    let mut delivered = false;
    let done = wait_until(WAIT, || {
        if ended(&mut events) {
            return true;
        }
        let a = call(&s, ADMIN, "test.events", "emit", r#"{"event":"again"}"#);
        if a.get("result").at(1).get("subscribers") == &j("1") {
            delivered = events.wait_for("event: again\n", Duration::from_secs(5));
            return delivered;
        }
        false
    });
    assert!(
        done,
        "the stream stayed open without events after ubusd restarted: {:?}\n{}",
        events.text,
        bus.log()
    );
    s.assert_healthy();
}

/// Ends floods however a scope ends, so it can join them.
struct Stop<'a>(&'a AtomicBool);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A flood of one JSON-RPC body on /ubus until `stop`; each answer
/// refused (503) or held back (429, a guesser past its logins) counts in
/// `refused`, and is followed by a pause: a flood, not a busy loop on a
/// shared machine.
struct Flood<'a> {
    body: &'a str,
    stop: &'a AtomicBool,
    refused: &'a AtomicUsize,
}

impl<'a> Flood<'a> {
    /// `n` connections made by `open` (again when one closes).
    fn start<'s>(
        &self,
        scope: &'s std::thread::Scope<'s, '_>,
        n: usize,
        open: impl Fn() -> Conn + Copy + Send + 's,
    ) where
        'a: 's,
    {
        for _ in 0..n {
            let Flood {
                body,
                stop,
                refused,
            } = *self;
            scope.spawn(move || {
                let mut c = open();
                while !stop.load(Ordering::Relaxed) {
                    send_post(&mut c, "/ubus", body.as_bytes(), &[]);
                    match read_response(&mut c, false) {
                        Some(r) if r.status == 503 || r.status == 429 => {
                            refused.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        Some(_) => {}
                        None => c = open(),
                    }
                }
            });
        }
    }
}

/// One hostile client per address, from the attacks on the endpoint:
/// wrong-password `session.login` calls (rpcd takes 3 s to refuse each
/// here; past its 5 the guesser gets 429 at once) and slow calls of a
/// session it holds, each on many connections, over and over. The
/// owner, at another address, logs in over ubus and makes calls with that
/// session and with another live one, each answered within 2 s.
#[test]
fn a_login_flood_and_slow_calls_leave_the_owner_room() {
    for t in Transport::all() {
        let dir = TempDir::new("ubus-shares");
        let bus = UbusStandin::start_slow_logins(&dir, 3.0);
        let s = ubus_server(t, &dir, &bus, "");
        let stop = AtomicBool::new(false);
        let guesses = call_body(
            1,
            ANONYMOUS,
            "session",
            "login",
            r#"{"username":"root","password":"guess"}"#,
        );
        let slow = call_body(1, ADMIN, "test", "slow", r#"{"seconds":5}"#);
        let refused = [AtomicUsize::new(0), AtomicUsize::new(0)];
        std::thread::scope(|scope| {
            let _stop = Stop(&stop);
            let floods = [("127.0.0.2", &guesses, 70), ("127.0.0.4", &slow, 40)];
            for ((from, body, n), refused) in floods.into_iter().zip(&refused) {
                let flood = Flood {
                    body,
                    stop: &stop,
                    refused,
                };
                flood.start(scope, n, || s.open_from(from));
            }
            let flooding = wait_until(WAIT, || {
                refused.iter().all(|n| n.load(Ordering::Relaxed) > 0)
            });
            assert!(flooding, "{t:?}: the floods were never refused");
            let mut c = s.open_from("127.0.0.3");
            let _ = c.tcp().set_read_timeout(Some(owner_bound()));
            let mut ask = |body: &str| {
                send_post(&mut c, "/ubus", body.as_bytes(), &[]);
                let r = read_response(&mut c, false).expect("an answer within 2 s");
                assert_eq!(r.status, 200, "{t:?}: {}\n{}", r.text(), s.log_text());
                Json::parse(&r.text()).unwrap()
            };
            let login = ask(&call_body(
                1,
                ANONYMOUS,
                "session",
                "login",
                r#"{"username":"root","password":"secret"}"#,
            ));
            assert_eq!(login.get("result").at(0).i64(), Some(0), "{login:?}");
            let sid = login
                .get("result")
                .at(1)
                .get("ubus_rpc_session")
                .str()
                .expect("a session")
                .to_string();
            for _ in 0..3 {
                let board = ask(&call_body(2, &sid, "system", "board", "{}"));
                assert_eq!(
                    board.get("result").at(1).get("board_name").str(),
                    Some("marmoset,standin"),
                    "{board:?}"
                );
                let echo = ask(&call_body(3, READER, "test", "echo", r#"{"a":1}"#));
                assert_eq!(echo.get("result").at(0).i64(), Some(0), "{echo:?}");
            }
        });
        s.assert_healthy();
    }
}

/// LuCI's pages are scripts, its session rpcd's: a script request whose
/// login cookie names a session the endpoint knows finds the script slot
/// kept for it, however many addresses hold the others. Uploads from
/// three hostile addresses under the uhttpd mapping's `cgi-max 3`; the
/// owner, logged in over ubus, gets his page within 2 s.
#[test]
fn a_luci_session_finds_a_script_slot_whatever_holds_the_others() {
    for t in Transport::all() {
        let dir = TempDir::new("ubus-cgi");
        let bus = UbusStandin::start(&dir);
        let s = Server::start_with_config_over(t, &luci_config(&dir, &bus), luci_root(), &[]);
        let mut c = s.open_from("127.0.0.3");
        let sid = log_in(&mut c, &s);
        let count = format!("{}/cgi-bin/count", s.root.path().display());
        let (tx, rx) = mpsc::channel();
        for from in ["127.0.0.2", "127.0.0.5", "127.0.0.6"] {
            hold_upload(s.open_from(from), &tx);
        }
        let mut refused = Vec::new();
        // Each upload runs or is refused (uploads hold all but one of the
        // slots not kept).
        let held = wait_until(WAIT, || {
            refused.extend(rx.try_iter());
            let n = running(&count);
            n >= 1 && n + refused.iter().filter(|r| **r == Some(503)).count() >= 3
        });
        assert!(held, "{t:?}: {refused:?}\n{}", s.log_text());
        assert_luci_pages(&mut c, &sid, &s);
    }
}

/// The endpoint and the uhttpd mapping's CGI limits.
fn luci_config(dir: &TempDir, bus: &UbusStandin) -> std::path::PathBuf {
    ubus_config(
        dir,
        bus,
        "cgi-max 3\nheader-timeout 30\ncgi-max-body 1073741824\n",
    )
}

/// A root with `count` (its body's length) and `page` (a status page).
fn luci_root() -> TempDir {
    let root = TempDir::new("ubus-cgi-root");
    root.write("index.html", "<!DOCTYPE html><title>t</title>hello\n");
    script(
        &root,
        "count",
        "n=$(wc -c | tr -d ' '); printf 'Content-Type: text/plain\\n\\n%s\\n' \"$n\"\n",
    );
    script(
        &root,
        "page",
        "printf 'Content-Type: text/html\\n\\nstatus page'\n",
    );
    root
}

/// Logs in over ubus on `c`, whose answers must come within 2 s from now
/// on; the new session.
fn log_in(c: &mut Conn, s: &Server) -> String {
    let _ = c.tcp().set_read_timeout(Some(owner_bound()));
    let login = call_body(
        1,
        ANONYMOUS,
        "session",
        "login",
        r#"{"username":"root","password":"secret"}"#,
    );
    send_post(c, "/ubus", login.as_bytes(), &[]);
    let login = json_of(&read_response(c, false).expect("an answer"), s);
    login
        .get("result")
        .at(1)
        .get("ubus_rpc_session")
        .str()
        .expect("a session")
        .to_string()
}

/// Sends `head` on `h` (and `body`), held open; the status of its answer,
/// if one comes, on `tx`.
fn hold(mut h: Conn, head: &[u8], body: &[u8], tx: &mpsc::Sender<Option<u16>>) {
    h.write_all(head).unwrap();
    h.write_all(body).unwrap();
    let tx = tx.clone();
    std::thread::spawn(move || {
        let _ = h.tcp().set_read_timeout(Some(Duration::from_secs(40)));
        let _ = tx.send(read_response(&mut h, false).map(|r| r.status));
        let _ = read_to_close(&mut h);
    });
}

/// An upload to `count` whose script may start: the start of its large body.
fn hold_upload(h: Conn, tx: &mpsc::Sender<Option<u16>>) {
    let head = b"POST /cgi-bin/count HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000\r\n\r\n";
    hold(h, head, &[b'x'; 9000], tx);
}

/// LuCI's page, with its login cookie, three times on `c`: each 200.
fn assert_luci_pages(c: &mut Conn, sid: &str, s: &Server) {
    for _ in 0..3 {
        let page =
            format!("GET /cgi-bin/page HTTP/1.1\r\nHost: t\r\nCookie: sysauth_http={sid}\r\n\r\n");
        c.write_all(page.as_bytes()).unwrap();
        let r = read_response(c, false).map(|r| (r.status, r.text()));
        assert_eq!(r, Some((200, "status page".into())), "{}", s.log_text());
    }
}

/// A hostile host's and the owner's addresses in one /64 on `lo`, as on a
/// router's LAN; `None` (said) where they cannot be added.
fn hosts_of_one_64() -> Option<(&'static str, &'static str)> {
    let (hostile, owner) = ("fd00:18:5::2", "fd00:18:5::3");
    if add_ipv6_to_lo(&["fd00:18:5::2/64", "fd00:18:5::3/64"]) {
        Some((hostile, owner))
    } else {
        eprintln!("skipped: adding {hostile} and {owner} to lo needs root");
        None
    }
}

/// The same over IPv6, the hostile host and the owner in one /64 as on a
/// router's LAN: uploads and chunked heads from one address, the owner's
/// LuCI pages from another, with his session, each within 2 s.
#[test]
fn over_ipv6_a_luci_session_finds_a_script_slot_beside_a_host_of_its_own_64() {
    let Some((hostile, owner)) = hosts_of_one_64() else {
        return;
    };
    for t in Transport::all() {
        let dir = TempDir::new("ubus-cgi-v6");
        let bus = UbusStandin::start(&dir);
        let args = v6_listeners(t);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let s = Server::start_with_config_over(t, &luci_config(&dir, &bus), luci_root(), &args);
        let mut c = s.open_from_v6(owner);
        let sid = log_in(&mut c, &s);
        let count = format!("{}/cgi-bin/count", s.root.path().display());
        let (tx, rx) = mpsc::channel();
        for _ in 0..3 {
            hold_upload(s.open_from_v6(hostile), &tx);
        }
        let chunked =
            b"POST /cgi-bin/count HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
        for _ in 0..3 {
            hold(s.open_from_v6(hostile), chunked, b"", &tx);
        }
        let mut refused = Vec::new();
        let held = wait_until(WAIT, || {
            refused.extend(rx.try_iter());
            running(&count) >= 3 || (running(&count) == 1 && refused.contains(&Some(503)))
        });
        assert!(held, "{t:?}: {refused:?}\n{}", s.log_text());
        assert_luci_pages(&mut c, &sid, &s);
    }
}

/// Listeners on 127.0.0.1 (where the harness waits) and on [::] for `t`.
fn v6_listeners(t: Transport) -> Vec<String> {
    let mut args = vec!["--listen".to_string(), "127.0.0.1:0".to_string()];
    if t != Transport::Plain {
        args.extend(["--listen".to_string(), t.listen("127.0.0.1:0")]);
    }
    args.extend(["--listen".to_string(), t.listen("[::]:0")]);
    args
}

/// Scripts running whose command line holds `needle`: such processes
/// whose parent is not one (a subshell is its script's).
fn running(needle: &str) -> usize {
    let matching: Vec<(String, String)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let path = e.ok()?.path();
            let cmd = std::fs::read(path.join("cmdline")).ok()?;
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            // pid (comm) state ppid ...: the comm may hold spaces.
            let ppid = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .to_string();
            let pid = path.file_name()?.to_str()?.to_string();
            String::from_utf8_lossy(&cmd)
                .contains(needle)
                .then_some((pid, ppid))
        })
        .collect();
    matching
        .iter()
        .filter(|(_, ppid)| !matching.iter().any(|(pid, _)| pid == ppid))
        .count()
}

/// Over IPv6, from one /64 as on a router's LAN: a host floods
/// wrong-password logins while the owner, on another address of the same
/// /64, calls with the session he logged in with before, each call
/// answered within 2 s: a known session finds the calls anonymous ones
/// cannot take, whoever shares its client.
#[test]
fn over_ipv6_a_session_finds_room_beside_a_login_flood_from_its_own_64() {
    let Some((hostile, owner)) = hosts_of_one_64() else {
        return;
    };
    for t in Transport::all() {
        let dir = TempDir::new("ubus-v6");
        let bus = UbusStandin::start_slow_logins(&dir, 3.0);
        let conf = ubus_config(&dir, &bus, "");
        let root = TempDir::new("ubus-v6-root");
        root.write("index.html", "hello\n");
        let args = v6_listeners(t);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let s = Server::start_with_config_over(t, &conf, root, &args);
        let mut c = s.open_from_v6(owner);
        let _ = c.tcp().set_read_timeout(Some(owner_bound()));
        let ask = |c: &mut Conn, body: &str| {
            send_post(c, "/ubus", body.as_bytes(), &[]);
            let r = read_response(c, false).expect("an answer within 2 s");
            assert_eq!(r.status, 200, "{t:?}: {}\n{}", r.text(), s.log_text());
            Json::parse(&r.text()).unwrap()
        };
        let login = ask(
            &mut c,
            &call_body(
                1,
                ANONYMOUS,
                "session",
                "login",
                r#"{"username":"root","password":"secret"}"#,
            ),
        );
        let sid = login
            .get("result")
            .at(1)
            .get("ubus_rpc_session")
            .str()
            .expect("a session")
            .to_string();
        let stop = AtomicBool::new(false);
        let refused = AtomicUsize::new(0);
        let guess = call_body(
            1,
            ANONYMOUS,
            "session",
            "login",
            r#"{"username":"root","password":"guess"}"#,
        );
        std::thread::scope(|scope| {
            let _stop = Stop(&stop);
            let flood = Flood {
                body: &guess,
                stop: &stop,
                refused: &refused,
            };
            flood.start(scope, 70, || s.open_from_v6(hostile));
            let flooding = wait_until(WAIT, || refused.load(Ordering::Relaxed) > 0);
            assert!(flooding, "{t:?}: the flood was never refused");
            for _ in 0..3 {
                let board = ask(&mut c, &call_body(2, &sid, "system", "board", "{}"));
                assert_eq!(
                    board.get("result").at(1).get("board_name").str(),
                    Some("marmoset,standin"),
                    "{board:?}"
                );
            }
        });
    }
}

/// Wrong-password logins from three addresses, each on 30 connections at
/// once and over and over: rpcd is asked 5 times for each address (each
/// guess is counted before it is sent on), the rest are answered 429 at
/// once, and the owner at a fourth address still logs in over ubus within
/// 2 s, each time.
#[test]
fn a_login_flood_from_many_addresses_leaves_the_owner_his_login() {
    for t in Transport::all() {
        let dir = TempDir::new("ubus-logins");
        let bus = UbusStandin::start_slow_logins(&dir, 1.0);
        let s = ubus_server(t, &dir, &bus, "");
        let stop = AtomicBool::new(false);
        let refused = AtomicUsize::new(0);
        let guess = call_body(
            1,
            ANONYMOUS,
            "session",
            "login",
            r#"{"username":"root","password":"guess"}"#,
        );
        let guessers = ["127.0.0.2", "127.0.0.5", "127.0.0.6"];
        std::thread::scope(|scope| {
            let _stop = Stop(&stop);
            let flood = Flood {
                body: &guess,
                stop: &stop,
                refused: &refused,
            };
            for from in guessers {
                flood.start(scope, 30, || s.open_from(from));
            }
            let flooding = wait_until(WAIT, || {
                refused.load(Ordering::Relaxed) >= 3 * 30
                    && bus.count("invoke session login") >= 3 * AUTH_FAIL_LIMIT
            });
            assert!(flooding, "{t:?}: the guessers were never held back");
            for _ in 0..3 {
                let mut c = s.open_from("127.0.0.3");
                let sid = log_in(&mut c, &s);
                assert_eq!(sid.len(), 32, "{sid}");
            }
        });
        bus.settle(&s);
        assert_eq!(
            bus.count("invoke session login"),
            3 * AUTH_FAIL_LIMIT + 3,
            "{t:?}: the guesses rpcd was asked, and the owner's logins"
        );
    }
}

/// Password checks one address may start in a minute (`limits.rs`).
const AUTH_FAIL_LIMIT: usize = 5;

/// A stand-in for LuCI's login as its dispatcher answers: 403 with
/// `X-LuCI-Login-Required: yes` and the login page for a wrong password,
/// a redirect setting the session cookie for the right one. Each run
/// leaves a line in `cgi-bin/tries`.
fn luci_login_script(root: &TempDir) {
    script(
        root,
        "luci",
        "echo run >> \"$(dirname \"$0\")/tries\"\n\
         body=$(head -c \"${CONTENT_LENGTH:-0}\")\n\
         case \"$body\" in\n\
         *luci_password=secret*) printf 'Status: 302 Found\\nSet-Cookie: sysauth_http=0123456789abcdef0123456789abcdef; path=/cgi-bin/luci/; HttpOnly\\nLocation: /cgi-bin/luci/admin\\n\\n' ;;\n\
         *) printf 'Status: 403 Forbidden\\nX-LuCI-Login-Required: yes\\nContent-Type: text/html\\n\\nlogin page' ;;\n\
         esac\n",
    );
}

/// LuCI's login form from `from` with `password`, answered within the
/// owner's bound.
fn form_login(s: &Server, from: &str, password: &str) -> Response {
    let body = format!("luci_username=root&luci_password={password}");
    let mut c = s.open_from(from);
    let _ = c.tcp().set_read_timeout(Some(owner_bound()));
    let head = format!(
        "POST /cgi-bin/luci HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).unwrap();
    c.write_all(body.as_bytes()).unwrap();
    read_response(&mut c, false).expect("an answer")
}

/// Under the uhttpd mapping's `cgi-max 3`, slow page loads without a
/// session from four addresses hold every script slot such requests may
/// take; the owner's login form still finds the last slot open to a
/// request that may carry a login, at once, and his pages then find the
/// one kept for sessions.
#[test]
fn a_login_form_finds_a_slot_whatever_page_loads_hold() {
    for t in Transport::all() {
        let dir = TempDir::new("ubus-login-slot");
        let bus = UbusStandin::start(&dir);
        let root = luci_root();
        luci_login_script(&root);
        script(
            &root,
            "slow",
            "sleep 30; printf 'Content-Type: text/plain\\n\\nslow'\n",
        );
        let s = Server::start_with_config_over(t, &luci_config(&dir, &bus), root, &[]);
        let slow = format!("{}/cgi-bin/slow", s.root.path().display());
        let (tx, rx) = mpsc::channel();
        for from in ["127.0.0.2", "127.0.0.5", "127.0.0.6", "127.0.0.7"] {
            let head = b"GET /cgi-bin/slow HTTP/1.1\r\nHost: t\r\n\r\n";
            hold(s.open_from(from), head, b"", &tx);
        }
        let mut refused = Vec::new();
        let held = wait_until(WAIT, || {
            refused.extend(rx.try_iter());
            running(&slow) + refused.iter().filter(|r| **r == Some(503)).count() == 4
        });
        assert!(held, "{t:?}: {refused:?}\n{}", s.log_text());
        assert!(running(&slow) >= 1, "{t:?}: no page load runs");
        let r = form_login(&s, "127.0.0.3", "secret");
        assert_eq!(r.status, 302, "{t:?}: {}", s.log_text());
        let cookie = r.header("set-cookie").unwrap_or_default().to_string();
        assert!(cookie.starts_with("sysauth_http="), "{cookie}");
        let mut c = s.open_from("127.0.0.3");
        let sid = log_in(&mut c, &s);
        assert_luci_pages(&mut c, &sid, &s);
    }
}

/// Password guesses through LuCI's login form and `session.login` count
/// as Basic auth's do: 5 a minute per address, 20 in 10 minutes per
/// network, and past them 429 with `Retry-After` before rpcd or the
/// script is asked, whatever the password. An address that logged in
/// before keeps its own budget and logs in both ways.
#[test]
fn luci_and_ubus_login_guesses_are_bounded_per_address_and_per_network() {
    for t in Transport::all() {
        let dir = TempDir::new("ubus-guesses");
        let bus = UbusStandin::start(&dir);
        let root = luci_root();
        luci_login_script(&root);
        let tries = root.path().join("cgi-bin/tries");
        let s = Server::start_with_config_over(t, &luci_config(&dir, &bus), root, &[]);
        let runs = || {
            std::fs::read_to_string(&tries)
                .map(|t| t.lines().count())
                .unwrap_or(0)
        };
        let ubus_login = |from: &str, password: &str| {
            let body = call_body(
                1,
                ANONYMOUS,
                "session",
                "login",
                &format!(r#"{{"username":"root","password":"{password}"}}"#),
            );
            let mut c = s.open_from(from);
            send_post(&mut c, "/ubus", body.as_bytes(), &[]);
            read_response(&mut c, false).expect("an answer")
        };
        let form_login = |from: &str, password: &str| form_login(&s, from, password);
        // The owner logs in once, before any guessing.
        let owner = "127.0.0.3";
        assert_eq!(ubus_login(owner, "secret").status, 200);
        let asked = || {
            bus.settle(&s);
            bus.count("invoke session login")
        };
        let before = asked();
        // One address guessing over ubus: 5 reach rpcd.
        let denied = ubus_login("127.0.0.2", "guess");
        assert_eq!(denied.status, 200);
        for _ in 0..4 {
            assert_eq!(ubus_login("127.0.0.2", "guess").text(), denied.text());
        }
        for password in ["guess", "secret"] {
            let r = ubus_login("127.0.0.2", password);
            assert_eq!(r.status, 429, "{t:?}: {}", s.log_text());
            assert_eq!(r.header("retry-after"), Some("60"));
            assert_eq!(
                r.text(),
                denied.text(),
                "the same answer, whatever the password"
            );
        }
        assert_eq!(asked() - before, 5);
        // One address guessing through the form: 5 reach the script.
        for _ in 0..5 {
            let r = form_login("127.0.0.4", "guess");
            assert_eq!(r.status, 403, "{t:?}: {}", s.log_text());
        }
        for password in ["guess", "secret"] {
            let r = form_login("127.0.0.4", password);
            assert_eq!(r.status, 429, "{t:?}: {}", s.log_text());
            assert_eq!(r.header("retry-after"), Some("60"));
        }
        assert_eq!(runs(), 5);
        // Two more addresses spend the network's 20.
        for from in ["127.0.0.5", "127.0.0.6"] {
            for _ in 0..5 {
                assert_eq!(ubus_login(from, "guess").status, 200);
            }
        }
        assert_eq!(asked() - before, 15);
        let newcomer = "127.0.0.7";
        assert_eq!(ubus_login(newcomer, "secret").status, 429);
        assert_eq!(form_login(newcomer, "secret").status, 429);
        assert_eq!((asked() - before, runs()), (15, 5));
        // The owner's address logged in before: it logs in both ways.
        let r = ubus_login(owner, "secret");
        assert_eq!(r.status, 200);
        assert_eq!(
            json_of(&r, &s).get("result").at(0).i64(),
            Some(0),
            "{}",
            r.text()
        );
        let r = form_login(owner, "secret");
        assert_eq!(r.status, 302, "{t:?}: {}", s.log_text());
        assert!(
            r.header("set-cookie")
                .is_some_and(|c| c.starts_with("sysauth_http="))
        );
        assert!(
            s.log_text()
                .contains("reached its network's limit of login checks")
        );
        s.assert_healthy();
    }
}
