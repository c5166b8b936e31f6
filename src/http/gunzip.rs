//! Streams a `.gz` file out decompressed, for the rare client that does not
//! accept gzip when a flash-saving tree ships only `X.gz`. Memory: one inflate
//! state (about 43 KiB) and an 8 KiB input buffer per such response, and at
//! most `MAX_INFLATING` such responses at once in a process: a stream needs
//! an `Inflation`, of which there are no more.

use std::cell::Cell;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::rc::Rc;

use miniz_oxide::inflate::stream::{InflateState, inflate};
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};

use crate::limits::MAX_INFLATING;

thread_local! {
    /// Inflations under way in this process (a worker is one thread),
    /// whatever its generation.
    static INFLATING: Cell<usize> = const { Cell::new(0) };
}

/// One of the process's `MAX_INFLATING` inflations, given back when dropped.
pub struct Inflation(());

impl Inflation {
    /// One, or `None` when all are under way.
    pub fn take() -> Option<Inflation> {
        INFLATING.with(|n| {
            let taken = n.get();
            (taken < MAX_INFLATING).then(|| {
                n.set(taken + 1);
                Inflation(())
            })
        })
    }
}

impl Drop for Inflation {
    fn drop(&mut self) {
        INFLATING.with(|n| n.set(n.get() - 1));
    }
}

pub struct Gunzip {
    file: Rc<File>,
    /// Next compressed byte to read.
    pos: u64,
    /// Where the deflate data ends (the 8-byte trailer follows).
    end: u64,
    state: Box<InflateState>,
    input: Box<[u8; 8192]>,
    start: usize,
    filled: usize,
    done: bool,
    _inflation: Inflation,
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("gzip: {what}"))
}

impl Gunzip {
    /// Checks the gzip header; returns the stream and the uncompressed size
    /// from the trailer (ISIZE, exact below 4 GiB).
    pub fn open(file: Rc<File>, len: u64, inflation: Inflation) -> io::Result<(Gunzip, u64)> {
        if len < 18 {
            return Err(invalid("too short"));
        }
        let mut trailer = [0u8; 4];
        file.read_exact_at(&mut trailer, len - 4)?;
        let size = u64::from(u32::from_le_bytes(trailer));
        let data_start = header_len(&file, len)?;
        let g = Gunzip {
            file,
            pos: data_start,
            end: len - 8,
            state: InflateState::new_boxed(DataFormat::Raw),
            input: Box::new([0; 8192]),
            start: 0,
            filled: 0,
            done: false,
            _inflation: inflation,
        };
        Ok((g, size))
    }

    /// Decompresses into `out`; `Ok(0)` at the end of the stream.
    pub fn fill(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while !self.done {
            if self.start == self.filled && self.pos < self.end {
                let want = ((self.end - self.pos) as usize).min(self.input.len());
                let n = self.file.read_at(&mut self.input[..want], self.pos)?;
                if n == 0 {
                    return Err(invalid("file shrank while being sent"));
                }
                self.pos += n as u64;
                self.start = 0;
                self.filled = n;
            }
            let r = inflate(
                &mut self.state,
                &self.input[self.start..self.filled],
                out,
                MZFlush::None,
            );
            self.start += r.bytes_consumed;
            match r.status {
                Ok(MZStatus::StreamEnd) => self.done = true,
                Ok(_) => {}
                Err(MZError::Buf) if self.start == self.filled && self.pos < self.end => {}
                Err(_) => return Err(invalid("corrupt data")),
            }
            if r.bytes_written > 0 {
                return Ok(r.bytes_written);
            }
            if !self.done && self.start == self.filled && self.pos >= self.end {
                return Err(invalid("truncated"));
            }
        }
        Ok(0)
    }
}

/// Length of the gzip member header (RFC 1952 section 2.3).
fn header_len(file: &File, len: u64) -> io::Result<u64> {
    let mut fixed = [0u8; 10];
    file.read_exact_at(&mut fixed, 0)?;
    if fixed[0] != 0x1f || fixed[1] != 0x8b || fixed[2] != 8 {
        return Err(invalid("not a gzip file"));
    }
    let flags = fixed[3];
    let mut pos = 10u64;
    if flags & 0x04 != 0 {
        let mut xlen = [0u8; 2];
        file.read_exact_at(&mut xlen, pos)?;
        pos += 2 + u64::from(u16::from_le_bytes(xlen));
    }
    for bit in [0x08, 0x10] {
        // FNAME, FCOMMENT: zero-terminated.
        if flags & bit != 0 {
            pos = skip_zero_terminated(file, pos, len)?;
        }
    }
    if flags & 0x02 != 0 {
        pos += 2;
    }
    if pos + 8 > len {
        return Err(invalid("header runs past the end"));
    }
    Ok(pos)
}

fn skip_zero_terminated(file: &File, mut pos: u64, len: u64) -> io::Result<u64> {
    let mut chunk = [0u8; 256];
    while pos < len {
        let n = file.read_at(&mut chunk, pos)?;
        if n == 0 {
            break;
        }
        if let Some(i) = chunk[..n].iter().position(|&b| b == 0) {
            return Ok(pos + i as u64 + 1);
        }
        pos += n as u64;
    }
    Err(invalid("unterminated name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8], name: bool) -> File {
        let dir =
            std::env::temp_dir().join(format!("marmoset-gunzip-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plain = dir.join("file.txt");
        std::fs::File::create(&plain)
            .unwrap()
            .write_all(data)
            .unwrap();
        let flag = if name { "-N" } else { "-n" };
        assert!(
            std::process::Command::new("gzip")
                .args(["-f", "-9", flag])
                .arg(&plain)
                .status()
                .unwrap()
                .success()
        );
        let file = File::open(dir.join("file.txt.gz")).unwrap();
        // The open file outlives its name: nothing is left in the temp dir.
        std::fs::remove_dir_all(&dir).unwrap();
        file
    }

    #[test]
    fn round_trips_with_and_without_a_name() {
        let data: Vec<u8> = (0..300_000u32)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        for name in [false, true] {
            let f = gz(&data, name);
            let len = f.metadata().unwrap().len();
            let (mut g, size) = Gunzip::open(Rc::new(f), len, Inflation::take().unwrap()).unwrap();
            assert_eq!(size, data.len() as u64);
            let mut out = Vec::new();
            let mut buf = [0u8; 16384];
            loop {
                let n = g.fill(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            assert_eq!(out, data);
        }
    }

    #[test]
    fn refuses_what_is_not_gzip() {
        let path = std::env::temp_dir().join(format!("marmoset-notgz-{}", std::process::id()));
        std::fs::write(&path, b"this is plain text, not gzip at all").unwrap();
        let f = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(Gunzip::open(Rc::new(f), 35, Inflation::take().unwrap()).is_err());
    }

    #[test]
    fn at_most_max_inflating_at_once() {
        let held: Vec<Inflation> = (0..MAX_INFLATING)
            .map_while(|_| Inflation::take())
            .collect();
        assert_eq!(held.len(), MAX_INFLATING);
        assert!(Inflation::take().is_none());
        drop(held);
        assert!(Inflation::take().is_some(), "given back");
    }
}
