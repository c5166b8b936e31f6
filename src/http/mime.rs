//! Content-Type by file extension.

const TABLE: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("map", "application/json"),
    ("webmanifest", "application/manifest+json"),
    ("txt", "text/plain; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("xml", "text/xml; charset=utf-8"),
    ("svg", "image/svg+xml"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("ico", "image/x-icon"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("ttf", "font/ttf"),
    ("otf", "font/otf"),
    ("wasm", "application/wasm"),
    ("pdf", "application/pdf"),
    ("gz", "application/gzip"),
    ("br", "application/octet-stream"),
    ("tar", "application/x-tar"),
    ("zip", "application/zip"),
    ("mp4", "video/mp4"),
    ("webm", "video/webm"),
    ("mp3", "audio/mpeg"),
    ("bin", "application/octet-stream"),
];

pub const DEFAULT: &str = "application/octet-stream";

/// The Content-Type for a file name, by its last extension, ignoring case.
pub fn for_name(name: &str) -> &'static str {
    let Some((_, ext)) = name.rsplit_once('.') else {
        return DEFAULT;
    };
    TABLE
        .iter()
        .find(|(e, _)| e.eq_ignore_ascii_case(ext))
        .map_or(DEFAULT, |(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::for_name;

    #[test]
    fn knows_the_web_types() {
        assert_eq!(for_name("index.html"), "text/html; charset=utf-8");
        assert_eq!(
            for_name("app.3f2a9c1b.JS"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(for_name("a/b.woff2"), "font/woff2");
        assert_eq!(for_name("site.webmanifest"), "application/manifest+json");
        assert_eq!(for_name("intro.mp4"), "video/mp4");
        assert_eq!(for_name("README"), "application/octet-stream");
        assert_eq!(for_name("x.unknown"), "application/octet-stream");
    }

    /// CONFIGURATION.md lists the extensions with a type of their own.
    #[test]
    fn the_documented_list_is_the_table() {
        let doc = include_str!("../../CONFIGURATION.md");
        let start = doc.find("A file's `Content-Type` comes from").unwrap();
        let paragraph = &doc[start..start + doc[start..].find("\n\n").unwrap()];
        // The words in backticks after `Content-Type`, but for the types.
        let mut listed: Vec<&str> = (paragraph.split('`').skip(3).step_by(2))
            .filter(|w| !w.contains('/') && !w.contains('='))
            .collect();
        let mut own: Vec<&str> = (super::TABLE.iter())
            .filter(|(_, t)| *t != super::DEFAULT)
            .map(|(e, _)| *e)
            .collect();
        listed.sort_unstable();
        own.sort_unstable();
        assert_eq!(listed, own);
    }
}
