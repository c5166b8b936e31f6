//! `output::head_end` and `output::parse` on any script output:
//! nothing a script prints can split or forge a response header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marmoset::cgi::output::{self, ScriptHead};

fn clean(field: &str, s: &str) {
    assert!(
        !s.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0),
        "{field} has CR, LF or NUL: {s:?}"
    );
}

fn check(h: &ScriptHead) {
    h.content_type.iter().for_each(|s| clean("content_type", s));
    h.location.iter().for_each(|s| clean("location", s));
    if let Some(s) = &h.local_redirect {
        clean("local_redirect", s);
        assert!(s.starts_with('/') && !s.starts_with("//"), "{s:?}");
    }
    for (name, value) in &h.other {
        clean("other name", name);
        clean("other value", value);
        assert!(!name.is_empty() && !name.contains(':'), "{name:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some((head, body)) = output::head_end(data) {
        assert!(head < body && body <= data.len());
        assert!(
            matches!(&data[head..body], b"\n" | b"\r\n"),
            "{:?}",
            &data[head..body]
        );
        if let Ok(h) = output::parse(&data[..head]) {
            check(&h);
        }
    }
    if let Ok(h) = output::parse(data) {
        check(&h);
    }
});
