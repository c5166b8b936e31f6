//! A JSON number's text to the nearest double, ties to even, as strtod
//! gives it to uhttpd's json-c. Not core's parser: its tables cost 15 KiB
//! of flash for values JSON-RPC to ubus hardly carries. A quick estimate
//! in floating point, then moved an ulp at a time until the text lies
//! between the midpoints around it, each compared exactly in integers.

use std::cmp::Ordering;

/// Significant digits kept: the exact midpoint between two doubles has at
/// most 767, so the digits past these only tell whether the text is above
/// a midpoint, which one more nonzero digit keeps.
const MAX_DIGITS: usize = 800;

/// The double nearest a JSON number (already checked): infinite past the
/// largest, zero below half the smallest.
pub fn to_f64(text: &[u8]) -> f64 {
    let (negative, t) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let v = match Decimal::parse(t) {
        None => 0.0,
        Some(d) => d.nearest(),
    };
    if negative { -v } else { v }
}

/// `digits × 10^exp10`: digits without leading or trailing zeros.
struct Decimal {
    digits: Vec<u8>,
    exp10: i64,
}

impl Decimal {
    /// None for zero.
    fn parse(t: &[u8]) -> Option<Decimal> {
        let mut digits = Vec::new();
        let (mut exp10, mut point, mut dropped, mut i) = (0i64, false, false, 0);
        while let Some(&b) = t.get(i) {
            match b {
                b'.' => point = true,
                b'0'..=b'9' => {
                    let d = b - b'0';
                    if digits.is_empty() && d == 0 {
                        exp10 -= i64::from(point);
                    } else if digits.len() < MAX_DIGITS {
                        digits.push(d);
                        exp10 -= i64::from(point);
                    } else {
                        dropped |= d != 0;
                        exp10 += i64::from(!point);
                    }
                }
                _ => break,
            }
            i += 1;
        }
        if let Some(e) = t.get(i + 1..) {
            let (sign, e) = match e.split_first() {
                Some((b'-', rest)) => (-1, rest),
                Some((b'+', rest)) => (1, rest),
                _ => (1, e),
            };
            let n = e
                .iter()
                .fold(0i64, |n, &d| (n * 10 + i64::from(d - b'0')).min(100_000));
            exp10 += sign * n;
        }
        if dropped {
            digits.push(1);
            exp10 -= 1;
        }
        while digits.last() == Some(&0) {
            digits.pop();
            exp10 += 1;
        }
        (!digits.is_empty()).then_some(Decimal { digits, exp10 })
    }

    fn nearest(&self) -> f64 {
        // The value is below 10^magnitude and at least a tenth of it.
        let magnitude = self.digits.len() as i64 + self.exp10;
        if magnitude > 309 {
            return f64::INFINITY;
        }
        if magnitude < -323 {
            return 0.0;
        }
        let mut x = self.estimate();
        if x.is_infinite() {
            x = f64::MAX;
        } else if x == 0.0 {
            x = f64::from_bits(1);
        }
        let big = Big::from_digits(&self.digits);
        loop {
            let (m, k, bottom) = parts(x);
            let above = self.compare(&big, 2 * m + 1, k - 1);
            if above == Ordering::Greater || (above == Ordering::Equal && m & 1 == 1) {
                x = f64::from_bits(x.to_bits() + 1);
                if x.is_infinite() {
                    return x;
                }
                continue;
            }
            // At the bottom of a binade the double below is half as far.
            let (low, j) = if bottom {
                (4 * m - 1, k - 2)
            } else {
                (2 * m - 1, k - 1)
            };
            let below = self.compare(&big, low, j);
            if below == Ordering::Less || (below == Ordering::Equal && m & 1 == 1) {
                x = f64::from_bits(x.to_bits() - 1);
                if x == 0.0 {
                    return x;
                }
                continue;
            }
            return x;
        }
    }

    /// Within some ulps: the first 19 digits, scaled by exact powers of ten.
    fn estimate(&self) -> f64 {
        let head = self.digits.len().min(19);
        let m = self.digits[..head]
            .iter()
            .fold(0u64, |m, &d| m * 10 + u64::from(d));
        let mut e = self.exp10 + (self.digits.len() - head) as i64;
        let mut v = m as f64;
        while e > 22 {
            v *= 1e22;
            e -= 22;
        }
        while e < -22 {
            v /= 1e22;
            e += 22;
        }
        let p = (0..e.unsigned_abs()).fold(1.0, |p, _| p * 10.0);
        if e < 0 { v / p } else { v * p }
    }

    /// This value (`big × 10^exp10`) against `h × 2^j`.
    fn compare(&self, big: &Big, h: u64, j: i64) -> Ordering {
        let mut ours = big.clone();
        let mut theirs = Big::from_u64(h);
        if self.exp10 >= 0 {
            ours.mul_pow10(self.exp10.unsigned_abs());
        } else {
            theirs.mul_pow10(self.exp10.unsigned_abs());
        }
        if j >= 0 {
            theirs.shl(j.unsigned_abs());
        } else {
            ours.shl(j.unsigned_abs());
        }
        ours.cmp(&theirs)
    }
}

/// A positive finite double as `m × 2^k`, and whether it is the lowest of
/// its binade with a binade below (the gap under it is then half as wide).
fn parts(x: f64) -> (u64, i64, bool) {
    let bits = x.to_bits();
    let exp = (bits >> 52) as i64;
    let fraction = bits & ((1 << 52) - 1);
    match exp {
        0 => (fraction, -1074, false),
        _ => (fraction | 1 << 52, exp - 1075, fraction == 0 && exp > 1),
    }
}

/// An unsigned integer in base 2^32 limbs, least significant first.
#[derive(Clone)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        Big(vec![v as u32, (v >> 32) as u32])
    }

    fn from_digits(digits: &[u8]) -> Big {
        let mut b = Big(Vec::with_capacity(digits.len() / 9 + 2));
        for chunk in digits.chunks(9) {
            let v = chunk.iter().fold(0u32, |v, &d| v * 10 + u32::from(d));
            b.mul_add(10u32.pow(chunk.len() as u32), v);
        }
        b
    }

    fn mul_add(&mut self, k: u32, add: u32) {
        let mut carry = u64::from(add);
        for l in self.0.iter_mut() {
            let v = u64::from(*l) * u64::from(k) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn mul_pow10(&mut self, mut n: u64) {
        while n >= 9 {
            self.mul_add(1_000_000_000, 0);
            n -= 9;
        }
        self.mul_add(10u32.pow(n as u32), 0);
    }

    fn shl(&mut self, n: u64) {
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        if bits > 0 {
            let mut carry = 0;
            for l in self.0.iter_mut() {
                let v = *l;
                *l = v << bits | carry;
                carry = v >> (32 - bits);
            }
            if carry > 0 {
                self.0.push(carry);
            }
        }
        self.0.splice(0..0, std::iter::repeat_n(0, limbs));
    }

    fn cmp(&self, other: &Big) -> Ordering {
        let len = |b: &Big| b.0.iter().rposition(|&l| l != 0).map_or(0, |i| i + 1);
        let (a, b) = (&self.0[..len(self)], &other.0[..len(other)]);
        a.len()
            .cmp(&b.len())
            .then_with(|| a.iter().rev().cmp(b.iter().rev()))
    }
}

#[cfg(test)]
mod tests {
    use super::to_f64;

    fn same(t: &str) {
        let want = t.parse::<f64>().unwrap();
        let got = to_f64(t.as_bytes());
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{t}: {got:e} against {want:e}"
        );
    }

    #[test]
    fn the_nearest_double_at_the_ends_and_the_midpoints() {
        for t in [
            "0",
            "-0.0",
            "0.1",
            "1e22",
            "-2.5e-3",
            "123.456",
            "1E+2",
            "0.000001",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "1.7976931348623159e308",
            "1e308",
            "8.98846567431158e307",
            "2.2250738585072014e-308",
            "2.2250738585072011e-308",
            "4.9406564584124654e-324",
            "2.4703282292062327e-324",
            "2.4703282292062328e-324",
            "1e-323",
            "9007199254740993",
            "9007199254740995",
            "9007199254740993.0000000000000000000001",
            "3.14159265358979e-100",
            "123456789012345678901234567890e-10",
            "1e999",
            "1e-999",
            "0.0000000000000000000000000000001e330",
        ] {
            same(t);
        }
        // 2^-1075 written out: exactly halfway between 0 and the smallest
        // double, so 0 (even); a digit past it, the smallest.
        let half = "2.4703282292062327208828439643411068618252990130716238221279284125033775363510437593264991818081799618989828234772285886546332835517796989819938739800539093906315035659515570226392290858392449105184435931802849936536152500319370457678249219365623669863658480757001585769269903706311928279558551332927834338409351978015531246597263579574622766465272827220056374006485499977096599470454020828166226237857393450736339007967761930577506740176324673600968951340535537458516661134223766678604162159680461914467291840300530057530849048765391711386591646239524912623653881879636239373280423891018672348497668235089863388587925628302755995657524455507255189313690836254779186948667994968324049705821028513185451396213837722826145437693412532098591327667236328125e-324";
        assert_eq!(to_f64(half.as_bytes()), 0.0);
        let above = format!("{}1e-324", half.trim_end_matches("e-324"));
        assert_eq!(to_f64(above.as_bytes()), 5e-324);
    }

    #[test]
    fn the_nearest_double_for_many_texts() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..3000 {
            let digits = 1 + next() % 25;
            let mantissa: String = (0..digits)
                .map(|_| char::from(b'0' + (next() % 10) as u8))
                .collect();
            let exp = (next() % 700) as i64 - 350;
            same(&format!("{mantissa}e{exp}"));
            same(&format!("0.{mantissa}"));
            // Doubles' own shortest texts, and one digit changed.
            let d = f64::from_bits(next() & !(1 << 63));
            if d.is_finite() {
                let text = format!("{d:e}");
                same(&text);
                same(&text.replacen('e', "1e", 1));
            }
        }
    }
}
