//! Lowering: the checked program becomes a [`Plan`]. Only a program without errors is
//! lowered; everything the runtime needs from the source is copied in here.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::schema::{def_name, def_schema, type_schema};
use crate::hir::{self, Hir};
use crate::ty::{self, Ty};
use pipec_plan::*;
use pipec_syntax::ast;

/// Lowers a checked program to a plan named `name`.
pub fn lower(hir: &Hir, name: &str) -> Plan {
    let l = Lower { hir };
    let defs = plan_defs(hir);
    let mut config: BTreeMap<String, ConfigVar> = BTreeMap::new();
    let servers: Vec<Server> = hir
        .servers
        .iter()
        .map(|s| l.server(s, &mut config))
        .collect();
    let models: Vec<Model> = hir.models.iter().map(|m| l.model(m, &mut config)).collect();
    let nodes: Vec<Node> = hir
        .order
        .iter()
        .map(|id| l.node(hir.node(*id), &mut config))
        .collect();
    let root_doc = hir
        .files
        .iter()
        .find(|f| f.is_root)
        .and_then(|f| f.doc.clone());
    let mut plan = Plan {
        format_version: FORMAT_VERSION,
        hash: String::new(),
        compiler: format!("pipec {}", env!("CARGO_PKG_VERSION")),
        name: name.to_string(),
        doc: root_doc,
        inputs: hir.inputs.iter().map(|i| l.input(i)).collect(),
        outputs: hir
            .outputs
            .iter()
            .map(|o| l.output(o, &mut config))
            .collect(),
        defs,
        servers,
        models,
        link_kinds: hir
            .links
            .iter()
            .map(|k| LinkKind {
                kind: k.kind.clone(),
                schema: type_schema(hir, &k.ty),
                type_name: ty::display(hir, &k.ty),
                template: k.template.text.clone(),
            })
            .collect(),
        tools: hir.tools.iter().map(|t| l.tool(t)).collect(),
        nodes,
        config: config.into_values().collect(),
        serve: hir.serve.iter().map(serve_entry).collect(),
        serve_prompts: hir.serve_prompts.iter().map(|(p, ..)| p.clone()).collect(),
        serve_tool: hir.serve_tool.clone(),
    };
    for i in 0..plan.nodes.len() {
        plan.nodes[i].fingerprint = node_fingerprint(&plan, i);
    }
    plan.hash = hash_plan(&plan);
    plan
}

/// One server of a checked program as the plan declares it, whether or not the rest of
/// the program has errors (`pipec tools pull` reaches a server of a file being written).
/// The plan's `$defs`: every declared type's schema, by its unique name.
pub(crate) fn plan_defs(hir: &Hir) -> BTreeMap<String, Value> {
    (0..hir.types.len() as u32)
        .map(|i| (def_name(hir, i), def_schema(hir, i)))
        .collect()
}

/// A tool as the plan holds it (what a model is shown of it: its description and the
/// schema of its arguments).
pub(crate) fn lower_tool(hir: &Hir, tool: &hir::ToolDef) -> Tool {
    Lower { hir }.tool(tool)
}

pub fn lower_server(hir: &Hir, server: &hir::ServerDef) -> Server {
    Lower { hir }.server(server, &mut BTreeMap::new())
}

struct Lower<'a> {
    hir: &'a Hir,
}

impl Lower<'_> {
    fn schema(&self, ty: &Ty) -> Value {
        type_schema(self.hir, ty)
    }

    fn show(&self, ty: &Ty) -> String {
        ty::display(self.hir, ty)
    }

    fn config(
        &self,
        v: &hir::ConfigValue,
        config: &mut BTreeMap<String, ConfigVar>,
    ) -> ConfigValue {
        match v {
            hir::ConfigValue::Literal(s) => ConfigValue::Literal { value: s.clone() },
            hir::ConfigValue::Env { var, default } => {
                note_config(config, var, false, default.clone());
                ConfigValue::Env {
                    var: var.clone(),
                    default: default.clone(),
                }
            }
            hir::ConfigValue::Secret { var } => {
                note_config(config, var, true, None);
                ConfigValue::Secret { var: var.clone() }
            }
        }
    }

    /// A literal stays a plain string, so a plan that reads no configuration there has
    /// the shape (and the hash) it always had.
    fn server_value(
        &self,
        v: &hir::ConfigValue,
        config: &mut BTreeMap<String, ConfigVar>,
    ) -> ServerValue {
        match v {
            hir::ConfigValue::Literal(s) => ServerValue::Literal(s.clone()),
            other => ServerValue::Config(self.config(other, config)),
        }
    }

    fn server(&self, s: &hir::ServerDef, config: &mut BTreeMap<String, ConfigVar>) -> Server {
        Server {
            name: s.info.display.clone(),
            command: s.command.as_ref().map(|v| self.server_value(v, config)),
            args: s
                .args
                .iter()
                .map(|v| self.server_value(v, config))
                .collect(),
            env: s
                .env
                .iter()
                .map(|(k, v)| (k.clone(), self.config(v, config)))
                .collect(),
            cwd: s.cwd.clone(),
            url: s.url.as_ref().map(|v| self.server_value(v, config)),
            headers: s
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), self.config(v, config)))
                .collect(),
            oauth: s.oauth.as_ref().map(|o| OAuth {
                client_id: o.client_id.as_ref().map(|v| self.config(v, config)),
                client_secret: o.client_secret.as_ref().map(|v| self.config(v, config)),
                grant: o.grant,
                client_metadata_url: o.client_metadata_url.clone(),
                scopes: o.scopes.clone(),
            }),
            elicitation: s.elicitation.clone(),
            sampling: s
                .sampling
                .map(|m| self.hir.models[m as usize].info.display.clone()),
            resources: s.resources.iter().map(|t| t.text.clone()).collect(),
            startup_timeout_ms: s.startup_timeout_ms,
            timeout_ms: s.timeout_ms,
            base_dir: s.base_dir.clone(),
        }
    }

    fn model(&self, m: &hir::ModelDef, config: &mut BTreeMap<String, ConfigVar>) -> Model {
        Model {
            name: m.info.display.clone(),
            provider: m.provider.clone(),
            model: m.model_name.clone(),
            base_url: m.base_url.as_ref().map(|v| self.config(v, config)),
            api_key: m.api_key.as_ref().map(|v| self.config(v, config)),
            temperature: m.temperature,
            max_tokens: m.max_tokens,
            timeout_ms: m.timeout_ms,
            retries: m.retries,
            max_reply_bytes: m.max_reply_bytes,
            replies: m.replies.clone(),
            extra: m.extra.clone(),
            prices: m.prices,
        }
    }

    fn input(&self, i: &hir::InputDef) -> Input {
        Input {
            name: i.info.name.clone(),
            schema: self.schema(&i.ty),
            type_name: self.show(&i.ty),
            default: i.default.clone(),
            optional: i.default.is_some() || i.ty.is_optional(),
            doc: i.info.doc.clone(),
        }
    }

    fn output(&self, o: &hir::OutputDef, config: &mut BTreeMap<String, ConfigVar>) -> Output {
        Output {
            name: o.info.name.clone(),
            schema: self.schema(&o.ty),
            type_name: self.show(&o.ty),
            optional: o.declared_optional,
            source: self.source(&o.source, &[], config),
            doc: o.info.doc.clone(),
        }
    }

    fn tool(&self, t: &hir::ToolDef) -> Tool {
        let params: Vec<ToolParam> = t
            .params
            .iter()
            .map(|p| ToolParam {
                name: p.name.clone(),
                wire_name: p.wire_name.clone(),
                schema: self.schema(&p.ty),
                required: p.required(),
                default: p.default.clone(),
                description: p.doc.clone(),
            })
            .collect();
        let mut props = serde_json::Map::new();
        let mut required = Vec::new();
        for p in &params {
            let mut s = p.schema.clone();
            if let (Some(d), Some(obj)) = (&p.description, s.as_object_mut()) {
                obj.insert("description".into(), Value::String(d.clone()));
            }
            if let (Some(d), Some(obj)) = (&p.default, s.as_object_mut()) {
                obj.insert("default".into(), d.clone());
            }
            if p.required {
                required.push(Value::String(p.name.clone()));
            }
            props.insert(p.name.clone(), s);
        }
        Tool {
            name: t.info.display.clone(),
            kind: if t.is_reader {
                ToolKind::Reader
            } else {
                ToolKind::Tool
            },
            wire_name: t.wire_name.clone(),
            server: t
                .server
                .map(|s| self.hir.servers[s as usize].info.display.clone())
                .unwrap_or_default(),
            description: t.info.doc.clone(),
            params,
            input_schema: json!({ "type": "object", "properties": props, "required": required }),
            output_schema: self.schema(&t.returns),
            read_only: t.read_only,
            idempotent: t.idempotent,
            destructive: t.destructive,
            links: t
                .links
                .iter()
                .map(|(k, _)| self.hir.links[*k as usize].kind.clone())
                .collect(),
            timeout_ms: t.timeout_ms,
            max_result_bytes: t.max_result_bytes,
            task: t.task,
            uri: t.uri.as_ref().map(|u| u.text.clone()),
            max_bytes: t.max_bytes,
            mime: t.mime.clone(),
        }
    }

    fn node(&self, n: &hir::NodeDef, config: &mut BTreeMap<String, ConfigVar>) -> Node {
        let names: Vec<&str> = n.params.iter().map(|p| p.name.as_str()).collect();
        let params: Vec<Param> = n
            .params
            .iter()
            .map(|p| Param {
                name: p.name.clone(),
                schema: self.schema(&p.ty),
                type_name: self.show(&p.ty),
                optional: p.ty.is_optional(),
                keep_ref: ty::keeps_refs(self.hir, &p.ty),
                source: self.source(&p.source, &names, config),
            })
            .collect();
        let body = match &n.body {
            hir::Body::Return(e) => Body::Return {
                value: self.expr(e, &names),
            },
            hir::Body::Call { tool, args } => Body::Call {
                tool: self.hir.tool(*tool).info.display.clone(),
                args: args
                    .iter()
                    .map(|(k, v)| (k.clone(), self.expr(v, &names)))
                    .collect(),
            },
            hir::Body::Exec { argv, idempotent } => Body::Exec {
                argv: argv.clone(),
                idempotent: *idempotent,
            },
            hir::Body::Host { name } => Body::Host {
                function: name.clone(),
            },
            hir::Body::Model {
                model,
                prompt,
                tools,
                limits,
                approve,
                max_steps,
                tool_timeout_ms,
                repairs,
                temperature,
                max_tokens,
            } => {
                let tool_name = |t: &u32| self.hir.tool(*t).info.display.clone();
                Body::Model {
                    model: self
                        .hir
                        .models
                        .get(*model as usize)
                        .map(|m| m.info.display.clone())
                        .unwrap_or_default(),
                    prompt: template(prompt),
                    tools: tools.iter().map(tool_name).collect(),
                    limits: limits.iter().map(|(t, n)| (tool_name(t), *n)).collect(),
                    approve: approve.iter().map(tool_name).collect(),
                    max_steps: *max_steps,
                    tool_timeout_ms: *tool_timeout_ms,
                    repairs: *repairs,
                    temperature: *temperature,
                    max_tokens: *max_tokens,
                    structured: !matches!(ty::resolve(self.hir, &n.output), Ty::String),
                }
            }
            hir::Body::Gate {
                message,
                on_timeout,
                ask,
                suggest,
            } => Body::Gate {
                message: message.as_ref().map(template),
                timeout_ms: n.gate_timeout_ms,
                on_timeout: on_timeout.clone(),
                ask: ask.clone(),
                suggest: suggest.clone(),
            },
            hir::Body::Invalid => Body::Return {
                value: Expr::Const { value: Value::Null },
            },
        };
        let mut when_reads = BTreeSet::new();
        if let Some(w) = &n.when {
            params_read(w, &mut |i| {
                if n.params[i].fetches() {
                    when_reads.insert(n.params[i].name.clone());
                }
            });
        }
        Node {
            name: n.info.name.clone(),
            kind: match n.kind {
                ast::NodeKind::Node => NodeKind::Node,
                ast::NodeKind::Think => NodeKind::Think,
                ast::NodeKind::Agent => NodeKind::Agent,
                ast::NodeKind::Act => NodeKind::Act,
                ast::NodeKind::Gate => NodeKind::Gate,
            },
            doc: n.info.doc.clone(),
            params,
            each: n.each.map(|i| n.params[i].name.clone()),
            output: self.schema(&n.output),
            output_type: self.show(&n.output),
            body,
            when: n.when.as_ref().map(|w| self.expr(w, &names)),
            when_reads: when_reads.into_iter().collect(),
            deps: n
                .deps
                .iter()
                .map(|d| self.hir.node(*d).info.name.clone())
                .collect(),
            skippable: n.skippable,
            timeout_ms: n.timeout_ms,
            retries: n.retries,
            backoff_ms: n.backoff_ms,
            concurrency: n.concurrency,
            drop_failed_items: n.drop_failed_items,
            fingerprint: String::new(),
        }
    }

    fn source(
        &self,
        s: &hir::Source,
        names: &[&str],
        config: &mut BTreeMap<String, ConfigVar>,
    ) -> Source {
        match &s.kind {
            hir::SourceKind::Input { input, path } => Source::Input {
                input: self.hir.inputs[*input as usize].info.name.clone(),
                path: steps(path),
            },
            hir::SourceKind::Node { node, path } => Source::Node {
                node: self.hir.node(*node).info.name.clone(),
                path: steps(path),
            },
            hir::SourceKind::Join(sides) => Source::Join {
                sides: sides
                    .iter()
                    .map(|x| self.source(x, names, config))
                    .collect(),
            },
            hir::SourceKind::Const(v) => Source::Const { value: v.clone() },
            hir::SourceKind::Record(fields) => Source::Record {
                fields: fields
                    .iter()
                    .map(|(k, v)| (k.clone(), self.source(v, names, config)))
                    .collect(),
            },
            hir::SourceKind::List(items) => Source::List {
                items: items
                    .iter()
                    .map(|x| self.source(x, names, config))
                    .collect(),
            },
            hir::SourceKind::Env { var, default } => {
                note_config(config, var, false, default.clone());
                Source::Env {
                    var: var.clone(),
                    default: default.clone(),
                }
            }
            hir::SourceKind::Secret { var } => {
                note_config(config, var, true, None);
                Source::Secret { var: var.clone() }
            }
            hir::SourceKind::Resource(r) => Source::Resource {
                uri: r.uri.text.clone(),
                server: r
                    .server
                    .map(|s| self.hir.servers[s as usize].info.display.clone())
                    .unwrap_or_default(),
                max_bytes: r.max_bytes,
                mime: r.mime.clone(),
            },
            hir::SourceKind::Link(l) => Source::Link {
                link_kind: self.hir.links[l.link as usize].kind.clone(),
                many: l.many,
                producer: l
                    .producer
                    .map(|p| self.hir.node(p).info.name.clone())
                    .unwrap_or_default(),
                where_: l
                    .where_
                    .iter()
                    .map(|(k, e)| (k.clone(), self.expr(e, names)))
                    .collect(),
                max_bytes: l.max_bytes,
                max_total: l.max_total,
                mime: l.mime.clone(),
            },
            hir::SourceKind::Each { inner, max } => Source::Each {
                list: Box::new(self.source(inner, names, config)),
                max: *max,
            },
            hir::SourceKind::Error => Source::Const { value: Value::Null },
        }
    }

    fn expr(&self, e: &hir::Expr, names: &[&str]) -> Expr {
        expr(e, names)
    }
}

/// A body expression in the plan's form; `names` are the parameters, in order.
pub(crate) fn expr(e: &hir::Expr, names: &[&str]) -> Expr {
    let b = |x: &hir::Expr| Box::new(expr(x, names));
    match &e.kind {
        hir::ExprKind::Param(i) => Expr::Param {
            name: names
                .get(*i)
                .map_or_else(|| format!("#{i}"), |n| n.to_string()),
        },
        hir::ExprKind::Field(of, name) => Expr::Field {
            of: b(of),
            name: name.clone(),
        },
        hir::ExprKind::Splat(of, name) => Expr::Splat {
            of: b(of),
            name: name.clone(),
        },
        hir::ExprKind::Const(v) => Expr::Const { value: v.clone() },
        hir::ExprKind::Duration(ms) => Expr::Duration { ms: *ms },
        hir::ExprKind::Record(fields) => Expr::Record {
            fields: fields
                .iter()
                .map(|(k, v)| (k.clone(), expr(v, names)))
                .collect(),
        },
        hir::ExprKind::List(items) => Expr::List {
            items: items.iter().map(|x| expr(x, names)).collect(),
        },
        hir::ExprKind::Not(of) => Expr::Not { of: b(of) },
        hir::ExprKind::Binary(op, l, r) => Expr::Binary {
            operator: op.symbol().to_string(),
            left: b(l),
            right: b(r),
        },
        hir::ExprKind::Len(of) => Expr::Len { of: b(of) },
        hir::ExprKind::Error => Expr::Const { value: Value::Null },
    }
}

fn note_config(
    config: &mut BTreeMap<String, ConfigVar>,
    var: &str,
    secret: bool,
    default: Option<String>,
) {
    let entry = config.entry(var.to_string()).or_insert(ConfigVar {
        var: var.to_string(),
        secret,
        default: default.clone(),
    });
    entry.secret |= secret;
    if entry.default.is_none() {
        entry.default = default;
    }
}

fn steps(path: &[hir::PathSeg]) -> Vec<Step> {
    path.iter()
        .map(|s| match s {
            hir::PathSeg::Field(f) => Step::Field(f.clone()),
            hir::PathSeg::Splat(f) => Step::Splat(f.clone()),
        })
        .collect()
}

pub(crate) fn template(t: &hir::Template) -> Template {
    Template {
        entry: t.entry.clone(),
        sources: t.sources.iter().cloned().collect(),
    }
}

fn params_read(e: &hir::Expr, f: &mut dyn FnMut(usize)) {
    match &e.kind {
        hir::ExprKind::Param(i) => f(*i),
        hir::ExprKind::Field(x, _)
        | hir::ExprKind::Splat(x, _)
        | hir::ExprKind::Not(x)
        | hir::ExprKind::Len(x) => params_read(x, f),
        hir::ExprKind::Binary(_, a, b) => {
            params_read(a, f);
            params_read(b, f);
        }
        hir::ExprKind::Record(fields) => fields.iter().for_each(|(_, x)| params_read(x, f)),
        hir::ExprKind::List(items) => items.iter().for_each(|x| params_read(x, f)),
        _ => {}
    }
}

fn serve_entry(e: &hir::ServeEntryDef) -> ServeEntry {
    ServeEntry {
        kind: if e.template { "template" } else { "resource" }.into(),
        uri: e.uri.clone(),
        name: e.name.clone(),
        title: e.title.clone(),
        description: e.description.clone(),
        mime_type: e.mime_type.clone(),
        text: e.text.clone(),
        root: e.root.clone(),
        backend: e.backend.clone(),
        render: e.render.clone(),
        audience: e.audience.clone(),
        priority: e.priority,
        last_modified: e.last_modified.clone(),
        blob: e.blob.clone(),
        icons: e
            .icons
            .iter()
            .map(|i| pipec_plan::ServeIcon {
                src: i.src.clone(),
                mime_type: i.mime_type.clone(),
                sizes: i.sizes.clone(),
            })
            .collect(),
    }
}
