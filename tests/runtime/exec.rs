//! How `exec` children are started, on both ways pipec has of starting them (the direct
//! spawn on Linux, and the portable fork path that `PIPEC_SPAWN=fork` selects): what the
//! child sees, what a command that cannot start gives, and that children die with pipec.

#![cfg(target_os = "linux")]

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// Reports what it sees: its stdin, its working directory, pipec's variables, whether it
/// leads its own process group, and its blocked-signal mask.
const PROBE: &str = r#"#!/bin/sh
input=$(cat)
pgrp=$(cut -d' ' -f5 /proc/$$/stat)
blocked=$(sed -n 's/^SigBlk:[[:space:]]*//p' /proc/$$/status)
ignored=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status)
printf '{"input":%s,"cwd":"%s","node":"%s","item":"%s","key":"%s","leader":%s,"blocked":"%s","ignored":"%s"}\n' \
  "$input" "$(pwd)" "$PIPEC_NODE" "$PIPEC_ITEM" "$PIPEC_CALL_KEY" \
  "$([ "$pgrp" = "$$" ] && echo true || echo false)" "$blocked" "$ignored"
"#;

const PIPE: &str = r#"type Seen {
  input: json
  cwd: string
  node: string
  item: string
  key: string
  leader: bool
  blocked: string
  ignored: string
}

input word: string

node probe(word: string = input.word) -> Seen {
  exec = ["./scripts/probe.sh"]
}

// A bare name is looked up on PATH.
node shell(seen: Seen = probe) -> { echoed: string } {
  exec = ["sh", "-c", "cat >/dev/null; printf '{\"echoed\":\"%s\"}' \"$0\"", "from-sh"]
}

output seen = probe
output shell = shell
"#;

fn project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.write("probe.pipe", PIPE);
    p.script("scripts/probe.sh", PROBE);
    p
}

fn run_with(p: &Project, spawn: Option<&str>, stdin_closed: bool) -> serde_json::Value {
    let out = if stdin_closed {
        // pipec started with stdin closed: a pipe it makes may land on descriptor 0.
        let mut c = std::process::Command::new("sh");
        c.args([
            "-c",
            "exec \"$0\" run probe.pipe --input word=héllo <&-",
            &pipec_bin(),
        ])
        .current_dir(&p.dir)
        .env("NO_COLOR", "1")
        .env_remove("PIPEC_STORE");
        if let Some(s) = spawn {
            c.env("PIPEC_SPAWN", s);
        }
        c.output().expect("runs")
    } else {
        let mut c = p.cmd(&["run", "probe.pipe", "--input", "word=héllo"]);
        if let Some(s) = spawn {
            c.env("PIPEC_SPAWN", s);
        }
        c.stdin(Stdio::null()).output().expect("runs")
    };
    assert_eq!(code(&out), 0, "{spawn:?}: {}", stderr(&out));
    json(&stdout(&out))
}

#[test]
fn the_child_sees_the_same_on_both_spawn_paths() {
    let p = project("probe");
    let root = p.dir.canonicalize().expect("canonical");
    let mut keys = Vec::new();
    for (spawn, closed) in [
        (None, false),
        (Some("fork"), false),
        (None, true),
        (Some("fork"), true),
    ] {
        let out = run_with(&p, spawn, closed);
        let seen = &out["seen"];
        assert_eq!(
            seen["input"],
            serde_json::json!({ "word": "héllo" }),
            "{spawn:?}"
        );
        assert_eq!(seen["cwd"], root.display().to_string(), "{spawn:?}");
        assert_eq!(seen["node"], "probe");
        assert_eq!(seen["item"], "");
        assert_eq!(seen["leader"], true, "{spawn:?}: its own process group");
        assert_eq!(
            seen["blocked"], "0000000000000000",
            "{spawn:?}: no signal left blocked"
        );
        assert_eq!(
            seen["ignored"],
            inherited_ignored(),
            "{spawn:?}: no signal left ignored but those pipec was started with ignored \
             (as `exec` passes them on), and SIGPIPE at its default"
        );
        assert_eq!(
            out["shell"]["echoed"], "from-sh",
            "{spawn:?}: PATH lookup and arguments"
        );
        keys.push(seen["key"].as_str().unwrap_or_default().to_string());
    }
    // Each run is a new thread, so a new call key.
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 4);
}

#[test]
fn a_command_that_cannot_start_fails_its_node_with_the_reason() {
    let p = Project::new("nostart");
    p.write("plain.sh", "#!/bin/sh\necho '{}'\n"); // not executable
    for (argv, reason) in [
        ("\"./missing.sh\"", "No such file or directory"),
        ("\"./plain.sh\"", "Permission denied"),
        ("\"no-such-command-anywhere\"", "No such file or directory"),
    ] {
        p.write("x.pipe", &one_exec(argv, ""));
        for spawn in ["direct", "fork"] {
            let out = run_on(&p, spawn, "x.pipe");
            assert_eq!(code(&out), 1, "{argv} {spawn}");
            let err = stderr(&out);
            assert!(
                err.contains("R0602") && err.contains(reason),
                "{argv} {spawn}: {err}"
            );
            assert!(!err.contains("panicked"), "{err}");
        }
    }
}

/// A pipeline of one `exec` node running `argv` (JSON array items), with more settings.
fn one_exec(argv: &str, settings: &str) -> String {
    format!(
        "input x: int\n\nnode n(x: int = input.x) -> json {{\n  exec = [{argv}]\n{settings}}}\n\noutput n = n\n"
    )
}

/// `pipec run PIPE --input x=1` with the given way of starting commands.
fn run_on(p: &Project, spawn: &str, pipe: &str) -> std::process::Output {
    p.cmd(&["run", pipe, "--input", "x=1"])
        .env("PIPEC_SPAWN", spawn)
        .stdin(Stdio::null())
        .output()
        .expect("runs")
}

/// Waits up to five seconds for a process to be gone; whether it is.
fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    !alive(pid)
}

/// Whether a process is still running (a zombie waiting for its new parent counts as
/// gone).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

#[test]
fn exec_children_die_with_pipec() {
    let p = Project::new("deathsig");
    p.script(
        "scripts/hang.sh",
        "#!/bin/sh\ncat >/dev/null\necho $$ > child.pid\nexec sleep 30\n",
    );
    p.write("hang.pipe", &one_exec("\"./scripts/hang.sh\"", ""));
    for spawn in ["direct", "fork"] {
        let _ = std::fs::remove_file(p.dir.join("child.pid"));
        let mut pipec = p
            .cmd(&["run", "hang.pipe", "--input", "x=1"])
            .env("PIPEC_SPAWN", spawn)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        let child: i32 = loop {
            if let Ok(pid) = p.read("child.pid").trim().parse() {
                break pid;
            }
            assert!(
                Instant::now() < deadline,
                "{spawn}: the child never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(alive(child), "{spawn}: running before the kill");
        pipec.kill().expect("SIGKILL");
        let _ = pipec.wait();
        assert!(gone(child), "{spawn}: the child outlived pipec");
    }
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    let p = Project::new("timeout");
    // Leaves a grandchild in its process group, then outlasts the node's timeout.
    p.script(
        "scripts/slow.sh",
        "#!/bin/sh\ncat >/dev/null\nsleep 30 &\necho $! > grandchild.pid\nsleep 30\n",
    );
    p.write(
        "slow.pipe",
        &one_exec(
            "\"./scripts/slow.sh\"",
            "  idempotent = true\n  timeout = 300ms\n",
        ),
    );
    for spawn in ["direct", "fork"] {
        let _ = std::fs::remove_file(p.dir.join("grandchild.pid"));
        let started = Instant::now();
        let out = run_on(&p, spawn, "slow.pipe");
        assert_eq!(code(&out), 1, "{spawn}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("ran longer than its timeout"),
            "{spawn}: {}",
            stderr(&out)
        );
        assert!(started.elapsed() < Duration::from_secs(20), "{spawn}");
        let grandchild: i32 = p.read("grandchild.pid").trim().parse().expect("pid");
        assert!(
            gone(grandchild),
            "{spawn}: the grandchild outlived the timeout"
        );
    }
}

#[test]
fn a_pipeline_named_by_a_relative_path_runs_from_another_directory() {
    let p = project("relative");
    let root = p.dir.canonicalize().expect("canonical");
    let parent = p.dir.parent().expect("parent");
    let name = p
        .dir
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    for spawn in ["direct", "fork"] {
        let out = std::process::Command::new(pipec_bin())
            .args([
                "run",
                &format!("{name}/probe.pipe"),
                "--input",
                "word=x",
                "--store",
                &format!("{name}/.pipec/runs.redb"),
            ])
            .current_dir(parent)
            .env("NO_COLOR", "1")
            .env("PIPEC_SPAWN", spawn)
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        assert_eq!(code(&out), 0, "{spawn}: {}", stderr(&out));
        let out = json(&stdout(&out));
        assert_eq!(out["seen"]["cwd"], root.display().to_string(), "{spawn}");
    }
}

/// The library takes a project root as given; a relative one still finds the command
/// (the child changes into the root before it starts the program).
#[test]
fn a_relative_project_root_through_the_library() {
    let rel = std::path::PathBuf::from(format!("target/exec-rel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&rel);
    std::fs::create_dir_all(rel.join("scripts")).expect("mkdir");
    let script = rel.join("scripts/where.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ncat >/dev/null\nprintf '\"%s\"' \"$(pwd)\"\n",
    )
    .expect("write");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let out = rt.block_on(pipec::runtime::exec::run(
        pipec::runtime::exec::ExecRequest {
            argv: &["./scripts/where.sh".to_string()],
            project_root: &rel,
            stdin: &serde_json::json!({}),
            env: Vec::new(),
            timeout: None,
        },
    ));
    let root = rel.canonicalize().expect("canonical");
    let _ = std::fs::remove_dir_all(&rel);
    assert_eq!(
        out.expect("runs"),
        serde_json::json!(root.display().to_string())
    );
}

/// Commands are found as `execvp` finds them: a relative `PATH` directory is taken from
/// the project root, and a script without a `#!` line is run by `/bin/sh`.
#[test]
fn commands_are_found_and_run_as_execvp_would() {
    let p = Project::new("execvp");
    p.script(
        "tools/relative-tool",
        "#!/bin/sh\ncat >/dev/null\necho '{\"via\":\"path\"}'\n",
    );
    p.script(
        "scripts/no-shebang.sh",
        "cat >/dev/null\necho '{\"via\":\"sh\"}'\n",
    );
    for (argv, via) in [
        ("\"relative-tool\"", "path"),
        ("\"./scripts/no-shebang.sh\"", "sh"),
    ] {
        p.write("x.pipe", &one_exec(argv, ""));
        for spawn in ["direct", "fork"] {
            let path = format!("tools:{}", std::env::var("PATH").unwrap_or_default());
            let out = p
                .cmd(&["run", "x.pipe", "--input", "x=1"])
                .env("PIPEC_SPAWN", spawn)
                .env("PATH", path)
                .stdin(Stdio::null())
                .output()
                .expect("runs");
            assert_eq!(code(&out), 0, "{argv} {spawn}: {}", stderr(&out));
            assert_eq!(json(&stdout(&out))["n"]["via"], via, "{argv} {spawn}");
        }
    }
}

/// A command printing more than pipec keeps fails its node; it is not left blocked on a
/// full pipe.
#[test]
fn a_command_printing_too_much_fails_instead_of_hanging() {
    let p = Project::new("flood");
    p.script(
        "scripts/flood.sh",
        "#!/bin/sh\ncat >/dev/null\nhead -c 20000000 /dev/zero | tr '\\0' a\n",
    );
    p.write(
        "flood.pipe",
        &one_exec(
            "\"./scripts/flood.sh\"",
            "  idempotent = true\n  timeout = 60s\n",
        ),
    );
    for spawn in ["direct", "fork"] {
        let out = run_on(&p, spawn, "flood.pipe");
        assert_eq!(code(&out), 1, "{spawn}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("printed more than"),
            "{spawn}: {}",
            stderr(&out)
        );
    }
}

/// Waits up to `limit` for a file of the project to exist; whether it does.
fn appears(p: &Project, rel: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !p.dir.join(rel).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    p.dir.join(rel).exists()
}

/// Defect: after `kill -9` of pipec the `exec` child died (its parent-death signal) but its
/// process group did not, so a grandchild completed the effect afterwards, unrecorded.
#[test]
fn kill_9_of_pipec_kills_the_commands_whole_group() {
    let p = Project::new("groupdies");
    // A grandchild in the background and one in the foreground, each one second away
    // from its effect when pipec is killed.
    p.script(
        "scripts/effect.sh",
        "#!/bin/sh\ncat >/dev/null\n\
         sh -c 'echo > background.ready; sleep 1; echo done > background.effect' &\n\
         sh -c 'echo > foreground.ready; sleep 1; echo done > foreground.effect'\n\
         wait\necho '{}'\n",
    );
    p.write("effect.pipe", &one_exec("\"./scripts/effect.sh\"", ""));
    for spawn in ["direct", "fork"] {
        for f in [
            "background.ready",
            "foreground.ready",
            "background.effect",
            "foreground.effect",
        ] {
            let _ = std::fs::remove_file(p.dir.join(f));
        }
        let mut pipec = p
            .cmd(&["run", "effect.pipe", "--input", "x=1"])
            .env("PIPEC_SPAWN", spawn)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts");
        for ready in ["background.ready", "foreground.ready"] {
            assert!(
                appears(&p, ready, Duration::from_secs(20)),
                "{spawn}: {ready} never appeared"
            );
        }
        pipec.kill().expect("SIGKILL");
        let _ = pipec.wait();
        // Well past the grandchildren's sleep.
        std::thread::sleep(Duration::from_millis(2500));
        for effect in ["background.effect", "foreground.effect"] {
            assert!(
                !p.dir.join(effect).exists(),
                "{spawn}: {effect} landed after pipec was killed"
            );
        }
    }
}

/// Defect: a command that exited 0 with valid JSON, leaving behind a process that keeps
/// its stdout open, kept its node waiting as long as that process lived; with a timeout
/// the node ended unknown (and the thread blocked) instead of completing.
#[test]
fn an_exec_is_done_when_its_command_has_exited() {
    let p = Project::new("doneatexit");
    p.script(
        "scripts/leaves.sh",
        "#!/bin/sh\ncat >/dev/null\nsleep 30 &\necho $! > grandchild.pid\necho '{\"v\": 1}'\n",
    );
    for (pipe, settings) in [("timeout.pipe", "  timeout = 5s\n"), ("plain.pipe", "")] {
        p.write(pipe, &one_exec("\"./scripts/leaves.sh\"", settings));
        for spawn in ["direct", "fork"] {
            let _ = std::fs::remove_file(p.dir.join("grandchild.pid"));
            let started = Instant::now();
            let out = run_on(&p, spawn, pipe);
            let took = started.elapsed();
            assert_eq!(code(&out), 0, "{pipe} {spawn}: {}", stderr(&out));
            assert_eq!(json(&stdout(&out))["n"]["v"], 1, "{pipe} {spawn}");
            assert!(
                took < Duration::from_secs(4),
                "{pipe} {spawn}: took {took:?}, as long as the process left behind"
            );
            let grandchild: i32 = p.read("grandchild.pid").trim().parse().expect("pid");
            assert!(
                gone(grandchild),
                "{pipe} {spawn}: the process left behind outlived its node"
            );
        }
    }
}

/// What a command leaves running ends with its node, also when it holds none of the
/// command's pipes: a live pipec leaves no process group behind.
#[test]
fn what_a_command_leaves_running_ends_with_its_node() {
    let p = Project::new("leftover");
    p.script(
        "scripts/detached.sh",
        "#!/bin/sh\ncat >/dev/null\nsleep 30 >/dev/null 2>&1 </dev/null &\necho $! > left.pid\necho '{}'\n",
    );
    p.write("left.pipe", &one_exec("\"./scripts/detached.sh\"", ""));
    for spawn in ["direct", "fork"] {
        let _ = std::fs::remove_file(p.dir.join("left.pid"));
        let out = run_on(&p, spawn, "left.pipe");
        assert_eq!(code(&out), 0, "{spawn}: {}", stderr(&out));
        let left: i32 = p.read("left.pid").trim().parse().expect("pid");
        assert!(
            gone(left),
            "{spawn}: the process left behind outlived its node"
        );
    }
}

/// The signals this test was started with ignored, as `/proc/PID/status` prints them:
/// pipec inherits them and passes them on, as `exec` does (`nohup`, a shell's background
/// job), except SIGPIPE, which every command gets at its default (this Rust process
/// ignores it itself), and the two signals glibc keeps for itself (32 and 33), which
/// pipec sets back to their default.
fn inherited_ignored() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let reset = [13u32, 32, 33]
        .iter()
        .fold(0u64, |m, sig| m | 1u64 << (sig - 1));
    format!("{:016x}", mask & !reset)
}

/// What a command prints beyond its declared type is not kept: not in the outputs, not
/// in the stored node value, at any depth; a `json` field keeps all it holds.
#[test]
fn what_the_type_does_not_declare_is_not_kept() {
    let p = Project::new("exec-declared");
    p.write(
        "extra.pipe",
        r#"type Owner {
  name: string
}

type Deal {
  id: string
  owner: Owner
  notes: json
  tags: Owner[]
}

node deal(x: int = 1) -> Deal {
  exec = ["sh", "-c", "cat >/dev/null; printf '%s' \"$0\"", "{\"id\":\"D1\",\"secret_sauce\":\"x\",\"owner\":{\"name\":\"Ada\",\"email\":\"ada@example.com\"},\"notes\":{\"any\":{\"thing\":1}},\"tags\":[{\"name\":\"a\",\"color\":\"red\"}]}"]
}

output deal = deal
"#,
    );
    let out = p
        .cmd(&["run", "extra.pipe"])
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let kept = serde_json::json!({
        "id": "D1",
        "owner": { "name": "Ada" },
        "notes": { "any": { "thing": 1 } },
        "tags": [{ "name": "a" }],
    });
    assert_eq!(json(&stdout(&out))["deal"], kept);
    let runs = p.cmd(&["runs", "--json"]).output().expect("lists");
    let thread = json(&stdout(&runs))[0]["id"]
        .as_str()
        .expect("a thread")
        .to_string();
    let shown = p.show_json(&thread);
    let node = shown["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["node"] == "deal"))
        .expect("the node");
    assert_eq!(node["value"], kept, "the stored value: {node}");
}
