//! `pipec store copy` with the real binary on real stores: a thread paused on a redb file
//! copied to PostgreSQL, answered and resumed there to the outputs of an uninterrupted
//! run, and copied back to a fresh file that checks clean and shows the same; a queued
//! thread copied to PostgreSQL and run by a worker there; and the refusals, each of
//! which leaves the target as it was.

#![cfg(target_os = "linux")]

use crate::common;

use std::process::{Child, Stdio};
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

const APPROVE: &str = r#"review={"approved": true}"#;

fn gated_project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.write("gated.pipe", GATED);
    p.script("scripts/fetch.sh", FETCH);
    p.script("scripts/effect.sh", EFFECT);
    p
}

/// A thread of the gated pipeline paused at its gate, on the project's redb store.
fn paused(p: &Project, id: &str) -> String {
    let out = p.run(&["run", "gated.pipe", "--input", &format!("id={id}")]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    thread_of(&stdout(&out)).expect("thread id")
}

fn ok(out: &std::process::Output) -> String {
    assert_eq!(code(out), 0, "{}{}", stdout(out), stderr(out));
    stdout(out)
}

fn copy(p: &Project, from: &str, to: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["store", "copy", "--from", from, "--to", to];
    args.extend_from_slice(extra);
    p.run(&args)
}

/// `pipec show --events` of a thread on a store, as printed.
fn events(p: &Project, thread: &str, store: &str) -> String {
    ok(&p.run(&["show", thread, "--events", "--store", store]))
}

fn seqs(events: &str) -> Vec<u64> {
    events
        .lines()
        .map(|l| json(l)["seq"].as_u64().expect("seq"))
        .collect()
}

fn internal(p: &Project, thread: &str, store: &str) -> serde_json::Value {
    json(&ok(&p.run(&[
        "show",
        thread,
        "--json",
        "--internal",
        "--store",
        store,
    ])))
}

fn runs(p: &Project, store: &str) -> String {
    ok(&p.run(&["runs", "--store", store]))
}

/// The outputs the gated pipeline gives when nothing interrupts it.
fn uninterrupted(id: &str) -> serde_json::Value {
    let p = gated_project("copy-uninterrupted");
    let out = p.run(&[
        "run",
        "gated.pipe",
        "--input",
        &format!("id={id}"),
        "--answer",
        APPROVE,
    ]);
    json(&ok(&out))
}

#[test]
fn a_paused_thread_copied_to_postgres_resumes_there_and_copies_back_the_same() {
    let Some(pg) = pg_schema::postgres_store("copy_paused") else {
        return;
    };
    let p = gated_project("copy-paused");
    let redb = p.store().display().to_string();
    let thread = paused(&p, "A7");
    let before = events(&p, &thread, &redb);
    assert!(before.contains("gate_pending"), "{before}");
    let source_show = internal(&p, &thread, &redb);

    let out = copy(&p, &redb, &pg, &[]);
    ok(&out);
    let said = stderr(&out);
    assert!(
        said.contains("copied 1 thread") && said.contains("1 paused"),
        "{said}"
    );
    assert!(said.contains("1 plan"), "the plan came along: {said}");
    // The target lists the same events, number for number, time for time.
    let copied = events(&p, &thread, &pg);
    assert_eq!(copied, before);
    assert_eq!(
        seqs(&copied),
        (0..seqs(&before).len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(internal(&p, &thread, &pg), source_show);
    // The source was only read; the database checks clean.
    assert_eq!(events(&p, &thread, &redb), before);
    let check = p.run(&["store", "check", "--store", &pg]);
    assert!(
        stderr(&check).contains("intact: 1 threads"),
        "{}",
        stderr(&check)
    );

    // Answered and resumed on PostgreSQL: the outputs of a run nothing interrupted.
    let out = p.run(&["resume", &thread, "--store", &pg, "--answer", APPROVE]);
    assert_eq!(json(&ok(&out)), uninterrupted("A7"));
    assert_eq!(
        p.read("effects.log").lines().count(),
        1,
        "the effect after the gate ran once"
    );
    let after = events(&p, &thread, &pg);
    assert!(
        after.starts_with(&before),
        "the resume went on from the copied events"
    );
    assert!(after.contains("thread_completed"), "{after}");

    // Back to a fresh redb file: it checks clean and shows the same thread.
    let back = p.dir.join("back.redb").display().to_string();
    let out = copy(&p, &pg, &back, &["--thread", &thread[..12]]);
    assert!(stderr(&out).contains("1 completed"), "{}", stderr(&out));
    ok(&out);
    let check = p.run(&["store", "check", "--store", &back]);
    ok(&check);
    assert!(
        stderr(&check).contains("intact: 1 threads"),
        "{}",
        stderr(&check)
    );
    assert_eq!(internal(&p, &thread, &back), internal(&p, &thread, &pg));
    assert_eq!(events(&p, &thread, &back), after);
    let out = p.run(&["resume", &thread, "--store", &back]);
    assert_eq!(json(&ok(&out)), uninterrupted("A7"), "its outputs there");
}

/// A worker on a store, its stderr in `worker.log`.
fn worker(p: &Project, store: &str) -> Child {
    let log = std::fs::File::create(p.dir.join("worker.log")).expect("log");
    p.cmd(&["worker", "--verbose", "--poll", "200ms", "--store", store])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("pipec worker starts")
}

#[test]
fn a_queued_thread_copied_to_postgres_is_run_by_a_worker_there() {
    let Some(pg) = pg_schema::postgres_store("copy_queued") else {
        return;
    };
    let p = gated_project("copy-queued");
    let redb = p.store().display().to_string();
    let out = p.run(&[
        "run",
        "gated.pipe",
        "--input",
        "id=Q1",
        "--answer",
        APPROVE,
        "--submit",
    ]);
    let thread = ok(&out).trim().to_string();
    // With a password in the URL (the test server does not ask for one): never shown.
    let (scheme, rest) = pg.split_once("://").expect("a URL");
    let with_password = match rest.split_once('@') {
        Some((user, host)) if !user.contains(':') => {
            format!("{scheme}://{user}:s3cret-pw@{host}")
        }
        _ => pg.clone(),
    };
    let out = copy(&p, &redb, &with_password, &["--json"]);
    assert!(
        !stdout(&out).contains("s3cret-pw") && !stderr(&out).contains("s3cret-pw"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let summary = json(&ok(&out));
    if with_password != pg {
        assert!(
            summary["to"].as_str().is_some_and(|t| t.contains("***")),
            "{summary}"
        );
    }
    assert_eq!(summary["threads"], 1);
    assert_eq!(summary["statuses"]["queued"], 1);
    assert_eq!(summary["copied"][0]["thread"], thread.as_str());
    let mut w = worker(&p, &pg);
    let start = Instant::now();
    loop {
        let shown = json(&ok(&p.run(&["show", &thread, "--json", "--store", &pg])));
        if shown["status"] == "completed" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the worker did not run it: {shown}\n{}",
            p.read("worker.log")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &w.id().to_string()])
        .status();
    let _ = w.wait();
    let out = p.run(&["resume", &thread, "--store", &pg]);
    assert_eq!(json(&ok(&out)), uninterrupted("Q1"));
    // The source still has it queued: only the copy ran.
    let shown = json(&ok(&p.run(&["show", &thread, "--json", "--store", &redb])));
    assert_eq!(shown["status"], "queued");
}

#[test]
fn a_target_that_has_a_thread_refuses_the_copy_and_is_left_as_it_was() {
    let Some(pg) = pg_schema::postgres_store("copy_exists") else {
        return;
    };
    let p = gated_project("copy-exists");
    let redb = p.store().display().to_string();
    let first = paused(&p, "E1");
    ok(&copy(&p, &redb, &pg, &[]));
    // A second thread in the source; the first is in both.
    let second = paused(&p, "E2");
    let target_runs = runs(&p, &pg);
    let target_events = events(&p, &first, &pg);
    let out = copy(&p, &redb, &pg, &[]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("R0414"), "{said}");
    assert!(said.contains(&first) && !said.contains(&second), "{said}");
    assert!(said.contains("--skip-existing"), "{said}");
    assert!(said.contains("nothing was copied"), "{said}");
    assert_eq!(runs(&p, &pg), target_runs, "the target is unchanged");
    assert_eq!(events(&p, &first, &pg), target_events);
    let out = p.run(&["show", &second, "--store", &pg]);
    assert_eq!(code(&out), 1, "the other thread was not copied either");

    // `--skip-existing` copies the other one and leaves the first as it is.
    let out = copy(&p, &redb, &pg, &["--skip-existing"]);
    ok(&out);
    let said = stderr(&out);
    assert!(said.contains("copied 1 thread"), "{said}");
    assert!(
        said.contains("skipped 1 thread") && said.contains(&first),
        "{said}"
    );
    assert_eq!(events(&p, &second, &pg), events(&p, &second, &redb));
    assert_eq!(events(&p, &first, &pg), target_events);

    // Nothing left to copy: said so, and still nothing written.
    let out = copy(&p, &redb, &pg, &["--skip-existing", "--json"]);
    let summary = json(&ok(&out));
    assert_eq!(summary["threads"], 0);
    assert_eq!(summary["skipped"].as_array().map(Vec::len), Some(2));
}

#[test]
fn a_thread_a_live_process_runs_is_refused() {
    let p = gated_project("copy-held");
    let redb = p.store().display().to_string();
    let thread = paused(&p, "H1");
    let mut resume = p
        .cmd(&["resume", &thread, "--answer", APPROVE])
        .env("EFFECT_SLEEP", "4")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("resume starts");
    wait_for(&p.dir.join("effect.started"), Duration::from_secs(20));
    let target = p.dir.join("target.redb");
    let out = copy(&p, &redb, &target.display().to_string(), &[]);
    let _ = resume.wait();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("R0402") && said.contains(&thread), "{said}");
    assert!(!target.exists(), "a refused copy creates no store");
}

#[test]
fn unknown_threads_bad_stores_and_bad_flags_are_refused() {
    let p = gated_project("copy-refusals");
    let redb = p.store().display().to_string();
    let thread = paused(&p, "U1");
    let target = p.dir.join("target.redb");
    let to = target.display().to_string();

    // A misspelt id: did you mean the one the source has? Nothing is created.
    let last = thread.chars().last().expect("id");
    let typo = format!("{}{}", &thread[..25], if last == 'Z' { 'Y' } else { 'Z' });
    let out = copy(&p, &redb, &to, &["--thread", &typo]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("R0003") && said.contains(&typo), "{said}");
    assert!(
        said.contains(&format!("did you mean `{thread}`?")),
        "{said}"
    );
    assert!(!target.exists(), "a refused copy creates no store");

    // A source that is no store.
    let out = copy(&p, "nowhere.redb", &to, &[]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("R0413"), "{}", stderr(&out));

    // A database that cannot be reached: an error, and the password never shown.
    let bad = "postgres://pipec:s3cret-pw@127.0.0.1:1/nodb?connect_timeout=2";
    for out in [copy(&p, &redb, bad, &[]), copy(&p, bad, &to, &[])] {
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        let said = stderr(&out);
        assert!(said.contains("error["), "{said}");
        assert!(!said.contains("s3cret-pw"), "the password leaked: {said}");
    }
    let out = copy(&p, &redb, "postgres://pipec:s3cret-pw@[bad", &[]);
    assert_ne!(code(&out), 0, "{}", stderr(&out));
    assert!(!stderr(&out).contains("s3cret-pw"), "{}", stderr(&out));
    assert!(!target.exists());

    // One store on both sides.
    let out = copy(&p, &redb, &redb, &[]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("same store"), "{}", stderr(&out));

    // Flags: a misspelt one, and `--store` in place of `--from`/`--to`.
    let out = p.run(&["store", "copy", "--form", &redb, "--to", &to]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--from"), "{}", stderr(&out));
    let out = p.run(&[
        "store", "copy", "--store", &redb, "--from", &redb, "--to", &to,
    ]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--from"), "{}", stderr(&out));
    let out = p.run(&["store", "copy", "--from", &redb]);
    assert_eq!(code(&out), 2, "`--to` is required");
    assert!(!target.exists());

    // The source is as it was, and a good copy still works.
    ok(&copy(&p, &redb, &to, &[]));
    assert_eq!(events(&p, &thread, &to), events(&p, &thread, &redb));
}
