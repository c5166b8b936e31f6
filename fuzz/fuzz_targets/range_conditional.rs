//! Ranges, If-Range and preconditions with fuzzed header values and
//! validators, and HTTP dates.
//!
//! Input: 8 bytes of file length, 8 of mtime, 8 of a time to format, 1 of
//! flags, then up to six `\n`-separated header values: Range, If-Range,
//! If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since.
#![no_main]

use libfuzzer_sys::fuzz_target;
use marmoset::http::conditional::{self, Conditions, Outcome, Validators};
use marmoset::http::httpdate;
use marmoset::http::range::{self, Ranged};

/// The first second of year 10000: `httpdate::format` writes four-digit years.
const YEAR_10000: u64 = 253_402_300_800;

fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = data.get(at..at + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

fn check_range(r: Ranged, len: u64) {
    if let Ranged::Part(a, b) = r {
        assert!(a <= b && b < len, "Part({a}, {b}) for length {len}");
    }
}

fuzz_target!(|data: &[u8]| {
    // Small lengths half the time, so that edge cases near 0 come up.
    let raw_len = u64_at(data, 0);
    let len = if raw_len & 1 == 0 {
        raw_len >> 1
    } else {
        (raw_len >> 1) % 1024
    };
    let mtime = u64_at(data, 8) % YEAR_10000;
    let t = u64_at(data, 16) % YEAR_10000;
    let flags = data.get(24).copied().unwrap_or(0);
    let rest = data.get(25..).unwrap_or(&[]);

    // Dates: formatting round-trips; parsing anything does not panic.
    let formatted = httpdate::format(t);
    assert_eq!(
        httpdate::parse(&formatted),
        Some(t),
        "{:?}",
        String::from_utf8_lossy(&formatted)
    );
    let _ = httpdate::parse(rest);

    let v = Validators::new(u64_at(data, 0), len, mtime, u64::from(flags));
    let mtime_date = httpdate::format(mtime);
    let weak = format!("W/{}", v.etag());
    let mut fields = rest.split(|&b| b == b'\n');
    let range_value = fields.next().map(|r| match flags >> 5 & 1 {
        0 => r.to_vec(),
        _ => b"bytes=0-".to_vec(),
    });
    // A flag bit swaps in a value that matches the validators.
    let mut field = |bit: u8, matching: &'static str| -> Option<Vec<u8>> {
        let f = fields.next()?;
        Some(match (flags >> bit & 1, matching) {
            (0, _) => f.to_vec(),
            (_, "etag") => v.etag().as_bytes().to_vec(),
            (_, "weak") => weak.as_bytes().to_vec(),
            _ => mtime_date.to_vec(),
        })
    };
    let if_range = field(0, if flags & 0x80 == 0 { "etag" } else { "date" });
    let if_match = field(1, "etag");
    let if_none_match = field(2, if flags & 0x40 == 0 { "etag" } else { "weak" });
    let if_modified_since = field(3, "date");
    let if_unmodified_since = field(4, "date");
    let (range_value, if_range) = (range_value.as_deref(), if_range.as_deref());
    let c = Conditions {
        if_match: if_match.as_deref(),
        if_none_match: if_none_match.as_deref(),
        if_modified_since: if_modified_since.as_deref(),
        if_unmodified_since: if_unmodified_since.as_deref(),
    };

    if let Some(r) = range_value {
        check_range(range::parse(r, len), len);
    }
    let ranged = range::evaluate(range_value, if_range, &v, len);
    check_range(ranged, len);
    if range_value.is_none() {
        assert_eq!(ranged, Ranged::Full);
    }
    if if_range.is_none() {
        assert_eq!(
            ranged,
            range_value.map_or(Ranged::Full, |r| range::parse(r, len))
        );
    }

    let outcome = conditional::evaluate(&c, &v);
    let none = Conditions::default();
    assert_eq!(conditional::evaluate(&none, &v), Outcome::Proceed);
    if c.if_match.is_none() && c.if_none_match == Some(v.etag().as_bytes()) {
        assert_eq!(outcome, Outcome::NotModified);
    }
    if c.if_match == Some(v.etag().as_bytes())
        && c.if_none_match.is_none()
        && c.if_modified_since.is_none()
    {
        assert_eq!(outcome, Outcome::Proceed);
    }
});
