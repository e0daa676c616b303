//! Tokens, time and cost of model calls: each `model_turn` is priced when it happens (the
//! model's declared prices, else the built-in table's for the model that answered) and
//! summed per node, per attempt and per thread by `pipec show` and `pipec runs`, in text
//! and `--json`. The model is a real HTTP server speaking the OpenAI API with canned
//! replies whose usage names cached input tokens.

use crate::common;

use std::sync::Arc;

use common::chat_server::{ChatServer, Response};
use common::show_shape::parse_runs;
use common::*;
use serde_json::{Value, json};

/// A completion of `content` that used 1,000 input tokens (400 of them cached) and 100
/// output tokens, answered by `model`.
fn completion(content: &str, model: &str) -> Value {
    json!({
        "id": "x", "object": "chat.completion", "model": model,
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 1000, "completion_tokens": 100,
                   "prompt_tokens_details": { "cached_tokens": 400 } }
    })
}

/// Answers each request as the model it names.
fn server() -> ChatServer {
    ChatServer::answering(Arc::new(|request, _| {
        let model = request["model"].as_str().unwrap_or("").to_string();
        Response::ok(&completion("fine", &model))
    }))
}

fn model(name: &str, id: &str, url: &str, prices: &str) -> String {
    format!(
        "model {name} {{\n  provider = \"openai\"\n  name = \"{id}\"\n  base_url = \"{url}\"\n  api_key = secret(\"TEST_KEY\")\n{prices}}}\n\n"
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn each_call_is_priced_by_its_declaration_or_the_table_or_left_unpriced() {
    let chat = server();
    let url = &chat.url;
    let p = Project::new("usage-prices");
    let mut source = String::new();
    // The table knows a dated gpt-4o-mini: $0.15 in, $0.075 cached, $0.60 out.
    source.push_str(&model("table", "gpt-4o-mini-2024-07-18", url, ""));
    // Declared prices win; no cached price means cached tokens cost as input.
    source.push_str(&model(
        "declared",
        "gpt-4o-mini",
        url,
        "  prices {\n    input = 2\n    output = 8\n  }\n",
    ));
    // Neither: the call is counted, its cost unknown.
    source.push_str(&model("house", "house-llm", url, ""));
    source.push_str(
        r#"input topic: string

think a(topic: string = input.topic) -> string {
  model = table
  prompt = "A on {{ topic }}."
}

think b(topic: string = input.topic) -> string {
  model = declared
  prompt = "B on {{ topic }}."
}

think c(topic: string = input.topic) -> string {
  model = house
  prompt = "C on {{ topic }}."
}

output a = a
output b = b
output c = c
"#,
    );
    p.write("priced.pipe", &source);
    let out = p
        .cmd(&[
            "run",
            "priced.pipe",
            "--input",
            "topic=x",
            "--concurrency",
            "1",
        ])
        .env("TEST_KEY", "sk-test-123456")
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let listed = p.run(&["runs", "--json"]);
    let rows = parse_runs(&stdout(&listed));
    let thread = rows[0].id.clone();
    let view = p.show_json(&thread);
    let node = |name: &str| -> Value {
        view["nodes"]
            .as_array()
            .and_then(|n| n.iter().find(|n| n["node"] == name))
            .map(|n| n["usage"].clone())
            .unwrap_or(Value::Null)
    };
    let (a, b, c) = (node("a"), node("b"), node("c"));
    for u in [&a, &b, &c] {
        assert_eq!(u["model_calls"], 1, "{view}");
        assert_eq!(u["tokens_in"], 1000, "{u}");
        assert_eq!(u["tokens_out"], 100, "{u}");
        assert_eq!(u["tokens_cached"], 400, "{u}");
    }
    // 600 fresh at 0.15, 400 cached at 0.075, 100 out at 0.60, per million.
    let a_cost = (600.0 * 0.15 + 400.0 * 0.075 + 100.0 * 0.60) / 1e6;
    assert!(close(a["cost_usd"].as_f64().unwrap_or(-1.0), a_cost), "{a}");
    assert_eq!(a["unpriced_calls"], 0);
    let b_cost = (1000.0 * 2.0 + 100.0 * 8.0) / 1e6;
    assert!(close(b["cost_usd"].as_f64().unwrap_or(-1.0), b_cost), "{b}");
    assert_eq!(c["cost_usd"], 0.0, "{c}");
    assert_eq!(c["unpriced_calls"], 1, "{c}");
    // The thread's sums, and its one attempt's.
    let total = &view["usage"];
    assert_eq!(total["model_calls"], 3, "{total}");
    assert_eq!(total["tokens_cached"], 1200);
    assert_eq!(total["unpriced_calls"], 1);
    assert!(close(
        total["cost_usd"].as_f64().unwrap_or(-1.0),
        a_cost + b_cost
    ));
    assert_eq!(view["usage_by_attempt"][0]["attempt"], 1, "{view}");
    assert_eq!(view["usage_by_attempt"][0]["model_calls"], 3);
    // `runs` has the same sums, and a cost column that says some calls are unpriced.
    assert_eq!(rows[0].usage.model_calls, 3);
    assert!(close(rows[0].usage.cost_usd, a_cost + b_cost));
    let text = stdout(&p.run(&["runs"]));
    assert!(text.lines().next().unwrap_or("").contains("COST"), "{text}");
    let row = text.lines().find(|l| l.contains(&thread)).expect("the row");
    assert!(row.contains("$0.0030+"), "{text}");
    // `show` gives each node's line and the totals.
    let shown = stdout(&p.run(&["show", &thread]));
    let a_line = shown
        .lines()
        .find(|l| l.trim_start().starts_with("a "))
        .expect("a");
    assert!(
        a_line.contains("1 model call, 1,000 in (400 cached) / 100 out tokens"),
        "{shown}"
    );
    assert!(a_line.contains("$0.0002"), "{shown}");
    let c_line = shown
        .lines()
        .find(|l| l.trim_start().starts_with("c "))
        .expect("c");
    assert!(c_line.contains("cost unknown"), "{shown}");
    assert!(
        shown.contains("usage     3 model calls, 3,000 in (1,200 cached) / 300 out tokens"),
        "{shown}"
    );
    assert!(shown.contains("$0.0030 + 1 unpriced call"), "{shown}");
    // The key reached the server and nothing of it is shown.
    assert!(!shown.contains("sk-test-123456"));
}

#[test]
fn a_resumed_thread_sums_each_attempt_apart() {
    let chat = server();
    let p = Project::new("usage-attempts");
    let mut source = model(
        "llm",
        "gpt-4o-mini",
        &chat.url,
        "  prices {\n    input = 1\n    output = 1\n  }\n",
    );
    source.push_str(
        r#"input topic: string

think first(topic: string = input.topic) -> string {
  model = llm
  prompt = "First on {{ topic }}."
}

gate ok(draft: string = first) -> bool {
  message = "Go on?"
}

think second(go: bool = ok, topic: string = input.topic) -> string {
  model = llm
  prompt = "Second on {{ topic }}."
}

output second = second
"#,
    );
    p.write("paused.pipe", &source);
    let out = p
        .cmd(&["run", "paused.pipe", "--input", "topic=x"])
        .env("TEST_KEY", "sk-test-123456")
        .output()
        .expect("run");
    let thread = thread_of(&stdout(&out)).unwrap_or_else(|| panic!("paused: {}", stderr(&out)));
    let out = p
        .cmd(&["resume", &thread, "--answer", "ok=true"])
        .env("TEST_KEY", "sk-test-123456")
        .output()
        .expect("resume");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let view = p.show_json(&thread);
    let attempts = view["usage_by_attempt"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{view}");
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[1]["attempt"], 2);
    for a in attempts {
        assert_eq!(a["model_calls"], 1, "{a}");
        // 1,000 in and 100 out at $1 a million each.
        assert!(
            close(a["cost_usd"].as_f64().unwrap_or(-1.0), 1100.0 / 1e6),
            "{a}"
        );
    }
    assert!(close(
        view["usage"]["cost_usd"].as_f64().unwrap_or(-1.0),
        2200.0 / 1e6
    ));
}

/// Traced, a model request carries its turn's W3C `traceparent`: the thread's trace, a
/// span of its own; untraced (no `OTEL_*` variables), it carries none.
#[test]
fn a_traced_model_request_carries_its_turns_traceparent_and_an_untraced_one_none() {
    let chat = server();
    let p = Project::new("usage-traceparent");
    let mut source = model("llm", "gpt-4o-mini", &chat.url, "");
    source.push_str(
        "input topic: string\n\nthink one(topic: string = input.topic) -> string {\n  model = llm\n  prompt = \"One on {{ topic }}.\"\n}\n\noutput one = one\n",
    );
    p.write("one.pipe", &source);
    let run = |traced: bool| {
        let mut c = p.cmd(&["run", "one.pipe", "--input", "topic=x"]);
        c.env("TEST_KEY", "sk-test-123456");
        if traced {
            // A backend that is not there: the spans are lost, the context is still sent.
            c.env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
                .env("OTEL_METRICS_EXPORTER", "none");
        } else {
            c.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
                .env_remove("OTEL_TRACES_EXPORTER");
        }
        let out = c.output().expect("run");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    };
    run(false);
    run(true);
    let parents = chat.traceparents();
    assert_eq!(parents.len(), 2, "{parents:?}");
    assert_eq!(parents[0], None, "an untraced run sends no trace context");
    let traced = parents[1].clone().expect("a traceparent");
    let rows = parse_runs(&stdout(&p.run(&["runs", "--json"])));
    let thread = &rows[0].id;
    let trace = format!(
        "{:032x}",
        pipec::store::ids::decode(thread).expect("a ULID")
    );
    let parts: Vec<&str> = traced.split('-').collect();
    assert_eq!(parts.len(), 4, "{traced}");
    assert_eq!(
        (parts[0], parts[1], parts[3]),
        ("00", trace.as_str(), "01"),
        "{traced}"
    );
    assert_eq!(parts[2].len(), 16);
    assert_ne!(parts[2], "0000000000000000");
}
