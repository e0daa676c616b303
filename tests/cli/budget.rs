//! `pipec budget` through the real binary: deal_research's worst case against a count
//! made by hand (rendered with Jinja2 and counted with OpenAI's tiktoken, by
//! `scripts/budget_handcount.py`), an input with no bound named as such, a model's
//! declared `context_window` and `max_tokens` taking the table's place, the JSON document's
//! shape, and the exit codes.

use crate::common;

use common::{Project, code, crate_root, json, stderr, stdout};

/// The hand count of deal_research's worst cases (prompt, response format, tools and
/// gpt-4o-mini's 16,384-token reply), from `scripts/budget_handcount.py`.
const HAND_COUNT: &[(&str, u64)] = &[("research", 27_857), ("consume", 66_893)];

fn budget(args: &[&str], dir: impl AsRef<std::path::Path>) -> std::process::Output {
    let mut all = vec!["budget"];
    all.extend_from_slice(args);
    std::process::Command::new(common::pipec_bin())
        .args(&all)
        .current_dir(dir.as_ref())
        .output()
        .expect("pipec runs")
}

fn node<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["node"] == name)
        .unwrap_or_else(|| panic!("no node {name} in {doc:#}"))
}

#[test]
fn deal_research_agrees_with_the_hand_count() {
    let out = budget(&["pipelines/deal_research.pipe", "--json"], crate_root());
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let doc = json(&stdout(&out));
    assert_eq!(doc["budget_version"], 1);
    for (name, hand) in HAND_COUNT {
        let n = node(&doc, name);
        let ours = n["worst_case"].as_u64().expect("worst_case");
        let off = (ours as f64 - *hand as f64).abs() / *hand as f64;
        assert!(
            off < 0.05,
            "{name}: pipec {ours}, by hand {hand} ({:.1}% apart)",
            off * 100.0
        );
        assert_eq!(
            n["tokenizer"],
            serde_json::json!({ "name": "o200k_base", "exact": true })
        );
        assert_eq!(
            n["window"],
            serde_json::json!({ "tokens": 128000, "from": "table" })
        );
        assert_eq!(
            n["reply"],
            serde_json::json!({ "tokens": 16384, "from": "table" })
        );
        // deal_id and digest.deal_id are plain strings: nothing bounds them.
        assert_eq!(n["fits"], "unbounded", "{n:#}");
        assert_eq!(n["bounded"], false);
        assert!(n["output_schema"].as_u64().expect("schema") > 500, "{n:#}");
    }
    let research = node(&doc, "research");
    assert_eq!(research["kind"], "agent");
    assert_eq!(research["tools"]["count"], 2);
    assert!(research["tools"]["tokens"].as_u64().expect("tools") > 50);
    let inputs = research["inputs"].as_array().expect("inputs");
    let deal_id = inputs
        .iter()
        .find(|i| i["name"] == "deal_id")
        .expect("deal_id");
    assert_eq!(deal_id["unbounded"], serde_json::json!(["deal_id"]));
    assert_eq!(deal_id["tokens"], 0);
    let dossier = inputs
        .iter()
        .find(|i| i["name"] == "dossier")
        .expect("dossier");
    assert_eq!(dossier["max_bytes"], 50_000);
    // 50 kB of prose at about 5 bytes a token.
    let tokens = dossier["tokens"].as_u64().expect("tokens");
    assert!((8_000..13_000).contains(&tokens), "{tokens}");
    let consume = node(&doc, "consume");
    assert_eq!(consume["tools"]["count"], 0);
    let history = consume["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .find(|i| i["name"] == "history")
        .expect("history");
    assert!(history["tokens"].as_u64().expect("tokens") > 4 * tokens - 1_000);
    // The declared prices give a cost range, the worst of what is bounded.
    let cost = &consume["cost_per_call"];
    assert_eq!(cost["prices"], "declared");
    assert_eq!(cost["worst_is_bounded"], false);
    let (best, worst) = (
        cost["best"].as_f64().expect("best"),
        cost["worst"].as_f64().expect("worst"),
    );
    assert!(best > 0.0 && best < worst, "{cost}");
    // 0.15 $ per million in, 0.60 out.
    let expected = (consume["prompt"].as_f64().expect("prompt") * 0.15 + 16_384.0 * 0.60) / 1e6;
    assert!((worst - expected).abs() < 1e-9, "{worst} vs {expected}");

    let table = budget(&["pipelines/deal_research.pipe"], crate_root());
    assert_eq!(code(&table), 0);
    let text = stdout(&table);
    assert!(
        text.contains("research (agent): model fast (gpt-4o-mini), tokenizer o200k_base"),
        "{text}"
    );
    assert!(
        text.contains("input deal_id  unbounded  no bound: deal_id"),
        "{text}"
    );
    assert!(text.contains("capped at 200kb"), "{text}");
}

const LOCAL: &str = r##"server crm {
  command = "pipec-demo-crm"
}

model local {
  provider = "openai"
  name = "gpt-4o-mini"
  base_url = "http://localhost:11434/v1"
  context_window = WINDOW
  max_tokens = 500
}

type Note {
  at: string
  text: string
  stars: int
}

type Notes {
  notes: Note[]
}

think summarize(notes: Notes = resource("mcp://crm/notes", max_bytes: 20kb)) -> string {
  model = local
  prompt = #"
    Summarize:
    {% for note in notes.notes %}
    - {{ note.at }} ({{ note.stars }} stars): {{ note.text }}
    {% endfor %}
  "#
}

output summary = summarize
"##;

#[test]
fn a_declared_window_and_max_tokens_take_the_tables_place() {
    let p = Project::new("budget-window");
    p.write("small.pipe", &LOCAL.replace("WINDOW", "2000"));
    p.write("large.pipe", &LOCAL.replace("WINDOW", "64000"));

    let out = budget(&["small.pipe", "--json"], &p.dir);
    assert_eq!(
        code(&out),
        1,
        "a node that does not fit exits 1: {}",
        stdout(&out)
    );
    let doc = json(&stdout(&out));
    let n = node(&doc, "summarize");
    assert_eq!(
        n["window"],
        serde_json::json!({ "tokens": 2000, "from": "declared" })
    );
    assert_eq!(
        n["reply"],
        serde_json::json!({ "tokens": 500, "from": "declared" })
    );
    assert_eq!(n["fits"], "no");
    assert_eq!(n["bounded"], true);
    assert_eq!(
        n["reply_format"], 0,
        "a string reply has no response format"
    );
    assert_eq!(
        n["worst_case"].as_u64(),
        n["prompt"].as_u64().map(|p| p + 500)
    );
    // The same nodes fit a larger window; with every input bounded, the worst cost is known.
    let out = budget(&["large.pipe", "--json"], &p.dir);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let doc = json(&stdout(&out));
    let n = node(&doc, "summarize");
    assert_eq!(n["fits"], "yes");
    assert_eq!(n["cost_per_call"]["prices"], "table");
    assert_eq!(n["cost_per_call"]["worst_is_bounded"], true);

    // `pipec check` warns on the one that does not fit, and only on it.
    let check = p.run(&["check", "small.pipe", "large.pipe"]);
    let text = stderr(&check) + &stdout(&check);
    assert!(text.contains("P0408"), "{text}");
    assert!(text.contains("2,000-token window"), "{text}");
    assert!(!text.contains("64,000"), "{text}");
}

#[test]
fn a_missing_file_is_a_usage_error_and_a_file_with_errors_exits_1() {
    let p = Project::new("budget-errors");
    let out = budget(&["nope.pipe"], &p.dir);
    assert_eq!(code(&out), 2);
    p.write(
        "bad.pipe",
        "think t() -> string {\n  model = nope\n  prompt = \"x\"\n}\n",
    );
    let out = budget(&["bad.pipe"], &p.dir);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("P0101"), "{}", stderr(&out));
}

#[test]
fn the_json_document_has_these_fields() {
    let out = budget(&["pipelines/deal_research.pipe", "--json"], crate_root());
    let doc = json(&stdout(&out));
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&doc), ["budget_version", "file", "nodes"]);
    assert_eq!(
        keys(node(&doc, "research")),
        [
            "bounded",
            "calls",
            "cost_per_call",
            "fits",
            "inputs",
            "kind",
            "model",
            "model_name",
            "node",
            "output_schema",
            "prompt",
            "prose_bytes_per_token",
            "reply",
            "reply_format",
            "template",
            "tokenizer",
            "tools",
            "unsizable",
            "window",
            "worst_case",
        ]
    );
    assert_eq!(
        keys(&node(&doc, "research")["inputs"][0]),
        ["max_bytes", "name", "tokens", "unbounded"]
    );
}
