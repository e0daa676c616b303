//! `pipec lsp` driven as an editor drives it: the real binary over stdio JSON-RPC.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::lsp_client::{LspClient, file_uri};
use common::{Project, pipec_bin};
use serde_json::{Value, json};

const APP: &str = r#"//! A pipeline for the language server's tests.

server tracker {
  command = "tracker-mcp"
}

model fast {
  provider = "openai"
  name = "gpt-4o-mini"
  api_key = secret("OPENAI_API_KEY")
}

/// A support ticket.
type Ticket {
  /// The ticket's headline.
  title: string
  status: string
}

link "ticket": Ticket = "mcp://tracker/tickets/{id}"

/// Find tickets.
tool search_tickets(query: string) -> Ticket[] from tracker {
  read_only = true
  links = ["ticket"]
}

input query: string = "open"

agent search(query: string = input.query) -> { count: int } {
  model = fast
  prompt = "Find {{ query }}."
  tools = [search_tickets]
  max_steps = 4
}

think classify(
  ticket: Ticket = each(resources(ref: "ticket", max_bytes: 20kb), max: 10),
  count: int = search.count,
) -> { label: string } {
  when = ticket.status == "open"
  model = fast
  prompt = file("classify")
}

output labels = classify
"#;

const PROMPT: &str = "Label {{ ticket.title }} ({{ ticket.status }}); {{ count }} found.\n";

struct Fixture {
    project: Project,
    client: LspClient,
    app: String,
    prompt: String,
}

fn fixture(tag: &str) -> Fixture {
    let project = Project::new(tag);
    project.write("app.pipe", APP);
    project.write("prompts/classify.jinja", PROMPT);
    let client = LspClient::start(&pipec_bin(), &project.dir);
    let app = file_uri(&project.dir.join("app.pipe"));
    let prompt = file_uri(&project.dir.join("prompts/classify.jinja"));
    Fixture {
        project,
        client,
        app,
        prompt,
    }
}

/// The 0-based line and UTF-16 column of the `nth` (0-based) occurrence of `needle`,
/// moved `by` characters into it.
fn pos(text: &str, needle: &str, nth: usize, by: usize) -> (u32, u32) {
    let offset = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` #{nth} not in the text"))
        .0
        + by;
    let before = &text[..offset];
    let line = before.matches('\n').count() as u32;
    let col = before[before.rfind('\n').map_or(0, |i| i + 1)..]
        .encode_utf16()
        .count() as u32;
    (line, col)
}

fn range_of(v: &Value) -> ((u64, u64), (u64, u64)) {
    let r = &v["range"];
    (
        (
            r["start"]["line"].as_u64().unwrap(),
            r["start"]["character"].as_u64().unwrap(),
        ),
        (
            r["end"]["line"].as_u64().unwrap(),
            r["end"]["character"].as_u64().unwrap(),
        ),
    )
}

fn hover_text(c: &mut LspClient, uri: &str, at: (u32, u32)) -> String {
    let r = c.at("textDocument/hover", uri, at.0, at.1, json!({}));
    r["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("no hover at {at:?}: {r}"))
        .to_string()
}

fn labels(r: &Value) -> Vec<String> {
    let items = match &r["result"] {
        Value::Array(a) => a.clone(),
        other => other["items"].as_array().cloned().unwrap_or_default(),
    };
    items
        .iter()
        .map(|i| i["label"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_clean_file_gets_an_empty_list_and_an_error_appears_where_it_is_then_clears() {
    let mut f = fixture("lsp-diag");
    f.client.open(&f.app, APP);
    assert_eq!(f.client.diagnostics(&f.app), Vec::<Value>::new());

    let broken = APP.replace(
        "  model = fast\n  prompt = file",
        "  model = fsat\n  prompt = file",
    );
    f.client.change_all(&f.app, 2, &broken);
    let diags = f.client.diagnostics(&f.app);
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(d["code"], "P0101");
    assert_eq!(d["severity"], 1);
    let (line, col) = pos(&broken, "fsat", 0, 0);
    assert_eq!(
        range_of(d),
        ((line as u64, col as u64), (line as u64, col as u64 + 4))
    );
    assert!(d["message"].as_str().unwrap().contains("fsat"), "{d}");
    // The code links to its explanation, which is what `pipec explain` prints.
    let href = d["codeDescription"]["href"].as_str().unwrap();
    let page = url::Url::parse(href).unwrap().to_file_path().unwrap();
    assert!(
        std::fs::read_to_string(page)
            .unwrap()
            .contains("unknown-name")
    );

    f.client.change_all(&f.app, 3, APP);
    assert_eq!(f.client.diagnostics(&f.app), Vec::<Value>::new());
}

#[test]
fn secondary_labels_are_related_information_and_edits_by_range_apply() {
    let mut f = fixture("lsp-related");
    f.client.open(&f.app, APP);
    assert!(f.client.diagnostics(&f.app).is_empty());
    // Declare `fast` a second time, typed as a range edit at the end of the model.
    let at = pos(APP, "/// A support ticket.", 0, 0);
    f.client.change_range(
        &f.app,
        2,
        at,
        at,
        "model fast {\n  provider = \"openai\"\n  name = \"x\"\n}\n\n",
    );
    let diags = f.client.diagnostics(&f.app);
    let dup = diags
        .iter()
        .find(|d| {
            d["code"] == "P0102"
                || d["message"].as_str().unwrap().contains("twice")
                || d["message"].as_str().unwrap().contains("declared")
        })
        .unwrap_or_else(|| panic!("no duplicate-declaration diagnostic: {diags:?}"));
    let related = dup["relatedInformation"].as_array().unwrap();
    assert_eq!(related[0]["location"]["uri"], f.app);
    let first = pos(APP, "model fast", 0, 6);
    assert_eq!(related[0]["location"]["range"]["start"]["line"], first.0);
}

#[test]
fn hover_shows_types_sources_signatures_docs_annotations_links_and_template_variables() {
    let mut f = fixture("lsp-hover");
    f.client.open(&f.app, APP);
    f.client.diagnostics(&f.app);

    // A parameter: its type and its source.
    let h = hover_text(
        &mut f.client,
        &f.app,
        pos(APP, "ticket: Ticket = each", 0, 1),
    );
    assert!(
        h.contains("ticket: Ticket = each(resources(ref: \"ticket\""),
        "{h}"
    );
    assert!(h.contains("link kind `ticket`"), "{h}");
    // A node: its signature and kind.
    let h = hover_text(
        &mut f.client,
        &f.app,
        pos(APP, "output labels = classify", 0, 17),
    );
    assert!(
        h.contains("think classify(ticket: Ticket, count: int) -> { label: string }"),
        "{h}"
    );
    assert!(h.contains("asks a model"), "{h}");
    // A type: fields with their docs.
    let h = hover_text(&mut f.client, &f.app, pos(APP, "-> Ticket[]", 0, 4));
    assert!(
        h.contains("/// The ticket's headline.") && h.contains("title: string"),
        "{h}"
    );
    assert!(h.contains("A support ticket."), "{h}");
    // A tool: annotations and links.
    let h = hover_text(
        &mut f.client,
        &f.app,
        pos(APP, "tools = [search_tickets]", 0, 10),
    );
    assert!(
        h.contains("read-only") && h.contains("links: `ticket`"),
        "{h}"
    );
    // A link kind: its template.
    let h = hover_text(&mut f.client, &f.app, pos(APP, "ref: \"ticket\"", 0, 7));
    assert!(h.contains("mcp://tracker/tickets/{id}"), "{h}");
    // A field used in a body.
    let h = hover_text(&mut f.client, &f.app, pos(APP, "ticket.status ==", 0, 8));
    assert!(h.contains("Ticket.status: string"), "{h}");

    // A template variable, inside the template.
    f.client.open(&f.prompt, PROMPT);
    let h = hover_text(&mut f.client, &f.prompt, pos(PROMPT, "ticket.title", 0, 8));
    assert!(
        h.contains("ticket.title: string") && h.contains("`classify`"),
        "{h}"
    );
    let h = hover_text(&mut f.client, &f.prompt, pos(PROMPT, "count", 0, 1));
    assert!(h.contains("count: int"), "{h}");

    // A diagnostic's code: its explanation.
    let broken = APP.replace(
        "  model = fast\n  prompt = file",
        "  model = fsat\n  prompt = file",
    );
    f.client.change_all(&f.app, 2, &broken);
    let h = hover_text(&mut f.client, &f.app, pos(&broken, "fsat", 0, 1));
    assert!(h.contains("P0101 unknown-name"), "{h}");
}

fn definition(c: &mut LspClient, uri: &str, at: (u32, u32)) -> (String, u64) {
    let r = c.at("textDocument/definition", uri, at.0, at.1, json!({}));
    let loc = &r["result"];
    assert!(loc.is_object(), "no definition at {at:?}: {r}");
    (
        loc["uri"].as_str().unwrap().to_string(),
        loc["range"]["start"]["line"].as_u64().unwrap(),
    )
}

#[test]
fn definition_goes_to_models_types_fields_links_inputs_nodes_tools_servers_and_prompts() {
    let mut f = fixture("lsp-def");
    f.client.open(&f.app, APP);
    f.client.diagnostics(&f.app);
    let line = |needle: &str| pos(APP, needle, 0, 0).0 as u64;
    let app = f.app.clone();
    let cases = [
        (pos(APP, "model = fast", 0, 9), line("model fast")),
        (pos(APP, "-> Ticket[]", 0, 4), line("type Ticket")),
        (pos(APP, "ticket.status ==", 0, 8), line("  status: string")),
        (pos(APP, "ref: \"ticket\"", 0, 7), line("link \"ticket\"")),
        (
            pos(APP, "links = [\"ticket\"]", 0, 11),
            line("link \"ticket\""),
        ),
        (pos(APP, "input.query", 0, 7), line("input query")),
        (pos(APP, "search.count", 0, 2), line("agent search")),
        (
            pos(APP, "[search_tickets]", 0, 3),
            line("tool search_tickets"),
        ),
        (pos(APP, "from tracker", 0, 6), line("server tracker")),
        (
            pos(APP, "output labels = classify", 0, 18),
            line("think classify"),
        ),
    ];
    for (at, want) in cases {
        assert_eq!(
            definition(&mut f.client, &app, at),
            (app.clone(), want),
            "at {at:?}"
        );
    }
    let (uri, _) = definition(&mut f.client, &app, pos(APP, "file(\"classify\")", 0, 7));
    assert_eq!(uri, f.prompt);
}

#[test]
fn references_and_rename_cover_every_use_and_refuse_clashes_and_bad_names() {
    let mut f = fixture("lsp-rename");
    f.client.open(&f.app, APP);
    f.client.diagnostics(&f.app);
    let at = pos(APP, "type Ticket", 0, 6);
    let r = f.client.at(
        "textDocument/references",
        &f.app,
        at.0,
        at.1,
        json!({ "context": { "includeDeclaration": true } }),
    );
    // The declaration, the link kind's type, the tool's result and the parameter.
    assert_eq!(r["result"].as_array().unwrap().len(), 4, "{r}");

    let at = pos(APP, "model fast", 0, 7);
    let r = f.client.at(
        "textDocument/rename",
        &f.app,
        at.0,
        at.1,
        json!({ "newName": "quick" }),
    );
    let edits = r["result"]["changes"][&f.app].as_array().unwrap().clone();
    assert_eq!(edits.len(), 3, "{r}");
    // Applying them gives a file that checks clean.
    let mut renamed = APP.to_string();
    let mut offsets: Vec<(usize, usize)> = edits
        .iter()
        .map(|e| {
            let ((l, c), (_, c2)) = range_of(e);
            let line_start: usize = APP.split('\n').take(l as usize).map(|s| s.len() + 1).sum();
            (line_start + c as usize, line_start + c2 as usize)
        })
        .collect();
    offsets.sort();
    for (s, e) in offsets.into_iter().rev() {
        renamed.replace_range(s..e, "quick");
    }
    assert_eq!(renamed.matches("quick").count(), 3);
    f.client.change_all(&f.app, 2, &renamed);
    assert_eq!(f.client.diagnostics(&f.app), Vec::<Value>::new());
    f.client.change_all(&f.app, 3, APP);

    // A name something else already has is refused, with where that is.
    let r = f.client.at(
        "textDocument/rename",
        &f.app,
        at.0,
        at.1,
        json!({ "newName": "tracker" }),
    );
    let msg = r["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not refused: {r}"));
    assert!(
        msg.contains("cannot rename to `tracker`") && msg.contains("app.pipe:3:8"),
        "{msg}"
    );
    // So is something that is not a name.
    let r = f.client.at(
        "textDocument/rename",
        &f.app,
        at.0,
        at.1,
        json!({ "newName": "2fast" }),
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a valid name"),
        "{r}"
    );
    // A field clash.
    let at = pos(APP, "  title: string", 0, 3);
    let r = f.client.at(
        "textDocument/rename",
        &f.app,
        at.0,
        at.1,
        json!({ "newName": "status" }),
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already has a field `status`"),
        "{r}"
    );
}

/// Sends `APP` with `from` replaced by `to` (where `§` marks the cursor) and asks for
/// completion at the marker.
fn complete(c: &mut LspClient, uri: &str, version: i64, from: &str, to: &str) -> Vec<String> {
    let marked = APP.replacen(from, to, 1);
    assert_ne!(marked, APP, "`{from}` is not in the fixture");
    let at = pos(&marked, "§", 0, 0);
    c.change_all(uri, version, &marked.replace('§', ""));
    labels(&c.at("textDocument/completion", uri, at.0, at.1, json!({})))
}

#[test]
fn completion_offers_what_fits_where_the_cursor_is() {
    let mut f = fixture("lsp-complete");
    f.client.open(&f.app, APP);
    f.client.diagnostics(&f.app);
    let (c, app) = (&mut f.client, f.app.clone());
    let has = |l: &[String], want: &[&str]| want.iter().all(|w| l.iter().any(|x| x == w));

    // Sources: nodes and inputs.
    let l = complete(
        c,
        &app,
        2,
        "  count: int = search.count,\n",
        "  count: int = search.count,\n  other: int = §\n",
    );
    assert!(has(&l, &["search", "input.query"]), "{l:?}");
    // Fields after a dot, in a source.
    let l = complete(
        c,
        &app,
        3,
        "count: int = search.count,",
        "count: int = search.§",
    );
    assert_eq!(l, ["count"]);
    // Inputs after `input.`.
    let l = complete(
        c,
        &app,
        4,
        "query: string = input.query",
        "query: string = input.§",
    );
    assert_eq!(l, ["query"]);
    // Fields after a dot, in a body.
    let l = complete(c, &app, 5, "when = ticket.status", "when = ticket.§");
    assert!(has(&l, &["title", "status"]), "{l:?}");
    // Link kinds in `ref:` and in `links = [...]`.
    let l = complete(c, &app, 6, "ref: \"ticket\"", "ref: \"§\"");
    assert_eq!(l, ["ticket"]);
    let l = complete(c, &app, 7, "links = [\"ticket\"]", "links = [\"§\"]");
    assert_eq!(l, ["ticket"]);
    // Tools in `tools = [...]`.
    let l = complete(c, &app, 8, "tools = [search_tickets]", "tools = [§]");
    assert!(has(&l, &["search_tickets"]), "{l:?}");
    // Settings the node kind takes: an agent has `max_steps`, a think does not.
    let l = complete(c, &app, 9, "  max_steps = 4\n", "  max_steps = 4\n  ma§\n");
    assert!(has(&l, &["max_steps", "tools"]), "{l:?}");
    let l = complete(c, &app, 10, "  prompt = file", "  re§\n  prompt = file");
    assert!(
        has(&l, &["repairs", "model"]) && !has(&l, &["max_steps"]),
        "{l:?}"
    );
    // Type names.
    let l = complete(
        c,
        &app,
        11,
        "  count: int = search.count,\n",
        "  count: int = search.count,\n  other: Ti§\n",
    );
    assert!(has(&l, &["Ticket", "string"]), "{l:?}");

    // Template variables and their fields, in the template.
    c.change_all(&app, 12, APP);
    let prompt = format!("{PROMPT}{{{{ ");
    c.open(&f.prompt, &prompt);
    let l = labels(&c.at("textDocument/completion", &f.prompt, 1, 3, json!({})));
    assert!(has(&l, &["ticket", "count"]), "{l:?}");
    let at = pos(PROMPT, "ticket.title", 0, 7);
    let l = labels(&c.at("textDocument/completion", &f.prompt, at.0, at.1, json!({})));
    assert!(has(&l, &["title", "status"]), "{l:?}");
}

#[test]
fn a_prompt_template_edited_in_its_own_buffer_gets_diagnostics_on_its_own_uri() {
    let mut f = fixture("lsp-template");
    f.client.open(&f.app, APP);
    assert!(f.client.diagnostics(&f.app).is_empty());
    f.client.open(&f.prompt, PROMPT);
    assert!(f.client.diagnostics(&f.prompt).is_empty());
    let bad = PROMPT.replace("ticket.title", "ticket.titel");
    f.client.change_all(&f.prompt, 2, &bad);
    let diags = f.client.diagnostics(&f.prompt);
    assert_eq!(diags.len(), 1, "{diags:?}");
    let (line, col) = pos(&bad, "titel", 0, 0);
    assert_eq!(
        range_of(&diags[0]).0,
        (line as u64, col as u64),
        "{diags:?}"
    );
    // The file on disk was never changed: the buffer is what was checked.
    assert_eq!(f.project.read("prompts/classify.jinja"), PROMPT);
    f.client.change_all(&f.prompt, 3, PROMPT);
    assert!(f.client.diagnostics(&f.prompt).is_empty());
}

#[test]
fn outline_formatting_and_semantic_tokens() {
    let mut f = fixture("lsp-outline");
    let messy = APP.replace("  read_only = true", "      read_only   =   true");
    f.client.open(&f.app, &messy);
    f.client.diagnostics(&f.app);
    let r = f.client.request(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": f.app } }),
    );
    let names: Vec<&str> = r["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "tracker",
            "fast",
            "Ticket",
            "ticket",
            "search_tickets",
            "query",
            "search",
            "classify",
            "labels"
        ]
    );
    let ticket = &r["result"][2]["children"];
    assert_eq!(ticket[0]["name"], "title");

    let r = f.client.request(
        "textDocument/formatting",
        json!({ "textDocument": { "uri": f.app }, "options": { "tabSize": 2, "insertSpaces": true } }),
    );
    let edits = r["result"].as_array().unwrap();
    assert_eq!(edits.len(), 1);
    assert_eq!(
        edits[0]["newText"],
        pipec::syntax::format_source(&messy).unwrap()
    );
    assert!(
        edits[0]["newText"]
            .as_str()
            .unwrap()
            .contains("\n  read_only = true\n")
    );

    let r = f.client.request(
        "textDocument/semanticTokens/full",
        json!({ "textDocument": { "uri": f.app } }),
    );
    let data = r["result"]["data"].as_array().unwrap();
    assert!(data.len() > 20 && data.len().is_multiple_of(5), "{r}");
    // The first token is the file's `//!` comment (type 8, documentation).
    let first_line = APP.lines().next().unwrap().len();
    assert_eq!(
        &data[..5],
        &[json!(0), json!(0), json!(first_line), json!(8), json!(2)]
    );
}

#[test]
fn bad_input_gets_an_error_response_and_the_server_goes_on() {
    let mut f = fixture("lsp-bad");
    f.client.send_raw(b"Content-Length: 9\r\n\r\n{not json");
    let r = f
        .client
        .wait_for(|m| m.get("error").is_some() && m["id"].is_null());
    assert_eq!(r["error"]["code"], -32700);

    let r = f.client.request("textDocument/notAMethod", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("notAMethod")
    );

    let never = file_uri(&f.project.dir.join("never.pipe"));
    let r = f.client.at("textDocument/hover", &never, 0, 0, json!({}));
    assert_eq!(r["error"]["code"], -32602);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not open"),
        "{r}"
    );

    let r = f
        .client
        .request("textDocument/hover", json!({ "textDocument": 7 }));
    assert_eq!(r["error"]["code"], -32602);

    // Still alive, and still right.
    f.client.open(&f.app, APP);
    assert!(f.client.diagnostics(&f.app).is_empty());
    let h = hover_text(&mut f.client, &f.app, pos(APP, "model = fast", 0, 9));
    assert!(h.contains("model fast"), "{h}");
    assert!(f.client.is_running());
    let status = f.client.shutdown();
    assert!(status.success());
}

/// Neovim's own LSP client on an example pipeline (tests/editors/nvim_lsp.lua). Without
/// `nvim` the test says so and passes, unless PIPEC_REQUIRE_NVIM=1 (as in CI).
#[test]
fn neovim_gets_diagnostics_hover_and_definition() {
    let required = std::env::var("PIPEC_REQUIRE_NVIM").is_ok_and(|v| v == "1");
    let found = std::process::Command::new("nvim")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            !required,
            "PIPEC_REQUIRE_NVIM=1 but `nvim` is not installed"
        );
        eprintln!("skipped: `nvim` is not installed (set PIPEC_REQUIRE_NVIM=1 to fail instead)");
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("tests/editors/nvim_lsp.lua");
    let home = Project::new("lsp-nvim");
    let out = std::process::Command::new("nvim")
        .args(["--headless", "--clean", "-c"])
        .arg(format!("luafile {}", script.display()))
        .env("PIPEC_BIN", pipec_bin())
        .env("PIPE_FILE", root.join("pipelines/triage.pipe"))
        // Neovim's state and logs go to a folder of the test's own.
        .env("XDG_STATE_HOME", home.dir.join("state"))
        .env("XDG_CACHE_HOME", home.dir.join("cache"))
        .env("XDG_DATA_HOME", home.dir.join("data"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "nvim failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("ok: diagnostics, hover and definition")
            || stderr.contains("ok: diagnostics, hover and definition"),
        "{stdout}\n{stderr}"
    );
}

#[test]
fn a_quick_fix_from_a_diagnostic_fixes_it_when_applied() {
    let mut f = fixture("lsp-fix");
    f.client.open(&f.app, APP);
    assert!(f.client.diagnostics(&f.app).is_empty());
    let broken = APP.replace(
        "  model = fast\n  prompt = file",
        "  model = fsat\n  prompt = file",
    );
    f.client.change_all(&f.app, 2, &broken);
    let diags = f.client.diagnostics(&f.app);
    assert_eq!(diags.len(), 1, "{diags:?}");
    let r = f.client.request(
        "textDocument/codeAction",
        json!({
            "textDocument": { "uri": f.app },
            "range": diags[0]["range"],
            "context": { "diagnostics": diags },
        }),
    );
    let actions = r["result"].as_array().unwrap_or_else(|| panic!("{r}"));
    let action = actions
        .iter()
        .find(|a| a["title"].as_str().unwrap_or("").contains("fast"))
        .unwrap_or_else(|| panic!("no fix naming `fast`: {r}"));
    assert_eq!(action["kind"], "quickfix");
    assert_eq!(action["isPreferred"], true);
    assert_eq!(action["diagnostics"][0]["code"], "P0101");
    // Apply its edits (last first) and send the result: the error is gone.
    let edits = action["edit"]["changes"][&f.app].as_array().unwrap();
    let offset = |text: &str, p: &Value| {
        let line = p["line"].as_u64().unwrap() as usize;
        let start: usize = text.split('\n').take(line).map(|l| l.len() + 1).sum();
        start + p["character"].as_u64().unwrap() as usize
    };
    let mut spans: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| {
            (
                offset(&broken, &e["range"]["start"]),
                offset(&broken, &e["range"]["end"]),
                e["newText"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    spans.sort_by_key(|s| s.0);
    let mut fixed = broken.clone();
    for (s, e, t) in spans.into_iter().rev() {
        fixed.replace_range(s..e, &t);
    }
    assert_eq!(fixed, APP);
    f.client.change_all(&f.app, 3, &fixed);
    assert_eq!(f.client.diagnostics(&f.app), Vec::<Value>::new());
    // A range with no diagnostic offers nothing.
    let r = f.client.request(
        "textDocument/codeAction",
        json!({
            "textDocument": { "uri": f.app },
            "range": { "start": { "line": 0, "character": 0 }, "end": { "line": 0, "character": 1 } },
            "context": { "diagnostics": [] },
        }),
    );
    assert_eq!(r["result"], json!([]));
}

/// Shown failing on the old build: opening a file of 10,000 list marks (or a long chain of
/// `!`, or a template with a long chain) overflowed the stack and killed the server, and
/// 5,000 nested parentheses were a misleading syntax error. Now each is a P0005
/// diagnostic, and the server answers as before.
#[test]
fn deep_nesting_is_a_diagnostic_and_the_server_survives() {
    let mut f = fixture("lsp-deep");
    let deep = |open: &str, inner: &str, close: &str, n: usize| {
        format!("{}{inner}{}", open.repeat(n), close.repeat(n))
    };
    for (version, text) in [
        format!("input a: string{}\n", "[]".repeat(10_000)),
        format!("input a: int = {}\n", deep("(", "1", ")", 5_000)),
        format!("input a: bool = {}true\n", "!".repeat(50_000)),
        format!("input a: json = {}\n", deep("[", "", "]", 10_000)),
    ]
    .iter()
    .enumerate()
    {
        if version == 0 {
            f.client.open(&f.app, text);
        } else {
            f.client.change_all(&f.app, version as i64 + 1, text);
        }
        let d = f.client.diagnostics(&f.app);
        let codes: Vec<&str> = d.iter().filter_map(|d| d["code"].as_str()).collect();
        assert_eq!(codes, ["P0005"], "{d:?}");
    }
    let template = format!("{{{{ ticket.title{} }}}}\n", ".a".repeat(20_000));
    f.client.open(&f.prompt, &template);
    f.client.change_all(&f.app, 10, APP);
    let on_template = f.client.diagnostics(&f.prompt);
    assert!(
        on_template.iter().any(|d| d["code"] == "P0005"),
        "{on_template:?}"
    );

    // Still alive, and still right.
    f.client.change_all(&f.prompt, 2, PROMPT);
    f.client.forget_diagnostics();
    f.client.change_all(&f.app, 11, APP);
    assert!(f.client.diagnostics(&f.app).is_empty());
    let h = hover_text(&mut f.client, &f.app, pos(APP, "model = fast", 0, 9));
    assert!(h.contains("model fast"), "{h}");
    assert!(f.client.is_running());
    assert!(f.client.shutdown().success());
}

const TESTED: &str = r#"model writer {
  provider = "scripted"
  replies = "replies.json"
}

input name: string

think greet(name: string = input.name) -> { text: string } {
  model = writer
  prompt = "Greet {{ name }}."
}

output greeting = greet

test greets_ada {
  input = { name: "Ada" }
  expect = [output.greeting.text == "Hello Ada"]
}

test greets_grace {
  input = { name: "Ada" }
  expect = [output.greeting.text == "Hello Grace"]
}
"#;

#[test]
fn code_lenses_run_a_files_tests_and_show_how_they_went() {
    let project = Project::new("lsp-tests");
    project.write("hello.pipe", TESTED);
    project.write(
        "replies.json",
        r#"{ "greet": [{ "template": { "text": "Hello {{ name }}" } }] }"#,
    );
    let mut c = LspClient::start_with(
        &pipec_bin(),
        &project.dir,
        json!({ "workspace": { "codeLens": { "refreshSupport": true } } }),
    );
    let uri = file_uri(&project.dir.join("hello.pipe"));
    c.open(&uri, TESTED);
    c.diagnostics(&uri);
    let lenses = |c: &mut LspClient| {
        let r = c.request(
            "textDocument/codeLens",
            json!({ "textDocument": { "uri": uri } }),
        );
        r["result"].as_array().unwrap().clone()
    };
    let before = lenses(&mut c);
    let titles: Vec<&str> = before
        .iter()
        .map(|l| l["command"]["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        ["▶ Run test", "▶ Run the 2 tests of this file", "▶ Run test"],
        "{before:#?}"
    );
    // Each lens sits on its test's name and runs it by name.
    assert_eq!(before[2]["range"]["start"]["line"], 19);
    assert_eq!(before[2]["command"]["command"], "pipec.runTest");
    assert_eq!(
        before[2]["command"]["arguments"],
        json!([uri, "greets_grace"])
    );

    // The failing test, by the command its lens carries.
    let r = c.request(
        "workspace/executeCommand",
        json!({ "command": "pipec.runTest", "arguments": [uri, "greets_grace"] }),
    );
    assert!(r.get("error").is_none(), "{r}");
    let shown = c.wait_for(|m| m["method"] == "window/showMessage");
    let message = shown["params"]["message"].as_str().unwrap();
    assert_eq!(shown["params"]["type"], 1, "an error: {shown}");
    assert!(
        message.starts_with("test `greets_grace`: greets_grace failed"),
        "{message}"
    );
    assert!(
        message.contains("hello.pipe:22: output.greeting.text == \"Hello Grace\""),
        "{message}"
    );
    let log = c.wait_for(|m| m["method"] == "window/logMessage");
    assert!(
        log["params"]["message"]
            .as_str()
            .unwrap()
            .contains("-Hello Grace")
            || log["params"]["message"]
                .as_str()
                .unwrap()
                .contains("the left side is \"Hello Ada\""),
        "{log}"
    );
    let refresh = c.wait_for(|m| m["method"] == "workspace/codeLens/refresh");
    assert!(refresh.get("id").is_some(), "a request: {refresh}");
    let after = lenses(&mut c);
    let grace = after[2]["command"]["title"].as_str().unwrap();
    assert!(grace.starts_with("✗ failed: "), "{grace}");
    assert_eq!(
        after[0]["command"]["title"], "▶ Run test",
        "greets_ada did not run"
    );

    // All of the file's tests.
    c.request(
        "workspace/executeCommand",
        json!({ "command": "pipec.runTest", "arguments": [uri] }),
    );
    let shown = c.wait_for(|m| m["method"] == "window/showMessage");
    assert!(
        shown["params"]["message"]
            .as_str()
            .unwrap()
            .starts_with("2 tests of hello.pipe: greets_grace failed"),
        "{shown}"
    );
    let after = lenses(&mut c);
    let ada = after[0]["command"]["title"].as_str().unwrap();
    assert!(ada.starts_with("✓ passed ("), "{ada}");

    // A command the server does not have is an error, and it goes on.
    let r = c.request(
        "workspace/executeCommand",
        json!({ "command": "pipec.nothing" }),
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pipec.runTest"),
        "{r}"
    );
    assert!(c.shutdown().success());
}
