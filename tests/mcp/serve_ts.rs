//! `pipec serve` driven by MCP clients of the TypeScript world, over stdio and streamable
//! HTTP: the official TypeScript SDK's clients, v1 (`@modelcontextprotocol/sdk`, through
//! `tests/fixtures/serve_ts/ts_client.mjs`, which speaks 2025-11-25) and v2
//! (`@modelcontextprotocol/client`, through `ts2_client.mjs`, which speaks 2026-07-28), and
//! the MCP Inspector's CLI. With the SDK: a pipeline is listed as a tool with its inputs'
//! schema; its record gate is asked of the client in-band (v1: an `elicitation/create` on
//! the call's own stream; v2: an input request of the call's `input_required` answer)
//! whose accepted content the call answers with the outputs, and whose decline answers the
//! paused run that `resume_run` finishes; a `provider = "client"` model is the client's
//! sampling handler, and a client without sampling is refused with -32021; a roots gate is
//! answered by `roots/list`; prompts are listed and got, a missing argument asked in a
//! form. With the Inspector: tools listed and called, a prompt got, a resource read. The
//! npm packages are pinned in `common::npm` and installed once under `target/ts-interop`
//! and `target/ts2-interop`; without npm the tests say they are skipped (and fail under
//! `PIPEC_REQUIRE_NPM=1`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::npm::{INSPECTOR_CLI, NODE, TS_SDK, TS_SDK_V2, node_modules, node_of};
use common::serve_http::serve_http;
use common::{Project, crate_root, pipec_bin};
use serde_json::{Value, json};

const TOKEN: &str = "ts-t0ken";

/// A person reviews a document: a verdict from a union of strings, an optional note and
/// an optional number, a whole number and a yes or no; every kind of field a form holds.
const REVIEW: &str = r#"//! Reviews a document: a person gives a verdict and a score.

type Review {
  /// The verdict on the document
  verdict: "approve" | "reject"
  /// Why, in a few words
  note: string?
  /// Out of ten
  score: int
  urgent: bool
  /// How sure, from 0 to 1
  confidence: float?
}

input doc: string
input pages: int = 1

gate review(doc: string = input.doc) -> Review {
  message = "Review {{ doc }}"
}

node summary(doc: string = input.doc, pages: int = input.pages, r: Review = review) -> { doc: string, pages: int, verdict: string, score: int, urgent: bool } {
  return = { doc: doc, pages: pages, verdict: r.verdict, score: r.score, urgent: r.urgent }
}

output summary = summary
"#;

/// A think node of the calling client's model.
const ASK: &str = r#"//! Asks the calling client's model a question.

model caller {
  provider = "client"
  name = "claude-haiku"
}

input question: string

think reply(question: string = input.question) -> string {
  model = caller
  prompt = "{{ role(\"system\") }}Answer in one word.{{ role(\"user\") }}Q: {{ question }}"
  max_tokens = 50
  temperature = 0.2
}

output answer = reply
"#;

/// A gate of the client's roots, whose URIs are the output.
const ROOTS: &str = r#"//! Lists the folders the calling client works in.

gate workspace() {
  ask = "roots"
}

node uris(w: { roots: { uri: string, name: string? }[] } = workspace) -> string[] {
  return = w.roots[*].uri
}

output uris = uris
"#;

/// A served resource and a prompt that places it: required, enum and optional arguments.
const BRIEF: &str = r##"//! A brief's prompt and the style guide it quotes.

enum Tone {
  kind
  terse
}

serve {
  resource "docs://style" {
    name = "style"
    mime_type = "text/markdown"
    text = "# Style\nShort names."
  }

  /// Brief a reviewer.
  prompt brief(
    /// The topic of the brief
    topic: string,
    tone: Tone,
    focus: string?,
  ) {
    title = "A brief"
    text = "Write a {{ tone }} brief on {{ topic }}{% if focus %}, on {{ focus }}{% endif %}.{{ resource(\"docs://style\") }}{{ role(\"assistant\") }}Noted."
  }
}
"##;

/// A pipeline without gates or models: its outputs come straight from its arguments.
const HELLO: &str = r#"//! Greets someone, some times.

input name: string
input times: int = 1

node greet(name: string = input.name, times: int = input.times) -> { name: string, times: int } {
  return = { name: name, times: times }
}

output greeting = greet
"#;

/// What the served style guide reads, and the messages `brief` renders around it.
const STYLE: &str = "# Style\nShort names.";

fn project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.write("review.pipe", REVIEW);
    p.write("ask.pipe", ASK);
    p.write("roots.pipe", ROOTS);
    p.write("brief.pipe", BRIEF);
    p.write("hello.pipe", HELLO);
    p
}

/// The `node_modules` folder with the SDK and the Inspector's CLI, installed on first
/// use; `None` (the test said it is skipped) without npm.
fn modules() -> Option<PathBuf> {
    node_modules("ts-interop", &[TS_SDK, INSPECTOR_CLI, NODE])
}

/// Which of the SDK's clients: v1 (`@modelcontextprotocol/sdk`, the 2025-11-25 revision,
/// the server's questions as requests on a stream) or v2 (`@modelcontextprotocol/client`,
/// the 2026-07-28 revision, the server's questions as input requests of `input_required`
/// results, which the SDK fulfils and sends back on its own).
#[derive(Clone, Copy, PartialEq)]
enum Sdk {
    V1,
    V2,
}

impl Sdk {
    /// Its `node_modules` folder, installed on first use; `None` without npm.
    fn modules(self) -> Option<PathBuf> {
        match self {
            Sdk::V1 => modules(),
            Sdk::V2 => node_modules("ts2-interop", &[TS_SDK_V2, NODE]),
        }
    }

    fn script(self) -> &'static str {
        match self {
            Sdk::V1 => "tests/fixtures/serve_ts/ts_client.mjs",
            Sdk::V2 => "tests/fixtures/serve_ts/ts2_client.mjs",
        }
    }

    /// The revision the client settles on with `pipec serve`: each line's newest.
    fn revision(self) -> &'static str {
        match self {
            Sdk::V1 => "2025-11-25",
            Sdk::V2 => "2026-07-28",
        }
    }
}

#[derive(Clone, Copy)]
enum Via<'a> {
    /// `pipec serve FILES` over stdio, started by the client in the project.
    Stdio(&'a [&'a str]),
    /// A `pipec serve --http` already running, at this URL.
    Http(&'a str),
}

/// What the server asked the client during a step: each request's method and, over
/// HTTP in the 2025-11-25 revision, which request's answer stream carried it
/// (`elicitation/create in tools/call`).
fn asked(step: &Value) -> Vec<String> {
    step["asked"]
        .as_array()
        .unwrap_or_else(|| panic!("no asked: {step}"))
        .iter()
        .map(|a| {
            let method = a["method"].as_str().unwrap_or_default();
            match a.get("stream") {
                Some(stream) => format!("{method} in {}", stream.as_str().unwrap_or("?")),
                None => method.to_string(),
            }
        })
        .collect()
}

/// The params of the one request `method` the server asked during a step, made during a
/// request `during`: over HTTP in the 2025-11-25 revision it must come on that request's
/// own stream; in the 2026-07-28 revision it comes in the request's answer.
fn asked_once<'s>(step: &'s Value, via: Via, sdk: Sdk, method: &str, during: &str) -> &'s Value {
    let expected = match (via, sdk) {
        (Via::Http(_), Sdk::V1) => format!("{method} in {during}"),
        _ => method.to_string(),
    };
    assert_eq!(asked(step), [expected], "{step}");
    &step["asked"][0]["params"]
}

/// A form's required fields, sorted.
fn required(schema: &Value) -> Vec<&str> {
    let mut names: Vec<&str> = schema["required"]
        .as_array()
        .unwrap_or_else(|| panic!("no required: {schema}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    names.sort_unstable();
    names
}

/// The official TypeScript SDK's client of `project`, declaring and answering what it is
/// given.
struct TsClient<'a> {
    sdk: Sdk,
    modules: &'a Path,
    project: &'a Project,
    /// Declares form elicitation, each answered with the step's next answer.
    elicit: bool,
    /// Declares sampling, every `sampling/createMessage` answered with this text.
    sampling: Option<&'a str>,
    /// Declares roots, `roots/list` answered with these.
    roots: Option<Value>,
}

impl<'a> TsClient<'a> {
    fn of(sdk: Sdk, modules: &'a Path, project: &'a Project) -> TsClient<'a> {
        TsClient {
            sdk,
            modules,
            project,
            elicit: false,
            sampling: None,
            roots: None,
        }
    }

    fn eliciting(mut self) -> TsClient<'a> {
        self.elicit = true;
        self
    }

    fn sampling(mut self, reply: &'a str) -> TsClient<'a> {
        self.sampling = Some(reply);
        self
    }

    fn with_roots(mut self, roots: Value) -> TsClient<'a> {
        self.roots = Some(roots);
        self
    }

    /// Runs `steps` (see the script's header) in one session, and answers each step's out.
    fn drive(&self, via: Via, steps: Value) -> Vec<Value> {
        let mut spec = json!({ "modules": self.modules, "elicit": self.elicit, "steps": steps });
        if let Some(reply) = self.sampling {
            spec["sampling"] = json!(reply);
        }
        if let Some(roots) = &self.roots {
            spec["roots"] = roots.clone();
        }
        match via {
            // The SDK starts the server with its own short environment (PATH, HOME, ...)
            // and this: no store or state key from the test's environment.
            Via::Stdio(files) => {
                let mut args = vec!["serve"];
                args.extend_from_slice(files);
                spec["stdio"] = json!({
                    "command": pipec_bin(),
                    "args": args,
                    "cwd": self.project.dir,
                    "env": { "XDG_CONFIG_HOME": self.project.dir.join(".config") },
                });
            }
            Via::Http(url) => spec["http"] = json!({ "url": url, "token": TOKEN }),
        }
        let out = Command::new(node_of(self.modules))
            .arg(crate_root().join(self.sdk.script()))
            .arg(spec.to_string())
            .current_dir(&self.project.dir)
            .stdin(Stdio::null())
            .output()
            .expect("node runs the client");
        let stderr = common::stderr(&out);
        assert!(out.status.success(), "the client failed: {stderr}");
        let stdout = common::stdout(&out);
        let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
            .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
        assert_eq!(
            seen["protocol"],
            self.sdk.revision(),
            "the SDK's newest revision: {seen}"
        );
        seen["steps"].as_array().expect("steps").clone()
    }
}

/// `pipec serve FILES --http 127.0.0.1:0` in `p` with [`TOKEN`], and its URL.
fn serve(p: &Project, files: &[&str]) -> (common::serve_http::Running, String) {
    serve_http(&p.dir, files, TOKEN)
}

/// The SDK lists the pipeline with its inputs; its record gate is a form on the call's
/// stream, each field of the gate's type a property of the kind the form holds. Accepted,
/// it answers the gate and the call the outputs; declined, the call answers the paused
/// run and its link, which reads as paused, and `resume_run` finishes it.
fn form_gate(sdk: Sdk, modules: &Path, p: &Project, via: Via) {
    let steps = TsClient::of(sdk, modules, p).eliciting().drive(
        via,
        json!([
            { "op": "tools" },
            { "op": "call", "tool": "review", "arguments": { "doc": "D-1", "pages": 4 },
              "answers": [{ "action": "accept",
                            "content": { "verdict": "approve", "score": 8, "urgent": true, "confidence": 0.5 } }] },
            { "op": "call", "tool": "review", "arguments": { "doc": "D-2" },
              "answers": [{ "action": "decline" }] },
            { "op": "read", "uri": { "$of": 2, "prefix": "pipec://runs/" } },
            { "op": "call", "tool": "resume_run", "arguments": {
                "thread": { "$of": 2 }, "gate": "review",
                "answer": { "verdict": "reject", "score": 1, "urgent": false } } },
        ]),
    );
    let tools = steps[0]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["review", "resume_run"], "{tools:?}");
    let schema = &tools[0]["inputSchema"];
    assert_eq!(
        schema["properties"],
        json!({ "doc": { "type": "string" }, "pages": { "type": "integer" } }),
        "{schema}"
    );
    assert_eq!(
        required(schema),
        ["doc"],
        "a defaulted input is not required"
    );

    let accepted = &steps[1];
    let form = asked_once(accepted, via, sdk, "elicitation/create", "tools/call");
    assert_eq!(form["mode"], "form", "{form}");
    assert_eq!(form["message"], "Review D-1", "{form}");
    let requested = &form["requestedSchema"];
    assert_eq!(requested["type"], "object", "{requested}");
    assert_eq!(
        requested["properties"],
        json!({
            "verdict": { "type": "string", "enum": ["approve", "reject"], "description": "The verdict on the document" },
            "note": { "type": "string", "description": "Why, in a few words" },
            "score": { "type": "integer", "description": "Out of ten" },
            "urgent": { "type": "boolean" },
            "confidence": { "type": "number", "description": "How sure, from 0 to 1" },
        }),
        "{requested}"
    );
    assert_eq!(
        required(requested),
        ["score", "urgent", "verdict"],
        "the optional fields are not required: {requested}"
    );
    assert_eq!(accepted["isError"], false, "{accepted}");
    assert_eq!(accepted["links"], json!([]), "completed: no run link");
    assert_eq!(
        accepted["structured"],
        json!({ "summary": { "doc": "D-1", "pages": 4, "verdict": "approve", "score": 8, "urgent": true } }),
        "{accepted}"
    );

    let declined = &steps[2];
    let form = asked_once(declined, via, sdk, "elicitation/create", "tools/call");
    assert_eq!(form["message"], "Review D-2", "{form}");
    assert_eq!(declined["isError"], false, "{declined}");
    let structured = &declined["structured"];
    assert_eq!(structured["status"], "paused", "{declined}");
    assert_eq!(structured["gates"][0]["gate"], "review", "{declined}");
    assert_eq!(
        structured["gates"][0]["message"], "Review D-2",
        "{declined}"
    );
    let thread = structured["thread"].as_str().expect("a thread");
    let link = format!("pipec://runs/{thread}");
    assert_eq!(declined["links"], json!([link]), "{declined}");

    let read = &steps[3];
    assert_eq!(read["contents"][0]["uri"], link, "{read}");
    let run = common::json(read["contents"][0]["text"].as_str().expect("text"));
    assert_eq!(run["status"], "paused", "{run}");
    assert_eq!(run["pipeline"], "review", "{run}");
    assert_eq!(run["gates"][0]["gate"], "review", "{run}");

    let resumed = &steps[4];
    assert_eq!(
        asked(resumed),
        Vec::<String>::new(),
        "resume_run asks nothing"
    );
    assert_eq!(
        resumed["structured"],
        json!({ "summary": { "doc": "D-2", "pages": 1, "verdict": "reject", "score": 1, "urgent": false } }),
        "{resumed}"
    );
    assert_eq!(p.show_json(thread)["status"], "completed");
}

#[test]
fn ts_sdk_over_stdio_lists_a_pipeline_and_answers_its_form_gate_in_band() {
    let Some(modules) = Sdk::V1.modules() else {
        return;
    };
    let p = project("ts-form-stdio");
    form_gate(Sdk::V1, &modules, &p, Via::Stdio(&["review.pipe"]));
}

#[test]
fn ts_sdk_over_http_lists_a_pipeline_and_answers_its_form_gate_on_the_calls_stream() {
    let Some(modules) = Sdk::V1.modules() else {
        return;
    };
    let p = project("ts-form-http");
    let (_server, url) = serve(&p, &["review.pipe"]);
    form_gate(Sdk::V1, &modules, &p, Via::Http(&url));
}

/// The same with the v2 SDK in the 2026-07-28 revision: the gate's form is an input
/// request of the call's `input_required` answer, which the SDK fulfils with the
/// handler's answer and sends back, over stdio and over HTTP.
#[test]
fn ts_sdk_v2_answers_a_form_gate_as_an_input_request_over_stdio_and_http() {
    let Some(modules) = Sdk::V2.modules() else {
        return;
    };
    let p = project("ts2-form");
    form_gate(Sdk::V2, &modules, &p, Via::Stdio(&["review.pipe"]));
    let (_server, url) = serve(&p, &["review.pipe"]);
    form_gate(Sdk::V2, &modules, &p, Via::Http(&url));
}

/// How many runs of `pipeline` `p`'s store holds, as `pipec runs --json` lists them.
fn count_runs(p: &Project, pipeline: &str) -> usize {
    let out = p.run(&["runs", "--json", "--pipeline", pipeline]);
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    common::json(&common::stdout(&out))
        .as_array()
        .map_or(0, Vec::len)
}

/// Each turn of a client model is a `sampling/createMessage` on the call's stream, with
/// the rendered prompt, its system part, the node's settings and the model's name as a
/// hint; the handler's text is the output. A client that declared no sampling (forms
/// only) is refused with -32021, naming sampling, and no run starts.
fn sampling(sdk: Sdk, modules: &Path, p: &Project, via: Via) {
    let reply = "Paris, said the TypeScript client";
    let question =
        json!([{ "op": "call", "tool": "ask", "arguments": { "question": "Capital of France?" } }]);
    let before = count_runs(p, "ask");
    let sampled = &TsClient::of(sdk, modules, p)
        .sampling(reply)
        .drive(via, question.clone())[0];
    let turn = asked_once(sampled, via, sdk, "sampling/createMessage", "tools/call");
    assert_eq!(
        turn["messages"],
        json!([{ "role": "user", "content": { "type": "text", "text": "Q: Capital of France?" } }]),
        "{turn}"
    );
    assert_eq!(turn["systemPrompt"], "Answer in one word.", "{turn}");
    assert_eq!(turn["maxTokens"], 50, "{turn}");
    assert!(
        turn["temperature"]
            .as_f64()
            .is_some_and(|t| (t - 0.2).abs() < 1e-6),
        "{turn}"
    );
    assert_eq!(
        turn["modelPreferences"]["hints"],
        json!([{ "name": "claude-haiku" }]),
        "{turn}"
    );
    assert_eq!(sampled["isError"], false, "{sampled}");
    assert_eq!(
        sampled["structured"],
        json!({ "answer": reply }),
        "{sampled}"
    );

    let refused = &TsClient::of(sdk, modules, p)
        .eliciting()
        .drive(via, question)[0];
    assert_eq!(asked(refused), Vec::<String>::new(), "{refused}");
    let error = &refused["error"];
    assert_eq!(error["code"], -32021, "{refused}");
    assert!(
        error["data"]["requiredCapabilities"]
            .get("sampling")
            .is_some(),
        "{refused}"
    );
    assert_eq!(
        count_runs(p, "ask"),
        before + 1,
        "the refused call started no run"
    );
}

#[test]
fn ts_sdk_sampling_handler_is_the_client_model_and_a_client_without_sampling_is_refused() {
    for sdk in [Sdk::V1, Sdk::V2] {
        let Some(modules) = sdk.modules() else { return };
        let p = project(if sdk == Sdk::V1 {
            "ts-sampling"
        } else {
            "ts2-sampling"
        });
        sampling(sdk, &modules, &p, Via::Stdio(&["ask.pipe"]));
        let (_server, url) = serve(&p, &["ask.pipe"]);
        sampling(sdk, &modules, &p, Via::Http(&url));
    }
}

/// A gate of the client's roots is a `roots/list` on the call's stream, and the roots the
/// handler answers are the gate's answer.
#[test]
fn ts_sdk_roots_handler_answers_a_gate_of_the_clients_roots() {
    let p = project("ts-roots");
    let (_server, url) = serve(&p, &["roots.pipe"]);
    let roots = json!([
        { "uri": "file:///srv/project/src", "name": "src" },
        { "uri": "file:///srv/project/docs" },
    ]);
    for (sdk, via) in [
        (Sdk::V1, Via::Stdio(&["roots.pipe"])),
        (Sdk::V1, Via::Http(&url)),
        (Sdk::V2, Via::Stdio(&["roots.pipe"])),
        (Sdk::V2, Via::Http(&url)),
    ] {
        let Some(modules) = sdk.modules() else { return };
        let call = &TsClient::of(sdk, &modules, &p)
            .with_roots(roots.clone())
            .drive(via, json!([{ "op": "call", "tool": "roots" }]))[0];
        asked_once(call, via, sdk, "roots/list", "tools/call");
        assert_eq!(
            call["structured"],
            json!({ "uris": ["file:///srv/project/src", "file:///srv/project/docs"] }),
            "{call}"
        );
    }
}

/// Prompts are listed with their arguments and got with their messages, the placed
/// resource embedded; a get that leaves out a required argument asks for it in a form on
/// the request's stream, and renders with the answer; declined, it is -32602 naming it.
#[test]
fn ts_sdk_lists_and_gets_prompts_and_a_missing_argument_is_asked() {
    let p = project("ts-prompts");
    let (_server, url) = serve(&p, &["brief.pipe"]);
    for (sdk, via) in [
        (Sdk::V1, Via::Stdio(&["brief.pipe"])),
        (Sdk::V1, Via::Http(&url)),
        (Sdk::V2, Via::Stdio(&["brief.pipe"])),
        (Sdk::V2, Via::Http(&url)),
    ] {
        let Some(modules) = sdk.modules() else { return };
        let steps = TsClient::of(sdk, &modules, &p).eliciting().drive(
            via,
            json!([
                { "op": "prompts" },
                { "op": "prompt", "name": "brief",
                  "arguments": { "topic": "caching", "tone": "kind", "focus": "eviction" } },
                { "op": "prompt", "name": "brief", "arguments": { "topic": "queues" },
                  "answers": [{ "action": "accept", "content": { "tone": "terse" } }] },
                { "op": "prompt", "name": "brief", "arguments": { "topic": "queues" },
                  "answers": [{ "action": "decline" }] },
            ]),
        );
        assert_eq!(
            steps[0]["prompts"],
            json!([{
                "name": "brief",
                "title": "A brief",
                "description": "Brief a reviewer.",
                "arguments": [
                    { "name": "topic", "description": "The topic of the brief", "required": true },
                    { "name": "tone", "required": true },
                    { "name": "focus", "required": false },
                ],
            }]),
            "{}",
            steps[0]
        );
        let messages = |text: &str| {
            json!([
                { "role": "user", "type": "text", "text": text },
                { "role": "user", "type": "resource", "text": STYLE },
                { "role": "assistant", "type": "text", "text": "Noted." },
            ])
        };
        let full = &steps[1];
        assert_eq!(asked(full), Vec::<String>::new(), "{full}");
        assert_eq!(
            full["messages"],
            messages("Write a kind brief on caching, on eviction."),
            "{full}"
        );
        let answered = &steps[2];
        let form = asked_once(answered, via, sdk, "elicitation/create", "prompts/get");
        assert_eq!(form["message"], "The prompt `brief` needs: tone.", "{form}");
        assert_eq!(
            form["requestedSchema"]["properties"],
            json!({ "tone": { "type": "string", "title": "tone", "enum": ["kind", "terse"] } }),
            "{form}"
        );
        assert_eq!(required(&form["requestedSchema"]), ["tone"], "{form}");
        assert_eq!(
            answered["messages"],
            messages("Write a terse brief on queues."),
            "{answered}"
        );
        let declined = &steps[3];
        assert_eq!(declined["error"]["code"], -32602, "{declined}");
        assert!(
            declined["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("`tone`")),
            "{declined}"
        );
    }
}

/// The MCP Inspector's CLI (`mcp-inspector-cli --cli TARGET --method ...`): one method a
/// process, its answer as JSON on stdout.
struct Inspector<'a> {
    modules: &'a Path,
    project: &'a Project,
}

impl Inspector<'_> {
    /// The CLI against `target` (a command, or a URL and its options) with `method_args`.
    fn run(&self, target: &[&str], method_args: &[&str]) -> Output {
        Command::new(node_of(self.modules))
            .arg(self.modules.join(".bin/mcp-inspector-cli"))
            .arg("--cli")
            .args(target)
            .args(method_args)
            // The CLI reads its name and version from `../package.json` when that exists
            // beside the folder it runs in, and else from a path that exists only inside
            // the whole Inspector's package: from inside `node_modules` it finds the
            // folder's own package.json.
            .current_dir(self.modules)
            .env("XDG_CONFIG_HOME", self.project.dir.join(".config"))
            .env_remove("PIPEC_STORE")
            .env_remove("PIPEC_SERVE_STATE_KEY")
            .stdin(Stdio::null())
            .output()
            .expect("node runs the Inspector's CLI")
    }

    /// The JSON the CLI printed for a method that succeeded.
    fn answer(&self, target: &[&str], method_args: &[&str]) -> Value {
        let out = self.run(target, method_args);
        assert!(
            out.status.success(),
            "the Inspector failed on {method_args:?}: {}",
            common::stderr(&out)
        );
        common::json(&common::stdout(&out))
    }
}

/// The Inspector lists the tools (the gate-less pipeline with its inputs), calls it with
/// arguments (its outputs as structured content and as the text block's JSON), gets a
/// prompt with arguments and reads a served resource.
fn inspect(modules: &Path, p: &Project, target: &[&str]) {
    let inspector = Inspector {
        modules,
        project: p,
    };
    let listed = inspector.answer(target, &["--method", "tools/list"]);
    let tools = listed["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["hello", "resume_run"], "{listed}");
    assert_eq!(
        tools[0]["inputSchema"]["properties"],
        json!({ "name": { "type": "string" }, "times": { "type": "integer" } }),
        "{listed}"
    );
    assert_eq!(required(&tools[0]["inputSchema"]), ["name"], "{listed}");

    let called = inspector.answer(
        target,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "hello",
            "--tool-arg",
            "name=Ada",
            "times=3",
        ],
    );
    let outputs = json!({ "greeting": { "name": "Ada", "times": 3 } });
    assert_eq!(called["isError"], false, "{called}");
    assert_eq!(called["structuredContent"], outputs, "{called}");
    assert_eq!(called["content"][0]["type"], "text", "{called}");
    assert_eq!(
        common::json(called["content"][0]["text"].as_str().expect("text")),
        outputs,
        "{called}"
    );

    let prompt = inspector.answer(
        target,
        &[
            "--method",
            "prompts/get",
            "--prompt-name",
            "brief",
            "--prompt-args",
            "topic=caching",
            "tone=terse",
        ],
    );
    let messages = prompt["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 3, "{prompt}");
    assert_eq!(
        messages[0],
        json!({ "role": "user", "content": { "type": "text", "text": "Write a terse brief on caching." } }),
        "{prompt}"
    );
    assert_eq!(messages[1]["content"]["type"], "resource", "{prompt}");
    assert_eq!(
        messages[1]["content"]["resource"]["uri"], "docs://style",
        "{prompt}"
    );
    assert_eq!(messages[2]["role"], "assistant", "{prompt}");

    let read = inspector.answer(
        target,
        &["--method", "resources/read", "--uri", "docs://style"],
    );
    assert_eq!(
        read["contents"],
        json!([{ "uri": "docs://style", "mimeType": "text/markdown", "text": STYLE }]),
        "{read}"
    );
}

#[test]
fn inspector_cli_over_stdio_lists_calls_gets_a_prompt_and_reads() {
    let Some(modules) = modules() else { return };
    let p = project("ts-inspector-stdio");
    let (hello, brief) = (p.dir.join("hello.pipe"), p.dir.join("brief.pipe"));
    let bin = pipec_bin();
    let target = [
        bin.as_str(),
        "serve",
        hello.to_str().expect("utf-8"),
        brief.to_str().expect("utf-8"),
    ];
    inspect(&modules, &p, &target);
}

#[test]
fn inspector_cli_over_http_with_the_bearer_token_lists_calls_gets_a_prompt_and_reads() {
    let Some(modules) = modules() else { return };
    let p = project("ts-inspector-http");
    let (_server, url) = serve(&p, &["hello.pipe", "brief.pipe"]);
    let bearer = format!("Authorization: Bearer {TOKEN}");
    inspect(
        &modules,
        &p,
        &[&url, "--transport", "http", "--header", &bearer],
    );
    // The header is what lets it in.
    let inspector = Inspector {
        modules: &modules,
        project: &p,
    };
    let refused = inspector.run(&[&url, "--transport", "http"], &["--method", "tools/list"]);
    assert!(!refused.status.success(), "{}", common::stdout(&refused));
    assert!(
        common::stderr(&refused).contains("Authorization: Bearer"),
        "{}",
        common::stderr(&refused)
    );
}
