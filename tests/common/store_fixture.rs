//! A real store built with the command line, for the store tests: a thread paused at a
//! gate (after an `each` node whose items are rows), and a completed one.

use std::path::Path;

use crate::common::*;

pub const FLOW: &str = r#"type Approval {
  approved: bool
}

input words: string[]

node tag(word: string = each(input.words)) -> string {
  exec = ["./scripts/tag.sh"]
  idempotent = true
}

node count(tags: string[] = tag) -> int {
  return = len(tags)
}

gate review(n: int = count) -> Approval {
  message = "Publish {{ n }} tags?"
}

node publish(ack: Approval = review, tags: string[] = tag) -> string[] {
  exec = ["./scripts/publish.sh"]
}

output published = publish
"#;

/// Tags a word: prints it back as a JSON string.
const TAG: &str = r##"#!/bin/sh
input=$(cat)
word=$(printf '%s' "$input" | sed -n 's/.*"word":"\([^"]*\)".*/\1/p')
printf '"#%s"\n' "$word"
"##;

/// An effect: prints the tags back.
const PUBLISH: &str = r#"#!/bin/sh
input=$(cat)
printf '%s' "$input" | sed -n 's/.*"tags":\(\[[^]]*\]\).*/\1/p'
"#;

pub const ANSWER: &str = r#"review={"approved":true}"#;

/// A project with the pipeline, and the id of its paused thread. The store holds that
/// thread (paused at `review`, with three item rows) and a completed one.
pub fn store_project(tag: &str) -> (Project, String) {
    let p = Project::new(tag);
    p.write("flow.pipe", FLOW);
    p.script("scripts/tag.sh", TAG);
    p.script("scripts/publish.sh", PUBLISH);
    let out = p.run(&[
        "run",
        "flow.pipe",
        "--input",
        r#"words=["a","b","c"]"#,
        "-q",
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let paused = thread_of(&stdout(&out)).expect("a paused thread");
    let out = p.run(&[
        "run",
        "flow.pipe",
        "--input",
        r#"words=["d","e"]"#,
        "--answer",
        ANSWER,
        "-q",
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("#d"), "{}", stdout(&out));
    (p, paused)
}

/// The file's bytes and modification time.
#[allow(dead_code)]
pub fn fingerprint(path: &Path) -> (Vec<u8>, std::time::SystemTime) {
    let bytes = std::fs::read(path).expect("read the store");
    let mtime = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .expect("mtime");
    (bytes, mtime)
}
