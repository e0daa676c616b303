//! Hydration through the real binary, against `pipec-demo-crm` over stdio: resource
//! bindings by URI in a `node`, a `think` and an `exec` node; RFC 6570 expansion from a
//! dotted field and of a value that needs percent-encoding; a `when` that reads a
//! resource; link bindings (`where:`, `from:`, `resources(ref:)`, `max_total`, missing and
//! ambiguous links); `each` over links; `ref<T>` references; MIME parsing; the
//! per-attempt fetch cache; the `max_bytes` cap; and the shapes the checker refuses
//! because nothing would fetch them (a resource in a gate, or inside a record or list
//! source). The server's call log (`CRM_CALL_LOG`) counts what reached it.

use crate::common;

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::sync::Arc;

use common::chat_server::{ChatServer, text};
use common::{Project, code, json, stderr, stdout, thread_of};
use serde_json::{Value, json};

/// The server, the scripted model, the CRM's types, link kinds and `get_deal`. `get_deal`
/// declares a third kind, `contract`, that the demo server never returns.
const HEADER: &str = r#"server crm {
  command = "pipec-demo-crm"
  env = {
    CRM_CALL_LOG: env("CRM_CALL_LOG", default: ""),
    CRM_EMAILS: env("CRM_EMAILS", default: "10"),
    CRM_ACTIVITIES: env("CRM_ACTIVITIES", default: "3"),
  }
}

model fast {
  provider = "scripted"
  replies = "replies.json"
}

type Activity {
  at: string
  kind: string
  by: string
  summary: string
}

type ActivityLog {
  deal_id: string
  activity: Activity[]
}

type Email {
  id: string
  subject: string
}

type EmailPage {
  deal_id: string
  start: string
  end: string
  count: int
  emails: Email[]
}

type Deal {
  deal_id: string
  name: string
}

type Approval {
  approved: bool
}

link "activity-history": ActivityLog = "mcp://crm/deals/{deal_id}/activity"
link "email-history": EMAIL_PAGE = "mcp://crm/deals/{deal_id}/emails/{start}/{end}"
link "contract": string = "mcp://crm/deals/{deal_id}/contract"

/// Look a deal up; its result links the deal's activity and email history.
tool get_deal(deal_id: string) -> Deal from crm {
  read_only = true
  links = ["activity-history", "email-history", "contract"]
}
"#;

/// An agent that looks up two deals (`first`, then `second`) in one turn, so its
/// manifest holds two links of each kind the server returns.
const RESEARCH: &str = r#"
type Found {
  note: string
}

input first: string
input second: string

agent research(first: string = input.first, second: string = input.second) -> Found {
  model = fast
  prompt = "Look up {{ first }} and {{ second }}."
  tools = [get_deal]
}
"#;

fn research_replies() -> Value {
    json!({ "research": [
        { "tool_calls": [
            { "name": "get_deal", "arguments": { "deal_id": "{{ first }}" } },
            { "name": "get_deal", "arguments": { "deal_id": "{{ second }}" } }
        ] },
        { "json": { "note": "two deals" } }
    ] })
}

const D1_EMAILS: &str = "mcp://crm/deals/D1/emails/2025-01-01/2025-12-31";
const D2_EMAILS: &str = "mcp://crm/deals/D2/emails/2025-01-01/2025-12-31";
const D1_ACTIVITY: &str = "mcp://crm/deals/D1/activity";

/// A temporary project holding `hydrate.pipe` (the header and `nodes`), its replies and
/// the server's call log.
struct Crm {
    p: Project,
    log: PathBuf,
    /// `CRM_EMAILS` and `CRM_ACTIVITIES` for the server.
    emails: u32,
    activities: u32,
}

impl Crm {
    fn new(tag: &str, nodes: &str, replies: Value) -> Crm {
        Crm::with_email_type(tag, nodes, replies, "EmailPage")
    }

    /// A project whose `email-history` links hold `email_type`.
    fn with_email_type(tag: &str, nodes: &str, replies: Value, email_type: &str) -> Crm {
        let p = Project::new(tag);
        p.write(
            "hydrate.pipe",
            &format!("{}{nodes}", HEADER.replace("EMAIL_PAGE", email_type)),
        );
        p.write("replies.json", &replies.to_string());
        let log = p.dir.join("calls.log");
        Crm {
            p,
            log,
            emails: 10,
            activities: 3,
        }
    }

    fn pipec(&self, args: &[&str]) -> Output {
        self.p
            .cmd(args)
            .env("CRM_CALL_LOG", &self.log)
            .env("CRM_EMAILS", self.emails.to_string())
            .env("CRM_ACTIVITIES", self.activities.to_string())
            .stdin(Stdio::null())
            .output()
            .expect("pipec runs")
    }

    /// `pipec run hydrate.pipe` with `--input` for each `k=v`.
    fn run(&self, inputs: &[&str]) -> Output {
        let mut args = vec!["run", "hydrate.pipe"];
        for i in inputs {
            args.extend(["--input", i]);
        }
        self.pipec(&args)
    }

    /// A run that must complete; its outputs.
    fn outputs(&self, inputs: &[&str]) -> Value {
        let o = self.run(inputs);
        assert_eq!(code(&o), 0, "{}\n{}", stdout(&o), stderr(&o));
        json(&stdout(&o))
    }

    /// A run that must fail; its stderr.
    fn failure(&self, inputs: &[&str]) -> String {
        let o = self.run(inputs);
        let err = stderr(&o);
        assert_eq!(code(&o), 1, "{}\n{err}", stdout(&o));
        assert!(!err.contains("panicked"), "{err}");
        err
    }

    fn log_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// How often the server was asked to read `uri`.
    fn reads(&self, uri: &str) -> usize {
        let line = format!("read {uri}");
        self.log_lines().iter().filter(|l| **l == line).count()
    }

    /// The server's log lines for calls of `tool`.
    fn calls(&self, tool: &str) -> Vec<String> {
        let prefix = format!("tool {tool} ");
        self.log_lines()
            .into_iter()
            .filter(|l| l.starts_with(&prefix))
            .collect()
    }

    /// The newest thread of the project.
    fn thread(&self) -> String {
        let o = self.pipec(&["runs"]);
        thread_of(&stdout(&o)).expect("a thread")
    }

    fn show(&self, thread: &str) -> Value {
        let o = self.pipec(&["show", thread, "--json", "--internal"]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        json(&stdout(&o))
    }
}

/// The stored row of a node in `pipec show --json`.
fn node_row<'a>(show: &'a Value, name: &str) -> &'a Value {
    show["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["node"] == name))
        .unwrap_or_else(|| panic!("no row of `{name}`: {show:#}"))
}

/// The fetch statistics of a URI in `pipec show --json`.
fn resource_stats<'a>(show: &'a Value, uri: &str) -> &'a Value {
    show["resources"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["uri"] == uri))
        .unwrap_or_else(|| panic!("no fetches of {uri}: {}", show["resources"]))
}

// ---- Resources by URI -------------------------------------------------------------

#[test]
fn a_uri_binding_in_a_return_node_reads_the_resource_into_its_record() {
    let mut crm = Crm::new(
        "uri-return",
        r#"
input deal_id: string

type Count {
  deal_id: string
  events: int
}

node count(
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 100kb),
) -> Count {
  return = { deal_id: log.deal_id, events: len(log.activity) }
}

output count = count
"#,
        Value::Null,
    );
    crm.activities = 7;
    let out = crm.outputs(&["deal_id=D1"]);
    assert_eq!(out["count"], json!({ "deal_id": "D1", "events": 7 }));
    assert_eq!(crm.reads(D1_ACTIVITY), 1, "{:#?}", crm.log_lines());
}

#[test]
fn a_uri_binding_in_a_think_reaches_its_prompt_and_its_reply_quotes_the_content() {
    let crm = Crm::new(
        "uri-think",
        r#"
input deal_id: string

type Quote {
  text: string
}

think quote(
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 100kb),
) -> Quote {
  model = fast
  prompt = "Quote the first entry of {{ deal_id }}: {{ log.activity[0].summary }}"
}

node first(
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 100kb),
) -> string[] {
  return = log.activity[*].summary
}

output quote = quote
output first = first
"#,
        json!({ "quote": [{ "template": {
            "text": "{{ log.deal_id }} has {{ log.activity | length }} events, the first: {{ log.activity[0].summary }}"
        } }] }),
    );
    let out = crm.outputs(&["deal_id=D1"]);
    let first = out["first"][0].as_str().unwrap_or_default();
    assert!(!first.is_empty(), "{out}");
    assert_eq!(
        out["quote"]["text"],
        format!("D1 has 3 events, the first: {first}"),
        "the model was given the content, not a reference: {out}"
    );
}

#[test]
fn a_uri_binding_in_a_think_is_rendered_into_the_prompt_sent_to_the_endpoint() {
    let chat = ChatServer::start(Arc::new(|_, _| text(r#"{"text": "quoted"}"#)));
    let crm = Crm::new(
        "uri-think-endpoint",
        &format!(
            r#"
model llm {{
  provider = "openai"
  name = "test-model"
  base_url = "{}"
  api_key = secret("TEST_KEY")
}}

input deal_id: string

type Quote {{
  text: string
}}

think quote(
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{{deal_id}}/activity", max_bytes: 100kb),
) -> Quote {{
  model = llm
  prompt = "Quote {{{{ log.deal_id }}}}: {{{{ log.activity | map(attribute=\"summary\") | join(\" / \") }}}}"
}}

node summaries(
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{{deal_id}}/activity", max_bytes: 100kb),
) -> string[] {{
  return = log.activity[*].summary
}}

output quote = quote
output summaries = summaries
"#,
            chat.url
        ),
        Value::Null,
    );
    let o = crm
        .p
        .cmd(&["run", "hydrate.pipe", "--input", "deal_id=D1"])
        .env("CRM_CALL_LOG", &crm.log)
        .env("TEST_KEY", "sk-test-123456")
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs");
    assert_eq!(code(&o), 0, "{}\n{}", stdout(&o), stderr(&o));
    let out = json(&stdout(&o));
    assert_eq!(out["quote"]["text"], "quoted", "{out}");
    let summaries: Vec<&str> = out["summaries"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(summaries.len(), 3, "{out}");
    let requests = chat.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let sent: String = requests[0]["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["content"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        sent.contains(&format!("Quote D1: {}", summaries.join(" / "))),
        "the prompt holds the content: {sent}"
    );
    assert_eq!(crm.reads(D1_ACTIVITY), 1, "{:#?}", crm.log_lines());
}

#[test]
fn a_uri_binding_in_an_exec_node_reaches_the_command_on_its_stdin() {
    let crm = Crm::new(
        "uri-exec",
        r#"
input deal_id: string

node piped(
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 100kb),
) -> json {
  exec = ["./scripts/stdin.sh"]
}

output piped = piped
"#,
        Value::Null,
    );
    crm.p.script(
        "scripts/stdin.sh",
        "#!/bin/sh\ncat > stdin.json\nprintf '{\"ok\":true}\\n'\n",
    );
    let out = crm.outputs(&["deal_id=D1"]);
    assert_eq!(out["piped"], json!({ "ok": true }));
    let stdin = json(&crm.p.read("stdin.json"));
    assert_eq!(stdin["deal_id"], "D1", "{stdin:#}");
    assert_eq!(stdin["log"]["deal_id"], "D1", "{stdin:#}");
    assert_eq!(
        stdin["log"]["activity"].as_array().map(Vec::len),
        Some(3),
        "the command got the content: {stdin:#}"
    );
    assert!(
        stdin["log"].get("pipec_ref").is_none() && stdin["log"].get("uri").is_none(),
        "not a reference: {stdin:#}"
    );
}

#[test]
fn a_template_variable_with_a_dotted_path_expands_and_a_space_is_percent_encoded() {
    let crm = Crm::new(
        "uri-rfc6570",
        r#"
input deal_id: string

type Picked {
  deal_id: string
}

node pick(deal_id: string = input.deal_id) -> Picked {
  return = { deal_id: deal_id }
}

node read(
  deal: Picked = pick,
  log: ActivityLog = resource("mcp://crm/deals/{deal.deal_id}/activity", max_bytes: 100kb),
) -> string {
  return = log.deal_id
}

output read = read
"#,
        Value::Null,
    );
    let out = crm.outputs(&["deal_id=D 7"]);
    assert_eq!(out["read"], "D 7", "the server decoded the id it was sent");
    assert_eq!(
        crm.reads("mcp://crm/deals/D%207/activity"),
        1,
        "{:#?}",
        crm.log_lines()
    );
}

#[test]
fn a_uri_binding_the_server_does_not_serve_fails_with_r0105() {
    let crm = Crm::new(
        "uri-missing",
        r#"
input deal_id: string

node terms(
  deal_id: string = input.deal_id,
  contract: string = resource("mcp://crm/deals/{deal_id}/contract", max_bytes: 10kb),
) -> string {
  return = contract
}

output terms = terms
"#,
        Value::Null,
    );
    let err = crm.failure(&["deal_id=D1"]);
    assert!(err.contains("error[R0105]"), "{err}");
    assert!(
        err.contains("`contract`") && err.contains("mcp://crm/deals/D1/contract"),
        "{err}"
    );
}

#[test]
fn an_optional_uri_binding_the_server_does_not_serve_receives_null_instead_of_failing_r0105() {
    let crm = Crm::new(
        "uri-optional",
        r#"
input deal_id: string

node terms(
  deal_id: string = input.deal_id,
  contract: string? = resource("mcp://crm/deals/{deal_id}/contract", max_bytes: 10kb),
) -> string {
  return = contract ?? "no contract"
}

output terms = terms
"#,
        Value::Null,
    );
    let out = crm.outputs(&["deal_id=D1"]);
    assert_eq!(out["terms"], "no contract", "{out}");
    assert_eq!(crm.reads("mcp://crm/deals/D1/contract"), 1);
}

// ---- `when` -----------------------------------------------------------------------

/// `gated` binds its emails before the activity its `when` reads.
const GATED: &str = r#"
input deal_id: string
input min: int

type Out {
  events: int
  emails: int
}

node gated(
  deal_id: string = input.deal_id,
  min: int = input.min,
  mail: EmailPage = resource("mcp://crm/deals/{deal_id}/emails/2025-01-01/2025-03-31", max_bytes: 100kb),
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 100kb),
) -> Out {
  when = len(log.activity) >= min
  return = { events: len(log.activity), emails: mail.count }
}

output gated: Out? = gated
"#;

const D1_Q1_EMAILS: &str = "mcp://crm/deals/D1/emails/2025-01-01/2025-03-31";

#[test]
fn a_when_that_reads_a_resource_fetches_it_first_and_skips_the_node_without_reading_the_rest() {
    let crm = Crm::new("when-false", GATED, Value::Null);
    let out = crm.outputs(&["deal_id=D1", "min=5"]);
    assert_eq!(out["gated"], Value::Null, "{out}");
    assert_eq!(crm.reads(D1_ACTIVITY), 1, "{:#?}", crm.log_lines());
    assert_eq!(
        crm.reads(D1_Q1_EMAILS),
        0,
        "the emails are not read when `when` is false: {:#?}",
        crm.log_lines()
    );
    let show = crm.show(&crm.thread());
    assert_eq!(node_row(&show, "gated")["state"], "skipped", "{show:#}");
}

#[test]
fn a_when_that_holds_reads_its_own_resource_before_the_others() {
    let crm = Crm::new("when-true", GATED, Value::Null);
    let out = crm.outputs(&["deal_id=D1", "min=2"]);
    assert_eq!(out["gated"]["events"], 3, "{out}");
    assert!(
        out["gated"]["emails"].as_u64().is_some_and(|n| n > 0),
        "{out}"
    );
    assert_eq!(
        crm.log_lines(),
        [
            format!("read {D1_ACTIVITY}"),
            format!("read {D1_Q1_EMAILS}")
        ],
        "the resource `when` reads first, though it is declared last"
    );
}

#[test]
fn a_when_that_reads_a_link_skips_the_node_without_reading_its_other_links() {
    let crm = Crm::new(
        "when-link",
        r#"
input deal_id: string

node lookup(deal_id: string = input.deal_id) -> Deal {
  call = get_deal(deal_id: deal_id)
}

node busy(
  deal: Deal = lookup,
  page: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
  log: ActivityLog = resource(ref: "activity-history", max_bytes: 100kb),
) -> int {
  when = len(log.activity) > 100
  return = page.count
}

output busy: int? = busy
"#,
        Value::Null,
    );
    let out = crm.outputs(&["deal_id=D1"]);
    assert_eq!(out["busy"], Value::Null, "{out}");
    assert_eq!(crm.reads(D1_ACTIVITY), 1, "{:#?}", crm.log_lines());
    assert_eq!(crm.reads(D1_EMAILS), 0, "{:#?}", crm.log_lines());
}

#[test]
fn an_each_node_tests_a_when_that_reads_its_item_resource_per_item() {
    let crm = Crm::new(
        "when-each",
        r#"
input ids: string[]

node per(
  deal: string = each(input.ids, max: 5),
  log: ActivityLog = resource("mcp://crm/deals/{deal}/activity", max_bytes: 10kb),
) -> string {
  when = log.deal_id != "D2"
  return = log.deal_id
}

output per = per
"#,
        Value::Null,
    );
    let out = crm.outputs(&[r#"ids=["D1","D2","D3"]"#]);
    assert_eq!(out["per"], json!(["D1", "D3"]), "{out}");
    for d in ["D1", "D2", "D3"] {
        assert_eq!(crm.reads(&format!("mcp://crm/deals/{d}/activity")), 1);
    }
}

// ---- Gates ------------------------------------------------------------------------

#[test]
fn a_gate_that_binds_a_resource_is_refused_by_check_instead_of_failing_to_render_its_message() {
    let crm = Crm::new(
        "gate-resource",
        r#"
input deal_id: string

gate review(
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 10kb),
) -> Approval {
  message = "Go ahead with {{ log.deal_id }}?"
}

output approved = review.approved
"#,
        Value::Null,
    );
    let o = crm.pipec(&["check", "hydrate.pipe"]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(code(&o), 1, "{all}");
    assert!(all.contains("P0108"), "{all}");
    assert!(all.contains("the gate `review`"), "{all}");
    let o = crm.run(&["deal_id=D1"]);
    assert_eq!(
        code(&o),
        1,
        "a refused pipeline does not run: {}",
        stdout(&o)
    );
    assert_eq!(crm.reads(D1_ACTIVITY), 0, "{:#?}", crm.log_lines());
}

// ---- Link bindings ----------------------------------------------------------------

fn links(tag: &str, nodes: &str) -> Crm {
    Crm::new(tag, &format!("{RESEARCH}{nodes}"), research_replies())
}

#[test]
fn a_single_link_binding_among_two_links_of_its_kind_fails_with_r0106_listing_them() {
    let crm = links(
        "link-ambiguous",
        r#"
node one(
  found: Found = research,
  page: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
) -> string {
  return = page.deal_id
}

output one = one
"#,
    );
    let err = crm.failure(&["first=D1", "second=D2"]);
    assert!(err.contains("error[R0106]"), "{err}");
    assert!(err.contains("`page`"), "names the binding: {err}");
    assert!(
        err.contains(D1_EMAILS) && err.contains(D2_EMAILS),
        "lists the links: {err}"
    );
    assert!(err.contains("where:"), "says what to write: {err}");
    assert_eq!(crm.calls("get_deal").len(), 2, "{:#?}", crm.log_lines());
    assert_eq!(crm.reads(D1_EMAILS) + crm.reads(D2_EMAILS), 0);
}

#[test]
fn where_picks_the_link_whose_captured_variables_match() {
    let crm = links(
        "link-where",
        r#"
type One {
  deal_id: string
  count: int
}

node one(
  found: Found = research,
  want: string = input.second,
  page: EmailPage = resource(ref: "email-history", where: { deal_id: want }, max_bytes: 200kb),
) -> One {
  return = { deal_id: page.deal_id, count: page.count }
}

output one = one
"#,
    );
    let out = crm.outputs(&["first=D1", "second=D2"]);
    assert_eq!(out["one"], json!({ "deal_id": "D2", "count": 10 }));
    assert_eq!(crm.reads(D2_EMAILS), 1, "{:#?}", crm.log_lines());
    assert_eq!(crm.reads(D1_EMAILS), 0, "{:#?}", crm.log_lines());
}

const ALL_PAGES: &str = r#"
node all(
  found: Found = research,
  pages: EmailPage[] = resources(ref: "email-history", max_bytes: 200kb, max_total: TOTAL),
) -> string[] {
  return = pages[*].deal_id
}

output all = all
"#;

#[test]
fn resources_gives_every_link_of_its_kind_in_call_order() {
    let crm = links("links-all", &ALL_PAGES.replace("TOTAL", "1mb"));
    // Called D2 first: the list follows the calls, not the ids.
    let out = crm.outputs(&["first=D2", "second=D1"]);
    assert_eq!(out["all"], json!(["D2", "D1"]));
    assert_eq!(crm.reads(D1_EMAILS), 1);
    assert_eq!(crm.reads(D2_EMAILS), 1);
}

#[test]
fn resources_over_their_max_total_fail_with_r0101() {
    // Each page is just under 10 KB: each fits its `max_bytes`, both do not fit 15 KB.
    let crm = links("links-total", &ALL_PAGES.replace("TOTAL", "15kb"));
    let err = crm.failure(&["first=D1", "second=D2"]);
    assert!(err.contains("error[R0101]"), "{err}");
    assert!(err.contains("`pages`"), "names the binding: {err}");
    assert!(err.contains("`max_total` of 15 KB"), "names the cap: {err}");
}

#[test]
fn a_link_kind_no_call_returned_fails_with_r0105() {
    let crm = links(
        "link-missing",
        r#"
node terms(
  found: Found = research,
  contract: string = resource(ref: "contract", max_bytes: 10kb),
) -> string {
  return = contract
}

output terms = terms
"#,
    );
    let err = crm.failure(&["first=D1", "second=D2"]);
    assert!(err.contains("error[R0105]"), "{err}");
    assert!(
        err.contains("`contract`") && err.contains("`research`"),
        "names the binding and the producer: {err}"
    );
}

#[test]
fn a_where_no_link_matches_fails_with_r0105() {
    let crm = links(
        "link-where-none",
        r#"
node one(
  found: Found = research,
  page: EmailPage = resource(ref: "email-history", where: { deal_id: "D9" }, max_bytes: 200kb),
) -> string {
  return = page.deal_id
}

output one = one
"#,
    );
    let err = crm.failure(&["first=D1", "second=D2"]);
    assert!(err.contains("error[R0105]"), "{err}");
    assert!(err.contains("where:"), "{err}");
}

#[test]
fn an_optional_link_binding_that_finds_no_link_receives_null_instead_of_failing_r0105() {
    let crm = links(
        "link-optional",
        r#"
node terms(
  found: Found = research,
  contract: string? = resource(ref: "contract", max_bytes: 10kb),
  page: EmailPage? = resource(ref: "email-history", where: { deal_id: "D9" }, max_bytes: 200kb),
) -> string {
  return = contract ?? "no contract"
}

node missing(
  found: Found = research,
  page: EmailPage? = resource(ref: "email-history", where: { deal_id: "D9" }, max_bytes: 200kb),
) -> bool {
  return = page == null
}

output terms = terms
output missing = missing
"#,
    );
    let out = crm.outputs(&["first=D1", "second=D2"]);
    assert_eq!(out["terms"], "no contract", "{out}");
    assert_eq!(out["missing"], true, "{out}");
}

/// `picked` depends on two producers of `email-history`: the agent and `lookup`.
const TWO_PRODUCERS: &str = r#"
input third: string

node lookup(deal_id: string = input.third) -> Deal {
  call = get_deal(deal_id: deal_id)
}

node picked(
  found: Found = research,
  deal: Deal = lookup,
  page: EmailPage = resource(ref: "email-history"FROM, max_bytes: 200kb),
) -> string {
  return = page.deal_id
}

output picked = picked
"#;

#[test]
fn from_picks_the_producer_of_a_link_among_two() {
    let crm = links(
        "link-from",
        &TWO_PRODUCERS.replace("FROM", ", from: lookup"),
    );
    let out = crm.outputs(&["first=D1", "second=D2", "third=D3"]);
    assert_eq!(out["picked"], "D3");
    assert_eq!(
        crm.reads("mcp://crm/deals/D3/emails/2025-01-01/2025-12-31"),
        1
    );
    // Without `from:`, the two producers are ambiguous.
    crm.p.write(
        "ambiguous.pipe",
        &crm.p.read("hydrate.pipe").replace(", from: lookup", ""),
    );
    let o = crm.pipec(&["check", "ambiguous.pipe"]);
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    assert!(
        format!("{}{}", stdout(&o), stderr(&o)).contains("P0305"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
}

// ---- `each` over links ------------------------------------------------------------

const EACH_PAGE: &str = r#"
type Sized {
  deal_id: string
  count: int
}

node sizes(
  found: Found = research,
  page: EmailPage = each(resources(ref: "email-history", max_bytes: CAP), max: 10),
) -> Sized {
  return = { deal_id: page.deal_id, count: page.count }
}

output sizes = sizes
"#;

#[test]
fn each_over_resources_fans_out_over_the_links_instead_of_failing_as_unsupported() {
    // Each page is just under 10 KB, both together over 15 KB: the cap is per item.
    let crm = links("each-links", &EACH_PAGE.replace("CAP", "15kb"));
    let out = crm.outputs(&["first=D1", "second=D2"]);
    assert_eq!(
        out["sizes"],
        json!([
            { "deal_id": "D1", "count": 10 },
            { "deal_id": "D2", "count": 10 },
        ])
    );
    assert_eq!(crm.reads(D1_EMAILS), 1, "{:#?}", crm.log_lines());
    assert_eq!(crm.reads(D2_EMAILS), 1, "{:#?}", crm.log_lines());
}

#[test]
fn each_over_resources_caps_every_item_by_its_own_max_bytes_instead_of_failing_as_unsupported() {
    let crm = links("each-links-cap", &EACH_PAGE.replace("CAP", "5kb"));
    let err = crm.failure(&["first=D1", "second=D2"]);
    assert!(err.contains("error[R0101]"), "{err}");
    assert!(err.contains("`page`"), "{err}");
    assert!(err.contains("`max_bytes` of 5 KB"), "{err}");
}

#[test]
fn each_over_a_list_fetches_a_resource_whose_uri_names_the_item_once_per_item() {
    let crm = Crm::new(
        "each-uri",
        r#"
input ids: string[]

type Sized {
  deal_id: string
  events: int
}

node per(
  deal: string = each(input.ids, max: 5),
  log: ActivityLog = resource("mcp://crm/deals/{deal}/activity", max_bytes: 1kb),
) -> Sized {
  return = { deal_id: log.deal_id, events: len(log.activity) }
}

output per = per
"#,
        Value::Null,
    );
    let out = crm.outputs(&[r#"ids=["D1","D 2"]"#]);
    assert_eq!(
        out["per"],
        json!([
            { "deal_id": "D1", "events": 3 },
            { "deal_id": "D 2", "events": 3 },
        ])
    );
    assert_eq!(crm.reads(D1_ACTIVITY), 1);
    assert_eq!(crm.reads("mcp://crm/deals/D%202/activity"), 1);
}

// ---- `ref<T>` ---------------------------------------------------------------------

#[test]
fn a_ref_parameter_is_not_fetched_flows_on_as_a_value_and_is_fetched_where_its_type_is_declared() {
    let crm = links(
        "ref",
        r#"
type Held {
  deal_id: string
  page: ref<EmailPage>
}

node hold(
  found: Found = research,
  want: string = input.second,
  page: ref<EmailPage> = resource(ref: "email-history", where: { deal_id: want }),
) -> Held {
  return = { deal_id: want, page: page }
}

node pass(held: Held = hold) -> Held {
  return = held
}

gate review(held: Held = pass) -> Approval {
  message = "Read the emails of {{ held.deal_id }}?"
}

node use(ack: Approval = review, page: EmailPage = pass.page) -> int {
  return = page.count
}

output use = use
"#,
    );
    let o = crm.run(&["first=D1", "second=D2"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let thread = thread_of(&format!("{}\n{}", stdout(&o), stderr(&o))).expect("paused at the gate");
    assert_eq!(
        crm.reads(D2_EMAILS),
        0,
        "`hold` and `pass` keep the reference: {:#?}",
        crm.log_lines()
    );
    let show = crm.show(&thread);
    let held = &node_row(&show, "pass")["value"]["page"];
    assert_eq!(held["uri"], D2_EMAILS, "the reference flows on: {held:#}");
    assert!(held.get("pipec_ref").is_some(), "{held:#}");

    let o = crm.pipec(&["resume", &thread, "--answer", r#"review={"approved":true}"#]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["use"], 10);
    assert_eq!(crm.reads(D2_EMAILS), 1, "{:#?}", crm.log_lines());
    let show = crm.show(&thread);
    assert_eq!(
        resource_stats(&show, D2_EMAILS)["by"],
        json!(["use"]),
        "read by the node that declares `EmailPage`"
    );
}

#[test]
fn a_list_of_refs_kept_from_resources_flows_on_and_is_fetched_downstream_instead_of_failing_r0104()
{
    let crm = links(
        "refs",
        r#"
node hold(
  found: Found = research,
  pages: ref<EmailPage>[] = resources(ref: "email-history", max_bytes: 200kb),
) -> ref<EmailPage>[] {
  return = pages
}

node use(pages: EmailPage[] = hold) -> string[] {
  return = pages[*].deal_id
}

output use = use
"#,
    );
    let o = crm.run(&["first=D1", "second=D2"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["use"], json!(["D1", "D2"]));
    let show = crm.show(&crm.thread());
    let kept = &node_row(&show, "hold")["value"];
    assert_eq!(
        kept[0]["uri"], D1_EMAILS,
        "`hold` keeps the references: {kept:#}"
    );
    assert_eq!(kept[1]["uri"], D2_EMAILS, "{kept:#}");
    for uri in [D1_EMAILS, D2_EMAILS] {
        assert_eq!(crm.reads(uri), 1, "{:#?}", crm.log_lines());
        assert_eq!(
            resource_stats(&show, uri)["by"],
            json!(["use"]),
            "read by the node that declares `EmailPage[]`"
        );
    }
}

/// `hold` keeps a reference to D1's emails with a cap; `use` fetches it downstream.
const KEPT_WITH_A_CAP: &str = r#"
input deal_id: string

node hold(
  deal_id: string = input.deal_id,
  page: ref<EmailPage> = resource("mcp://crm/deals/{deal_id}/emails/2025-01-01/2025-12-31", max_bytes: CAP),
) -> ref<EmailPage> {
  return = page
}

node use(page: EmailPage = hold) -> int {
  return = page.count
}

output use = use
"#;

#[test]
fn a_ref_fetched_downstream_is_read_within_the_max_bytes_of_the_binding_that_kept_it() {
    let crm = Crm::new(
        "ref-cap",
        &KEPT_WITH_A_CAP.replace("CAP", "2kb"),
        Value::Null,
    );
    let err = crm.failure(&["deal_id=D1"]);
    assert!(err.contains("error[R0101]"), "{err}");
    assert!(
        err.contains("`page` of `use`") && err.contains(D1_EMAILS),
        "{err}"
    );
    assert!(
        err.contains("`max_bytes` of 2 KB"),
        "the cap written on `hold`, not the default: {err}"
    );
    assert!(
        err.contains("kept upstream"),
        "says where to raise it: {err}"
    );
}

#[test]
fn a_ref_kept_with_a_max_bytes_above_the_default_is_fetched_downstream_within_it() {
    // 17,500 emails are ~17 MB, over the 16 MB of a binding without `max_bytes`.
    let mut crm = Crm::new(
        "ref-cap-big",
        &KEPT_WITH_A_CAP.replace("CAP", "30mb"),
        Value::Null,
    );
    crm.emails = 17_500;
    let out = crm.outputs(&["deal_id=D1"]);
    assert_eq!(out["use"], 17_500);
}

// ---- MIME types and parsing -------------------------------------------------------

#[test]
fn json_content_parses_into_a_record_and_is_kept_as_text_for_a_string() {
    let crm = Crm::new(
        "mime-json",
        r#"
input deal_id: string

node record(
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 100kb),
) -> int {
  return = len(log.activity)
}

node text(
  deal_id: string = input.deal_id,
  log: string = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 100kb),
) -> string {
  return = log
}

output record = record
output text = text
"#,
        Value::Null,
    );
    let out = crm.outputs(&["deal_id=D1"]);
    assert_eq!(out["record"], 3);
    let text = out["text"].as_str().expect("a string, not a record");
    let parsed = json(text);
    assert_eq!(parsed["deal_id"], "D1");
    assert_eq!(parsed["activity"].as_array().map(Vec::len), Some(3));
}

#[test]
fn content_that_does_not_fit_its_type_is_r0104_and_is_not_healed() {
    let crm = Crm::with_email_type(
        "mime-mismatch",
        r#"
type StrictPage {
  deal_id: string
  count: int
  owner: string
}

input deal_id: string

node lookup(deal_id: string = input.deal_id) -> Deal {
  call = get_deal(deal_id: deal_id)
}

node strict(
  deal: Deal = lookup,
  page: StrictPage = resource(ref: "email-history", max_bytes: 200kb),
) -> string {
  return = page.owner
}

output strict = strict
"#,
        Value::Null,
        "StrictPage",
    );
    let err = crm.failure(&["deal_id=D1"]);
    assert!(err.contains("error[R0104]"), "{err}");
    assert!(err.contains("`page`") && err.contains(D1_EMAILS), "{err}");
    assert!(err.contains("owner"), "names the missing field: {err}");
    assert_eq!(
        crm.calls("get_deal").len(),
        1,
        "no replay of the producer: {:#?}",
        crm.log_lines()
    );
    assert_eq!(crm.reads(D1_EMAILS), 1, "{:#?}", crm.log_lines());
    let show = crm.show(&crm.thread());
    assert_eq!(show["heals"], json!([]), "{show:#}");
    assert_eq!(show["error"]["code"], "R0104", "{}", show["error"]);
}

// ---- The fetch cache --------------------------------------------------------------

#[test]
fn nodes_of_one_attempt_share_a_read_and_a_resume_reads_again() {
    let crm = Crm::new(
        "cache",
        r#"
input deal_id: string

node a(
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 100kb),
) -> int {
  return = len(log.activity)
}

node b(
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 100kb),
) -> string {
  return = log.deal_id
}

gate review(n: int = a, id: string = b) -> Approval {
  message = "{{ id }} has {{ n }} events; read them again?"
}

node c(
  ack: Approval = review,
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 100kb),
) -> int {
  return = len(log.activity)
}

output c = c
"#,
        Value::Null,
    );
    let o = crm.run(&["deal_id=D1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let thread = thread_of(&format!("{}\n{}", stdout(&o), stderr(&o))).expect("paused at the gate");
    assert_eq!(
        crm.reads(D1_ACTIVITY),
        1,
        "`a` and `b` share one read: {:#?}",
        crm.log_lines()
    );
    let show = crm.show(&thread);
    let stats = resource_stats(&show, D1_ACTIVITY);
    assert_eq!(
        (stats["fetches"].as_u64(), stats["cache_hits"].as_u64()),
        (Some(1), Some(1)),
        "{stats}"
    );

    let o = crm.pipec(&["resume", &thread, "--answer", r#"review={"approved":true}"#]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["c"], 3);
    assert_eq!(
        crm.reads(D1_ACTIVITY),
        2,
        "a resume starts with an empty cache: {:#?}",
        crm.log_lines()
    );
    let show = crm.show(&thread);
    let stats = resource_stats(&show, D1_ACTIVITY);
    assert_eq!(
        (stats["fetches"].as_u64(), stats["cache_hits"].as_u64()),
        (Some(2), Some(1)),
        "{stats}"
    );
}

// ---- Caps -------------------------------------------------------------------------

const CAPPED: &str = r#"
input deal_id: string

node big(
  deal_id: string = input.deal_id,
  page: EmailPage = resource("mcp://crm/deals/{deal_id}/emails/2025-01-01/2025-12-31", max_bytes: CAP),
) -> int {
  return = page.count
}

output big = big
"#;

/// The size an R0101 message gives: the `N.N KB` before ", over its".
fn size_in(err: &str) -> f64 {
    let before = err.split(", over its").next().unwrap_or("");
    let size = before.rsplit(" is ").next().unwrap_or("");
    size.strip_suffix(" KB")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no size in KB: {err}"))
}

fn assert_capped(crm: &Crm, cap: &str, at_least_kb: f64) {
    let err = crm.failure(&["deal_id=D1"]);
    assert!(err.contains("error[R0101]"), "{err}");
    assert!(err.contains("`page`"), "names the binding: {err}");
    assert!(err.contains(D1_EMAILS), "names the URI: {err}");
    assert!(
        err.contains(&format!("`max_bytes` of {cap}")),
        "names the cap: {err}"
    );
    assert!(size_in(&err) >= at_least_kb, "names the size: {err}");
    let store = std::fs::read(crm.p.store()).expect("the store");
    let needle = b"\"subject\"";
    assert!(
        !store.windows(needle.len()).any(|w| w == needle),
        "the store holds no email"
    );
}

#[test]
fn content_over_its_max_bytes_fails_with_r0101_naming_the_binding_uri_size_and_cap() {
    let crm = Crm::new("cap", &CAPPED.replace("CAP", "2kb"), Value::Null);
    assert_capped(&crm, "2 KB", 9.0);
}

#[test]
fn an_answer_far_over_its_max_bytes_is_read_past_and_fails_with_r0101() {
    // 300 emails are ~290 KB, past the transport's limit of twice the cap plus 64 KB.
    let mut crm = Crm::new("cap-far", &CAPPED.replace("CAP", "10kb"), Value::Null);
    crm.emails = 300;
    assert_capped(&crm, "10 KB", 250.0);
}

// ---- More shapes: `from:` off the path, `each` with `where:` and shared resources,
// `{+var}`, `resources` in a prompt, nested resources, a `ref<T>` link into `exec` ---

#[test]
fn from_names_a_producer_the_node_does_not_otherwise_depend_on() {
    let crm = Crm::new(
        "probe-from",
        r#"
input deal_id: string

node lookup(deal_id: string = input.deal_id) -> Deal {
  call = get_deal(deal_id: deal_id)
}

node picked(
  page: EmailPage = resource(ref: "email-history", from: lookup, max_bytes: 200kb),
) -> string {
  return = page.deal_id
}

output picked = picked
"#,
        Value::Null,
    );
    let out = crm.outputs(&["deal_id=D4"]);
    assert_eq!(out["picked"], "D4");
}

#[test]
fn each_item_picks_its_own_link_with_a_where_that_names_the_item() {
    let crm = links(
        "probe-each-where",
        r#"
input ids: string[]

node per(
  found: Found = research,
  id: string = each(input.ids, max: 5),
  page: EmailPage = resource(ref: "email-history", where: { deal_id: id }, max_bytes: 200kb),
) -> string {
  return = page.deal_id
}

output per = per
"#,
    );
    let out = crm.outputs(&["first=D1", "second=D2", r#"ids=["D2","D1"]"#]);
    assert_eq!(out["per"], json!(["D2", "D1"]));
    assert_eq!(crm.reads(D1_EMAILS), 1);
    assert_eq!(crm.reads(D2_EMAILS), 1);
}

#[test]
fn an_item_whose_link_matches_nothing_fails_the_node_when_it_is_bound_and_names_the_binding() {
    // Items are bound as they start: the first item reads its page; the second finds
    // no link for its id, and the node fails with that binding's error.
    let crm = links(
        "probe-each-where-missing",
        r#"
input ids: string[]

node per(
  found: Found = research,
  id: string = each(input.ids, max: 5),
  page: EmailPage = resource(ref: "email-history", where: { deal_id: id }, max_bytes: 200kb),
) -> string {
  return = page.deal_id
  concurrency = 1
}

output per = per
"#,
    );
    let err = crm.failure(&["first=D1", "second=D2", r#"ids=["D2","D9"]"#]);
    assert!(err.contains("error[R0105]"), "{err}");
    assert!(err.contains("`page`"), "names the binding: {err}");
    assert!(
        err.contains("`research`") && err.contains("where:"),
        "{err}"
    );
    assert_eq!(
        crm.reads(D2_EMAILS),
        1,
        "the first item ran: {:#?}",
        crm.log_lines()
    );
    assert_eq!(crm.reads(D1_EMAILS), 0);
}

#[test]
fn each_item_shares_one_read_of_a_resource_whose_uri_does_not_name_the_item() {
    let crm = Crm::new(
        "probe-each-shared",
        r#"
input ids: string[]
input deal_id: string

node per(
  id: string = each(input.ids, max: 5),
  deal_id: string = input.deal_id,
  log: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 10kb),
) -> string[] {
  return = [id, log.deal_id]
}

output per = per
"#,
        Value::Null,
    );
    let out = crm.outputs(&[r#"ids=["a","b","c"]"#, "deal_id=D1"]);
    assert_eq!(
        out["per"],
        json!([["a", "D1"], ["b", "D1"], ["c", "D1"]]),
        "{out}"
    );
    assert_eq!(
        crm.reads(D1_ACTIVITY),
        1,
        "one read for the three items: {:#?}",
        crm.log_lines()
    );
    let show = crm.show(&crm.thread());
    assert_eq!(resource_stats(&show, D1_ACTIVITY)["fetches"], 1);
}

#[test]
fn a_reserved_expansion_keeps_the_slashes_of_its_value() {
    let crm = Crm::new(
        "probe-plus",
        r#"
input tail: string

node read(
  tail: string = input.tail,
  log: ActivityLog = resource("mcp://crm/deals/{+tail}", max_bytes: 10kb),
) -> string {
  return = log.deal_id
}

output read = read
"#,
        Value::Null,
    );
    let out = crm.outputs(&["tail=D1/activity"]);
    assert_eq!(out["read"], "D1");
    assert_eq!(crm.reads(D1_ACTIVITY), 1);
}

#[test]
fn a_think_sees_every_link_of_resources_in_call_order() {
    let crm = Crm::new(
        "probe-think-list",
        &format!(
            "{RESEARCH}{}",
            r#"
type Quote {
  text: string
}

think quote(
  found: Found = research,
  pages: EmailPage[] = resources(ref: "email-history", max_bytes: 200kb, max_total: 1mb),
) -> Quote {
  model = fast
  prompt = "{{ pages | length }} pages"
}

output quote = quote
"#
        ),
        {
            let mut r = research_replies();
            r["quote"] = json!([{ "template": { "text": "{{ pages[0].deal_id }}+{{ pages[1].deal_id }}" } }]);
            r
        },
    );
    let out = crm.outputs(&["first=D1", "second=D2"]);
    assert_eq!(out["quote"]["text"], "D1+D2");
}

#[test]
fn a_resource_inside_a_record_source_is_refused_by_check_instead_of_failing_as_unsupported() {
    let crm = Crm::new(
        "nested-resource",
        r#"
input deal_id: string

type Both {
  id: string
  log: ActivityLog
}

node read(
  deal_id: string = input.deal_id,
  both: Both = { id: input.deal_id, log: resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 10kb) },
) -> string {
  return = both.log.deal_id
}

output read = read
"#,
        Value::Null,
    );
    let o = crm.pipec(&["check", "hydrate.pipe"]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(code(&o), 1, "{all}");
    assert!(all.contains("P0108"), "{all}");
    assert!(
        all.contains("a resource cannot be a part of a record source")
            && all.contains("a parameter of its own"),
        "{all}"
    );
    let o = crm.run(&["deal_id=D1"]);
    assert_eq!(
        code(&o),
        1,
        "a refused pipeline does not run: {}",
        stdout(&o)
    );
    assert!(!stderr(&o).contains("R0005"), "{}", stderr(&o));
    assert_eq!(crm.reads(D1_ACTIVITY), 0, "{:#?}", crm.log_lines());
}

#[test]
fn a_ref_to_a_link_is_fetched_by_an_exec_node_that_declares_its_type() {
    let crm = Crm::new(
        "probe-ref-exec",
        r#"
input deal_id: string

node lookup(deal_id: string = input.deal_id) -> Deal {
  call = get_deal(deal_id: deal_id)
}

node hold(
  deal: Deal = lookup,
  page: ref<EmailPage> = resource(ref: "email-history", max_bytes: 200kb),
) -> ref<EmailPage> {
  return = page
}

node piped(page: EmailPage = hold) -> json {
  exec = ["./scripts/stdin.sh"]
}

output piped = piped
"#,
        Value::Null,
    );
    crm.p.script(
        "scripts/stdin.sh",
        "#!/bin/sh\ncat > stdin.json\nprintf '{\"ok\":true}\\n'\n",
    );
    let o = crm.run(&["deal_id=D1"]);
    assert_eq!(code(&o), 0, "{}\n{}", stdout(&o), stderr(&o));
    let stdin = json(&crm.p.read("stdin.json"));
    assert_eq!(stdin["page"]["count"], 10, "{stdin}");
}
