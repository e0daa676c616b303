//! The `tool` entry of a `serve` block: how `pipec serve` offers the file's pipeline as
//! an MCP tool (its title, its description, the inputs a client mirrors into
//! `Mcp-Param-*` HTTP headers, MCP's `x-mcp-header`, and whether calls run as tasks).

use std::collections::BTreeMap;

use crate::Checker;
use crate::ty::{self, Ty};
use pipec_base::names;
use pipec_base::source::Span;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_plan::ServeTool;
use pipec_syntax::ast::{self, ExprKind, SettingValue};

/// Whether `name` is an HTTP header name's token (RFC 9110 `tchar`s), as `x-mcp-header`
/// needs.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

impl Checker<'_> {
    /// The file's `tool` entries: one a file (a second is P0102).
    pub(crate) fn check_serve_tools(&mut self, root: usize, tools: &[ast::ServeTool]) {
        let file = self.files[root].id;
        let Some((first, rest)) = tools.split_first() else {
            return;
        };
        for extra in rest {
            self.diags.push(
                Diagnostic::new(
                    &r::DUPLICATE_DECLARATION,
                    file,
                    extra.keyword,
                    "the pipeline is one tool: a `serve` block has one `tool` entry",
                )
                .label("second `tool` entry")
                .secondary(file, first.keyword, "first here")
                .help("merge their settings into the first"),
            );
        }
        let s = self.settings(
            file,
            &first.body,
            &["title", "description", "headers", "task"],
            "the `tool` entry",
        );
        let title = self.string_setting(&s, "title").map(|x| x.0);
        let description = self
            .string_setting(&s, "description")
            .map(|x| x.0)
            .or_else(|| first.doc.as_ref().map(|d| d.text.clone()));
        let headers = match s.get("headers").map(|h| &h.value) {
            Some(SettingValue::Expr(e)) => self.serve_tool_headers(file, e),
            Some(SettingValue::Block(b)) => {
                self.wrong_value(
                    file,
                    b.span,
                    "headers",
                    "a record of input names and header names",
                );
                BTreeMap::new()
            }
            None => BTreeMap::new(),
        };
        let task = match self.string_setting(&s, "task") {
            Some((t, _)) if ["optional", "required", "forbidden"].contains(&t.as_str()) => Some(t),
            Some((t, span)) => {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        span,
                        format!("`task` is \"optional\", \"required\" or \"forbidden\", not \"{t}\""),
                    )
                    .label("not a task support")
                    .help("\"optional\": a call becomes a task when the run outlives a moment; \"required\": always; \"forbidden\": never"),
                );
                None
            }
            None => None,
        };
        self.hir.serve_tool = Some(ServeTool {
            title,
            description,
            headers,
            task,
        });
    }

    /// `headers = { input: "Header" }`: each key an input of a string, integer or
    /// boolean type, each value a header name's token, no two alike (case aside).
    fn serve_tool_headers(
        &mut self,
        file: pipec_base::source::FileId,
        e: &ast::Expr,
    ) -> BTreeMap<String, String> {
        let mut headers = BTreeMap::new();
        let ExprKind::Record(entries) = &e.kind else {
            if !matches!(e.kind, ExprKind::Error) {
                self.wrong_value(
                    file,
                    e.span,
                    "headers",
                    "a record of input names and header names",
                );
            }
            return headers;
        };
        let mut seen: Vec<(String, Span)> = Vec::new();
        for entry in entries {
            let input = &entry.key.name;
            let Some(def) = self
                .hir
                .inputs
                .iter()
                .find(|i| i.info.file == file && &i.info.name == input)
            else {
                let near = names::suggestion_among(
                    input,
                    self.hir
                        .inputs
                        .iter()
                        .filter(|i| i.info.file == file)
                        .map(|i| i.info.name.as_str()),
                );
                let mut d = Diagnostic::new(
                    &r::UNKNOWN_NAME,
                    file,
                    entry.key.span,
                    format!("the pipeline has no input `{input}`"),
                )
                .label("not an input");
                d = match near {
                    Some(n) => d.help(format!("did you mean `{}`?", n.name)),
                    None => d.help("a header mirrors one of the pipeline's inputs"),
                };
                self.diags.push(d);
                continue;
            };
            let kind = ty::resolve(&self.hir, &def.ty).strip_optional().clone();
            let primitive = matches!(kind, Ty::String | Ty::Int | Ty::Bool | Ty::Literals(_));
            if !primitive {
                self.diags.push(
                    Diagnostic::new(
                        &r::TYPE_MISMATCH,
                        file,
                        entry.key.span,
                        format!(
                            "the input `{input}` is `{}`, and a header holds a string, an integer or a boolean",
                            ty::display(&self.hir, &def.ty)
                        ),
                    )
                    .label("not a header's value")
                    .help("mirror an input of a string, int or bool type"),
                );
                continue;
            }
            let header = match &entry.value.kind {
                ExprKind::Str(s) if is_token(&s.value) => s.value.clone(),
                _ => {
                    self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            entry.value.span,
                            "a header name is a string of letters, digits and `-` (an HTTP token)",
                        )
                        .label("not a header name")
                        .help(format!("such as \"{}\"", header_like(input))),
                    );
                    continue;
                }
            };
            if let Some((_, first)) = seen.iter().find(|(h, _)| h.eq_ignore_ascii_case(&header)) {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        file,
                        entry.value.span,
                        format!("two inputs are mirrored into `Mcp-Param-{header}`"),
                    )
                    .label("second use of this header")
                    .secondary(file, *first, "first here")
                    .help("give each input a header of its own (names differ in more than case)"),
                );
                continue;
            }
            seen.push((header.clone(), entry.value.span));
            headers.insert(input.clone(), header);
        }
        headers
    }
}

/// `tenant_id` as a header name: `Tenant-Id`.
fn header_like(input: &str) -> String {
    input
        .split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_tokens_and_inputs_suggest_one() {
        assert!(is_token("Tenant-Id"));
        for bad in ["", "Tenant Id", "Tenant:Id", "Région"] {
            assert!(!is_token(bad), "{bad}");
        }
        assert_eq!(header_like("tenant_id"), "Tenant-Id");
    }
}
