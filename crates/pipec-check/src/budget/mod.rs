//! Context budgets: the worst-case prompt of every `think`, `agent` and `act` node, in
//! the tokens of its model's tokenizer, held against the model's context window.
//!
//! A prompt is its template's text, plus the largest each value it prints can be, plus
//! what is sent with it: the output's schema as the response format, the tools' schemas
//! for a tool loop, and the reply the model may write (`max_tokens`), which shares the
//! window. The checker owns this because it knows every value's type and source:
//! `sizes.rs` reads the bounds, `walk.rs` walks the template, `tokens.rs` counts.
//!
//! A value bounded by bytes only (a resource's `max_bytes`) is counted as prose at the
//! tokenizer's rate for it: what a byte cap allows, as text. A value nothing bounds is
//! reported as unbounded by its path, never given a number.

mod sizes;
mod tokens;
mod walk;

pub use tokens::{Encoding, TokenizerChoice, tokenizer_for};

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use pipec_base::source::{FileId, Span};
use pipec_plan::prices::{Prices, Tokens, table_prices};

use pipec_plan::windows::table_window;
use pipec_syntax::ast::NodeKind;

use crate::hir::{Body, Hir, ModelDef, NodeDef, NodeId, SourceKind};
use crate::ty::{self, Ty};
use tokens::Counter;

/// The tokens the chat format adds: each message's role and separators, and the start
/// of the reply (OpenAI's published count for its chat models).
const TOKENS_PER_MESSAGE: u64 = 3;
const TOKENS_TO_START_THE_REPLY: u64 = 3;

/// Where a figure came from: the `.pipe` file, or pipec's table of well-known models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Declared,
    Table,
}

/// The worst case of one input: the tokens of what its bounds allow, and the paths it
/// prints that nothing bounds.
#[derive(Clone, Debug)]
pub struct InputBudget {
    pub name: String,
    /// Where the parameter's source is written.
    pub span: Span,
    /// The tokens its bounded parts can print at most.
    pub tokens: u64,
    /// The byte cap of its source, when it has one.
    pub cap_bytes: Option<u64>,
    /// Paths it prints with no bound (`deal_id`, `history.emails`).
    pub unbounded: Vec<String>,
}

/// Whether a node's worst case fits its model's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fits {
    /// Every input is bounded and the worst case fits.
    Yes,
    /// The bounded part alone is over the window.
    No,
    /// The bounded part fits, but some input has no bound.
    Unbounded,
    /// The model's window is unknown.
    Unknown,
}

impl Fits {
    pub fn as_str(self) -> &'static str {
        match self {
            Fits::Yes => "yes",
            Fits::No => "no",
            Fits::Unbounded => "unbounded",
            Fits::Unknown => "unknown",
        }
    }
}

/// The worst case of one model node.
#[derive(Clone, Debug)]
pub struct NodeBudget {
    pub node: NodeId,
    pub name: String,
    pub kind: NodeKind,
    pub file: FileId,
    pub name_span: Span,
    /// The model as the file names it, and as its endpoint does.
    pub model: String,
    pub model_name: Option<String>,
    pub tokenizer: TokenizerChoice,
    /// The template's own text and fixed-width values, one item of each loop, and the
    /// chat format's tokens.
    pub template: u64,
    /// `output_schema` as the template prints it (every time it does).
    pub output_schema: u64,
    /// The output's schema sent as the response format (structured outputs only).
    pub reply_format: u64,
    /// The tools' schemas, sent with every call of a tool loop.
    pub tools: u64,
    pub tool_count: usize,
    pub inputs: Vec<InputBudget>,
    /// Parts of the template pipec cannot size (a macro's output).
    pub opaque: Vec<String>,
    /// The reply's share of the window: `max_tokens`, or the model's largest reply.
    pub reply: Option<(u64, Origin)>,
    pub window: Option<(u64, Origin)>,
    pub prices: Option<(Prices, Origin)>,
    /// The prompt with every input empty: the template alone.
    pub best_prompt: u64,
    /// Model calls per run of the node when it is an `each` node: its `max:` (None for
    /// none); 1 otherwise. A tool loop calls once per turn, up to `max_steps`.
    pub calls: Option<u64>,
    /// How many bytes of prose make a token with this tokenizer: the rate at which a
    /// byte cap is counted.
    pub prose_bytes_per_token: f64,
}

impl NodeBudget {
    /// The worst-case prompt of what is bounded.
    pub fn prompt(&self) -> u64 {
        // Saturating: a cap of exabytes is a figure to show, not an overflow.
        [
            self.template,
            self.output_schema,
            self.reply_format,
            self.tools,
        ]
        .into_iter()
        .chain(self.inputs.iter().map(|i| i.tokens))
        .fold(0, u64::saturating_add)
    }

    /// The prompt and the reply it leaves room for.
    pub fn worst(&self) -> u64 {
        self.prompt().saturating_add(self.reply.map_or(0, |r| r.0))
    }

    /// Whether every input and every part of the template has a bound.
    pub fn is_bounded(&self) -> bool {
        self.opaque.is_empty() && self.inputs.iter().all(|i| i.unbounded.is_empty())
    }

    pub fn fits(&self) -> Fits {
        match self.window {
            None => Fits::Unknown,
            Some((w, _)) if self.worst() > w => Fits::No,
            Some(_) if !self.is_bounded() => Fits::Unbounded,
            Some(_) => Fits::Yes,
        }
    }

    /// What one call costs, in US dollars: the template alone and no reply, and the
    /// worst case with the whole reply (of what is bounded: more when
    /// [`NodeBudget::is_bounded`] is false).
    pub fn cost_per_call(&self) -> Option<(f64, f64)> {
        let (prices, _) = self.prices?;
        let best = prices.cost(Tokens {
            input: self.best_prompt,
            ..Tokens::default()
        });
        let worst = prices.cost(Tokens {
            input: self.prompt(),
            output: self.reply.map_or(0, |r| r.0),
            cached_input: 0,
        });
        Some((best, worst))
    }
}

/// The budgets of every model node of a checked program, in the order they are declared.
pub fn budgets(hir: &Hir) -> Vec<NodeBudget> {
    let shared = Shared::new(hir);
    (0..hir.nodes.len() as NodeId)
        .filter_map(|id| node_budget(hir, &shared, id, Precision::Tokens))
        .collect()
}

/// An output schema's JSON, whether it is sent as the response format, and the counter's
/// encoding.
type SchemaKey = (String, bool, Option<Encoding>);

/// A node's tools and the counter's encoding.
type ToolsKey = (Vec<crate::hir::ToolId>, Option<Encoding>);

/// What the budgets of one program's nodes share: its type definitions as the plan holds
/// them ([`crate::lower::plan_defs`]), and what an output type's schema and a set of
/// tools cost, counted once for each tokenizer rather than once a node (nodes of a
/// program mostly answer a few types and share tools).
pub(crate) struct Shared {
    defs: BTreeMap<String, serde_json::Value>,
    /// The tokens of a schema as the prompt shows it, and as the response format.
    schemas: RefCell<HashMap<SchemaKey, (u64, u64)>>,
    /// The tokens of a tool loop's listing.
    tools: RefCell<HashMap<ToolsKey, u64>>,
}

impl Shared {
    pub(crate) fn new(hir: &Hir) -> Shared {
        Shared {
            defs: crate::lower::plan_defs(hir),
            schemas: RefCell::default(),
            tools: RefCell::default(),
        }
    }

    /// The tokens of an output schema in the prompt, and as the response format when the
    /// reply is `structured`.
    fn schema_tokens(
        &self,
        output: &serde_json::Value,
        structured: bool,
        counter: &Counter,
    ) -> (u64, u64) {
        let key = (output.to_string(), structured, counter.encoding());
        if let Some(known) = self.schemas.borrow().get(&key) {
            return *known;
        }
        let shown = counter.count(&pipec_schema::shown::output_schema_text(&self.defs, output));
        let format = if structured {
            let strict = pipec_schema::shown::full_schema(
                &self.defs,
                output,
                pipec_schema::shown::Mode::Strict,
            );
            counter.count(&serde_json::to_string(&strict).unwrap_or_default())
        } else {
            0
        };
        self.schemas.borrow_mut().insert(key, (shown, format));
        (shown, format)
    }

    /// The tokens of the tools a tool loop lists, as a chat request lists them.
    fn tools_tokens(&self, hir: &Hir, tools: &[crate::hir::ToolId], counter: &Counter) -> u64 {
        if tools.is_empty() {
            return 0;
        }
        let key = (tools.to_vec(), counter.encoding());
        if let Some(known) = self.tools.borrow().get(&key) {
            return *known;
        }
        let listed: Vec<serde_json::Value> = tools
            .iter()
            .map(|t| {
                let tool = crate::lower::lower_tool(hir, hir.tool(*t));
                pipec_schema::shown::function_tool(
                    &tool.name,
                    tool.description.as_deref(),
                    &pipec_schema::shown::shown_schema(&self.defs, &tool.input_schema),
                )
            })
            .collect();
        let tokens = counter.count(&serde_json::Value::Array(listed).to_string());
        self.tools.borrow_mut().insert(key, tokens);
        tokens
    }
}

/// How a budget is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Precision {
    /// With the model's tokenizer.
    Tokens,
    /// A byte for a token: an upper bound, with no tokenizer to load (a token is at
    /// least a byte), for a quick "surely fits".
    Bytes,
}

/// The budget of the node `id`, if it calls a model with a prompt; `shared` is what the
/// program's nodes share ([`Shared::new`], made once for all of them).
pub(crate) fn node_budget(
    hir: &Hir,
    shared: &Shared,
    id: NodeId,
    precision: Precision,
) -> Option<NodeBudget> {
    let node = hir.node(id);
    let Body::Model {
        model,
        prompt,
        tools,
        max_tokens,
        ..
    } = &node.body
    else {
        return None;
    };
    let m = hir.models.get(*model as usize)?;
    if prompt.entry.is_empty() {
        return None;
    }
    let choice = tokenizer_for(m.model_name.as_deref());
    let counter = match precision {
        Precision::Tokens => Counter::new(choice),
        Precision::Bytes => Counter::upper_bound(),
    };
    let caps: Vec<Option<u64>> = node.params.iter().map(sizes::byte_cap).collect();
    let shape = walk::walk(hir, &node.params, caps.clone(), prompt, &counter);

    let output = crate::schema::type_schema(hir, &node.output);
    let structured = !matches!(ty::resolve(hir, &node.output), Ty::String);
    let (schema_tokens, reply_format) = shared.schema_tokens(&output, structured, &counter);
    let tools_tokens = shared.tools_tokens(hir, tools, &counter);

    let per_byte = counter.prose_per_byte();
    let framing = TOKENS_PER_MESSAGE
        .saturating_mul(shape.roles.max(1))
        .saturating_add(TOKENS_TO_START_THE_REPLY);
    let inputs = node
        .params
        .iter()
        .enumerate()
        .filter(|(i, _)| shape.pools.contains_key(i) || shape.unbounded.contains_key(i))
        .map(|(i, p)| {
            let tokens = match (shape.pools.get(&i), caps[i]) {
                (Some(pool), Some(cap)) => pool_tokens(pool, cap, per_byte),
                _ => 0,
            };
            InputBudget {
                name: p.name.clone(),
                span: p.source.span,
                tokens,
                cap_bytes: caps[i],
                unbounded: shape
                    .unbounded
                    .get(&i)
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_default(),
            }
        })
        .collect();
    let opaque = shape
        .unbounded
        .get(&usize::MAX)
        .map(|s| s.iter().cloned().collect())
        .unwrap_or_default();
    let reply = reply_reserve(m, *max_tokens);
    let window = m.context_window.map(|w| (w, Origin::Declared)).or_else(|| {
        known_model(m)
            .and_then(table_window)
            .map(|w| (w.context, Origin::Table))
    });
    let prices = m.prices.map(|p| (p, Origin::Declared)).or_else(|| {
        m.model_name
            .as_deref()
            .and_then(table_prices)
            .map(|p| (p, Origin::Table))
    });
    Some(NodeBudget {
        node: id,
        name: node.info.name.clone(),
        kind: node.kind,
        file: node.info.file,
        name_span: node.info.name_span,
        model: m.info.display.clone(),
        model_name: m.model_name.clone(),
        tokenizer: choice,
        template: (shape.fixed_tokens.ceil() as u64).saturating_add(framing),
        output_schema: (shape.schema_prints * schema_tokens as f64).ceil() as u64,
        reply_format,
        tools: tools_tokens,
        tool_count: tools.len(),
        inputs,
        opaque,
        reply,
        window,
        prices,
        best_prompt: [
            counter.count(&shape.bare),
            framing,
            reply_format,
            tools_tokens,
            (shape.schema_prints.min(1.0) * schema_tokens as f64) as u64,
        ]
        .into_iter()
        .fold(0, u64::saturating_add),
        calls: calls(node),
        prose_bytes_per_token: 1.0 / per_byte.max(f64::MIN_POSITIVE),
    })
}

/// The most tokens a capped parameter can print: its cap spent where it makes the most,
/// as printed text (at the prose rate, times how often a byte is reprinted) or as more
/// items of one of its loops (each printing the loop's own text).
fn pool_tokens(pool: &walk::Pool, cap: u64, per_byte: f64) -> u64 {
    let as_text = per_byte * pool.reprints();
    let as_items = pool
        .loops
        .iter()
        .map(|(per_item, bytes)| per_item / (*bytes).max(1) as f64)
        .fold(0.0, f64::max);
    (cap as f64 * as_text.max(as_items)).ceil() as u64
}

/// The reply's share of the window: the node's `max_tokens`, the model's, or (for a
/// model pipec knows) the largest reply it can write, which a request without
/// `max_tokens` may get.
fn reply_reserve(m: &ModelDef, node_max: Option<i64>) -> Option<(u64, Origin)> {
    node_max
        .or(m.max_tokens)
        .filter(|n| *n > 0)
        .map(|n| (n as u64, Origin::Declared))
        .or_else(|| {
            known_model(m)
                .and_then(table_window)
                .map(|w| (w.max_output, Origin::Table))
        })
}

/// The name to look a model up by in pipec's tables: an endpoint's model. A client's
/// model is whatever the client picks, so its name is only a hint.
fn known_model(m: &ModelDef) -> Option<&str> {
    (m.provider == "openai").then_some(m.model_name.as_deref())?
}

/// Model calls per run of the node, as far as an `each` bounds them.
fn calls(node: &NodeDef) -> Option<u64> {
    match node
        .each
        .and_then(|i| node.params.get(i))
        .map(|p| &p.source.kind)
    {
        Some(SourceKind::Each { max, .. }) => *max,
        _ => Some(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget_of(src: &str, node: &str) -> NodeBudget {
        let loader = pipec_base::source::MemoryLoader::new().with("t.pipe", src);
        let checked = crate::check(&loader, std::path::Path::new("t.pipe"), "t.pipe");
        assert!(
            checked.diagnostics.iter().all(|d| !d.is_error()),
            "{:?}",
            checked.diagnostics
        );
        budgets(&checked.hir)
            .into_iter()
            .find(|b| b.name == node)
            .expect("the node has a budget")
    }

    fn pipe(params: &str, prompt: &str) -> String {
        format!(
            r##"server s {{
  command = "x"
}}
model m {{
  provider = "openai"
  name = "gpt-4o"
  max_tokens = 100
}}
type Item {{ n: int, text: string, title: string }}
type Doc {{ items: Item[] }}
input who: string
think t({params}) -> string {{
  model = m
  prompt = #"{prompt}"#
}}
output o = t
"##
        )
    }

    const CAPPED: &str = r#"doc: Doc = resource("mcp://s/doc", max_bytes: 10kb)"#;

    #[test]
    fn a_cap_printed_twice_counts_twice_and_once_per_disjoint_field() {
        let once = budget_of(
            &pipe(CAPPED, "{% for i in doc.items %}{{ i.text }}{% endfor %}"),
            "t",
        );
        let twice = budget_of(
            &pipe(
                CAPPED,
                "{% for i in doc.items %}{{ i.text }} {{ i.text }}{% endfor %}",
            ),
            "t",
        );
        let disjoint = budget_of(
            &pipe(
                CAPPED,
                "{% for i in doc.items %}{{ i.text }} {{ i.title }}{% endfor %}",
            ),
            "t",
        );
        let doc = |b: &NodeBudget| {
            b.inputs
                .iter()
                .find(|i| i.name == "doc")
                .map_or(0, |i| i.tokens)
        };
        let one = doc(&once);
        // 10 kB of prose: about 2,000 tokens.
        assert!((1_500..2_500).contains(&one), "{one}");
        assert!(doc(&twice).abs_diff(2 * one) <= 1, "{}", doc(&twice));
        // Two fields share the cap: together they hold no more than the whole.
        assert_eq!(doc(&disjoint), one);
        assert!(once.is_bounded());
        assert_eq!(once.fits(), Fits::Yes);
        assert_eq!(once.reply, Some((100, Origin::Declared)));
        assert_eq!(once.window, Some((128_000, Origin::Table)));
    }

    /// A program of think nodes on two tokenizers, answering a record or text, printing
    /// their schema, with and without tools.
    fn nodes(which: &[&str]) -> String {
        let all = [
            ("a", "m4o", "Doc", ""),
            ("b", "m4o", "string", ""),
            ("c", "m4", "Doc", ""),
            ("d", "m4o", "Doc", "  tools = [lookup]\n"),
            ("e", "m4o", "Doc", ""),
            ("f", "m4o", "Doc", "  tools = [lookup, fetch]\n"),
        ];
        let mut src = String::from(
            r##"server s {
  command = "x"
}
tool lookup(key: string) -> Item from s {
  read_only = true
}
tool fetch(url: string, max_bytes: int) -> string from s {
  read_only = true
}
model m4o {
  provider = "openai"
  name = "gpt-4o"
  max_tokens = 100
}
model m4 {
  provider = "openai"
  name = "gpt-4"
  max_tokens = 100
}
type Item { n: int, text: string, title: string }
/// 文書の要約と項目の一覧、そしてそれぞれの項目の本文と見出し
type Doc { items: Item[], summary: string }
"##,
        );
        for (name, model, out, tools) in all.iter().filter(|n| which.contains(&n.0)) {
            let kind = if tools.is_empty() { "think" } else { "agent" };
            src.push_str(&format!(
                "{kind} {name}() -> {out} {{\n  model = {model}\n{tools}  prompt = #\"Answer as {{{{ output_schema }}}}\"#\n}}\noutput {name} = {name}\n"
            ));
        }
        src
    }

    #[test]
    fn schemas_and_tools_counted_once_for_all_nodes_count_as_each_node_alone() {
        let every = ["a", "b", "c", "d", "e", "f"];
        let together = |name: &str| budget_of(&nodes(&every), name);
        for name in every {
            let alone = budget_of(&nodes(&[name]), name);
            let shared = together(name);
            assert_eq!(
                (shared.output_schema, shared.reply_format, shared.tools),
                (alone.output_schema, alone.reply_format, alone.tools),
                "{name}"
            );
        }
        let (a, b, c, d) = (together("a"), together("b"), together("c"), together("d"));
        // What tells them apart: the type, the tokenizer, the tools.
        assert!(a.output_schema > 0 && a.reply_format > 0);
        assert_eq!(b.reply_format, 0);
        assert_ne!(a.output_schema, b.output_schema);
        assert_ne!(a.output_schema, c.output_schema);
        assert_eq!((a.tools, d.tools > 0), (0, true));
        assert!(together("f").tools > d.tools);
    }

    #[test]
    fn many_small_items_can_outweigh_prose() {
        // Each item is at least 29 bytes of JSON and prints a
        // line of 30 words: spending the cap on items makes more tokens than on text.
        let words = "and so on ".repeat(10);
        let b = budget_of(
            &pipe(
                CAPPED,
                &format!("{{% for i in doc.items %}}{words}\n{{% endfor %}}"),
            ),
            "t",
        );
        let doc = b.inputs.iter().find(|i| i.name == "doc").expect("doc");
        // 10,000 / 29 items (`{"n":0,"text":"","title":""}` and a comma), 30 tokens each.
        assert!(doc.tokens > 10_000, "{}", doc.tokens);
    }

    #[test]
    fn what_nothing_bounds_is_named_and_the_larger_branch_counts() {
        let b = budget_of(
            &pipe(
                "who: string = input.who",
                "{% if who %}{{ who }} and a few more words here{% else %}short{% endif %}",
            ),
            "t",
        );
        assert_eq!(b.inputs.len(), 1);
        assert_eq!(b.inputs[0].unbounded, ["who"]);
        assert!(!b.is_bounded());
        assert_eq!(b.fits(), Fits::Unbounded);
        let short = budget_of(
            &pipe(
                "who: string = input.who",
                "{% if who %}{{ who }}{% else %}short{% endif %}",
            ),
            "t",
        );
        assert!(b.template > short.template);
    }

    #[test]
    fn numbers_print_at_their_widest_and_a_slice_bounds_a_loop() {
        let b = budget_of(
            &pipe(
                "who: Item[] = input.who",
                "{% for i in who[-3:] %}{{ i.n }};{% endfor %}",
            )
            .replace("input who: string", "input who: Item[]"),
            "t",
        );
        // Three items of `-9223372036854775808;`, and nothing unbounded.
        assert!(b.is_bounded(), "{:?}", b.inputs);
        let one = budget_of(
            &pipe(
                "who: Item[] = input.who",
                "{% for i in who[-1:] %}{{ i.n }};{% endfor %}",
            )
            .replace("input who: string", "input who: Item[]"),
            "t",
        );
        assert!(b.template > one.template);
        let unsliced = budget_of(
            &pipe(
                "who: Item[] = input.who",
                "{% for i in who %}{{ i.n }};{% endfor %}",
            )
            .replace("input who: string", "input who: Item[]"),
            "t",
        );
        assert_eq!(unsliced.inputs[0].unbounded, ["who"]);
    }
}
