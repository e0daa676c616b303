//! The declared tools against what their servers offer (`tools/list`), before a run
//! starts anything: a tool the server does not list, or whose input schema the
//! declaration does not fit, is `R0502`; annotations that contradict the declaration are
//! warnings (the declaration wins: it is what the checker proved the pipeline against).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::servers::Servers;
use crate::diagnostic as codes;
use crate::mcp::ToolInfo;
use crate::plan::{Plan, Tool, ToolKind};
use crate::runtime::error::{RuntimeError, combine};

/// What the check found: the problems that refuse the run, and warnings.
#[derive(Debug, Default)]
pub struct ToolReport {
    pub errors: Vec<RuntimeError>,
    pub warnings: Vec<String>,
}

/// The JSON type names a schema allows (`type`, or the types of `anyOf` branches).
fn types_of(schema: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    match schema.get("type") {
        Some(Value::String(t)) => {
            out.insert(t.clone());
        }
        Some(Value::Array(ts)) => {
            out.extend(ts.iter().filter_map(|t| t.as_str().map(str::to_string)))
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = schema.get(key) {
            for a in alts {
                out.extend(types_of(a));
            }
        }
    }
    out
}

/// Whether a value of the declared types can be sent where the server takes `server`'s.
fn fits(declared: &BTreeSet<String>, server: &BTreeSet<String>) -> bool {
    if declared.is_empty() || server.is_empty() {
        return true;
    }
    declared
        .iter()
        .all(|d| d == "null" || server.contains(d) || (d == "integer" && server.contains("number")))
}

/// Compares one declaration with the server's listing of it.
pub(crate) fn compare(plan: &Plan, tool: &Tool, info: &ToolInfo, report: &mut ToolReport) {
    let props = info
        .input_schema
        .get("properties")
        .and_then(Value::as_object);
    let open = !matches!(
        info.input_schema.get("additionalProperties"),
        Some(Value::Bool(false))
    );
    let mut problems = Vec::new();
    for p in &tool.params {
        match props.and_then(|m| m.get(&p.wire_name)) {
            Some(server_schema) => {
                let declared = types_of(resolve(plan, &p.schema));
                let offered = types_of(server_schema);
                if !fits(&declared, &offered) {
                    problems.push(format!(
                        "`{}` is {} in the declaration and {} on the server",
                        p.wire_name,
                        names(&declared),
                        names(&offered)
                    ));
                }
            }
            None if props.is_some() && !open => problems.push(format!(
                "the server does not know the parameter `{}`",
                p.wire_name
            )),
            None => {}
        }
    }
    let required: Vec<&str> = info
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for r in required {
        if !tool.params.iter().any(|p| p.wire_name == r) {
            problems.push(format!(
                "the server requires `{r}`, which the declaration does not send"
            ));
        }
    }
    if !problems.is_empty() {
        report.errors.push(
            RuntimeError::new(
                &codes::MCP_TOOL_MISMATCH,
                format!(
                    "the tool `{}` does not fit what the server `{}` offers as `{}`: {}",
                    tool.name,
                    tool.server,
                    tool.wire_name,
                    problems.join("; ")
                ),
            )
            .help(format!(
                "compare with `pipec tools pull {}`, and fix the declaration",
                tool.server
            )),
        );
    }
    let mut contradicts = |what: &str, declared: bool, hint: Option<bool>| {
        if let Some(h) = hint
            && h != declared
        {
            report.warnings.push(format!(
                "the server `{}` says `{}` is {}{what}, and the declaration says it is {}{what}; the declaration is used",
                tool.server,
                tool.wire_name,
                if h { "" } else { "not " },
                if declared { "" } else { "not " },
            ));
        }
    };
    contradicts("read-only", tool.read_only, info.read_only);
    if !tool.read_only {
        contradicts("idempotent", tool.idempotent, info.idempotent);
        contradicts("destructive", tool.destructive, info.destructive);
    }
}

fn names(types: &BTreeSet<String>) -> String {
    types.iter().cloned().collect::<Vec<_>>().join(" or ")
}

fn resolve<'a>(plan: &'a Plan, schema: &'a Value) -> &'a Value {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .and_then(|n| plan.defs.get(n))
        .unwrap_or(schema)
}

/// Checks the tools (not readers) of the named servers.
pub async fn check_tools(
    plan: &Plan,
    servers: &dyn Servers,
    which: &BTreeSet<String>,
) -> ToolReport {
    let mut report = ToolReport::default();
    for server in which {
        let declared: Vec<&Tool> = plan
            .tools
            .iter()
            .filter(|t| &t.server == server && t.kind == ToolKind::Tool)
            .collect();
        if declared.is_empty() {
            continue;
        }
        let listed = match servers.list_tools(server).await {
            Ok(l) => l,
            Err(e) => {
                report.errors.push(
                    RuntimeError::new(&codes::MCP_SERVER_FAILED, e.to_string())
                        .help("check the server's `command` (or `url`) and run it by hand to see what it says"),
                );
                continue;
            }
        };
        let by_name: BTreeMap<&str, &ToolInfo> =
            listed.iter().map(|t| (t.name.as_str(), t)).collect();
        for tool in declared {
            match by_name.get(tool.wire_name.as_str()) {
                Some(info) => compare(plan, tool, info, &mut report),
                None => {
                    let names: Vec<&str> = by_name.keys().copied().collect();
                    let mut e = RuntimeError::new(
                        &codes::MCP_TOOL_MISMATCH,
                        format!(
                            "the server `{server}` has no tool `{}` (declared as `{}`)",
                            tool.wire_name, tool.name
                        ),
                    );
                    e = match crate::names::suggest(&tool.wire_name, names.iter().copied()) {
                        Some(s) => e.help(format!("did you mean `{s}`? (`name = \"{s}\"` in the declaration gives the server's name)")),
                        None => e.help(format!(
                            "it offers: {}",
                            if names.is_empty() { "no tools".to_string() } else { names.join(", ") }
                        )),
                    };
                    report.errors.push(e);
                }
            }
        }
    }
    report
}

impl ToolReport {
    /// The errors as one, when there are any.
    pub fn into_error(self) -> Result<Vec<String>, RuntimeError> {
        match combine(self.errors) {
            Some(e) => Err(e),
            None => Ok(self.warnings),
        }
    }
}
