//! `config::apply_file` on any text, and `cli::parse` on the same input
//! split at NUL bytes into arguments.
#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use marmoset::config::cli::{self, Action};
use marmoset::config::{self, Config};

fn check(c: &Config) {
    assert!((1..=64).contains(&c.workers));
    assert!(c.max_connections >= 1);
    assert!(!c.listen.is_empty());
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut c = Config::default();
    match config::apply_file(&mut c, Path::new("/fuzz.conf"), &text) {
        Ok(()) => check(&c),
        Err(e) => assert!(e.to_string().starts_with("/fuzz.conf:")),
    }

    // No argument may name a config file: that would read whatever file the
    // input names. A first `--config=/dev/null` keeps the default file out.
    let args = data.split(|&b| b == 0).map(|a| {
        if a.starts_with(b"--config") {
            OsString::from("--check-config")
        } else {
            OsString::from_vec(a.to_vec())
        }
    });
    let argv = ["marmoset", "--config=/dev/null"]
        .into_iter()
        .map(OsString::from)
        .chain(args);
    match cli::parse(argv) {
        Ok(Action::Run(c) | Action::CheckConfig(c)) => check(&c),
        Ok(Action::Print(text)) => assert!(!text.is_empty()),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
