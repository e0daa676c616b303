//! Embedding pipec in a program: compile a pipeline, register a host function (typed,
//! checked against the node that calls it) and a model, start a thread, answer its gate
//! and resume it.
//!
//! `cargo run --example embed`

use pipec::llm::{Model, ModelFuture, ModelReply, ModelRequest, Usage};
use pipec::runtime::{Outcome, Runner};
use pipec::store::RedbStore;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

const PIPELINE: &str = r#"
model writer {
  provider = "openai"
  name = "gpt-4o-mini"
}

input text: string

type Stats {
  words: int
  longest: string
}

node stats(text: string = input.text) -> Stats {
  host = "text_stats"
}

think title(stats: Stats = stats, text: string = input.text) -> string {
  model = writer
  prompt = "Give a title for a {{ stats.words }}-word text whose longest word is {{ stats.longest }}: {{ text }}"
}

gate publish(title: string = title) -> bool {
  message = "Publish \"{{ title }}\"?"
}

output title = title
output published = publish
"#;

/// The host function's input: the node's parameters.
#[derive(Deserialize, JsonSchema)]
struct StatsIn {
    text: String,
}

/// Its output: the node's declared output type.
#[derive(Serialize, JsonSchema)]
struct StatsOut {
    words: i64,
    longest: String,
}

/// A model of our own: any type that implements `Model`.
struct Shouting;

impl Model for Shouting {
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            let prompt = request
                .messages
                .last()
                .map(|m| m.content.clone())
                .unwrap_or_default();
            let title = prompt.rsplit(": ").next().unwrap_or("").to_uppercase();
            Ok(ModelReply {
                content: title,
                tool_calls: vec![],
                usage: Usage::default(),
                model: "shouting".into(),
            })
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let plan = pipec::compile_str("embed.pipe", PIPELINE)?;
    let path = std::env::temp_dir().join(format!("pipec-embed-{}.redb", std::process::id()));
    let store = RedbStore::open(&path)?;
    let runner = Runner::new(plan, store)
        .host_fn("text_stats", |input: StatsIn| async move {
            let longest = input
                .text
                .split_whitespace()
                .max_by_key(|w| w.len())
                .unwrap_or("")
                .to_string();
            Ok(StatsOut {
                words: input.text.split_whitespace().count() as i64,
                longest,
            })
        })?
        .model("writer", Shouting);

    let outcome = runner
        .start(json!({ "text": "durable pipelines pause for people" }))
        .await?;
    let Outcome::Paused { thread, gates } = outcome else {
        return Err(format!("expected a pause, got {outcome:?}").into());
    };
    println!("paused at `{}`: {}", gates[0].name, gates[0].message);

    match runner
        .resume(&thread, vec![("publish".into(), json!(true))])
        .await?
    {
        Outcome::Completed { outputs, .. } => {
            println!("{}", serde_json::to_string_pretty(&outputs)?)
        }
        other => return Err(format!("expected completion, got {other:?}").into()),
    }
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(pipec::store::lock::locks_dir(&path));
    Ok(())
}
