//! `test name { ... }`: a test of the file's pipeline, checked like everything else — its
//! inputs and gate answers against their types, its replies against the nodes that call
//! a model, its faults against the link kinds, its expectations as body expressions over
//! what the run leaves ([`pipec_plan::testing::SCOPE`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::Checker;
use crate::expr::BodyScope;
use crate::hir::{ParamDef, Source, SourceKind};
use crate::mismatch::Target;
use crate::settings::literal_json;
use crate::ty::{FieldTy, RecordTy, Ty};
use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_plan::testing::{Expectation, Faults, Replies, TestCase};
use pipec_syntax::ast::{self, ExprKind, ItemKind, NodeKind, SettingValue};

const SETTINGS: &[&str] = &[
    "input",
    "answers",
    "timeouts",
    "replies",
    "tape",
    "snapshot",
    "env",
    "faults",
    "retry_unfinished",
    "resolve",
    "questions",
    "status",
    "expect",
];
const STATUSES: &[&str] = &["completed", "paused", "failed", "blocked"];
const NODE_STATES: &[&str] = &["pending", "running", "done", "skipped", "failed"];

impl Checker<'_> {
    /// The root file's tests, into `hir.tests`.
    pub(crate) fn check_tests(&mut self, root: usize) {
        let file = self.files[root].id;
        let tests: Vec<(ast::BlockDecl, Span)> = self.files[root]
            .ast
            .items
            .iter()
            .filter_map(|i| match &i.kind {
                ItemKind::Test(t) => Some((t.clone(), i.span)),
                _ => None,
            })
            .collect();
        let mut seen: BTreeMap<String, Span> = BTreeMap::new();
        for (test, span) in &tests {
            if self.hir.is_library {
                self.diags.push(
                    Diagnostic::new(
                        &r::NODES_IN_LIBRARY,
                        file,
                        test.name.span,
                        "a library has no pipeline to test",
                    )
                    .label("a test of nothing")
                    .help("move the test into the pipeline file that imports this library"),
                );
                continue;
            }
            if let Some(first) = seen.get(&test.name.name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        file,
                        test.name.span,
                        format!("the test `{}` is declared twice", test.name.name),
                    )
                    .label("second test of this name")
                    .secondary(file, *first, "first here")
                    .help("give each test its own name: `pipec test --filter` selects by name"),
                );
                continue;
            }
            seen.insert(test.name.name.clone(), test.name.span);
            if let Some(case) = self.check_test(file, test, *span) {
                self.hir.tests.push(case);
            }
        }
    }

    fn check_test(&mut self, file: FileId, test: &ast::BlockDecl, span: Span) -> Option<TestCase> {
        let what = format!("the test `{}`", test.name.name);
        let s = self.settings(file, &test.body, SETTINGS, &what);
        let line = |c: &Checker<'_>, at: Span| c.db.get(file).line_col(at.start).0;
        let inputs = self.test_inputs(file, test, s.get("input"));
        let answers = match self.expr_of(&s, "answers", "a record of gate answers") {
            Some(e) => self.test_answers(file, e),
            None => BTreeMap::new(),
        };
        let timeouts = match self.expr_of(&s, "timeouts", "a list of gate names") {
            Some(e) => self.test_timeouts(file, e),
            None => Vec::new(),
        };
        let replies = self
            .expr_of(
                &s,
                "replies",
                "a replies file or a record of replies by node",
            )
            .and_then(|e| self.test_replies(file, e));
        let tape = self
            .string_setting(&s, "tape")
            .map(|(path, _)| self.beside(file, &path));
        let snapshot = self
            .string_setting(&s, "snapshot")
            .map(|(path, _)| self.beside(file, &path));
        let env = match self.expr_of(&s, "env", "a record of strings") {
            Some(e) => self.test_env(file, e),
            None => BTreeMap::new(),
        };
        let faults = match s.get("faults").map(|f| &f.value) {
            Some(SettingValue::Block(b)) => self.test_faults(file, b),
            Some(SettingValue::Expr(e)) => {
                self.wrong_value(
                    file,
                    e.span,
                    "faults",
                    "a block: `faults { dead_links = [...], kill_after = [...], server_crash = [...] }`",
                );
                Faults::default()
            }
            None => Faults::default(),
        };
        let retry_unfinished = match self.expr_of(&s, "retry_unfinished", "a list of node names") {
            Some(e) => self.test_node_list(file, e, "retry_unfinished"),
            None => Vec::new(),
        };
        let resolve = match self.expr_of(&s, "resolve", "a record of node results") {
            Some(e) => self.test_node_values(
                file,
                e,
                "resolve",
                "a record of node results: `resolve = { node: {...} }`",
                "node",
                |k| k != NodeKind::Gate,
            ),
            None => BTreeMap::new(),
        };
        let questions = match self.expr_of(&s, "questions", "a record of answers by tool") {
            Some(e) => self.test_questions(file, e),
            None => BTreeMap::new(),
        };
        let status = match self.string_setting(&s, "status") {
            Some((st, _)) if STATUSES.contains(&st.as_str()) => st,
            Some((st, at)) => {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        at,
                        format!(
                            "a test ends \"completed\", \"paused\", \"failed\" or \"blocked\", not \"{st}\""
                        ),
                    )
                    .label("not a thread status")
                    .help("\"paused\" for a test that stops at a gate it gives no answer to"),
                );
                "completed".into()
            }
            None => "completed".into(),
        };
        let mut expect = Vec::new();
        if let Some(e) = self.expr_of(&s, "expect", "a list of conditions") {
            match &e.kind {
                ExprKind::List(items) => {
                    for item in items {
                        let text = self.db.get(file).slice(item.span).to_string();
                        if let Some(expr) = self.test_expectation(file, item) {
                            expect.push(Expectation {
                                text,
                                line: line(self, item.span),
                                expr,
                            });
                        }
                    }
                }
                _ => self.wrong_value(
                    file,
                    e.span,
                    "expect",
                    "a list of conditions: `expect = [...]`",
                ),
            }
        }
        Some(TestCase {
            name: test.name.name.clone(),
            line: line(self, span),
            inputs,
            answers,
            timeouts,
            replies,
            tape,
            snapshot,
            env,
            faults,
            retry_unfinished,
            resolve,
            questions,
            status,
            expect,
        })
    }

    /// `input = { name: value }`: every input without a default given, each fitting its
    /// type.
    fn test_inputs(
        &mut self,
        file: FileId,
        test: &ast::BlockDecl,
        setting: Option<&ast::Setting>,
    ) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        let mut at = test.name.span;
        if let Some(setting) = setting {
            at = setting.name.span;
            match &setting.value {
                SettingValue::Expr(e) => match &e.kind {
                    ExprKind::Record(entries) => {
                        for entry in entries {
                            let name = &entry.key.name;
                            let Some(def) = self
                                .hir
                                .inputs
                                .iter()
                                .find(|i| i.info.file == file && &i.info.name == name)
                            else {
                                let known: Vec<String> = self
                                    .hir
                                    .inputs
                                    .iter()
                                    .filter(|i| i.info.file == file)
                                    .map(|i| i.info.name.clone())
                                    .collect();
                                self.unknown_in_test(file, entry.key.span, "input", name, &known);
                                continue;
                            };
                            let ty = def.ty.clone();
                            match literal_json(&entry.value) {
                                Some(v) => {
                                    self.check_literal_fits(
                                        file,
                                        &entry.value,
                                        &v,
                                        &ty,
                                        Target::Part,
                                    );
                                    out.insert(name.clone(), v);
                                }
                                None => self.wrong_value(
                                    file,
                                    entry.value.span,
                                    name,
                                    "a literal value",
                                ),
                            }
                        }
                    }
                    ExprKind::Error => {}
                    _ => {
                        self.wrong_value(file, e.span, "input", "a record of the pipeline's inputs")
                    }
                },
                SettingValue::Block(b) => {
                    self.wrong_value(file, b.span, "input", "a record: `input = { name: value }`")
                }
            }
        }
        let missing: Vec<String> = self
            .hir
            .inputs
            .iter()
            .filter(|i| i.info.file == file && i.default.is_none())
            .filter(|i| !matches!(i.ty, Ty::Optional(_)) && !out.contains_key(&i.info.name))
            .map(|i| i.info.name.clone())
            .collect();
        if !missing.is_empty() {
            let shown: Vec<String> = missing.iter().map(|m| format!("`{m}`")).collect();
            self.diags.push(
                Diagnostic::new(
                    &r::MISSING_SETTING,
                    file,
                    at,
                    format!(
                        "the test gives no value for the input{} {}",
                        if missing.len() == 1 { "" } else { "s" },
                        shown.join(", ")
                    ),
                )
                .label("inputs missing")
                .help(format!(
                    "add them: `input = {{ {} }}`",
                    missing
                        .iter()
                        .map(|m| format!("{m}: ..."))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            );
        }
        out
    }

    /// `answers = { gate: value }`: each a gate of the pipeline, each fitting its type.
    fn test_answers(&mut self, file: FileId, e: &ast::Expr) -> BTreeMap<String, Value> {
        self.test_node_values(
            file,
            e,
            "answers",
            "a record of gate answers: `answers = { gate: {...} }`",
            "gate",
            |k| k == NodeKind::Gate,
        )
    }

    /// A record keyed by nodes of this file of the kinds `wanted` takes, each value a
    /// literal of its node's output type (`answers`, `resolve`).
    fn test_node_values(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        setting: &str,
        shape: &str,
        what: &str,
        wanted: fn(NodeKind) -> bool,
    ) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        let Some(entries) = self.record_of(file, e, setting, shape) else {
            return out;
        };
        for entry in entries {
            let name = &entry.key.name;
            let node = self
                .hir
                .nodes
                .iter()
                .find(|n| wanted(n.kind) && &n.info.name == name && n.info.file == file);
            let Some(node) = node else {
                let known = self.test_node_names(file, wanted);
                self.unknown_in_test(file, entry.key.span, what, name, &known);
                continue;
            };
            let ty = node.output.clone();
            match literal_json(&entry.value) {
                Some(v) => {
                    self.check_literal_fits(file, &entry.value, &v, &ty, Target::Part);
                    out.insert(name.clone(), v);
                }
                None => self.wrong_value(file, entry.value.span, name, "a literal value"),
            }
        }
        out
    }

    /// The nodes of this file of the kinds `wanted` takes.
    fn test_node_names(&self, file: FileId, wanted: fn(NodeKind) -> bool) -> Vec<String> {
        self.hir
            .nodes
            .iter()
            .filter(|n| wanted(n.kind) && n.info.file == file)
            .map(|n| n.info.name.clone())
            .collect()
    }

    /// A list of the pipeline's tools, by the names the plan gives them (`server_crash`,
    /// `server_hang`).
    fn test_tool_list(&mut self, file: FileId, e: &ast::Expr, setting: &str) -> Vec<String> {
        let known = self.test_tool_names();
        self.test_name_list(file, e, setting, "tool", &known)
    }

    /// `questions = { tool: { go_on: true } }`: the answers to the questions a test's
    /// `input_required` fault asks, by tool; each a record literal, or `null` to decline.
    fn test_questions(&mut self, file: FileId, e: &ast::Expr) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        let Some(entries) = self.record_of(
            file,
            e,
            "questions",
            "a record of answers by tool: `questions = { tool: { go_on: true } }`",
        ) else {
            return out;
        };
        let known = self.test_tool_names();
        for entry in entries {
            let name = &entry.key.name;
            if !known.contains(name) {
                self.unknown_in_test(file, entry.key.span, "tool", name, &known);
                continue;
            }
            match literal_json(&entry.value) {
                Some(v @ (Value::Object(_) | Value::Null)) => {
                    out.insert(name.clone(), v);
                }
                _ => self.wrong_value(
                    file,
                    entry.value.span,
                    name,
                    "a record literal (the form's fields), or `null` to decline",
                ),
            }
        }
        out
    }

    /// `timeouts = ["gate"]`: gates of this file that have a `timeout`.
    fn test_timeouts(&mut self, file: FileId, e: &ast::Expr) -> Vec<String> {
        let known = self.test_node_names(file, |k| k == NodeKind::Gate);
        let gates = self.test_name_list(file, e, "timeouts", "gate", &known);
        let ExprKind::List(items) = &e.kind else {
            return gates;
        };
        for item in items {
            let ExprKind::Str(name) = &item.kind else {
                continue;
            };
            let Some(gate) = self.hir.nodes.iter().find(|n| {
                n.kind == NodeKind::Gate && n.info.name == name.value && n.info.file == file
            }) else {
                continue;
            };
            if gate.gate_timeout_ms.is_none() {
                self.diags.push(
                    Diagnostic::new(
                        &r::MISSING_SETTING,
                        file,
                        item.span,
                        format!("the gate `{}` has no `timeout`, so it never times out", name.value),
                    )
                    .label("waits for ever")
                    .secondary(file, gate.info.name_span, "declared here")
                    .help("give the gate a `timeout` (and an `on_timeout` answer), or answer it in `answers`"),
                );
            }
        }
        gates
    }

    /// The pipeline's tools (not readers), by the names the plan gives them.
    fn test_tool_names(&self) -> Vec<String> {
        self.hir
            .tools
            .iter()
            .filter(|t| !t.is_reader)
            .map(|t| t.info.display.clone())
            .collect()
    }

    /// A list of this file's nodes other than gates (`kill_after`, `retry_unfinished`).
    fn test_node_list(&mut self, file: FileId, e: &ast::Expr, setting: &str) -> Vec<String> {
        let known = self.test_node_names(file, |k| k != NodeKind::Gate);
        self.test_name_list(file, e, setting, "node", &known)
    }

    /// A list of strings, each one of `known` (P0101 with the nearest, else).
    fn test_name_list(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        setting: &str,
        what: &str,
        known: &[String],
    ) -> Vec<String> {
        let ExprKind::List(items) = &e.kind else {
            self.wrong_value(
                file,
                e.span,
                setting,
                &format!("a list of {what} names: `[\"{what}\"]`"),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items {
            match &item.kind {
                ExprKind::Str(n) if known.contains(&n.value) => out.push(n.value.clone()),
                ExprKind::Str(n) => self.unknown_in_test(file, item.span, what, &n.value, known),
                _ => self.wrong_value(
                    file,
                    item.span,
                    setting,
                    &format!("{what} names as strings"),
                ),
            }
        }
        out
    }

    /// A path written in `file`, relative to its folder.
    fn beside(&self, file: FileId, path: &str) -> String {
        let dir = self
            .db
            .get(file)
            .path
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default();
        pipec_base::source::normalize_path(&dir.join(path))
            .to_string_lossy()
            .into_owned()
    }

    /// `replies = "file.json"` (relative to the file's folder) or `replies = { node: [...] }`
    /// keyed by the nodes that call a model.
    fn test_replies(&mut self, file: FileId, e: &ast::Expr) -> Option<Replies> {
        match &e.kind {
            ExprKind::Str(s) => {
                let path = self.beside(file, &s.value);
                if !self.loader.exists(Path::new(&path)) {
                    self.diags.push(
                        Diagnostic::new(
                            &r::PATH_NOT_FOUND,
                            file,
                            e.span,
                            format!("there is no replies file `{}`", s.value),
                        )
                        .label("not found")
                        .help("the path is relative to this file's folder; the file is a `scripted:` model's replies, keyed by node"),
                    );
                }
                Some(Replies::File(path))
            }
            ExprKind::Record(entries) => {
                let model_nodes: Vec<String> = self
                    .hir
                    .nodes
                    .iter()
                    .filter(|n| n.info.file == file)
                    .filter(|n| matches!(n.kind, NodeKind::Think | NodeKind::Agent | NodeKind::Act))
                    .map(|n| n.info.name.clone())
                    .collect();
                for entry in entries {
                    if !model_nodes.contains(&entry.key.name) {
                        self.unknown_in_test(
                            file,
                            entry.key.span,
                            "node that calls a model",
                            &entry.key.name,
                            &model_nodes,
                        );
                    } else if !matches!(entry.value.kind, ExprKind::List(_)) {
                        self.wrong_value(
                            file,
                            entry.value.span,
                            &entry.key.name,
                            "a list of replies, one a turn",
                        );
                    }
                }
                match literal_json(e) {
                    Some(v) => Some(Replies::Inline(v)),
                    None => {
                        self.wrong_value(file, e.span, "replies", "literal replies");
                        None
                    }
                }
            }
            ExprKind::Error => None,
            _ => {
                self.wrong_value(
                    file,
                    e.span,
                    "replies",
                    "a replies file or a record of replies by node",
                );
                None
            }
        }
    }

    fn test_env(&mut self, file: FileId, e: &ast::Expr) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let Some(entries) = self.record_of(
            file,
            e,
            "env",
            "a record of strings: `env = { VAR: \"value\" }`",
        ) else {
            return out;
        };
        for entry in entries {
            match &entry.value.kind {
                ExprKind::Str(s) => {
                    out.insert(entry.key.name.clone(), s.value.clone());
                }
                _ => self.wrong_value(file, entry.value.span, &entry.key.name, "a string"),
            }
        }
        out
    }

    fn test_faults(&mut self, file: FileId, b: &ast::Block) -> Faults {
        let s = self.settings(
            file,
            b,
            &[
                "dead_links",
                "kill_after",
                "server_crash",
                "server_hang",
                "input_required",
            ],
            "`faults`",
        );
        let mut faults = Faults::default();
        if let Some(e) = self.expr_of(&s, "server_crash", "a list of tool names") {
            faults.server_crash = self.test_tool_list(file, e, "server_crash");
        }
        if let Some(e) = self.expr_of(&s, "server_hang", "a list of tool names") {
            faults.server_hang = self.test_tool_list(file, e, "server_hang");
        }
        if let Some(e) = self.expr_of(&s, "input_required", "a list of tool names") {
            faults.input_required = self.test_tool_list(file, e, "input_required");
        }
        if let Some(e) = self.expr_of(&s, "kill_after", "a list of node names") {
            faults.kill_after = self.test_node_list(file, e, "kill_after");
        }
        if let Some(e) = self.expr_of(&s, "dead_links", "a list of link kinds") {
            let ExprKind::List(items) = &e.kind else {
                self.wrong_value(
                    file,
                    e.span,
                    "dead_links",
                    "a list of link kinds: `[\"kind\"]`",
                );
                return faults;
            };
            let kinds: Vec<String> = self.hir.links.iter().map(|l| l.kind.clone()).collect();
            for item in items {
                match &item.kind {
                    ExprKind::Str(k) if kinds.contains(&k.value) => {
                        faults.dead_links.push(k.value.clone())
                    }
                    ExprKind::Str(k) => {
                        self.unknown_in_test(file, item.span, "link kind", &k.value, &kinds)
                    }
                    _ => self.wrong_value(file, item.span, "dead_links", "link kinds as strings"),
                }
            }
        }
        faults
    }

    /// The entries of a record literal, or `None` (reported, unless already wrong).
    fn record_of<'e>(
        &mut self,
        file: FileId,
        e: &'e ast::Expr,
        name: &str,
        wanted: &str,
    ) -> Option<&'e [ast::RecordEntry]> {
        match &e.kind {
            ExprKind::Record(entries) => Some(entries),
            ExprKind::Error => None,
            _ => {
                self.wrong_value(file, e.span, name, wanted);
                None
            }
        }
    }

    fn unknown_in_test(
        &mut self,
        file: FileId,
        at: Span,
        what: &str,
        name: &str,
        known: &[String],
    ) {
        let near = names::suggestion_among(name, known.iter().map(String::as_str));
        let mut d = Diagnostic::new(
            &r::UNKNOWN_NAME,
            file,
            at,
            format!("the pipeline has no {what} `{name}`"),
        )
        .label(format!("no such {what}"));
        d = match near {
            Some(n) => d.help(format!("did you mean `{}`?", n.name)),
            None if known.is_empty() => d.help(format!("the pipeline has no {what} at all")),
            None => {
                let shown: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
                d.help(format!("it has {}", shown.join(", ")))
            }
        };
        self.diags.push(d);
    }

    /// One condition: a `bool` body expression over [`pipec_plan::testing::SCOPE`].
    fn test_expectation(&mut self, file: FileId, e: &ast::Expr) -> Option<pipec_plan::Expr> {
        let mut params = self.test_scope(file, e.span);
        let mut scope = BodyScope {
            file,
            node: "test",
            params: &mut params,
        };
        let typed = self.infer(&mut scope, e);
        self.expect_bool(file, &typed, "a test's condition");
        let names: Vec<&str> = pipec_plan::testing::SCOPE.to_vec();
        Some(crate::lower::expr(&typed, &names))
    }

    /// The names a condition reads, in the order of `SCOPE`.
    fn test_scope(&self, file: FileId, span: Span) -> Vec<ParamDef> {
        let record = |fields: Vec<(String, Ty)>| {
            Ty::Record(Arc::new(RecordTy {
                fields: fields
                    .into_iter()
                    .map(|(name, ty)| FieldTy {
                        name,
                        ty,
                        doc: None,
                    })
                    .collect(),
            }))
        };
        let nodes: Vec<_> = self
            .hir
            .nodes
            .iter()
            .filter(|n| n.info.file == file)
            .collect();
        let output = record(
            self.hir
                .outputs
                .iter()
                .filter(|o| o.info.file == file)
                .map(|o| (o.info.name.clone(), o.ty.clone()))
                .collect(),
        );
        let node = record(
            nodes
                .iter()
                .map(|n| {
                    let each = n.params.iter().any(ParamDef::is_each);
                    let ty = if each {
                        Ty::List(Box::new(n.output.clone()))
                    } else {
                        n.output.clone()
                    };
                    (n.info.name.clone(), ty)
                })
                .collect(),
        );
        let states = Ty::Literals(Arc::new(
            NODE_STATES.iter().map(|s| s.to_string()).collect(),
        ));
        let state = record(
            nodes
                .iter()
                .map(|n| (n.info.name.clone(), states.clone()))
                .collect(),
        );
        // Tools by the names the plan gives them: an imported library's as `ns.tool`,
        // read as `calls.ns.tool`.
        let nested = |fields: Vec<(String, Ty)>| {
            let mut out: Vec<(String, Ty)> = Vec::new();
            let mut spaces: BTreeMap<String, Vec<(String, Ty)>> = BTreeMap::new();
            for (name, ty) in fields {
                match name.split_once('.') {
                    Some((ns, rest)) => spaces
                        .entry(ns.to_string())
                        .or_default()
                        .push((rest.to_string(), ty)),
                    None => out.push((name, ty)),
                }
            }
            out.extend(spaces.into_iter().map(|(ns, f)| (ns, record(f))));
            record(out)
        };
        let calls = nested(
            self.hir
                .tools
                .iter()
                .map(|t| (t.info.display.clone(), Ty::Int))
                .collect(),
        );
        // What each call of a tool sent, by its declared parameters; one left out of a
        // call reads as null.
        let arguments = nested(
            self.hir
                .tools
                .iter()
                .filter(|t| !t.is_reader)
                .map(|t| {
                    let sent = record(
                        t.params
                            .iter()
                            .map(|p| {
                                let ty = if p.required() {
                                    p.ty.clone()
                                } else {
                                    p.ty.clone().optional()
                                };
                                (p.name.clone(), ty)
                            })
                            .collect(),
                    );
                    (t.info.display.clone(), Ty::List(Box::new(sent)))
                })
                .collect(),
        );
        let events = record(
            pipec_plan::testing::EVENT_KINDS
                .iter()
                .map(|k| (k.to_string(), Ty::Int))
                .collect(),
        );
        let statuses = Ty::Literals(Arc::new(
            ["completed", "paused", "failed", "blocked", "cancelled"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ));
        let thread = record(vec![
            ("status".into(), statuses),
            ("heals".into(), Ty::Int),
            ("attempts".into(), Ty::Int),
            ("model_calls".into(), Ty::Int),
            ("tokens_in".into(), Ty::Int),
            ("tokens_out".into(), Ty::Int),
            ("cost_usd".into(), Ty::Float),
        ]);
        [output, node, state, calls, arguments, events, thread]
            .into_iter()
            .zip(pipec_plan::testing::SCOPE)
            .map(|(ty, name)| ParamDef {
                name: name.to_string(),
                span,
                name_span: span,
                ty: ty.clone(),
                doc: None,
                source: Source {
                    kind: SourceKind::Const(Value::Null),
                    span,
                    ty,
                },
                used: true,
                binds_resource: false,
                binds_secret: false,
            })
            .collect()
    }
}
