//! `pipec test` through the real binary: the tests written in `pipelines/` pass offline
//! (the deal research's dead link healed, a declined gate, a paused thread), a failing
//! test exits 1 with the condition, its line and a diff, in the terminal, in JUnit XML
//! and in JSON; `--filter` and `--list` select; a file that does not check runs nothing.

use std::path::Path;

use crate::common;

use common::{Project, code, crate_root, json, stderr, stdout};

/// Copies a folder, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
}

#[test]
fn the_tests_of_the_pipelines_pass_offline() {
    let p = Project::new("test-pipelines");
    copy_dir(&crate_root().join("pipelines"), &p.dir.join("pipelines"));
    copy_dir(&crate_root().join("prompts"), &p.dir.join("prompts"));
    let junit = p.dir.join("junit.xml");
    let out = p.run(&[
        "test",
        "pipelines",
        "--json",
        "--junit",
        junit.to_str().expect("utf-8"),
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let report = json(&stdout(&out));
    assert_eq!(report["failed"], 0, "{report:#}");
    let names: Vec<&str> = report["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    for name in [
        "approved",
        "email_link_dies_during_the_pause",
        "declined",
        "waits_for_the_reviewer",
        "approved_note_is_sent",
        "declined_note_is_not_sent",
        "killed_after_sending_resumes_without_sending_twice",
        "killed_after_sending_waits_for_a_decision",
        "approved_from_the_tape",
        "approved_batch_is_labelled_and_announced",
        "rejected_batch_changes_nothing",
        "approved_notes_become_a_draft_release",
        "declined_major_release_creates_nothing",
    ] {
        assert!(names.contains(&name), "{name} ran: {names:?}");
    }
    // The note of each thread that sent one is in the outbox once: the kill after the
    // send, and the retry with the same call key, did not send it twice.
    let outbox = std::fs::read_to_string(p.dir.join(".pipec/outbox.jsonl")).expect("outbox");
    let thread_of = |name: &str| {
        report["tests"]
            .as_array()
            .expect("tests")
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t["thread"].as_str())
            .expect("thread")
            .to_string()
    };
    for name in [
        "approved_note_is_sent",
        "killed_after_sending_resumes_without_sending_twice",
        "killed_after_sending_waits_for_a_decision",
    ] {
        let thread = thread_of(name);
        let sent = outbox
            .lines()
            .filter(|l| l.contains(&format!("\"thread\":\"{thread}\"")))
            .count();
        assert_eq!(sent, 1, "{name}: {outbox}");
    }
    let paused = report["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .find(|t| t["name"] == "waits_for_the_reviewer")
        .expect("the paused test");
    assert_eq!(paused["status"], "paused");
    let xml = std::fs::read_to_string(&junit).expect("junit written");
    assert!(
        xml.contains("<testsuite name=\"pipelines/deal_research.pipe\""),
        "{xml}"
    );
    assert!(xml.contains("email_link_dies_during_the_pause"), "{xml}");
    assert!(!xml.contains("<failure"), "{xml}");
}

const PIPELINE: &str = r#"model writer {
  provider = "scripted"
  replies = "replies.json"
}

type Draft {
  text: string
}

type Approval {
  approved: bool
}

input name: string

think draft(name: string = input.name) -> Draft {
  model = writer
  prompt = "Greet {{ name }}."
}

gate review(draft: Draft = draft) -> Approval {
  message = "Send \"{{ draft.text }}\"?"
}

node result(draft: Draft = draft, review: Approval = review) -> { text: string, sent: bool } {
  return = { text: draft.text, sent: review.approved }
}

output result = result

test passes {
  input = { name: "Ada" }
  answers = { review: { approved: true } }
  expect = [output.result.sent == true]
}

test fails {
  input = { name: "Ada" }
  answers = { review: { approved: true } }
  expect = [
    output.result == { text: "Hello Grace", sent: true },
    state.result == "done",
    thread.model_calls == 2,
  ]
}
"#;

const REPLIES: &str = r#"{ "draft": [{ "template": { "text": "Hello {{ name }}" } }] }"#;

#[test]
fn a_failing_test_exits_1_with_its_condition_and_a_diff() {
    let p = Project::new("test-fails");
    p.write("hello.pipe", PIPELINE);
    p.write("replies.json", REPLIES);
    let junit = p.dir.join("junit.xml");
    let out = p.run(&["test", "--junit", junit.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("hello.pipe::passes ... ok"), "{text}");
    assert!(text.contains("hello.pipe::fails ... FAILED"), "{text}");
    // The condition that failed, where it is written, and both sides.
    assert!(
        text.contains("hello.pipe:41: output.result == { text: \"Hello Grace\", sent: true }"),
        "{text}"
    );
    assert!(text.contains("-  \"text\": \"Hello Grace\""), "{text}");
    assert!(text.contains("+  \"text\": \"Hello Ada\""), "{text}");
    assert!(
        text.contains("hello.pipe:43: thread.model_calls == 2")
            && text.contains("the left side is 1, the right side 2"),
        "{text}"
    );
    assert!(
        !text.contains("state.result"),
        "a condition that holds is not reported: {text}"
    );
    assert!(text.contains("1 passed; 1 failed"), "{text}");
    // The thread is kept to look at.
    let thread = common::thread_of(&text).expect("the failed test's thread");
    let store = p.dir.join(".pipec/test/hello/fails/runs.redb");
    let show = p.run(&[
        "show",
        &thread,
        "--store",
        store.to_str().expect("utf-8"),
        "--json",
    ]);
    assert_eq!(code(&show), 0, "{}", stderr(&show));
    let shown = json(&stdout(&show));
    assert_eq!(shown["status"], "completed");
    // A test run's clock starts at 2026-01-01T00:00:00Z, whatever the day.
    let created = shown["created_ms"].as_u64().expect("created_ms");
    assert!(
        (1_767_225_600_000..1_767_225_600_000 + 600_000).contains(&created),
        "{created}"
    );
    let xml = std::fs::read_to_string(&junit).expect("junit written");
    assert!(xml.contains("<failure"), "{xml}");
    assert!(xml.contains("thread.model_calls == 2"), "{xml}");
    // The same run as JSON.
    let out = p.run(&["test", "--json"]);
    assert_eq!(code(&out), 1);
    let report = json(&stdout(&out));
    assert_eq!(report["passed"], 1);
    assert_eq!(report["failed"], 1);
    let failed = report["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .find(|t| t["name"] == "fails")
        .expect("fails");
    assert_eq!(
        failed["failures"].as_array().expect("failures").len(),
        2,
        "{failed:#}"
    );
}

#[test]
fn files_of_one_name_in_two_folders_keep_their_own_stores() {
    let p = Project::new("test-same-name");
    for dir in ["a", "b"] {
        p.write(
            &format!("{dir}/hello.pipe"),
            &PIPELINE
                .replace("\ntest fails {", "\ntest other {")
                .replace(
                    "replies = \"replies.json\"",
                    "replies = \"../replies.json\"",
                ),
        );
    }
    p.write("replies.json", REPLIES);
    // Sharing a store, the two runs of `passes` would collide on one redb file.
    let out = p.run(&["test", "--filter", "passes", "-j", "2"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("2 passed; 0 failed"),
        "{}",
        stdout(&out)
    );
    assert!(p.dir.join(".pipec/test/a/hello/passes/runs.redb").is_file());
    assert!(p.dir.join(".pipec/test/b/hello/passes/runs.redb").is_file());
}

#[test]
fn filter_and_list_select_tests() {
    let p = Project::new("test-filter");
    p.write("hello.pipe", PIPELINE);
    p.write("replies.json", REPLIES);
    let out = p.run(&["test", "--list"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "./hello.pipe::passes\n./hello.pipe::fails\n");
    let out = p.run(&["test", "--filter", "pass"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("1 passed; 0 failed"),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("::fails"), "{}", stdout(&out));
}

#[test]
fn a_file_that_does_not_check_runs_no_test() {
    let p = Project::new("test-broken");
    p.write(
        "hello.pipe",
        &PIPELINE.replace(
            "answers = { review: { approved: true } }\n  expect = [output.result.sent",
            "answers = { reveiw: { approved: true } }\n  expect = [output.result.sent",
        ),
    );
    p.write("replies.json", REPLIES);
    let out = p.run(&["test"]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("the pipeline has no gate `reveiw`"), "{err}");
    assert!(err.contains("do not run until it checks clean"), "{err}");
    assert!(!p.dir.join(".pipec/test").exists(), "nothing ran");
}

/// A pipeline with a real model endpoint and a real MCP server, both reached only while
/// a tape is recorded: the server's command is `env("FAULTS")`, which a replay never
/// reads, and the endpoint is stopped before the replay.
fn taped_pipeline() -> String {
    format!(
        r#"server faults {{
  command = env("FAULTS")
  args = ["{}"]
}}

tool echo(word: string, token: string) -> json from faults {{
  read_only = true
}}

model fast {{
  provider = "openai"
  name = "gpt-4o-mini"
  base_url = env("CHAT_URL")
  api_key = secret("OPENAI_API_KEY")
}}

input word: string

node echoed(word: string = input.word, token: string = secret("ECHO_TOKEN")) -> json {{
  call = echo(word: word, token: token)
}}

think said(word: string = input.word, echoed: json = echoed) -> string {{
  model = fast
  prompt = "Say {{{{ word }}}} back."
}}

output said = said

test said_back {{
  input = {{ word: "heron" }}
  tape = "tapes/said.json"
  env = {{ ECHO_TOKEN: "tok-test-4471" }}
  expect = [
    output.said == "You said heron.",
    calls.echo == 1,
    arguments.echo[*].word == ["heron"],
    arguments.echo[*].token == ["secret(ECHO_TOKEN)"],
    thread.model_calls == 1,
    thread.tokens_in == 12,
  ]
}}
"#,
        common::python::fault_server().display()
    )
}

#[test]
fn a_tape_is_recorded_from_the_real_model_and_server_then_answers_without_them() {
    const REAL: &str = "tok-real-7f3a91c2e5";
    const KEY: &str = "sk-test-0c1d2e3f4a5b";
    let p = Project::new("test-tape");
    p.write("said.pipe", &taped_pipeline());
    let chat = common::chat_server::ChatServer::start(std::sync::Arc::new(|_, _| {
        common::chat_server::text("You said heron.")
    }));
    let python = common::python::python();
    let recorded = p.run_env(
        &["test", "said.pipe", "--record"],
        &[
            ("FAULTS", python.as_str()),
            ("CHAT_URL", chat.url.as_str()),
            ("OPENAI_API_KEY", KEY),
            ("ECHO_TOKEN", REAL),
        ],
    );
    assert_eq!(
        code(&recorded),
        0,
        "{}{}",
        stdout(&recorded),
        stderr(&recorded)
    );
    assert!(
        stdout(&recorded).contains("recorded tapes/said.json"),
        "{}",
        stdout(&recorded)
    );
    assert_eq!(chat.requests().len(), 1, "the model was called once");
    let tape = std::fs::read_to_string(p.dir.join("tapes/said.json")).expect("tape written");
    // The server got the shell's token and echoed it back; the tape holds neither it,
    // in any encoding, nor the API key.
    for secret in [REAL, KEY, "tok-test-4471"] {
        assert!(!tape.contains(secret), "{secret} in {tape}");
        let b64 = pipec_base::base64::encode(secret.as_bytes());
        assert!(
            !tape.contains(&b64[..b64.len() - 2]),
            "{secret} as base64 in {tape}"
        );
    }
    let tape: serde_json::Value = serde_json::from_str(&tape).expect("JSON");
    let entries = tape["entries"].as_array().expect("entries");
    let tool = entries
        .iter()
        .find(|e| e["request"]["kind"] == "tool")
        .expect("the tool call");
    assert_eq!(tool["request"]["arguments"]["token"], "secret(ECHO_TOKEN)");
    assert_eq!(
        tool["answers"][0]["structuredContent"]["arguments"]["token"],
        "secret(ECHO_TOKEN)"
    );
    let model = entries
        .iter()
        .find(|e| e["request"]["kind"] == "model")
        .expect("the model call");
    assert_eq!(model["request"]["model"], "openai/gpt-4o-mini");
    assert!(
        model["key"]
            .as_str()
            .is_some_and(|k| k.starts_with("sha256:")),
        "{model}"
    );
    assert!(tape["listings"]["faults"].is_array(), "{tape:#}");
    drop(chat);

    // No endpoint, no server command, no key: the tape answers, with the test's token.
    let replayed = p.run(&["test", "said.pipe", "--json"]);
    assert_eq!(
        code(&replayed),
        0,
        "{}{}",
        stdout(&replayed),
        stderr(&replayed)
    );
    assert_eq!(json(&stdout(&replayed))["passed"], 1);

    // A request the tape does not hold fails, naming the nearest recording and the
    // line that differs.
    let source = std::fs::read_to_string(p.dir.join("said.pipe")).expect("read");
    p.write(
        "said.pipe",
        &source.replace(
            r#"input = { word: "heron" }"#,
            r#"input = { word: "egret" }"#,
        ),
    );
    let missed = p.run(&["test", "said.pipe"]);
    assert_eq!(code(&missed), 1, "{}", stdout(&missed));
    let out = stdout(&missed);
    assert!(
        out.contains("the tape tapes/said.json holds no answer"),
        "{out}"
    );
    assert!(out.contains("the nearest recording, entry 1"), "{out}");
    assert!(out.contains("-    \"word\": \"heron\""), "{out}");
    assert!(out.contains("+    \"word\": \"egret\""), "{out}");
}

#[test]
fn a_kill_after_a_node_that_makes_no_effect_fails_the_test_saying_so() {
    let p = Project::new("test-no-kill");
    p.write(
        "hello.pipe",
        &PIPELINE.replace(
            "test passes {\n",
            "test passes {\n  faults {\n    kill_after = [\"result\"]\n  }\n",
        ),
    );
    p.write("replies.json", REPLIES);
    let out = p.run(&["test", "--filter", "passes"]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("the run never finished an effect of `result`, so nothing was killed"),
        "{text}"
    );
}

const LOOKUP: &str = r#"server crm {
  command = "crm-that-is-never-started"
}

tool find(name: string) -> { id: string } from crm {
  read_only = true
  timeout = 300ms
}

input name: string

node found(name: string = input.name) -> { id: string } {
  call = find(name: name)
  retries = 1
  backoff = 10ms
}

output found = found

test hangs_once {
  input = { name: "Ada" }
  tape = "lookup.tape.json"
  faults {
    server_hang = ["find"]
  }
  expect = [calls.find == 2, output.found.id == "A-1"]
}
"#;

/// The tape `LOOKUP`'s tests answer from: `find` of Ada.
const LOOKUP_TAPE: &str = r#"{ "pipec_tape": 1, "entries": [
  { "request": { "kind": "tool", "server": "crm", "tool": "find", "arguments": { "name": "Ada" } },
    "answers": [{ "content": [], "structuredContent": { "id": "A-1" } }] }
] }"#;

#[test]
fn a_server_that_hangs_times_out_and_an_idempotent_call_is_made_again() {
    let p = Project::new("test-hang");
    p.write("lookup.pipe", LOOKUP);
    p.write("lookup.tape.json", LOOKUP_TAPE);
    let out = p.run(&["test"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    // With no retry, the hung call fails the node, saying the server did not answer.
    p.write(
        "lookup.pipe",
        &LOOKUP
            .replace("  retries = 1\n  backoff = 10ms\n", "")
            .replace(
                "calls.find == 2, output.found.id == \"A-1\"",
                "calls.find == 1",
            ),
    );
    let out = p.run(&["test"]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("the thread ended failed, not completed"),
        "{text}"
    );
    assert!(
        text.contains("the server `crm` did not answer `tools/call find` within 0.3s"),
        "{text}"
    );
    assert!(
        !text.contains("calls.find"),
        "calls.find == 1 holds: {text}"
    );
}

#[test]
fn a_snapshot_of_the_outputs_fails_with_a_diff_until_update_writes_it() {
    let p = Project::new("test-snapshot");
    p.write(
        "hello.pipe",
        &PIPELINE.replace(
            "test passes {\n",
            "test passes {\n  snapshot = \"snapshots/passes.json\"\n",
        ),
    );
    p.write("replies.json", REPLIES);
    let run = |args: &[&str]| {
        let mut all = vec!["test", "--filter", "passes"];
        all.extend_from_slice(args);
        p.run(&all)
    };
    let out = run(&[]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains(
            "there is no snapshot snapshots/passes.json yet: `pipec test --update` writes it"
        ),
        "{}",
        stdout(&out)
    );
    let out = run(&["--update"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("updated snapshots/passes.json"),
        "{}",
        stdout(&out)
    );
    let kept = std::fs::read_to_string(p.dir.join("snapshots/passes.json")).expect("written");
    assert_eq!(
        json(&kept),
        serde_json::json!({ "result": { "text": "Hello Ada", "sent": true } })
    );
    assert_eq!(code(&run(&[])), 0, "the snapshot holds");
    // An edited snapshot no longer holds; the failure shows both.
    p.write(
        "snapshots/passes.json",
        &kept.replace("Hello Ada", "Hello Grace"),
    );
    let out = run(&["--json"]);
    assert_eq!(code(&out), 1);
    let report = json(&stdout(&out));
    let message = report["tests"][0]["failures"][0]["message"]
        .as_str()
        .expect("message");
    assert!(
        message.contains("the outputs differ from the snapshot snapshots/passes.json"),
        "{message}"
    );
    assert!(
        message.contains("-    \"text\": \"Hello Grace\""),
        "{message}"
    );
    assert!(
        message.contains("+    \"text\": \"Hello Ada\""),
        "{message}"
    );
    assert_eq!(code(&run(&["--update"])), 0);
    assert_eq!(
        std::fs::read_to_string(p.dir.join("snapshots/passes.json")).expect("rewritten"),
        kept
    );
}

#[test]
fn a_server_that_asks_mid_call_is_answered_at_a_gate_and_the_call_goes_on() {
    let p = Project::new("test-input-required");
    let asking = LOOKUP
        .replace(
            "  command = \"crm-that-is-never-started\"\n",
            "  command = \"crm-that-is-never-started\"\n  elicitation = \"ask\"\n",
        )
        .replace(
            "test hangs_once {",
            "test asks_once {\n  input = { name: \"Ada\" }\n  tape = \"lookup.tape.json\"\n  faults {\n    input_required = [\"find\"]\n  }\n  questions = { find: { go_on: true } }\n  expect = [calls.find == 2, events.gate_answered == 1, output.found.id == \"A-1\"]\n}\n\ntest hangs_once {",
        );
    p.write("lookup.pipe", &asking);
    p.write("lookup.tape.json", LOOKUP_TAPE);
    let out = p.run(&["test", "--filter", "asks_once"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    // A server whose questions nobody answers here: the call fails, saying so.
    p.write(
        "lookup.pipe",
        &asking
            .replace("  elicitation = \"ask\"\n", "")
            .replace("  retries = 1\n", ""),
    );
    let out = p.run(&["test", "--filter", "asks_once"]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("asked for input in the middle of a request"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_kill_and_a_shared_tape_are_recorded_together_and_replay() {
    let p = Project::new("test-record-kill");
    p.write(
        "echo.pipe",
        &format!(
            r#"server faults {{
  command = env("FAULTS")
  args = ["{}"]
}}

/// Not read-only: an effect, journaled before it is sent.
tool echo(word: string, token: string) -> json from faults

input word: string

act echoed(word: string = input.word) -> json {{
  call = echo(word: word, token: "t")
}}

output echoed = echoed

test killed_after_the_echo {{
  input = {{ word: "heron" }}
  tape = "tapes/echo.json"
  faults {{
    kill_after = ["echoed"]
  }}
  retry_unfinished = ["echoed"]
  expect = [calls.echo == 2, output.echoed.arguments.word == "heron"]
}}

test echoes {{
  input = {{ word: "heron" }}
  tape = "tapes/echo.json"
  expect = [calls.echo == 1]
}}
"#,
            common::python::fault_server().display()
        ),
    );
    let python = common::python::python();
    let out = p.run_env(&["test", "--record"], &[("FAULTS", python.as_str())]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let tape = json(&std::fs::read_to_string(p.dir.join("tapes/echo.json")).expect("tape"));
    let entries = tape["entries"].as_array().expect("entries");
    // One request, heard three times: by the killed process, by the resume, and by the
    // other test, which shares the tape.
    assert_eq!(entries.len(), 1, "{tape:#}");
    assert_eq!(
        entries[0]["answers"].as_array().map(Vec::len),
        Some(3),
        "{tape:#}"
    );
    assert!(tape["listings"]["faults"].is_array(), "{tape:#}");
    // Without the server, both answer from the tape, the killed one included.
    let out = p.run(&["test"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
}
