//! Run-time diagnostics (`R` codes): printed like check diagnostics and stored on the
//! thread. The runtime reports them; `pipec explain` documents them.

use super::Rule;

crate::declare_rule! {
    /// ## What it catches
    /// A resource whose content is larger than the `max_bytes` (or a list larger than `max_total`) of its binding. The size is checked while reading, before anything is parsed.
    ///
    /// ## Why it matters
    /// The cap protects the model's context and the run's memory; silently truncating would hand the model half a document.
    ///
    /// ## What to do
    /// Raise the cap on the binding (`max_bytes: 500kb`), or read a smaller slice through a templated URI.
    pub static RESOURCE_TOO_LARGE = {
        code: "R0101",
        name: "resource-too-large",
        severity: Error,
        summary: "a resource larger than its `max_bytes`",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A resource link the server no longer serves, where replaying the idempotent call that produced it failed too (both causes are shown).
    ///
    /// ## Why it matters
    /// Links are references, not copies; when one expires pipec replays its producer to heal it, and says so when that is impossible.
    ///
    /// ## What to do
    /// Check that the producing tool still returns links of that kind for the recorded arguments.
    pub static RESOURCE_EXPIRED = {
        code: "R0102",
        name: "resource-expired",
        severity: Error,
        summary: "a link that died and could not be re-derived",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A resource link that expired, produced by a tool that is not idempotent, so pipec refuses to call it again to heal the link.
    ///
    /// ## Why it matters
    /// Calling a non-idempotent tool again could repeat its effect (a second ticket, a second email).
    ///
    /// ## What to do
    /// Declare the tool `idempotent = true` if a repeat is harmless, or read the link before any pause.
    pub static NON_IDEMPOTENT_REPLAY = {
        code: "R0103",
        name: "non-idempotent-replay",
        severity: Error,
        summary: "a dead link whose producer may not be called again",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// Content that is not valid JSON for a record type, has an unexpected MIME type, or does not validate against the parameter's type.
    ///
    /// ## Why it matters
    /// A parse failure is never treated as an expired link and never replayed: the data itself is wrong.
    ///
    /// ## What to do
    /// Compare the server's content with the declared type; bind text to `string` and binary to `bytes`.
    pub static RESOURCE_PARSE_FAILED = {
        code: "R0104",
        name: "resource-parse-failed",
        severity: Error,
        summary: "resource content that does not parse as the declared type",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A `resource("uri")` the server reports as not found, or a `resource(ref: ...)` whose producer returned no link of that kind.
    ///
    /// ## Why it matters
    /// A missing input is an error unless the parameter is optional (`T?`), which then receives `null`.
    ///
    /// ## What to do
    /// Declare the parameter `T?` when absence is expected; an expanded URI containing `%2F` usually wants `{+var}`.
    pub static RESOURCE_NOT_FOUND = {
        code: "R0105",
        name: "resource-not-found",
        severity: Error,
        summary: "a URI the server does not serve, or no link of the kind",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A singular `resource(ref: ...)` that finds several links of the kind, with no `where:` to choose.
    ///
    /// ## Why it matters
    /// Taking the first would silently read the wrong deal's history.
    ///
    /// ## What to do
    /// Add `where: { deal_id: deal_id }` to choose by the template's variables, or bind all of them with `resources(ref: ...)`.
    pub static AMBIGUOUS_LINK = {
        code: "R0106",
        name: "ambiguous-link",
        severity: Error,
        summary: "several links of a kind for a singular binding",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A tool result with no `structuredContent` and no single JSON text block, or one that does not validate against `-> T`.
    ///
    /// ## Why it matters
    /// Downstream nodes rely on the declared type.
    ///
    /// ## What to do
    /// Declare `-> string` for text results, or fix the declared type.
    pub static TOOL_RESULT_UNPARSABLE = {
        code: "R0107",
        name: "tool-result-unparsable",
        severity: Error,
        summary: "a tool result that does not fit the tool's declared type",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A `think` (or agent) reply that does not validate against the output type, after `repairs` attempts that sent the validation error back.
    ///
    /// ## Why it matters
    /// Invalid structured output must not flow into typed nodes; the last reply is kept in the error for inspection.
    ///
    /// ## What to do
    /// Raise `repairs`, simplify the output type, or improve the prompt's instructions.
    pub static MODEL_OUTPUT_INVALID = {
        code: "R0201",
        name: "model-output-invalid",
        severity: Error,
        summary: "model output that still fails validation after every repair",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// An answer given with `--answer` or `pipec answer` that is not valid JSON or does not validate against the gate's output type.
    ///
    /// ## Why it matters
    /// Answers are validated before anything is written, so a typo never moves the run forward.
    ///
    /// ## What to do
    /// Answer with JSON that matches the schema shown when the run paused.
    pub static GATE_ANSWER_INVALID = {
        code: "R0301",
        name: "gate-answer-invalid",
        severity: Error,
        summary: "a gate answer that does not fit the gate's type",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A gate with `timeout` whose deadline passed, with no `on_timeout` answer to apply.
    ///
    /// ## Why it matters
    /// A timed-out gate with no default cannot go on; the thread fails with this code.
    ///
    /// ## What to do
    /// Give the gate `on_timeout = <answer>` to continue with a default.
    pub static GATE_TIMED_OUT = {
        code: "R0302",
        name: "gate-timed-out",
        severity: Error,
        summary: "a gate whose deadline passed without an answer or `on_timeout`",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// Resuming a thread with a plan in which nodes that already finished have a different fingerprint.
    ///
    /// ## Why it matters
    /// Their stored results were computed by the old definition; reusing them silently could mix two versions of the pipeline.
    ///
    /// ## What to do
    /// Resume with `--keep NODE` to keep an old result, `--rerun-from NODE` to recompute, or `--rename old=new`.
    pub static PLAN_CHANGED = {
        code: "R0401",
        name: "plan-changed",
        severity: Error,
        summary: "a resume under a plan whose finished nodes changed",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A resume of a thread whose lock is held by a live process (the message names it).
    ///
    /// ## Why it matters
    /// Two processes driving one thread would duplicate work and effects.
    ///
    /// ## What to do
    /// Wait for the other process, or stop it; a dead process's lock is free at once.
    pub static THREAD_LOCKED = {
        code: "R0402",
        name: "thread-locked",
        severity: Error,
        summary: "a thread another live process is running",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A journaled call of a non-idempotent tool (or `exec`) that started but has no recorded result, after a crash.
    ///
    /// ## Why it matters
    /// Repeating it could repeat the effect; skipping it could lose it. A person decides.
    ///
    /// ## What to do
    /// `pipec resume THREAD --retry-unfinished CALL` to call it again, or `--resolve CALL=JSON` to record what happened.
    pub static UNFINISHED_EFFECT = {
        code: "R0403",
        name: "unfinished-effect",
        severity: Error,
        summary: "a non-idempotent call that may or may not have happened",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// On resume, a call whose tool or arguments differ from the journaled call at the same position.
    ///
    /// ## Why it matters
    /// Reusing a recorded result for a different call would be wrong; the thread is blocked instead.
    ///
    /// ## What to do
    /// Inspect with `pipec show THREAD --internal`; rerun the node with `--rerun-from`.
    pub static JOURNAL_DIVERGENCE = {
        code: "R0404",
        name: "journal-divergence",
        severity: Error,
        summary: "a replayed call that differs from the recorded one",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A node that was started three times without finishing because the process died each time.
    ///
    /// ## Why it matters
    /// Retrying forever would hide a crash the node causes.
    ///
    /// ## What to do
    /// Look at the node's inputs and the process's stderr; fix the cause, then resume.
    pub static NODE_CRASH_LOOP = {
        code: "R0408",
        name: "node-crash-loop",
        severity: Error,
        summary: "a node whose run killed the process repeatedly",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// An MCP server that failed to spawn, crashed, timed out, or wrote something other than the protocol.
    ///
    /// ## Why it matters
    /// Transport failures are not resource expiry and are never healed by replaying.
    ///
    /// ## What to do
    /// Run the server's command by hand; the error shows the tail of its stderr.
    pub static MCP_SERVER_FAILED = {
        code: "R0501",
        name: "mcp-server-failed",
        severity: Error,
        summary: "an MCP server that could not be started or stopped answering",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// An `exec` command that exited 0 but printed something that is not one JSON value fitting `-> T`.
    ///
    /// ## Why it matters
    /// Its output flows into typed nodes.
    ///
    /// ## What to do
    /// Print exactly one JSON value on stdout; send logs to stderr.
    pub static EXEC_OUTPUT_INVALID = {
        code: "R0601",
        name: "exec-output-invalid",
        severity: Error,
        summary: "an `exec` command whose stdout is not the declared type",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// An `exec` command that could not start, exited non-zero, or timed out (its process group is killed).
    ///
    /// ## Why it matters
    /// A failed step fails the node (after `retries`).
    ///
    /// ## What to do
    /// The error shows the tail of its stderr; run the command by hand with the same stdin.
    pub static EXEC_FAILED = {
        code: "R0602",
        name: "exec-failed",
        severity: Error,
        summary: "an `exec` command that failed",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A run whose inputs do not fit the pipeline: a required input not given, an input the pipeline does not declare, or a value that does not fit the input's type.
    ///
    /// ## Why it matters
    /// Inputs are checked before anything is stored or run, so a typo never starts a thread.
    ///
    /// ## What to do
    /// Give every required input with `--input name=value` (JSON unless the type is `string`) or `--inputs file.json`.
    pub static INPUT_INVALID = {
        code: "R0001",
        name: "input-invalid",
        severity: Error,
        summary: "a missing, unknown or mistyped pipeline input",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// An `env("X")` without a default, or a `secret("X")`, whose variable is not set when the run starts or resumes.
    ///
    /// ## Why it matters
    /// Configuration is read before any node runs, so a run does not fail halfway for want of a key.
    ///
    /// ## What to do
    /// Set the variable in the environment. `env()` values are recorded on the thread; secrets are read again at each resume and never stored.
    pub static CONFIG_MISSING = {
        code: "R0002",
        name: "config-missing",
        severity: Error,
        summary: "an environment variable or secret the run needs is not set",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A thread id (or prefix) that the store does not hold, or a prefix that names several threads.
    ///
    /// ## Why it matters
    /// Threads live in one store file; another store (`--store`, `PIPEC_STORE`) holds other threads.
    ///
    /// ## What to do
    /// List the threads with `pipec runs`, and check `--store`.
    pub static THREAD_NOT_FOUND = {
        code: "R0003",
        name: "thread-not-found",
        severity: Error,
        summary: "no thread with this id in the store",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// An answer to a gate that was already answered with another value (an identical answer is accepted and changes nothing).
    ///
    /// ## Why it matters
    /// Answers are compare-and-set: two people cannot both decide, and the first decision stands.
    ///
    /// ## What to do
    /// `pipec show THREAD` shows the answer and who gave it.
    pub static GATE_ALREADY_ANSWERED = {
        code: "R0303",
        name: "gate-already-answered",
        severity: Error,
        summary: "a different answer to a gate that already has one",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A write refused because another process claimed the thread (its epoch moved on), or the thread was cancelled.
    ///
    /// ## Why it matters
    /// Fencing keeps a process that lost its lease from writing over the one that took it.
    ///
    /// ## What to do
    /// Nothing: the other process carries on. `pipec show THREAD` shows who holds it.
    pub static LEASE_LOST = {
        code: "R0405",
        name: "lease-lost",
        severity: Error,
        summary: "a process lost its thread to another one",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A store file whose format version is newer than this pipec reads.
    ///
    /// ## Why it matters
    /// Reading a newer format could misread records; pipec refuses instead of guessing.
    ///
    /// ## What to do
    /// Use the pipec that wrote it (or a newer one); `pipec store migrate` upgrades older stores.
    pub static STORE_FORMAT_UNSUPPORTED = {
        code: "R0409",
        name: "store-format-unsupported",
        severity: Error,
        summary: "a store written by a newer pipec",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A store file that cannot be opened or whose records cannot be decoded.
    ///
    /// ## Why it matters
    /// A damaged file must not be written to: every thread in it is at stake.
    ///
    /// ## What to do
    /// Restore it from a backup, or point `--store` elsewhere; `pipec store check` runs the integrity check.
    pub static STORE_UNREADABLE = {
        code: "R0410",
        name: "store-unreadable",
        severity: Error,
        summary: "a store file that is corrupt, truncated or not a store",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A `host = "name"` node when the program running the plan registered no function of that name (or one whose types do not fit).
    ///
    /// ## Why it matters
    /// Host functions come from the program that embeds pipec; the command line has none.
    ///
    /// ## What to do
    /// Register it with `Runner::host_fn("name", f)` in the embedding program.
    pub static HOST_FUNCTION_MISSING = {
        code: "R0411",
        name: "host-function-missing",
        severity: Error,
        summary: "a `host` node whose function is not registered",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A resume of a thread that has ended: cancelled, or completed when the resume asks for changes (`--rerun-from`, `--keep`, `--rename`, `--retry-unfinished`, `--resolve`).
    ///
    /// ## Why it matters
    /// A completed thread's outputs have been handed out and a cancelled thread was stopped on purpose; changing either after the fact would rewrite a record others rely on. Resuming a completed thread with nothing to change just prints its outputs again.
    ///
    /// ## What to do
    /// Start a new run (`pipec run`), with `--answer` to give its gates the same answers.
    pub static THREAD_ENDED = {
        code: "R0412",
        name: "thread-ended",
        severity: Error,
        summary: "a resume that would change a thread that has ended",
    };
}

/// Every run-time code.
pub static RUNTIME_CODES: &[&Rule] = &[
    &INPUT_INVALID,
    &CONFIG_MISSING,
    &THREAD_NOT_FOUND,
    &PLAN_INVALID,
    &RESOURCE_TOO_LARGE,
    &RESOURCE_EXPIRED,
    &NON_IDEMPOTENT_REPLAY,
    &RESOURCE_PARSE_FAILED,
    &RESOURCE_NOT_FOUND,
    &AMBIGUOUS_LINK,
    &TOOL_RESULT_UNPARSABLE,
    &MODEL_OUTPUT_INVALID,
    &GATE_ANSWER_INVALID,
    &GATE_TIMED_OUT,
    &GATE_ALREADY_ANSWERED,
    &PLAN_CHANGED,
    &THREAD_LOCKED,
    &UNFINISHED_EFFECT,
    &JOURNAL_DIVERGENCE,
    &LEASE_LOST,
    &NODE_CRASH_LOOP,
    &STORE_FORMAT_UNSUPPORTED,
    &STORE_UNREADABLE,
    &HOST_FUNCTION_MISSING,
    &THREAD_ENDED,
    &MCP_SERVER_FAILED,
    &EXEC_OUTPUT_INVALID,
    &EXEC_FAILED,
];

crate::declare_rule! {
    /// ## What it catches
    /// A plan file that pipec cannot run: not JSON, of another `format_version` (or one that is not a whole number), without the plan's shape, edited after compiling (its content no longer matches its `hash`), or inconsistent in a way `pipec compile` never writes: a dependency cycle, nodes out of topological order, a node, input, tool, model, server, link kind or `$defs` type named but not declared, a name declared twice, an `each` that names no parameter, a secret the plan's `config` does not list as one.
    ///
    /// ## Why it matters
    /// The runtime trusts a plan's structure: its nodes run in the plan's order and read the nodes it names. A plan whose hash was recomputed after a hand edit would otherwise start a thread that deadlocks, reads nothing, or fails halfway, after effects have run. A refused plan starts nothing and writes nothing to the store.
    ///
    /// ## What to do
    /// Compile the pipeline again with this pipec: `pipec compile pipeline.pipe -o plan.json`, or run the `.pipe` file itself. Do not edit plans by hand.
    pub static PLAN_INVALID = {
        code: "R0004",
        name: "plan-invalid",
        severity: Error,
        summary: "a plan file that is not one pipec compiled",
    };
}
