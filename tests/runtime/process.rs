//! Process control with real processes: the reaper kills every process of a command's
//! group when pipec dies (`kill -9` included) and exits afterwards; a reaper that dies is
//! replaced and takes over the live groups; `wait_gone` answers as a resume needs; and
//! the library API (`pipec::process`) ends groups, keeps environments to their policy, and
//! refuses to start a child it cannot have watched.
//!
//! The tests through the binary run on both spawn paths; those through the library use
//! this process's path (`.ci/run` runs them again with `PIPEC_SPAWN=fork`).

#![cfg(target_os = "linux")]

use crate::common;

use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use pipec::process::{self, Command, Environment, ReaperId, SpawnError, Spawned};
use tokio::io::{AsyncBufReadExt, AsyncReadExt};

/// Tests that kill this process's reaper, and those that rely on its identity, take turns.
static REAPER: Mutex<()> = Mutex::new(());

fn reaper_lock() -> std::sync::MutexGuard<'static, ()> {
    REAPER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The fields of `/proc/<pid>/stat` after the name: state, parent, group, start time.
#[derive(Debug, Clone, Copy)]
struct Stat {
    state: char,
    ppid: i32,
    pgrp: i32,
    start_time: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// Whether a process runs (a zombie does not).
fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|s| !matches!(s.state, 'Z' | 'X'))
}

/// Waits up to `limit` for `pid` to be gone; whether it is.
fn gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    !alive(pid)
}

/// The live processes whose parent is `parent` and whose name is `pipec-reaper`.
fn reapers_of(parent: i32) -> Vec<(i32, Stat)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if name.trim() == "pipec-reaper"
            && let Some(s) = stat(pid)
            && s.ppid == parent
            && alive(pid)
        {
            found.push((pid, s));
        }
    }
    found
}

/// Waits for the one reaper of `parent`.
fn reaper_of(parent: i32, limit: Duration) -> Option<(i32, Stat)> {
    let deadline = Instant::now() + limit;
    loop {
        if let [one] = reapers_of(parent).as_slice() {
            return Some(*one);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for a file of the project to hold a pid.
fn pid_in(p: &Project, rel: &str) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(pid) = p.read(rel).trim().parse() {
            return pid;
        }
        assert!(Instant::now() < deadline, "{rel} never appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A command that leaves a process in the background and one in the foreground, and
/// records the pids of all three.
const LEAVES_TWO: &str = "#!/bin/sh\ncat >/dev/null\necho $$ > child.pid\n\
    sleep 30 &\necho $! > background.pid\n\
    sh -c 'echo $$ > foreground.pid; exec sleep 30'\necho '{}'\n";

fn hanging_project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.script("scripts/leaves.sh", LEAVES_TWO);
    p.write(
        "hang.pipe",
        "input x: int\n\nnode n(x: int = input.x) -> json {\n  exec = [\"./scripts/leaves.sh\"]\n}\n\noutput n = n\n",
    );
    p
}

/// Starts `pipec run hang.pipe` and waits until its command's three processes run.
fn start_hanging(p: &Project, spawn: &str) -> (std::process::Child, [i32; 3]) {
    for f in ["child.pid", "background.pid", "foreground.pid"] {
        let _ = std::fs::remove_file(p.dir.join(f));
    }
    let pipec = p
        .cmd(&["run", "hang.pipe", "--input", "x=1"])
        .env("PIPEC_SPAWN", spawn)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    let pids = [
        pid_in(p, "child.pid"),
        pid_in(p, "background.pid"),
        pid_in(p, "foreground.pid"),
    ];
    (pipec, pids)
}

#[test]
fn killing_pipec_leaves_no_process_of_the_group_and_the_reaper_exits_after() {
    let p = hanging_project("groupgone");
    for spawn in ["direct", "fork"] {
        let (mut pipec, pids) = start_hanging(&p, spawn);
        let group = stat(pids[0]).expect("the command runs").pgrp;
        for pid in pids {
            assert_eq!(stat(pid).map(|s| s.pgrp), Some(group), "{spawn}: one group");
        }
        let reaper = reaper_of(pipec.id() as i32, Duration::from_secs(5));
        pipec.kill().expect("SIGKILL");
        let _ = pipec.wait();
        for pid in pids {
            assert!(
                gone_within(pid, Duration::from_secs(5)),
                "{spawn}: process {pid} of the command's group outlived pipec"
            );
        }
        let (reaper, reaper_stat) =
            reaper.unwrap_or_else(|| panic!("{spawn}: pipec had no reaper"));
        assert_eq!(
            reaper_stat.pgrp, reaper,
            "{spawn}: the reaper leads a group of its own"
        );
        assert!(
            gone_within(reaper, Duration::from_secs(10)),
            "{spawn}: the reaper did not exit after its clean-up"
        );
    }
}

#[test]
fn the_reaper_ignores_the_signals_of_a_terminal_or_a_shutdown() {
    let p = hanging_project("reapersignals");
    let (mut pipec, pids) = start_hanging(&p, "direct");
    let (reaper, _) = reaper_of(pipec.id() as i32, Duration::from_secs(5)).expect("a reaper");
    for signal in ["INT", "TERM", "HUP", "QUIT"] {
        let sent = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &reaper.to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        alive(reaper),
        "the reaper died of a signal it should ignore"
    );
    // And it still does its work.
    pipec.kill().expect("SIGKILL");
    let _ = pipec.wait();
    for pid in pids {
        assert!(
            gone_within(pid, Duration::from_secs(5)),
            "{pid} outlived pipec"
        );
    }
}

/// A reaper that dies is replaced at once, and the replacement kills the groups that
/// were running before it started.
#[test]
fn a_reaper_that_dies_is_replaced_and_takes_over_the_live_groups() {
    let p = hanging_project("reaperdies");
    for spawn in ["direct", "fork"] {
        let (mut pipec, pids) = start_hanging(&p, spawn);
        let owner = pipec.id() as i32;
        let (first, _) = reaper_of(owner, Duration::from_secs(5)).expect("a reaper");
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &first.to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        let deadline = Instant::now() + Duration::from_secs(5);
        let second = loop {
            if let Some((pid, _)) = reapers_of(owner).into_iter().find(|(pid, _)| *pid != first) {
                break pid;
            }
            assert!(
                Instant::now() < deadline,
                "{spawn}: the reaper was not replaced"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        pipec.kill().expect("SIGKILL");
        let _ = pipec.wait();
        for pid in pids {
            assert!(
                gone_within(pid, Duration::from_secs(5)),
                "{spawn}: process {pid}, started before the replacement, outlived pipec"
            );
        }
        assert!(gone_within(second, Duration::from_secs(10)), "{spawn}");
    }
}

#[test]
fn pipec_ending_normally_leaves_no_reaper_behind() {
    let p = Project::new("reaperend");
    // The command finds its sibling, the reaper of the pipec that started it.
    p.script(
        "scripts/sibling.sh",
        "#!/bin/sh\ncat >/dev/null\n\
         for d in /proc/[0-9]*; do\n\
           [ \"$(cat $d/comm 2>/dev/null)\" = pipec-reaper ] || continue\n\
           ppid=$(sed 's/.*) //' $d/stat 2>/dev/null | cut -d' ' -f2)\n\
           [ \"$ppid\" = \"$PPID\" ] && echo ${d#/proc/} > reaper.pid\n\
         done\necho '{}'\n",
    );
    p.write(
        "end.pipe",
        "input x: int\n\nnode n(x: int = input.x) -> json {\n  exec = [\"./scripts/sibling.sh\"]\n}\n\noutput n = n\n",
    );
    for spawn in ["direct", "fork"] {
        let _ = std::fs::remove_file(p.dir.join("reaper.pid"));
        let out = p
            .cmd(&["run", "end.pipe", "--input", "x=1"])
            .env("PIPEC_SPAWN", spawn)
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        assert_eq!(code(&out), 0, "{spawn}: {}", stderr(&out));
        let reaper: i32 = p
            .read("reaper.pid")
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{spawn}: the command saw no reaper"));
        assert!(
            gone_within(reaper, Duration::from_secs(10)),
            "{spawn}: the reaper outlived a pipec that ended normally"
        );
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// `wait_gone` against a real owner (pipec) and its real reaper.
#[test]
fn wait_gone_returns_at_once_while_the_owner_lives_and_after_the_clean_up_once_it_died() {
    let p = hanging_project("waitgone");
    let rt = runtime();
    for spawn in ["direct", "fork"] {
        let (mut pipec, pids) = start_hanging(&p, spawn);
        let owner = pipec.id();
        let (pid, s) = reaper_of(owner as i32, Duration::from_secs(5)).expect("a reaper");
        let reaper = ReaperId {
            pid: pid as u32,
            start_time: s.start_time,
        };
        // The owner is alive: nothing to wait for.
        let started = Instant::now();
        let r = rt.block_on(process::wait_gone(&reaper, owner, Duration::from_secs(5)));
        assert_eq!(r, Ok(()), "{spawn}");
        assert!(started.elapsed() < Duration::from_secs(1), "{spawn}");
        // Named with another owner, a live reaper is still at work.
        let r = rt.block_on(process::wait_gone(
            &reaper,
            std::process::id(),
            Duration::from_millis(300),
        ));
        assert!(
            matches!(r, Err(process::StillRunning { .. })),
            "{spawn}: {r:?}"
        );
        pipec.kill().expect("SIGKILL");
        let _ = pipec.wait();
        let r = rt.block_on(process::wait_gone(&reaper, owner, Duration::from_secs(10)));
        assert_eq!(r, Ok(()), "{spawn}");
        // Once it returns, nothing of the group runs, and the reaper is done.
        for pid in pids {
            assert!(!alive(pid), "{spawn}: {pid} still runs after wait_gone");
        }
        assert!(
            !alive(pid),
            "{spawn}: the reaper still runs after wait_gone"
        );
    }
}

/// `wait_gone`'s rules on a stand-in for a reaper (a child of this test): the pid alone
/// does not identify it, its parent does, and it is done once it exits.
#[test]
fn wait_gone_tells_a_reaper_by_pid_and_start_time_and_its_owner_by_its_parent() {
    let rt = runtime();
    let mut stand_in = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep");
    let pid = stand_in.id();
    let s = stat(pid as i32).expect("stat");
    let reaper = ReaperId {
        pid,
        start_time: s.start_time,
    };
    let reused = ReaperId {
        pid,
        start_time: s.start_time + 1,
    };
    let soon = Duration::from_millis(300);
    // A process with the pid but another start time is not that reaper: it is gone.
    assert_eq!(rt.block_on(process::wait_gone(&reused, 1, soon)), Ok(()));
    // Its parent (this test) is the owner named: alive, so done.
    assert_eq!(
        rt.block_on(process::wait_gone(&reaper, std::process::id(), soon)),
        Ok(())
    );
    // Another owner: the owner died and this reaper still runs.
    let started = Instant::now();
    let r = rt.block_on(process::wait_gone(&reaper, 1, soon));
    assert!(matches!(r, Err(process::StillRunning { .. })), "{r:?}");
    assert!(started.elapsed() >= soon);
    // Once it has exited, it is done, reaped or not.
    let _ = stand_in.kill();
    let _ = stand_in.wait();
    assert_eq!(rt.block_on(process::wait_gone(&reaper, 1, soon)), Ok(()));
}

/// `sh -c SCRIPT` through the library, with the first line of its stdout.
async fn spawn_sh(script: &str, env: Environment<'_>) -> (Spawned, String) {
    let argv = ["sh".to_string(), "-c".to_string(), script.to_string()];
    let cwd = std::env::temp_dir();
    let mut spawned = process::spawn(&Command::new(&argv, &cwd).environment(env)).expect("spawns");
    let mut line = String::new();
    let mut reader = tokio::io::BufReader::new(&mut spawned.stdout);
    reader.read_line(&mut line).await.expect("reads");
    (spawned, line.trim().to_string())
}

#[test]
fn a_dropped_child_takes_its_whole_group_with_it() {
    let _turn = reaper_lock();
    let rt = runtime();
    let (child, left) = rt.block_on(async {
        let (spawned, line) = spawn_sh(
            "sleep 30 & echo $!; exec sleep 30",
            Environment::Inherited(&[]),
        )
        .await;
        let left: i32 = line.parse().expect("a pid");
        let child = spawned.child.id() as i32;
        assert_eq!(spawned.child.group(), spawned.child.id());
        assert_eq!(stat(left).map(|s| s.pgrp), Some(child), "one group");
        assert!(spawned.child.reaper().is_some(), "watched by the reaper");
        drop(spawned);
        (child, left)
    });
    assert!(gone_within(child, Duration::from_secs(5)), "the child");
    assert!(gone_within(left, Duration::from_secs(5)), "what it left");
}

#[test]
fn end_kills_what_the_command_left_behind_before_it_returns() {
    let _turn = reaper_lock();
    let rt = runtime();
    rt.block_on(async {
        let (mut spawned, line) = spawn_sh("sleep 30 & echo $!", Environment::Inherited(&[])).await;
        let left: i32 = line.parse().expect("a pid");
        let status = spawned.child.wait().await.expect("waits");
        assert!(status.success());
        assert!(alive(left), "left running after the command exited");
        spawned.child.end().await;
        assert!(!alive(left), "still running after end");
    });
}

#[test]
fn a_cleared_environment_has_only_the_allowlist_and_the_declared_variables() {
    let rt = runtime();
    let declared = [("DECLARED".to_string(), "yes".to_string())];
    let names = |env: Environment<'_>| -> Vec<String> {
        rt.block_on(async {
            let argv = ["env".to_string()];
            let cwd = std::env::temp_dir();
            let mut spawned =
                process::spawn(&Command::new(&argv, &cwd).environment(env)).expect("spawns");
            let mut out = String::new();
            spawned
                .stdout
                .read_to_string(&mut out)
                .await
                .expect("reads");
            assert!(spawned.child.wait().await.expect("waits").success());
            spawned.child.end().await;
            out.lines()
                .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
                .collect()
        })
    };
    let cleared = names(Environment::Cleared(&declared));
    for name in &cleared {
        assert!(
            ["PATH", "HOME", "LANG", "LANGUAGE", "DECLARED"].contains(&name.as_str())
                || name.starts_with("LC_"),
            "{name} reached a cleared environment"
        );
    }
    assert!(cleared.contains(&"DECLARED".to_string()));
    if std::env::var_os("PATH").is_some() {
        assert!(cleared.contains(&"PATH".to_string()));
    }
    // Inherited: all of this process's variables, and the declared ones.
    let inherited = names(Environment::Inherited(&declared));
    for (name, _) in std::env::vars() {
        assert!(inherited.contains(&name), "{name} was not inherited");
    }
    assert!(inherited.contains(&"DECLARED".to_string()));
}

/// A child that was to be watched by a reaper that is gone does not start, so a caller
/// that journaled that reaper never has a group it does not know of; without such a
/// condition a spawn goes to the replacement.
#[test]
fn a_spawn_under_a_reaper_that_is_gone_starts_nothing() {
    let _turn = reaper_lock();
    let rt = runtime();
    let dir = Project::new("unwatched");
    rt.block_on(async {
        let old = process::current_reaper().expect("a reaper");
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &old.pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        assert!(gone_within(old.pid as i32, Duration::from_secs(5)));
        let argv = [
            "sh".to_string(),
            "-c".to_string(),
            "echo > started".to_string(),
        ];
        let r = process::spawn(&Command::new(&argv, &dir.dir).watched_by(&old));
        assert!(matches!(r, Err(SpawnError::Unwatched(_))), "{r:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!dir.dir.join("started").exists(), "it started unwatched");
        // Without the condition, it starts under the new reaper.
        let mut spawned = process::spawn(&Command::new(&argv, &dir.dir)).expect("spawns");
        assert!(spawned.child.wait().await.expect("waits").success());
        let new = spawned.child.reaper().expect("watched");
        assert_ne!(new, old);
        assert_eq!(process::current_reaper().ok(), Some(new));
        spawned.child.end().await;
        assert!(dir.dir.join("started").exists());
    });
}
