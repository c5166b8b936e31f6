//! `negotiate::accept_encoding` and `negotiate::accepts_html` on any header value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marmoset::http::negotiate;

fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

fuzz_target!(|data: &[u8]| {
    let e = negotiate::accept_encoding(Some(data));
    let star = data.contains(&b'*');
    // A coding is only offered when the client named it (or `*`).
    if e.br {
        assert!(star || contains_ignore_case(data, b"br"));
    }
    if e.gzip {
        assert!(star || contains_ignore_case(data, b"gzip"));
    }
    // Identity is refused only by name or by `*`.
    if !e.identity {
        assert!(star || contains_ignore_case(data, b"identity"));
    }
    let html = negotiate::accepts_html(Some(data));
    if html {
        assert!(contains_ignore_case(data, b"text/") || data.windows(3).any(|w| w == b"*/*"));
    }
    assert!(negotiate::accept_encoding(None).identity);
    assert!(negotiate::accepts_html(None));
});
