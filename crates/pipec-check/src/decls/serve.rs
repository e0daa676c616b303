//! The `serve` block: the resources and templates a project serves, their contents and
//! metadata, and the served URIs that overlap (P0815). Its prompts: `serve_prompts.rs`;
//! the pipeline as a tool: `serve_tool.rs`.

use super::join_rel;
use crate::Checker;
use crate::hir::*;
use crate::paths::PathKind;
use crate::settings::literal_json;
use pipec_base::source::{FileId, Span};
use pipec_base::uri::{self, UriTemplate};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_plan::served;
use pipec_syntax::ast::{self, ExprKind, ItemKind, SettingValue};

impl Checker<'_> {
    pub(crate) fn check_serve(&mut self, root: usize) {
        let file = self.files[root].id;
        let items: Vec<ast::Item> = self.files[root]
            .ast
            .items
            .iter()
            .filter(|i| matches!(i.kind, ItemKind::Serve(_)))
            .cloned()
            .collect();
        let mut seen_block: Option<Span> = None;
        for item in &items {
            let ItemKind::Serve(serve) = &item.kind else {
                continue;
            };
            if let Some(first) = seen_block {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        file,
                        item.span,
                        "a file has one `serve` block",
                    )
                    .label("second block")
                    .secondary(file, first, "first block"),
                );
                continue;
            }
            seen_block = Some(item.span);
            for entry in &serve.entries {
                self.check_serve_entry(root, entry);
            }
            for prompt in &serve.prompts {
                self.check_serve_prompt(root, prompt);
            }
            self.check_serve_tools(root, &serve.tools);
            self.check_serve_overlaps(file, &serve.entries);
        }
    }

    /// P0815 for a served template that answers the URI of a fixed resource (which is
    /// served instead) or a URI an earlier template answers (which serves it).
    fn check_serve_overlaps(&mut self, file: FileId, entries: &[ast::ServeEntry]) {
        let (resources, templates): (Vec<&ast::ServeEntry>, Vec<&ast::ServeEntry>) = entries
            .iter()
            .partition(|e| e.kind != ast::ServeEntryKind::Template);
        let parsed: Vec<(&ast::ServeEntry, UriTemplate)> = templates
            .into_iter()
            .filter_map(|e| uri::parse(&e.uri.value).ok().map(|t| (e, t)))
            .collect();
        let uris: Vec<&str> = resources.iter().map(|r| r.uri.value.as_str()).collect();
        let refs: Vec<&UriTemplate> = parsed.iter().map(|(_, t)| t).collect();
        for overlap in uri::served_overlaps(&uris, &refs) {
            let d = match overlap {
                uri::ServedOverlap::Resource { template, resource } => {
                    let (t, r) = (&parsed[template].0.uri, &resources[resource].uri);
                    Diagnostic::new(&r::OVERLAPPING_SERVED_URIS, file, t.span, format!("the template `{}` matches the URI of the resource `{}`, which is served instead", t.value, r.value))
                        .label("matches a fixed resource's URI")
                        .secondary(file, r.span, "this resource")
                }
                uri::ServedOverlap::Templates {
                    earlier,
                    later,
                    uri,
                } => {
                    let (e, l) = (&parsed[earlier].0.uri, &parsed[later].0.uri);
                    Diagnostic::new(&r::OVERLAPPING_SERVED_URIS, file, l.span, format!("the templates `{}` and `{}` both match `{uri}`; the first one written serves it", e.value, l.value))
                        .label("overlaps an earlier template")
                        .secondary(file, e.span, "which serves the URIs both match")
                }
            };
            self.diags.push(
                d.help("give the entries different literal text, so every URI has one entry"),
            );
        }
    }

    fn check_serve_entry(&mut self, root: usize, entry: &ast::ServeEntry) {
        let file = self.files[root].id;
        let template = entry.kind == ast::ServeEntryKind::Template;
        let allowed: &[&str] = if template {
            &[
                "name",
                "title",
                "description",
                "mime_type",
                "root",
                "backend",
                "render",
                "annotations",
                "icons",
            ]
        } else {
            &[
                "name",
                "title",
                "description",
                "mime_type",
                "text",
                "blob",
                "annotations",
                "icons",
            ]
        };
        let what = if template {
            "a served template"
        } else {
            "a served resource"
        };
        let s = self.settings(file, &entry.body, allowed, what);
        let tpl = self.uri_template_at(file, &entry.uri.value, entry.uri.span, Some(&entry.uri));
        if !template && tpl.as_ref().is_some_and(|t| t.has_expressions()) {
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_URI_TEMPLATE,
                    file,
                    entry.uri.span,
                    "a served resource has a fixed URI",
                )
                .label("holds a template expression")
                .help("declare it as `template \"...\" { ... }`"),
            );
        }
        let name = self.string_setting(&s, "name").map(|x| x.0);
        if name.is_none() && !s.has("name") {
            self.missing_setting(
                file,
                entry.uri.span,
                what,
                "name",
                "give it a name clients show: `name = \"...\"`",
            );
        }
        let text = self.string_setting(&s, "text").map(|x| x.0);
        let root_dir = self.string_setting(&s, "root").map(|(p, span)| {
            let dir = join_rel(&self.base_dir(root), &p);
            self.check_path_exists(file, span, &dir, PathKind::Folder, "the served folder");
            dir
        });
        let backend = self.string_setting(&s, "backend").map(|x| x.0);
        let render = self.string_setting(&s, "render").map(|x| x.0);
        if template {
            let sources = [s.has("root"), s.has("backend"), s.has("render")]
                .iter()
                .filter(|x| **x)
                .count();
            if sources != 1 {
                self.diags.push(
                    Diagnostic::new(&r::MISSING_SETTING, file, entry.uri.span, "a served template needs exactly one of `root`, `backend` or `render`")
                        .label(if sources == 0 { "says nowhere to read from" } else { "says more than one place to read from" })
                        .help("`root = \"./docs\"` serves files, `backend = \"http://...\"` proxies, `render = \"...\"` renders text from the URI variables"),
                );
            }
            if let (Some(t), Some(r)) = (&tpl, &render) {
                let vars: Vec<String> = t.variables().map(|v| v.name.clone()).collect();
                self.check_render_template(file, &entry.body, r, &vars);
            }
        } else if s.has("text") && s.has("blob") {
            self.diags.push(
                Diagnostic::new(
                    &r::MISSING_SETTING,
                    file,
                    entry.uri.span,
                    "a served resource needs one of `text` and `blob`, not both",
                )
                .label("has two contents")
                .help("keep `text` for text, `blob` (base64) for bytes"),
            );
        } else if text.is_none() && !s.has("text") && !s.has("blob") {
            self.missing_setting(
                file,
                entry.uri.span,
                what,
                "text",
                "give its content: `text = \"...\"`, or `blob = \"...\"` (base64) for bytes",
            );
        }
        let blob =
            self.string_setting(&s, "blob")
                .and_then(|(b, span)| match pipec_base::base64::decode(&b) {
                    Ok(_) => Some(b),
                    Err(why) => {
                        self.diags.push(
                            Diagnostic::new(
                                &r::INVALID_LITERAL_TYPE,
                                file,
                                span,
                                format!("a `blob` is base64: {why}"),
                            )
                            .label("not base64")
                            .help("encode the bytes with `base64 -w0 FILE`"),
                        );
                        None
                    }
                });
        let icons = match s.get("icons") {
            Some(setting) => self.serve_icons(file, setting),
            None => Vec::new(),
        };
        let mut last_modified = None;
        let mut audience = Vec::new();
        let mut priority = None;
        if let Some(setting) = s.get("annotations") {
            let entries: Vec<(String, ast::Expr)> = match &setting.value {
                SettingValue::Block(b) => b
                    .settings
                    .iter()
                    .filter_map(|x| match &x.value {
                        SettingValue::Expr(e) => Some((x.name.name.clone(), e.clone())),
                        SettingValue::Block(_) => None,
                    })
                    .collect(),
                SettingValue::Expr(e) => match &e.kind {
                    ExprKind::Record(en) => en
                        .iter()
                        .map(|x| (x.key.name.clone(), x.value.clone()))
                        .collect(),
                    _ => Vec::new(),
                },
            };
            for (key, value) in entries {
                match (key.as_str(), literal_json(&value)) {
                    ("audience", Some(serde_json::Value::Array(items))) => {
                        // Each role at its own place when the list is written out.
                        let spans: Vec<Span> = match &value.kind {
                            ExprKind::List(exprs) if exprs.len() == items.len() => {
                                exprs.iter().map(|x| x.span).collect()
                            }
                            _ => vec![value.span; items.len()],
                        };
                        for (item, span) in items.iter().zip(spans) {
                            let Some(who) = item.as_str() else {
                                self.wrong_annotation(file, &key, value.span);
                                break;
                            };
                            match served::audience(who) {
                                Ok(()) => audience.push(who.to_string()),
                                Err(problem) => self.diags.push(problem.at(
                                    &r::INVALID_LITERAL_TYPE,
                                    file,
                                    span,
                                )),
                            }
                        }
                    }
                    ("priority", Some(v)) if v.is_number() => {
                        match served::priority(v.as_f64().unwrap_or(f64::NAN)) {
                            Ok(p) => priority = Some(p),
                            Err(problem) => self.diags.push(
                                problem
                                    .at(&r::INVALID_LITERAL_TYPE, file, value.span)
                                    .help("write a number from 0 (optional) to 1 (required), e.g. `priority = 0.8`"),
                            ),
                        }
                    }
                    ("last_modified", Some(serde_json::Value::String(t))) => {
                        match served::last_modified(&t) {
                            Ok(()) => last_modified = Some(t),
                            Err(problem) => self.diags.push(
                                problem
                                    .at(&r::INVALID_LITERAL_TYPE, file, value.span)
                                    .help("write the time in UTC, e.g. `last_modified = \"2026-12-01T10:00:00Z\"`"),
                            ),
                        }
                    }
                    ("last_modified", _) => self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            value.span,
                            "`last_modified` takes an ISO 8601 time as a string, such as \"2026-12-01T10:00:00Z\"",
                        )
                        .label("not a string"),
                    ),
                    ("audience" | "priority", _) => self.wrong_annotation(file, &key, value.span),
                    _ => self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_SETTING,
                            file,
                            value.span,
                            format!("annotations have no `{key}`"),
                        )
                        .label("unknown annotation")
                        .help("annotations take `audience`, `priority` and `last_modified`"),
                    ),
                }
            }
        }
        let def = ServeEntryDef {
            template,
            uri: entry.uri.value.clone(),
            span: entry.span,
            name,
            title: self.string_setting(&s, "title").map(|x| x.0),
            description: self.string_setting(&s, "description").map(|x| x.0),
            mime_type: self.string_setting(&s, "mime_type").map(|x| x.0),
            text,
            root: root_dir,
            backend,
            render,
            audience,
            priority,
            last_modified,
            blob,
            icons,
        };
        self.hir.serve.push(def);
    }

    /// The `icons` of a serve entry: a list of `{ src, mime_type, sizes }` records.
    fn serve_icons(&mut self, file: FileId, setting: &ast::Setting) -> Vec<ServeIcon> {
        let SettingValue::Expr(e) = &setting.value else {
            return Vec::new();
        };
        let bad = |checker: &mut Self, why: &str| {
            checker.diags.push(
                Diagnostic::new(&r::INVALID_LITERAL_TYPE, file, e.span, format!("`icons` {why}"))
                    .label("not an icon list")
                    .help("write `icons = [{ src: \"https://.../icon.png\", mime_type: \"image/png\", sizes: [\"48x48\"] }]`"),
            );
        };
        let Some(serde_json::Value::Array(items)) = literal_json(e) else {
            bad(self, "is a list of records");
            return Vec::new();
        };
        let mut icons = Vec::new();
        for item in items {
            let Some(obj) = item.as_object() else {
                bad(self, "holds records");
                continue;
            };
            if let Some(k) = obj
                .keys()
                .find(|k| !["src", "mime_type", "sizes"].contains(&k.as_str()))
            {
                bad(
                    self,
                    &format!("records take `src`, `mime_type` and `sizes`, not `{k}`"),
                );
                continue;
            }
            let Some(src) = obj.get("src").and_then(|v| v.as_str()) else {
                bad(self, "records need `src`, the icon's URI");
                continue;
            };
            let sizes: Option<Vec<String>> = match obj.get("sizes") {
                None => Some(Vec::new()),
                Some(serde_json::Value::Array(v)) => {
                    v.iter().map(|x| x.as_str().map(str::to_string)).collect()
                }
                Some(_) => None,
            };
            let Some(sizes) = sizes else {
                bad(self, "`sizes` is a list of strings such as \"48x48\"");
                continue;
            };
            if let Some(problem) = served::icon_source(src) {
                self.diags
                    .push(problem.at(&r::INVALID_LITERAL_TYPE, file, e.span));
            }
            icons.push(ServeIcon {
                src: src.to_string(),
                mime_type: obj
                    .get("mime_type")
                    .and_then(|v| v.as_str())
                    .map(str::to_string),
                sizes,
            });
        }
        icons
    }

    /// P0203 for an `audience` or `priority` of a kind it does not take.
    fn wrong_annotation(&mut self, file: FileId, key: &str, span: Span) {
        let takes = if key == "audience" {
            "a list of \"user\" and \"assistant\""
        } else {
            "a number from 0 to 1"
        };
        self.diags.push(
            Diagnostic::new(
                &r::INVALID_LITERAL_TYPE,
                file,
                span,
                format!("`{key}` takes {takes}"),
            )
            .label("not a value it takes"),
        );
    }
}
