//! Rendering prompt and message templates (minijinja, strict: an undefined value is an
//! error). `role("system")` markers split a prompt into chat messages; without markers a
//! prompt is one user message. `context.rs` makes the values a template sees.

mod context;

use std::collections::BTreeMap;

use minijinja::{Environment, UndefinedBehavior};
use serde_json::Value;

use crate::llm::{Message, Role};
use pipec_plan::Template;

pub use context::template_context;

/// The text `role(...)` leaves in the output, to split on afterwards.
const MARK: char = '\u{1e}';
/// The text `resource(...)` leaves around a URI in a served prompt.
const RESOURCE: char = '\u{1f}';

/// Why a template did not render: which template, and minijinja's message.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderError {
    pub template: String,
    pub message: String,
    /// The value that was undefined, as the template writes it (`ack.note`).
    pub undefined: Option<String>,
    /// The line of the template where rendering stopped.
    pub line: Option<usize>,
}

impl RenderError {
    /// What to write to fix it, when the error says: a value the template uses that the
    /// node was not given.
    pub fn help(&self) -> Option<String> {
        let name = self.undefined.as_deref()?;
        Some(format!(
            "`{name}` is not in what the node was given (`pipec show THREAD --json` shows its inputs): test it with `{{% if {name} is defined %}}`, or give a default with `{{{{ {name} | default(\"\") }}}}`"
        ))
    }
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.undefined, self.line) {
            (Some(name), Some(line)) => write!(
                f,
                "`{name}` is undefined (template `{}`, line {line})",
                self.template
            ),
            (Some(name), None) => write!(f, "`{name}` is undefined (template `{}`)", self.template),
            _ => write!(f, "template `{}`: {}", self.template, self.message),
        }
    }
}

impl std::error::Error for RenderError {}

fn environment(template: &Template, served: bool) -> Result<Environment<'static>, RenderError> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    for (name, source) in &template.sources {
        env.add_template_owned(name.clone(), source.clone())
            .map_err(|e| RenderError {
                template: name.clone(),
                message: e.to_string(),
                undefined: None,
                line: e.line(),
            })?;
    }
    env.add_function("role", |name: String| -> Result<String, minijinja::Error> {
        match name.as_str() {
            "system" | "user" | "assistant" => Ok(format!("{MARK}{name}{MARK}")),
            other => Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                format!("unknown role `{other}`"),
            )),
        }
    });
    if served {
        env.add_function(
            "resource",
            |uri: String| -> Result<String, minijinja::Error> {
                if uri.contains([MARK, RESOURCE]) {
                    return Err(minijinja::Error::new(
                        minijinja::ErrorKind::InvalidOperation,
                        "a resource URI with control characters",
                    ));
                }
                Ok(format!("{RESOURCE}{uri}{RESOURCE}"))
            },
        );
    }
    Ok(env)
}

/// Renders a template to text.
pub fn render_text(
    template: &Template,
    context: &BTreeMap<String, Value>,
) -> Result<String, RenderError> {
    render(template, context, false)
}

fn render(
    template: &Template,
    context: &BTreeMap<String, Value>,
    served: bool,
) -> Result<String, RenderError> {
    let env = environment(template, served)?;
    let failed = |e: minijinja::Error| {
        let mut message = e.to_string();
        if let Some(detail) = e.detail()
            && !message.contains(detail)
        {
            message = format!("{message}: {detail}");
        }
        let name = e.name().unwrap_or(&template.entry).to_string();
        let undefined = (e.kind() == minijinja::ErrorKind::UndefinedError)
            .then(|| undefined_expression(&e, template.sources.get(&name)))
            .flatten();
        RenderError {
            template: name,
            message,
            undefined,
            line: e.line(),
        }
    };
    let tmpl = env.get_template(&template.entry).map_err(failed)?;
    tmpl.render(minijinja::value::Serde(context))
        .map_err(failed)
}

/// The expression whose value was undefined: as minijinja names it (`` `ack.note` is
/// undefined ``), or else the template's text where rendering stopped.
fn undefined_expression(e: &minijinja::Error, source: Option<&String>) -> Option<String> {
    let named = e
        .detail()
        .and_then(|d| d.strip_prefix('`'))
        .and_then(|d| d.split_once("` is undefined"))
        .map(|(name, _)| name.trim().to_string())
        .filter(|name| !name.is_empty() && !name.contains("(...)"));
    named.or_else(|| {
        let text = source?.get(e.range()?)?.trim();
        (!text.is_empty() && text.len() <= 80 && !text.contains('\n')).then(|| text.to_string())
    })
}

/// Renders a prompt into chat messages.
pub fn render_messages(
    template: &Template,
    context: &BTreeMap<String, Value>,
) -> Result<Vec<Message>, RenderError> {
    let text = render_text(template, context)?;
    Ok(split_roles(&text))
}

/// One message of a served prompt: its text, or the URI of a served resource placed there.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptPart {
    Text(String),
    Resource(String),
}

/// Renders a prompt `pipec serve` offers into its messages, in order: `(assistant, part)`.
/// Roles split it as a node's prompt is split (a system role is the user's: MCP prompts
/// have none), and each `resource(URI)` is a message of its own.
pub fn render_served_prompt(
    template: &Template,
    arguments: &BTreeMap<String, Value>,
) -> Result<Vec<(bool, PromptPart)>, RenderError> {
    let text = render(template, arguments, true)?;
    let mut out = Vec::new();
    for message in split_roles(&text) {
        let assistant = message.role == Role::Assistant;
        for (i, piece) in message.content.split(RESOURCE).enumerate() {
            if i % 2 == 1 {
                out.push((assistant, PromptPart::Resource(piece.to_string())));
            } else if !piece.trim().is_empty() {
                out.push((assistant, PromptPart::Text(piece.trim().to_string())));
            }
        }
    }
    Ok(out)
}

fn split_roles(text: &str) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut role = Role::User;
    let mut parts = text.split(MARK);
    let first = parts.next().unwrap_or("");
    push(&mut messages, role, first);
    while let (Some(name), Some(body)) = (parts.next(), parts.next()) {
        role = match name {
            "system" => Role::System,
            "assistant" => Role::Assistant,
            _ => Role::User,
        };
        push(&mut messages, role, body);
    }
    if messages.is_empty() {
        messages.push(Message::text(Role::User, ""));
    }
    messages
}

fn push(messages: &mut Vec<Message>, role: Role, body: &str) {
    let body = body.trim();
    if !body.is_empty() {
        messages.push(Message::text(role, body));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tpl(src: &str) -> Template {
        Template {
            entry: "t".into(),
            sources: [("t".to_string(), src.to_string())].into_iter().collect(),
        }
    }

    #[test]
    fn roles_split_messages() {
        let ctx: BTreeMap<String, Value> =
            [("x".to_string(), json!({ "a": 1 }))].into_iter().collect();
        let m = render_messages(
            &tpl("{{ role(\"system\") }}Be brief.\n{{ role(\"user\") }}Value {{ x.a }}"),
            &ctx,
        )
        .unwrap_or_default();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].role, Role::System);
        assert_eq!(m[1].content, "Value 1");
        let plain = render_messages(&tpl("Just {{ x.a }}"), &ctx).unwrap_or_default();
        assert_eq!(plain, vec![Message::text(Role::User, "Just 1")]);
    }

    #[test]
    fn a_served_prompt_is_messages_of_text_and_resources_in_order() {
        let ctx: BTreeMap<String, Value> = [("topic".to_string(), json!("tides"))]
            .into_iter()
            .collect();
        let parts = render_served_prompt(
            &tpl("Explain {{ topic }}.\n{{ resource(\"docs://tides.png\") }}\n{{ role(\"assistant\") }}Gladly."),
            &ctx,
        )
        .expect("renders");
        assert_eq!(
            parts,
            vec![
                (false, PromptPart::Text("Explain tides.".into())),
                (false, PromptPart::Resource("docs://tides.png".into())),
                (true, PromptPart::Text("Gladly.".into())),
            ]
        );
        // A node's prompt has no `resource`.
        assert!(render_text(&tpl("{{ resource(\"x\") }}"), &ctx).is_err());
    }

    #[test]
    fn undefined_values_are_errors_that_name_the_value_and_the_fix() {
        assert!(render_text(&tpl("{{ missing }}"), &BTreeMap::new()).is_err());
        let ctx: BTreeMap<String, Value> = [("ack".to_string(), json!({ "ok": true }))]
            .into_iter()
            .collect();
        let e = render_text(&tpl("Hi.\n{% if ack.note %}x{% endif %}"), &ctx)
            .err()
            .unwrap_or_else(|| panic!("renders"));
        assert_eq!(e.undefined.as_deref(), Some("ack.note"));
        assert_eq!(
            e.to_string(),
            "`ack.note` is undefined (template `t`, line 2)"
        );
        let help = e.help().unwrap_or_default();
        assert!(help.contains("{% if ack.note is defined %}"), "{help}");
        assert!(help.contains("{{ ack.note | default(\"\") }}"), "{help}");
        // Where minijinja cannot name it, the template's text at the error is named.
        let e = render_text(&tpl("{{ none.x }}"), &ctx)
            .err()
            .unwrap_or_else(|| panic!("renders"));
        assert_eq!(e.undefined.as_deref(), Some("none.x"));
    }
}
