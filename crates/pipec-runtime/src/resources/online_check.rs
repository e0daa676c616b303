//! `pipec check --online`: every server of a plan started once, and what it lists held
//! against the declarations that use it. The findings name declarations by their place
//! in the plan (which follows the checked program's order), so the command line can put
//! each at its span.
//!
//! What a run would refuse keeps the run's code: a server that cannot be started is
//! `R0501`, configuration it lacks `R0002`, a tool it does not offer or whose input
//! schema the declaration does not fit `R0502`. What only a listing reveals has a rule of
//! its own: annotations that contradict the declaration (P0701), parameters an open
//! schema does not list (P0702), URIs no listed template or fixed resource matches
//! (P0703), and links declared on a server whose protocol cannot return them (P0704).

use std::collections::BTreeMap;
use std::path::Path;

use super::server_listing::{ServerListing, take_listing};
use super::servers::server_config_from_environment;
use super::tools_check::{Mismatch, comparison, missing_tool};
use pipec_base::uri::{self, Part, UriTemplate};
use pipec_diagnostic::rules as r;
use pipec_diagnostic::{self as codes, Rule, Severity};
use pipec_mcp::{ResourceInfo, ToolInfo};
use pipec_plan::{Plan, Source, Tool, ToolKind};

/// The first protocol version whose tool results may carry `resource_link` blocks.
pub const LINKS_PROTOCOL: &str = "2025-06-18";

/// The declaration a finding is about, by its index in the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// `plan.servers[i]`.
    Server(usize),
    /// `plan.tools[i]` (a tool or a reader).
    Tool(usize),
    /// A parameter of `plan.tools[i]`.
    ToolParam(usize, usize),
    /// The `links` setting of `plan.tools[i]`.
    ToolLinks(usize),
    /// A node parameter bound to `resource("...")`.
    Binding { node: String, param: String },
}

/// One problem an online check found.
#[derive(Clone, Debug)]
pub struct Finding {
    pub subject: Subject,
    pub rule: &'static Rule,
    pub severity: Severity,
    pub message: String,
    pub help: Option<String>,
}

impl Finding {
    fn new(subject: Subject, rule: &'static Rule, message: String) -> Finding {
        Finding {
            subject,
            rule,
            severity: rule.severity,
            message,
            help: None,
        }
    }

    fn help(mut self, help: impl Into<String>) -> Finding {
        self.help = Some(help.into());
        self
    }
}

/// Starts every server the plan declares (those of imported files too), one short
/// session each and all at once, and compares what each lists with the tools, readers
/// and resource bindings that use it. `env()` values and secrets are read through
/// `environment`, as a run reads them.
pub async fn check_online(
    plan: &Plan,
    project_root: &Path,
    environment: &dyn Fn(&str) -> Option<String>,
) -> Vec<Finding> {
    let sessions = plan
        .servers
        .iter()
        .enumerate()
        .map(|(i, server)| async move {
            let config = match server_config_from_environment(server, project_root, environment) {
                Ok(config) => config,
                Err(e) => {
                    // R0002 for what is missing, R0109 for a value its setting cannot take.
                    let rule = pipec_diagnostic::rules::find_rule(e.code)
                        .unwrap_or(&codes::CONFIG_MISSING);
                    let finding = Finding::new(
                        Subject::Server(i),
                        rule,
                        format!(
                            "the server `{}` cannot be started without its configuration: {}",
                            server.name, e.message
                        ),
                    );
                    return Err(finding.help(e.help.unwrap_or_default()));
                }
            };
            take_listing(config).await.map_err(|e| {
                let help = e.help().unwrap_or_else(|| {
                    "check the server's `command` (or `url`) and run it by hand to see what it says"
                        .to_string()
                });
                Finding::new(Subject::Server(i), &codes::MCP_SERVER_FAILED, e.to_string())
                    .help(help)
            })
        });
    let listings = futures::future::join_all(sessions).await;
    let mut out = Vec::new();
    for (server, listing) in plan.servers.iter().zip(listings) {
        match listing {
            Ok(listing) => out.extend(compare_server(plan, &server.name, &listing)),
            Err(finding) => out.push(finding),
        }
    }
    out
}

/// What one server's listing says about the declarations that use it.
pub(crate) fn compare_server(plan: &Plan, server: &str, listing: &ServerListing) -> Vec<Finding> {
    let mut out = Vec::new();
    let by_name: BTreeMap<&str, &ToolInfo> =
        listing.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let offered: Vec<&str> = by_name.keys().copied().collect();
    for (i, tool) in plan.tools.iter().enumerate() {
        if tool.server != server {
            continue;
        }
        match tool.kind {
            ToolKind::Tool => {
                match by_name.get(tool.wire_name.as_str()) {
                    Some(info) => compare_tool(plan, i, tool, info, &mut out),
                    None => {
                        let e = missing_tool(tool, &offered);
                        let mut f =
                            Finding::new(Subject::Tool(i), &codes::MCP_TOOL_MISMATCH, e.message);
                        f.help = e.help;
                        out.push(f);
                    }
                }
                links_on_old_protocol(i, tool, listing, &mut out);
            }
            ToolKind::Reader => {
                if let Some(uri) = &tool.uri
                    && !served(uri, listing)
                {
                    out.push(
                        Finding::new(
                            Subject::Tool(i),
                            &r::UNSERVED_RESOURCE_TEMPLATE,
                            format!(
                                "{} the `uri` of the reader `{}`: {uri}",
                                unserved(server, listing),
                                tool.name
                            ),
                        )
                        .help(templates_help(uri, listing)),
                    );
                }
            }
        }
    }
    for node in &plan.nodes {
        for p in &node.params {
            let mut found = Vec::new();
            resource_sources(&p.source, &mut found);
            for (uri, on) in found {
                if on == server && !served(uri, listing) {
                    out.push(
                        Finding::new(
                            Subject::Binding {
                                node: node.name.clone(),
                                param: p.name.clone(),
                            },
                            &r::UNSERVED_RESOURCE_TEMPLATE,
                            format!(
                                "{} what `{}` of `{}` reads: {uri}",
                                unserved(server, listing),
                                p.name,
                                node.name
                            ),
                        )
                        .help(templates_help(uri, listing)),
                    );
                }
            }
        }
    }
    out
}

fn compare_tool(plan: &Plan, i: usize, tool: &Tool, info: &ToolInfo, out: &mut Vec<Finding>) {
    let found = comparison(plan, tool, info);
    let listed: Vec<&str> = info
        .input_schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let pull = format!(
        "`pipec tools pull {}` prints the server's declaration of `{}`",
        tool.server, tool.wire_name
    );
    for m in &found.mismatches {
        let message = format!("`{}`: {}", tool.name, m.describe(tool));
        let finding = match m {
            Mismatch::ParamType { param, .. } => Finding::new(
                Subject::ToolParam(i, *param),
                &codes::MCP_TOOL_MISMATCH,
                message,
            )
            .help(format!("declare the server's type; {pull}")),
            Mismatch::UnknownParam { param } => {
                let wire = tool.params.get(*param).map_or("", |p| p.wire_name.as_str());
                Finding::new(
                    Subject::ToolParam(i, *param),
                    &codes::MCP_TOOL_MISMATCH,
                    message,
                )
                .help(parameter_help(wire, &listed))
            }
            Mismatch::MissingRequired { wire } => {
                // A declared parameter the server does not list, close to the required
                // one, is most likely the same one misspelt.
                let unlisted = found
                    .unlisted
                    .iter()
                    .filter_map(|u| tool.params.get(u.param))
                    .map(|p| p.wire_name.as_str());
                let help = match pipec_base::names::suggest(wire, unlisted) {
                    Some(close) => format!(
                        "rename `{close}` to `{wire}`, or keep the name with `as \"{wire}\"`"
                    ),
                    None => format!("add `{wire}` to the parameters; {pull}"),
                };
                Finding::new(Subject::Tool(i), &codes::MCP_TOOL_MISMATCH, message).help(help)
            }
        };
        out.push(finding);
    }
    for u in &found.unlisted {
        let wire = tool
            .params
            .get(u.param)
            .map_or("", |p| p.wire_name.as_str());
        out.push(
            Finding::new(
                Subject::ToolParam(i, u.param),
                &r::UNLISTED_TOOL_PARAMETER,
                format!(
                    "the server `{}` does not list the parameter `{wire}` of `{}`; it takes parameters it does not list, so it may ignore this one",
                    tool.server, tool.wire_name
                ),
            )
            .help(parameter_help(wire, &listed)),
        );
    }
    for c in &found.contradictions {
        out.push(
            Finding::new(
                Subject::Tool(i),
                &r::TOOL_ANNOTATION_CONTRADICTION,
                c.describe(&tool.server, &tool.wire_name),
            )
            .help(format!(
                "to agree with the server, write `{} = {}`; pipec goes by the declaration",
                c.setting, c.server_says
            )),
        );
    }
}

/// A parameter the server does not list: the listed one it most likely means.
fn parameter_help(wire: &str, listed: &[&str]) -> String {
    match pipec_base::names::suggest(wire, listed.iter().copied()) {
        Some(s) => format!(
            "did you mean `{s}`? (to keep the local name, write `as \"{s}\"` after its type)"
        ),
        None if listed.is_empty() => "the server lists no parameters for it".to_string(),
        None => format!("the server lists: {}", listed.join(", ")),
    }
}

fn links_on_old_protocol(i: usize, tool: &Tool, listing: &ServerListing, out: &mut Vec<Finding>) {
    let Some(version) = &listing.protocol_version else {
        return;
    };
    // Protocol versions are dates, `YYYY-MM-DD`, so they compare as text.
    if tool.links.is_empty() || version.as_str() >= LINKS_PROTOCOL {
        return;
    }
    out.push(
        Finding::new(
            Subject::ToolLinks(i),
            &r::LINKS_NEED_NEWER_PROTOCOL,
            format!(
                "the server `{}` speaks MCP {version}, whose tool results cannot carry links, so `{}` never returns the links it declares",
                tool.server, tool.name
            ),
        )
        .help(format!(
            "read those resources by URI (`resource(\"...\")`) instead, or move the server to MCP {LINKS_PROTOCOL} or later"
        )),
    );
}

/// The `resource("...")` sources inside a source, with the server each is read from.
fn resource_sources<'a>(source: &'a Source, out: &mut Vec<(&'a str, &'a str)>) {
    match source {
        Source::Resource { uri, server, .. } => out.push((uri, server)),
        Source::Each { list, .. } => resource_sources(list, out),
        Source::Join { sides } | Source::List { items: sides } => {
            sides.iter().for_each(|s| resource_sources(s, out))
        }
        Source::Record { fields } => fields.values().for_each(|s| resource_sources(s, out)),
        _ => {}
    }
}

/// The parts of a template with its variable names left out: two templates of the
/// same shape expand alike.
fn shape(t: &UriTemplate) -> Vec<String> {
    t.parts
        .iter()
        .map(|p| match p {
            Part::Literal(l) => format!("L{l}"),
            Part::Expr(e) => {
                let vars: Vec<String> = e
                    .vars
                    .iter()
                    .map(|v| format!("{}{:?}", if v.explode { "*" } else { "" }, v.prefix))
                    .collect();
                format!("E{}{}", e.operator.unwrap_or(' '), vars.join(","))
            }
        })
        .collect()
}

/// The start of a P0703 message: what the server lists, or that it offers no resources.
fn unserved(server: &str, listing: &ServerListing) -> String {
    if listing.offers.resources {
        format!("the server `{server}` lists no resource template or resource that matches")
    } else {
        format!(
            "the server `{server}` offers no resources (its capabilities have no `resources`), so nothing matches"
        )
    }
}

/// Whether the server serves the URIs of `declared`: a listed template has the same
/// shape, or (when it can be matched) matches a URI that `declared` expands to; or a
/// listed fixed resource is one of the URIs `declared` expands to. A URI without
/// expressions is taken as served: it may be a fixed resource the listing leaves out.
pub(crate) fn served(declared: &str, listing: &ServerListing) -> bool {
    let Ok(declared_t) = uri::parse(declared) else {
        return true;
    };
    if !declared_t.has_expressions() {
        return true;
    }
    let declared_shape = shape(&declared_t);
    let sampled = declared_t.sample("pipec1");
    let by_template = listing.templates.iter().any(|listed| {
        if listed.uri_template == declared {
            return true;
        }
        let Ok(t) = uri::parse(&listed.uri_template) else {
            return false;
        };
        shape(&t) == declared_shape
            || (t.check_matchable().is_ok() && t.match_uri(&sampled).is_some())
    });
    by_template || expands_to_a_listed_resource(&declared_t, &listing.resources)
}

/// Whether one of the fixed resources is a URI the template expands to.
fn expands_to_a_listed_resource(declared: &UriTemplate, resources: &[ResourceInfo]) -> bool {
    declared.check_matchable().is_ok()
        && resources
            .iter()
            .any(|r| declared.match_uri(&r.uri).is_some())
}

fn templates_help(declared: &str, listing: &ServerListing) -> String {
    if !listing.offers.resources {
        return "read it from a server that offers resources, or check the server's `command` (or `url`)".to_string();
    }
    let templates = &listing.templates;
    if templates.is_empty() {
        return "the server lists no resource templates".to_string();
    }
    let listed: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    let all = format!("it lists: {}", listed.join(", "));
    match pipec_base::names::suggest(declared, listed.iter().copied()) {
        Some(s) => format!("did you mean `{s}`? {all}"),
        None => all,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_mcp::TemplateInfo;

    fn template(text: &str) -> TemplateInfo {
        TemplateInfo {
            uri_template: text.to_string(),
            name: "t".into(),
            title: None,
            description: None,
            mime: None,
            raw: serde_json::Value::Null,
        }
    }

    fn listing(templates: &[&str], resources: &[&str]) -> ServerListing {
        ServerListing {
            protocol_version: None,
            offers: pipec_mcp::Offers {
                tools: true,
                resources: true,
                prompts: false,
            },
            tools: Vec::new(),
            templates: templates.iter().map(|t| template(t)).collect(),
            resources: resources
                .iter()
                .map(|uri| ResourceInfo {
                    uri: uri.to_string(),
                    name: "r".into(),
                    title: None,
                    description: None,
                    mime: None,
                    raw: serde_json::Value::Null,
                })
                .collect(),
        }
    }

    #[test]
    fn a_template_serves_the_same_shape_under_other_variable_names() {
        let listed = listing(&["mcp://crm/deals/{deal_id}/emails/{start}/{end}"], &[]);
        assert!(served("mcp://crm/deals/{id}/emails/{from}/{to}", &listed));
        assert!(!served("mcp://crm/deals/{id}/mail/{from}/{to}", &listed));
    }

    #[test]
    fn a_template_serves_a_narrower_declared_uri() {
        let listed = listing(&["file:///{+path}"], &[]);
        assert!(served("file:///handbook/{+page}", &listed));
        let listed = listing(&["mcp://crm/deals/{deal_id}/emails/{start}/{end}"], &[]);
        assert!(served(
            "mcp://crm/deals/{deal.id}/emails/2025-01-01/{end}",
            &listed
        ));
    }

    #[test]
    fn fixed_uris_and_unparsable_ones_are_not_judged() {
        let none = listing(&[], &[]);
        assert!(served("file:///README.md", &none));
        assert!(served("mcp://x/{unclosed", &none));
        assert!(!served("mcp://x/{a}", &none));
    }

    #[test]
    fn a_template_whose_expansions_are_listed_resources_is_served() {
        let listed = listing(&[], &["mcp://reports/2025/q1", "mcp://reports/2025/q2"]);
        assert!(served("mcp://reports/2025/{quarter}", &listed));
        assert!(!served("mcp://reports/2024/{quarter}", &listed));
        assert!(!served("mcp://reports/{year}/{quarter}/pdf", &listed));
    }
}
