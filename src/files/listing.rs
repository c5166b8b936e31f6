//! Directory listings (off by default): sorted, hidden files left out,
//! names HTML-escaped, links percent-encoded.

use std::fmt::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::http::httpdate;
use crate::http::path;
use crate::limits::MAX_LISTED;

struct Entry {
    name: String,
    dir: bool,
    size: u64,
    mtime: u64,
}

/// Renders the listing of directory `dir`; `url_path` is its clean path
/// relative to the root ("" for the root). Uses std's readdir64 wrappers:
/// 32-bit programs reading a 64-bit filesystem need them.
pub fn render(dir: &Path, url_path: &str) -> std::io::Result<Vec<u8>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue; // Not UTF-8: cannot be requested either.
        };
        if name.starts_with('.') {
            continue;
        }
        // DirEntry::metadata does not follow symlinks.
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        entries.push(Entry {
            name,
            dir: meta.is_dir(),
            size: meta.len(),
            mtime: meta.mtime().max(0) as u64,
        });
    }
    entries.sort_by(|a, b| b.dir.cmp(&a.dir).then_with(|| a.name.cmp(&b.name)));
    let unlisted = entries.len().saturating_sub(MAX_LISTED);
    entries.truncate(MAX_LISTED);
    Ok(page(url_path, &entries, unlisted).into_bytes())
}

fn page(url_path: &str, entries: &[Entry], unlisted: usize) -> String {
    let mut title = String::from("/");
    if !url_path.is_empty() {
        title.push_str(url_path);
        title.push('/');
    }
    let mut html = String::with_capacity(512 + entries.len() * 160);
    html.push_str("<!DOCTYPE html>\n<meta charset=\"utf-8\">\n<title>Index of ");
    escape_into(&mut html, &title);
    html.push_str("</title>\n<style>body{font-family:sans-serif}td{padding:0 1em}td+td{text-align:right}</style>\n<h1>Index of ");
    escape_into(&mut html, &title);
    html.push_str("</h1>\n<table>\n<tr><th>Name</th><th>Size</th><th>Modified</th></tr>\n");
    if !url_path.is_empty() {
        html.push_str("<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    }
    for e in entries {
        let mut href = String::new();
        path::encode_into(&mut href, &e.name);
        // A name with `:` must not read as a URL scheme.
        let href = if href.contains(':') {
            format!("./{href}")
        } else {
            href
        };
        let slash = if e.dir { "/" } else { "" };
        html.push_str("<tr><td><a href=\"");
        escape_into(&mut html, &href);
        html.push_str(slash);
        html.push_str("\">");
        escape_into(&mut html, &e.name);
        html.push_str(slash);
        html.push_str("</a></td><td>");
        if !e.dir {
            let _ = write!(html, "{}", e.size);
        }
        html.push_str("</td><td>");
        html.push_str(&String::from_utf8_lossy(&httpdate::format(e.mtime)));
        html.push_str("</td></tr>\n");
    }
    html.push_str("</table>\n");
    if unlisted > 0 {
        let _ = writeln!(html, "<p>{unlisted} more not listed.</p>");
    }
    html
}

fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_names_and_encodes_links() {
        let entries = [
            Entry {
                name: "sub".into(),
                dir: true,
                size: 0,
                mtime: 0,
            },
            Entry {
                name: "<b>&\"x y\".txt".into(),
                dir: false,
                size: 12,
                mtime: 0,
            },
            Entry {
                name: "javascript:alert(1)".into(),
                dir: false,
                size: 1,
                mtime: 0,
            },
        ];
        let html = page("a<b", &entries, 0);
        assert!(html.contains("<title>Index of /a&lt;b/</title>"));
        assert!(html.contains("<a href=\"sub/\">sub/</a>"));
        assert!(html.contains("href=\"%3Cb%3E&amp;%22x%20y%22.txt\">&lt;b&gt;&amp;&quot;x y&quot;.txt</a></td><td>12</td>"), "{html}");
        assert!(html.contains("href=\"./javascript:alert(1)\""), "{html}");
        assert!(html.contains("<a href=\"../\">"));
    }
}
