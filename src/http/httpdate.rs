//! HTTP dates (RFC 9110 section 5.6.7): IMF-fixdate out, all three formats in.

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const LEN: usize = 29;

const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Formats seconds since the epoch as an IMF-fixdate.
pub fn format(secs: u64) -> [u8; LEN] {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    two(&mut out[5..7], d);
    out[8..11].copy_from_slice(MONTHS[(m - 1) as usize]);
    let y = y.clamp(0, 9999) as u32;
    two(&mut out[12..14], y / 100);
    two(&mut out[14..16], y % 100);
    two(&mut out[17..19], (rem / 3600) as u32);
    two(&mut out[20..22], (rem / 60 % 60) as u32);
    two(&mut out[23..25], (rem % 60) as u32);
    out
}

fn two(out: &mut [u8], n: u32) {
    out[0] = b'0' + (n / 10 % 10) as u8;
    out[1] = b'0' + (n % 10) as u8;
}

/// Parses IMF-fixdate, RFC 850 and asctime dates; `None` if it is none of them.
pub fn parse(s: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(s).ok()?.trim();
    let mut parts = s.split([' ', ',', '-', ':']).filter(|p| !p.is_empty());
    let _weekday = parts.next()?;
    let a = parts.next()?;
    let (day, month, year, h, mi, se): (u32, u32, i64, u64, u64, u64);
    if a.bytes().all(|b| b.is_ascii_digit()) {
        // IMF-fixdate `06 Nov 1994 08:49:37 GMT` or RFC 850 `06-Nov-94 08:49:37 GMT`.
        day = a.parse().ok()?;
        month = month_index(parts.next()?)?;
        let y: i64 = parts.next()?.parse().ok()?;
        year = if y < 100 {
            if y < 70 { 2000 + y } else { 1900 + y }
        } else {
            y
        };
        h = parts.next()?.parse().ok()?;
        mi = parts.next()?.parse().ok()?;
        se = parts.next()?.parse().ok()?;
        if parts.next()? != "GMT" {
            return None;
        }
    } else {
        // asctime `Nov  6 08:49:37 1994`.
        month = month_index(a)?;
        day = parts.next()?.parse().ok()?;
        h = parts.next()?.parse().ok()?;
        mi = parts.next()?.parse().ok()?;
        se = parts.next()?.parse().ok()?;
        year = parts.next()?.parse().ok()?;
    }
    // All three formats have four-digit years (RFC 850's two are widened above);
    // a longer one would overflow the arithmetic below.
    if parts.next().is_some()
        || year > 9999
        || !(1..=days_in_month(year, month)).contains(&day)
        || h > 23
        || mi > 59
        || se > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if days < 0 {
        return None;
    }
    Some(days as u64 * 86_400 + h * 3600 + mi * 60 + se)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn month_index(name: &str) -> Option<u32> {
    MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(name.as_bytes()))
        .map(|i| i as u32 + 1)
}

// Howard Hinnant's civil calendar algorithms (public domain arithmetic).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_the_rfc_example() {
        assert_eq!(&format(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&format(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&format(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
    }

    #[test]
    fn parses_all_three_formats() {
        for s in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(parse(s.as_bytes()), Some(784_111_777), "{s}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            "yesterday",
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "Tue, 31 Feb 2000 00:00:00 GMT",
            "Mon, 29 Feb 2100 00:00:00 GMT",
            "Sat, 31 Apr 2000 00:00:00 GMT",
            // Found by fuzz/range_conditional: years this long overflowed.
            "99CCC Nov 3 0:4:7 914057405840",
            "Sun, 06 Nov 99999999999999 08:49:37 GMT",
            "Sun, 06 Nov 9223372036854775807 08:49:37 GMT",
            "Sun, 06 Nov 10000 08:49:37 GMT",
        ] {
            assert_eq!(parse(s.as_bytes()), None, "{s}");
        }
    }

    #[test]
    fn round_trips() {
        for t in [
            0u64,
            1,
            86_399,
            1_700_000_000,
            4_102_444_800,
            253_402_300_799,
        ] {
            assert_eq!(parse(&format(t)), Some(t));
        }
    }
}
