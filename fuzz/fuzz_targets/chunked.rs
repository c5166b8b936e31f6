//! `chunked::Decoder`: the whole input at once and the same input in two
//! pieces give the same data, the same count and the same outcome.
//!
//! Input: 2 bytes choose the split point, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marmoset::http::chunked::Decoder;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let body = &data[2..];
    let at = usize::from(u16::from_le_bytes([data[0], data[1]])) % (body.len() + 1);

    let mut whole = Decoder::default();
    let mut whole_out = Vec::new();
    let whole_result = whole.feed(body, &mut whole_out);

    let mut split = Decoder::default();
    let mut split_out = Vec::new();
    let split_result = split.feed(&body[..at], &mut split_out).and_then(|first| {
        if first < at {
            // The body ended inside the first piece.
            assert!(split.is_done(), "stopped early without an error");
            return Ok(first);
        }
        split
            .feed(&body[at..], &mut split_out)
            .map(|second| first + second)
    });

    assert_eq!(whole_result, split_result, "split at {at}");
    if let Ok(used) = whole_result {
        assert_eq!(whole_out, split_out, "split at {at}");
        assert_eq!(whole.is_done(), split.is_done(), "split at {at}");
        assert_eq!(whole.counted(), split.counted(), "split at {at}");
        assert!(whole_out.len() as u64 <= whole.counted() && whole.counted() <= used as u64);
        assert!(used <= body.len() && whole_out.len() <= used);
        assert!(whole.is_done() || used == body.len());
        if whole.is_done() {
            // Done means done: more input is left alone.
            assert_eq!(whole.feed(b"0\r\n\r\n", &mut whole_out), Ok(0));
        }
    }
});
