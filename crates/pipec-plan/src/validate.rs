//! The structural invariants that `compile` guarantees, checked again when a plan is read:
//! unique names, every name a plan uses declared in it, nodes in a topological order that
//! their sources and bodies respect, `each` on the parameter that fans out, secrets listed
//! as secrets, parseable URI templates and local `$ref`s. A plan whose hash was recomputed
//! after a hand edit is refused here, before it can start a thread.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use serde_json::Value;

use super::*;
use pipec_base::uri;

/// The first invariant a plan breaks, in the terms of the plan's JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// Two declarations of one kind (`what`) with the same name.
    Duplicate { what: &'static str, name: String },
    /// `place` names a `what` (node, input, tool, ...) that the plan does not declare.
    Dangling {
        place: String,
        what: &'static str,
        name: String,
    },
    /// Nodes that depend on each other in a loop, in dependency order, the first repeated
    /// at the end.
    Cycle { nodes: Vec<String> },
    /// A node listed before one of its dependencies.
    OutOfOrder { node: String, dep: String },
    /// A source or body of `node` reads `reads`, which is not among its `deps`.
    UndeclaredDependency { node: String, reads: String },
    /// `each` names no parameter, or a parameter that does not fan out.
    EachWithoutParameter { node: String, each: String },
    /// A parameter fans out (`each(...)`) but the node's `each` does not name it, or an
    /// `each` sits inside another source.
    MisplacedEach { node: String, param: String },
    /// A body that the node's kind does not have.
    BodyOfAnotherKind {
        node: String,
        kind: &'static str,
        body: &'static str,
    },
    /// A secret or environment variable that `config` does not list (as a secret, for
    /// `secret`).
    ConfigNotListed {
        place: String,
        var: String,
        secret: bool,
    },
    /// A URI template that is not valid RFC 6570.
    InvalidUriTemplate {
        place: String,
        template: String,
        why: String,
    },
    /// A value that compile never writes there (an empty `exec` command, a prompt whose
    /// entry is not among its sources).
    Malformed { place: String, why: String },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Duplicate { what, name } => {
                write!(f, "the {what} `{name}` is declared twice")
            }
            Violation::Dangling { place, what, name } => {
                write!(
                    f,
                    "{place} names the {what} `{name}`, which the plan does not declare"
                )
            }
            Violation::Cycle { nodes } => {
                write!(
                    f,
                    "the nodes depend on each other in a loop: {}",
                    nodes.join(" → ")
                )
            }
            Violation::OutOfOrder { node, dep } => write!(
                f,
                "the node `{node}` comes before `{dep}`, which it depends on (nodes are in topological order)"
            ),
            Violation::UndeclaredDependency { node, reads } => write!(
                f,
                "the node `{node}` reads `{reads}`, which is not among its `deps`"
            ),
            Violation::EachWithoutParameter { node, each } => write!(
                f,
                "the node `{node}` fans out over `{each}`, which is not a parameter bound to `each(...)`"
            ),
            Violation::MisplacedEach { node, param } => write!(
                f,
                "the parameter `{param}` of `{node}` fans out, and the node's `each` does not name it"
            ),
            Violation::BodyOfAnotherKind { node, kind, body } => {
                write!(f, "the {kind} node `{node}` has a `{body}` body")
            }
            Violation::ConfigNotListed { place, var, secret } => write!(
                f,
                "{place} reads the {} `{var}`, which `config` does not list{}",
                if *secret { "secret" } else { "variable" },
                if *secret { " as a secret" } else { "" }
            ),
            Violation::InvalidUriTemplate {
                place,
                template,
                why,
            } => write!(
                f,
                "{place} has the URI template `{template}`, which is not valid: {why}"
            ),
            Violation::Malformed { place, why } => write!(f, "{place}: {why}"),
        }
    }
}

/// Checks every structural invariant of `plan`.
pub(crate) fn validate(plan: &Plan) -> Result<(), Violation> {
    let v = Validator::new(plan)?;
    v.declarations()?;
    v.nodes()?;
    v.outputs()?;
    v.schemas()
}

struct Validator<'p> {
    plan: &'p Plan,
    inputs: HashSet<&'p str>,
    servers: HashSet<&'p str>,
    models: HashSet<&'p str>,
    tools: HashMap<&'p str, &'p Tool>,
    links: HashMap<&'p str, &'p LinkKind>,
    /// Each node's position in `nodes`.
    nodes: HashMap<&'p str, usize>,
    /// Each variable of `config`, and whether it is a secret.
    config: HashMap<&'p str, bool>,
}

/// The names of `items`, refusing the first name given twice.
fn unique<'p, T>(
    items: &'p [T],
    what: &'static str,
    name: impl Fn(&'p T) -> &'p str,
) -> Result<HashMap<&'p str, usize>, Violation> {
    let mut out = HashMap::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let n = name(item);
        if out.insert(n, i).is_some() {
            return Err(Violation::Duplicate {
                what,
                name: n.to_string(),
            });
        }
    }
    Ok(out)
}

fn keys(map: HashMap<&str, usize>) -> HashSet<&str> {
    map.into_keys().collect()
}

impl<'p> Validator<'p> {
    fn new(plan: &'p Plan) -> Result<Self, Violation> {
        let inputs = keys(unique(&plan.inputs, "input", |i| i.name.as_str())?);
        unique(&plan.outputs, "output", |o| o.name.as_str())?;
        let servers = keys(unique(&plan.servers, "server", |s| s.name.as_str())?);
        let models = keys(unique(&plan.models, "model", |m| m.name.as_str())?);
        let tools = unique(&plan.tools, "tool", |t| t.name.as_str())?
            .into_iter()
            .map(|(n, i)| (n, &plan.tools[i]))
            .collect();
        let links = unique(&plan.link_kinds, "link kind", |k| k.kind.as_str())?
            .into_iter()
            .map(|(n, i)| (n, &plan.link_kinds[i]))
            .collect();
        let nodes = unique(&plan.nodes, "node", |n| n.name.as_str())?;
        let config = unique(&plan.config, "config variable", |c| c.var.as_str())?
            .into_iter()
            .map(|(n, i)| (n, plan.config[i].secret))
            .collect();
        Ok(Validator {
            plan,
            inputs,
            servers,
            models,
            tools,
            links,
            nodes,
            config,
        })
    }

    fn known(
        &self,
        set: &HashSet<&str>,
        place: impl Fn() -> String,
        what: &'static str,
        name: &str,
    ) -> Result<(), Violation> {
        if set.contains(name) {
            Ok(())
        } else {
            Err(Violation::Dangling {
                place: place(),
                what,
                name: name.to_string(),
            })
        }
    }

    fn config_value(&self, place: &str, v: &ConfigValue) -> Result<(), Violation> {
        match v {
            ConfigValue::Literal { .. } => Ok(()),
            ConfigValue::Env { var, .. } => self.listed(place, var, false),
            ConfigValue::Secret { var } => self.listed(place, var, true),
        }
    }

    /// A variable the plan reads is in `config`, marked secret when it is one (the scrubber
    /// and the store go by that mark).
    fn listed(&self, place: &str, var: &str, secret: bool) -> Result<(), Violation> {
        match self.config.get(var) {
            Some(listed) if *listed || !secret => Ok(()),
            _ => Err(Violation::ConfigNotListed {
                place: place.to_string(),
                var: var.to_string(),
                secret,
            }),
        }
    }

    fn template(
        &self,
        place: impl Fn() -> String,
        text: &str,
    ) -> Result<uri::UriTemplate, Violation> {
        uri::parse(text).map_err(|e| Violation::InvalidUriTemplate {
            place: place(),
            template: text.to_string(),
            why: e.message,
        })
    }

    /// Servers, models, tools and link kinds.
    fn declarations(&self) -> Result<(), Violation> {
        for s in &self.plan.servers {
            let place = format!("the server `{}`", s.name);
            for v in s.env.values().chain(s.headers.values()) {
                self.config_value(&place, v)?;
            }
            if let Some(oauth) = &s.oauth {
                for v in oauth.client_id.iter().chain(&oauth.client_secret) {
                    self.config_value(&place, v)?;
                }
                let why = if oauth
                    .client_secret
                    .as_ref()
                    .is_some_and(|v| !matches!(v, ConfigValue::Secret { .. }))
                {
                    Some(
                        "its OAuth client secret is not read with secret(), which compile never writes",
                    )
                } else if oauth.grant == crate::OAuthGrant::ClientCredentials
                    && (oauth.client_id.is_none() || oauth.client_secret.is_none())
                {
                    Some("its OAuth client-credentials grant has no client_id or no client_secret")
                } else if s.url.is_none() {
                    Some("it has OAuth but no url")
                } else if s
                    .headers
                    .keys()
                    .any(|h| h.eq_ignore_ascii_case("authorization"))
                {
                    Some("it has OAuth and an Authorization header")
                } else {
                    None
                };
                if let Some(why) = why {
                    return Err(Violation::Malformed {
                        place,
                        why: why.to_string(),
                    });
                }
            }
            if let Some(model) = &s.sampling
                && !self.plan.models.iter().any(|m| &m.name == model)
            {
                return Err(Violation::Malformed {
                    place,
                    why: format!("its sampling model `{model}` is not declared"),
                });
            }
            if let crate::Elicitation::Answer(fields) = &s.elicitation {
                let field = |v: &serde_json::Value| match v {
                    serde_json::Value::Array(items) => items.iter().all(|i| i.is_string()),
                    v => v.is_string() || v.is_number() || v.is_boolean(),
                };
                if let Some((name, _)) = fields.iter().find(|(_, v)| !field(v)) {
                    return Err(Violation::Malformed {
                        place,
                        why: format!(
                            "its elicitation answer's field `{name}` is not what a form takes (a string, a number, a boolean, a list of strings)"
                        ),
                    });
                }
            }
            let line = s.command.iter().chain(&s.args).chain(&s.url);
            for v in line.filter_map(ServerValue::config) {
                if let ConfigValue::Secret { var } = v {
                    return Err(Violation::Malformed {
                        place,
                        why: format!(
                            "its command line or url reads the secret `{var}`, which compile never writes there"
                        ),
                    });
                }
                self.config_value(&place, v)?;
            }
            for pattern in &s.resources {
                self.template(|| place.clone(), pattern)?;
            }
        }
        for m in &self.plan.models {
            let place = format!("the model `{}`", m.name);
            for v in m.base_url.iter().chain(m.api_key.iter()) {
                self.config_value(&place, v)?;
            }
        }
        for t in &self.plan.tools {
            let place = || format!("the tool `{}`", t.name);
            self.known(&self.servers, place, "server", &t.server)?;
            unique(&t.params, "parameter", |p| p.name.as_str()).map_err(|e| match e {
                Violation::Duplicate { name, .. } => Violation::Duplicate {
                    what: "tool parameter",
                    name: format!("{}.{name}", t.name),
                },
                other => other,
            })?;
            for kind in &t.links {
                if !self.links.contains_key(kind.as_str()) {
                    return Err(Violation::Dangling {
                        place: place(),
                        what: "link kind",
                        name: kind.clone(),
                    });
                }
            }
            if let Some(u) = &t.uri {
                self.template(place, u)?;
            }
        }
        for k in &self.plan.link_kinds {
            self.template(|| format!("the link kind \"{}\"", k.kind), &k.template)?;
        }
        Ok(())
    }

    fn nodes(&self) -> Result<(), Violation> {
        for (index, node) in self.plan.nodes.iter().enumerate() {
            self.node(index, node)?;
        }
        Ok(())
    }

    fn node(&self, index: usize, node: &'p Node) -> Result<(), Violation> {
        let name = node.name.as_str();
        for dep in &node.deps {
            match self.nodes.get(dep.as_str()) {
                None => {
                    return Err(Violation::Dangling {
                        place: format!("the `deps` of `{name}`"),
                        what: "node",
                        name: dep.clone(),
                    });
                }
                Some(&at) if at >= index => return Err(self.misordered(index, at)),
                Some(_) => {}
            }
        }
        let params =
            unique(&node.params, "parameter", |p| p.name.as_str()).map_err(|e| match e {
                Violation::Duplicate { name: p, .. } => Violation::Duplicate {
                    what: "parameter",
                    name: format!("{name}.{p}"),
                },
                other => other,
            })?;
        let param_names: HashSet<&str> = params.keys().copied().collect();
        let cx = NodeCx {
            node,
            params: &param_names,
        };
        if let Some(each) = &node.each {
            let fans_out = node
                .params
                .iter()
                .any(|p| &p.name == each && matches!(p.source, Source::Each { .. }));
            if !fans_out {
                return Err(Violation::EachWithoutParameter {
                    node: name.to_string(),
                    each: each.clone(),
                });
            }
        }
        for p in &node.params {
            let place = format!("the parameter `{}` of `{name}`", p.name);
            let fans_out = matches!(p.source, Source::Each { .. });
            if fans_out && node.each.as_deref() != Some(p.name.as_str()) {
                return Err(Violation::MisplacedEach {
                    node: name.to_string(),
                    param: p.name.clone(),
                });
            }
            match &p.source {
                Source::Each { list, .. } => self.source(&place, list, Some(&cx), &p.name)?,
                other => self.source(&place, other, Some(&cx), &p.name)?,
            }
        }
        for r in &node.when_reads {
            if !param_names.contains(r.as_str()) {
                return Err(Violation::Dangling {
                    place: format!("the `when_reads` of `{name}`"),
                    what: "parameter",
                    name: r.clone(),
                });
            }
        }
        if let Some(w) = &node.when {
            cx.expr(&format!("the `when` of `{name}`"), w)?;
        }
        self.body(&cx)
    }

    /// Why the node at `index` cannot come before its dependency at `dep`: a loop back to
    /// it, or only the order.
    fn misordered(&self, index: usize, dep: usize) -> Violation {
        let nodes = &self.plan.nodes;
        if dep == index {
            return Violation::Cycle {
                nodes: vec![nodes[index].name.clone(), nodes[index].name.clone()],
            };
        }
        // Depth-first from the dependency, looking for a way back to the node.
        let mut stack: Vec<(usize, Vec<usize>)> = vec![(dep, vec![index, dep])];
        let mut seen = HashSet::new();
        while let Some((at, path)) = stack.pop() {
            if !seen.insert(at) {
                continue;
            }
            for d in &nodes[at].deps {
                let Some(&next) = self.nodes.get(d.as_str()) else {
                    continue;
                };
                let mut longer = path.clone();
                longer.push(next);
                if next == index {
                    return Violation::Cycle {
                        nodes: longer.iter().map(|i| nodes[*i].name.clone()).collect(),
                    };
                }
                stack.push((next, longer));
            }
        }
        Violation::OutOfOrder {
            node: nodes[index].name.clone(),
            dep: nodes[dep].name.clone(),
        }
    }

    /// A source of a parameter (`node` set) or of an output.
    fn source(
        &self,
        place: &str,
        src: &'p Source,
        node: Option<&NodeCx<'_>>,
        param: &str,
    ) -> Result<(), Violation> {
        let place_of = || place.to_string();
        match src {
            Source::Input { input, .. } => self.known(&self.inputs, place_of, "input", input),
            Source::Node { node: read, .. } => self.reads_node(place, node, read),
            Source::Join { sides: items } | Source::List { items } => items
                .iter()
                .try_for_each(|s| self.source(place, s, node, param)),
            Source::Record { fields } => fields
                .values()
                .try_for_each(|s| self.source(place, s, node, param)),
            Source::Const { .. } => Ok(()),
            Source::Env { var, .. } => self.listed(place, var, false),
            Source::Secret { var } => self.listed(place, var, true),
            Source::Resource {
                uri: text, server, ..
            } => {
                self.known(&self.servers, place_of, "server", server)?;
                let template = self.template(place_of, text)?;
                match node {
                    Some(cx) => template
                        .variables()
                        .try_for_each(|var| cx.uri_variable(place, text, &var.name)),
                    None => Ok(()),
                }
            }
            Source::Link {
                link_kind,
                producer,
                where_,
                ..
            } => {
                let Some(kind) = self.links.get(link_kind.as_str()) else {
                    return Err(Violation::Dangling {
                        place: place_of(),
                        what: "link kind",
                        name: link_kind.clone(),
                    });
                };
                self.reads_node(place, node, producer)?;
                let template =
                    self.template(|| format!("the link kind \"{link_kind}\""), &kind.template)?;
                for (var, e) in where_ {
                    if !template.variables().any(|v| &v.name == var) {
                        return Err(Violation::Dangling {
                            place: format!("the `where` of {place}"),
                            what: "variable of the link kind",
                            name: var.clone(),
                        });
                    }
                    if let Some(cx) = node {
                        cx.expr(place, e)?;
                    }
                }
                Ok(())
            }
            // `each` is the whole source of a parameter, never inside another source, and
            // never an output's.
            Source::Each { .. } => Err(match node {
                Some(cx) => Violation::MisplacedEach {
                    node: cx.node.name.clone(),
                    param: param.to_string(),
                },
                None => Violation::Malformed {
                    place: place_of(),
                    why: "an output cannot fan out".into(),
                },
            }),
        }
    }

    /// A node read by a source: declared, and for a parameter among the node's `deps`
    /// (which places it earlier in the order).
    fn reads_node(
        &self,
        place: &str,
        node: Option<&NodeCx<'_>>,
        read: &str,
    ) -> Result<(), Violation> {
        if !self.nodes.contains_key(read) {
            return Err(Violation::Dangling {
                place: place.to_string(),
                what: "node",
                name: read.to_string(),
            });
        }
        match node {
            Some(cx) if !cx.node.deps.iter().any(|d| d == read) => {
                Err(Violation::UndeclaredDependency {
                    node: cx.node.name.clone(),
                    reads: read.to_string(),
                })
            }
            _ => Ok(()),
        }
    }

    fn body(&self, cx: &NodeCx<'_>) -> Result<(), Violation> {
        let node = cx.node;
        let name = node.name.as_str();
        let fits = matches!(
            (&node.kind, &node.body),
            (
                NodeKind::Node,
                Body::Return { .. } | Body::Call { .. } | Body::Exec { .. } | Body::Host { .. }
            ) | (NodeKind::Act, Body::Model { .. } | Body::Call { .. })
                | (NodeKind::Think | NodeKind::Agent, Body::Model { .. })
                | (NodeKind::Gate, Body::Gate { .. })
        );
        if !fits {
            return Err(Violation::BodyOfAnotherKind {
                node: name.to_string(),
                kind: kind_name(node.kind),
                body: body_name(&node.body),
            });
        }
        let place = format!("the body of `{name}`");
        match &node.body {
            Body::Return { value } => cx.expr(&place, value),
            Body::Call { tool, args } => {
                let Some(t) = self.tools.get(tool.as_str()) else {
                    return Err(Violation::Dangling {
                        place,
                        what: "tool",
                        name: tool.clone(),
                    });
                };
                for (arg, e) in args {
                    if !t.params.iter().any(|p| &p.name == arg) {
                        return Err(Violation::Dangling {
                            place,
                            what: "tool parameter",
                            name: format!("{tool}.{arg}"),
                        });
                    }
                    cx.expr(&place, e)?;
                }
                Ok(())
            }
            Body::Exec { argv, .. } if argv.first().is_none_or(String::is_empty) => {
                Err(Violation::Malformed {
                    place,
                    why: "an `exec` body without a command".into(),
                })
            }
            Body::Exec { .. } => Ok(()),
            Body::Host { function } if function.is_empty() => Err(Violation::Malformed {
                place,
                why: "a `host` body without a function name".into(),
            }),
            Body::Host { .. } => Ok(()),
            Body::Model {
                model,
                prompt,
                tools,
                limits,
                approve,
                ..
            } => {
                self.known(&self.models, || place.clone(), "model", model)?;
                for t in tools {
                    if !self.tools.contains_key(t.as_str()) {
                        return Err(Violation::Dangling {
                            place,
                            what: "tool",
                            name: t.clone(),
                        });
                    }
                }
                for t in limits.keys().chain(approve.iter()) {
                    if !tools.contains(t) {
                        return Err(Violation::Dangling {
                            place: format!("the `limits` or `approve` of `{name}`"),
                            what: "tool of the node",
                            name: t.clone(),
                        });
                    }
                }
                template_entry(&place, prompt)
            }
            Body::Gate { message, ask, .. } => {
                if let Some(ask) = ask.as_deref().filter(|a| *a != "roots") {
                    return Err(Violation::Malformed {
                        place,
                        why: format!("a gate asks \"roots\" of the client, not \"{ask}\""),
                    });
                }
                match message {
                    Some(m) => template_entry(&place, m),
                    None => Ok(()),
                }
            }
        }
    }

    fn outputs(&self) -> Result<(), Violation> {
        for o in &self.plan.outputs {
            let place = format!("the output `{}`", o.name);
            self.source(&place, &o.source, None, &o.name)?;
        }
        Ok(())
    }

    /// Every `$ref` of every schema names one of the plan's `$defs`: the validators resolve
    /// references inside the plan only.
    fn schemas(&self) -> Result<(), Violation> {
        let defs = &self.plan.defs;
        let mut schemas: Vec<(String, &Value)> = Vec::new();
        for (name, s) in defs {
            schemas.push((format!("the type `{name}` in `$defs`"), s));
        }
        for i in &self.plan.inputs {
            schemas.push((format!("the input `{}`", i.name), &i.schema));
        }
        for o in &self.plan.outputs {
            schemas.push((format!("the output `{}`", o.name), &o.schema));
        }
        for k in &self.plan.link_kinds {
            schemas.push((format!("the link kind \"{}\"", k.kind), &k.schema));
        }
        for t in &self.plan.tools {
            let place = format!("the tool `{}`", t.name);
            schemas.push((place.clone(), &t.input_schema));
            schemas.push((place.clone(), &t.output_schema));
            for p in &t.params {
                schemas.push((place.clone(), &p.schema));
            }
        }
        for n in &self.plan.nodes {
            schemas.push((format!("the output of `{}`", n.name), &n.output));
            for p in &n.params {
                schemas.push((
                    format!("the parameter `{}` of `{}`", p.name, n.name),
                    &p.schema,
                ));
            }
        }
        for (place, schema) in schemas {
            local_refs(&place, schema, defs)?;
        }
        Ok(())
    }
}

/// What checking a node's sources and expressions needs to know about the node.
struct NodeCx<'a> {
    node: &'a Node,
    params: &'a HashSet<&'a str>,
}

impl NodeCx<'_> {
    /// A variable of a resource URI names a parameter of the node that is bound to a
    /// value, not to a resource (which would have to be read first) or a secret (which
    /// would be sent, logged and stored as part of the URI).
    fn uri_variable(&self, place: &str, uri: &str, var: &str) -> Result<(), Violation> {
        let root = var.split('.').next().unwrap_or_default();
        let Some(p) = self.node.params.iter().find(|p| p.name == root) else {
            return Err(Violation::Dangling {
                place: format!("the URI `{uri}` of {place}"),
                what: "parameter",
                name: root.to_string(),
            });
        };
        let feeds_uri = match &p.source {
            Source::Resource { .. } | Source::Link { .. } | Source::Secret { .. } => false,
            Source::Each { list, .. } => {
                !matches!(**list, Source::Resource { .. } | Source::Link { .. })
            }
            _ => true,
        };
        if feeds_uri {
            Ok(())
        } else {
            Err(Violation::Malformed {
                place: format!("the URI `{uri}` of {place}"),
                why: format!(
                    "`{root}` is bound to a resource or a secret, which cannot fill a URI"
                ),
            })
        }
    }

    /// A body expression reads only the node's parameters.
    fn expr(&self, place: &str, e: &Expr) -> Result<(), Violation> {
        match e {
            Expr::Param { name } if !self.params.contains(name.as_str()) => {
                Err(Violation::Dangling {
                    place: place.to_string(),
                    what: "parameter",
                    name: name.clone(),
                })
            }
            Expr::Param { .. } | Expr::Const { .. } | Expr::Duration { .. } => Ok(()),
            Expr::Field { of, .. }
            | Expr::Splat { of, .. }
            | Expr::Not { of }
            | Expr::Len { of } => self.expr(place, of),
            Expr::Record { fields } => fields.values().try_for_each(|x| self.expr(place, x)),
            Expr::List { items } => items.iter().try_for_each(|x| self.expr(place, x)),
            Expr::Binary { left, right, .. } => {
                self.expr(place, left)?;
                self.expr(place, right)
            }
        }
    }
}

fn template_entry(place: &str, t: &Template) -> Result<(), Violation> {
    if !t.sources.contains_key(&t.entry) {
        return Err(Violation::Malformed {
            place: place.to_string(),
            why: format!("the template `{}` is not among its sources", t.entry),
        });
    }
    // Rendering recurses once per level: compile refuses a deeper template (P0005).
    for (name, text) in &t.sources {
        if let Some(deep) = pipec_base::nesting::template_too_deep(text) {
            return Err(Violation::Malformed {
                place: place.to_string(),
                why: format!("in the template `{name}`, {}", deep.what),
            });
        }
    }
    Ok(())
}

fn local_refs(
    place: &str,
    schema: &Value,
    defs: &BTreeMap<String, Value>,
) -> Result<(), Violation> {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                let known = r.strip_prefix("#/$defs/").is_some_and(|name| {
                    defs.contains_key(&name.replace("~1", "/").replace("~0", "~"))
                });
                if !known {
                    return Err(Violation::Dangling {
                        place: place.to_string(),
                        what: "`$defs` type",
                        name: r.clone(),
                    });
                }
            }
            map.values().try_for_each(|v| local_refs(place, v, defs))
        }
        Value::Array(items) => items.iter().try_for_each(|v| local_refs(place, v, defs)),
        _ => Ok(()),
    }
}

fn kind_name(k: NodeKind) -> &'static str {
    match k {
        NodeKind::Node => "plain",
        NodeKind::Think => "think",
        NodeKind::Agent => "agent",
        NodeKind::Act => "act",
        NodeKind::Gate => "gate",
    }
}

fn body_name(b: &Body) -> &'static str {
    match b {
        Body::Return { .. } => "return",
        Body::Call { .. } => "call",
        Body::Exec { .. } => "exec",
        Body::Host { .. } => "host",
        Body::Model { .. } => "model",
        Body::Gate { .. } => "gate",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
server crm {
  command = "pipec-demo-crm"
}

model fast {
  provider = "openai"
  name = "gpt-4o-mini"
  api_key = secret("OPENAI_API_KEY")
}

type Deal {
  deal_id: string
  name: string
}

type Chunk {
  text: string
}

link "chunk": Chunk = "mcp://crm/chunks/{id}"

tool get_deal(deal_id: string) -> Deal from crm {
  read_only = true
  idempotent = true
  links = ["chunk"]
}

input deal_id: string
input notes: string[]

node deal(deal_id: string = input.deal_id) -> Deal {
  call = get_deal(deal_id: deal_id)
}

node activity(
  deal: Deal = deal,
  log: string = resource("mcp://crm/deals/{deal.deal_id}/activity", max_bytes: 10kb),
) -> string {
  return = log
}

node evidence(chunk: Chunk = resource(ref: "chunk", max_bytes: 10kb), deal: Deal = deal) -> string {
  return = chunk.text
}

think summary(deal: Deal = deal, log: string = activity, evidence: string = evidence) -> string {
  model = fast
  prompt = "Summarise {{ deal.name }}: {{ log }} {{ evidence }}"
}

node tagged(note: string = each(input.notes)) -> string {
  when = note != ""
  return = note
}

node send(summary: string = summary, token: string = secret("CRM_TOKEN")) -> json {
  exec = ["./send.sh"]
}

gate approve(summary: string = summary) -> bool {
  message = "Send {{ summary }}?"
}

output summary = summary
output tags = tagged
output sent = send
output approved = approve
"#;

    fn base() -> Plan {
        // pipec-check depends on this crate, so the plan it compiles is another crate's
        // `Plan` in this test build: it crosses over as JSON, as a plan file does.
        let compiled =
            pipec_check::compile_str("base.pipe", BASE).unwrap_or_else(|e| panic!("{e}"));
        let json = serde_json::to_string(&compiled).expect("a plan serializes");
        serde_json::from_str(&json).expect("a plan reads back")
    }

    /// What loading refuses after `edit`, with the hash recomputed as a hand edit would.
    fn refused(edit: impl FnOnce(&mut Plan)) -> Violation {
        let mut plan = base();
        edit(&mut plan);
        plan.hash = hash_plan(&plan);
        match Plan::from_json(&plan.to_json()) {
            Err(PlanLoadError::Inconsistent(v)) => v,
            other => panic!("expected an inconsistent plan, got {other:?}"),
        }
    }

    fn node<'a>(plan: &'a mut Plan, name: &str) -> &'a mut Node {
        plan.nodes
            .iter_mut()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    fn param<'a>(plan: &'a mut Plan, node_name: &str, name: &str) -> &'a mut Param {
        node(plan, node_name)
            .params
            .iter_mut()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no parameter {name}"))
    }

    fn dangling(what: &str, name: &str, v: &Violation) {
        match v {
            Violation::Dangling {
                what: w, name: n, ..
            } => {
                assert_eq!((*w, n.as_str()), (what, name), "{v}")
            }
            other => panic!("expected a dangling {what}, got {other:?}"),
        }
    }

    #[test]
    fn the_compiled_plan_loads() {
        let plan = base();
        assert_eq!(Plan::from_json(&plan.to_json()), Ok(plan));
    }

    #[test]
    fn a_cycle_is_refused_and_shown() {
        let v = refused(|p| node(p, "deal").deps.push("summary".into()));
        assert_eq!(
            v,
            Violation::Cycle {
                nodes: vec!["deal".into(), "summary".into(), "deal".into()]
            }
        );
        assert!(v.to_string().contains("deal → summary → deal"), "{v}");
    }

    #[test]
    fn a_node_depending_on_itself_is_a_cycle() {
        let v = refused(|p| node(p, "summary").deps.push("summary".into()));
        assert_eq!(
            v,
            Violation::Cycle {
                nodes: vec!["summary".into(), "summary".into()]
            }
        );
    }

    #[test]
    fn nodes_out_of_topological_order_are_refused() {
        let v = refused(|p| {
            let first = p.nodes.remove(0);
            p.nodes.insert(1, first);
        });
        assert_eq!(
            v,
            Violation::OutOfOrder {
                node: "activity".into(),
                dep: "deal".into()
            }
        );
    }

    #[test]
    fn a_dependency_on_no_node_is_refused() {
        let v = refused(|p| node(p, "summary").deps.push("ghost".into()));
        dangling("node", "ghost", &v);
    }

    #[test]
    fn a_source_naming_no_node_is_refused() {
        let v = refused(|p| {
            param(p, "activity", "deal").source = Source::Node {
                node: "ghost".into(),
                path: Vec::new(),
            }
        });
        dangling("node", "ghost", &v);
    }

    #[test]
    fn a_source_reading_a_node_outside_its_deps_is_refused() {
        let v = refused(|p| node(p, "activity").deps.retain(|d| d != "deal"));
        assert_eq!(
            v,
            Violation::UndeclaredDependency {
                node: "activity".into(),
                reads: "deal".into()
            }
        );
    }

    #[test]
    fn a_source_naming_no_input_is_refused() {
        let v = refused(|p| {
            param(p, "deal", "deal_id").source = Source::Input {
                input: "ghost".into(),
                path: Vec::new(),
            }
        });
        dangling("input", "ghost", &v);
    }

    #[test]
    fn a_duplicate_node_is_refused() {
        let v = refused(|p| {
            let again = p.nodes[0].clone();
            p.nodes.push(again);
        });
        assert_eq!(
            v,
            Violation::Duplicate {
                what: "node",
                name: "deal".into()
            }
        );
    }

    #[test]
    fn a_duplicate_parameter_is_refused() {
        let v = refused(|p| {
            let again = node(p, "summary").params[0].clone();
            node(p, "summary").params.push(again);
        });
        assert_eq!(
            v,
            Violation::Duplicate {
                what: "parameter",
                name: "summary.deal".into()
            }
        );
    }

    #[test]
    fn a_call_of_no_tool_is_refused() {
        let v = refused(|p| {
            if let Body::Call { tool, .. } = &mut node(p, "deal").body {
                *tool = "ghost".into();
            }
        });
        dangling("tool", "ghost", &v);
    }

    #[test]
    fn a_model_body_naming_no_model_is_refused() {
        let v = refused(|p| {
            if let Body::Model { model, .. } = &mut node(p, "summary").body {
                *model = "ghost".into();
            }
        });
        dangling("model", "ghost", &v);
    }

    #[test]
    fn a_tool_of_no_server_is_refused() {
        let v = refused(|p| p.tools[0].server = "ghost".into());
        dangling("server", "ghost", &v);
    }

    #[test]
    fn a_resource_of_no_server_is_refused() {
        let v = refused(|p| {
            if let Source::Resource { server, .. } = &mut param(p, "activity", "log").source {
                *server = "ghost".into();
            }
        });
        dangling("server", "ghost", &v);
    }

    #[test]
    fn a_link_of_no_kind_is_refused() {
        let v = refused(|p| {
            if let Source::Link { link_kind, .. } = &mut param(p, "evidence", "chunk").source {
                *link_kind = "ghost".into();
            }
        });
        dangling("link kind", "ghost", &v);
        let v = refused(|p| p.tools[0].links = vec!["ghost".into()]);
        dangling("link kind", "ghost", &v);
    }

    #[test]
    fn a_ref_to_no_type_of_defs_is_refused() {
        let v = refused(|p| {
            p.defs.remove("Deal");
        });
        dangling("`$defs` type", "#/$defs/Deal", &v);
        let v = refused(|p| {
            param(p, "summary", "log").schema =
                serde_json::json!({ "$ref": "https://example.com/s.json" })
        });
        dangling("`$defs` type", "https://example.com/s.json", &v);
    }

    #[test]
    fn an_each_naming_no_parameter_is_refused() {
        let v = refused(|p| node(p, "tagged").each = Some("ghost".into()));
        assert_eq!(
            v,
            Violation::EachWithoutParameter {
                node: "tagged".into(),
                each: "ghost".into()
            }
        );
        // An `each` on a parameter that does not fan out names no fan-out either.
        let v = refused(|p| node(p, "summary").each = Some("log".into()));
        assert!(matches!(v, Violation::EachWithoutParameter { .. }), "{v}");
    }

    #[test]
    fn a_fan_out_the_node_does_not_name_is_refused() {
        let v = refused(|p| node(p, "tagged").each = None);
        assert_eq!(
            v,
            Violation::MisplacedEach {
                node: "tagged".into(),
                param: "note".into()
            }
        );
    }

    #[test]
    fn an_output_of_no_node_is_refused() {
        let v = refused(|p| {
            p.outputs[0].source = Source::Node {
                node: "ghost".into(),
                path: Vec::new(),
            }
        });
        dangling("node", "ghost", &v);
    }

    #[test]
    fn a_secret_not_listed_as_one_is_refused() {
        // Marked as plain configuration, its value would be recorded on the thread.
        let v = refused(|p| {
            for c in &mut p.config {
                c.secret = false;
            }
        });
        assert!(
            matches!(&v, Violation::ConfigNotListed { secret: true, .. }),
            "{v}"
        );
        let v = refused(|p| p.config.clear());
        assert!(matches!(v, Violation::ConfigNotListed { .. }), "{v}");
    }

    #[test]
    fn a_gate_that_asks_the_client_for_anything_but_roots_is_refused() {
        let v = refused(|p| {
            if let Body::Gate { ask, .. } = &mut node(p, "approve").body {
                *ask = Some("secrets".into());
            }
        });
        assert!(
            matches!(&v, Violation::Malformed { why, .. } if why.contains("\"secrets\"")),
            "{v}"
        );
    }

    #[test]
    fn a_secret_or_resource_filling_a_uri_is_refused() {
        let v = refused(|p| {
            let token = Param {
                name: "token".into(),
                schema: serde_json::json!({ "type": "string" }),
                type_name: "string".into(),
                optional: false,
                keep_ref: false,
                source: Source::Secret {
                    var: "CRM_TOKEN".into(),
                },
            };
            node(p, "activity").params.push(token);
            if let Source::Resource { uri, .. } = &mut param(p, "activity", "log").source {
                *uri = "mcp://crm/deals/{token}".into();
            }
        });
        assert!(matches!(v, Violation::Malformed { .. }), "{v}");
        let v = refused(|p| {
            if let Source::Resource { uri, .. } = &mut param(p, "activity", "log").source {
                *uri = "mcp://crm/deals/{log}".into();
            }
        });
        assert!(matches!(v, Violation::Malformed { .. }), "{v}");
        let v = refused(|p| {
            if let Source::Resource { uri, .. } = &mut param(p, "activity", "log").source {
                *uri = "mcp://crm/deals/{nobody}".into();
            }
        });
        dangling("parameter", "nobody", &v);
    }

    #[test]
    fn an_invalid_uri_template_is_refused() {
        let v = refused(|p| p.link_kinds[0].template = "mcp://crm/chunks/{id".into());
        assert!(matches!(v, Violation::InvalidUriTemplate { .. }), "{v}");
    }

    #[test]
    fn a_body_of_another_kind_is_refused() {
        let v = refused(|p| {
            node(p, "approve").body = Body::Return {
                value: Expr::Const {
                    value: Value::Bool(true),
                },
            }
        });
        assert_eq!(
            v,
            Violation::BodyOfAnotherKind {
                node: "approve".into(),
                kind: "gate",
                body: "return"
            }
        );
    }

    #[test]
    fn a_body_reading_no_parameter_is_refused() {
        let v = refused(|p| {
            node(p, "tagged").when = Some(Expr::Param {
                name: "ghost".into(),
            })
        });
        dangling("parameter", "ghost", &v);
        let v = refused(|p| {
            if let Body::Call { args, .. } = &mut node(p, "deal").body {
                args.insert("ghost".into(), Expr::Const { value: Value::Null });
            }
        });
        dangling("tool parameter", "get_deal.ghost", &v);
    }
}
