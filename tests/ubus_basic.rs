//! The ubus endpoint in a build without the `ubus` feature: its setting is
//! refused at its line, saying why, so a configuration written for LuCI
//! never starts a server that silently lacks `/ubus`. (The endpoint itself
//! is tested in `tests/ubus.rs`, in builds with the feature.)
#![cfg(not(feature = "ubus"))]

mod common;

use common::check_conf;

#[test]
fn a_build_without_the_endpoint_refuses_it_at_its_line() {
    let (code, err) = check_conf("root /tmp\nubus /ubus\n");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("m.conf:2: ubus: this build has no ubus endpoint (the `ubus` feature)"),
        "{err}"
    );
}
