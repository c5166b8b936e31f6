//! `memcpy` and `bcmp` for the MIPS builds. The ones their linker (zig)
//! brings are slow there: its `memcpy` copies one word per loop turn with
//! unaligned stores, six instructions a word, and has no case for two
//! word-aligned ends, which is what moving a value is (96 bytes cost it
//! about 170 instructions); its `bcmp` compares a byte per seven. A
//! keep-alive request on mipsel spent nearly a fifth of its instructions
//! in them (ARCHITECTURE.md, "MIPS: memcpy"). Here a copy stores aligned
//! words, four a turn, loaded aligned when the source allows it and as
//! `lwl`/`lwr` pairs when not; a comparison takes a word at a time.
//!
//! No loop here copies one element per turn: LLVM would recognise such a
//! loop as a copy and turn it into a call of `memcpy`, this function.

const WORD: usize = size_of::<u32>();

/// Copies `n` bytes from `src` to `dst`.
///
/// # Safety
/// As `memcpy`: `src` readable and `dst` writable for `n` bytes, and the
/// two either the same or not overlapping.
pub unsafe fn copy(dst: *mut u8, src: *const u8, n: usize) {
    if n < 2 * WORD {
        // SAFETY: the caller's.
        unsafe { short(dst, src, n) };
        return;
    }
    // Up to three bytes, so that the stores below are aligned.
    let lead = (dst as usize).wrapping_neg() & (WORD - 1);
    // SAFETY: `lead` < 4 <= `n`, within both ranges. The pointers after
    // it stay within (or one past) them, `d` aligned; the loops read and
    // write only below `n`, the last bytes as one word ending at `n`
    // (`n` >= 8, so it starts within the ranges).
    unsafe {
        short(dst, src, lead);
        let d = dst.add(lead).cast::<u32>();
        let s = src.add(lead);
        let left = n - lead;
        let done = if s.addr() % WORD == 0 {
            words(d, s.cast::<u32>(), left, |p| p.read())
        } else {
            words(d, s.cast::<u32>(), left, |p| p.read_unaligned())
        };
        if done < left {
            let end = n - WORD;
            let last = src.add(end).cast::<u32>().read_unaligned();
            dst.add(end).cast::<u32>().write_unaligned(last);
        }
    }
}

/// Copies the whole words of `len` bytes to the aligned `d`, reading each
/// with `load`; returns the bytes copied (`len` rounded down to a word).
///
/// # Safety
/// `d` aligned and both ranges valid for `len` bytes.
#[inline(always)]
unsafe fn words(
    mut d: *mut u32,
    mut s: *const u32,
    len: usize,
    load: impl Fn(*const u32) -> u32,
) -> usize {
    let mut left = len;
    // SAFETY: every access is below `len` bytes from the start.
    unsafe {
        while left >= 4 * WORD {
            let (a, b, c, e) = (load(s), load(s.add(1)), load(s.add(2)), load(s.add(3)));
            d.write(a);
            d.add(1).write(b);
            d.add(2).write(c);
            d.add(3).write(e);
            d = d.add(4);
            s = s.add(4);
            left -= 4 * WORD;
        }
        if left >= 2 * WORD {
            let (a, b) = (load(s), load(s.add(1)));
            d.write(a);
            d.add(1).write(b);
            d = d.add(2);
            s = s.add(2);
            left -= 2 * WORD;
        }
        if left >= WORD {
            d.write(load(s));
            left -= WORD;
        }
    }
    len - left
}

/// Copies fewer than eight bytes.
///
/// # Safety
/// As `copy`, with `n` < 8.
#[inline(always)]
unsafe fn short(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: every offset is below `n`.
    unsafe {
        if n >= WORD {
            // Two words, overlapping when `n` < 8.
            let a = src.cast::<u32>().read_unaligned();
            let b = src.add(n - WORD).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(a);
            dst.add(n - WORD).cast::<u32>().write_unaligned(b);
        } else if n > 0 {
            // One to three bytes: the first, the middle and the last.
            let (a, b, c) = (src.read(), src.add(n / 2).read(), src.add(n - 1).read());
            dst.write(a);
            dst.add(n / 2).write(b);
            dst.add(n - 1).write(c);
        }
    }
}

/// Whether the `n` bytes at `a` and at `b` differ.
///
/// # Safety
/// Both readable for `n` bytes.
pub unsafe fn differ(a: *const u8, b: *const u8, n: usize) -> bool {
    let word = |at: usize| {
        // SAFETY: the caller's; `at` + 4 <= `n` at every call.
        unsafe {
            a.add(at).cast::<u32>().read_unaligned() != b.add(at).cast::<u32>().read_unaligned()
        }
    };
    if n < WORD {
        // One to three bytes: the first, the middle and the last are all.
        // SAFETY: every offset is below `n`.
        return n > 0
            && unsafe {
                a.read() != b.read()
                    || a.add(n / 2).read() != b.add(n / 2).read()
                    || a.add(n - 1).read() != b.add(n - 1).read()
            };
    }
    let mut at = 0;
    while at + WORD <= n {
        if word(at) {
            return true;
        }
        at += WORD;
    }
    // The last bytes as one word ending at `n`.
    at < n && word(n - WORD)
}

// SAFETY: takes the place of the C library's function of this name, with
// its C signature and contract (`copy`'s).
#[cfg(target_arch = "mips")]
#[unsafe(no_mangle)]
unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's, as for `memcpy`.
    unsafe { copy(dst, src, n) };
    dst
}

// SAFETY: takes the place of the C library's function of this name, with
// its C signature and contract (`differ`'s).
#[cfg(target_arch = "mips")]
#[unsafe(no_mangle)]
// Slice compares call it by name: inlined into each, it cost 6 KB.
#[inline(never)]
unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the caller's, as for `bcmp`.
    i32::from(unsafe { differ(a, b, n) })
}

#[cfg(test)]
mod tests {
    use super::{copy, differ};

    /// Every length to 80 between every pair of alignments: the bytes
    /// land, and none beside them is touched.
    #[test]
    fn copies_exactly() {
        let src: Vec<u8> = (0..100u8)
            .map(|i| i.wrapping_mul(7).wrapping_add(1))
            .collect();
        for from in 0..8 {
            for to in 0..8 {
                for n in 0..80 {
                    let mut dst = vec![0xee_u8; 100];
                    // SAFETY: both ranges within their vectors, apart.
                    unsafe { copy(dst.as_mut_ptr().add(to), src.as_ptr().add(from), n) };
                    assert!(dst[..to].iter().all(|&b| b == 0xee), "{from} {to} {n}");
                    assert_eq!(dst[to..to + n], src[from..from + n], "{from} {to} {n}");
                    assert!(dst[to + n..].iter().all(|&b| b == 0xee), "{from} {to} {n}");
                }
            }
        }
    }

    #[test]
    fn same_source_and_destination() {
        let mut buf: Vec<u8> = (0..64u8).collect();
        let p = buf.as_mut_ptr();
        // SAFETY: the same range, which `memcpy` callers may pass.
        unsafe { copy(p.add(3), p.add(3), 50) };
        assert_eq!(buf, (0..64u8).collect::<Vec<_>>());
    }

    /// Every length to 40 at every pair of alignments, equal and with one
    /// byte changed at each place.
    #[test]
    fn compares_every_byte() {
        let a: Vec<u8> = (0..60u8).collect();
        for from in 0..4 {
            for to in 0..4 {
                for n in 0..40 {
                    let mut b = [0u8; 60];
                    b[to..to + n].copy_from_slice(&a[from..from + n]);
                    let (pa, pb) = (a[from..].as_ptr(), b[to..].as_ptr());
                    // SAFETY: `n` bytes from either start are within its vector.
                    assert!(!unsafe { differ(pa, pb, n) }, "{from} {to} {n}");
                    for k in 0..n {
                        b[to + k] ^= 0x10;
                        let pb = b[to..].as_ptr();
                        // SAFETY: as above.
                        assert!(unsafe { differ(pa, pb, n) }, "{from} {to} {n} {k}");
                        b[to + k] ^= 0x10;
                    }
                }
            }
        }
    }
}
