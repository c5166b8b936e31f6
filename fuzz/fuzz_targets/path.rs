//! `path::split_query` and `path::clean`: whatever comes out stays under
//! the root, and the plain-path shortcut agrees with the general decoder.
#![no_main]

use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;
use marmoset::http::path;

fuzz_target!(|data: &[u8]| {
    let (raw, query) = path::split_query(data);
    assert!(!raw.contains(&b'?'));
    match query {
        Some(q) => assert_eq!(raw.len() + 1 + q.len(), data.len()),
        None => assert_eq!(raw, data),
    }
    let mut general = path::CleanPath::default();
    let general = path::clean_general(raw, &mut general).map(|()| general);
    assert_eq!(path::clean(raw), general, "the plain path disagrees");
    let Ok(clean) = general else {
        return;
    };
    let rel = clean.as_str();
    assert!(!rel.starts_with('/'), "leading slash: {rel:?}");
    assert_eq!(clean.is_root(), rel.is_empty());
    if !rel.is_empty() {
        for segment in rel.split('/') {
            assert!(
                !segment.is_empty() && segment != "." && segment != "..",
                "bad segment in {rel:?}"
            );
        }
    }
    assert!(
        !rel.bytes().any(|b| b < 0x20 || b == 0x7f || b == b'\\'),
        "control byte or backslash in {rel:?}"
    );
    assert!(!clean.file_name().contains('/'));
    let joined = Path::new("/root").join(rel);
    assert!(joined.starts_with("/root"), "{joined:?} escapes the root");
    assert!(
        joined
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
        "{joined:?} has a non-normal component"
    );
    // Encoding the path as the client sees it gives the same path back.
    let mut again = String::new();
    path::encode_into(&mut again, &clean.shown());
    // (The root is always shown as `/`, so only its trailing slash may differ.)
    let again = path::clean(again.as_bytes()).expect("shown path refused");
    assert_eq!(again.as_str(), rel, "not stable");
    assert!(clean.is_root() || again.trailing_slash == clean.trailing_slash);
});
