//! Synthetic pipelines of any size, for benchmarks and stress tests.
//!
//! The generated file uses the common features (records, a server, a model, tools, link
//! kinds, resources by URI and by link, `think`, `agent`, `return`, `exec`, `when`, joins,
//! `each`, gates and inline prompts) and checks clean, so a benchmark measures the work
//! of a real check, not of error reporting.

use std::fmt::Write as _;

/// A pipeline with about `nodes` nodes.
pub fn pipeline(nodes: usize) -> String {
    let mut s = String::with_capacity(nodes * 420);
    s.push_str(
        r#"//! A synthetic pipeline.

server crm {
  command = "pipec-demo-crm"
}

model fast {
  provider = "openai"
  name = "gpt-4o-mini"
  api_key = secret("OPENAI_API_KEY")
}

type Item {
  id: string
  title: string
  score: int
  tags: string[]
}

type Page {
  key: string
  items: Item[]
  note: string?
}

/// A short summary.
type Summary {
  key: string
  headline: string
  ok: bool
}

link "page": Page = "mcp://crm/pages/{key}"

/// Look a page up.
tool lookup(key: string) -> Page from crm {
  read_only = true
  links = ["page"]
}

input key: string

"#,
    );
    let mut prev = String::new();
    for i in 0..nodes {
        let name = format!("n{i}");
        match i % 5 {
            0 if i > 0 => {
                let _ = write!(
                    s,
                    r#"node {name}(
  key: string = input.key,
  prev: Summary? = {prev},
  page: Page = resource("mcp://crm/pages/{{key}}/{i}"),
) -> Summary {{
  return = {{ key: key, headline: page.key, ok: len(page.items) > 0 && (prev.ok ?? true) }}
}}

"#
                );
            }
            0 => {
                let _ = write!(
                    s,
                    r#"node {name}(
  key: string = input.key,
  page: Page = resource("mcp://crm/pages/{{key}}/{i}"),
) -> Summary {{
  return = {{ key: key, headline: page.key, ok: len(page.items) > 0 }}
}}

"#
                );
            }
            1 => {
                let _ = write!(
                    s,
                    r##"/// Summarise step {i}.
think {name}(
  prev: Summary = {prev},
  page: Page = resource("mcp://crm/pages/{{prev.key}}", max_bytes: 20kb),
) -> Summary {{
  model = fast
  prompt = #"
    Summarise {{{{ page.key }}}} after {{{{ prev.headline }}}}.
    {{% for item in page.items %}}- {{{{ item.title }}}}
    {{% endfor %}}
  "#
  repairs = 1
}}

"##
                );
            }
            2 => {
                let _ = write!(
                    s,
                    r#"agent {name}(
  prev: Summary = {prev},
  key: string = input.key,
) -> Summary {{
  model = fast
  prompt = "Look up {{{{ key }}}} and summarise it after {{{{ prev.headline }}}}."
  tools = [lookup]
  max_steps = 4
}}

"#
                );
            }
            3 => {
                let _ = write!(
                    s,
                    r#"node {name}(
  prev: Summary = {prev},
  page: Page = resource(ref: "page", from: {prev}, max_bytes: 50kb),
) -> Summary {{
  when = prev.ok && page.note != null
  return = {{ key: prev.key, headline: page.note ?? "none", ok: prev.ok }}
}}

"#
                );
            }
            _ => {
                let _ = write!(
                    s,
                    r#"node {name}(
  a: Summary? = {prev},
  b: Summary = n{back},
) -> Summary {{
  exec = ["./score.sh", "--fast"]
  timeout = 30s
  retries = 2
}}

"#,
                    back = i - 4
                );
            }
        }
        prev = name;
    }
    let _ = writeln!(s, "output last: Summary? = {prev}");
    s
}
