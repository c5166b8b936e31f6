//! Decoding a chunked request body (RFC 9112 section 7.1), byte-exact so
//! that a pipelined request after it stays intact, and framing data as a
//! chunk. Pure: bytes in, data out. The decoder counts what a body limit
//! is held against: data, chunk extensions and trailer fields.

use crate::limits::{MAX_CHUNK_LINE, MAX_TRAILERS};
use Refused::Malformed;

/// Hex digits in a chunk size: 15 keep it below 2^60, far above any body limit.
const MAX_DIGITS: u8 = 15;

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Reading the hex size; `digits` so far (the value is in `Decoder::size`).
    Size {
        digits: u8,
    },
    /// Chunk extensions (RFC 9112 section 7.1.1), checked, then ignored:
    /// after `;` (optional whitespace, then a name)...
    ExtStart,
    ExtName,
    /// ...after the name (whitespace, then `=`, `;` or the CR)...
    ExtAfterName,
    /// ...after `=` (whitespace, then a token or a quoted string)...
    ExtValueStart,
    ExtToken,
    ExtQuoted,
    ExtQuotedEscape,
    /// ...after a value (whitespace, then `;` or the CR).
    ExtAfterValue,
    /// Whitespace after the size: only a `;` may follow (BWS before an extension).
    SizeBws,
    /// After the size line's CR.
    SizeLf,
    /// Inside chunk data, `left` bytes to go.
    Data {
        left: u64,
    },
    /// After chunk data: CR, then LF.
    DataCr,
    DataLf,
    /// After the last chunk: trailer lines until an empty one.
    TrailerStart,
    Trailer,
    TrailerLf {
        empty: bool,
    },
    Done,
}

/// Why a chunked body is refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refused {
    /// The framing does not parse: 400.
    Malformed,
    /// The trailer section is longer than `MAX_TRAILERS`: 413.
    TrailersTooLarge,
}

/// Appends `data` as one chunk; nothing for no data (an empty chunk would
/// end the body).
pub fn push_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let mut size = [0u8; 16];
    let mut i = size.len();
    let mut n = data.len();
    loop {
        i -= 1;
        size[i] = b"0123456789abcdef"[n & 15];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&size[i..]);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// A byte that leads to this state is an extension's (or whitespace
/// before one) or a trailer field's. What is left out, a chunk's size
/// digits and line ends, is at most 19 bytes per chunk of at least one
/// counted byte; the empty line that ends a body is framing too.
fn is_counted(state: State) -> bool {
    use State::*;
    matches!(
        state,
        SizeBws
            | ExtStart
            | ExtName
            | ExtAfterName
            | ExtValueStart
            | ExtToken
            | ExtQuoted
            | ExtQuotedEscape
            | ExtAfterValue
            | Trailer
            | TrailerLf { empty: false }
    )
}

/// A token character (RFC 9110 section 5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

pub struct Decoder {
    state: State,
    size: u64,
    line: usize,
    /// Data, extension and trailer bytes so far.
    counted: u64,
    /// Bytes of the trailer section so far.
    trailers: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            state: State::Size { digits: 0 },
            size: 0,
            line: 0,
            counted: 0,
            trailers: 0,
        }
    }
}

impl Decoder {
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The body's size as a limit counts it: chunk data, and the chunk
    /// extensions and trailer fields that come with it, so that neither
    /// carries an unlimited amount past the limit. Only the bare framing
    /// (sizes and line ends) is left out.
    pub fn counted(&self) -> u64 {
        self.counted
    }

    /// Consumes from `input`, appending body data to `out`. Returns how many
    /// input bytes were used; stops right after the end of the body.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, Refused> {
        let mut i = 0;
        while i < input.len() && self.state != State::Done {
            if let State::Data { left } = self.state {
                let take = left.min((input.len() - i) as u64) as usize;
                out.extend_from_slice(&input[i..i + take]);
                i += take;
                self.counted += take as u64;
                let left = left - take as u64;
                self.state = if left == 0 {
                    State::DataCr
                } else {
                    State::Data { left }
                };
                continue;
            }
            // A trailer line is held only to the section's limit (413, as
            // a too-large body): one long field is as large a section as
            // many short ones. Nothing of it is kept, so its length costs
            // no memory.
            if matches!(
                self.state,
                State::TrailerStart | State::Trailer | State::TrailerLf { .. }
            ) {
                self.trailers += 1;
                if self.trailers > MAX_TRAILERS {
                    return Err(Refused::TrailersTooLarge);
                }
            } else {
                self.line += 1;
                if self.line > MAX_CHUNK_LINE {
                    return Err(Malformed);
                }
            }
            self.state = self.step(input[i])?;
            if is_counted(self.state) {
                self.counted += 1;
            }
            i += 1;
        }
        Ok(i)
    }

    fn step(&mut self, b: u8) -> Result<State, Refused> {
        use State::*;
        Ok(match (self.state, b) {
            (Size { digits }, b) if b.is_ascii_hexdigit() => {
                if digits == MAX_DIGITS {
                    return Err(Malformed);
                }
                self.size = self.size << 4 | u64::from((b as char).to_digit(16).unwrap_or(0));
                Size { digits: digits + 1 }
            }
            (Size { digits }, b';') if digits > 0 => ExtStart,
            (Size { digits }, b' ' | b'\t') if digits > 0 => SizeBws,
            (SizeBws, b' ' | b'\t') => SizeBws,
            (SizeBws, b';') => ExtStart,
            (Size { digits }, b'\r') if digits > 0 => SizeLf,
            (ExtStart, b' ' | b'\t') => ExtStart,
            (ExtStart | ExtName, b) if is_tchar(b) => ExtName,
            (ExtName | ExtAfterName, b' ' | b'\t') => ExtAfterName,
            (ExtName | ExtAfterName, b'=') => ExtValueStart,
            (ExtName | ExtAfterName | ExtAfterValue, b';') => ExtStart,
            (ExtName | ExtAfterName | ExtAfterValue, b'\r') => SizeLf,
            (ExtValueStart, b' ' | b'\t') => ExtValueStart,
            (ExtValueStart, b'"') => ExtQuoted,
            (ExtValueStart | ExtToken, b) if is_tchar(b) => ExtToken,
            (ExtToken | ExtAfterValue, b' ' | b'\t') => ExtAfterValue,
            (ExtToken, b';') => ExtStart,
            (ExtToken, b'\r') => SizeLf,
            (ExtQuoted, b'"') => ExtAfterValue,
            (ExtQuoted, b'\\') => ExtQuotedEscape,
            (ExtQuoted, b) if b == b'\t' || b == b' ' || (0x21..0x7f).contains(&b) || b >= 0x80 => {
                ExtQuoted
            }
            (ExtQuotedEscape, b) if b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80 => {
                ExtQuoted
            }
            (SizeLf, b'\n') => {
                self.line = 0;
                let size = std::mem::take(&mut self.size);
                if size == 0 {
                    TrailerStart
                } else {
                    Data { left: size }
                }
            }
            (DataCr, b'\r') => DataLf,
            (DataLf, b'\n') => {
                self.line = 0;
                Size { digits: 0 }
            }
            (TrailerStart, b'\r') => TrailerLf { empty: true },
            (Trailer, b'\r') => TrailerLf { empty: false },
            (TrailerStart | Trailer, b) if b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80 => {
                Trailer
            }
            (TrailerLf { empty: true }, b'\n') => Done,
            (TrailerLf { empty: false }, b'\n') => {
                self.line = 0;
                TrailerStart
            }
            _ => return Err(Malformed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushed_chunks_decode_to_their_data() {
        let mut framed = Vec::new();
        push_chunk(&mut framed, b"");
        assert!(framed.is_empty(), "no empty chunk: it would end the body");
        let big = vec![b'x'; 0x1234];
        push_chunk(&mut framed, b"abc");
        push_chunk(&mut framed, &big);
        assert!(framed.starts_with(b"3\r\nabc\r\n1234\r\n"));
        framed.extend_from_slice(b"0\r\n\r\n");
        let (mut d, mut out) = (Decoder::default(), Vec::new());
        assert_eq!(d.feed(&framed, &mut out), Ok(framed.len()));
        assert!(d.is_done());
        assert_eq!(out.len(), 3 + big.len());
    }

    fn decode(input: &[u8]) -> Result<(Vec<u8>, usize), Refused> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        let used = d.feed(input, &mut out)?;
        assert!(
            d.is_done(),
            "incomplete: {:?}",
            String::from_utf8_lossy(input)
        );
        Ok((out, used))
    }

    #[test]
    fn decodes_and_stops_at_the_end() {
        let input =
            b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\nGET / HTTP/1.1\r\n";
        let (out, used) = decode(input).unwrap();
        assert_eq!(out, b"hello, world");
        assert_eq!(&input[used..], b"GET / HTTP/1.1\r\n");
        assert_eq!(decode(b"0\r\n\r\n").unwrap().0, b"");
        assert_eq!(
            decode(b"A\r\n0123456789\r\n0\r\n\r\n").unwrap().0,
            b"0123456789"
        );
    }

    #[test]
    fn byte_by_byte_gives_the_same() {
        let input = b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for b in input {
            assert_eq!(d.feed(std::slice::from_ref(b), &mut out), Ok(1));
        }
        assert!(d.is_done());
        assert_eq!(out, b"abcde");
    }

    #[test]
    fn extensions_and_trailers_count_and_trailers_are_capped() {
        let mut d = Decoder::default();
        let input = b"3 ;name=value\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(d.feed(input, &mut Vec::new()), Ok(input.len()));
        // abc, ` ;name=value` and `X-T: 1` with its CR; no line end else.
        assert_eq!(d.counted(), 3 + 12 + 7);
        let mut d = Decoder::default();
        d.feed(b"2\r\nab\r\n0\r\n\r\n", &mut Vec::new()).unwrap();
        assert_eq!(d.counted(), 2, "an empty trailer section is framing");
        let line = "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        let mut trailers = String::from("0\r\n");
        while trailers.len() <= MAX_TRAILERS + 4 {
            trailers.push_str(line);
        }
        assert_eq!(
            Decoder::default().feed(trailers.as_bytes(), &mut Vec::new()),
            Err(Refused::TrailersTooLarge)
        );
        // One field longer than the section's limit is as large a section.
        let one = format!("0\r\nX-Pad: {}\r\n\r\n", "p".repeat(9 * 1024));
        assert_eq!(
            Decoder::default().feed(one.as_bytes(), &mut Vec::new()),
            Err(Refused::TrailersTooLarge)
        );
        // A field longer than a chunk-size line may be, within the section's.
        let long = format!("0\r\nX-Pad: {}\r\n\r\n", "p".repeat(MAX_CHUNK_LINE + 100));
        assert_eq!(
            Decoder::default().feed(long.as_bytes(), &mut Vec::new()),
            Ok(long.len())
        );
    }

    #[test]
    fn refuses_malformed_bodies() {
        for bad in [
            &b"x\r\n"[..],
            b"\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"5\r\nhelloXX0\r\n\r\n",
            b"-5\r\nhello\r\n",
            b"0x5\r\nhello\r\n",
            b"ffffffffffffffffff\r\n",
            b"5 \r\nhello\r\n",
            b"0\r\nX: a\nb\r\n\r\n",
            b"1;a\0b\r\nx\r\n",
            b"1;\r\nx\r\n0\r\n\r\n",
            b"1;a=\"b\r\nx\r\n0\r\n\r\n",
            b"1;=b\r\nx\r\n0\r\n\r\n",
            b"1;a=\r\nx\r\n0\r\n\r\n",
            b"1;a b\r\nx\r\n0\r\n\r\n",
        ] {
            let mut d = Decoder::default();
            assert_eq!(
                d.feed(bad, &mut Vec::new()),
                Err(Malformed),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = format!("1;{}\r\n", "e".repeat(MAX_CHUNK_LINE));
        assert_eq!(
            Decoder::default().feed(long.as_bytes(), &mut Vec::new()),
            Err(Malformed)
        );
    }
}
