//! `pipec mcp list | call | read | prompts | get`: one short session with the server, one
//! request, its answer printed as JSON on stdout (in MCP's form), and pipec's error (with
//! its code and what to do) on stderr when it fails. Exit 0 on an answer, 1 when the
//! server failed or a tool reported an error (`isError`, its result still printed), 2 for
//! a command pipec refused before reaching the server.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::Reach;
use crate::cli::common::{self, print_error};
use crate::cli::server_arg;
use crate::cli::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::diagnostic as codes;
use crate::mcp::{McpError, RequestOptions, ServerConfig, Session};
use crate::runtime::RuntimeError;

#[derive(clap::Args)]
pub(super) struct ListArgs {
    #[command(flatten)]
    reach: Reach,
}

#[derive(clap::Args)]
pub(super) struct CallArgs {
    #[command(flatten)]
    reach: Reach,
    /// The tool, by the name the server gives it
    #[arg(long)]
    tool: String,
    /// Its arguments, as a JSON object
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
}

#[derive(clap::Args)]
pub(super) struct ReadArgs {
    #[command(flatten)]
    reach: Reach,
    /// The resource's URI
    #[arg(long)]
    uri: String,
}

#[derive(clap::Args)]
pub(super) struct PromptsArgs {
    #[command(flatten)]
    reach: Reach,
}

#[derive(clap::Args)]
pub(super) struct GetArgs {
    #[command(flatten)]
    reach: Reach,
    /// The prompt, by the name the server gives it
    #[arg(long)]
    prompt: String,
    /// Its arguments, as a JSON object of strings
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
}

pub(super) fn list(a: ListArgs) -> u8 {
    ask(&a.reach, |session, _| async move {
        let offers = session.offers();
        let mut out = Map::new();
        out.insert("protocolVersion".into(), json!(session.protocol_version()));
        if offers.tools {
            let tools = session.list_tools().await?;
            out.insert(
                "tools".into(),
                tools.iter().map(|t| t.raw.clone()).collect(),
            );
        }
        if offers.resources {
            let resources = session.list_resources().await?;
            out.insert(
                "resources".into(),
                resources.iter().map(|r| r.raw.clone()).collect(),
            );
            let templates = session.list_resource_templates().await?;
            out.insert(
                "resourceTemplates".into(),
                templates.iter().map(|t| t.raw.clone()).collect(),
            );
        }
        if offers.prompts {
            let prompts = session.list_prompts().await?;
            out.insert(
                "prompts".into(),
                prompts.iter().map(|p| p.raw.clone()).collect(),
            );
        }
        Ok(Value::Object(out))
    })
}

pub(super) fn call(a: CallArgs) -> u8 {
    let Some(arguments) = object(&a.args, "--args") else {
        return EXIT_USAGE;
    };
    let tool = a.tool.clone();
    ask(&a.reach, |session, options| async move {
        // The listing says which tools the server runs only as tasks (2025-11-25);
        // a server that does not list is called all the same.
        let _ = session.list_tools().await;
        let result = session
            .call_tool(&tool, arguments, Map::new(), options)
            .await?;
        Ok(result.to_json())
    })
}

pub(super) fn read(a: ReadArgs) -> u8 {
    let uri = a.uri.clone();
    ask(&a.reach, |session, options| async move {
        let contents = session.read_resource(&uri, options).await?;
        Ok(json!({ "contents": contents.iter().map(|c| c.to_json()).collect::<Vec<_>>() }))
    })
}

pub(super) fn prompts(a: PromptsArgs) -> u8 {
    ask(&a.reach, |session, _| async move {
        let prompts = session.list_prompts().await?;
        Ok(json!({ "prompts": prompts.iter().map(|p| p.raw.clone()).collect::<Vec<_>>() }))
    })
}

pub(super) fn get(a: GetArgs) -> u8 {
    let Some(arguments) = object(&a.args, "--args") else {
        return EXIT_USAGE;
    };
    if let Some((name, _)) = arguments.iter().find(|(_, v)| !v.is_string()) {
        crate::cli::err(&format!(
            "error: `--args`: the argument `{name}` is not a string\n  help: prompt arguments are strings: `--args '{{\"{name}\": \"...\"}}'`"
        ));
        return EXIT_USAGE;
    }
    let prompt = a.prompt.clone();
    ask(&a.reach, |session, options| async move {
        session.get_prompt(&prompt, arguments, options).await
    })
}

/// `text` as a JSON object, else a usage error naming `flag`.
fn object(text: &str, flag: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Some(map),
        Ok(_) => {
            crate::cli::err(&format!(
                "error: `{flag}` is not a JSON object\n  help: write `{flag} '{{\"name\": \"value\"}}'`"
            ));
            None
        }
        Err(e) => {
            crate::cli::err(&format!(
                "error: `{flag}` is not JSON: {e}\n  help: write `{flag} '{{\"name\": \"value\"}}'` (in single quotes, for the shell)"
            ));
            None
        }
    }
}

/// The server's connection settings for a command of `pipec mcp`.
pub(super) fn config(reach: &Reach, command: &str) -> Result<ServerConfig, u8> {
    let target = server_arg::target(&reach.server, reach.file.as_deref(), command)?;
    let mut config = target.config()?;
    if let Some(seconds) = reach.timeout {
        match Duration::try_from_secs_f64(seconds) {
            Ok(timeout) if !timeout.is_zero() => config.request_timeout = timeout,
            _ => {
                crate::cli::err(&format!(
                    "error: `--timeout {seconds}` is not a number of seconds above 0"
                ));
                return Err(EXIT_USAGE);
            }
        }
    }
    Ok(config)
}

/// One session, `work` done in it, its answer printed.
fn ask<F, Fut>(reach: &Reach, work: F) -> u8
where
    F: FnOnce(std::sync::Arc<Session>, RequestOptions) -> Fut,
    Fut: std::future::Future<Output = Result<Value, McpError>>,
{
    let config = match config(reach, "mcp") {
        Ok(config) => config,
        Err(code) => return code,
    };
    let runtime = match common::runtime_or_exit() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let answer = runtime.block_on(async move {
        let session = std::sync::Arc::new(Session::connect(config).await?);
        let answer = work(session.clone(), RequestOptions::default()).await;
        session.close().await;
        answer
    });
    match answer {
        Ok(value) => {
            crate::cli::out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&value).unwrap_or_default()
            ));
            // A tool that ran and reports a failure (`isError`) fails the command, as a
            // call node would.
            if value.get("isError") == Some(&Value::Bool(true)) {
                EXIT_FINDINGS
            } else {
                EXIT_OK
            }
        }
        Err(e) => {
            fail(&e);
            EXIT_FINDINGS
        }
    }
}

/// `e` as pipec prints a server's failure.
pub(super) fn fail(e: &McpError) {
    let mut error = RuntimeError::new(&codes::MCP_SERVER_FAILED, e.to_string());
    if let Some(help) = e.help() {
        error = error.help(help);
    }
    print_error(&error);
}
