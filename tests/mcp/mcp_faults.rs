//! Runs against a misbehaving MCP server, end to end through the binary: for each fault
//! `pipec-demo-crm` can inject (over stdio and streamable HTTP), the run ends with the
//! documented code, names the server and what happened, never panics, heals only what may
//! be an expired link, and the thread completes on `pipec resume` once the fault is gone.
//! And the canary: a secret handed to a server's environment, to an HTTP server's headers
//! and to a tool call never shows in the store, in `pipec show`, in what a run prints or
//! in an error, nor in the environment of another server of the same pipeline.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Project, code, json, stderr, stdout, thread_of};
use serde_json::{Value, json};

static DEMO: std::sync::LazyLock<&str> =
    std::sync::LazyLock::new(|| common::demo_crm_bin().to_str().expect("a UTF-8 path"));

/// Every variable the demo server reads, kept out of the commands a test starts so that
/// only what the test sets applies.
const CRM_VARS: &[&str] = &[
    "CRM_EMAILS",
    "CRM_ACTIVITIES",
    "CRM_EXPIRE_EMAILS",
    "CRM_EXPIRE_FILE",
    "CRM_CALL_LOG",
    "CRM_FAULT_FILE",
    "CRM_TRANSPORT",
    "CRM_HTTP_PORT",
    "CRM_PORT_FILE",
    "CRM_HEADER_LOG",
    "CRM_TOKEN",
    "CRM_BEARER_TOKEN",
];

/// The heal replays' call numbers start here (`hydrate/heal.rs` in the runtime), so a journal row
/// whose key ends in this is a replay.
const HEAL_CALL: &str = ":c1048576";

/// A pipeline of two nodes: `deal` calls `get_deal`, `digest` reads the deal's email
/// history through the link the call returned. `SERVER` is the server's declaration,
/// `TOOL` more settings of the tool, `MAX_BYTES` the cap of the read.
const PIPELINE: &str = r#"SERVER

type Deal {
  deal_id: string
  name: string
}

type Email {
  id: string
  subject: string
}

type EmailPage {
  deal_id: string
  count: int
  emails: Email[]
}

type Digest {
  deal_id: string
  emails: int
}

link "activity-history": json = "mcp://crm/deals/{deal_id}/activity"
link "email-history": EmailPage = "mcp://crm/deals/{deal_id}/emails/{start}/{end}"

tool get_deal(deal_id: string) -> Deal from crm {
  read_only = true
  links = ["activity-history", "email-history"]
  TOOL
}

input deal_id: string

node deal(deal_id: string = input.deal_id) -> Deal {
  call = get_deal(deal_id: deal_id)
}

node digest(
  deal: Deal = deal,
  history: EmailPage = resource(ref: "email-history", max_bytes: MAX_BYTES),
) -> Digest {
  return = { deal_id: deal.deal_id, emails: history.count }
}

output digest = digest
"#;

/// What the test varies in [`PIPELINE`].
struct Shape {
    timeout: &'static str,
    tool: &'static str,
    max_bytes: &'static str,
}

const SHORT: Shape = Shape {
    timeout: "1s",
    tool: "",
    max_bytes: "200kb",
};

/// A timeout no test waits for: a run that ends well before it did not hang.
const PATIENT: Shape = Shape {
    timeout: "30s",
    tool: "",
    max_bytes: "200kb",
};

fn pipeline(server: &str, shape: &Shape) -> String {
    PIPELINE
        .replace("SERVER", server)
        .replace("TOOL", shape.tool)
        .replace("MAX_BYTES", shape.max_bytes)
}

/// A demo server over streamable HTTP on a free port, killed when dropped.
struct HttpCrm {
    child: Child,
    url: String,
}

impl HttpCrm {
    fn start(env: &[(&str, &Path)]) -> HttpCrm {
        let mut command = Command::new(*DEMO);
        command
            .args(["--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for var in CRM_VARS {
            command.env_remove(var);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("the demo server starts");
        let stdout = child.stdout.take().expect("its stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("it prints its address");
        let address = first.trim().to_string();
        assert!(
            address.starts_with("127.0.0.1:"),
            "the first line is the bound address, not {address:?}"
        );
        HttpCrm {
            child,
            url: format!("http://{address}/mcp"),
        }
    }
}

impl Drop for HttpCrm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A project running [`PIPELINE`] against one demo server, with the server's fault
/// file, call log and expiry file in the project folder.
struct Crm {
    project: Project,
    fault: PathBuf,
    log: PathBuf,
    expire: PathBuf,
    _http: Option<HttpCrm>,
}

/// A finished `pipec run`, how long it took, and its thread.
struct Run {
    out: Output,
    elapsed: Duration,
    thread: String,
}

impl Crm {
    /// The server as a child of pipec over stdio, its files named in its `env`.
    fn stdio(tag: &str, shape: &Shape) -> Crm {
        let project = Project::new(tag);
        let server = format!(
            r#"server crm {{
  command = "{DEMO}"
  env = {{
    CRM_FAULT_FILE: env("CRM_FAULT_FILE", default: ""),
    CRM_CALL_LOG: env("CRM_CALL_LOG", default: ""),
    CRM_EXPIRE_FILE: env("CRM_EXPIRE_FILE", default: ""),
  }}
  timeout = {}
}}"#,
            shape.timeout,
            DEMO = *DEMO
        );
        project.write("faults.pipe", &pipeline(&server, shape));
        Crm::around(project, None)
    }

    /// The server over streamable HTTP, started by the test with its files.
    fn http(tag: &str, shape: &Shape) -> Crm {
        let project = Project::new(tag);
        let (fault, log, expire) = Crm::files(&project);
        let http = HttpCrm::start(&[
            ("CRM_FAULT_FILE", &fault),
            ("CRM_CALL_LOG", &log),
            ("CRM_EXPIRE_FILE", &expire),
        ]);
        let server = format!(
            "server crm {{\n  url = \"{}\"\n  timeout = {}\n}}",
            http.url, shape.timeout
        );
        project.write("faults.pipe", &pipeline(&server, shape));
        Crm::around(project, Some(http))
    }

    fn files(project: &Project) -> (PathBuf, PathBuf, PathBuf) {
        (
            project.dir.join("faults"),
            project.dir.join("calls.log"),
            project.dir.join("expire"),
        )
    }

    fn around(project: Project, http: Option<HttpCrm>) -> Crm {
        let (fault, log, expire) = Crm::files(&project);
        Crm {
            project,
            fault,
            log,
            expire,
            _http: http,
        }
    }

    fn faults(&self, text: &str) {
        std::fs::write(&self.fault, format!("{text}\n")).expect("write the fault file");
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.project.cmd(args);
        for var in CRM_VARS {
            c.env_remove(var);
        }
        c.env("CRM_FAULT_FILE", &self.fault)
            .env("CRM_CALL_LOG", &self.log)
            .env("CRM_EXPIRE_FILE", &self.expire)
            .stdin(Stdio::null());
        c
    }

    fn run(&self) -> Run {
        let started = Instant::now();
        let out = self
            .command(&["run", "faults.pipe", "--input", "deal_id=D1"])
            .output()
            .expect("pipec runs");
        let elapsed = started.elapsed();
        let thread =
            thread_of(&stderr(&out)).unwrap_or_else(|| panic!("no thread in:\n{}", stderr(&out)));
        Run {
            out,
            elapsed,
            thread,
        }
    }

    fn show(&self, thread: &str, extra: &[&str]) -> Value {
        let mut args = vec!["show", thread, "--json"];
        args.extend_from_slice(extra);
        let out = self.project.run(&args);
        assert_eq!(code(&out), 0, "show: {}", stderr(&out));
        json(&stdout(&out))
    }

    /// The run failed at `node` with `code`, cleanly: exit 1, no panic, the coded error
    /// on stderr and in `pipec show`. Returns the error's message.
    fn failed(&self, run: &Run, node: &str, code_: &str) -> String {
        let err = stderr(&run.out);
        assert!(!err.contains("panicked"), "a panic:\n{err}");
        assert_eq!(code(&run.out), 1, "exit code; stderr:\n{err}");
        assert!(
            err.contains(&format!("error[{code_}]")),
            "stderr does not show {code_}:\n{err}"
        );
        let shown = self.show(&run.thread, &[]);
        assert_eq!(shown["status"], "failed", "{shown:#}");
        let nodes = shown["nodes"].as_array().expect("nodes");
        let failed = nodes
            .iter()
            .find(|n| n["node"] == node)
            .unwrap_or_else(|| panic!("no node `{node}` in {shown:#}"));
        assert_eq!(failed["state"], "failed", "{failed:#}");
        assert_eq!(failed["error"]["code"], code_, "{failed:#}");
        let message = failed["error"]["message"]
            .as_str()
            .expect("a message")
            .to_string();
        assert!(
            err.contains(message.lines().next().unwrap_or_default()),
            "stderr does not show the message {message:?}:\n{err}"
        );
        message
    }

    /// With the fault gone, the thread completes on a resume with the digest.
    fn resumes(&self, thread: &str) {
        let _ = std::fs::remove_file(&self.fault);
        let out = self.command(&["resume", thread]).output().expect("resume");
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "a panic:\n{err}");
        assert_eq!(code(&out), 0, "resume; stderr:\n{err}");
        assert_eq!(
            json(&stdout(&out)),
            json!({ "digest": { "deal_id": "D1", "emails": 100 } })
        );
        assert_eq!(self.show(thread, &[])["status"], "completed");
    }

    fn log_lines(&self, prefix: &str) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_string)
            .collect()
    }

    /// No heal was tried: `get_deal` was called once (no replay reached the server)
    /// and the journal has no replay row.
    fn no_heal(&self, thread: &str) {
        let calls = self.log_lines("tool get_deal");
        assert_eq!(calls.len(), 1, "a replay reached the server: {calls:?}");
        let internal = self.show(thread, &["--internal"]);
        let replays: Vec<&Value> = internal["calls"]
            .as_array()
            .expect("calls")
            .iter()
            .filter(|c| c["call"].as_str().is_some_and(|k| k.ends_with(HEAL_CALL)))
            .collect();
        assert!(replays.is_empty(), "a heal was journaled: {replays:?}");
    }
}

// ── the server exits mid-call ──────────────────────────────────────────────────────

#[test]
fn a_server_that_exits_during_a_tool_call_is_r0501_with_its_stderr_and_the_thread_resumes() {
    let crm = Crm::stdio("exit-tool", &SHORT);
    crm.faults("exit tool get_deal");
    let run = crm.run();
    let message = crm.failed(&run, "deal", "R0501");
    assert!(message.contains("`crm`"), "{message}");
    assert!(message.contains("went away"), "{message}");
    assert!(
        message.contains("exiting, as CRM_FAULT_FILE asks"),
        "the stderr tail is missing: {message}"
    );
    crm.resumes(&run.thread);
}

#[test]
fn a_server_that_exits_during_a_read_is_r0501_not_a_heal_and_the_thread_resumes() {
    let crm = Crm::stdio("exit-read", &SHORT);
    crm.faults("exit read");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0501");
    assert!(message.contains("`crm` went away"), "{message}");
    assert!(message.contains("mcp://crm/deals/D1/emails/"), "{message}");
    assert!(
        message.contains("exiting, as CRM_FAULT_FILE asks"),
        "{message}"
    );
    crm.no_heal(&run.thread);
    crm.resumes(&run.thread);
}

// ── the server never answers ───────────────────────────────────────────────────────

#[test]
fn a_tool_call_never_answered_is_r0501_within_the_servers_timeout() {
    let crm = Crm::stdio("hang-tool", &SHORT);
    crm.faults("hang tool get_deal");
    let run = crm.run();
    let message = crm.failed(&run, "deal", "R0501");
    assert!(
        message.contains("`crm` did not answer `tools/call get_deal` within 1s"),
        "{message}"
    );
    assert!(
        run.elapsed >= Duration::from_secs(1) && run.elapsed < Duration::from_secs(15),
        "the run took {:?} with a timeout of 1s",
        run.elapsed
    );
    crm.resumes(&run.thread);
}

#[test]
fn a_read_never_answered_is_r0501_within_the_servers_timeout_and_not_a_heal() {
    let crm = Crm::stdio("hang-read", &SHORT);
    crm.faults("hang read");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0501");
    assert!(
        message.contains("`crm` did not answer `resources/read mcp://crm/deals/D1/emails/"),
        "{message}"
    );
    assert!(message.contains("within 1s"), "{message}");
    assert!(
        run.elapsed < Duration::from_secs(15),
        "took {:?}",
        run.elapsed
    );
    crm.no_heal(&run.thread);
    crm.resumes(&run.thread);
}

// ── garbage instead of an answer ───────────────────────────────────────────────────

#[test]
fn garbage_instead_of_a_tool_result_is_r0501_naming_it_at_once() {
    let crm = Crm::stdio("garbage-tool", &PATIENT);
    crm.faults("garbage tool get_deal");
    let run = crm.run();
    let message = crm.failed(&run, "deal", "R0501");
    assert!(message.contains("`crm`"), "{message}");
    assert!(message.contains("not MCP messages"), "{message}");
    assert!(
        message.contains("garbage injected instead of the answer to tool get_deal"),
        "the garbage is not named: {message}"
    );
    assert!(
        run.elapsed < Duration::from_secs(15),
        "garbage waited for the timeout: {:?}",
        run.elapsed
    );
    crm.resumes(&run.thread);
}

#[test]
fn garbage_instead_of_a_read_is_r0501_naming_it_at_once_and_not_a_heal() {
    let crm = Crm::stdio("garbage-read", &PATIENT);
    crm.faults("garbage read");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0501");
    assert!(
        message
            .contains("garbage injected instead of the answer to read mcp://crm/deals/D1/emails/"),
        "{message}"
    );
    assert!(
        run.elapsed < Duration::from_secs(15),
        "took {:?}",
        run.elapsed
    );
    crm.no_heal(&run.thread);
    crm.resumes(&run.thread);
}

#[test]
fn garbage_over_http_is_r0501_naming_it_at_once() {
    let crm = Crm::http("garbage-http", &PATIENT);
    crm.faults("garbage read");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0501");
    assert!(message.contains("`crm`"), "{message}");
    assert!(
        message.contains("garbage injected instead of the answer to read"),
        "{message}"
    );
    assert!(
        run.elapsed < Duration::from_secs(15),
        "took {:?}",
        run.elapsed
    );
    crm.no_heal(&run.thread);
    crm.resumes(&run.thread);
}

// ── answers over their limits ──────────────────────────────────────────────────────

#[test]
fn a_tool_result_over_the_transport_limit_of_its_max_result_bytes_is_r0107() {
    // The session's limit is 64 MiB; a call's own is twice its `max_result_bytes` (1 MB
    // when the tool declares none) and a little more, so 3 MB is read past, counted.
    let crm = Crm::stdio("huge-tool", &PATIENT);
    crm.faults("huge 3000000 tool get_deal");
    let run = crm.run();
    let message = crm.failed(&run, "deal", "R0107");
    assert!(message.contains("`get_deal`"), "{message}");
    assert!(
        message.contains("sent a message of 3 MB, more than its `max_result_bytes` of 1 MB allows"),
        "{message}"
    );
    assert!(
        stderr(&run.out).contains("help: raise `max_result_bytes`"),
        "no help line:\n{}",
        stderr(&run.out)
    );
    crm.resumes(&run.thread);
}

#[test]
fn a_tool_result_over_max_result_bytes_but_within_the_transport_limit_is_r0107() {
    let crm = Crm::stdio("huge-tool-within", &PATIENT);
    crm.faults("huge 1500000 tool get_deal");
    let run = crm.run();
    let message = crm.failed(&run, "deal", "R0107");
    assert!(
        message.contains("`get_deal` returned 1.5 MB, over its `max_result_bytes` of 1 MB"),
        "{message}"
    );
    crm.resumes(&run.thread);
}

#[test]
fn a_declared_max_result_bytes_is_the_limit_of_its_calls() {
    let shape = Shape {
        timeout: "30s",
        tool: "max_result_bytes = 10kb",
        max_bytes: "200kb",
    };
    let crm = Crm::stdio("huge-tool-declared", &shape);
    crm.faults("huge 100000 tool get_deal");
    let run = crm.run();
    let message = crm.failed(&run, "deal", "R0107");
    assert!(message.contains("`max_result_bytes` of 10 KB"), "{message}");
    crm.resumes(&run.thread);
}

#[test]
fn a_message_over_the_sessions_64_mib_is_r0107_when_the_tool_allows_more() {
    // A tool may allow more than the session takes: the session's limit then applies.
    let shape = Shape {
        timeout: "30s",
        tool: "max_result_bytes = 100mb",
        max_bytes: "200kb",
    };
    let crm = Crm::stdio("huge-session", &shape);
    crm.faults("huge 70000000 tool get_deal");
    let run = crm.run();
    let message = crm.failed(&run, "deal", "R0107");
    assert!(
        message.contains("over the 67.1 MB pipec takes in one message"),
        "{message}"
    );
    crm.resumes(&run.thread);
}

#[test]
fn a_read_over_the_transport_limit_of_its_max_bytes_is_r0101() {
    let crm = Crm::stdio("huge-read", &PATIENT);
    crm.faults("huge 600000 read");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0101");
    assert!(message.contains("mcp://crm/deals/D1/emails/"), "{message}");
    assert!(message.contains("its `max_bytes` of 200 KB"), "{message}");
    crm.no_heal(&run.thread);
    crm.resumes(&run.thread);
}

#[test]
fn a_read_over_max_bytes_but_within_the_transport_limit_is_r0101() {
    let crm = Crm::stdio("huge-read-within", &PATIENT);
    crm.faults("huge 300000 read");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0101");
    assert!(
        message.contains("is 300 KB, over its `max_bytes` of 200 KB"),
        "{message}"
    );
    crm.no_heal(&run.thread);
    crm.resumes(&run.thread);
}

#[test]
fn a_read_over_max_bytes_over_http_is_r0101() {
    let crm = Crm::http("huge-read-http", &PATIENT);
    crm.faults("huge 600000 read");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0101");
    assert!(
        message.contains("is larger than its `max_bytes` of 200 KB"),
        "{message}"
    );
    crm.no_heal(&run.thread);
    crm.resumes(&run.thread);
}

// ── malformed links ────────────────────────────────────────────────────────────────

#[test]
fn a_resource_link_that_is_not_a_uri_is_r0108() {
    let crm = Crm::stdio("bad-link", &SHORT);
    crm.faults("bad-link tool get_deal");
    let run = crm.run();
    let message = crm.failed(&run, "deal", "R0108");
    assert!(message.contains("`get_deal`"), "{message}");
    assert!(message.contains("`not a uri`"), "{message}");
    crm.resumes(&run.thread);
}

#[test]
fn a_resource_link_without_a_uri_is_r0108() {
    let crm = Crm::stdio("bad-link-no-uri", &SHORT);
    crm.faults("bad-link no-uri tool get_deal");
    let run = crm.run();
    let message = crm.failed(&run, "deal", "R0108");
    assert!(message.contains("`get_deal`"), "{message}");
    assert!(message.contains("without a `uri`"), "{message}");
    crm.resumes(&run.thread);
}

// ── expiry and healing ─────────────────────────────────────────────────────────────

#[test]
fn a_link_that_expires_twice_is_r0102_with_both_causes_and_the_resume_does_not_replay_again() {
    let crm = Crm::stdio("expire-twice", &SHORT);
    std::fs::write(&crm.expire, "2\n").expect("arm the expiry");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0102");
    assert_eq!(
        message.matches("resource link expired").count(),
        2,
        "both causes: {message}"
    );
    assert!(message.contains("`get_deal` was called again"), "{message}");
    let events = stderr(&run.out);
    assert!(
        events.contains("re-derived by calling `get_deal` again"),
        "{events}"
    );
    // One call and one replay reached the server; the replay is journaled.
    assert_eq!(crm.log_lines("tool get_deal").len(), 2);
    let internal = crm.show(&run.thread, &["--internal"]);
    let replays = internal["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .filter(|c| c["call"].as_str().is_some_and(|k| k.ends_with(HEAL_CALL)))
        .count();
    assert_eq!(replays, 1, "{internal:#}");
    assert_eq!(
        std::fs::read_to_string(&crm.expire)
            .unwrap_or_default()
            .trim(),
        "0"
    );
    crm.resumes(&run.thread);
    // The resume read the healed link once more, and called nothing again.
    assert_eq!(
        crm.log_lines("tool get_deal").len(),
        2,
        "{:?}",
        crm.log_lines("")
    );
    assert_eq!(crm.log_lines("read ").len(), 3, "{:?}", crm.log_lines(""));
}

#[test]
fn a_link_that_expires_once_is_healed_by_one_replay_and_the_run_completes() {
    let crm = Crm::stdio("expire-once", &SHORT);
    std::fs::write(&crm.expire, "1\n").expect("arm the expiry");
    let out = crm
        .command(&["run", "faults.pipe", "--input", "deal_id=D1"])
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(json(&stdout(&out))["digest"]["emails"], 100);
    assert_eq!(crm.log_lines("tool get_deal").len(), 2);
}

#[test]
fn an_empty_read_is_taken_for_an_expired_link_and_healed() {
    let crm = Crm::stdio("empty-once", &SHORT);
    crm.faults("empty read 1");
    let out = crm
        .command(&[
            "run",
            "faults.pipe",
            "--input",
            "deal_id=D1",
            "--events",
            "jsonl",
        ])
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let events: Vec<Value> = stdout(&out)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(json)
        .collect();
    let healed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "link_healed")
        .collect();
    assert_eq!(healed.len(), 1, "{events:#?}");
    assert_eq!(healed[0]["tool"], "get_deal");
    assert_eq!(
        crm.log_lines("tool get_deal").len(),
        2,
        "a heal replays the call"
    );
}

/// A dead link whose producer, called again, returns no link of its kind names the
/// link's captured values in words (it printed the map's Debug form), and the thread
/// still completes once the server behaves.
#[test]
fn a_heal_whose_replay_returns_no_such_link_names_the_captures_in_words() {
    let crm = Crm::stdio("heal-no-link", &SHORT);
    // The first run stops at the read, before the link can expire, so that the resume's
    // replay is the one `get_deal` call the fault below answers.
    crm.faults("error -32601 read 1");
    let run = crm.run();
    crm.failed(&run, "digest", "R0501");
    crm.faults("empty tool get_deal");
    std::fs::write(&crm.expire, "1\n").expect("arm the expiry");
    let out = crm
        .command(&["resume", &run.thread])
        .output()
        .expect("resume");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("error[R0102]"), "{err}");
    assert!(
        err.contains("it returned no `email-history` link for deal_id = `D1`, "),
        "{err}"
    );
    assert!(!err.contains("{\""), "no Debug form: {err}");
    crm.resumes(&run.thread);
}

#[test]
fn an_empty_read_every_time_is_r0102_after_one_heal() {
    let crm = Crm::http("empty-always", &SHORT);
    crm.faults("empty read");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0102");
    assert_eq!(message.matches("no contents").count(), 2, "{message}");
    assert_eq!(crm.log_lines("tool get_deal").len(), 2);
    crm.resumes(&run.thread);
}

#[test]
fn a_protocol_error_on_a_read_is_not_taken_for_an_expired_link() {
    for crm in [
        Crm::stdio("method-not-found", &SHORT),
        Crm::http("method-not-found-http", &SHORT),
    ] {
        crm.faults("error -32601 read");
        let run = crm.run();
        let message = crm.failed(&run, "digest", "R0501");
        assert!(
            message.contains("`crm` answered with error -32601"),
            "{message}"
        );
        crm.no_heal(&run.thread);
        crm.resumes(&run.thread);
    }
}

#[test]
fn an_internal_error_on_a_read_is_taken_for_an_expired_link() {
    // Servers answer a missing resource with many codes; any other than the protocol's
    // own may mean the link died, so one replay is tried.
    let crm = Crm::stdio("internal-error", &SHORT);
    crm.faults("error -32603 read 1");
    let out = crm
        .command(&["run", "faults.pipe", "--input", "deal_id=D1"])
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(crm.log_lines("tool get_deal").len(), 2);
}

// ── HTTP statuses and dropped connections ──────────────────────────────────────────

#[test]
fn an_authorization_error_on_a_read_is_r0501_and_no_heal() {
    for status in [401, 403] {
        let crm = Crm::http(&format!("status-{status}"), &SHORT);
        crm.faults(&format!("status {status} read"));
        let run = crm.run();
        let message = crm.failed(&run, "digest", "R0501");
        assert!(
            message.contains(&format!("`crm` answered HTTP {status}")),
            "{message}"
        );
        assert!(message.contains("mcp://crm/deals/D1/emails/"), "{message}");
        assert!(
            stderr(&run.out).contains(&format!("help: HTTP {status} refuses the credentials")),
            "no help line:\n{}",
            stderr(&run.out)
        );
        crm.no_heal(&run.thread);
        crm.resumes(&run.thread);
    }
}

/// Refused credentials are the server's setup, not the tool's failure: R0501 with what
/// to check (it was R0503, a tool that failed), and no retry sends them again.
#[test]
fn an_authorization_error_on_a_tool_call_is_r0501_with_what_to_check() {
    for status in [401, 403] {
        let crm = Crm::http(&format!("call-status-{status}"), &SHORT);
        crm.faults(&format!("status {status} tool get_deal"));
        let run = crm.run();
        let message = crm.failed(&run, "deal", "R0501");
        assert!(
            message.contains(&format!("`crm` answered HTTP {status}")),
            "{message}"
        );
        assert!(message.contains(&crm_url(&crm)), "{message}");
        let err = stderr(&run.out);
        assert!(
            err.contains("help: the server did not accept the credentials pipec sent")
                || err.contains("help: the server knows the credentials pipec sent"),
            "no help line:\n{err}"
        );
        assert_eq!(
            crm.log_lines("tool get_deal").len(),
            1,
            "the call was tried again"
        );
        crm.resumes(&run.thread);
    }
}

/// The URL of the HTTP server a test runs against.
fn crm_url(crm: &Crm) -> String {
    crm._http
        .as_ref()
        .map(|h| h.url.clone())
        .expect("an HTTP server")
}

#[test]
fn an_http_500_on_a_read_is_r0501_and_no_heal() {
    let crm = Crm::http("status-500", &SHORT);
    crm.faults("status 500 read");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0501");
    assert!(message.contains("`crm` answered HTTP 500"), "{message}");
    assert!(
        !message.trim_end().ends_with(':'),
        "the message ends in an empty body: {message:?}"
    );
    crm.no_heal(&run.thread);
    crm.resumes(&run.thread);
}

#[test]
fn a_connection_dropped_mid_answer_is_r0501_and_no_heal() {
    let crm = Crm::http("close", &SHORT);
    crm.faults("close read");
    let run = crm.run();
    let message = crm.failed(&run, "digest", "R0501");
    assert!(message.contains("`crm`"), "{message}");
    crm.no_heal(&run.thread);
    crm.resumes(&run.thread);
}

#[test]
fn a_tool_call_over_http_that_never_answers_is_r0501_within_the_timeout() {
    let crm = Crm::http("hang-http", &SHORT);
    crm.faults("hang tool get_deal");
    let run = crm.run();
    let message = crm.failed(&run, "deal", "R0501");
    assert!(message.contains("within 1s"), "{message}");
    assert!(
        run.elapsed < Duration::from_secs(15),
        "took {:?}",
        run.elapsed
    );
    crm.resumes(&run.thread);
}

// ── the secret canary ──────────────────────────────────────────────────────────────

/// A secret no text of pipec's could contain by chance.
const CANARY: &str = "cnry-7Q4fX9kLm2Wd";

/// A demo server that first writes its whole environment to `$ENV_LOG` and says its
/// token on stderr (so an error's stderr tail carries it).
const LOGGED_CRM: &str = r#"#!/bin/sh
env > "$ENV_LOG"
printf 'starting with token %s\n' "$CRM_TOKEN" >&2
exec DEMO
"#;

/// `crm` gets the secret in its environment and as the argument of `secret_deal`'s
/// call (whose links then carry it, and whose email link is healed); `other` is a second
/// stdio server that must not get it; `web` gets it as a header over HTTP.
const CANARY_PIPELINE: &str = r#"server crm {
  command = "./logged-crm.sh"
  env = {
    ENV_LOG: "crm.env",
    CRM_TOKEN: secret("CRM_TOKEN"),
    CRM_FAULT_FILE: env("CRM_FAULT_FILE", default: ""),
    CRM_CALL_LOG: env("CRM_CALL_LOG", default: ""),
    CRM_EXPIRE_FILE: env("CRM_EXPIRE_FILE", default: ""),
  }
  timeout = 10s
}

server other {
  command = "./logged-crm.sh"
  env = { ENV_LOG: "other.env" }
}

server web {
  url = "URL"
  headers = { Authorization: secret("CRM_TOKEN") }
}

type Deal {
  deal_id: string
  name: string
}

type EmailPage {
  deal_id: string
  count: int
}

type Digest {
  deal_id: string
  emails: int
}

link "email-history": EmailPage = "mcp://crm/deals/{deal_id}/emails/{start}/{end}"

tool get_deal(deal_id: string) -> Deal from crm {
  read_only = true
  links = ["email-history"]
}

tool other_deal(deal_id: string) -> Deal from other {
  name = "get_deal"
  read_only = true
}

tool web_deal(deal_id: string) -> Deal from web {
  name = "get_deal"
  read_only = true
}

input deal_id: string

node secret_deal(token: string = secret("CRM_TOKEN")) -> Deal {
  call = get_deal(deal_id: token)
}

node secret_history(
  history: EmailPage = resource(ref: "email-history", from: secret_deal, max_bytes: 200kb),
) -> Digest {
  return = { deal_id: history.deal_id, emails: history.count }
}

node plain(deal_id: string = input.deal_id) -> Deal {
  call = other_deal(deal_id: deal_id)
}

node remote(deal_id: string = input.deal_id) -> Deal {
  call = web_deal(deal_id: deal_id)
}

output history = secret_history
output plain = plain
output remote = remote
"#;

/// Every file under `dir`, as bytes, with its path.
fn files_under(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path, bytes));
        }
    }
}

fn holds(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn the_canary_secret_reaches_its_server_header_and_call_but_nothing_pipec_writes() {
    let project = Project::new("canary");
    let header_log = project.dir.join("headers.log");
    let http = HttpCrm::start(&[("CRM_HEADER_LOG", &header_log)]);
    project.script("logged-crm.sh", &LOGGED_CRM.replace("DEMO", &DEMO));
    project.write("canary.pipe", &CANARY_PIPELINE.replace("URL", &http.url));
    let fault = project.dir.join("faults");
    let log = project.dir.join("calls.log");
    let expire = project.dir.join("expire");
    // The secret call fails twice, each time with an error that would carry the secret
    // (the stderr tail, then the garbage line echoing the call); the email read of its
    // link then expires once, so the link is healed by a replay with the secret.
    std::fs::write(&fault, "exit tool get_deal 1\ngarbage tool get_deal 1\n").expect("faults");
    std::fs::write(&expire, "1\n").expect("expiry");
    let pipec = |args: &[&str]| {
        let mut c = project.cmd(args);
        for var in CRM_VARS {
            c.env_remove(var);
        }
        c.env("CRM_TOKEN", CANARY)
            .env("CRM_FAULT_FILE", &fault)
            .env("CRM_CALL_LOG", &log)
            .env("CRM_EXPIRE_FILE", &expire)
            .stdin(Stdio::null())
            .output()
            .expect("pipec runs")
    };
    let mut printed: Vec<(String, Output)> = Vec::new();
    let first = pipec(&["run", "canary.pipe", "--input", "deal_id=D1"]);
    let thread = thread_of(&stderr(&first)).expect("a thread");
    assert_eq!(code(&first), 1, "{}", stderr(&first));
    assert!(
        stderr(&first).contains("error[R0501]"),
        "{}",
        stderr(&first)
    );
    assert!(
        stderr(&first).contains("starting with token secret(CRM_TOKEN)"),
        "the stderr tail, scrubbed: {}",
        stderr(&first)
    );
    printed.push(("run".into(), first));
    // What is shown of the failed thread carries the error, whose texts held the secret.
    let shows = |label: &str, printed: &mut Vec<(String, Output)>| {
        for extra in [
            vec!["--json", "--internal", "--events"],
            vec!["--events"],
            vec![],
        ] {
            let mut args = vec!["show", thread.as_str()];
            args.extend(extra.iter().copied());
            printed.push((format!("pipec {} ({label})", args.join(" ")), pipec(&args)));
        }
    };
    shows("after the run", &mut printed);
    let shown_failed = printed
        .iter()
        .find(|(what, _)| what.contains("--internal --events (after the run)"))
        .map(|(_, out)| stdout(out))
        .unwrap_or_default();
    assert!(
        shown_failed.contains("starting with token secret(CRM_TOKEN)"),
        "the failed thread's error, scrubbed, is shown: {shown_failed}"
    );
    let second = pipec(&["resume", &thread]);
    assert_eq!(code(&second), 1, "{}", stderr(&second));
    assert!(
        stderr(&second)
            .contains("garbage injected instead of the answer to tool get_deal secret(CRM_TOKEN)"),
        "the garbage, scrubbed: {}",
        stderr(&second)
    );
    printed.push(("first resume".into(), second));
    shows("after the first resume", &mut printed);
    let third = pipec(&["resume", &thread]);
    assert_eq!(code(&third), 0, "{}", stderr(&third));
    let outputs = json(&stdout(&third));
    assert_eq!(
        outputs["history"]["deal_id"], "secret(CRM_TOKEN)",
        "{outputs:#}"
    );
    assert_eq!(outputs["history"]["emails"], 100, "{outputs:#}");
    assert_eq!(outputs["plain"]["deal_id"], "D1");
    assert_eq!(outputs["remote"]["deal_id"], "D1");
    assert!(
        stderr(&third).contains("re-derived by calling `get_deal` again"),
        "{}",
        stderr(&third)
    );
    printed.push(("second resume".into(), third));
    for extra in [
        vec!["--json", "--internal"],
        vec!["--events"],
        vec!["--json", "--internal", "--events"],
        vec![],
    ] {
        let mut args = vec!["show", thread.as_str()];
        args.extend(extra.iter().copied());
        printed.push((format!("pipec {}", args.join(" ")), pipec(&args)));
    }
    printed.push(("pipec runs --json".into(), pipec(&["runs", "--json"])));
    for (what, out) in &printed {
        assert!(
            !holds(&out.stdout, CANARY) && !holds(&out.stderr, CANARY),
            "{what} printed the secret:\n{}\n{}",
            stdout(out),
            stderr(out)
        );
        assert!(!stderr(out).contains("panicked"), "{what}: {}", stderr(out));
    }
    // The secret went where it was sent: the server's environment, the HTTP header, the
    // tool call's argument (each seen by the server, not by pipec).
    let crm_env = project.read("crm.env");
    assert!(
        crm_env.contains(&format!("CRM_TOKEN={CANARY}")),
        "{crm_env}"
    );
    let headers = std::fs::read_to_string(&header_log).unwrap_or_default();
    assert!(
        headers.contains(&format!("authorization='{CANARY}'")),
        "{headers}"
    );
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        calls.contains(&format!("tool get_deal {CANARY}")),
        "{calls}"
    );
    assert!(
        calls.contains(&format!("read mcp://crm/deals/{CANARY}/emails/")),
        "{calls}"
    );
    // The other server did not get it.
    let other_env = project.read("other.env");
    assert!(
        other_env.contains("ENV_LOG=other.env"),
        "the second server ran: {other_env}"
    );
    assert!(
        !other_env.contains(CANARY),
        "the second server got the secret:\n{other_env}"
    );
    // Nothing pipec stored holds it, while what it stored can be searched.
    let mut stored = Vec::new();
    files_under(&project.dir.join(".pipec"), &mut stored);
    assert!(
        stored
            .iter()
            .any(|(_, bytes)| holds(bytes, "Wayne platform 2025")),
        "the store's values are not searchable as bytes: the check below would prove nothing"
    );
    for (path, bytes) in &stored {
        assert!(!holds(bytes, CANARY), "{} holds the secret", path.display());
    }
}

/// A call given the secret as its argument, whose email link is read by another node;
/// the server gets the secret only as that argument.
const SECRET_LINK_PIPELINE: &str = r#"server crm {
  command = "DEMO"
  env = {
    CRM_FAULT_FILE: env("CRM_FAULT_FILE", default: ""),
    CRM_CALL_LOG: env("CRM_CALL_LOG", default: ""),
  }
}

type Deal {
  deal_id: string
  name: string
}

type EmailPage {
  deal_id: string
  count: int
}

type Digest {
  deal_id: string
  emails: int
}

link "email-history": EmailPage = "mcp://crm/deals/{deal_id}/emails/{start}/{end}"

tool get_deal(deal_id: string) -> Deal from crm {
  read_only = true
  links = ["email-history"]
}

node secret_deal(token: string = secret("CRM_TOKEN")) -> Deal {
  call = get_deal(deal_id: token)
}

node secret_history(
  history: EmailPage = resource(ref: "email-history", from: secret_deal, max_bytes: 200kb),
) -> Digest {
  return = { deal_id: history.deal_id, emails: history.count }
}

output history = secret_history
"#;

#[test]
fn a_link_that_held_a_secret_is_derived_again_after_a_resume_not_read_at_its_placeholder() {
    let project = Project::new("secret-link");
    project.write("link.pipe", &SECRET_LINK_PIPELINE.replace("DEMO", &DEMO));
    let fault = project.dir.join("faults");
    let log = project.dir.join("calls.log");
    // The call succeeds; the read of its link fails, so the resume reads the link as
    // the store kept it, scrubbed.
    std::fs::write(&fault, "exit read 1\n").expect("faults");
    let pipec = |args: &[&str]| {
        let mut c = project.cmd(args);
        for var in CRM_VARS {
            c.env_remove(var);
        }
        c.env("CRM_TOKEN", CANARY)
            .env("CRM_FAULT_FILE", &fault)
            .env("CRM_CALL_LOG", &log)
            .stdin(Stdio::null())
            .output()
            .expect("pipec runs")
    };
    let first = pipec(&["run", "link.pipe"]);
    assert_eq!(code(&first), 1, "{}", stderr(&first));
    assert!(
        stderr(&first).contains("error[R0501]"),
        "{}",
        stderr(&first)
    );
    let thread = thread_of(&stderr(&first)).expect("a thread");
    let resumed = pipec(&["resume", &thread]);
    let err = stderr(&resumed);
    assert_eq!(code(&resumed), 0, "{err}");
    assert!(!holds(&resumed.stderr, CANARY), "{err}");
    let outputs = json(&stdout(&resumed));
    assert_eq!(outputs["history"]["emails"], 100, "{outputs:#}");
    assert_eq!(
        outputs["history"]["deal_id"], "secret(CRM_TOKEN)",
        "{outputs:#}"
    );
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !calls.contains("secret(CRM_TOKEN)") && !calls.contains("$secret"),
        "the server was sent a placeholder:\n{calls}"
    );
    // The resume called `get_deal` again, with the secret, and read the link it gave.
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 4, "{calls}");
    assert!(
        lines[2].starts_with(&format!("tool get_deal {CANARY} ")),
        "{calls}"
    );
    assert!(
        lines[3].starts_with(&format!("read mcp://crm/deals/{CANARY}/emails/")),
        "{calls}"
    );
    let mut stored = Vec::new();
    files_under(&project.dir.join(".pipec"), &mut stored);
    for (path, bytes) in &stored {
        assert!(!holds(bytes, CANARY), "{} holds the secret", path.display());
    }
}

// ── faults inside an agent loop ────────────────────────────────────────────────────

/// An agent whose scripted model calls `get_deal`, then reads a month of emails through
/// `read_emails`, then answers.
const AGENT_PIPELINE: &str = r#"server crm {
  command = "DEMO"
  env = {
    CRM_FAULT_FILE: env("CRM_FAULT_FILE", default: ""),
    CRM_CALL_LOG: env("CRM_CALL_LOG", default: ""),
  }
  timeout = 1s
}

model fast {
  provider = "scripted"
  replies = "replies.json"
}

type Deal {
  deal_id: string
  name: string
}

type EmailPage {
  deal_id: string
  count: int
}

type Summary {
  deal_id: string
  note: string
}

tool get_deal(deal_id: string) -> Deal from crm {
  read_only = true
}

reader read_emails(deal_id: string, start: string, end: string) -> EmailPage from crm {
  uri = "mcp://crm/deals/{deal_id}/emails/{start}/{end}"
  max_bytes = 100kb
}

input deal_id: string

agent research(deal_id: string = input.deal_id) -> Summary {
  model = fast
  prompt = "Research the deal {{ deal_id }} with the tools, then answer with JSON."
  tools = [get_deal, read_emails]
}

output summary = research
"#;

/// A project running [`AGENT_PIPELINE`], with its fault file and call log.
struct AgentCrm {
    project: Project,
    fault: PathBuf,
    log: PathBuf,
}

impl AgentCrm {
    fn new(tag: &str) -> AgentCrm {
        let project = Project::new(tag);
        project.write("agent.pipe", &AGENT_PIPELINE.replace("DEMO", &DEMO));
        let replies = json!({ "research": [
            { "tool_calls": [
                { "name": "get_deal", "arguments": { "deal_id": "{{ deal_id }}" } },
                { "name": "read_emails",
                  "arguments": { "deal_id": "D1", "start": "2025-03-01", "end": "2025-03-31" } }
            ] },
            { "json": { "deal_id": "D1", "note": "read" } }
        ] });
        project.write("replies.json", &replies.to_string());
        let fault = project.dir.join("faults");
        let log = project.dir.join("calls.log");
        AgentCrm {
            project,
            fault,
            log,
        }
    }

    fn pipec(&self, args: &[&str]) -> Output {
        let mut c = self.project.cmd(args);
        for var in CRM_VARS {
            c.env_remove(var);
        }
        c.env("CRM_FAULT_FILE", &self.fault)
            .env("CRM_CALL_LOG", &self.log)
            .stdin(Stdio::null())
            .output()
            .expect("pipec runs")
    }

    /// The run failed at `research` with `code_`, cleanly; returns its thread and message.
    fn failed(&self, fault: &str, code_: &str) -> (String, String, Duration) {
        std::fs::write(&self.fault, format!("{fault}\n")).expect("faults");
        let started = Instant::now();
        let out = self.pipec(&["run", "agent.pipe", "--input", "deal_id=D1"]);
        let elapsed = started.elapsed();
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "a panic:\n{err}");
        assert_eq!(code(&out), 1, "exit code; stderr:\n{err}");
        assert!(err.contains(&format!("error[{code_}]")), "{err}");
        let thread = thread_of(&err).unwrap_or_else(|| panic!("no thread in:\n{err}"));
        let shown = self.show(&thread);
        let node = shown["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .find(|n| n["node"] == "research")
            .cloned()
            .unwrap_or_default();
        assert_eq!(node["error"]["code"], code_, "{shown:#}");
        let message = node["error"]["message"].as_str().unwrap_or_default();
        (thread, message.to_string(), elapsed)
    }

    fn show(&self, thread: &str) -> Value {
        let out = self.pipec(&["show", thread, "--json", "--internal"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        json(&stdout(&out))
    }

    /// The journal row of a call of the loop, by the end of its key.
    fn row(&self, thread: &str, key: &str) -> Value {
        let shown = self.show(thread);
        shown["calls"]
            .as_array()
            .expect("calls")
            .iter()
            .find(|c| c["call"].as_str().is_some_and(|k| k.ends_with(key)))
            .cloned()
            .unwrap_or_else(|| panic!("no row `{key}` in {shown:#}"))
    }

    /// With the fault gone the thread completes, and the model's first turn, already
    /// answered, is not asked again (its row is the one the failed run wrote).
    fn resumes(&self, thread: &str) {
        let first_turn = self.row(thread, ":s0:c0");
        let _ = std::fs::remove_file(&self.fault);
        let out = self.pipec(&["resume", thread]);
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "a panic:\n{err}");
        assert_eq!(code(&out), 0, "resume; stderr:\n{err}");
        assert_eq!(
            json(&stdout(&out)),
            json!({ "summary": { "deal_id": "D1", "note": "read" } })
        );
        assert_eq!(self.row(thread, ":s0:c0"), first_turn);
    }

    fn log_lines(&self, prefix: &str) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .count()
    }
}

#[test]
fn a_server_that_exits_during_an_agents_tool_call_fails_the_node_with_r0501_and_it_resumes() {
    let crm = AgentCrm::new("agent-exit");
    let (thread, message, _) = crm.failed("exit tool get_deal", "R0501");
    assert!(
        message.contains("`research` calling `get_deal`: the server `crm` went away"),
        "{message}"
    );
    assert!(
        message.contains("exiting, as CRM_FAULT_FILE asks"),
        "{message}"
    );
    crm.resumes(&thread);
    assert_eq!(crm.log_lines("tool get_deal"), 2);
}

#[test]
fn an_acts_effect_whose_server_exits_mid_call_blocks_the_thread_with_its_call_row_unknown() {
    // The call's `unknown` row goes with the node's block, in one commit.
    let crm = AgentCrm::new("act-exit");
    let act = AGENT_PIPELINE
        .replace("DEMO", &DEMO)
        .replace("  read_only = true\n", "")
        .replace("agent research(", "act research(");
    crm.project.write("agent.pipe", &act);
    std::fs::write(&crm.fault, "exit tool get_deal\n").expect("faults");
    let out = crm.pipec(&["run", "agent.pipe", "--input", "deal_id=D1"]);
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "a panic:\n{err}");
    assert_ne!(code(&out), 0, "{err}");
    assert!(err.contains("R0403"), "{err}");
    let thread = thread_of(&err).unwrap_or_else(|| panic!("no thread in:\n{err}"));
    assert_eq!(crm.show(&thread)["status"], "blocked");
    let row = crm.row(&thread, ":s0:c1");
    assert_eq!(row["record"]["state"], "unknown", "{row:#}");
    assert_eq!(row["record"]["kind"], "tool", "{row:#}");
}

#[test]
fn an_agents_read_never_answered_is_r0501_within_the_timeout_and_it_resumes() {
    let crm = AgentCrm::new("agent-hang-read");
    let (thread, message, elapsed) = crm.failed("hang read", "R0501");
    assert!(
        message.contains("did not answer `resources/read mcp://crm/deals/D1/emails/2025-03-01"),
        "{message}"
    );
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
    crm.resumes(&thread);
}

#[test]
fn garbage_instead_of_an_agents_tool_result_is_r0501_naming_it_and_it_resumes() {
    let crm = AgentCrm::new("agent-garbage");
    let (thread, message, elapsed) = crm.failed("garbage tool get_deal", "R0501");
    assert!(
        message.contains("garbage injected instead of the answer to tool get_deal"),
        "{message}"
    );
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
    crm.resumes(&thread);
}

#[test]
fn an_agents_tool_result_read_past_its_limit_is_told_to_the_model_as_too_large() {
    // Over the call's transport limit the answer is read past: the model is told to ask
    // for less, as it is for a result over `max_result_bytes` that was read whole.
    let crm = AgentCrm::new("agent-huge");
    std::fs::write(&crm.fault, "huge 3000000 tool get_deal\n").expect("faults");
    let out = crm.pipec(&["run", "agent.pipe", "--input", "deal_id=D1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let runs = json(&stdout(&crm.pipec(&["runs", "--json"])));
    let thread = runs[0]["id"].as_str().expect("a thread").to_string();
    let row = crm.row(&thread, ":s0:c1");
    assert_eq!(row["record"]["state"], "tool_error", "{row:#}");
    assert_eq!(
        row["record"]["result"]["for_model"],
        "The result was over the limit of 1000000 bytes; ask for less.",
        "{row:#}"
    );
}
