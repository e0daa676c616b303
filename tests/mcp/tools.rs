//! `pipec tools pull` and `pipec check --online`, end to end through the binary, against
//! `pipec-demo-crm`, the CRM fixture and a server of fixed resources on the official
//! Python SDK, a standard-library server whose tools have schemas to type and which
//! speaks an old protocol, and a lax one (`{}` for what it does not know, a tool that
//! runs only as a task).

// A value that is not there fails the test, which is what these unwraps say.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::python::{
    crm_server, lax_server, on_path, python, python_with_mcp, reports_server, schema_server,
};
use common::{Project, code, json, stderr, stdout};

fn demo_crm() -> &'static str {
    common::demo_crm_bin().to_str().expect("a UTF-8 path")
}

/// A `.pipe` string literal.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string")
}

/// The `server` block of the demo CRM, under `name`.
fn demo_server(name: &str) -> String {
    format!("server {name} {{\n  command = {}\n}}\n", quoted(demo_crm()))
}

/// Declarations that fit the demo CRM exactly (a library: nothing is reported unused).
fn crm_library() -> String {
    demo_server("crm")
        + r#"
type Deal {
  deal_id: string
  name: string
}

tool get_deal(deal_id: string) -> Deal from crm {
  read_only = true
}

tool arm_expiry(count: int = 1) -> json from crm {
  idempotent = true
  destructive = false
}

reader read_emails(deal_id: string, start: string, end: string) -> json from crm {
  uri = "mcp://crm/deals/{deal_id}/emails/{start}/{end}"
  max_bytes = 100kb
}
"#
}

/// The same declarations, with one edit.
fn crm_library_with(from: &str, to: &str) -> String {
    let text = crm_library();
    assert!(text.contains(from), "the library has no {from:?}");
    text.replacen(from, to, 1)
}

/// `check --online --format json` of one file: the exit code and the diagnostics.
fn check_online(p: &Project, file: &str) -> (i32, Vec<serde_json::Value>) {
    let out = p.run(&["check", "--online", "--format", "json", file]);
    let doc = json(&stdout(&out));
    let diags = doc["diagnostics"].as_array().cloned().unwrap_or_default();
    (code(&out), diags)
}

/// The diagnostics of one code.
fn with_code<'a>(diags: &'a [serde_json::Value], code: &str) -> Vec<&'a serde_json::Value> {
    diags.iter().filter(|d| d["code"] == code).collect()
}

/// The 1-based line of the first line of `text` that contains `needle`.
fn line_of(text: &str, needle: &str) -> u64 {
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i as u64 + 1)
        .unwrap_or_else(|| panic!("no line holds {needle:?}"))
}

fn python_command(script: &Path, python: &str) -> String {
    format!("{} {}", on_path(python).display(), script.display())
}

// ------------------------------------------------------------------ check --online

#[test]
fn online_check_of_declarations_that_fit_the_server_is_clean() {
    let p = Project::new("online-clean");
    p.write("crm.pipe", &crm_library());
    let out = p.run(&["check", "--online", "--deny", "warnings", "crm.pipe"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stdout(&out), "", "a clean check prints nothing");
}

#[test]
fn online_check_finds_a_renamed_tool_and_suggests_the_servers_name() {
    let p = Project::new("online-renamed");
    let text = crm_library_with("tool get_deal(", "tool get_deals(");
    p.write("crm.pipe", &text);
    let (exit, diags) = check_online(&p, "crm.pipe");
    assert_eq!(exit, 1, "{diags:#?}");
    let found = with_code(&diags, "R0502");
    assert_eq!(found.len(), 1, "{diags:#?}");
    let d = found[0];
    assert_eq!(d["severity"], "error");
    assert_eq!(d["line"], line_of(&text, "tool get_deals("));
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("has no tool `get_deals`"),
        "{d:#?}"
    );
    assert!(
        d["help"]
            .as_str()
            .unwrap()
            .contains("did you mean `get_deal`?"),
        "{d:#?}"
    );
}

#[test]
fn online_check_warns_of_a_parameter_an_open_schema_does_not_list() {
    let p = Project::new("online-unlisted");
    let text = crm_library_with(
        "get_deal(deal_id: string)",
        "get_deal(deal_id: string, limit: int?)",
    );
    p.write("crm.pipe", &text);
    let (exit, diags) = check_online(&p, "crm.pipe");
    // A warning: the demo's schema is open, so a run is not refused.
    assert_eq!(exit, 0, "{diags:#?}");
    let found = with_code(&diags, "P0702");
    assert_eq!(found.len(), 1, "{diags:#?}");
    assert_eq!(found[0]["severity"], "warning");
    assert_eq!(found[0]["line"], line_of(&text, "limit: int?"));
    assert!(found[0]["message"].as_str().unwrap().contains("`limit`"));
    let denied = p.run(&["check", "--online", "--deny", "warnings", "crm.pipe"]);
    assert_eq!(code(&denied), 1);
}

#[test]
fn online_check_refuses_a_parameter_a_closed_schema_does_not_know() {
    let p = Project::new("online-unknown-param");
    let text = format!(
        "server tracker {{\n  command = {}\n  args = [{}]\n}}\n\n{}",
        quoted(&on_path(&python()).display().to_string()),
        quoted(&schema_server().display().to_string()),
        r#"tool search_tickets(query: string, limt: int?) -> json from tracker {
  name = "search-tickets"
}
"#
    );
    p.write("tracker.pipe", &text);
    let (exit, diags) = check_online(&p, "tracker.pipe");
    assert_eq!(exit, 1, "{diags:#?}");
    let found = with_code(&diags, "R0502");
    assert_eq!(found.len(), 1, "{diags:#?}");
    let d = found[0];
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("the server does not know the parameter `limt`"),
        "{d:#?}"
    );
    let line = line_of(&text, "limt");
    assert_eq!(d["line"], line);
    let column = text
        .lines()
        .nth(line as usize - 1)
        .and_then(|l| l.find("limt"));
    assert_eq!(d["column"].as_u64(), column.map(|c| c as u64 + 1));
    assert!(d["help"].as_str().unwrap().contains("page-size"), "{d:#?}");
}

#[test]
fn online_check_finds_a_missing_required_parameter() {
    let p = Project::new("online-required");
    let text = crm_library_with("get_deal(deal_id: string)", "get_deal(dael_id: string)");
    p.write("crm.pipe", &text);
    let (exit, diags) = check_online(&p, "crm.pipe");
    assert_eq!(exit, 1, "{diags:#?}");
    let required = with_code(&diags, "R0502");
    assert_eq!(required.len(), 1, "{diags:#?}");
    let d = required[0];
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("the server requires `deal_id`, which the declaration does not send"),
        "{d:#?}"
    );
    assert_eq!(d["line"], line_of(&text, "tool get_deal("));
    assert!(
        d["help"]
            .as_str()
            .unwrap()
            .contains("rename `dael_id` to `deal_id`"),
        "{d:#?}"
    );
    // The misspelt one is not listed either.
    assert_eq!(with_code(&diags, "P0702").len(), 1, "{diags:#?}");
}

#[test]
fn online_check_finds_a_reader_template_the_server_does_not_serve() {
    let p = Project::new("online-template");
    let text = crm_library_with("/emails/{start}", "/mail/{start}");
    p.write("crm.pipe", &text);
    let (exit, diags) = check_online(&p, "crm.pipe");
    assert_eq!(exit, 0, "a warning: {diags:#?}");
    let found = with_code(&diags, "P0703");
    assert_eq!(found.len(), 1, "{diags:#?}");
    assert_eq!(found[0]["line"], line_of(&text, "reader read_emails("));
    let help = found[0]["help"].as_str().unwrap();
    assert!(
        help.contains("mcp://crm/deals/{deal_id}/emails/{start}/{end}")
            && help.contains("mcp://crm/deals/{deal_id}/activity"),
        "the help lists the server's templates: {help}"
    );
}

#[test]
fn online_check_finds_a_resource_binding_the_server_does_not_serve() {
    let p = Project::new("online-binding");
    let text = demo_server("crm")
        + r#"
input deal_id: string

node activity(
  deal_id: string = input.deal_id,
  log: json = resource("mcp://crm/deals/{deal_id}/activities", max_bytes: 50kb),
) -> json {
  return = log
}

output log = activity
"#;
    p.write("deal.pipe", &text);
    let (_, diags) = check_online(&p, "deal.pipe");
    let found = with_code(&diags, "P0703");
    assert_eq!(found.len(), 1, "{diags:#?}");
    assert_eq!(found[0]["line"], line_of(&text, "/activities"));
    // Fixed, it is served.
    p.write("deal.pipe", &text.replace("/activities", "/activity"));
    let (exit, diags) = check_online(&p, "deal.pipe");
    assert_eq!((exit, diags.len()), (0, 0), "{diags:#?}");
}

#[test]
fn online_check_warns_of_an_annotation_contradiction() {
    let p = Project::new("online-annotation");
    let text = crm_library_with(
        "  idempotent = true\n  destructive = false\n",
        "  read_only = true\n",
    );
    p.write("crm.pipe", &text);
    let (exit, diags) = check_online(&p, "crm.pipe");
    assert_eq!(exit, 0, "a warning: {diags:#?}");
    let found = with_code(&diags, "P0701");
    assert_eq!(found.len(), 1, "{diags:#?}");
    let d = found[0];
    assert_eq!(d["severity"], "warning");
    assert_eq!(d["line"], line_of(&text, "tool arm_expiry("));
    assert!(
        d["message"].as_str().unwrap().contains(
            "the server `crm` says `arm_expiry` is not read-only, and the declaration says it is read-only"
        ),
        "{d:#?}"
    );
    assert!(d["help"].as_str().unwrap().contains("`read_only = false`"));
}

#[test]
fn online_check_warns_of_links_on_a_server_too_old_to_return_them() {
    let p = Project::new("online-links");
    let server = |version: &str| {
        format!(
            "server tracker {{\n  command = {}\n  args = [{}, {}]\n}}\n",
            quoted(&on_path(&python()).display().to_string()),
            quoted(&schema_server().display().to_string()),
            quoted(version)
        )
    };
    let rest = r#"
link "owner": json = "tracker://owners/{id}"

tool get_owner(account: { id: string }) -> json from tracker {
  name = "getOwner"
  read_only = true
  links = ["owner"]
}
"#;
    let text = server("2025-03-26") + rest;
    p.write("tracker.pipe", &text);
    let (exit, diags) = check_online(&p, "tracker.pipe");
    assert_eq!(exit, 0, "a warning: {diags:#?}");
    let found = with_code(&diags, "P0704");
    assert_eq!(found.len(), 1, "{diags:#?}");
    assert_eq!(found[0]["line"], line_of(&text, "links = "));
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains("MCP 2025-03-26")
    );
    // The same server on the protocol that brought links is fine.
    p.write("tracker.pipe", &(server("2025-06-18") + rest));
    let (_, diags) = check_online(&p, "tracker.pipe");
    assert!(with_code(&diags, "P0704").is_empty(), "{diags:#?}");
}

#[test]
fn online_check_reports_a_server_that_cannot_start_with_its_stderr() {
    let p = Project::new("online-broken");
    p.script(
        "broken-server.sh",
        "#!/bin/sh\necho 'tracker: TRACKER_TOKEN is not set' >&2\nexit 3\n",
    );
    let text = "server tracker {\n  command = \"./broken-server.sh\"\n}\n\ntool search(query: string) -> json from tracker {\n  read_only = true\n}\n";
    p.write("tracker.pipe", text);
    let (exit, diags) = check_online(&p, "tracker.pipe");
    assert_eq!(exit, 1, "{diags:#?}");
    let found = with_code(&diags, "R0501");
    assert_eq!(found.len(), 1, "{diags:#?}");
    let d = found[0];
    assert_eq!(d["line"], 1);
    let message = d["message"].as_str().unwrap();
    assert!(message.contains("`tracker`"), "{message}");
    assert!(
        message.contains("TRACKER_TOKEN is not set"),
        "the stderr tail is in the message: {message}"
    );
}

#[test]
fn online_check_starts_no_server_whose_configuration_is_missing() {
    let p = Project::new("online-config");
    let marker = p.dir.join("started");
    p.script(
        "server.sh",
        &format!(
            "#!/bin/sh\ntouch {}\nexec {}\n",
            marker.display(),
            demo_crm()
        ),
    );
    let text = "server crm {\n  command = \"./server.sh\"\n  env = { TOKEN: secret(\"PIPEC_TOOLS_TEST_UNSET\") }\n}\n";
    p.write("crm.pipe", text);
    let out = p
        .cmd(&["check", "--online", "--format", "json", "crm.pipe"])
        .env_remove("PIPEC_TOOLS_TEST_UNSET")
        .output()
        .expect("pipec runs");
    let doc = json(&stdout(&out));
    let diags = doc["diagnostics"].as_array().cloned().unwrap_or_default();
    assert_eq!(code(&out), 1, "{diags:#?}");
    let found = with_code(&diags, "R0002");
    assert_eq!(found.len(), 1, "{diags:#?}");
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains("PIPEC_TOOLS_TEST_UNSET")
    );
    assert!(
        !marker.exists(),
        "the server was started without its secret"
    );
}

#[test]
fn check_without_online_starts_no_server() {
    let p = Project::new("offline");
    let marker = p.dir.join("started");
    p.script(
        "server.sh",
        &format!(
            "#!/bin/sh\ntouch {}\nexec {}\n",
            marker.display(),
            demo_crm()
        ),
    );
    let text = crm_library().replacen(&quoted(demo_crm()), "\"./server.sh\"", 1);
    p.write("crm.pipe", &text);
    let out = p.run(&["check", "crm.pipe"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(!marker.exists(), "`pipec check` started the server");
    // The script does start the server when asked to, so the check above means something.
    let out = p.run(&["check", "--online", "crm.pipe"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(marker.exists(), "`--online` did not start the server");
}

#[test]
fn online_check_skips_a_file_with_errors_and_says_so() {
    let p = Project::new("online-errors");
    let marker = p.dir.join("started");
    p.script(
        "server.sh",
        &format!(
            "#!/bin/sh\ntouch {}\nexec {}\n",
            marker.display(),
            demo_crm()
        ),
    );
    let text = crm_library().replacen(&quoted(demo_crm()), "\"./server.sh\"", 1)
        + "\ntype Broken = Missing\n";
    p.write("crm.pipe", &text);
    let out = p.run(&["check", "--online", "crm.pipe"]);
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).contains("P0101"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("started none of its servers"),
        "{}",
        stderr(&out)
    );
    assert!(!marker.exists());
}

#[test]
fn online_findings_are_in_sarif_with_their_rules() {
    let p = Project::new("online-sarif");
    p.write(
        "crm.pipe",
        &crm_library_with("tool get_deal(", "tool get_deals("),
    );
    let out = p.run(&["check", "--online", "--format", "sarif", "crm.pipe"]);
    let doc = json(&stdout(&out));
    let run = &doc["runs"][0];
    let result = &run["results"][0];
    assert_eq!(result["ruleId"], "R0502");
    let index = result["ruleIndex"].as_u64().expect("a rule index") as usize;
    assert_eq!(run["tool"]["driver"]["rules"][index]["id"], "R0502");
}

#[test]
fn online_check_against_the_python_sdk_server() {
    let p = Project::new("online-python");
    let server = format!(
        "server crm {{\n  command = {}\n  args = [{}]\n}}\n",
        quoted(&on_path(&python_with_mcp()).display().to_string()),
        quoted(&crm_server().display().to_string())
    );
    let text = server
        + r#"
tool get_deals(deal_id: string) -> json from crm {
  read_only = true
}

tool arm_expiry(count: int = 1) -> json from crm {
  idempotent = true
  destructive = false
}
"#;
    p.write("crm.pipe", &text);
    let (exit, diags) = check_online(&p, "crm.pipe");
    assert_eq!(exit, 1, "{diags:#?}");
    let renamed = with_code(&diags, "R0502");
    assert_eq!(renamed.len(), 1, "{diags:#?}");
    assert!(renamed[0]["help"].as_str().unwrap().contains("`get_deal`"));
    // The SDK's server says arm_expiry is not idempotent.
    let contradiction = with_code(&diags, "P0701");
    assert_eq!(contradiction.len(), 1, "{diags:#?}");
    assert!(
        contradiction[0]["message"]
            .as_str()
            .unwrap()
            .contains("is not idempotent")
    );
}

// ------------------------------------------------------------------ tools pull

/// `pipec tools pull` with these arguments in the project; its stdout.
fn pull(p: &Project, args: &[&str]) -> String {
    let mut all = vec!["tools", "pull"];
    all.extend_from_slice(args);
    let out = p.run(&all);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

/// The text of the declaration that starts with `head`, to its closing brace.
fn declaration<'a>(text: &'a str, head: &str) -> &'a str {
    let start = text
        .find(head)
        .unwrap_or_else(|| panic!("no {head:?} in:\n{text}"));
    let end = text[start..]
        .find("\n}")
        .map_or(text.len(), |e| start + e + 2);
    &text[start..end]
}

fn assert_checks_clean(p: &Project, file: &str, online: bool) {
    let mut args = vec!["check", "--deny", "warnings", file];
    if online {
        args.insert(1, "--online");
    }
    let out = p.run(&args);
    assert_eq!(
        code(&out),
        0,
        "{file} does not check clean:\n{}{}\n{}",
        stdout(&out),
        stderr(&out),
        p.read(file)
    );
}

#[test]
fn pulled_declarations_of_the_demo_crm_pass_check_online_and_off() {
    let p = Project::new("pull-demo");
    let text = pull(&p, &["crm", "--command", demo_crm()]);
    assert!(
        text.contains(&format!("command = {}", quoted(demo_crm()))),
        "{text}"
    );
    p.write("crm.pipe", &text);
    assert_checks_clean(&p, "crm.pipe", false);
    // What the server says fits what was pulled from it: no mismatch, no contradiction.
    assert_checks_clean(&p, "crm.pipe", true);
}

#[test]
fn pulled_declarations_of_the_python_sdk_server_pass_check_online_and_off() {
    let p = Project::new("pull-python");
    let command = python_command(&crm_server(), &python_with_mcp());
    let text = pull(&p, &["crm", "--command", &command]);
    p.write("crm.pipe", &text);
    assert_checks_clean(&p, "crm.pipe", false);
    assert_checks_clean(&p, "crm.pipe", true);
    assert!(
        text.contains("reader emails(deal_id: string, start: string, end: string)"),
        "{text}"
    );
}

#[test]
fn pulled_declarations_appended_to_the_file_they_came_from_pass_check() {
    let p = Project::new("pull-append");
    let file = demo_server("crm")
        + r#"
type Deal {
  deal_id: string
}

tool get_deal(deal_id: string) -> Deal from crm {
  read_only = true
}

input deal_id: string

node lookup(deal_id: string = input.deal_id) -> Deal {
  call = get_deal(deal_id: deal_id)
}

output deal = lookup
"#;
    p.write("deal.pipe", &file);
    // The only .pipe file of the folder is the default.
    let text = pull(&p, &["crm"]);
    assert!(
        !text.contains("server crm"),
        "the file declares the server already:\n{text}"
    );
    assert!(
        text.contains("// `get_deal` is declared already, as the tool `get_deal`"),
        "{text}"
    );
    assert!(!text.contains("tool get_deal("), "{text}");
    p.write("deal.pipe", &format!("{file}\n{text}"));
    let out = p.run(&["check", "--format", "json", "deal.pipe"]);
    let doc = json(&stdout(&out));
    assert_eq!(code(&out), 0, "{doc:#}\n{}", p.read("deal.pipe"));
    // What is left are the pulled declarations nothing uses yet.
    for d in doc["diagnostics"].as_array().unwrap() {
        assert_eq!(d["code"], "P0503", "{d:#}");
    }
}

#[test]
fn pulled_annotations_follow_the_server_and_mcps_defaults() {
    let p = Project::new("pull-annotations");
    let demo = pull(&p, &["crm", "--command", demo_crm()]);
    let get_deal = declaration(&demo, "tool get_deal(");
    assert!(get_deal.contains("read_only = true"), "{get_deal}");
    assert!(!get_deal.contains("destructive"), "{get_deal}");
    let arm = declaration(&demo, "tool arm_expiry(");
    assert!(
        arm.contains("idempotent = true") && arm.contains("destructive = false"),
        "{arm}"
    );
    assert!(!arm.contains("read_only"), "{arm}");

    let tracker = pull(
        &p,
        &[
            "tracker",
            "--command",
            &python_command(&schema_server(), &python()),
        ],
    );
    // A tool without annotations gets MCP's defaults, and says so.
    let search = declaration(&tracker, "tool search_tickets(");
    assert!(
        search.contains("idempotent = false") && search.contains("destructive = true"),
        "{search}"
    );
    assert!(search.contains("no annotations"), "{search}");
    assert!(declaration(&tracker, "tool get_owner(").contains("read_only = true"));

    let python = pull(
        &p,
        &[
            "crm",
            "--command",
            &python_command(&crm_server(), &python_with_mcp()),
        ],
    );
    let arm = declaration(&python, "tool arm_expiry(");
    assert!(
        arm.contains("idempotent = false") && arm.contains("destructive = false"),
        "{arm}"
    );
}

#[test]
fn pulled_schemas_become_types_parameters_and_wire_names() {
    let p = Project::new("pull-schemas");
    let text = pull(
        &p,
        &[
            "tracker",
            "--command",
            &python_command(&schema_server(), &python()),
        ],
    );
    let search = declaration(&text, "tool search_tickets(");
    for expected in [
        "name = \"search-tickets\"",
        "page_size: int as \"page-size\" = 20",
        "query: string",
        "since: string?",
        "status: \"open\" | \"closed\" = \"open\"",
        "-> SearchTicketsResult from tracker",
        "/// Words to look for.",
    ] {
        assert!(search.contains(expected), "no {expected:?} in:\n{search}");
    }
    let result = declaration(&text, "type SearchTicketsResult {");
    assert!(result.contains("hits: Ticket[]"), "{result}");
    assert!(result.contains("facets: map<int>?"), "{result}");
    assert!(result.contains("\"x-total\" is left out"), "{result}");
    let ticket = declaration(&text, "type Ticket {");
    assert!(
        ticket.contains("priority: \"low\" | \"normal\" | \"high\""),
        "{ticket}"
    );
    assert!(ticket.contains("assignee: Person?"), "{ticket}");
    assert!(declaration(&text, "type Person {").contains("manager: Person?"));
    let owner = declaration(&text, "tool get_owner(");
    assert!(
        owner.contains("account: GetOwnerAccount") && owner.contains("-> json from tracker"),
        "{owner}"
    );
    assert!(
        !text.contains("reader "),
        "the server has no resources:\n{text}"
    );
    p.write("tracker.pipe", &text);
    assert_checks_clean(&p, "tracker.pipe", false);
    assert_checks_clean(&p, "tracker.pipe", true);
}

#[test]
fn pull_over_http_reads_header_values_from_secrets() {
    let p = Project::new("pull-http");
    let log = p.dir.join("headers.log");
    let mut server = HttpCrm::start(&log);
    let text = pull(
        &p,
        &[
            "crm",
            "--url",
            &server.url,
            "--header",
            "Authorization=Bearer sekrit",
        ],
    );
    assert!(
        text.contains(&format!("url = {}", quoted(&server.url)))
            && text.contains("headers = { Authorization: secret(\"CRM_AUTHORIZATION\") }"),
        "{text}"
    );
    assert!(
        !text.contains("sekrit"),
        "the header's value is printed:\n{text}"
    );
    assert!(
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("authorization='Bearer sekrit'"),
        "the header was not sent"
    );
    assert!(text.contains("tool get_deal("), "{text}");
    p.write("crm.pipe", &text);
    assert_checks_clean(&p, "crm.pipe", false);
    server.stop();
}

#[test]
fn pull_never_prints_a_secret_the_server_echoes() {
    let p = Project::new("pull-echo");
    p.write(
        "tracker.pipe",
        &format!(
            "server tracker {{\n  command = {}\n  args = [{}]\n  env = {{ SCHEMA_ECHO: secret(\"TRACKER_TOKEN\") }}\n}}\n",
            quoted(&on_path(&python()).display().to_string()),
            quoted(&schema_server().display().to_string()),
        ),
    );
    for format in ["pipe", "json"] {
        let out = p
            .cmd(&[
                "tools",
                "pull",
                "tracker",
                "tracker.pipe",
                "--format",
                format,
            ])
            .env("TRACKER_TOKEN", "pa&ss<word>-canary-77c1")
            .output()
            .expect("pull");
        let text = stdout(&out);
        assert_eq!(code(&out), 0, "{text}{}", stderr(&out));
        assert!(!text.contains("77c1"), "the secret is printed:\n{text}");
        assert!(
            text.contains("Started with secret(TRACKER_TOKEN)"),
            "{text}"
        );
    }
}

#[test]
fn pull_json_prints_the_listings_as_the_server_sent_them() {
    let p = Project::new("pull-json");
    let out = pull(&p, &["crm", "--command", demo_crm(), "--format", "json"]);
    let doc = json(&out);
    assert_eq!(doc["server"], "crm");
    let tools = doc["tools"].as_array().unwrap();
    let get_deal = tools
        .iter()
        .find(|t| t["name"] == "get_deal")
        .expect("get_deal");
    assert_eq!(get_deal["annotations"]["readOnlyHint"], true);
    assert_eq!(get_deal["inputSchema"]["required"][0], "deal_id");
    assert_eq!(get_deal["title"], "Get a deal");
    let templates: Vec<&str> = doc["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["uriTemplate"].as_str())
        .collect();
    assert!(
        templates.contains(&"mcp://crm/deals/{deal_id}/activity"),
        "{templates:?}"
    );
}

#[test]
fn pull_of_an_unknown_server_suggests_the_declared_one() {
    let p = Project::new("pull-unknown");
    p.write("crm.pipe", &crm_library());
    let out = p.run(&["tools", "pull", "crn", "crm.pipe"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("declares no server `crn`"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("did you mean `crm`?"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");
    // A name that cannot be declared is refused before anything starts.
    let out = p.run(&["tools", "pull", "my-crm", "--command", demo_crm()]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("call it `my_crm`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn pull_without_a_file_needs_exactly_one_pipe_file_here() {
    let p = Project::new("pull-which");
    let out = p.run(&["tools", "pull", "crm"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("no .pipe file in this folder"),
        "{}",
        stderr(&out)
    );
    p.write("a.pipe", &crm_library());
    p.write("b.pipe", &crm_library());
    let out = p.run(&["tools", "pull", "crm"]);
    assert_eq!(code(&out), 2);
    let text = stderr(&out);
    assert!(text.contains("a.pipe") && text.contains("b.pipe"), "{text}");
}

#[test]
fn pull_from_a_server_that_fails_is_r0501_with_its_stderr() {
    let p = Project::new("pull-broken");
    p.script(
        "broken-server.sh",
        "#!/bin/sh\necho 'crm: cannot open the database' >&2\nexit 3\n",
    );
    let out = p.run(&["tools", "pull", "crm", "--command", "./broken-server.sh"]);
    assert_eq!(code(&out), 1);
    let text = stderr(&out);
    assert!(text.contains("R0501"), "{text}");
    assert!(text.contains("cannot open the database"), "{text}");
    assert_eq!(stdout(&out), "");
}

// ------------------------------------------------------------------ peers in the wild

/// The `server` block of the lax server under `name`, with its arguments (`--strict`,
/// `--refuse-discover`) and its log of methods.
fn lax_block(name: &str, args: &[&str], log: &Path) -> String {
    let mut argv = vec![quoted(&lax_server().display().to_string())];
    argv.extend(args.iter().map(|a| quoted(a)));
    format!(
        "server {name} {{\n  command = {}\n  args = [{}]\n  env = {{ LAX_LOG: {} }}\n}}\n",
        quoted(&on_path(&python()).display().to_string()),
        argv.join(", "),
        quoted(&log.display().to_string())
    )
}

fn methods_asked(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A server that answers `server/discover` with `{}` (as lax servers answer what they do
/// not know) is reached with `initialize`, as the official SDKs reach it; the old client
/// stopped with rmcp's debug form of the answer.
#[test]
fn pull_from_a_server_that_answers_discover_with_an_empty_result_falls_back_to_initialize() {
    let p = Project::new("pull-lax-discover");
    let log = p.dir.join("methods.log");
    p.write("lax.pipe", &lax_block("lax", &[], &log));
    let out = p.run(&["tools", "pull", "lax", "lax.pipe"]);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(code(&out), 0, "{text}{err}");
    assert!(text.contains("(MCP 2025-11-25)"), "{text}");
    assert!(text.contains("tool lookup(key: string)"), "{text}");
    assert!(
        !err.contains("EmptyResult") && !err.contains("Some("),
        "{err}"
    );
    let asked = methods_asked(&log);
    assert!(
        asked.starts_with(&["server/discover".to_string(), "initialize".to_string()]),
        "{asked:?}"
    );
}

/// A server that declares no resources is not asked for them: it owes no answer, and a
/// lax one answers `{}`, which failed the whole command.
#[test]
fn pull_and_check_online_ask_no_resources_of_a_server_that_offers_none() {
    let p = Project::new("lax-no-resources");
    let log = p.dir.join("methods.log");
    let text = lax_block("lax", &["--refuse-discover"], &log)
        + r#"
tool lookup(key: string) -> json from lax {
  read_only = true
}

reader page(id: string) -> json from lax {
  uri = "lax://pages/{id}"
  max_bytes = 1kb
}
"#;
    p.write("lax.pipe", &text);
    let out = p.run(&["tools", "pull", "lax", "lax.pipe"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("declared already, as the tool `lookup`"),
        "{}",
        stdout(&out)
    );
    let (exit, diags) = check_online(&p, "lax.pipe");
    assert_eq!(exit, 0, "{diags:#?}");
    assert!(with_code(&diags, "R0501").is_empty(), "{diags:#?}");
    // What the reader reads cannot be served: the warning says why.
    let found = with_code(&diags, "P0703");
    assert_eq!(found.len(), 1, "{diags:#?}");
    assert_eq!(found[0]["line"], line_of(&text, "reader page("));
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains("offers no resources"),
        "{diags:#?}"
    );
    let asked = methods_asked(&log);
    assert!(asked.contains(&"tools/list".to_string()), "{asked:?}");
    assert!(
        !asked.iter().any(|m| m.starts_with("resources/")),
        "resources were asked for: {asked:?}"
    );
}

/// A tool the server runs only as an MCP task (2025-11-25): `tools pull` declares it
/// with `task = "required"`, `check --online` takes the declaration, and a run calls it as
/// a task, polls `tasks/get` until it is done and takes the result from `tasks/result`;
/// `--format json` shows the listing with its `execution` as the server sent it.
#[test]
fn a_tool_that_runs_only_as_a_task_is_pulled_checked_and_called_as_a_task() {
    let p = Project::new("lax-task");
    let log = p.dir.join("methods.log");
    let server = lax_block("lax", &["--strict"], &log);
    p.write("lax.pipe", &server);
    let out = p.run(&["tools", "pull", "lax", "lax.pipe"]);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(code(&out), 0, "{text}{err}");
    assert!(text.contains("tool lookup("), "{text}");
    let declared = &text[text
        .find("tool long_report(")
        .expect("long_report is pulled")..];
    let declared = &declared[..declared.find("}\n").unwrap_or(declared.len())];
    assert!(declared.contains("task = \"required\""), "{text}");
    assert!(!err.contains("warning"), "{err}");

    let raw = json(&pull(&p, &["lax", "lax.pipe", "--format", "json"]));
    let listed = raw["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "long_report")
        .cloned()
        .expect("long_report is listed");
    assert_eq!(listed["execution"]["taskSupport"], "required", "{listed:#}");

    let text = server
        + r#"
type Report {
  report: string
}

tool long_report(quarter: string) -> Report from lax {
  read_only = true
  task = "required"
}

input quarter: string

node report(quarter: string = input.quarter) -> Report {
  call = long_report(quarter: quarter)
}

output report = report
"#;
    p.write("lax.pipe", &text);
    let (exit, diags) = check_online(&p, "lax.pipe");
    assert_eq!(exit, 0, "{diags:#?}");
    let _ = std::fs::remove_file(&log);
    let out = p.run(&["run", "lax.pipe", "--input", "quarter=q1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(json(&stdout(&out))["report"]["report"], "q1");
    let asked = methods_asked(&log);
    let calls: Vec<&String> = asked
        .iter()
        .filter(|m| m.starts_with("tools/call") || m.starts_with("tasks/"))
        .collect();
    assert_eq!(
        calls,
        ["tools/call", "tasks/get", "tasks/get", "tasks/result"],
        "{asked:?}"
    );
}

/// A templated read whose expansions are fixed resources of `resources/list` (as a
/// server lists a small set of documents) is served, though no template matches it.
#[test]
fn online_check_takes_listed_fixed_resources_for_what_a_templated_read_reads() {
    let p = Project::new("online-fixed-resources");
    let text = format!(
        "server reports {{\n  command = {}\n  args = [{}]\n}}\n",
        quoted(&on_path(&python_with_mcp()).display().to_string()),
        quoted(&reports_server().display().to_string())
    ) + r#"
reader quarter_2025(quarter: string) -> json from reports {
  uri = "mcp://reports/2025/{quarter}"
  max_bytes = 10kb
}

reader quarter_2024(quarter: string) -> json from reports {
  uri = "mcp://reports/2024/{quarter}"
  max_bytes = 10kb
}
"#;
    p.write("reports.pipe", &text);
    let (exit, diags) = check_online(&p, "reports.pipe");
    assert_eq!(exit, 0, "{diags:#?}");
    let found = with_code(&diags, "P0703");
    assert_eq!(found.len(), 1, "only 2024 is not served: {diags:#?}");
    assert_eq!(found[0]["line"], line_of(&text, "reader quarter_2024("));
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains("lists no resource template or resource that matches"),
        "{diags:#?}"
    );
    // The listing shows them, as the server sent them.
    let raw = json(&pull(&p, &["reports", "reports.pipe", "--format", "json"]));
    let uris: Vec<&str> = raw["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert!(uris.contains(&"mcp://reports/2025/q1"), "{raw:#}");
}

/// A `url` nothing listens at: the message names the URL and the cause in words, and
/// says what to do; it used to be rmcp's "send discover request" and its type names.
#[test]
fn pull_from_an_unreachable_url_names_it_and_the_cause() {
    let p = Project::new("pull-unreachable");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    drop(listener);
    let out = p.run(&["tools", "pull", "kb", "--url", &url]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains(&format!(
            "error[R0501]: the server `kb` could not be reached at {url}: nothing listens there (connection refused)"
        )),
        "{err}"
    );
    assert!(
        err.contains("help: start the server, or correct its `url`"),
        "{err}"
    );
    for jargon in ["send discover request", "Transport [", "Client error"] {
        assert!(!err.contains(jargon), "{jargon:?} in:\n{err}");
    }
    // The same from `check --online`.
    p.write(
        "kb.pipe",
        &format!("server kb {{\n  url = {}\n}}\n", quoted(&url)),
    );
    let (exit, diags) = check_online(&p, "kb.pipe");
    assert_eq!(exit, 1, "{diags:#?}");
    let found = with_code(&diags, "R0501");
    assert_eq!(found.len(), 1, "{diags:#?}");
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("could not be reached at {url}")),
        "{diags:#?}"
    );
    assert_eq!(found[0]["help"], "start the server, or correct its `url`");
}

/// A server that refuses the token: R0501, with what the server says about it (the body
/// of its 401, which rmcp drops) and its challenge, and what to check; never the token.
#[test]
fn a_refused_token_is_r0501_with_the_servers_explanation() {
    let p = Project::new("pull-401");
    let mut server = HttpCrm::start_with(&p.dir.join("headers.log"), Some("right-token"));
    let out = p.run(&[
        "tools",
        "pull",
        "kb",
        "--url",
        &server.url,
        "--header",
        "Authorization=Bearer wrong-token",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("error[R0501]"), "{err}");
    assert!(
        err.contains(&format!("answered HTTP 401 Unauthorized at {}", server.url)),
        "{err}"
    );
    assert!(
        err.contains("the token is not the one this CRM was started with"),
        "the server's explanation is missing:\n{err}"
    );
    assert!(err.contains("WWW-Authenticate: "), "{err}");
    assert!(err.contains("error=\"invalid_token\""), "{err}");
    assert!(
        err.contains("help: the server did not accept the credentials pipec sent: check the `headers` of the server `kb`"),
        "{err}"
    );
    assert!(!err.contains("wrong-token"), "the token is shown:\n{err}");
    assert_eq!(stdout(&out), "");
    server.stop();
}

/// `tools pull` types each record structure once and only what the tools use: the same
/// definitions met again in another tool's schemas (as an argument and as a result) are
/// one record, an `anyOf` branch that became `json` leaves none behind, and a name
/// another tool defines otherwise is a record of its own.
#[test]
fn pulled_types_are_declared_once_and_only_when_used() {
    let p = Project::new("pull-types-once");
    let text = pull(
        &p,
        &[
            "tracker",
            "--command",
            &python_command(&schema_server(), &python()),
        ],
    );
    let types: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("type "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for once in ["Ticket", "Person"] {
        assert_eq!(
            types.iter().filter(|t| **t == once).count(),
            1,
            "{once}: {types:?}"
        );
    }
    assert!(
        !types
            .iter()
            .any(|t| t.starts_with("Ticket") && *t != "Ticket"),
        "a twin of Ticket: {types:?}"
    );
    assert!(
        !types.contains(&"ClassifyResultLabel"),
        "a type nothing uses: {types:?}"
    );
    let update = declaration(&text, "tool update_ticket(");
    assert!(
        update.contains("ticket: Ticket") && update.contains("-> UpdateTicketResult"),
        "{update}"
    );
    assert!(declaration(&text, "type UpdateTicketResult {").contains("ticket: Ticket\n"));
    assert!(declaration(&text, "type ClassifyResult {").contains("label: json"));
    // `get-team` defines a `Person` of its own: its lead is no ticket's assignee.
    let team = declaration(&text, "type GetTeamResult {");
    assert!(team.contains("lead: Person2"), "{team}");
    assert!(declaration(&text, "type Person2 {").contains("email: string"));
    p.write("tracker.pipe", &text);
    assert_checks_clean(&p, "tracker.pipe", false);
    assert_checks_clean(&p, "tracker.pipe", true);
}

/// The demo CRM over streamable HTTP on a free port, logging the headers it gets.
struct HttpCrm {
    child: Child,
    url: String,
}

impl HttpCrm {
    fn start(header_log: &Path) -> HttpCrm {
        HttpCrm::start_with(header_log, None)
    }

    /// With `token`, every request must carry it as a bearer token.
    fn start_with(header_log: &Path, token: Option<&str>) -> HttpCrm {
        let mut command = Command::new(demo_crm());
        command
            .args(["--http", "127.0.0.1:0"])
            .env("CRM_HEADER_LOG", header_log)
            .env_remove("CRM_BEARER_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        if let Some(token) = token {
            command.env("CRM_BEARER_TOKEN", token);
        }
        let mut child = command.spawn().expect("the demo CRM starts");
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            let _ = BufReader::new(stdout).read_line(&mut line);
        }
        let addr = line.trim().to_string();
        assert!(addr.starts_with("127.0.0.1:"), "stdout said {line:?}");
        HttpCrm {
            child,
            url: format!("http://{addr}/mcp"),
        }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpCrm {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The declarations of a fan-out of `get_deal` over the demo CRM, the deal kept to two
/// fields, and `tail` after them.
fn lookups(tail: &str) -> String {
    demo_server("crm")
        + r#"
type Deal {
  deal_id: string
  name: string
}

link "activity-history": json = "mcp://crm/deals/{deal_id}/activity"

tool get_deal(deal_id: string) -> Deal from crm {
  read_only = true
  links = ["activity-history"]
}

input ids: string[]

node lookup(deal_id: string = each(input.ids, max: 10)) -> Deal {
  call = get_deal(deal_id: deal_id)
}
"# + tail
}

/// The items of `node` in `pipec show --json --internal` of the only thread of `p`.
fn items_of(p: &Project, node: &str) -> Vec<serde_json::Value> {
    let runs = p.cmd(&["runs", "--json"]).output().expect("lists");
    let thread = json(&stdout(&runs))[0]["id"]
        .as_str()
        .expect("a thread")
        .to_string();
    let out = p
        .cmd(&["show", &thread, "--json", "--internal"])
        .output()
        .expect("shows");
    json(&stdout(&out))["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["node"] == node)
        .cloned()
        .collect()
}

/// A tool's result is stored as its declared type (the deal's other fields are not
/// kept), and the links it returned only when some node reads them: a fan-out no node
/// reads the links of keeps none; one whose links are read keeps them, and they read.
#[test]
fn a_call_keeps_what_its_type_declares_and_the_links_a_node_reads() {
    let p = Project::new("kept-declared");
    p.write("plain.pipe", &lookups("\noutput deals = lookup\n"));
    let out = p
        .cmd(&["run", "plain.pipe", "--input", r#"ids=["D1","D2"]"#])
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let deals = &json(&stdout(&out))["deals"];
    assert_eq!(deals[0]["deal_id"], "D1");
    assert_eq!(
        deals[0].as_object().map(|d| d.len()),
        Some(2),
        "only the declared fields: {deals}"
    );
    let items = items_of(&p, "lookup");
    assert_eq!(items.len(), 2);
    for item in &items {
        let record = &item["record"];
        assert_eq!(
            record["value"].as_object().map(|d| d.len()),
            Some(2),
            "{item}"
        );
        assert!(
            record["manifest"].as_array().is_none_or(Vec::is_empty),
            "no node reads the links: {item}"
        );
    }

    let q = Project::new("kept-links");
    q.write(
        "read.pipe",
        &lookups(
            r#"
node activity(log: json[] = resources(ref: "activity-history", from: lookup, max_bytes: 50kb)) -> int {
  return = len(log)
}

output read = activity
"#,
        ),
    );
    let out = q
        .cmd(&["run", "read.pipe", "--input", r#"ids=["D1","D2"]"#])
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(json(&stdout(&out))["read"], 2, "both links read");
    let items = items_of(&q, "lookup");
    for item in &items {
        let links = item["record"]["manifest"].as_array().expect("links kept");
        assert_eq!(links.len(), 1, "{item}");
        assert!(
            links[0]["uri"]
                .as_str()
                .is_some_and(|u| u.ends_with("/activity")),
            "{item}"
        );
    }
}
