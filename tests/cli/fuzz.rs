//! A bounded fuzz run of the whole front end, part of every `cargo test`: random and
//! mutated `.pipe` files (the examples, the UI cases, synthetic pipelines) go through
//! check, lowering, terminal rendering, `fmt` and the plan reader. Nothing may panic or
//! overflow the stack (a token repeated thousands of times nests deep or makes a line
//! past 65,535 columns), and every diagnostic span must lie on char boundaries inside
//! its file.
//!
//! `PIPEC_FUZZ_ITERS` sets the number of inputs (default 300, or 3000 under
//! `PIPEC_TEST_FULL=1`); `PIPEC_FUZZ_SEED` the
//! seed. A failing input is written to `target/fuzz-failure.pipe`. For open-ended runs
//! use the cargo-fuzz target in `fuzz/`.

use crate::common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use common::rng::Rng;
use common::tier_size;
use pipec::source::MemoryLoader;

const TOKENS: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "\"",
    "#",
    "##\"",
    "\"#",
    "//",
    "///",
    "//!",
    "?",
    "??",
    ".",
    "[*]",
    ",",
    ":",
    "=",
    "->",
    "==",
    "!",
    "&&",
    "||",
    "<",
    ">",
    "\n",
    " ",
    "\t",
    "\r\n",
    "type ",
    "node ",
    "think ",
    "agent ",
    "act ",
    "gate ",
    "input ",
    "output ",
    "server ",
    "model ",
    "link ",
    "tool ",
    "reader ",
    "import ",
    "serve ",
    "from ",
    "as ",
    "resource(",
    "resources(",
    "each(",
    "env(",
    "secret(",
    "file(",
    "len(",
    "ref<",
    "map<",
    "string",
    "int",
    "json",
    "bytes",
    "12kb",
    "5m",
    "1.5mb",
    "99999999999999999999",
    "-1",
    "0.5",
    "true",
    "null",
    "\\u{1F600}",
    "\\q",
    "é",
    "😀",
    "\u{0}",
    "{{",
    "}}",
    "{%",
    "%}",
    "{% for x in y %}",
    "{{ a.b }}",
    "mcp://crm/{x}",
    "{+p}",
    "{a,b}",
    "when = ",
    "return = ",
    "call = ",
    "exec = [\"x\"]",
    "// pipec: allow(unused-node)",
];

fn corpus() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut stack = vec![root.join("pipelines"), root.join("tests/ui")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "pipe")
                && let Ok(t) = std::fs::read_to_string(&p)
            {
                out.push((p.to_string_lossy().into_owned(), t));
            }
        }
    }
    out.sort();
    out.push(("synth.pipe".into(), pipec::synth::pipeline(12)));
    out
}

fn mutate(rng: &mut Rng, text: &str, corpus: &[(String, String)]) -> String {
    let mut s = text.to_string();
    for _ in 0..1 + rng.below(4) {
        let len = s.len();
        let at = floor(&s, rng.below(len + 1));
        match rng.below(9) {
            0 | 1 => {
                let token: &&str = rng.pick(TOKENS);
                s.insert_str(at, token.as_ref());
            }
            2 => {
                let end = floor(&s, (at + 1 + rng.below(12)).min(len));
                s.replace_range(at..end, "");
            }
            3 => s.truncate(at),
            4 => {
                // Splice in a line from another file.
                let (_, other) = rng.pick(corpus);
                let lines: Vec<&str> = other.lines().collect();
                if !lines.is_empty() {
                    let line = lines[rng.below(lines.len())];
                    s.insert_str(at, &format!("{line}\n"));
                }
            }
            5 => {
                let end = floor(&s, (at + rng.below(40)).min(len));
                let chunk = s[at..end].to_string();
                s.insert_str(end, &chunk);
            }
            6 => {
                // Replace one character by a random token.
                let end = floor(&s, (at + 1).min(len));
                let token: &&str = rng.pick(TOKENS);
                s.replace_range(at..end.max(at), token.as_ref());
            }
            7 => {
                // One token many times: nesting past the limit (brackets, chains of
                // operators, list marks) or a line longer than 65,535 columns.
                let token: &&str = rng.pick(TOKENS);
                let times = match rng.below(8) {
                    0 => 65_536 / token.len().max(1) + 1,
                    1 => 1 + rng.below(3_000),
                    _ => 1 + rng.below(64),
                };
                s.insert_str(at, &token.repeat(times));
            }
            _ => {
                let n = rng.below(30);
                let random: String = (0..n)
                    .map(|_| char::from_u32(32 + rng.below(95) as u32).unwrap_or(' '))
                    .collect();
                s.insert_str(at, &random);
            }
        }
    }
    s
}

fn floor(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Runs one input through everything; returns a description of a broken invariant.
fn exercise(text: &str) -> Result<(), String> {
    let loader = MemoryLoader::new()
        .with("proj/p.pipe", text)
        .with("proj/lib.pipe", "type Lib { a: string }\n")
        .with(
            "proj/prompts/research/scan.jinja",
            "{{ deal_id }} {% for e in dossier.activity %}{{ e.at }}{% endfor %}",
        )
        .with(
            "proj/prompts/consume/brief.jinja",
            "{{ digest.deal_id }} {{ history.emails }}",
        );
    let analysis = pipec::analyze(&loader, Path::new("proj/p.pipe"), "p.pipe");
    for d in &analysis.diagnostics {
        for label in d.primary.iter().chain(d.secondary.iter()) {
            let file = analysis.db.get(label.file);
            let (s, e) = (label.span.start as usize, label.span.end as usize);
            if s > e
                || e > file.text.len()
                || !file.text.is_char_boundary(s)
                || !file.text.is_char_boundary(e)
            {
                return Err(format!(
                    "{} has span {s}..{e} outside {} ({} bytes)",
                    d.rule.code,
                    file.name,
                    file.text.len()
                ));
            }
        }
    }
    for d in &analysis.diagnostics {
        for e in d.fixes.iter().flat_map(|f| f.edits.iter()) {
            let file = analysis.db.get(e.file);
            let (s, end) = (e.span.start as usize, e.span.end as usize);
            if end > file.text.len()
                || !file.text.is_char_boundary(s)
                || !file.text.is_char_boundary(end)
            {
                return Err(format!(
                    "{} has a fix edit at {s}..{end} outside {}",
                    d.rule.code, file.name
                ));
            }
        }
    }
    // Fixing never panics, ends, and never leaves a file that does not parse.
    if analysis.diagnostics.iter().any(|d| !d.fixes.is_empty()) {
        let roots = [(
            std::path::PathBuf::from("proj/p.pipe"),
            "p.pipe".to_string(),
        )];
        let run = pipec::fix::fix_files(&loader, &roots, pipec::fix::Mode::Unsafe);
        for c in &run.changed {
            if !pipec::fix::parses(&c.path, &c.after) {
                return Err(format!("a fix left {} unparsable", c.name));
            }
        }
    }
    let rendered =
        pipec::diagnostic::render_terminal(&analysis.db, &analysis.diagnostics, Default::default());
    std::hint::black_box(rendered);
    let _ = pipec::diagnostic::render_json(&analysis.db, &analysis.diagnostics);
    if let Ok(plan) = pipec::lower_analysis(analysis, Path::new("proj/p.pipe")) {
        let json = plan.to_json();
        if pipec::Plan::from_json(&json).as_ref() != Ok(&plan) {
            return Err("a plan does not read back".into());
        }
        let _ = pipec::graph::render(&plan, pipec::graph::GraphFormat::Mermaid);
    }
    if let Ok(formatted) = pipec::syntax::format_source(text) {
        match pipec::syntax::format_source(&formatted) {
            Ok(again) if again == formatted => {}
            _ => return Err("fmt is not idempotent on this input".into()),
        }
    }
    Ok(())
}

#[test]
fn the_front_end_never_panics_on_mutated_input() {
    let iters = tier_size("PIPEC_FUZZ_ITERS", 300, 3000);
    let seed: u64 = std::env::var("PIPEC_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_0001);
    let corpus = corpus();
    assert!(corpus.len() > 10);
    let mut rng = Rng(seed | 1);
    // Silence the panic printing of this thread; failures are reported below with their
    // input. Other tests of this binary, running meanwhile, keep theirs.
    let hook: std::sync::Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync> =
        std::panic::take_hook().into();
    let fuzzing = std::thread::current().id();
    let others = hook.clone();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() != fuzzing {
            others(info);
        }
    }));
    let mut failure: Option<(String, String)> = None;
    for i in 0..iters {
        let (_, base) = rng.pick(&corpus).clone();
        let input = if i % 10 == 0 {
            // Pure noise from tokens, now and then.
            (0..rng.below(60))
                .map(|_| *rng.pick(TOKENS))
                .collect::<String>()
        } else {
            mutate(&mut rng, &base, &corpus)
        };
        match catch_unwind(AssertUnwindSafe(|| exercise(&input))) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                failure = Some((why, input));
                break;
            }
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failure = Some((format!("panic: {msg}"), input));
                break;
            }
        }
    }
    std::panic::set_hook(Box::new(move |info| hook(info)));
    if let Some((why, input)) = failure {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failure.pipe");
        let _ = std::fs::write(&path, &input);
        panic!("{why}\ninput written to {}", path.display());
    }
}
