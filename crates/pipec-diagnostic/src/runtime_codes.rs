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
    /// A tool result with no `structuredContent` and no single JSON text block, or one that does not validate against `-> T`; also a result holding images, audio or embedded blobs that the declared type cannot hold (the message names each with its MIME type and size), and several binary blocks for `-> bytes`.
    ///
    /// ## Why it matters
    /// Downstream nodes rely on the declared type, and content a type cannot hold must not vanish without a word.
    ///
    /// ## What to do
    /// Declare `-> string` for text results, `-> bytes` (or `bytes[]`) for images, audio and blobs, or fix the declared type.
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
    /// An MCP server that failed to spawn, could not be reached at its `url`, crashed, timed out, wrote something other than the protocol, or refused pipec's credentials (HTTP 401 or 403, on the handshake or on a tool call).
    ///
    /// ## Why it matters
    /// Transport failures are not resource expiry and are never healed by replaying. Refused credentials are the server's setup, not a tool's failure, and are not retried: the same ones would be sent again.
    ///
    /// ## What to do
    /// Run the server's command by hand; the error shows the tail of its stderr. For a `url`, the error names it and the cause; for a 401 or 403 it shows the server's explanation and challenge: check the server's `headers` and the secrets they name.
    pub static MCP_SERVER_FAILED = {
        code: "R0501",
        name: "mcp-server-failed",
        severity: Error,
        summary: "an MCP server that could not be started or reached, stopped answering, or refused pipec's credentials (HTTP 401 or 403, a tool call's too)",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A declared tool the server does not offer (`tools/list` does not list it), or whose input schema the server no longer accepts: a parameter the declaration sends that the server does not know, or one the server requires that the declaration does not send. Checked when a run starts, before any node runs, and by `pipec check --online`.
    ///
    /// ## Why it matters
    /// A tool that moved or changed would otherwise fail in the middle of a run, after earlier steps (and their effects) are done.
    ///
    /// ## What to do
    /// Compare the declaration with what the server offers: `pipec tools pull SERVER` prints the declarations it would write.
    pub static MCP_TOOL_MISMATCH = {
        code: "R0502",
        name: "mcp-tool-mismatch",
        severity: Error,
        summary: "a declared tool the server does not offer, or offers with another input schema",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A tool call the server answered with an error (a JSON-RPC error, or a result with `isError`): the tool ran, or was refused, and reports a failure.
    ///
    /// ## Why it matters
    /// The node has no value of its type. A failure the tool reports is not retried by itself: only `retries` on an idempotent tool tries again.
    ///
    /// ## What to do
    /// Read the tool's message in the error; check the arguments with `pipec show --internal`.
    pub static TOOL_FAILED = {
        code: "R0503",
        name: "tool-failed",
        severity: Error,
        summary: "a tool call the server answered with an error",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A `resource_link` in a tool result whose `uri` is not a URI (empty, without a scheme, with whitespace).
    ///
    /// ## Why it matters
    /// Links are what later nodes read; a malformed one would fail far from the tool that returned it.
    ///
    /// ## What to do
    /// Fix the server, or do not list a link kind for the tool.
    pub static MALFORMED_LINK = {
        code: "R0108",
        name: "malformed-link",
        severity: Error,
        summary: "a tool result with a `resource_link` that is not a URI",
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
    /// An `env()` value that its setting cannot take: a server `url = env("NAME")` whose value is not an `http:` or `https:` URL with a host (`localhost:8080/mcp` has no scheme). Reported with every missing variable, before anything runs; `pipec check --online` and `pipec tools pull` read it the same way.
    ///
    /// ## Why it matters
    /// A literal `url` is checked when the file is (P0206 invalid-server-url); a value read from the environment can only be checked when a run reads it, and would otherwise fail at the first call with a transport error that does not name the variable.
    ///
    /// ## What to do
    /// Set the variable to the server's streamable HTTP endpoint, scheme included: `MCP_URL=http://localhost:8080/mcp`.
    pub static CONFIG_INVALID = {
        code: "R0109",
        name: "config-invalid",
        severity: Error,
        summary: "an environment variable whose value its setting cannot take",
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
    /// A command that uses an existing store (`show`, `answer`, `cancel`, `resume`, `prune`, `store`, or `runs --store PATH`) given a path where there is none.
    ///
    /// ## Why it matters
    /// Only `pipec run` creates a store; a mistyped path must not become a new, empty store that hides the real one.
    ///
    /// ## What to do
    /// Name the store with `--store PATH` or `PIPEC_STORE` (the default is `.pipec/runs.redb` in the project); the error suggests a store nearby when there is one.
    pub static STORE_NOT_FOUND = {
        code: "R0413",
        name: "store-not-found",
        severity: Error,
        summary: "a path where no store exists",
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

crate::declare_rule! {
    /// ## What it catches
    /// A node or binding that this version of pipec cannot run: `call`, `agent` and `act` nodes, and parameters bound to MCP resources or resource links.
    ///
    /// ## Why it matters
    /// The checker accepts them (they are part of the language), but running one needs the MCP client; the run stops before anything of that node happens.
    ///
    /// ## What to do
    /// Run the pipeline with a pipec that runs MCP nodes, or replace the node with an `exec` or `host` node for now.
    pub static NOT_SUPPORTED = {
        code: "R0005",
        name: "not-supported",
        severity: Error,
        summary: "a node or binding this pipec cannot run yet",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A body expression (`return`, `when`) that cannot be evaluated with the values the node received: `len` of a missing value, a comparison of values that are not numbers, a `when` that is not true or false, or an `each` source that is not a list.
    ///
    /// ## Why it matters
    /// The checker types every expression, so this means an upstream value did not have its declared type (an `exec` or host function that returned something looser than declared, or a resource that changed).
    ///
    /// ## What to do
    /// `pipec show THREAD --json` shows the node's inputs; fix the node that produced the value, then resume.
    pub static EVALUATION_FAILED = {
        code: "R0006",
        name: "evaluation-failed",
        severity: Error,
        summary: "a body expression that cannot be evaluated at run time",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A failure inside pipec itself: a task that panicked, or a state the runner should never reach.
    ///
    /// ## Why it matters
    /// It is a bug in pipec, not in the pipeline. The thread keeps what it committed; nothing is lost.
    ///
    /// ## What to do
    /// Report it with `pipec show THREAD --json --internal`; `pipec resume THREAD` tries again.
    pub static INTERNAL_ERROR = {
        code: "R0007",
        name: "internal-error",
        severity: Error,
        summary: "a failure inside pipec",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// An `each` whose list has more items than its `max:`.
    ///
    /// ## Why it matters
    /// `max:` bounds how many model calls or effects one node can fan out to; a longer list fails the node before any item runs.
    ///
    /// ## What to do
    /// Raise `max:` on the `each` source, or narrow the list upstream.
    pub static FAN_OUT_TOO_LARGE = {
        code: "R0008",
        name: "fan-out-too-large",
        severity: Error,
        summary: "an `each` list longer than its `max`",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A run option that names something the pipeline or thread does not have: a `--model` override of a model the plan does not declare, `--keep`, `--rerun-from` or `--rename` of a node that does not exist, `--retry-unfinished` or `--resolve` of a call that is not unfinished, the same node both kept and rerun, an input or answer given twice, a concurrency of 0.
    ///
    /// ## Why it matters
    /// An option that silently does nothing is worse than an error: a mistyped override would call (and bill) the real model, a mistyped `--keep` would leave a run refused for reasons that look fixed.
    ///
    /// ## What to do
    /// Use the name the message suggests; `pipec show THREAD --internal` lists a thread's nodes and calls.
    pub static OPTION_INVALID = {
        code: "R0009",
        name: "option-invalid",
        severity: Error,
        summary: "a run option that names nothing, or contradicts another",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A model that does not answer: a connection error, a timeout, or 429/5xx replies through every retry.
    ///
    /// ## Why it matters
    /// Nothing about the request is wrong; the endpoint is down or overloaded. The node's tries are stored, so a resume goes on from there.
    ///
    /// ## What to do
    /// Check the model's `base_url` and the service's status, then `pipec resume THREAD`.
    pub static MODEL_UNAVAILABLE = {
        code: "R0202",
        name: "model-unavailable",
        severity: Error,
        summary: "a model endpoint that does not answer",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A request the model endpoint refused: an invalid API key, an unknown model name, a request it calls malformed (4xx other than 429).
    ///
    /// ## Why it matters
    /// Sending the same request again would be refused again, so pipec does not retry it.
    ///
    /// ## What to do
    /// Check the model's `name`, `api_key` and `base_url`; the message quotes the endpoint's reply.
    pub static MODEL_REFUSED = {
        code: "R0203",
        name: "model-refused",
        severity: Error,
        summary: "a request the model endpoint refused",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A model reply larger than the model's `max_reply_bytes` (8 MB when it declares none). pipec stops reading at the cap, so the rest of the reply never reaches memory.
    ///
    /// ## Why it matters
    /// An endpoint that answers without end (a runaway generation, a misconfigured proxy, a hostile server) would otherwise grow pipec's memory with it, and a repair turn would send it all back. A reply cut short cannot be parsed, so the node fails rather than guess; it is not retried, since the same request would likely give the same reply.
    ///
    /// ## What to do
    /// Lower the model's `max_tokens` (or the node's), or raise `max_reply_bytes` on the model (`max_reply_bytes = 32mb`) when replies that large are expected; then `pipec resume THREAD`.
    pub static MODEL_REPLY_TOO_LARGE = {
        code: "R0205",
        name: "model-reply-too-large",
        severity: Error,
        summary: "a model reply larger than the model's `max_reply_bytes`",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A prompt or gate message template that fails to render with the node's values: a value it uses that is not there (a field of a `json` value, a map key), a filter given a value of the wrong kind, a missing include. An optional field a value leaves out is not one: it renders as `none`.
    ///
    /// ## Why it matters
    /// The checker proves that every variable a template uses exists and that the fields it reads are in their types; what it cannot see is what untyped values hold, or a value whose shape a filter does not accept.
    ///
    /// ## What to do
    /// The message names the template, the line and the value; for a value that is not there, test it with `{% if x.y is defined %}` or give a default with `{{ x.y | default("") }}`. `pipec show THREAD --json` shows the node's inputs.
    pub static TEMPLATE_RENDER_FAILED = {
        code: "R0204",
        name: "template-render-failed",
        severity: Error,
        summary: "a prompt or message template that fails to render",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A thread that was cancelled (`pipec cancel`) while a process was running it. Effects in flight are stopped, and their calls are recorded as unknown.
    ///
    /// ## Why it matters
    /// A cancelled thread is final: nothing more of it runs, and a resume is refused.
    ///
    /// ## What to do
    /// Start a new run if the work is still wanted; `pipec show THREAD --internal` shows which calls were interrupted.
    pub static THREAD_CANCELLED = {
        code: "R0406",
        name: "thread-cancelled",
        severity: Error,
        summary: "a thread cancelled while it ran",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A resume (or `run --thread`) with a plan of another pipeline than the one the thread started with, or a plan whose inputs no longer fit the thread's stored inputs, or that no longer has a gate the thread waits at. A worker that serves a folder (`pipec worker --pipelines DIR`) runs threads only under its own plans, and fails a thread stored with another plan of the pipeline that its plan cannot take with this code (or `R0401`), nothing of it run.
    ///
    /// ## Why it matters
    /// A thread belongs to one pipeline, identified by its name (the `.pipe` file's name without the extension). Plan changes (`--keep`, `--rerun-from`, `--rename`) are for edits of that pipeline; running another one on its rows would bypass its gates and run effects it never asked for.
    ///
    /// ## What to do
    /// Start a new thread of the other pipeline with `pipec run`. For an edit of the same pipeline, keep its name and its inputs.
    pub static FOREIGN_PLAN = {
        code: "R0407",
        name: "foreign-plan",
        severity: Error,
        summary: "a plan of another pipeline than the thread's",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// `pipec run --thread ID` with the id of a thread that already exists; `pipec store copy` to a store that already has one of the threads it copies.
    ///
    /// ## Why it matters
    /// `run` starts threads; continuing one is `resume`'s job, which checks answers, plan changes and unfinished effects first. A copy never writes over a thread: the target's may have gone on since, and mixing the two would lose one of them. A refused copy writes nothing.
    ///
    /// ## What to do
    /// `pipec resume ID`, or choose a new id. For a copy: `--skip-existing` leaves those threads as the target has them and copies the others, or copy to another store.
    pub static THREAD_EXISTS = {
        code: "R0414",
        name: "thread-exists",
        severity: Error,
        summary: "a `run --thread` of an id that is taken, or a copy to a store that has the thread",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// `pipec replay` reached a node that calls something (a model, a tool, a command, a host function, a resource read) for which the thread it replays holds no result: a node the edited pipeline added, an item the recorded run never had, or a node the recorded run never reached.
    ///
    /// ## Why it matters
    /// A replay calls nothing: every call's result comes from the recorded thread, so that what differs is the pipeline's own doing. A call with no recorded result cannot be answered without calling.
    ///
    /// ## What to do
    /// Replay a thread that ran that far, or run the edited pipeline for real (`pipec run`, or `pipec resume --plan FILE --rerun-from NODE` on a copy).
    pub static NOTHING_RECORDED = {
        code: "R0415",
        name: "nothing-recorded",
        severity: Error,
        summary: "a replay reached a call the replayed thread holds no result for",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A host function (registered by the program that embeds pipec) that returned an error, through every retry.
    ///
    /// ## Why it matters
    /// Host functions are the embedding program's code; pipec retries them as `retries` says and then fails the node.
    ///
    /// ## What to do
    /// The message quotes the function's error.
    pub static HOST_FUNCTION_FAILED = {
        code: "R0603",
        name: "host-function-failed",
        severity: Error,
        summary: "a host function that returned an error",
    };
}

crate::declare_rule! {
    /// ## What it catches
    /// A host function whose result does not fit the node's output type.
    ///
    /// ## Why it matters
    /// Results are checked before they are stored, so a downstream node never reads a value of the wrong shape.
    ///
    /// ## What to do
    /// Make the function return the node's type; `Runner::host_fn` checks the Rust types when it is registered.
    pub static HOST_OUTPUT_INVALID = {
        code: "R0604",
        name: "host-output-invalid",
        severity: Error,
        summary: "a host function result that does not fit the node's type",
    };
}

/// Every run-time code.
pub static RUNTIME_CODES: &[&Rule] = &[
    &INPUT_INVALID,
    &CONFIG_MISSING,
    &CONFIG_INVALID,
    &THREAD_NOT_FOUND,
    &PLAN_INVALID,
    &NOT_SUPPORTED,
    &EVALUATION_FAILED,
    &INTERNAL_ERROR,
    &FAN_OUT_TOO_LARGE,
    &OPTION_INVALID,
    &RESOURCE_TOO_LARGE,
    &RESOURCE_EXPIRED,
    &NON_IDEMPOTENT_REPLAY,
    &RESOURCE_PARSE_FAILED,
    &RESOURCE_NOT_FOUND,
    &AMBIGUOUS_LINK,
    &TOOL_RESULT_UNPARSABLE,
    &MALFORMED_LINK,
    &MODEL_OUTPUT_INVALID,
    &MODEL_UNAVAILABLE,
    &MODEL_REFUSED,
    &MODEL_REPLY_TOO_LARGE,
    &TEMPLATE_RENDER_FAILED,
    &GATE_ANSWER_INVALID,
    &GATE_TIMED_OUT,
    &GATE_ALREADY_ANSWERED,
    &PLAN_CHANGED,
    &THREAD_LOCKED,
    &UNFINISHED_EFFECT,
    &JOURNAL_DIVERGENCE,
    &LEASE_LOST,
    &THREAD_CANCELLED,
    &FOREIGN_PLAN,
    &NODE_CRASH_LOOP,
    &STORE_FORMAT_UNSUPPORTED,
    &STORE_UNREADABLE,
    &HOST_FUNCTION_MISSING,
    &THREAD_ENDED,
    &STORE_NOT_FOUND,
    &THREAD_EXISTS,
    &NOTHING_RECORDED,
    &MCP_SERVER_FAILED,
    &MCP_TOOL_MISMATCH,
    &TOOL_FAILED,
    &EXEC_OUTPUT_INVALID,
    &EXEC_FAILED,
    &HOST_FUNCTION_FAILED,
    &HOST_OUTPUT_INVALID,
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
