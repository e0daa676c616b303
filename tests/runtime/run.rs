//! Durable runs end to end with the real binary: run, pause, resume in a new process,
//! answers, refusals that change nothing, concurrent processes, a `kill -9` and its
//! resume, secrets. Each runs on a redb file (`on_redb::`) and on PostgreSQL
//! (`on_postgres::`), but for the one about damaged redb files.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// An effect: marks that it started, waits `EFFECT_SLEEP` seconds, then records itself.
const EFFECT: &str = r#"#!/bin/sh
input=$(cat)
touch effect.started
if [ -n "$EFFECT_SLEEP" ]; then sleep "$EFFECT_SLEEP"; fi
echo "$PIPEC_NODE $PIPEC_CALL_KEY" >> effects.log
id=$(printf '%s' "$input" | sed -n 's/.*"item":{"id":"\([^"]*\)".*/\1/p')
printf '{"done":true,"id":"%s"}\n' "$id"
"#;

fn gated_project(store: &StoreKind, tag: &str) -> Project {
    let p = Project::on(store, tag);
    p.write("gated.pipe", GATED);
    p.script("scripts/fetch.sh", FETCH);
    p.script("scripts/effect.sh", EFFECT);
    p
}

fn start_paused(p: &Project) -> String {
    let out = p.run(&[
        "run",
        "gated.pipe",
        "--input",
        "id=A7",
        "--detailed-exitcode",
    ]);
    assert_eq!(
        code(&out),
        3,
        "paused with --detailed-exitcode\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(text.contains("gate `review`: Approve A7?"), "{text}");
    assert!(
        text.contains("pipec resume"),
        "the exact resume command:\n{text}"
    );
    thread_of(&text).expect("thread id")
}

/// `pipec show --json` fits the format tests/common/show_shape.rs declares (and
/// docs/show-json.md describes): paused at a gate, then failed by the effect after the
/// gate was answered, with `--internal` and `--events`. (A healed link:
/// tests/mcp_scenario.rs.)
fn show_json_fits_its_declared_shape(store: &StoreKind) {
    let p = Project::on(store, "show-shape");
    p.write("gated.pipe", GATED);
    p.script("scripts/fetch.sh", FETCH);
    p.script(
        "scripts/effect.sh",
        "#!/bin/sh\necho 'the effect refused' >&2\nexit 1\n",
    );
    let thread = start_paused(&p);
    let text = stdout(&p.run(&["show", &thread, "--json"]));
    let paused = show_shape::parse_show(&text);
    assert_eq!(paused.status, "paused", "{text}");
    assert!(
        paused
            .gates
            .iter()
            .any(|g| g.gate == "review" && g.state == "pending" && g.answer.is_none()),
        "{text}"
    );
    assert!(paused.calls.is_none() && paused.events.is_none(), "{text}");
    let out = p.run(&[
        "resume",
        &thread,
        "--answer",
        r#"review={"approved": true}"#,
    ]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&p.run(&["show", &thread, "--json", "--internal", "--events"]));
    let failed = show_shape::parse_show(&text);
    assert_eq!(failed.status, "failed", "{text}");
    assert!(failed.error.is_some(), "{text}");
    assert!(
        failed
            .nodes
            .iter()
            .any(|n| n.node == "apply" && n.state == "failed" && n.error.is_some()),
        "{text}"
    );
    assert!(
        failed
            .gates
            .iter()
            .any(|g| g.state == "answered" && g.answered_by.is_some()),
        "{text}"
    );
    for (section, empty) in [
        ("calls", failed.calls.as_ref().is_none_or(Vec::is_empty)),
        (
            "attempt_log",
            failed.attempt_log.as_ref().is_none_or(Vec::is_empty),
        ),
        ("events", failed.events.as_ref().is_none_or(Vec::is_empty)),
    ] {
        assert!(!empty, "`{section}` is listed: {text}");
    }
    let text = stdout(&p.run(&["runs", "--json"]));
    let runs = show_shape::parse_runs(&text);
    assert!(
        runs.iter()
            .any(|r| r.id == thread && r.status == "failed" && !r.stale),
        "{text}"
    );
}

fn run_pause_then_resume_in_a_new_process(store: &StoreKind) {
    let p = gated_project(store, "pause");
    let thread = start_paused(&p);
    // Paused: listed and shown by other processes.
    let runs = stdout(&p.run(&["runs"]));
    assert!(runs.contains(&thread) && runs.contains("paused"), "{runs}");
    let show = stdout(&p.run(&["show", &thread]));
    assert!(
        show.contains("pending gates") && show.contains("review"),
        "{show}"
    );
    assert!(
        !p.dir.join("effects.log").exists(),
        "nothing after the gate ran"
    );
    // Resume in a new process with the answer.
    let out = p.run(&[
        "resume",
        &thread,
        "--answer",
        r#"review={"approved": true}"#,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let outputs = json(&stdout(&out));
    assert_eq!(
        outputs,
        serde_json::json!({ "summary": { "id": "A7", "done": true } })
    );
    assert_eq!(p.read("effects.log").lines().count(), 1);
    // A completed thread resumes to its outputs, running nothing.
    let again = p.run(&["resume", &thread]);
    assert_eq!(code(&again), 0);
    assert_eq!(json(&stdout(&again)), outputs);
    assert_eq!(p.read("effects.log").lines().count(), 1);
    let show = json(&stdout(&p.run(&["show", &thread, "--json", "--internal"])));
    assert_eq!(show["status"], "completed");
    assert_eq!(show["outputs"], outputs, "computed from the node rows");
    assert_eq!(show["attempts"], 2);
    let events = stdout(&p.run(&["show", &thread, "--events"]));
    let last = json(events.lines().last().unwrap_or(""));
    assert_eq!(last["type"], "thread_completed");
    assert_eq!(last["outputs"], outputs);
    assert!(
        show["calls"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["record"]["state"] == "ok"))
    );
}

fn a_rejected_gate_skips_what_depends_on_it(store: &StoreKind) {
    let p = gated_project(store, "reject");
    let thread = start_paused(&p);
    let out = p.run(&[
        "resume",
        &thread,
        "--answer",
        r#"review={"approved": false}"#,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        json(&stdout(&out)),
        serde_json::json!({ "summary": { "id": "A7", "done": false } })
    );
    assert!(!p.dir.join("effects.log").exists());
}

fn pre_answers_run_straight_through(store: &StoreKind) {
    let p = gated_project(store, "pre");
    let out = p.run(&[
        "run",
        "gated.pipe",
        "--input",
        "id=B1",
        "--answer",
        r#"review={"approved": true}"#,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(json(&stdout(&out))["summary"]["done"], true);
}

fn a_bad_answer_is_refused_and_the_thread_still_resumes(store: &StoreKind) {
    let p = gated_project(store, "badanswer");
    let thread = start_paused(&p);
    let before = stdout(&p.run(&["show", &thread, "--json", "--internal"]));
    for bad in [
        r#"review={"approved": "yes"}"#,
        r#"review=not json"#,
        r#"reveiw={"approved": true}"#,
    ] {
        let out = p.run(&["resume", &thread, "--answer", bad]);
        assert_ne!(code(&out), 0, "{bad} refused");
        let err = stderr(&out);
        assert!(
            err.contains("R0301") || err.contains("not JSON"),
            "{bad}: {err}"
        );
        assert!(!err.contains("panicked"));
    }
    let out = p.run(&["answer", &thread, r#"review={"approved": 1}"#]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("R0301"));
    // Nothing changed: same rows, still paused.
    let after = stdout(&p.run(&["show", &thread, "--json", "--internal"]));
    assert_eq!(
        before, after,
        "a refused answer leaves the thread exactly as it was"
    );
    let out = p.run(&[
        "resume",
        &thread,
        "--answer",
        r#"review={"approved": true}"#,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

fn answer_without_the_lock_then_resume(store: &StoreKind) {
    let p = gated_project(store, "answer");
    let thread = start_paused(&p);
    let out = p.run(&["answer", &thread, r#"review={"approved": true}"#]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // A second, different answer loses: the first decision stands.
    let out = p.run(&["answer", &thread, r#"review={"approved": false}"#]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("already answered"),
        "{}",
        stderr(&out)
    );
    let out = p.run(&["resume", &thread]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(json(&stdout(&out))["summary"]["done"], true);
}

fn missing_inputs_and_unknown_threads_are_coded_errors(store: &StoreKind) {
    let p = gated_project(store, "inputs");
    let out = p.run(&["run", "gated.pipe"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("R0001") && stderr(&out).contains("`id`"),
        "{}",
        stderr(&out)
    );
    let out = p.run(&["run", "gated.pipe", "--input", "id=X", "--input", "n=many"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("R0001"), "{}", stderr(&out));
    let out = p.run(&["run", "gated.pipe", "--input", "id=X", "--input", "nn=2"]);
    assert!(
        stderr(&out).contains("did you mean `n`"),
        "{}",
        stderr(&out)
    );
    // Nothing was stored by the refused runs.
    let runs = p.run(&["runs", "--json"]);
    assert_eq!(json(&stdout(&runs)), serde_json::json!([]));
    let out = p.run(&["resume", "01ZZZZZZZZZZZZZZZZZZZZZZZZ"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("R0003"), "{}", stderr(&out));
    let out = p.run(&["show", "nope"]);
    assert!(stderr(&out).contains("R0003"), "{}", stderr(&out));
}

#[test]
fn corrupt_truncated_and_newer_stores_are_refused_cleanly() {
    let p = gated_project(&StoreKind::Redb, "corrupt");
    std::fs::create_dir_all(p.dir.join(".pipec")).expect("mkdir");
    std::fs::write(p.store(), b"this is not a redb file at all, just some text").expect("write");
    let out = p.run(&["runs"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("R0410"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"));
    let out = p.run(&["run", "gated.pipe", "--input", "id=A"]);
    assert!(stderr(&out).contains("R0410"), "{}", stderr(&out));

    // A real store, truncated.
    let _ = std::fs::remove_file(p.store());
    start_paused(&p);
    let bytes = std::fs::read(p.store()).expect("store");
    std::fs::write(p.store(), &bytes[..bytes.len() / 3]).expect("truncate");
    let out = p.run(&["runs"]);
    assert_ne!(code(&out), 0);
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));

    // A store of a newer format.
    let _ = std::fs::remove_file(p.store());
    let _ = std::fs::remove_dir_all(p.dir.join(".pipec/runs.redb.locks"));
    start_paused(&p);
    {
        let db = redb::Builder::new()
            .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
            .open(p.store())
            .expect("open");
        let txn = db.begin_write().expect("txn");
        {
            let mut meta = txn
                .open_table(redb::TableDefinition::<&str, &[u8]>::new("meta"))
                .expect("meta");
            meta.insert("store_format", b"99".as_slice())
                .expect("insert");
        }
        txn.commit().expect("commit");
    }
    let out = p.run(&["runs"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("R0409") && stderr(&out).contains("format 99"),
        "{}",
        stderr(&out)
    );
    let out = p.run(&["store", "migrate"]);
    assert!(stderr(&out).contains("R0409"), "{}", stderr(&out));
}

fn a_plan_changed_under_a_paused_run_is_refused_until_told_what_to_do(store: &StoreKind) {
    let p = gated_project(store, "planchange");
    let thread = start_paused(&p);
    // Change a finished node.
    let changed = GATED.replace(
        "exec = [\"./scripts/fetch.sh\"]\n  idempotent = true",
        "exec = [\"./scripts/fetch.sh\", \"--v2\"]\n  idempotent = true",
    );
    p.write("gated.pipe", &changed);
    let before = stdout(&p.run(&["show", &thread, "--json", "--internal"]));
    let out = p.run(&[
        "resume",
        &thread,
        "--answer",
        r#"review={"approved": true}"#,
    ]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(
        err.contains("R0401") && err.contains("`fetch`") && err.contains("--rerun-from"),
        "{err}"
    );
    assert_eq!(
        before,
        stdout(&p.run(&["show", &thread, "--json", "--internal"])),
        "refused resume changes nothing"
    );
    // Keep the old result: resumes.
    let out = p.run(&[
        "resume",
        &thread,
        "--keep",
        "fetch",
        "--answer",
        r#"review={"approved": true}"#,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(json(&stdout(&out))["summary"]["done"], true);
}

fn rerun_from_recomputes_and_reopens_the_gate(store: &StoreKind) {
    let p = gated_project(store, "rerun");
    let thread = start_paused(&p);
    p.write(
        "gated.pipe",
        &GATED.replace("Approve {{ item.id }}?", "Approve {{ item.id }} now?"),
    );
    let out = p.run(&[
        "resume",
        &thread,
        "--rerun-from",
        "review",
        "--detailed-exitcode",
    ]);
    assert_eq!(code(&out), 3, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("Approve A7 now?"), "{}", stdout(&out));
}

fn two_resumes_of_one_thread_one_proceeds_the_other_is_locked_out(store: &StoreKind) {
    let p = gated_project(store, "locked");
    let thread = start_paused(&p);
    let first = p
        .cmd(&[
            "resume",
            &thread,
            "--answer",
            r#"review={"approved": true}"#,
        ])
        .env("EFFECT_SLEEP", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while !p.dir.join("effect.started").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the effect never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // While it runs: listed as running, shown, and a second resume is refused.
    let runs = stdout(&p.run(&["runs"]));
    assert!(runs.contains("running"), "{runs}");
    let show = stdout(&p.run(&["show", &thread]));
    assert!(show.contains("status    running"), "{show}");
    let second = p.run(&["resume", &thread]);
    assert_eq!(code(&second), 1);
    let err = stderr(&second);
    assert!(
        err.contains("R0402") && err.contains("process"),
        "names the holder: {err}"
    );
    let out = first.wait_with_output().expect("first resume");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(p.read("effects.log").lines().count(), 1);
}

fn events_are_versioned_json_lines_with_sequence_numbers(store: &StoreKind) {
    let p = gated_project(store, "events");
    let out = p.run(&["run", "gated.pipe", "--input", "id=E1", "--events", "jsonl"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = stdout(&out).lines().map(json).collect();
    assert_eq!(lines[0]["type"], "version");
    let seqs: Vec<u64> = lines[1..]
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let types: Vec<&str> = lines.iter().filter_map(|e| e["type"].as_str()).collect();
    for t in [
        "node_started",
        "node_finished",
        "gate_pending",
        "thread_paused",
    ] {
        assert!(types.contains(&t), "{t} in {types:?}");
    }
    assert_eq!(types.last(), Some(&"thread_paused"));
    // The same history is in the store.
    let thread = lines[1]["thread"].as_str().expect("thread").to_string();
    let stored = stdout(&p.run(&["show", &thread, "--events"]));
    assert!(stored.contains("gate_pending"));
}

fn cancel_and_prune_remove_only_what_they_should(store: &StoreKind) {
    let p = gated_project(store, "prune");
    let paused = start_paused(&p);
    let done = p.run(&[
        "run",
        "gated.pipe",
        "--input",
        "id=Z",
        "--answer",
        r#"review={"approved": false}"#,
    ]);
    assert_eq!(code(&done), 0);
    let cancelled = start_paused(&p);
    assert_eq!(code(&p.run(&["cancel", &cancelled])), 0);
    assert!(stdout(&p.run(&["show", &cancelled])).contains("cancelled"));
    let refused = p.run(&["resume", &cancelled]);
    assert_eq!(code(&refused), 1);
    assert!(stderr(&refused).contains("R0412"), "{}", stderr(&refused));
    // The tables are the store's own: redb's `threads`, PostgreSQL's `pipec_threads`.
    let rows = |p: &Project, table: &str| {
        let table = if p.is_postgres() {
            format!("pipec_{table}")
        } else {
            table.to_string()
        };
        let stats = json(&stdout(&p.run(&["store", "stats", "--json"])));
        stats["tables"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == table))
            .map_or(0, |t| t["rows"].as_u64().unwrap_or(0))
    };
    assert_eq!(rows(&p, "threads"), 3);
    let out = p.run(&["prune", "--older-than", "0s"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("pruned 2 threads"),
        "{}",
        stderr(&out)
    );
    let runs = stdout(&p.run(&["runs"]));
    assert!(runs.contains(&paused), "the paused thread is kept: {runs}");
    assert!(!runs.contains(&cancelled));
    assert_eq!(rows(&p, "threads"), 1, "the pruned threads' rows are gone");
    if p.is_postgres() {
        // One row per thread in each: the paused thread's gate and its first attempt.
        assert_eq!(rows(&p, "gates"), 1);
        assert_eq!(rows(&p, "attempts"), 1);
    } else {
        assert_eq!(rows(&p, "by_status"), 1);
        assert_eq!(rows(&p, "fences"), 1);
    }
    assert_eq!(
        code(&p.run(&[
            "resume",
            &paused,
            "--answer",
            r#"review={"approved": true}"#
        ])),
        0
    );
}

fn a_secret_never_reaches_the_store_events_or_output(store: &StoreKind) {
    let p = Project::on(store, "canary");
    p.write(
        "secret.pipe",
        r#"input who: string

node call(who: string = input.who, token: string = secret("CANARY_TOKEN")) -> { echoed: string } {
  exec = ["./scripts/leak.sh"]
  idempotent = true
}

node fail(token: string = secret("CANARY_TOKEN"), prev: { echoed: string } = call) -> json {
  exec = ["./scripts/leak_and_fail.sh"]
  idempotent = true
}

output echoed = call
output failed = fail
"#,
    );
    // A careless script: prints the token into its result and onto stderr.
    p.script("scripts/leak.sh", "#!/bin/sh\ninput=$(cat)\ntok=$(printf '%s' \"$input\" | sed -n 's/.*\"token\":\"\\([^\"]*\\)\".*/\\1/p')\necho \"using $tok\" >&2\nprintf '{\"echoed\":\"token=%s\"}\\n' \"$tok\"\n");
    p.script(
        "scripts/leak_and_fail.sh",
        "#!/bin/sh\ninput=$(cat)\necho \"failed with $input\" >&2\nexit 3\n",
    );
    let canary = "pipec-canary-7f3a9b2e51";
    let out = p
        .cmd(&[
            "run",
            "secret.pipe",
            "--input",
            "who=x",
            "--events",
            "jsonl",
        ])
        .env("CANARY_TOKEN", canary)
        .output()
        .expect("run");
    assert_eq!(code(&out), 1, "the second node fails");
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!all.contains(canary), "canary in output:\n{all}");
    assert!(
        all.contains("secret(CANARY_TOKEN)"),
        "scrubbed, visibly:\n{all}"
    );
    let thread = thread_of(&all).expect("thread");
    let show = p
        .cmd(&["show", &thread, "--json", "--internal", "--events"])
        .output()
        .expect("show");
    assert!(!stdout(&show).contains(canary));
    let hay = p.store_contents();
    assert!(hay.contains(&thread), "the store holds the thread");
    assert!(!hay.contains(canary), "canary in the store");
    // Resuming needs the secret again (it was never stored).
    let out = p.run(&["resume", &thread]);
    assert!(
        stderr(&out).contains("R0002") && stderr(&out).contains("CANARY_TOKEN"),
        "{}",
        stderr(&out)
    );
}

fn the_main_example_runs_offline_end_to_end(store: &StoreKind) {
    let root = crate_root();
    let p = Project::on(store, "main");
    let store = match store {
        StoreKind::Redb => p.dir.join("runs.redb").to_string_lossy().into_owned(),
        StoreKind::Postgres(url) => url.clone(),
    };
    let out = std::process::Command::new(pipec_bin())
        .args([
            "run",
            "pipelines/account_review.pipe",
            "--input",
            "account=ACME",
            "--model",
            "fast=scripted:pipelines/replies/account_review.json",
            "--answer",
            r#"approve={"approved": true}"#,
            "--store",
            &store,
        ])
        .current_dir(root)
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json(&stdout(&out));
    assert_eq!(v["report"]["account"], "ACME");
    assert_eq!(v["report"]["sent"], true);
    assert!(v["note"]["subject"].as_str().is_some_and(|s| !s.is_empty()));
}

fn a_value_is_stored_once_however_many_effects_pass_it_on(store: &StoreKind) {
    let p = Project::on(store, "once");
    let mut src = String::from(
        "type Blob {\n  blob: string\n}\n\ninput x: int\n\nnode n0(x: int = input.x) -> Blob {\n  exec = [\"./scripts/blob.sh\"]\n}\n\n",
    );
    for i in 1..6 {
        src.push_str(&format!(
            "node n{i}(p: Blob = n{}) -> Blob {{\n  exec = [\"./scripts/blob.sh\"]\n}}\n\n",
            i - 1
        ));
    }
    src.push_str("output last = n5\n");
    p.write("chain.pipe", &src);
    // Each step prints a fresh 20 kB value.
    p.script(
        "scripts/blob.sh",
        "#!/bin/sh\ncat > /dev/null\nprintf '{\"blob\":\"%s\"}' \"$(head -c 20000 /dev/zero | tr '\\000' x)\"\n",
    );
    let out = p.run(&["run", "chain.pipe", "--input", "x=1", "-q"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let stats = json(&stdout(&p.run(&["store", "stats", "--json"])));
    if p.is_postgres() {
        // PostgreSQL counts pages and compresses large values: the rows are weighed by
        // their records' bytes instead, uncompressed.
        let tables = [
            "pipec_threads",
            "pipec_nodes",
            "pipec_items",
            "pipec_calls",
            "pipec_gates",
            "pipec_attempts",
            "pipec_heals",
        ];
        let stored: u64 = tables
            .iter()
            .chain(&["pipec_events"])
            .map(|t| p.pg_record_bytes(t))
            .sum();
        assert!(
            (120_000..140_000).contains(&stored),
            "stored {stored} bytes for 120 kB of values"
        );
        return;
    }
    let stored: u64 = stats["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .filter(|t| t["name"] != "plans" && t["name"] != "meta")
        .map(|t| t["stored_bytes"].as_u64().unwrap_or(0))
        .sum();
    // Six values of 20 kB: their rows and a little bookkeeping, no copies in the journal
    // (an exec's stdin and stdout are its inputs and its node's value).
    assert!(
        (120_000..140_000).contains(&stored),
        "stored {stored} bytes for 120 kB of values: {stats}"
    );
}

/// `fetch`: logs each start; the first time (while `slow-fetch` exists) it then takes
/// 30 s, for a kill to land in; otherwise it prints the item at once.
const SLOW_FETCH: &str = r#"#!/bin/sh
input=$(cat)
if [ -e slow-fetch ]; then
  rm slow-fetch
  echo started >> fetch.log
  sleep 30
else
  echo started >> fetch.log
fi
id=$(printf '%s' "$input" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
printf '{"id":"%s","n":2}\n' "$id"
"#;

/// `kill -9` of `pipec run` in an idempotent step, then of `pipec resume` in a step that
/// is not: the idempotent one runs again on its own; the other blocks the thread until a
/// person says to retry it, and then runs once. On PostgreSQL the killed process's lease
/// outlives it: a resume is refused (R0402, naming it) until the lease expires.
fn a_killed_run_reruns_an_idempotent_step_and_blocks_on_an_effect(store: &StoreKind) {
    let p = gated_project(store, "crash");
    p.script("scripts/fetch.sh", SLOW_FETCH);
    p.write("slow-fetch", "");
    let thread = "01JCRASH000000000000000000";
    // Long leases here, so that the refused resume surely comes while the lease lives.
    let ttl = "4000";
    let mut run = p
        .cmd(&[
            "run",
            "gated.pipe",
            "--thread",
            thread,
            "--input",
            "id=C1",
            "-q",
        ])
        .env("PIPEC_LEASE_TTL_MS", ttl)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    wait_for(&p.dir.join("fetch.log"), Duration::from_secs(20));
    let pid = run.id();
    let _ = run.kill();
    let _ = run.wait();
    if p.is_postgres() {
        let out = p
            .cmd(&["resume", thread])
            .env("PIPEC_LEASE_TTL_MS", ttl)
            .output()
            .expect("resume");
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("R0402") && err.contains(&format!("process {pid}")),
            "the killed process's lease still holds the thread: {err}"
        );
    }
    p.wait_not_held_by(thread, pid, Duration::from_secs(12));
    // The idempotent `fetch` runs again without being asked; the thread pauses at the
    // gate.
    let out = p.run(&["resume", thread, "--detailed-exitcode"]);
    assert_eq!(code(&out), 3, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(p.read("fetch.log").lines().count(), 2, "fetch ran again");
    // Killed in the effect.
    let mut resume = p
        .cmd(&[
            "resume",
            thread,
            "--answer",
            r#"review={"approved": true}"#,
            "-q",
        ])
        .env("EFFECT_SLEEP", "30")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("resume");
    wait_for(&p.dir.join("effect.started"), Duration::from_secs(20));
    p.kill_holder(&mut resume, thread);
    let out = p.run(&["resume", thread, "--detailed-exitcode"]);
    assert_eq!(code(&out), 4, "blocked: {}{}", stdout(&out), stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("R0403") && err.contains("apply"),
        "names the unfinished call: {err}"
    );
    assert!(
        !p.dir.join("effects.log").exists(),
        "the effect did not rerun"
    );
    assert_eq!(p.show_json(thread)["status"], "blocked");
    let out = p.run(&["resume", thread, "--retry-unfinished", "all"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        json(&stdout(&out)),
        serde_json::json!({ "summary": { "id": "C1", "done": true } })
    );
    assert_eq!(
        p.read("effects.log").lines().count(),
        1,
        "the effect ran once"
    );
    assert_eq!(
        p.read("fetch.log").lines().count(),
        2,
        "fetch was not run a third time"
    );
}

/// `pipec resume --due` resumes the paused threads whose gate deadline passed, by its
/// `on_timeout`, and leaves the others waiting.
fn resume_due_takes_the_threads_whose_deadline_passed(store: &StoreKind) {
    let p = gated_project(store, "due");
    p.write(
        "wait.pipe",
        "type Approval {\n  approved: bool\n}\n\ngate ask() -> Approval {\n  message = \"ok?\"\n  timeout = 1m\n  on_timeout = { approved: false }\n}\n\noutput answer = ask\n",
    );
    let out = p.run(&["run", "wait.pipe", "--detailed-exitcode"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let timed = thread_of(&stdout(&out)).expect("thread");
    let waiting = start_paused(&p);
    let out = p.run(&["resume", "--due"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no paused thread is due"),
        "{}",
        stderr(&out)
    );
    assert_eq!(p.show_json(&timed)["status"], "paused");
    // Past the deadline, on the test clock.
    let out = p.run_later(Duration::from_secs(61), &["resume", "--due"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        json(&stdout(&out)),
        serde_json::json!({ "answer": { "approved": false } })
    );
    let st = p.show_json(&timed);
    assert_eq!(st["status"], "completed", "{st}");
    assert_eq!(
        p.show_json(&waiting)["status"],
        "paused",
        "no deadline: still asked"
    );
    let out = p.run(&["resume", "--due"]);
    assert!(stderr(&out).contains("no paused thread is due"));
}

/// Logs each item's start and end (`work.log`); item 2, while `hang` exists, hangs (a
/// kill lands in it).
const WORK: &str = r#"#!/bin/sh
input=$(cat)
i=$(printf '%s' "$input" | sed -n 's/.*"i":\([0-9]*\).*/\1/p')
if [ "$i" = 2 ] && [ -e hang ]; then
  rm hang
  echo "start $i" >> work.log
  touch hang.started
  sleep 30
fi
echo "start $i" >> work.log
echo "done $i" >> work.log
printf '{"v":%d}\n' "$i"
"#;

/// `kill -9` in the middle of an `each` whose items are effects: the items that
/// finished do not run again, the one that was running blocks the thread until it is
/// retried, and the rest run; the list is whole and in order.
fn a_kill_in_the_middle_of_each_reruns_no_finished_item(store: &StoreKind) {
    let p = Project::on(store, "eachcrash");
    p.write(
        "fan.pipe",
        "input items: int[]\n\nnode work(i: int = each(input.items, max: 10)) -> { v: int } {\n  exec = [\"./work.sh\"]\n  concurrency = 1\n}\n\noutput work = work\n",
    );
    p.script("work.sh", WORK);
    p.write("hang", "");
    let thread = "01JEACHCRASH00000000000000";
    let mut run = p
        .cmd(&[
            "run",
            "fan.pipe",
            "--thread",
            thread,
            "--input",
            "items=[0,1,2,3,4]",
            "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    wait_for(&p.dir.join("hang.started"), Duration::from_secs(20));
    p.kill_holder(&mut run, thread);
    let out = p.run(&["resume", thread, "--detailed-exitcode"]);
    assert_eq!(code(&out), 4, "blocked: {}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("R0403"), "{}", stderr(&out));
    let out = p.run(&["resume", thread, "--retry-unfinished", "all"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        json(&stdout(&out)),
        serde_json::json!({ "work": [{ "v": 0 }, { "v": 1 }, { "v": 2 }, { "v": 3 }, { "v": 4 }] })
    );
    let log = p.read("work.log");
    let count = |line: &str| log.lines().filter(|l| *l == line).count();
    for i in 0..5 {
        assert_eq!(
            count(&format!("done {i}")),
            1,
            "item {i} ended once:\n{log}"
        );
    }
    for i in [0, 1] {
        assert_eq!(
            count(&format!("start {i}")),
            1,
            "item {i} did not run again:\n{log}"
        );
    }
    assert_eq!(
        count("start 2"),
        2,
        "item 2: the killed try and the retry:\n{log}"
    );
    let st = p.show_json(thread);
    assert_eq!(st["status"], "completed", "{st}");
}

/// A cancel asked right after the thread's holder was killed: on PostgreSQL the dead
/// holder's lease still holds the thread, so the cancel is only requested; the next
/// resume, which finds the unfinished effect, records the cancellation instead of
/// ending blocked (it used to be refused at that commit, and the thread stayed running
/// for ever). On redb the lock died with the holder and the cancel is at once.
fn a_cancel_asked_while_a_killed_holder_still_holds_the_thread_is_recorded(store: &StoreKind) {
    let p = gated_project(store, "cancelkilled");
    p.write(
        "slow.pipe",
        "node slow() -> { done: bool } {\n  exec = [\"./slow.sh\"]\n}\n\noutput slow = slow\n",
    );
    p.script(
        "slow.sh",
        "#!/bin/sh\ncat >/dev/null\ntouch slow.started\nsleep 30\necho '{\"done\":true}'\n",
    );
    let thread = "01JCANCE1K111ED00000000000";
    let ttl = "4000";
    let mut run = p
        .cmd(&["run", "slow.pipe", "--thread", thread, "-q"])
        .env("PIPEC_LEASE_TTL_MS", ttl)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    wait_for(&p.dir.join("slow.started"), Duration::from_secs(20));
    let pid = run.id();
    let _ = run.kill();
    let _ = run.wait();
    let out = p.run(&["cancel", thread]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    p.wait_not_held_by(thread, pid, Duration::from_secs(12));
    let out = p.run(&["resume", thread]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("cancelled"), "{}", stderr(&out));
    let st = p.show_json(thread);
    assert_eq!(st["status"], "cancelled", "{st}");
    let runs = stdout(&p.run(&["runs"]));
    assert!(runs.contains("cancelled"), "{runs}");
}

on_every_store!(
    show_json_fits_its_declared_shape,
    a_cancel_asked_while_a_killed_holder_still_holds_the_thread_is_recorded,
    resume_due_takes_the_threads_whose_deadline_passed,
    a_kill_in_the_middle_of_each_reruns_no_finished_item,
    a_killed_run_reruns_an_idempotent_step_and_blocks_on_an_effect,
    run_pause_then_resume_in_a_new_process,
    a_rejected_gate_skips_what_depends_on_it,
    pre_answers_run_straight_through,
    a_bad_answer_is_refused_and_the_thread_still_resumes,
    answer_without_the_lock_then_resume,
    missing_inputs_and_unknown_threads_are_coded_errors,
    a_plan_changed_under_a_paused_run_is_refused_until_told_what_to_do,
    rerun_from_recomputes_and_reopens_the_gate,
    two_resumes_of_one_thread_one_proceeds_the_other_is_locked_out,
    events_are_versioned_json_lines_with_sequence_numbers,
    cancel_and_prune_remove_only_what_they_should,
    a_secret_never_reaches_the_store_events_or_output,
    the_main_example_runs_offline_end_to_end,
    a_value_is_stored_once_however_many_effects_pass_it_on,
);
