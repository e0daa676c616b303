//! `think` nodes against a real HTTP server on 127.0.0.1 that speaks the OpenAI Chat
//! Completions API with canned replies: structured output, repairs, rate limits, a
//! reply that never validates, replies over the model's `max_reply_bytes` and a repair
//! of a large one, and a redirect that is not followed.

use crate::common;

use std::sync::Arc;

use common::chat_server::{ChatServer, Response, text};
use common::*;

/// One canned HTTP response.
type Canned = Response;

fn ok(content: &str) -> Canned {
    Response::ok(&text(content))
}

/// A server that answers each request with the next canned response of its node (the
/// `brief` node's requests say "Brief me"; every other request is `plain`'s; the last
/// response repeats). Routing by node keeps the replies right whichever node asks first.
struct Server {
    url: String,
    chat: ChatServer,
}

fn serve(brief: Vec<Canned>, plain: Vec<Canned>) -> Server {
    let chat = ChatServer::answering(Arc::new(move |request, seen| {
        let (responses, n) = if is_brief(request) {
            (&brief, seen.iter().filter(|r| is_brief(r)).count())
        } else {
            (&plain, seen.iter().filter(|r| !is_brief(r)).count())
        };
        responses
            .get(n)
            .or(responses.last())
            .cloned()
            .expect("a response")
    }));
    Server {
        url: chat.url.clone(),
        chat,
    }
}

fn is_brief(request: &serde_json::Value) -> bool {
    request["messages"].as_array().is_some_and(|m| {
        m.iter().any(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.contains("Brief me"))
        })
    })
}

impl Server {
    /// Every request so far, in order.
    fn requests(&self) -> Vec<serde_json::Value> {
        self.chat.requests()
    }

    /// The bytes of bodies the server could write.
    fn written(&self) -> u64 {
        self.chat.written()
    }

    /// The requests of the `brief` node, in order.
    fn brief_requests(&self) -> Vec<serde_json::Value> {
        self.requests().into_iter().filter(is_brief).collect()
    }
}

fn project(url: &str) -> Project {
    project_with(url, "")
}

/// The project, with `settings` added to the model's block.
fn project_with(url: &str, settings: &str) -> Project {
    let p = Project::new("openai");
    p.write(
        "brief.pipe",
        &format!(
            r#"model llm {{
  provider = "openai"
  name = "test-model"
  base_url = "{url}"
  api_key = secret("TEST_KEY")
  retries = 3
{settings}}}

/// A call brief.
type Brief {{
  /// One line.
  headline: string
  points: string[]
}}

input topic: string

think brief(topic: string = input.topic) -> Brief {{
  model = llm
  prompt = "{{{{ role(\"system\") }}}}Be brief.{{{{ role(\"user\") }}}}Brief me on {{{{ topic }}}}."
  repairs = 2
}}

think plain(topic: string = input.topic) -> string {{
  model = llm
  prompt = "Say hello about {{{{ topic }}}}."
}}

output brief = brief
output plain = plain
"#
        ),
    );
    p
}

fn run(p: &Project) -> std::process::Output {
    p.cmd(&[
        "run",
        "brief.pipe",
        "--input",
        "topic=renewals",
        "--concurrency",
        "1",
    ])
    .env("TEST_KEY", "sk-test-123456")
    .output()
    .expect("run")
}

const GOOD: &str = r#"{"headline": "Renewal at risk", "points": ["usage down", "tickets open"]}"#;

#[test]
fn structured_output_with_a_json_schema_and_a_plain_completion() {
    let server = serve(vec![ok(GOOD)], vec![ok("Hello!")]);
    let p = project(&server.url);
    let out = run(&p);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json(&stdout(&out));
    assert_eq!(v["brief"]["headline"], "Renewal at risk");
    assert_eq!(v["plain"], "Hello!");
    let reqs = server.requests();
    let structured = reqs
        .iter()
        .find(|r| r.get("response_format").is_some())
        .expect("a structured request");
    assert_eq!(structured["model"], "test-model");
    assert_eq!(structured["response_format"]["type"], "json_schema");
    let schema = &structured["response_format"]["json_schema"]["schema"];
    assert_eq!(
        schema["$defs"]["Brief"]["additionalProperties"], false,
        "closed schema: {schema}"
    );
    assert_eq!(
        schema["$defs"]["Brief"]["properties"]["headline"]["description"],
        "One line."
    );
    assert_eq!(structured["messages"][0]["role"], "system");
    assert_eq!(
        structured["messages"][1]["content"],
        "Brief me on renewals."
    );
    let plain = reqs
        .iter()
        .find(|r| r.get("response_format").is_none())
        .expect("a plain request");
    assert_eq!(plain["messages"][0]["content"], "Say hello about renewals.");
}

#[test]
fn malformed_json_is_repaired_by_sending_the_error_back() {
    let server = serve(
        vec![ok("not json at all"), ok(r#"{"headline": 5}"#), ok(GOOD)],
        vec![ok("Hello!")],
    );
    let p = project(&server.url);
    let out = run(&p);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(json(&stdout(&out))["brief"]["points"][1], "tickets open");
    let reqs = server.brief_requests();
    let third = &reqs[2];
    let msgs = third["messages"].as_array().expect("messages");
    let last = msgs.last().expect("a message");
    assert_eq!(last["role"], "user");
    assert!(
        last["content"]
            .as_str()
            .unwrap_or("")
            .contains("does not match the schema"),
        "{last}"
    );
    assert!(
        msgs.iter()
            .any(|m| m["role"] == "assistant" && m["content"] == "not json at all")
    );
}

#[test]
fn rate_limits_and_server_errors_are_retried_with_backoff() {
    let limited = Canned {
        status: 429,
        body: r#"{"error":{"message":"slow down"}}"#.into(),
        headers: vec![("retry-after".into(), "0.05".into())],
        padding: None,
    };
    let broken = Canned {
        status: 503,
        body: "{}".into(),
        headers: vec![],
        padding: None,
    };
    let server = serve(vec![limited, broken, ok(GOOD)], vec![ok("Hello!")]);
    let p = project(&server.url);
    let out = run(&p);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(server.requests().len(), 4);
}

#[test]
fn a_reply_that_never_validates_fails_with_r0201_and_the_last_reply() {
    let server = serve(vec![ok(r#"{"headline": 1}"#)], vec![ok("Hello!")]);
    let p = project(&server.url);
    let out = run(&p);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("R0201"), "{err}");
    assert!(
        err.contains("after 2 repairs") && err.contains(r#"{"headline": 1}"#),
        "{err}"
    );
    assert!(!err.contains("sk-test-123456"), "the key never shows");
}

#[test]
fn a_server_without_structured_output_gets_instructions_instead() {
    let refuse = Canned {
        status: 400,
        body: r#"{"error":{"message":"response_format json_schema is not supported"}}"#.into(),
        headers: vec![],
        padding: None,
    };
    let server = serve(vec![refuse, ok(GOOD)], vec![ok("Hello!")]);
    let p = project(&server.url);
    let out = run(&p);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let reqs = server.brief_requests();
    assert!(reqs[1].get("response_format").is_none());
    assert!(
        reqs[1]["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("JSON Schema")
    );
}

#[test]
fn a_missing_key_is_refused_before_any_request() {
    let server = serve(vec![ok(GOOD)], vec![ok("Hello!")]);
    let p = project(&server.url);
    let out = p
        .cmd(&["run", "brief.pipe", "--input", "topic=x"])
        .env_remove("TEST_KEY")
        .output()
        .expect("run");
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("R0002") && stderr(&out).contains("TEST_KEY"),
        "{}",
        stderr(&out)
    );
    assert!(server.requests().is_empty(), "nothing was sent");
}

/// A reply larger than the model's `max_reply_bytes` is read up to the cap and no
/// further, while it streams in: the node fails with R0205 and is not retried, and the
/// server could write only a little of its 64 MiB before pipec closed the connection.
/// (Before the cap pipec read it whole, 64 MiB and then some in memory, and sent it
/// back in its repair turns.)
#[test]
fn a_model_reply_over_max_reply_bytes_is_cut_while_reading_with_r0205() {
    let server = serve(vec![Response::huge(64 << 20, false)], vec![ok("Hello!")]);
    let p = project_with(&server.url, "  max_reply_bytes = 1mb\n");
    refused_too_large(&server, &run(&p), 1_000_000);
}

/// The run failed on the `brief` node's reply with R0205 naming `limit`, without a
/// retry, and the server could not write most of its 64 MiB.
fn refused_too_large(server: &Server, out: &std::process::Output, limit: u64) {
    assert_eq!(code(out), 1, "{}", stderr(out));
    let err = stderr(out);
    assert!(
        err.contains("R0205")
            && err.contains(&format!("{limit} bytes"))
            && err.contains("max_reply_bytes"),
        "{err}"
    );
    assert!(!err.contains("sk-test-123456"), "the key never shows");
    assert_eq!(server.brief_requests().len(), 1, "not retried");
    assert!(
        server.written() < 32 << 20,
        "{} bytes of 64 MiB were written",
        server.written()
    );
}

/// A model that declares no cap gets 8 MB, and a reply whose `content-length` says it is
/// larger is not read at all.
#[test]
fn a_model_reply_over_the_default_cap_is_refused_by_its_length_with_r0205() {
    let server = serve(vec![Response::huge(64 << 20, true)], vec![ok("Hello!")]);
    let p = project(&server.url);
    refused_too_large(&server, &run(&p), 8_000_000);
}

/// A large reply that does not validate is quoted back in the repair turn by its start
/// and end, not whole: the repair request stays small however large the reply was.
#[test]
fn a_model_repair_turn_quotes_a_large_invalid_reply_by_an_excerpt() {
    let server = serve(
        vec![Response::huge(2_000_000, true), ok(GOOD)],
        vec![ok("Hello!")],
    );
    let p = project(&server.url);
    let out = run(&p);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let reqs = server.brief_requests();
    assert_eq!(reqs.len(), 2);
    let repair = &reqs[1];
    assert!(
        repair.to_string().len() < 64 * 1024,
        "the repair request is {} bytes",
        repair.to_string().len()
    );
    let quoted = repair["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "assistant"))
        .and_then(|m| m["content"].as_str())
        .expect("the reply quoted back")
        .to_string();
    assert!(
        quoted.starts_with("xxxx") && quoted.ends_with("xxxx"),
        "{quoted:.100}"
    );
    assert!(
        quoted.contains("bytes of the reply left out"),
        "{quoted:.100}"
    );
}

/// A redirect is not followed: a 307 would send the prompt (the body) on to whatever
/// address it names. The node fails with R0203 naming the redirect, and the other server
/// never hears of the request.
#[test]
fn a_model_redirect_to_another_origin_is_not_followed() {
    let elsewhere = serve(vec![ok(GOOD)], vec![ok("Hello!")]);
    let to = format!("{}/chat/completions", elsewhere.url);
    let redirecting = ChatServer::answering(Arc::new(move |_, _| Response {
        status: 307,
        headers: vec![("location".into(), to.clone())],
        body: String::new(),
        padding: None,
    }));
    let p = project(&redirecting.url);
    let out = run(&p);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("R0203") && err.contains("307") && err.contains("not followed"),
        "{err}"
    );
    assert!(
        elsewhere.requests().is_empty(),
        "the prompt went to the other server: {:?}",
        elsewhere.requests()
    );
}

/// A record with optional fields, given without them; a prompt and a gate message test
/// the fields, and then `loose` reads a field a `json` value does not have.
const OPTIONAL_FIELD: &str = r#"model llm {
  provider = "openai"
  name = "test-model"
  base_url = "URL"
  api_key = secret("TEST_KEY")
}

type Ack {
  ok: bool
  note: string?
  by: Person?
}

type Person {
  name: string
  team: string?
}

type Approval {
  approved: bool
}

input ack: Ack
input extra: json

think reply(ack: Ack = input.ack) -> string {
  model = llm
  prompt = "{% if ack.note %}Note: {{ ack.note }}{% else %}No note{% endif %}, {{ ack.by.team or 'no team' }}."
}

gate review(ack: Ack = input.ack, reply: string = reply) -> Approval {
  message = "{{ reply }} {% if ack.by.team %}Team {{ ack.by.team }}{% else %}No team{% endif %}"
}

think loose(extra: json = input.extra, review: Approval = review) -> string {
  model = llm
  prompt = "Say {{ extra.missing }}{{ review.approved }}."
}

output reply = reply
output loose = loose
"#;

#[test]
fn an_optional_field_left_out_renders_as_none_and_an_undefined_value_is_r0204_naming_it_and_the_fix()
 {
    let chat = common::chat_server::ChatServer::start(Arc::new(|_, _| text("Fine")));
    let p = Project::new("optional-field");
    p.write("ack.pipe", &OPTIONAL_FIELD.replace("URL", &chat.url));
    let out = p
        .cmd(&[
            "run",
            "ack.pipe",
            "--input",
            r#"ack={"ok": true, "by": {"name": "Ann"}}"#,
            "--input",
            r#"extra={"said": 1}"#,
            "--answer",
            r#"review={"approved": true}"#,
        ])
        .env("TEST_KEY", "sk-test-123456")
        .output()
        .expect("run");
    let (out_text, err) = (stdout(&out), stderr(&out));
    let sent: Vec<String> = chat
        .requests()
        .iter()
        .filter_map(|r| r["messages"][0]["content"].as_str().map(str::to_string))
        .collect();
    assert!(
        sent.iter().any(|s| s == "No note, no team."),
        "`note` and `by.team` render as none: {sent:?}\n{err}"
    );
    assert_eq!(code(&out), 1, "`loose` fails: {out_text}\n{err}");
    let thread = thread_of(&format!("{out_text}\n{err}")).expect("a thread");
    assert!(
        p.show_json(&thread).to_string().contains("Fine No team"),
        "the gate's message renders `ack.by.team` as none: {out_text}\n{err}"
    );
    // A field no type declares is still an error, which names it and says what to write.
    assert!(err.contains("error[R0204]"), "{err}");
    assert!(
        err.contains("the prompt of `loose` does not render: `extra.missing` is undefined"),
        "{err}"
    );
    assert!(
        err.contains("{% if extra.missing is defined %}"),
        "the fix: {err}"
    );
}
