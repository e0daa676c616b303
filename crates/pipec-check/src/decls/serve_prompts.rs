//! The prompts of a `serve` block: `prompt name(args) { text = ... }`. Arguments are
//! text, as MCP prompt arguments are (`string`, an enum or a union of string literals,
//! optional with `?` or a default); the template sees them, `role("user")` and
//! `role("assistant")`, and `resource(URI)`.

use crate::Checker;
use crate::hir::*;
use crate::prompt::TemplateUse;
use crate::ty::{self, Ty};
use pipec_base::source::FileId;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_plan::{PromptArgument, ServePrompt};
use pipec_syntax::ast::{self, ExprKind, SettingValue};

impl Checker<'_> {
    pub(crate) fn check_serve_prompt(&mut self, root: usize, decl: &ast::ServePrompt) {
        let file = self.files[root].id;
        let name = &decl.name.name;
        if let Some((_, first_file, first)) = self
            .hir
            .serve_prompts
            .iter()
            .find(|(p, ..)| &p.name == name)
        {
            self.diags.push(
                Diagnostic::new(
                    &r::DUPLICATE_DECLARATION,
                    file,
                    decl.name.span,
                    format!("the prompt `{name}` is served twice"),
                )
                .label("second prompt of this name")
                .secondary(*first_file, *first, "first served here")
                .help("rename one of them: clients get a prompt by its name"),
            );
            return;
        }
        let what = "a served prompt";
        let s = self.settings(file, &decl.body, &["title", "description", "text"], what);
        let mut params = Vec::new();
        let mut arguments = Vec::new();
        for (i, p) in decl.params.params.iter().enumerate() {
            let name = &p.name.name;
            if let Some(first) = decl.params.params[..i]
                .iter()
                .find(|q| &q.name.name == name)
            {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        file,
                        p.name.span,
                        format!("the prompt argument `{name}` is declared twice"),
                    )
                    .label("second argument of this name")
                    .secondary(file, first.name.span, "first declared here")
                    .help("rename or remove one of them"),
                );
                continue;
            }
            // The template's functions: an argument of that name would hide one.
            if matches!(name.as_str(), "role" | "resource") {
                self.diags.push(
                    Diagnostic::new(
                        &r::RESERVED_NAME,
                        file,
                        p.name.span,
                        format!("`{name}` cannot name a prompt argument: it is a function of the prompt's template"),
                    )
                    .label("reserved")
                    .help("rename the argument"),
                );
                continue;
            }
            if p.wire_name.is_some() {
                self.diags.push(
                    Diagnostic::new(
                        &r::SYNTAX_ERROR,
                        file,
                        p.span,
                        "`as \"name\"` renames tool parameters, not prompt arguments",
                    )
                    .label("not allowed on a prompt"),
                );
            }
            let declared = self.resolve_type(root, &p.ty);
            let argument = self.prompt_argument(file, p, &declared);
            params.push(ParamDef {
                name: p.name.name.clone(),
                span: p.span,
                name_span: p.name.span,
                // What the template sees: the text, or none for an optional one not given
                // (an argument reported as wrong: anything, so nothing more is said of it).
                ty: match &argument {
                    Some(a) if a.required || a.default.is_some() => Ty::String,
                    Some(_) => Ty::String.optional(),
                    None => Ty::Error,
                },
                doc: p.doc.as_ref().map(|d| d.text.clone()),
                source: Source {
                    kind: SourceKind::Error,
                    span: p.span,
                    ty: Ty::Error,
                },
                used: false,
                binds_resource: false,
                binds_secret: false,
            });
            arguments.extend(argument);
        }
        let template = match s.get("text").map(|setting| &setting.value) {
            Some(SettingValue::Expr(e)) => {
                let e = e.clone();
                self.template(file, name, &mut params, &e, TemplateUse::Served, &Ty::Error)
            }
            Some(SettingValue::Block(b)) => {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        b.span,
                        "`text` takes a template: a string, or `file(\"dir/name\")`",
                    )
                    .label("not a template"),
                );
                None
            }
            None => {
                self.missing_setting(
                    file,
                    decl.name.span,
                    what,
                    "text",
                    "give its messages as a template: `text = \"Review {{ code }}\"`, or `text = file(\"review\")`",
                );
                None
            }
        };
        for p in params.iter().filter(|p| !p.used) {
            self.diags.push(
                Diagnostic::new(
                    &r::UNUSED_PARAMETER,
                    file,
                    p.name_span,
                    format!(
                        "the argument `{}` of the prompt `{name}` is never used",
                        p.name
                    ),
                )
                .label("unused")
                .help("use it in the prompt's `text`, or remove it"),
            );
        }
        let description = self
            .string_setting(&s, "description")
            .map(|x| x.0)
            .or_else(|| decl.doc.as_ref().map(|d| d.text.clone()));
        let title = self.string_setting(&s, "title").map(|x| x.0);
        let Some(template) = template else {
            return;
        };
        self.hir.serve_prompts.push((
            ServePrompt {
                name: name.clone(),
                title,
                description,
                arguments,
                template: crate::lower::template(&template),
            },
            file,
            decl.name.span,
        ));
    }

    /// An argument of a served prompt: text, maybe one of a set of values, with its
    /// default; `None` (reported) when its type is not text or its default not a string.
    fn prompt_argument(
        &mut self,
        file: FileId,
        p: &ast::Param,
        declared: &Ty,
    ) -> Option<PromptArgument> {
        let optional = declared.is_optional();
        let inner = declared.strip_optional();
        let values = match ty::resolve(&self.hir, inner) {
            Ty::String => Vec::new(),
            Ty::Error => return None,
            other => match ty::as_literals(&self.hir, other) {
                Some(values) => values.to_vec(),
                None => {
                    self.diags.push(
                        Diagnostic::new(
                            &r::TYPE_MISMATCH,
                            file,
                            p.ty.span,
                            format!(
                                "a prompt argument is text, and `{}` is {}",
                                p.name.name,
                                ty::display(&self.hir, declared)
                            ),
                        )
                        .label("not text")
                        .help("declare it `string`, an enum, or a union of string literals (`?` when it may be left out)"),
                    );
                    return None;
                }
            },
        };
        let default = match &p.value {
            None => None,
            Some(ast::Expr {
                kind: ExprKind::Str(lit),
                ..
            }) if values.is_empty() || values.contains(&lit.value) => Some(lit.value.clone()),
            Some(e) => {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        e.span,
                        format!(
                            "the default of the prompt argument `{}` is a string{}",
                            p.name.name,
                            if values.is_empty() {
                                String::new()
                            } else {
                                format!(", one of {}", values.join(", "))
                            }
                        ),
                    )
                    .label("not a default it can have")
                    .help("write `= \"...\"`, or leave the default out"),
                );
                return None;
            }
        };
        Some(PromptArgument {
            name: p.name.name.clone(),
            description: p.doc.as_ref().map(|d| d.text.clone()),
            required: !optional && default.is_none(),
            values,
            default,
        })
    }
}
