//! The client refuses to run without the URL the suite appends, saying how it is used.
//! (Its scenarios are run by the suite itself: `scripts/conformance client`.)

use std::process::Command;

#[test]
fn without_a_url_it_says_how_it_is_used_and_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_pipec-conformance-client"))
        .env_remove("MCP_CONFORMANCE_SCENARIO")
        .output()
        .expect("the client runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("usage: pipec-conformance-client URL"),
        "{stderr}"
    );
}
