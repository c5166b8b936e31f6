//! A JSON-RPC request body as the ubus endpoint reads it: the strict JSON
//! parser straight into blobmsg, then blobmsg written back as JSON. The
//! text written once reads back into the same text (JSON -> blobmsg ->
//! JSON is stable after one pass, doubles aside), and every field parsed is well formed.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Whether a list holds a double: six decimals are not the value, so a
/// second pass may round it differently.
fn has_double(list: &[u8]) -> bool {
    blob::fields(list).any(|f| match f.value {
        blob::Value::Double(_) => true,
        blob::Value::Array(l) | blob::Value::Table(l) => has_double(l),
        _ => false,
    })
}
use marmoset::ubus::blob::{self, Builder, Value};
use marmoset::ubus::json;

fn check(list: &[u8], depth: usize) {
    assert!(blob::is_whole(list));
    for a in blob::attrs(list) {
        let f = blob::field(a).expect("the parser writes well-formed fields");
        if let Value::Array(l) | Value::Table(l) = f.value {
            check(l, depth + 1);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Builder::default();
    if json::parse_into(data, b"", &mut b).is_err() {
        return;
    }
    check(&b.buf, 0);
    let first = blob::fields(&b.buf).next().expect("one field");
    let mut text = Vec::new();
    json::write_value(&mut text, first.value, 0);
    let mut b2 = Builder::default();
    if has_double(&b.buf) || json::parse_into(&text, b"", &mut b2).is_err() {
        return;
    }
    let second = blob::fields(&b2.buf).next().expect("one field");
    let mut text2 = Vec::new();
    json::write_value(&mut text2, second.value, 0);
    assert_eq!(text, text2);
});
