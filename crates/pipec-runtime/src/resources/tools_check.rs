//! The declared tools against what their servers offer (`tools/list`), before a run
//! starts anything: a tool the server does not list, or whose input schema the
//! declaration does not fit, is `R0502`; annotations that contradict the declaration are
//! warnings (the declaration wins: it is what the checker proved the pipeline against).
//! Types fit as `pipec-schema`'s [`fit`] reads them.

use std::collections::{BTreeMap, BTreeSet};

use pipec_schema::fit;
use serde_json::Value;

use super::servers::Servers;
use crate::error::{RuntimeError, combine};
use pipec_diagnostic as codes;
use pipec_mcp::ToolInfo;
use pipec_plan::{Plan, Tool, ToolKind};

/// What the check found: the problems that refuse the run, and warnings.
#[derive(Debug, Default)]
pub(crate) struct ToolReport {
    pub errors: Vec<RuntimeError>,
    pub warnings: Vec<String>,
}

/// One way a declaration does not fit the server's listing of its tool.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Mismatch {
    /// The parameter (by index) takes other JSON types than the server's.
    ParamType {
        param: usize,
        declared: String,
        offered: String,
    },
    /// The server's input schema is closed and does not list the parameter.
    UnknownParam { param: usize },
    /// The server requires a parameter the declaration does not send.
    MissingRequired { wire: String },
}

impl Mismatch {
    /// The problem in words, naming parameters by their wire names.
    pub(crate) fn describe(&self, tool: &Tool) -> String {
        let wire = |i: &usize| tool.params.get(*i).map_or("?", |p| p.wire_name.as_str());
        match self {
            Mismatch::ParamType {
                param,
                declared,
                offered,
            } => format!(
                "`{}` is {declared} in the declaration and {offered} on the server",
                wire(param)
            ),
            Mismatch::UnknownParam { param } => {
                format!("the server does not know the parameter `{}`", wire(param))
            }
            Mismatch::MissingRequired { wire } => {
                format!("the server requires `{wire}`, which the declaration does not send")
            }
        }
    }
}

/// The server's input schema does not list a parameter, and takes parameters it does
/// not list: it may well ignore this one (`check --online` warns).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Unlisted {
    pub param: usize,
}

/// An annotation of the server's that says otherwise than the declaration.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Contradiction {
    /// `read-only`, `idempotent`, `destructive`.
    pub what: &'static str,
    /// The declaration's setting for it.
    pub setting: &'static str,
    pub server_says: bool,
    pub declared: bool,
}

impl Contradiction {
    pub(crate) fn describe(&self, server: &str, wire_name: &str) -> String {
        let not = |b: bool| if b { "" } else { "not " };
        format!(
            "the server `{server}` says `{wire_name}` is {}{what}, and the declaration says it is {}{what}",
            not(self.server_says),
            not(self.declared),
            what = self.what,
        )
    }
}

/// What comparing one declaration with the server's listing of it found.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Comparison {
    pub mismatches: Vec<Mismatch>,
    pub unlisted: Vec<Unlisted>,
    pub contradictions: Vec<Contradiction>,
}

/// Compares one declaration with the server's listing of it.
pub(crate) fn comparison(plan: &Plan, tool: &Tool, info: &ToolInfo) -> Comparison {
    let mut out = Comparison::default();
    let props = info
        .input_schema
        .get("properties")
        .and_then(Value::as_object);
    let open = !matches!(
        info.input_schema.get("additionalProperties"),
        Some(Value::Bool(false))
    );
    // The plan's schemas refer to its `$defs`.
    let plan_root = serde_json::json!({ "$defs": plan.defs });
    for (i, p) in tool.params.iter().enumerate() {
        match props.and_then(|m| m.get(&p.wire_name)) {
            Some(server_schema) => {
                let declared = fit::kinds(&fit::sent_type(&p.schema, &plan_root));
                let offered = fit::kinds(&fit::sent_type(server_schema, &info.input_schema));
                if !fit::fits(declared.as_ref(), offered.as_ref())
                    && let (Some(declared), Some(offered)) = (declared, offered)
                {
                    out.mismatches.push(Mismatch::ParamType {
                        param: i,
                        declared: fit::kind_names(&declared),
                        offered: fit::kind_names(&offered),
                    });
                }
            }
            None if props.is_some() && !open => {
                out.mismatches.push(Mismatch::UnknownParam { param: i })
            }
            None if props.is_some() => out.unlisted.push(Unlisted { param: i }),
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
            out.mismatches.push(Mismatch::MissingRequired {
                wire: r.to_string(),
            });
        }
    }
    let mut contradicts = |what, setting, declared: bool, hint: Option<bool>| {
        if let Some(h) = hint
            && h != declared
        {
            out.contradictions.push(Contradiction {
                what,
                setting,
                server_says: h,
                declared,
            });
        }
    };
    contradicts("read-only", "read_only", tool.read_only, info.read_only);
    // A read-only declaration is idempotent and not destructive by definition, and MCP
    // gives those two hints meaning only for tools that are not read-only.
    if !tool.read_only {
        contradicts("idempotent", "idempotent", tool.idempotent, info.idempotent);
        contradicts(
            "destructive",
            "destructive",
            tool.destructive,
            info.destructive,
        );
    }
    out
}

/// Compares one declaration with the server's listing of it, into a run's report.
pub(crate) fn compare(plan: &Plan, tool: &Tool, info: &ToolInfo, report: &mut ToolReport) {
    let found = comparison(plan, tool, info);
    if !found.mismatches.is_empty() {
        let problems: Vec<String> = found.mismatches.iter().map(|m| m.describe(tool)).collect();
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
    for c in &found.contradictions {
        report.warnings.push(format!(
            "{}; the declaration is used",
            c.describe(&tool.server, &tool.wire_name)
        ));
    }
}

/// The error for a declared tool the server does not list.
pub(crate) fn missing_tool(tool: &Tool, offered: &[&str]) -> RuntimeError {
    let e = RuntimeError::new(
        &codes::MCP_TOOL_MISMATCH,
        format!(
            "the server `{}` has no tool `{}` (declared as `{}`)",
            tool.server, tool.wire_name, tool.name
        ),
    );
    match pipec_base::names::suggest(&tool.wire_name, offered.iter().copied()) {
        Some(s) => e.help(format!(
            "did you mean `{s}`? (`name = \"{s}\"` in the declaration gives the server's name)"
        )),
        None => e.help(format!(
            "it offers: {}",
            if offered.is_empty() {
                "no tools".to_string()
            } else {
                offered.join(", ")
            }
        )),
    }
}

/// Checks the tools (not readers) of the named servers.
pub(crate) async fn check_tools(
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
                let help = e.help().unwrap_or_else(|| {
                    "check the server's `command` (or `url`) and run it by hand to see what it says"
                        .to_string()
                });
                report
                    .errors
                    .push(RuntimeError::new(&codes::MCP_SERVER_FAILED, e.to_string()).help(help));
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
                    report.errors.push(missing_tool(tool, &names));
                }
            }
        }
    }
    report
}

impl ToolReport {
    /// The errors as one, when there are any.
    pub(crate) fn into_error(self) -> Result<Vec<String>, RuntimeError> {
        match combine(self.errors) {
            Some(e) => Err(e),
            None => Ok(self.warnings),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_mcp::TaskSupport;
    use serde_json::json;

    fn plan() -> Plan {
        let source = r#"
server crm {
  command = "crm-server"
}

tool get_deal(deal_id: string, limit: int?, dry: bool as "dry-run") -> json from crm {
  read_only = true
}
"#;
        match pipec_check::compile_str("crm.pipe", source) {
            Ok(plan) => plan,
            Err(e) => panic!("{:?}", e.diagnostics),
        }
    }

    fn info(input_schema: serde_json::Value, read_only: Option<bool>) -> ToolInfo {
        ToolInfo {
            name: "get_deal".into(),
            title: None,
            description: None,
            input_schema,
            output_schema: None,
            read_only,
            idempotent: None,
            destructive: None,
            open_world: None,
            task_support: TaskSupport::Forbidden,
            raw: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_closed_schema_refuses_what_it_does_not_list_and_an_open_one_only_notes_it() {
        let plan = plan();
        let tool = &plan.tools[0];
        let schema = |closed: bool| {
            json!({
                "type": "object",
                "properties": {"deal_id": {"type": "integer"}, "dry-run": {"type": "boolean"}, "owner": {"type": "string"}},
                "required": ["deal_id", "owner"],
                "additionalProperties": !closed,
            })
        };
        let closed = comparison(&plan, tool, &info(schema(true), Some(true)));
        assert_eq!(
            closed.mismatches,
            [
                Mismatch::ParamType {
                    param: 0,
                    declared: "string".into(),
                    offered: "integer".into()
                },
                Mismatch::UnknownParam { param: 1 },
                Mismatch::MissingRequired {
                    wire: "owner".into()
                },
            ]
        );
        assert!(closed.unlisted.is_empty());
        let open = comparison(&plan, tool, &info(schema(false), Some(true)));
        assert_eq!(open.mismatches.len(), 2, "{:?}", open.mismatches);
        assert_eq!(open.unlisted, [Unlisted { param: 1 }]);
        assert!(open.contradictions.is_empty());
    }

    #[test]
    fn a_server_type_given_by_ref_enum_or_several_kinds_is_read_as_tools_pull_reads_it() {
        let plan = plan();
        let tool = &plan.tools[0];
        // Before, a `$ref` and an `enum` without `type` were taken to fit anything.
        let schema = json!({
            "type": "object",
            "properties": {
                "deal_id": {"$ref": "#/$defs/DealId"},
                "limit": {"enum": ["few", "many"]},
                "dry-run": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            },
            "$defs": {"DealId": {"type": "integer"}},
        });
        let found = comparison(&plan, tool, &info(schema, Some(true)));
        assert_eq!(
            found.mismatches,
            [
                Mismatch::ParamType {
                    param: 0,
                    declared: "string".into(),
                    offered: "integer".into()
                },
                Mismatch::ParamType {
                    param: 1,
                    declared: "integer or null".into(),
                    offered: "string".into()
                },
                Mismatch::ParamType {
                    param: 2,
                    declared: "boolean".into(),
                    offered: "integer or null or string".into()
                },
            ]
        );
        // A branch that takes anything takes this too.
        let open = json!({
            "type": "object",
            "properties": {"deal_id": {"anyOf": [{"type": "integer"}, {}]}},
        });
        assert!(
            comparison(&plan, tool, &info(open, Some(true)))
                .mismatches
                .is_empty()
        );
    }

    #[test]
    fn a_tool_the_server_runs_as_a_task_fits() {
        let plan = plan();
        let tool = &plan.tools[0];
        let schema = json!({"type": "object", "properties": {"deal_id": {"type": "string"}}});
        let mut info = info(schema, Some(true));
        for support in [TaskSupport::Optional, TaskSupport::Required] {
            info.task_support = support;
            assert!(comparison(&plan, tool, &info).mismatches.is_empty());
        }
    }

    #[test]
    fn the_run_start_report_keeps_its_words() {
        let plan = plan();
        let tool = &plan.tools[0];
        let schema = json!({
            "type": "object",
            "properties": {"deal_id": {"type": "string"}, "limit": {"type": "integer"}, "dry-run": {"type": "boolean"}},
            "required": ["deal_id", "owner"],
        });
        let mut report = ToolReport::default();
        compare(&plan, tool, &info(schema, Some(false)), &mut report);
        assert_eq!(report.errors.len(), 1);
        assert_eq!(
            report.errors[0].message,
            "the tool `get_deal` does not fit what the server `crm` offers as `get_deal`: the server requires `owner`, which the declaration does not send"
        );
        assert_eq!(
            report.warnings,
            [
                "the server `crm` says `get_deal` is not read-only, and the declaration says it is read-only; the declaration is used"
            ]
        );
    }
}
