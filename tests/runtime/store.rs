//! How commands open the store, with the real binary: read commands change nothing in
//! the file and work on read-only files and mounts and beside a running `pipec run`;
//! commands that use a store refuse a path where there is none and create nothing; a
//! damaged store is R0410 naming the file, never a panic.

use crate::common;

use crate::common::store_fixture;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use store_fixture::*;

/// Every command that only reads, as `pipec` arguments.
fn read_commands(thread: &str) -> Vec<Vec<String>> {
    [
        vec!["runs"],
        vec!["runs", "--json"],
        vec!["runs", "--status", "paused"],
        vec!["show", thread],
        vec!["show", thread, "--json", "--internal"],
        vec!["show", thread, "--events"],
        vec!["store", "stats"],
        vec!["store", "stats", "--json"],
        vec!["store", "check"],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(str::to_string).collect())
    .collect()
}

fn run_with_store(p: &Project, args: &[String], store: &Path) -> Output {
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    let store = store.display().to_string();
    all.extend(["--store", store.as_str()]);
    p.run(&all)
}

#[test]
fn defect_12_read_commands_leave_the_store_file_unchanged() {
    let (p, thread) = store_project("readonly-bytes");
    let before = fingerprint(&p.store());
    // A coarse clock would hide a write that lands in the same tick.
    std::thread::sleep(Duration::from_millis(20));
    for args in read_commands(&thread) {
        let out = run_with_store(&p, &args, &p.store());
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        let after = fingerprint(&p.store());
        assert!(
            after.0 == before.0,
            "`pipec {}` changed the store's bytes",
            args.join(" ")
        );
        assert_eq!(
            after.1,
            before.1,
            "`pipec {}` changed the store's modification time",
            args.join(" ")
        );
    }
    let listed = stdout(&p.run(&["runs"]));
    assert!(listed.contains(&thread), "{listed}");
}

/// A copy of the project's store in a folder of its own, with the copy made read-only.
fn read_only_copy(p: &Project, tag: &str) -> PathBuf {
    let dir = p.dir.join(tag);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let copy = dir.join("backup.redb");
    std::fs::copy(p.store(), &copy).expect("copy");
    set_mode(&copy, 0o444);
    set_mode(&dir, 0o555);
    copy
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// `pipec ARGS` as an unprivileged user, when this test runs as root (root writes
/// read-only files, so only another user shows that pipec does not need to).
fn as_nobody(p: &Project, args: &[String]) -> Option<Output> {
    if !is_root() {
        return None;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(pipec_bin())
        .args(args)
        .current_dir(&p.dir)
        .env("NO_COLOR", "1")
        .env_remove("PIPEC_STORE")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    // setpriv itself failed (not there, or not allowed): nothing was learnt.
    if out.status.code() == Some(127) || stderr(&out).starts_with("setpriv:") {
        return None;
    }
    Some(out)
}

#[test]
fn defect_12_runs_and_show_work_on_a_read_only_copy() {
    let (p, thread) = store_project("readonly-file");
    // The project folder must be reachable by the unprivileged user.
    set_mode(&p.dir, 0o755);
    let copy = read_only_copy(&p, "backup");
    let before = fingerprint(&copy);
    let mut unprivileged = false;
    for args in [
        vec!["runs".to_string()],
        vec!["show".to_string(), thread.clone()],
        vec!["show".to_string(), thread.clone(), "--json".to_string()],
        vec!["store".to_string(), "stats".to_string()],
        vec!["store".to_string(), "check".to_string()],
    ] {
        let mut with_store = args.clone();
        with_store.extend(["--store".to_string(), copy.display().to_string()]);
        let out = match as_nobody(&p, &with_store) {
            Some(out) => {
                unprivileged = true;
                out
            }
            None => run_with_store(&p, &args, &copy),
        };
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        if args[0] != "store" {
            assert!(stdout(&out).contains(&thread), "{args:?}: {}", stdout(&out));
        }
    }
    assert!(fingerprint(&copy) == before, "the copy is unchanged");
    if !unprivileged {
        eprintln!("note: not root, or no setpriv: the read-only copy was read as its owner");
    }
    if let Some(dir) = copy.parent() {
        set_mode(dir, 0o755);
    }
}

/// Runs `pipec ARGS` with `dir` bind-mounted read-only over itself in a mount namespace
/// of its own; `None` when this machine does not allow that.
fn on_read_only_mount(dir: &Path, args: &[String]) -> Option<Output> {
    let mut script = format!(
        "mount --bind -o ro '{0}' '{0}' || exit 97; exec '{1}'",
        dir.display(),
        pipec_bin()
    );
    for a in args {
        script.push_str(&format!(" '{a}'"));
    }
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .env("NO_COLOR", "1")
        .env_remove("PIPEC_STORE")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    if out.status.code() == Some(97) || stderr(&out).starts_with("unshare:") {
        return None;
    }
    Some(out)
}

#[test]
fn defect_12_read_commands_work_on_a_read_only_mount() {
    let (p, thread) = store_project("readonly-mount");
    let dir = p.dir.join("mounted");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let copy = dir.join("runs.redb");
    std::fs::copy(p.store(), &copy).expect("copy");
    let store = copy.display().to_string();
    let mut mounted = false;
    for args in read_commands(&thread) {
        let mut args = args;
        args.extend(["--store".to_string(), store.clone()]);
        let Some(out) = on_read_only_mount(&dir, &args) else {
            continue;
        };
        mounted = true;
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        if args[0] == "runs" || args[0] == "show" {
            assert!(stdout(&out).contains(&thread), "{args:?}: {}", stdout(&out));
        }
    }
    // A write is refused with the file named, and changes nothing.
    let before = fingerprint(&copy);
    let args: Vec<String> = ["cancel", thread.as_str(), "--store", store.as_str()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(out) = on_read_only_mount(&dir, &args) {
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("R0410") && stderr(&out).contains(&store),
            "{}",
            stderr(&out)
        );
    }
    assert!(fingerprint(&copy) == before);
    if !mounted {
        eprintln!("note: this machine allows no read-only bind mount; nothing was checked");
    }
}

#[test]
fn defect_12_commands_refuse_a_path_with_no_store_and_create_nothing() {
    let (p, thread) = store_project("missing");
    let missing = p.dir.join("elsewhere/runs.redb");
    let store = missing.display().to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["show", &thread],
        vec!["show", &thread, "--events"],
        vec!["prune", "--older-than", "0s"],
        vec!["answer", &thread, ANSWER],
        vec!["cancel", &thread],
        vec!["resume", &thread, "--answer", ANSWER],
        vec!["resume", "--due"],
        vec!["runs"],
        vec!["store", "check"],
        vec!["store", "stats"],
        vec!["store", "migrate"],
    ];
    for args in commands {
        let mut all = args.clone();
        all.extend(["--store", store.as_str()]);
        let out = p.run(&all);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{args:?}: {err}");
        assert!(
            err.contains("error[R0413]") && err.contains(&store),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("help:") && err.contains("--store"),
            "{args:?}: {err}"
        );
        assert!(!missing.exists(), "{args:?} created a store");
        assert!(
            !missing.parent().expect("parent").exists(),
            "{args:?} created the store's folder"
        );
    }
    // PIPEC_STORE is a path to a store too.
    let out = p
        .cmd(&["show", &thread])
        .env("PIPEC_STORE", &missing)
        .output()
        .expect("runs");
    assert!(stderr(&out).contains("R0413"), "{}", stderr(&out));
    assert!(!missing.exists());
}

#[test]
fn defect_12_a_mistyped_store_path_suggests_the_store_nearby() {
    let (p, thread) = store_project("did-you-mean");
    let typo = p.dir.join(".pipec/run.redb");
    let out = p.run(&["show", &thread, "--store", &typo.display().to_string()]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains(&format!("did you mean `--store {}`?", p.store().display())),
        "{err}"
    );
    assert!(!typo.exists());
    // The folder instead of the file.
    let out = p.run(&["runs", "--store", ".pipec"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("R0413") && err.contains("did you mean"),
        "{err}"
    );
}

#[test]
fn runs_with_no_store_at_the_default_place_says_there_are_no_runs_yet() {
    let p = Project::new("no-runs-yet");
    let out = p.run(&["runs"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("no runs yet"), "{}", stderr(&out));
    let out = p.run(&["runs", "--json"]);
    assert_eq!(stdout(&out).trim(), "[]");
    assert!(!p.store().exists());
    // `run` is the command that creates it.
    p.write(
        "hello.pipe",
        "input name: string\n\nnode hello(name: string = input.name) -> string {\n  return = name\n}\n\noutput hello = hello\n",
    );
    let out = p.run(&["run", "hello.pipe", "--input", "name=x", "-q"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(p.store().is_file());
}

const SLOW: &str = r#"input n: int

node wait(n: int = input.n) -> int {
  exec = ["./scripts/slow.sh"]
}

node after(n: int = wait) -> int {
  exec = ["./scripts/slow.sh"]
}

output after = after
"#;

const SLOW_SH: &str = "#!/bin/sh\ncat >/dev/null\nsleep 1\necho 3\n";

#[test]
fn read_commands_work_beside_a_running_run() {
    let p = Project::new("beside");
    p.write("slow.pipe", SLOW);
    p.script("scripts/slow.sh", SLOW_SH);
    let child = p
        .cmd(&["run", "slow.pipe", "--input", "n=1", "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Wait until the thread is there.
    let started = Instant::now();
    let thread = loop {
        let out = p.run(&["runs", "--json"]);
        if code(&out) == 0
            && let Some(id) = json(&stdout(&out))[0]["id"].as_str()
        {
            break id.to_string();
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no thread");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = p.run(&["runs"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("running"), "{}", stdout(&out));
    let out = p.run(&["show", &thread, "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(json(&stdout(&out))["status"], "running");
    let out = p.run(&["store", "check"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = p.run(&["store", "stats"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let done = child.wait_with_output().expect("the run ends");
    assert_eq!(code(&done), 0, "{}", stderr(&done));
    // Reads after the run see what it committed.
    let out = p.run(&["show", &thread, "--json"]);
    assert_eq!(json(&stdout(&out))["status"], "completed");
}

#[test]
fn a_store_left_by_a_killed_run_is_read_after_redb_repairs_it() {
    let p = Project::new("killed");
    p.write("slow.pipe", SLOW);
    p.script("scripts/slow.sh", SLOW_SH);
    let mut child = p
        .cmd(&["run", "slow.pipe", "--input", "n=1", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // The first step sleeps a second: the run is in the middle of it.
    std::thread::sleep(Duration::from_millis(700));
    let _ = child.kill();
    let _ = child.wait();
    let unclean = std::fs::read(p.store()).expect("store");
    // On a read-only mount redb cannot repair it: a coded error that says why.
    let dir = p.dir.join("mounted");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("runs.redb"), &unclean).expect("copy");
    let store = dir.join("runs.redb").display().to_string();
    if let Some(out) = on_read_only_mount(&dir, &["runs".into(), "--store".into(), store.clone()]) {
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{err}");
        assert!(
            err.contains("R0410") && err.contains(&store) && err.contains("write access"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // Where it can, the first command repairs it and reads.
    let out = p.run(&["runs"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("stale"), "{}", stdout(&out));
    let repaired = fingerprint(&p.store());
    let out = p.run(&["runs"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(fingerprint(&p.store()) == repaired, "repaired once");
}

/// The offset the adversarial test found: the first table page zeroed made `store
/// check` exit 101 with "entered unreachable code".
#[test]
fn defect_5_a_damaged_page_is_r0410_naming_the_file_for_every_command() {
    let (p, thread) = store_project("damaged");
    let mut bytes = std::fs::read(p.store()).expect("store");
    bytes[4096..4096 + 64].fill(0);
    std::fs::write(p.store(), &bytes).expect("damage");
    let store = p.store().display().to_string();
    let mut commands = read_commands(&thread);
    for args in [
        vec!["answer", &thread, ANSWER],
        vec!["resume", &thread, "--answer", ANSWER],
        vec!["cancel", &thread],
        vec!["prune", "--older-than", "0s"],
        vec!["run", "flow.pipe", "--input", r#"words=["x"]"#],
    ] {
        commands.push(args.into_iter().map(str::to_string).collect());
    }
    for args in commands {
        let out = run_with_store(&p, &args, &p.store());
        let err = stderr(&out);
        assert_ne!(code(&out), 101, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(code(&out), 1, "{args:?} fails: {err}");
        assert!(
            err.contains("error[R0410]") && err.contains(&store),
            "{args:?}: {err}"
        );
    }
    let out = p.run(&["store", "check"]);
    assert!(
        stderr(&out).contains("the integrity check found damage"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn store_check_finds_a_damaged_record_and_repair_is_on_request_only() {
    let (p, _thread) = store_project("check");
    let out = p.run(&["store", "check"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("intact") && stderr(&out).contains("every page's checksum verified"),
        "{}",
        stderr(&out)
    );
    // A record that is not JSON any more, written through redb (its checksums agree).
    {
        let db = redb::Builder::new()
            .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
            .open(p.store())
            .expect("open");
        let txn = db.begin_write().expect("txn");
        {
            let mut gates = txn
                .open_table(redb::TableDefinition::<(u128, &str), &[u8]>::new("gates"))
                .expect("gates");
            let key = {
                let mut it = redb::ReadableTable::iter(&gates).expect("iter");
                let (k, _) = it.next().expect("a gate").expect("row");
                let (id, name) = k.value();
                (id, name.to_string())
            };
            gates
                .insert((key.0, key.1.as_str()), b"\x01{not json".as_slice())
                .expect("insert");
        }
        txn.commit().expect("commit");
    }
    let before = fingerprint(&p.store());
    let out = p.run(&["store", "check"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("R0410")
            && err.contains("the integrity check found damage")
            && err.contains("gate `review`")
            && err.contains(&p.store().display().to_string()),
        "{err}"
    );
    assert!(
        fingerprint(&p.store()) == before,
        "the check repaired nothing"
    );
}

#[test]
fn a_read_only_store_refuses_writes_through_the_library() {
    use pipec::store::{RedbStore, Store, StoreError};
    let (p, thread) = store_project("library");
    let store = RedbStore::open_read_only(p.store()).expect("opens");
    assert!(store.is_read_only());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let state = rt.block_on(store.load(&thread)).expect("reads");
    assert_eq!(
        state.thread.map(|t| t.status),
        Some(pipec::store::Status::Paused)
    );
    let err = rt
        .block_on(store.request_cancel(&thread))
        .expect_err("a write");
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err:?}");
    assert!(err.to_string().contains("read-only"), "{err}");
    let err = rt
        .block_on(store.answer(&thread, vec![], "api"))
        .expect_err("a write");
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err:?}");
    let missing = RedbStore::open_read_only(p.dir.join("nope.redb"));
    assert!(matches!(missing, Err(StoreError::Missing { .. })));
    assert!(matches!(
        RedbStore::open_existing(p.dir.join("nope.redb")),
        Err(StoreError::Missing { .. })
    ));
    assert!(!p.dir.join("nope.redb").exists());
}

const GATED_PURE: &str = r#"type Approval {
  approved: bool
}

input n: int

node same(n: int = input.n) -> int {
  return = n
}

gate review(n: int = same) -> Approval {
  message = "Keep {{ n }}?"
}

node keep(ack: Approval = review, n: int = same) -> int {
  return = n
}

output kept = keep
"#;

#[test]
fn a_pipeline_runs_on_the_memory_store_as_on_redb() {
    use pipec::runtime::{Outcome, Runner};
    use pipec::store::{MemoryStore, Status, Store};
    let store = MemoryStore::new();
    let plan = pipec::compile_str("gated.pipe", GATED_PURE).expect("compiles");
    let runner = Runner::new(plan, store.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let out = rt
        .block_on(runner.start(serde_json::json!({ "n": 42 })))
        .expect("runs");
    let Outcome::Paused { thread, gates } = out else {
        panic!("{out:?}")
    };
    assert_eq!(gates[0].name, "review");
    assert!(
        !store.is_held(&thread),
        "the attempt ended and freed the thread"
    );
    let out = rt
        .block_on(runner.resume(
            &thread,
            vec![(
                "review".to_string(),
                serde_json::json!({ "approved": true }),
            )],
        ))
        .expect("resumes");
    let Outcome::Completed { outputs, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(outputs.to_value()["kept"], 42);
    let state = rt.block_on(store.load(&thread[..12])).expect("load");
    assert_eq!(state.thread.map(|t| t.status), Some(Status::Completed));
    let events = rt.block_on(store.events(&thread, 0)).expect("events");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(events[0].event.kind(), "thread_created");
}
