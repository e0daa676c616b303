//! `pipec mcp`: talking to a server by hand, with the official Python SDK's server
//! (`tests/interop/reports_server.py`) over stdio: its listings, a tool call, a resource
//! read, a prompt, and what is refused before a server is reached.

use std::process::Output;

use serde_json::Value;

use crate::common::python::{python_with_mcp, reports_server};
use crate::common::{Project, code, json, stderr, stdout};

fn mcp(p: &Project, args: &[&str]) -> Output {
    let command = format!("{} {}", python_with_mcp(), reports_server().display());
    let mut all = vec!["mcp"];
    all.extend_from_slice(&args[..1]);
    all.extend_from_slice(&["reports", "--command", &command]);
    all.extend_from_slice(&args[1..]);
    p.run(&all)
}

#[test]
fn a_server_is_listed_called_read_and_prompted_as_it_answers() {
    let p = Project::new("mcp-cli");
    let out = mcp(&p, &["list"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let listed = json(&stdout(&out));
    let names = |key: &str, field: &str| -> Vec<String> {
        listed[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {listed}"))
            .iter()
            .map(|v| v[field].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(names("tools", "name"), ["summarize"]);
    assert_eq!(names("resources", "uri").len(), 4);
    assert_eq!(names("prompts", "name"), ["quarter_brief"]);
    assert_eq!(listed["protocolVersion"], "2026-07-28");

    let out = mcp(
        &p,
        &[
            "call",
            "--tool",
            "summarize",
            "--args",
            r#"{"quarter": "q3"}"#,
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let called = json(&stdout(&out));
    assert_eq!(
        called["content"][0]["text"],
        "Q3 2025 brought 128k in revenue."
    );

    let out = mcp(&p, &["read", "--uri", "mcp://reports/2025/q1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let read = json(&stdout(&out));
    let text = read["contents"][0]["text"]
        .as_str()
        .expect("a text content");
    assert_eq!(json(text)["revenue"], 120);

    let out = mcp(&p, &["prompts"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let prompts = json(&stdout(&out));
    assert_eq!(prompts["prompts"][0]["arguments"][0]["required"], true);

    let out = mcp(
        &p,
        &[
            "get",
            "--prompt",
            "quarter_brief",
            "--args",
            r#"{"quarter": "q2", "tone": "dry"}"#,
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let got = json(&stdout(&out));
    assert_eq!(
        got["messages"][0]["content"]["text"],
        "Write a dry brief on Q2 2025: 135k in revenue."
    );
}

#[test]
fn a_tool_error_fails_the_command_with_its_result_and_bad_arguments_reach_no_server() {
    let p = Project::new("mcp-cli-errors");
    let out = mcp(&p, &["call", "--tool", "no_such_tool"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(json(&stdout(&out))["isError"], Value::Bool(true));

    for (args, says) in [
        (
            &["call", "--tool", "summarize", "--args", "[1]"][..],
            "`--args` is not a JSON object",
        ),
        (
            &["call", "--tool", "summarize", "--args", "{"][..],
            "`--args` is not JSON",
        ),
        (
            &[
                "get",
                "--prompt",
                "quarter_brief",
                "--args",
                r#"{"quarter": 2}"#,
            ][..],
            "the argument `quarter` is not a string",
        ),
        (
            &["list", "--timeout", "0"][..],
            "is not a number of seconds above 0",
        ),
        (&["login"][..], "for servers reached over HTTP"),
    ] {
        let out = mcp(&p, args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}: {}", stdout(&out));
    }
}

#[test]
fn a_header_given_on_the_command_line_is_never_shown() {
    let p = Project::new("mcp-cli-secret");
    // Nothing listens on port 9 of the loopback interface.
    let out = p.run(&[
        "mcp",
        "list",
        "tracker",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--header",
        "Authorization=Bearer tr-s3cret-8f2c",
    ]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("could not be reached"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("tr-s3cret-8f2c"), "{}", stderr(&out));
    assert!(!stdout(&out).contains("tr-s3cret-8f2c"));
}
