//! The bus side of the ubus endpoint on any bytes from the socket: the
//! framing of a message stream, each message's attributes, and the blobmsg
//! data inside them written out as JSON. Nothing may panic; a framed
//! message lies within the bytes it was cut from, and what is written is
//! text the JSON parser reads back the same (an empty name or a
//! double aside: libubox writes empty names and six decimals alike).
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
use marmoset::ubus::blob::{self, Builder, Message};
use marmoset::ubus::json;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some(n)) = blob::message_len(rest) {
        let Some(msg) = rest.get(..n) else { break };
        let (_, attrs) = blob::split_message(msg).expect("a framed message splits");
        assert!(attrs.len() <= n);
        let m = Message::parse(attrs);
        for list in [m.data, m.signature].into_iter().flatten() {
            let mut text = Vec::new();
            json::write_list(&mut text, list, false, 0);
            let mut b = Builder::default();
            if !has_double(list) && json::parse_into(&text, b"", &mut b).is_ok() {
                let again = blob::fields(&b.buf).next().expect("one field");
                let mut text2 = Vec::new();
                json::write_value(&mut text2, again.value, 0);
                assert_eq!(text, text2);
            }
        }
        rest = &rest[n..];
    }
    // The same bytes as a bare blobmsg list.
    let mut text = Vec::new();
    json::write_list(&mut text, data, true, 0);
});
