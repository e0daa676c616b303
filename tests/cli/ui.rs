//! `pipec ui` in a real browser: Debian's Chromium, driven by playwright-core
//! (`tests/fixtures/ui/drive.mjs`) on the Node the interop tests install, against the
//! inspector serving a store where the README's deal research waits at its gate. The
//! browser opens the thread, sees its graph and the gate's form, answers it, watches the
//! run complete, and reads a node's cost; screenshots are kept under
//! `target/ui-screenshots/`. Without Chromium (or npm) the test says so and passes, unless
//! `PIPEC_REQUIRE_BROWSER=1` (as in CI), which makes it fail.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::npm::{NODE, PLAYWRIGHT, node_modules, node_of};
use common::serve_http::Running;
use common::*;
use serde_json::Value;

/// Debian's Chromium, or `PIPEC_TEST_CHROMIUM`.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PIPEC_TEST_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("PIPEC_REQUIRE_BROWSER").as_deref() != Ok("1"),
        "PIPEC_REQUIRE_BROWSER=1 but there is no Chromium at {} (apt-get install chromium, or set PIPEC_TEST_CHROMIUM)",
        path.display()
    );
    eprintln!(
        "skipped: no Chromium at {} (apt-get install chromium)",
        path.display()
    );
    None
}

/// The README's pipeline with its prompts and canned replies.
fn project() -> Project {
    let p = Project::new("ui");
    for (from, to) in [
        ("pipelines/deal_research.pipe", "deal_research.pipe"),
        ("prompts/research/scan.jinja", "prompts/research/scan.jinja"),
        ("prompts/consume/brief.jinja", "prompts/consume/brief.jinja"),
        ("pipelines/replies/deal_research.json", "replies.json"),
    ] {
        let text = std::fs::read_to_string(crate_root().join(from)).expect("a file");
        p.write(to, &text);
    }
    p
}

#[test]
fn a_person_answers_a_gate_in_the_browser_and_watches_the_run_complete() {
    let Some(chromium) = chromium() else { return };
    let Some(modules) = node_modules("ui-browser", &[PLAYWRIGHT, NODE]) else {
        return;
    };
    let p = project();
    let run = p.run(&[
        "run",
        "deal_research.pipe",
        "--input",
        "deal_id=D1",
        "--model",
        "fast=scripted:replies.json",
    ]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let thread = thread_of(&stdout(&run)).unwrap_or_else(|| panic!("paused: {}", stderr(&run)));

    let mut ui = p.cmd(&["ui", "--addr", "127.0.0.1:0"]);
    ui.env("PIPEC_UI_TOKEN", "ui-test-token-0123456789")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = Running(ui.spawn().expect("pipec ui starts"));
    let stderr_pipe = child.0.stderr.take().expect("its stderr");
    let mut lines = BufReader::new(stderr_pipe).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("pipec ui: open ").map(str::to_string))
        .expect("pipec ui says where to open it");
    assert!(url.contains("#token=ui-test-token-0123456789"), "{url}");
    std::thread::spawn(move || for _ in lines {});

    let shots = crate_root().join("target/ui-screenshots");
    let _ = std::fs::create_dir_all(&shots);
    let driven = Command::new(node_of(&modules))
        .arg(crate_root().join("tests/fixtures/ui/drive.mjs"))
        .args([url.as_str(), thread.as_str()])
        .arg(&chromium)
        .arg(&shots)
        .arg(&modules)
        .current_dir(&p.dir)
        .output()
        .expect("node runs");
    let said = String::from_utf8_lossy(&driven.stdout);
    let seen: Value = json(said.lines().last().unwrap_or("{}"));
    assert!(
        driven.status.success(),
        "{seen:#}\n{}",
        String::from_utf8_lossy(&driven.stderr)
    );
    // The list, the graph at the pause, the form.
    assert_eq!(seen["listed_status"], "paused", "{seen:#}");
    assert_eq!(seen["token_left_the_url"], true);
    assert_eq!(seen["nodes"]["research"], "done", "{seen:#}");
    assert_eq!(seen["nodes"]["review"], "waiting", "{seen:#}");
    assert_eq!(seen["nodes"]["consume"], "pending", "{seen:#}");
    assert!(
        seen["form_fields"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "approved")),
        "{seen:#}"
    );
    // After the answer: every node done, two attempts on the timeline.
    for node in ["research", "review", "digest", "consume"] {
        assert_eq!(seen["nodes_after"][node], "done", "{seen:#}");
    }
    assert_eq!(seen["timeline_attempts"], 2, "{seen:#}");
    assert_eq!(seen["page_errors"], serde_json::json!([]), "{seen:#}");
    // The store agrees: completed, the gate answered from the inspector, and the costs the
    // page showed are the ones `pipec show --json` gives.
    let view = p.show_json(&thread);
    assert_eq!(view["status"], "completed", "{view:#}");
    assert_eq!(view["gates"][0]["answered_by"], "ui", "{view:#}");
    assert_eq!(view["gates"][0]["answer"]["approved"], true, "{view:#}");
    let consume = view["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["node"] == "consume"))
        .map(|n| n["usage"]["cost_usd"].as_f64().unwrap_or(-1.0))
        .expect("consume's cost");
    assert_eq!(seen["consume_cost"], format!("${consume:.4}"), "{seen:#}");
    let total = view["usage"]["cost_usd"].as_f64().expect("the cost");
    assert_eq!(seen["thread_cost"], format!("${total:.4}"), "{seen:#}");
    assert!(shots.join("paused.png").exists() && shots.join("completed.png").exists());
    drop(child);
}
