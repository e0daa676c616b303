//! The seed's scenario end to end, through the real binary: `deal_research` runs to its
//! gate (the agent calls `get_deal`, whose result links the deal's activity and email
//! history), the email link is armed to expire during the pause, and a resume in a new
//! process heals it by replaying `get_deal` once, then writes a brief from the history it
//! read. Against pipec's demo server and the official Python SDK's, over stdio and over
//! streamable HTTP. Also: a producer that may not be replayed (`R0103`), and a history
//! larger than its binding's cap (`R0101`), neither of which lands in the store.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::python::{crm_server, python_with_mcp};
use common::{Project, code, crate_root, json, stderr, stdout, thread_of};
use serde_json::Value;

const ANSWER: &str = r#"review={"approved":true}"#;

#[derive(Clone, Copy, PartialEq)]
enum Server {
    DemoStdio,
    DemoHttp,
    PythonStdio,
    PythonHttp,
}

/// A server the test started itself (HTTP), stopped when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn demo_bin() -> &'static str {
    common::demo_crm_bin().to_str().expect("a UTF-8 path")
}

/// A project holding `deal_research` with `server` as its CRM, its prompts and replies,
/// and the files the server logs to and is armed through.
struct Scenario {
    project: Project,
    log: PathBuf,
    expire: PathBuf,
    _server: Option<Running>,
}

impl Scenario {
    fn new(tag: &str, server: Server, emails: u32, edit: &dyn Fn(String) -> String) -> Scenario {
        let project = Project::new(tag);
        let log = project.dir.join("calls.log");
        let expire = project.dir.join("expire");
        let env_block = r#"  env = {
    CRM_EMAILS: env("CRM_EMAILS", default: "100"),
    CRM_CALL_LOG: env("CRM_CALL_LOG", default: ""),
    CRM_EXPIRE_FILE: env("CRM_EXPIRE_FILE", default: ""),
  }"#;
        let (block, running) = match server {
            Server::DemoStdio => (
                format!("server crm {{\n  command = \"pipec-demo-crm\"\n{env_block}\n}}"),
                None,
            ),
            Server::PythonStdio => (
                format!(
                    "server crm {{\n  command = \"{}\"\n  args = [\"{}\"]\n{env_block}\n}}",
                    python_with_mcp(),
                    crm_server().display()
                ),
                None,
            ),
            Server::DemoHttp | Server::PythonHttp => {
                let (port, child) = start_http(server, &project.dir, &log, &expire, emails);
                (
                    format!("server crm {{\n  url = \"http://127.0.0.1:{port}/mcp\"\n}}"),
                    Some(child),
                )
            }
        };
        let source = std::fs::read_to_string(crate_root().join("pipelines/deal_research.pipe"))
            .expect("the pipeline");
        let start = source.find("server crm {").expect("a server block");
        let end = start + source[start..].find("\n}\n").expect("its end") + 2;
        let text = format!("{}{}{}", &source[..start], block, &source[end..]);
        project.write("deal_research.pipe", &edit(text));
        for p in ["prompts/research/scan.jinja", "prompts/consume/brief.jinja"] {
            let t = std::fs::read_to_string(crate_root().join(p)).expect("prompt");
            project.write(p, &t);
        }
        let replies =
            std::fs::read_to_string(crate_root().join("pipelines/replies/deal_research.json"))
                .expect("replies");
        project.write("replies.json", &replies);
        Scenario {
            project,
            log,
            expire,
            _server: running,
        }
    }

    fn pipec(&self, args: &[&str], emails: u32) -> std::process::Output {
        self.project
            .cmd(args)
            .env("CRM_EMAILS", emails.to_string())
            .env("CRM_CALL_LOG", &self.log)
            .env("CRM_EXPIRE_FILE", &self.expire)
            .stdin(Stdio::null())
            .output()
            .expect("pipec runs")
    }

    fn run(&self, emails: u32) -> std::process::Output {
        self.pipec(
            &[
                "run",
                "deal_research.pipe",
                "--input",
                "deal_id=D1",
                "--model",
                "fast=scripted:replies.json",
            ],
            emails,
        )
    }

    fn log_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn show(&self, thread: &str) -> Value {
        let o = self.pipec(&["show", thread, "--json", "--internal"], 100);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        // At the gate, then with the healed link: both fit the declared format.
        common::show_shape::parse_show(&stdout(&o));
        json(&stdout(&o))
    }
}

/// Starts an HTTP server on a free port; its port.
fn start_http(
    server: Server,
    dir: &Path,
    log: &Path,
    expire: &Path,
    emails: u32,
) -> (u16, Running) {
    let mut cmd = match server {
        Server::DemoHttp => {
            let mut c = Command::new(demo_bin());
            c.args(["--http", "127.0.0.1:0"]);
            c
        }
        _ => {
            let mut c = Command::new(python_with_mcp());
            c.arg(crm_server())
                .env("CRM_TRANSPORT", "streamable-http")
                .env("CRM_HTTP_PORT", "0");
            c
        }
    };
    let port_file = dir.join("port");
    cmd.env("CRM_EMAILS", emails.to_string())
        .env("CRM_CALL_LOG", log)
        .env("CRM_EXPIRE_FILE", expire)
        .env("CRM_PORT_FILE", &port_file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = Running(cmd.spawn().expect("the HTTP server starts"));
    // The demo server prints its address first; the Python one writes the port file.
    if server == Server::DemoHttp
        && let Some(out) = child.0.stdout.take()
    {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(port) = std::fs::read_to_string(&port_file)
            .ok()
            .and_then(|t| t.trim().rsplit(':').next().and_then(|p| p.parse().ok()))
        {
            return (port, child);
        }
        assert!(Instant::now() < deadline, "the HTTP server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs to the gate; the thread id.
fn to_the_gate(s: &Scenario, emails: u32) -> String {
    let o = s.run(emails);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(err.contains("review"), "paused at the gate:\n{err}");
    // What a run prints is outputs and how to resume, never the links it stored.
    for leaked in [
        "pipec_ref",
        "producing_call",
        "mcp://crm/deals/D1/emails/2025-01-01",
    ] {
        assert!(
            !out.contains(leaked),
            "stdout shows the manifest ({leaked}):\n{out}"
        );
    }
    thread_of(&format!("{out}\n{err}")).expect("a thread id")
}

/// The stored links of `research`: kinds with their producing call.
fn research_links(show: &Value) -> Vec<(String, String, Value, String)> {
    show["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .filter(|m| m["node"] == "research")
        .map(|m| {
            let l = &m["link"];
            (
                l["kind"].as_str().unwrap_or("").to_string(),
                l["producing_call"]["tool"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                l["producing_call"]["args"].clone(),
                l["uri"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn scenario(server: Server, tag: &str) {
    let s = Scenario::new(tag, server, 100, &|t| t);
    let thread = to_the_gate(&s, 100);
    let show = s.show(&thread);
    assert_eq!(show["status"], "paused");
    let links = research_links(&show);
    let kinds: Vec<&str> = links.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(kinds, ["activity-history", "email-history"], "{links:?}");
    for (_, tool, args, _) in &links {
        assert_eq!(tool, "get_deal");
        assert_eq!(args, &serde_json::json!({ "deal_id": "D1" }));
    }
    let emails_uri = links[1].3.clone();
    assert_eq!(
        emails_uri,
        "mcp://crm/deals/D1/emails/2025-01-01/2025-12-31"
    );

    // The link dies during the pause; a new process resumes.
    std::fs::write(&s.expire, "1").expect("arm");
    let before = s.log_lines().len();
    let o = s.pipec(&["resume", &thread, "--answer", ANSWER], 100);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(code(&o), 0, "{out}\n{err}");
    let outputs = json(&out);
    let brief = outputs["brief"]["text"].as_str().unwrap_or_default();
    assert!(
        brief.contains("100 emails from 2025-01-01 to 2025-12-31"),
        "the brief reflects the history it read: {brief}"
    );
    for leaked in ["pipec_ref", "producing_call", "mcp://"] {
        assert!(
            !out.contains(leaked),
            "the outputs show the manifest ({leaked}):\n{out}"
        );
    }
    assert!(err.contains("re-derived"), "the heal is reported:\n{err}");

    let after: Vec<String> = s.log_lines()[before..].to_vec();
    let count = |needle: &str| after.iter().filter(|l| l.starts_with(needle)).count();
    assert_eq!(
        count("tool get_deal"),
        1,
        "exactly one replay of get_deal after the resume:\n{after:#?}"
    );
    assert_eq!(
        count(&format!("read {emails_uri}")),
        2,
        "the dead read, then the healed one:\n{after:#?}"
    );
    assert_eq!(
        count("read mcp://crm/deals/D1/activity"),
        1,
        "digest and consume both bind the activity, and it is read once:\n{after:#?}"
    );

    let show = s.show(&thread);
    assert_eq!(show["status"], "completed");
    let heals = show["heals"].as_array().expect("heals");
    assert_eq!(heals.len(), 1, "{heals:?}");
    assert_eq!(heals[0]["producer"], "research");
    assert_eq!(heals[0]["record"]["to"]["kind"], "email-history");
    assert_eq!(heals[0]["record"]["by_node"], "consume");
    let replay = heals[0]["record"]["replay_call"].as_str().unwrap_or("");
    let calls = show["calls"].as_array().expect("calls");
    assert!(
        calls.iter().any(|c| c["call"] == replay
            && c["record"]["target"] == "get_deal"
            && c["record"]["state"] == "ok"),
        "the replay is journaled as a call of its own: {calls:#?}"
    );
    let activity = show["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["uri"] == "mcp://crm/deals/D1/activity")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (
            activity["fetches"].as_u64(),
            activity["cache_hits"].as_u64()
        ),
        (Some(2), Some(1)),
        "one fetch per attempt, and a cache hit: {activity}"
    );
}

#[test]
fn the_scenario_heals_the_expired_history_against_the_demo_server_over_stdio() {
    scenario(Server::DemoStdio, "demo-stdio");
}

#[test]
fn the_scenario_heals_the_expired_history_against_the_demo_server_over_http() {
    scenario(Server::DemoHttp, "demo-http");
}

#[test]
fn the_scenario_heals_the_expired_history_against_the_python_sdk_server_over_stdio() {
    scenario(Server::PythonStdio, "py-stdio");
}

#[test]
fn the_scenario_heals_the_expired_history_against_the_python_sdk_server_over_http() {
    scenario(Server::PythonHttp, "py-http");
}

/// `get_deal` declared neither read-only nor idempotent (so `research` is an `act`).
fn not_replayable(text: String) -> String {
    text.replace("  read_only = true\n", "")
        .replace("agent research(", "act research(")
}

fn refused_replay(server: Server, tag: &str) {
    let s = Scenario::new(tag, server, 100, &not_replayable);
    let thread = to_the_gate(&s, 100);
    std::fs::write(&s.expire, "1").expect("arm");
    let before = s.log_lines().len();
    let o = s.pipec(&["resume", &thread, "--answer", ANSWER], 100);
    let err = stderr(&o);
    assert_eq!(code(&o), 1, "{err}");
    assert!(err.contains("R0103"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let after: Vec<String> = s.log_lines()[before..].to_vec();
    assert!(
        !after.iter().any(|l| l.starts_with("tool get_deal")),
        "nothing replayed: {after:#?}"
    );
    let show = s.show(&thread);
    assert_eq!(show["status"], "failed");
    assert_eq!(show["error"]["code"], "R0103", "{}", show["error"]);
    assert!(
        show["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("get_deal"),
        "{}",
        show["error"]
    );
    let o = s.pipec(&["show", &thread], 100);
    assert!(stdout(&o).contains("error[R0103]"), "{}", stdout(&o));
}

#[test]
fn a_dead_link_whose_producer_may_not_run_again_fails_with_r0103_and_replays_nothing() {
    refused_replay(Server::DemoStdio, "r0103-demo");
}

#[test]
fn a_dead_link_whose_producer_may_not_run_again_fails_with_r0103_against_the_python_server() {
    refused_replay(Server::PythonStdio, "r0103-py");
}

#[test]
fn a_history_over_its_cap_fails_with_r0101_and_never_reaches_the_store() {
    let s = Scenario::new("r0101", Server::DemoStdio, 5000, &|t| t);
    let thread = to_the_gate(&s, 5000);
    let o = s.pipec(&["resume", &thread, "--answer", ANSWER], 5000);
    let err = stderr(&o);
    assert_eq!(code(&o), 1, "{err}");
    assert!(err.contains("R0101"), "{err}");
    assert!(err.contains("`history`"), "names the binding: {err}");
    assert!(
        err.contains("mcp://crm/deals/D1/emails/2025-01-01/2025-12-31"),
        "names the URI: {err}"
    );
    assert!(err.contains("200 KB"), "names the cap: {err}");
    assert!(err.contains("MB"), "names the size: {err}");
    let store = std::fs::read(s.project.store()).expect("the store");
    let needle = b"\"subject\"";
    assert!(
        !store.windows(needle.len()).any(|w| w == needle),
        "the store holds no email"
    );
}

/// A pipeline that reads one deal from the CRM named by `CRM_URL`.
const DEAL_BY_ENV_URL: &str = r#"server crm {
  url = env("CRM_URL")
}

type Deal {
  deal_id: string
  name: string
}

tool get_deal(deal_id: string) -> Deal from crm {
  read_only = true
}

input deal_id: string

node deal(deal_id: string = input.deal_id) -> Deal {
  call = get_deal(deal_id: deal_id)
}

output deal = deal
"#;

/// A server's `url` may be `env("NAME")`, read when the run starts like any `env()`
/// value: missing is R0002, a value without a scheme is R0109 with the URL it meant
/// (before anything is stored or called), and `check --online` reads it the same way.
/// Before, `url = env(...)` was P0203 and the file did not compile.
#[test]
fn a_server_url_may_come_from_the_environment_and_is_checked_when_a_run_reads_it() {
    let project = Project::new("env-url");
    let (log, expire) = (project.dir.join("calls.log"), project.dir.join("expire"));
    let (port, _server) = start_http(Server::DemoHttp, &project.dir, &log, &expire, 3);
    project.write("deal.pipe", DEAL_BY_ENV_URL);
    let run = |url: Option<&str>, args: &[&str]| {
        let mut c = project.cmd(args);
        match url {
            Some(u) => c.env("CRM_URL", u),
            None => c.env_remove("CRM_URL"),
        };
        c.stdin(Stdio::null()).output().expect("pipec runs")
    };
    let deal = ["run", "deal.pipe", "--input", "deal_id=D1"];

    let o = run(None, &deal);
    let err = stderr(&o);
    assert_eq!(code(&o), 1, "{err}");
    assert!(err.contains("R0002") && err.contains("CRM_URL"), "{err}");

    let bare = format!("127.0.0.1:{port}/mcp");
    let o = run(Some(&bare), &deal);
    let err = stderr(&o);
    assert_eq!(code(&o), 1, "{err}");
    assert!(err.contains("R0109"), "{err}");
    assert!(
        err.contains("`CRM_URL`") && err.contains("no scheme"),
        "{err}"
    );
    assert!(
        err.contains(&format!("set `CRM_URL` to `http://{bare}`")),
        "the fix: {err}"
    );
    let runs = run(None, &["runs", "--json"]);
    assert_eq!(
        json(&stdout(&runs)),
        serde_json::json!([]),
        "a refused run starts no thread"
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap_or_default(),
        "",
        "a refused run calls nothing"
    );
    let o = run(Some(&bare), &["check", "--online", "deal.pipe"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stdout(&o).contains("R0109") || stderr(&o).contains("R0109"));

    let url = format!("http://{bare}");
    let o = run(Some(&url), &["check", "--online", "deal.pipe"]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let o = run(Some(&url), &deal);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["deal"]["deal_id"], "D1");
}

/// A server's `command` and `args` may be `env()` values too; a relative command is
/// found from the declaring file's folder.
#[test]
fn a_server_command_and_its_args_may_come_from_the_environment() {
    let project = Project::new("env-command");
    project.write(
        "deal.pipe",
        &DEAL_BY_ENV_URL.replace(
            "url = env(\"CRM_URL\")",
            "command = env(\"CRM_BIN\")\n  args = [env(\"CRM_FLAG\")]",
        ),
    );
    project.script(
        "bin/crm.sh",
        &format!(
            "#!/bin/sh\n[ \"$1\" = \"--from-env\" ] || {{ echo \"unexpected argument: $1\" >&2; exit 3; }}\nexec '{}'\n",
            demo_bin()
        ),
    );
    let o = project
        .cmd(&["run", "deal.pipe", "--input", "deal_id=D2"])
        .env("CRM_BIN", "bin/crm.sh")
        .env("CRM_FLAG", "--from-env")
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["deal"]["deal_id"], "D2");
}

/// The demo CRM's `get_deal_card` answers with content in place: a line of text, the deal
/// as an embedded resource (whose URI the server does not serve) and an image.
fn deal_card_pipeline() -> String {
    format!(
        r#"server crm {{
  command = "{}"
  env = {{ CRM_CALL_LOG: env("CRM_CALL_LOG") }}
}}

type Deal {{
  deal_id: string
  owner: string
}}

link "deal-card": Deal = "mcp://crm/deals/{{deal_id}}/card"

tool get_deal_card(deal_id: string) -> string from crm {{
  read_only = true
  links = ["deal-card"]
}}

tool owner_picture(deal_id: string) -> bytes from crm {{
  name = "get_deal_card"
  read_only = true
}}

input deal_id: string

node card(deal_id: string = input.deal_id) -> string {{
  call = get_deal_card(deal_id: deal_id)
}}

node owner(
  line: string = card,
  deal: Deal = resource(ref: "deal-card", max_bytes: 10kb),
) -> {{ line: string, owner: string }} {{
  return = {{ line: line, owner: deal.owner }}
}}

node picture(deal_id: string = input.deal_id) -> bytes {{
  call = owner_picture(deal_id: deal_id)
}}

output owner = owner
output picture = picture
"#,
        demo_bin()
    )
}

/// The 1×1 PNG the demo CRM sends as a deal owner's picture.
const OWNER_PICTURE_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// Non-text tool content is no longer dropped without a word: an embedded resource goes
/// into its producer's manifest with its content, and a `resource(ref:)` downstream reads
/// it from there (the server, which does not serve its URI, is never asked); an image is
/// a `bytes` value for a tool declared `-> bytes`, and kept in the manifest with its MIME
/// type when the value took the text; `show --internal` lists both.
#[test]
fn non_text_tool_content_is_mapped_and_listed_not_dropped() {
    let project = Project::new("content-in-place");
    let log = project.dir.join("calls.log");
    project.write("card.pipe", &deal_card_pipeline());
    let o = project
        .cmd(&["run", "card.pipe", "--input", "deal_id=D1"])
        .env("CRM_CALL_LOG", &log)
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs");
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    let out = json(&stdout(&o));
    let owner = out["owner"]["owner"]
        .as_str()
        .expect("the owner, from the card");
    assert!(
        out["owner"]["line"]
            .as_str()
            .is_some_and(|l| l.ends_with(&format!("owned by {owner}"))),
        "{out}"
    );
    assert_eq!(out["picture"], OWNER_PICTURE_PNG, "the image as bytes");
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !calls.lines().any(|l| l.starts_with("read ")),
        "the embedded card is read from the manifest, not from the server:\n{calls}"
    );
    let thread = thread_of(&err).or_else(|| thread_of(&stdout(&o)));
    let runs = json(&stdout(&project.run(&["runs", "--json"])));
    let thread = thread
        .or_else(|| runs[0]["id"].as_str().map(str::to_string))
        .expect("the thread");
    let text = stdout(&project.run(&["show", &thread, "--internal"]));
    assert!(
        text.contains("deal-card")
            && text.contains("mcp://crm/deals/D1/card (embedded: application/json"),
        "{text}"
    );
    assert!(
        text.contains("(image)            image/png, 70 B, in place from get_deal_card"),
        "{text}"
    );
    let shown = json(&stdout(&project.run(&[
        "show",
        &thread,
        "--json",
        "--internal",
    ])));
    let held: Vec<&Value> = shown["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .map(|m| &m["link"])
        .collect();
    let image = held
        .iter()
        .find(|l| l["embedded"]["block"] == "image")
        .expect("the image of `card` is kept");
    assert_eq!(image["embedded"]["blob"], OWNER_PICTURE_PNG);
    assert_eq!(image["mime"], "image/png");
    assert_eq!(
        held.iter()
            .filter(|l| l["embedded"]["block"] == "image")
            .count(),
        1,
        "`picture` took its image as its value, which is not stored twice"
    );
}

/// A declared type that cannot hold what the result carries fails with R0107, naming it.
#[test]
fn an_image_a_record_type_cannot_hold_fails_with_r0107() {
    let project = Project::new("content-unfit");
    project.write(
        "card.pipe",
        &deal_card_pipeline()
            .replace("-> bytes from crm", "-> Deal from crm")
            .replace(") -> bytes {", ") -> Deal {"),
    );
    let o = project
        .cmd(&["run", "card.pipe", "--input", "deal_id=D1"])
        .env("CRM_CALL_LOG", project.dir.join("calls.log"))
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs");
    let err = stderr(&o);
    assert_eq!(code(&o), 1, "{err}");
    assert!(err.contains("R0107"), "{err}");
    assert!(err.contains("an image (image/png, 70 B)"), "{err}");
}

/// Against the npm reference server: `get-resource-reference` embeds a text resource
/// (read downstream through its link kind) or a blob (the value of a `-> bytes` tool),
/// and `get-annotated-message` sends an image beside its text, which the manifest keeps.
#[test]
fn embedded_resources_and_images_of_the_reference_server_reach_the_pipeline() {
    let Some(server) = common::npm::reference_server(common::npm::EVERYTHING) else {
        return;
    };
    let project = Project::new("everything");
    project.write(
        "everything.pipe",
        &format!(
            r#"server everything {{
  command = "{}"
  args = ["stdio"]
}}

link "text-resource": string = "demo://resource/dynamic/text/{{id}}"

tool text_reference(resourceId: float, resourceType: "Text" | "Blob") -> string from everything {{
  name = "get-resource-reference"
  read_only = true
  links = ["text-resource"]
}}

tool blob_reference(resourceId: float, resourceType: "Text" | "Blob") -> bytes from everything {{
  name = "get-resource-reference"
  read_only = true
}}

tool annotated(includeImage: bool, messageType: "error" | "success" | "debug") -> string from everything {{
  name = "get-annotated-message"
  read_only = true
}}

input id: float

node said(id: float = input.id) -> string {{
  call = text_reference(resourceId: id, resourceType: "Text")
}}

node text(said: string = said, body: string = resource(ref: "text-resource", max_bytes: 10kb)) -> string {{
  return = body
}}

node blob(id: float = input.id) -> bytes {{
  call = blob_reference(resourceId: id, resourceType: "Blob")
}}

node message(id: float = input.id) -> string {{
  call = annotated(includeImage: true, messageType: "success")
  after = [blob]
}}

output said = said
output text = text
output blob = blob
output message = message
"#,
            server.display()
        ),
    );
    let o = project.run(&["run", "everything.pipe", "--input", "id=1"]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    let out = json(&stdout(&o));
    assert!(
        out["said"]
            .as_str()
            .is_some_and(|s| s.contains("Returning resource reference for Resource 1")),
        "{out}"
    );
    assert!(
        out["text"]
            .as_str()
            .is_some_and(|s| s.starts_with("Resource 1: This is a plaintext resource")),
        "the embedded resource, read through its kind: {out}"
    );
    let blob = pipec::base64::decode(out["blob"].as_str().unwrap_or_default()).expect("base64");
    assert!(
        String::from_utf8_lossy(&blob).starts_with("Resource 1: This is a base64 blob"),
        "{out}"
    );
    assert!(out["message"].is_string(), "{out}");
    let runs = json(&stdout(&project.run(&["runs", "--json"])));
    let thread = runs[0]["id"].as_str().expect("the thread").to_string();
    let text = stdout(&project.run(&["show", &thread, "--internal"]));
    assert!(
        text.contains("demo://resource/dynamic/text/1 (embedded: text/plain"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("message") && l.contains("(image)") && l.contains("image/png")),
        "{text}"
    );
}
