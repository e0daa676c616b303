//! What the run commands share: finding the store, loading a plan from a `.pipe` or
//! plan file, parsing inputs and answers, and reporting outcomes and errors.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::diagnostic::TerminalOptions;
use crate::plan::Plan;
use crate::runtime::{Outcome, Runner, RuntimeError};
use crate::store::{OpenMode, Store, StoreError};

pub(crate) const EXIT_PAUSED: u8 = 3;
pub(crate) const EXIT_BLOCKED: u8 = 4;

/// `--store`, else `PIPEC_STORE`, else `.pipec/runs.redb` under the project root.
pub(crate) fn store_path(flag: &Option<PathBuf>, project_root: &Path) -> PathBuf {
    if let Some(p) = flag {
        return p.clone();
    }
    if let Some(p) = std::env::var_os("PIPEC_STORE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    project_root.join(".pipec").join("runs.redb")
}

/// Where the default store is when no pipeline is named: the project around the
/// current folder.
pub(crate) fn default_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    project_root_of(&cwd).unwrap_or(cwd)
}

/// The nearest folder at or above `start` that is a project's root: it has a `.pipec/`
/// folder, a `pipec.toml` or a `prompts/` folder.
pub(crate) fn project_root_of(start: &Path) -> Option<PathBuf> {
    let mut dir = Some(start);
    while let Some(d) = dir {
        if d.join(".pipec").is_dir() || d.join("pipec.toml").is_file() || d.join("prompts").is_dir()
        {
            return Some(d.to_path_buf());
        }
        dir = d.parent();
    }
    None
}

/// The async runtime for a command; on failure the error is printed and the exit code
/// returned.
pub(crate) fn runtime_or_exit() -> Result<tokio::runtime::Runtime, u8> {
    runtime().map_err(|e| {
        crate::cli::err(&format!("error: {e}"));
        crate::cli::EXIT_USAGE
    })
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// The runtime and the store `pipec run` needs, the store created when there is none; on
/// failure the error is printed and the exit code returned.
pub(crate) fn runtime_and_store(
    path: &Path,
) -> Result<(tokio::runtime::Runtime, Arc<dyn Store>), u8> {
    runtime_and(path, OpenMode::Create)
}

/// The runtime and an existing store, opened to write (`answer`, `cancel`, `resume`,
/// `prune`): a path with no store is refused and nothing is created there.
pub(crate) fn runtime_and_existing_store(
    path: &Path,
) -> Result<(tokio::runtime::Runtime, Arc<dyn Store>), u8> {
    runtime_and(path, OpenMode::Existing)
}

/// The runtime and an existing store, opened to read (`runs`, `show`): a file does not
/// change, and a read-only file or mount works.
pub(crate) fn runtime_and_store_to_read(
    path: &Path,
) -> Result<(tokio::runtime::Runtime, Arc<dyn Store>), u8> {
    runtime_and(path, OpenMode::Read)
}

fn runtime_and(
    path: &Path,
    mode: OpenMode,
) -> Result<(tokio::runtime::Runtime, Arc<dyn Store>), u8> {
    let rt = runtime().map_err(|e| {
        super::err(&e);
        super::EXIT_USAGE
    })?;
    let store = crate::store::open(&path.to_string_lossy(), mode).map_err(|e| {
        print_store_error(e, path);
        super::EXIT_FINDINGS
    })?;
    Ok((rt, store))
}

/// Whether a store location names a PostgreSQL database rather than a file.
pub(crate) fn is_database(path: &Path) -> bool {
    crate::store::is_postgres_url(&path.to_string_lossy())
}

/// A store location as messages show it: a database URL without its password.
pub(crate) fn shown(path: &Path) -> String {
    crate::store::shown(&path.to_string_lossy())
}

/// ` --store LOCATION` for the hints that name the store a command used (`pipec resume
/// ...`): nothing for the default store; `"$PIPEC_STORE"` for a URL with a password that
/// came from there, so that the hint runs as it is in the same environment; else the
/// location as [`shown`], where a password is `***` to be typed again.
pub(crate) fn store_flag(flag: &Option<PathBuf>, store: &Path) -> String {
    let from_env = flag.is_none() && std::env::var_os("PIPEC_STORE").is_some_and(|s| !s.is_empty());
    if flag.is_none() && !from_env {
        return String::new();
    }
    let shown = shown(store);
    if from_env && shown != store.to_string_lossy() {
        return " --store \"$PIPEC_STORE\"".to_string();
    }
    format!(" --store {}", shell_quote(&shown))
}

/// Prints a store error; where there is no store, the help names one nearby.
pub(crate) fn print_store_error(e: StoreError, path: &Path) {
    let missing = matches!(e, StoreError::Missing { .. }) && !is_database(path);
    let mut error = RuntimeError::from(e);
    if missing && let Some(near) = nearby_store(path) {
        error.help = Some(format!("did you mean `--store {}`?", near.display()));
    }
    print_error(&error);
}

/// A store beside a path that has none: in the folder it names, a file of the same
/// folder with a close name, or the project's default store.
pub(crate) fn nearby_store(path: &Path) -> Option<PathBuf> {
    let is_store = |p: &Path| p.is_file() && p != path;
    if path.is_dir() {
        let inside = [
            path.join("runs.redb"),
            path.join(".pipec").join("runs.redb"),
        ];
        if let Some(p) = inside.into_iter().find(|p| is_store(p)) {
            return Some(p);
        }
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name()?.to_string_lossy().into_owned();
    let siblings: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "redb") && is_store(&e.path()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if let Some(close) = crate::names::suggest(&name, siblings.iter().map(String::as_str)) {
        return Some(dir.join(close));
    }
    let default = default_root().join(".pipec").join("runs.redb");
    is_store(&default).then_some(default)
}

/// Events on stdout (`--events jsonl`), else progress on stderr unless `-q`; and spans to
/// the tracing backend when traces are on.
pub(crate) fn with_output(runner: Runner, events: bool, quiet: bool) -> Runner {
    let runner = match super::telemetry::spans() {
        Some(sink) => runner.spans(sink),
        None => runner,
    };
    if events {
        runner.events(event_printer())
    } else if quiet {
        runner
    } else {
        runner.progress(Arc::new(crate::runtime::StderrProgress::new()))
    }
}

/// A plan and the project root it runs in.
pub(crate) struct Loaded {
    pub plan: Plan,
    pub root: PathBuf,
    pub source: String,
}

/// Compiles a `.pipe` file, or reads a plan (`.json`). Errors are printed.
/// Prints the errors of a file that does not check (its warnings are `pipec check`'s).
pub(crate) fn print_errors(analysis: &crate::Analysis) {
    let errors: Vec<_> = analysis
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .cloned()
        .collect();
    super::err(&crate::diagnostic::render_terminal(
        &analysis.db,
        &errors,
        TerminalOptions::default(),
    ));
}

pub(crate) fn load_plan(file: &Path) -> Result<Loaded, u8> {
    if !file.is_file() {
        super::err(&format!(
            "error: cannot read `{}`: no such file",
            file.display()
        ));
        return Err(super::EXIT_USAGE);
    }
    let source = std::path::absolute(file)
        .unwrap_or_else(|_| file.to_path_buf())
        .display()
        .to_string();
    if file.extension().is_some_and(|e| e == "json") {
        let text = std::fs::read_to_string(file).map_err(|e| {
            super::err(&format!("error: cannot read `{}`: {e}", file.display()));
            super::EXIT_USAGE
        })?;
        let plan = Plan::from_json(&text).map_err(|e| {
            super::err(&format!(
                "error[{}]: {}: {e}\n  help: {}",
                e.code(),
                file.display(),
                e.help()
            ));
            super::EXIT_FINDINGS
        })?;
        // Paths in a plan are relative to the project root, which need not be the plan
        // file's folder (`pipec compile -o build/plan.json`): the project around the file.
        let folder = std::path::absolute(file)
            .ok()
            .and_then(|f| f.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("."));
        let root = project_root_of(&folder).unwrap_or_else(default_root);
        let root = std::path::absolute(&root).unwrap_or(root);
        return Ok(Loaded { plan, root, source });
    }
    let name = file.to_string_lossy().into_owned();
    let analysis = crate::analyze(&crate::source::FsLoader, file, &name);
    let root = analysis.hir.project_root.clone();
    if analysis.has_errors() {
        print_errors(&analysis);
        return Err(super::EXIT_FINDINGS);
    }
    match crate::lower_analysis(analysis, file) {
        Ok(plan) => Ok(Loaded { plan, root, source }),
        Err(e) => {
            super::err(&e.render(TerminalOptions::default()));
            Err(super::EXIT_FINDINGS)
        }
    }
}

/// The plan a stored thread goes on under: `--plan FILE`, else the thread's source as it
/// reads now, else (the source is gone) the plan the store keeps for it.
pub(crate) fn plan_of_thread(
    rt: &tokio::runtime::Runtime,
    store: &Arc<dyn crate::store::Store>,
    rec: &crate::store::ThreadRec,
    plan: Option<&Path>,
) -> Result<Loaded, u8> {
    // A `--plan` that is not there is an error; a recorded source that is gone falls back
    // to the plan the store keeps.
    if let Some(p) = plan
        && !p.is_file()
    {
        super::err(&format!("error: `--plan {}`: no such file", p.display()));
        return Err(super::EXIT_USAGE);
    }
    let source = plan
        .map(Path::to_path_buf)
        .or_else(|| (!rec.source.is_empty()).then(|| PathBuf::from(&rec.source)));
    match source.filter(|p| p.is_file()) {
        Some(p) => load_plan(&p),
        None => match rt.block_on(crate::runtime::stored_plan(&**store, rec)) {
            Ok(plan) => Ok(Loaded {
                plan,
                root: PathBuf::from(&rec.project_root),
                source: rec.source.clone(),
            }),
            Err(e) => {
                print_error(&e.help(format!(
                    "the thread's source `{}` is gone too; give the pipeline with `--plan FILE`",
                    rec.source
                )));
                Err(super::EXIT_FINDINGS)
            }
        },
    }
}

/// `k=v` pairs: JSON unless the input is a string; `k=@file` reads the value from a file
/// (`@-`: standard input), `k=@@v` is the value `@v`.
pub(crate) fn parse_inputs(
    plan: &Plan,
    pairs: &[String],
    files: &[PathBuf],
) -> Result<Value, String> {
    let mut out = Map::new();
    for f in files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| format!("cannot read `{}`: {e}", f.display()))?;
        match serde_json::from_str(&text) {
            Ok(Value::Object(m)) => out.extend(m),
            Ok(_) => return Err(format!("`{}` holds a JSON object of inputs", f.display())),
            Err(e) => return Err(format!("`{}` is not JSON: {e}", f.display())),
        }
    }
    let mut given = std::collections::BTreeSet::new();
    for pair in pairs {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!("`--input {pair}`: write `--input name=value`"));
        };
        if !given.insert(k) {
            return Err(format!(
                "the input `{k}` is given twice (`--input {k}=...`); give it once"
            ));
        }
        let is_string = plan
            .inputs
            .iter()
            .find(|i| i.name == k)
            .is_some_and(|i| i.schema.get("type").and_then(Value::as_str) == Some("string"));
        let value = match input_file(v) {
            // `@file` (or `@-`, standard input): a string input takes the text as it is,
            // any other its JSON, which must parse.
            Some(from) => {
                let text =
                    read_value_file(from).map_err(|e| format!("`--input {k}=@{from}`: {e}"))?;
                if is_string {
                    Value::String(text)
                } else {
                    serde_json::from_str(&text)
                        .map_err(|e| format!("`--input {k}=@{from}`: the file is not JSON: {e}"))?
                }
            }
            None => {
                // `@@text` is the literal `@text`.
                let v = v
                    .strip_prefix('@')
                    .filter(|r| r.starts_with('@'))
                    .unwrap_or(v);
                if is_string {
                    Value::String(v.to_string())
                } else {
                    match serde_json::from_str(v) {
                        Ok(value) => value,
                        // JSON nested past what the parser reads is not text meant as a
                        // string.
                        Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
                            return Err(format!(
                                "`--input {k}=...`: the JSON nests deeper than pipec reads (values nest at most {} levels)",
                                crate::nesting::MAX_VALUE_NESTING
                            ));
                        }
                        Err(_) => Value::String(v.to_string()),
                    }
                }
            }
        };
        out.insert(k.to_string(), value);
    }
    Ok(Value::Object(out))
}

/// The file an `--input name=@file` value names (`-` is standard input), or `None` for
/// a value given inline (`@@...` is an inline value starting with `@`).
fn input_file(value: &str) -> Option<&str> {
    value
        .strip_prefix('@')
        .filter(|rest| !rest.starts_with('@') && !rest.is_empty())
}

/// The text of a file a value is read from, or of standard input for `-`.
fn read_value_file(from: &str) -> Result<String, String> {
    if from == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        return Ok(s);
    }
    std::fs::read_to_string(from).map_err(|e| format!("cannot read `{from}`: {e}"))
}

/// `gate=JSON`, `gate=@file.json` or `gate=-` (stdin).
pub(crate) fn parse_answers(pairs: &[String]) -> Result<Vec<(String, Value)>, String> {
    let mut out = Vec::new();
    for pair in pairs {
        let Some((gate, v)) = pair.split_once('=') else {
            return Err(format!("`--answer {pair}`: write `--answer gate=JSON`"));
        };
        let text = if let Some(path) = v.strip_prefix('@') {
            read_value_file(path)?
        } else if v == "-" {
            read_value_file("-")?
        } else {
            v.to_string()
        };
        let value = serde_json::from_str(&text)
            .map_err(|e| format!("the answer to `{gate}` is not JSON: {e}"))?;
        out.push((gate.to_string(), value));
    }
    Ok(out)
}

pub(crate) fn print_error(e: &RuntimeError) {
    let mut text = format!("error[{}]: {}", e.code, e.message);
    if let Some(h) = &e.help {
        text.push_str(&format!("\n  help: {h}"));
    }
    super::err(&text);
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./:=@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Prints an outcome: outputs on stdout, or what to do next; returns the exit code.
pub(crate) fn report(outcome: &Outcome, store_flag: &str, detailed: bool, events: bool) -> u8 {
    match outcome {
        Outcome::Completed { outputs, .. } => {
            if !events {
                super::out_json(outputs);
            }
            super::EXIT_OK
        }
        Outcome::Paused { thread, gates } => {
            let mut text = format!(
                "paused: thread {thread} waits for {}\n",
                if gates.len() == 1 {
                    "an answer".to_string()
                } else {
                    format!("{} answers", gates.len())
                }
            );
            let mut args = String::new();
            for g in gates {
                text.push_str(&format!("\ngate `{}`: {}\n", g.name, g.message));
                let defs = g.schema.get("$defs").cloned().unwrap_or(Value::Null);
                let mut shown = match crate::schema::refs::reference_of(&g.schema) {
                    Some(name) => defs.get(name).cloned().unwrap_or(Value::Null),
                    None => g.schema.clone(),
                };
                if let Value::Object(m) = &mut shown {
                    m.remove("$defs");
                }
                text.push_str(&format!(
                    "  answer with JSON matching: {}\n",
                    serde_json::to_string(&shown).unwrap_or_default()
                ));
                if let Some(d) = g.deadline_ms {
                    text.push_str(&format!("  deadline: {} UTC\n", super::runs::fmt_time(d)));
                }
                let ex = crate::schema::example(&g.schema, &defs);
                args.push_str(&format!(
                    " --answer {}",
                    shell_quote(&format!(
                        "{}={}",
                        g.name,
                        serde_json::to_string(&ex).unwrap_or_default()
                    ))
                ));
            }
            text.push_str(&format!(
                "\nresume with:\n  pipec resume {thread}{store_flag}{args}\n"
            ));
            if events {
                super::err(&text);
            } else {
                super::out(&text);
            }
            if detailed {
                EXIT_PAUSED
            } else {
                super::EXIT_OK
            }
        }
        Outcome::Failed { thread, error } => {
            let mut text = format!("error[{}]: {}", error.code, error.message);
            if let Some(h) = &error.help {
                text.push_str(&format!("\n  help: {h}"));
            }
            text.push_str(&format!("\nthread {thread} failed; `pipec show {thread}{store_flag}` has the details, `pipec resume {thread}{store_flag}` runs the failed nodes again"));
            super::err(&text);
            super::EXIT_FINDINGS
        }
        Outcome::Released { thread } => {
            super::err(&format!(
                "released: thread {thread} waits for a worker (`pipec worker{store_flag}`)\n"
            ));
            super::EXIT_OK
        }
        Outcome::Blocked { thread, reasons } => {
            let mut text = format!("blocked: thread {thread} needs a decision\n");
            for r in reasons {
                text.push_str(&format!("\nerror[{}]: {}\n", r.code, r.message));
                if let Some(h) = &r.help {
                    text.push_str(&format!(
                        "  help: {}\n",
                        h.replace("`--", &format!("`pipec resume {thread}{store_flag} --"))
                    ));
                }
            }
            super::err(&text);
            if detailed {
                EXIT_BLOCKED
            } else {
                super::EXIT_FINDINGS
            }
        }
    }
}

/// Prints events as JSON lines, after a version line.
pub(crate) fn event_printer() -> crate::runtime::EventSink {
    super::out(&format!(
        "{}\n",
        serde_json::json!({ "type": "version", "events": "1", "pipec": env!("CARGO_PKG_VERSION") })
    ));
    Arc::new(|e: &crate::store::RecordedEvent| {
        super::out(&format!(
            "{}\n",
            serde_json::to_string(e).unwrap_or_default()
        ))
    })
}
