//! Header lines as a head carries them (`\r\nName: value`), and how a
//! set of rule lines is applied to a response's own lines.

/// A header line as a head carries it, `\r\nName: value`, copied in one
/// piece. The server's own lines are consts (`HeaderLine::new` checks them
/// when compiling); a config rule's line is a `RuleLine`, made from a name
/// and a value, so no line can lack its CRLF.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeaderLine(&'static str);

impl HeaderLine {
    pub const fn new(line: &'static str) -> HeaderLine {
        let b = line.as_bytes();
        assert!(b.len() > 2 && b[0] == b'\r' && b[1] == b'\n');
        HeaderLine(line)
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// Whether this is a `name` header (ASCII case ignored).
    pub fn is_named(self, name: &str) -> bool {
        self.0
            .as_bytes()
            .get(2..)
            .and_then(|l| l.get(..=name.len()))
            .is_some_and(|l| {
                l[name.len()] == b':' && l[..name.len()].eq_ignore_ascii_case(name.as_bytes())
            })
    }
}

/// A config rule's header line, owned by the config.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleLine(String);

impl RuleLine {
    pub fn new(name: &str, value: &str) -> RuleLine {
        RuleLine(format!("\r\n{name}: {value}"))
    }

    /// The line as a head carries it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The header's name.
    pub fn name(&self) -> &str {
        let line = self.0.get(2..).unwrap_or_default();
        line.split_once(':').map_or(line, |(n, _)| n)
    }

    /// The value, after `Name: `.
    pub fn value(&self) -> &str {
        self.0.split_once(": ").map_or("", |(_, v)| v)
    }
}

pub const NO_CACHE: HeaderLine = HeaderLine::new("\r\nCache-Control: no-cache");
pub const VARY_ENCODING: HeaderLine = HeaderLine::new("\r\nVary: Accept-Encoding");
pub const GZIP: HeaderLine = HeaderLine::new("\r\nContent-Encoding: gzip");
pub const BROTLI: HeaderLine = HeaderLine::new("\r\nContent-Encoding: br");
/// A 503 for want of a CGI slot: they free up within seconds.
pub const RETRY_SOON: HeaderLine = HeaderLine::new("\r\nRetry-After: 5");
/// A 429 to a client held back after failed logins: the rest of its
/// window (`AUTH_FAIL_WINDOW`) at most.
pub const RETRY_AFTER_LOGINS: HeaderLine = HeaderLine::new("\r\nRetry-After: 60");

/// What the rules one path matches do to a response, worked out once per
/// file: its Cache-Control line, the names whose lines the rules replace or
/// remove, and the lines they add, in order.
#[derive(Debug, Default)]
pub struct RuleLines {
    /// Its own copies: these outlive the configuration they come from
    /// when a reload replaces it.
    names: Vec<Box<str>>,
    /// The Cache-Control line, then the rules' lines, joined: one copy into
    /// the head (each copy is a libc memcpy call).
    text: String,
    /// Length of the Cache-Control line at the start of `text` (0: none,
    /// or a header rule names Cache-Control itself).
    cache_control_len: usize,
}

impl RuleLines {
    /// The lines of a set of rules: the names they replace or remove, the
    /// Cache-Control line (if one applies), then the lines they add.
    pub fn new(
        names: Vec<&str>,
        cache_control: Option<&RuleLine>,
        lines: &[&RuleLine],
    ) -> RuleLines {
        let cc = cache_control.map_or("", RuleLine::as_str);
        let mut text = String::from(cc);
        lines.iter().for_each(|l| text.push_str(l.as_str()));
        RuleLines {
            names: names.into_iter().map(Box::from).collect(),
            text,
            cache_control_len: cc.len(),
        }
    }

    /// Writes a response's own header lines with the rules applied: its
    /// lines the rules name go, the Cache-Control line comes next (for a file,
    /// unless the response set one), then the rules' lines.
    pub fn write(&self, out: &mut Vec<u8>, own: &[HeaderLine], is_file: bool) {
        let mut own_cache_control = false;
        for line in own {
            if !self.names.iter().any(|n| line.is_named(n)) {
                own_cache_control |= line.is_named("Cache-Control");
                out.extend_from_slice(line.as_str().as_bytes());
            }
        }
        let from = if is_file && !own_cache_control {
            0
        } else {
            self.cache_control_len
        };
        out.extend_from_slice(self.text.as_bytes().get(from..).unwrap_or_default());
    }
}

pub fn header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
}

/// Decimal digits without going through `fmt`.
pub fn push_num(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}
