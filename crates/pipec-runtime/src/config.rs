//! Configuration (`env("X")`) and secrets (`secret("X")`) a run needs, read before it
//! starts so that a run never fails halfway for want of a key. On a start every node
//! counts; on a resume only the nodes still to run, so a secret that only a finished node
//! used is not asked for again. Everything missing is reported in one error.
//!
//! `env()` values are recorded on the thread when it starts (a resume does not drift);
//! secrets are read at every start and resume and never stored.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{RuntimeError, combine};
use pipec_diagnostic as codes;
use pipec_plan::{Body, ConfigValue, Plan, Server, ServerValue, Source};

/// What a run needs from its environment.
#[derive(Default)]
pub(crate) struct Needs {
    /// `env()` variables and their defaults.
    pub env: BTreeMap<String, Option<String>>,
    pub secrets: BTreeSet<String>,
    /// `env()` variables that are a server's `url`, with the server: their values must
    /// be http(s) URLs, as a literal `url` must (P0206).
    pub urls: BTreeMap<String, String>,
}

impl Needs {
    fn note(&mut self, v: &ConfigValue) {
        match v {
            ConfigValue::Env { var, default } => {
                self.env.insert(var.clone(), default.clone());
            }
            ConfigValue::Secret { var } => {
                self.secrets.insert(var.clone());
            }
            ConfigValue::Literal { .. } => {}
        }
    }

    /// What a server reads: its `env`, `headers`, and an `env()` in its command line or
    /// its `url`.
    pub(crate) fn server(&mut self, s: &Server) {
        for v in s.env.values().chain(s.headers.values()) {
            self.note(v);
        }
        if let Some(oauth) = &s.oauth {
            for v in oauth.client_id.iter().chain(&oauth.client_secret) {
                self.note(v);
            }
        }
        for v in s
            .command
            .iter()
            .chain(&s.args)
            .filter_map(ServerValue::config)
        {
            self.note(v);
        }
        if let Some(v) = s.url.as_ref().and_then(ServerValue::config) {
            self.note(v);
            if let ConfigValue::Env { var, .. } = v {
                self.urls.insert(var.clone(), s.name.clone());
            }
        }
    }
}

/// The needs of the nodes in `to_run` (all nodes when `None`) and of the models they
/// call, leaving out models that `replaced` says are replaced (registered or overridden),
/// and the servers' own configuration when `own_servers` is false (the embedder reaches
/// them its own way).
pub(crate) fn needs(
    plan: &Plan,
    to_run: Option<&BTreeSet<String>>,
    replaced: &dyn Fn(&str) -> bool,
    own_servers: bool,
) -> Needs {
    let mut out = Needs::default();
    let mut models = BTreeSet::new();
    for node in &plan.nodes {
        if to_run.is_some_and(|set| !set.contains(&node.name)) {
            continue;
        }
        for p in &node.params {
            collect(&p.source, &mut out);
            // A dead link is re-derived by calling its producer again with the arguments
            // it was given, secrets included, though the producer itself is done.
            for producer in link_producers(&p.source) {
                for q in plan.node(producer).map_or(&[][..], |n| &n.params[..]) {
                    collect_secrets(&q.source, &mut out);
                }
            }
        }
        if let Body::Model { model, .. } = &node.body
            && !replaced(model)
        {
            models.insert(model.clone());
        }
    }
    if to_run.is_none() {
        for o in &plan.outputs {
            collect(&o.source, &mut out);
        }
    }
    for s in plan
        .servers
        .iter()
        .filter(|s| servers_used(plan, to_run).contains(&s.name))
    {
        if own_servers {
            out.server(s);
        }
        // The model that answers its sampling requests.
        if let Some(model) = &s.sampling
            && !replaced(model)
        {
            models.insert(model.clone());
        }
    }
    for m in plan.models.iter().filter(|m| models.contains(&m.name)) {
        for v in [&m.base_url, &m.api_key].into_iter().flatten() {
            out.note(v);
        }
    }
    out
}

/// Every variable the plan reads with `secret()`: its nodes', outputs', servers' and
/// models' (`pipec test` lets a recording take these from the shell).
pub fn secret_names(plan: &Plan) -> BTreeSet<String> {
    needs(plan, None, &|_| false, true).secrets
}

/// The servers the nodes in `to_run` may talk to: their tools' (a `call`, a loop's
/// tools), the servers their resources are read from, and the servers of the tools
/// whose links they read (a dead link is re-derived by calling its producer again).
pub(crate) fn servers_used(plan: &Plan, to_run: Option<&BTreeSet<String>>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let tool_server = |name: &str| {
        plan.tools
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.server.clone())
    };
    let producer_servers = |producer: &str, out: &mut BTreeSet<String>| {
        if let Some(n) = plan.node(producer) {
            match &n.body {
                Body::Call { tool, .. } => out.extend(tool_server(tool)),
                Body::Model { tools, .. } => {
                    out.extend(tools.iter().filter_map(|t| tool_server(t)))
                }
                _ => {}
            }
        }
    };
    fn sources<'a>(src: &'a Source, out: &mut Vec<&'a Source>) {
        match src {
            Source::Each { list, .. } => sources(list, out),
            Source::Join { sides } | Source::List { items: sides } => {
                sides.iter().for_each(|s| sources(s, out))
            }
            Source::Record { fields } => fields.values().for_each(|s| sources(s, out)),
            other => out.push(other),
        }
    }
    for node in &plan.nodes {
        if to_run.is_some_and(|set| !set.contains(&node.name)) {
            continue;
        }
        match &node.body {
            Body::Call { tool, .. } => out.extend(tool_server(tool)),
            Body::Model { tools, .. } => out.extend(tools.iter().filter_map(|t| tool_server(t))),
            _ => {}
        }
        for p in &node.params {
            let mut found = Vec::new();
            sources(&p.source, &mut found);
            for s in found {
                match s {
                    Source::Resource { server, .. } => {
                        out.insert(server.clone());
                    }
                    Source::Link { producer, .. } => producer_servers(producer, &mut out),
                    _ => {}
                }
            }
        }
    }
    out
}

fn collect(src: &Source, out: &mut Needs) {
    match src {
        Source::Env { var, default } => {
            out.env.insert(var.clone(), default.clone());
        }
        Source::Secret { var } => {
            out.secrets.insert(var.clone());
        }
        Source::Join { sides } | Source::List { items: sides } => {
            sides.iter().for_each(|s| collect(s, out))
        }
        Source::Record { fields } => fields.values().for_each(|s| collect(s, out)),
        Source::Each { list, .. } => collect(list, out),
        _ => {}
    }
}

/// The producers of the links a source reads.
fn link_producers(src: &Source) -> Vec<&str> {
    match src {
        Source::Link { producer, .. } => vec![producer.as_str()],
        Source::Join { sides } | Source::List { items: sides } => {
            sides.iter().flat_map(link_producers).collect()
        }
        Source::Record { fields } => fields.values().flat_map(link_producers).collect(),
        Source::Each { list, .. } => link_producers(list),
        _ => Vec::new(),
    }
}

/// The secrets a source reads (its `env()` values are recorded on the thread).
fn collect_secrets(src: &Source, out: &mut Needs) {
    let mut all = Needs::default();
    collect(src, &mut all);
    out.secrets.extend(all.secrets);
}

/// Configuration values and secrets, by variable.
pub(crate) struct Values {
    pub config: BTreeMap<String, String>,
    pub secrets: BTreeMap<String, String>,
}

/// The configuration values: recorded ones first (a resume), then the environment,
/// then the default. Also the secrets. Every missing one, and every value its setting
/// cannot take (a server `url` without a scheme), is in the error.
pub(crate) fn read(
    needs: &Needs,
    recorded: &BTreeMap<String, String>,
    environment: &dyn Fn(&str) -> Option<String>,
) -> Result<Values, RuntimeError> {
    let mut config = recorded.clone();
    let mut missing = Vec::new();
    for (var, default) in &needs.env {
        if config.contains_key(var) {
            continue;
        }
        match environment(var).or_else(|| default.clone()) {
            Some(v) => {
                config.insert(var.clone(), v);
            }
            None => missing.push(
                RuntimeError::new(
                    &codes::CONFIG_MISSING,
                    format!("the environment variable `{var}` is not set"),
                )
                .help(format!(
                    "set it, or give a default: `env(\"{var}\", default: \"...\")`"
                )),
            ),
        }
    }
    for (var, server) in &needs.urls {
        let Some(value) = config.get(var) else {
            continue;
        };
        if let Some(problem) = pipec_base::uri::server_url_problem(value) {
            let fix = match &problem.meant {
                Some(meant) => format!("set `{var}` to `{meant}`"),
                None => format!(
                    "set `{var}` to the server's streamable HTTP endpoint, such as `https://host/mcp`"
                ),
            };
            missing.push(
                RuntimeError::new(
                    &codes::CONFIG_INVALID,
                    format!(
                        "the environment variable `{var}` is the `url` of the server `{server}`, and `{value}` is not an http(s) URL: {}",
                        problem.why
                    ),
                )
                .help(fix),
            );
        }
    }
    let mut secrets = BTreeMap::new();
    for var in &needs.secrets {
        match environment(var) {
            Some(v) => {
                secrets.insert(var.clone(), v);
            }
            None => missing.push(
                RuntimeError::new(
                    &codes::CONFIG_MISSING,
                    format!("the secret `{var}` is not set"),
                )
                .help("set each in the environment; secrets are read at every start and resume, and never stored"),
            ),
        }
    }
    match combine(missing) {
        Some(e) => Err(e),
        None => Ok(Values { config, secrets }),
    }
}
