//! A server's listings as `.pipe` declarations, ready to paste: the `server` block when
//! the server is declared nowhere yet, record types from the tools' schemas (each
//! structure once, and only those the tools use), a `tool` for each tool (its
//! annotations as settings, and `task` when the server runs it as an MCP task), a
//! `reader` for each resource template, and a suggested `link` kind as a
//! comment. The text is laid out by `pipec fmt`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::identifiers::{Taken, camel_case, is_identifier, kebab_case, snake_case};
use crate::mcp::{TaskSupport, TemplateInfo, ToolInfo};
use crate::runtime::ServerListing;
use crate::schema::read::{Declared, Direction, PipeType, Record, Types, description};
use crate::syntax::printer::escape;

/// What to declare, and what the file it goes into has already.
pub(crate) struct Pull<'a> {
    /// The server's name in the pipeline.
    pub server: &'a str,
    pub listing: &'a ServerListing,
    /// The `server` block, when the server is declared nowhere yet.
    pub server_block: Option<String>,
    /// Names already taken among servers, models, tools, readers and nodes.
    pub values: Taken,
    /// Names already taken among types and enums.
    pub types: Taken,
    /// Tools of this server the file declares, by the server's name → the local name.
    pub declared_tools: BTreeMap<String, String>,
    /// Readers of this server the file declares, by `uri` → the local name.
    pub declared_uris: BTreeMap<String, String>,
}

/// The largest content a pulled reader accepts, as written in its `max_bytes`.
const READER_MAX_BYTES: &str = "1mb";

/// The declarations, formatted.
pub(crate) fn declarations(pull: Pull<'_>) -> String {
    let Pull {
        server,
        listing,
        server_block,
        mut values,
        mut types,
        declared_tools,
        declared_uris,
    } = pull;
    let mut notes = Vec::new();
    let mut type_maker = Types::new(&mut types);
    let mut pulled = Vec::new();
    for tool in &listing.tools {
        if let Some(local) = declared_tools.get(&tool.name) {
            notes.push(format!(
                "// `{}` is declared already, as the tool `{local}`",
                tool.name
            ));
            continue;
        }
        pulled.push(pull_tool(tool, &mut values, &mut type_maker));
    }
    let used = pulled
        .iter()
        .flat_map(|t| t.params.iter().map(|p| &p.ty).chain([&t.returns]));
    let declared = type_maker.finish(used);
    let mut tools = String::new();
    for tool in &pulled {
        tools.push_str(&tool_declaration(server, tool, &declared));
        tools.push('\n');
    }
    let mut readers = String::new();
    for template in &listing.templates {
        if let Some(local) = declared_uris.get(&template.uri_template) {
            notes.push(format!(
                "// `{}` is read already, by the reader `{local}`",
                template.uri_template
            ));
            continue;
        }
        readers.push_str(&reader_declaration(server, template, &mut values));
        readers.push('\n');
    }

    let mut out = String::new();
    let version = listing
        .protocol_version
        .as_deref()
        .map(|v| format!(" (MCP {v})"))
        .unwrap_or_default();
    out.push_str(&format!(
        "// What the MCP server `{server}` offers{version}, from `pipec tools pull {server}`.\n"
    ));
    if listing.tools.is_empty() && listing.templates.is_empty() {
        out.push_str("// It lists no tools and no resource templates.\n");
    }
    for note in &notes {
        out.push_str(note);
        out.push('\n');
    }
    out.push('\n');
    if let Some(block) = server_block {
        out.push_str(&block);
        out.push('\n');
    }
    for record in &declared.records {
        out.push_str(&record_declaration(record, &declared));
        out.push('\n');
    }
    out.push_str(&tools);
    out.push_str(&readers);
    // `pipec fmt` lays it out as any file would be; the text parses, but should it not,
    // it is still worth printing as it is.
    crate::syntax::format_source(&out).unwrap_or(out)
}

/// `/// ` lines for a text; nothing for none.
fn doc_lines(text: Option<&str>, indent: &str) -> String {
    let Some(text) = text else {
        return String::new();
    };
    let mut out = String::new();
    for line in text.replace("\r\n", "\n").replace('\r', "\n").lines() {
        let line = line.trim_end();
        if line.is_empty() {
            out.push_str(&format!("{indent}///\n"));
        } else {
            out.push_str(&format!("{indent}/// {line}\n"));
        }
    }
    out
}

fn record_declaration(record: &Record, declared: &Declared) -> String {
    let mut out = doc_lines(record.doc.as_deref(), "");
    out.push_str(&format!("type {} {{\n", record.name));
    for field in &record.fields {
        out.push_str(&doc_lines(field.doc.as_deref(), "  "));
        out.push_str(&format!("  {}: {}\n", field.name, declared.text(&field.ty)));
    }
    for name in &record.left_out {
        out.push_str(&format!(
            "  // {} is left out: it is no pipec field name (a record reads fields it does not declare)\n",
            escape(name)
        ));
    }
    out.push_str("}\n");
    out
}

/// A tool to declare, its types made but not yet written: records are merged and
/// left out only once every tool's types are known.
struct PulledTool<'a> {
    info: &'a ToolInfo,
    local: String,
    params: Vec<PulledParam>,
    returns: PipeType,
}

struct PulledParam {
    name: String,
    wire: String,
    ty: PipeType,
    default: Option<String>,
    doc: Option<String>,
}

fn pull_tool<'a>(tool: &'a ToolInfo, values: &mut Taken, types: &mut Types<'_>) -> PulledTool<'a> {
    let local = values.claim(&snake_case(&tool.name, "tool"));
    let camel = camel_case(&local, "Tool");
    let schema = &tool.input_schema;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut params = Vec::new();
    let mut param_names = Taken::default();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (wire, property) in properties {
            let name = if is_identifier(wire) && !param_names.contains(wire) {
                param_names.claim(wire)
            } else {
                param_names.claim(&snake_case(wire, "param"))
            };
            let hint = format!("{camel}{}", camel_case(&name, "Param"));
            let ty = types.type_of(property, schema, &hint, Direction::Input);
            let default = property.get("default").and_then(|d| ty.literal(d));
            let (ty, default) = match (required.contains(&wire.as_str()), default) {
                (true, _) => (ty, None),
                (false, Some(d)) if d != "null" => (ty, Some(d)),
                (false, _) => (ty.optional(), None),
            };
            params.push(PulledParam {
                name,
                wire: wire.clone(),
                ty,
                default,
                doc: description(property),
            });
        }
    }
    let returns = match &tool.output_schema {
        Some(output) => types.type_of(output, output, &format!("{camel}Result"), Direction::Output),
        None => PipeType::json(),
    };
    PulledTool {
        info: tool,
        local,
        params,
        returns,
    }
}

fn tool_declaration(server: &str, pulled: &PulledTool<'_>, declared: &Declared) -> String {
    let tool = pulled.info;
    let local = &pulled.local;
    let mut params = String::new();
    for p in &pulled.params {
        params.push_str(&doc_lines(p.doc.as_deref(), "  "));
        params.push_str(&format!("  {}: {}", p.name, declared.text(&p.ty)));
        if p.name != p.wire {
            params.push_str(&format!(" as {}", escape(&p.wire)));
        }
        if let Some(d) = &p.default {
            params.push_str(&format!(" = {d}"));
        }
        params.push_str(",\n");
    }
    let doc = tool.description.as_deref().or(tool.title.as_deref());
    let mut out = doc_lines(doc, "");
    out.push_str(&format!("tool {local}("));
    if !params.is_empty() {
        out.push('\n');
        out.push_str(&params);
    }
    out.push_str(&format!(
        ") -> {} from {server} {{\n",
        declared.text(&pulled.returns)
    ));
    if *local != tool.name {
        out.push_str(&format!("  name = {}\n", escape(&tool.name)));
    }
    let no_annotations =
        tool.read_only.is_none() && tool.idempotent.is_none() && tool.destructive.is_none();
    if no_annotations {
        out.push_str(
            "  // the server gives no annotations: MCP's defaults (not read-only, not idempotent, destructive)\n",
        );
    }
    // MCP's defaults for hints a server leaves out are pipec's defaults too; writing them
    // anyway shows at a glance what the tool may do.
    if tool.read_only == Some(true) {
        out.push_str("  read_only = true\n");
    } else {
        out.push_str(&format!(
            "  idempotent = {}\n",
            tool.idempotent.unwrap_or(false)
        ));
        out.push_str(&format!(
            "  destructive = {}\n",
            tool.destructive.unwrap_or(true)
        ));
    }
    match tool.task_support {
        TaskSupport::Required => out.push_str("  task = \"required\"\n"),
        TaskSupport::Optional => out.push_str("  task = \"optional\"\n"),
        TaskSupport::Forbidden => {}
    }
    out.push_str("}\n");
    out
}

fn reader_declaration(server: &str, template: &TemplateInfo, values: &mut Taken) -> String {
    let Ok(parsed) = crate::uri::parse(&template.uri_template) else {
        return format!(
            "// {} is no valid URI template, so no reader reads it\n",
            escape(&template.uri_template)
        );
    };
    // Variables are reader parameters: names that are no identifiers (`deal.id` would
    // read as a field path) are renamed, here and in the template alike.
    let mut names = Taken::default();
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();
    let mut params: Vec<(String, bool)> = Vec::new();
    let mut uri = String::new();
    let mut copied = 0;
    for var in parsed.variables() {
        let local = match renamed.get(&var.name) {
            Some(local) => local.clone(),
            None => {
                let local = if is_identifier(&var.name) {
                    names.claim(&var.name)
                } else {
                    names.claim(&snake_case(&var.name, "var"))
                };
                renamed.insert(var.name.clone(), local.clone());
                params.push((local.clone(), var.explode));
                local
            }
        };
        if let Some(before) = template.uri_template.get(copied..var.start) {
            uri.push_str(before);
        }
        uri.push_str(&local);
        copied = var.end;
    }
    if let Some(rest) = template.uri_template.get(copied..) {
        uri.push_str(rest);
    }
    let returns = content_type(template.mime.as_deref());
    let local = values.claim(&snake_case(&template.name, "reader"));
    let doc = template
        .description
        .as_deref()
        .or(template.title.as_deref());
    let mut out = doc_lines(doc, "");
    let params: Vec<String> = params
        .iter()
        .map(|(name, explode)| {
            // An exploded variable takes a list or a record.
            let ty = if *explode { "json" } else { "string" };
            format!("{name}: {ty}")
        })
        .collect();
    out.push_str(&format!(
        "reader {local}({}) -> {returns} from {server} {{\n",
        params.join(", ")
    ));
    out.push_str(&format!("  uri = {}\n", escape(&uri)));
    out.push_str(&format!("  max_bytes = {READER_MAX_BYTES}\n"));
    let matchable = crate::uri::parse(&uri).is_ok_and(|t| t.check_matchable().is_ok());
    if matchable {
        let kind = kebab_case(&template.name, "resource");
        out.push_str("  // links to these resources in tool results are read with a link kind:\n");
        out.push_str(&format!(
            "  // link {}: {returns} = {}\n",
            escape(&kind),
            escape(&uri)
        ));
    }
    out.push_str("}\n");
    out
}

/// The type of a resource's content by its MIME type: JSON (or unknown) is `json`, other
/// text `string`, anything else `bytes`.
fn content_type(mime: Option<&str>) -> &'static str {
    let Some(mime) = mime else {
        return "json";
    };
    let essence = mime
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence.is_empty() || essence == "application/json" || essence.ends_with("+json") {
        "json"
    } else if essence.starts_with("text/") {
        "string"
    } else {
        "bytes"
    }
}
