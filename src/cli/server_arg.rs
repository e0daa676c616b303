//! Which server a command talks to (`pipec tools pull`, `pipec mcp`): one a `.pipe` file
//! declares (by name, in the file given or the folder's only one), or one declared nowhere,
//! reached with `--command` or `--url` (with `--header`s, read as secrets).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cli::common::print_error;
use crate::cli::{EXIT_FINDINGS, EXIT_USAGE};
use crate::identifiers::{is_identifier, snake_case};
use crate::mcp::ServerConfig;
use crate::names::env_var_name;
use crate::plan::{ConfigValue, Server};
use crate::source::FsLoader;
use crate::syntax::printer::escape;

/// Which server a command talks to: one a `.pipe` file declares, or one given with
/// `--command` or `--url`.
#[derive(clap::Args)]
pub(crate) struct ServerArgs {
    /// The server: its name in the .pipe file that declares it, or the name to declare
    /// it under with `--command` or `--url`
    pub(crate) server: String,
    /// Reach a server declared nowhere: the command that starts it over stdio, as one
    /// argument (`--command "my-server --flag"`)
    #[arg(long, conflicts_with = "url")]
    pub(crate) command: Option<String>,
    /// Reach a server declared nowhere over streamable HTTP
    #[arg(long)]
    pub(crate) url: Option<String>,
    /// An HTTP header for `--url`: `Name=value` (read as a secret: never printed)
    #[arg(long = "header", value_name = "NAME=VALUE", requires = "url")]
    pub(crate) headers: Vec<String>,
}

/// Where the server's declaration comes from, and what the output must stay clear of.
pub(crate) struct Target {
    pub(crate) server: Server,
    /// The folder its relative paths and `env()` values are read from.
    pub(crate) root: PathBuf,
    /// The `server` block to print, for a server declared nowhere yet.
    pub(crate) block: Option<String>,
    /// Header values given on the command line, under the secret names the block uses.
    pub(crate) given_secrets: BTreeMap<String, String>,
    /// The file's own names, when the server is one it declares.
    pub(crate) file: Option<FileNames>,
}

/// What a `.pipe` file already declares, so that pasted declarations do not clash.
#[derive(Default)]
pub(crate) struct FileNames {
    pub(crate) values: Vec<String>,
    pub(crate) types: Vec<String>,
    pub(crate) tools: BTreeMap<String, String>,
    pub(crate) uris: BTreeMap<String, String>,
}

impl Target {
    /// The server's connection settings, its `env()` values and secrets read from the
    /// environment (and from `--header`), as a run would read them.
    pub(crate) fn config(&self) -> Result<ServerConfig, u8> {
        let environment = |k: &str| {
            self.given_secrets
                .get(k)
                .cloned()
                .or_else(|| std::env::var(k).ok())
        };
        crate::runtime::server_config_from_environment(&self.server, &self.root, &environment)
            .map_err(|e| {
                print_error(&e);
                EXIT_FINDINGS
            })
    }
}

fn usage(message: String) -> u8 {
    crate::cli::err(&message);
    EXIT_USAGE
}

/// The server `args` name, declared in `file` (else the folder's only `.pipe` file) when
/// it is not given with `--command` or `--url`; `command` is the pipec command, for help.
pub(crate) fn target(args: &ServerArgs, file: Option<&Path>, command: &str) -> Result<Target, u8> {
    if args.command.is_some() || args.url.is_some() {
        return given_target(args);
    }
    let file = match file.map(Path::to_path_buf) {
        Some(file) => file.clone(),
        None => only_pipe_file(command).map_err(usage)?,
    };
    if !file.is_file() {
        return Err(usage(format!(
            "error: cannot read `{}`: no such file",
            file.display()
        )));
    }
    declared_target(&file, &args.server)
}

/// The one `.pipe` file of the current folder.
fn only_pipe_file(command: &str) -> Result<PathBuf, String> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(".")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.extension().is_some_and(|x| x == "pipe")
                        && p.is_file()
                        && !p
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!(
            "error: no .pipe file in this folder\n  help: name the file that declares the server (`pipec {command} SERVER FILE`), or reach a server declared nowhere with `--command` or `--url`"
        )),
        many => Err(format!(
            "error: several .pipe files in this folder: {}\n  help: name the one that declares the server: `pipec {command} SERVER FILE`",
            many.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// A server the file declares (or imports without a namespace).
fn declared_target(file: &Path, name: &str) -> Result<Target, u8> {
    let display = file.to_string_lossy().into_owned();
    let analysis = crate::analyze(&FsLoader, file, &display);
    let hir = &analysis.hir;
    let visible: Vec<&str> = hir
        .servers
        .iter()
        .map(|s| s.info.display.as_str())
        .filter(|n| !n.contains('.'))
        .collect();
    let Some((id, server)) = hir
        .servers
        .iter()
        .enumerate()
        .find(|(_, s)| s.info.display == name)
    else {
        let help = if visible.is_empty() {
            "it declares none; reach a server declared nowhere with `--command` or `--url`"
                .to_string()
        } else {
            crate::names::did_you_mean(name, visible.iter().copied())
                .unwrap_or_else(|| format!("it declares: {}", visible.join(", ")))
        };
        return Err(usage(format!(
            "error: `{display}` declares no server `{name}`\n  help: {help}"
        )));
    };
    if server.command.is_none() && server.url.is_none() {
        return Err(usage(format!(
            "error: the server `{name}` of `{display}` has neither `command` nor `url`\n  help: say how to start it: `command = \"my-mcp-server\"`"
        )));
    }
    let mut names = FileNames::default();
    let plain = |n: &str| !n.contains('.');
    names.values.extend(
        hir.servers
            .iter()
            .map(|s| s.info.display.clone())
            .chain(hir.models.iter().map(|m| m.info.display.clone()))
            .chain(hir.tools.iter().map(|t| t.info.display.clone()))
            .chain(hir.nodes.iter().map(|n| n.info.display.clone()))
            .filter(|n| plain(n)),
    );
    names.types.extend(
        hir.types
            .iter()
            .map(|t| t.info.display.clone())
            .filter(|n| plain(n)),
    );
    for tool in hir.tools.iter().filter(|t| t.server == Some(id as u32)) {
        if tool.is_reader {
            if let Some(uri) = &tool.uri {
                names
                    .uris
                    .insert(uri.text.clone(), tool.info.display.clone());
            }
        } else {
            names
                .tools
                .insert(tool.wire_name.clone(), tool.info.display.clone());
        }
    }
    Ok(Target {
        server: pipec_check::lower_server(hir, server),
        root: hir.project_root.clone(),
        block: None,
        given_secrets: BTreeMap::new(),
        file: Some(names),
    })
}

/// A server declared nowhere, reached with `--command` or `--url`.
fn given_target(args: &ServerArgs) -> Result<Target, u8> {
    let name = &args.server;
    if !is_identifier(name) {
        return Err(usage(format!(
            "error: `{name}` cannot name a server in a .pipe file\n  help: call it `{}`",
            snake_case(name, "server")
        )));
    }
    let root = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut server = Server {
        name: name.clone(),
        command: None,
        args: Vec::new(),
        env: BTreeMap::new(),
        cwd: None,
        url: None,
        headers: BTreeMap::new(),
        oauth: None,
        elicitation: Default::default(),
        sampling: None,
        resources: Vec::new(),
        startup_timeout_ms: None,
        timeout_ms: None,
        base_dir: String::new(),
    };
    let mut given_secrets = BTreeMap::new();
    let mut block = format!("server {name} {{\n");
    if let Some(command) = &args.command {
        let words = split_words(command).map_err(|e| usage(format!("error: `--command`: {e}")))?;
        let Some((program, rest)) = words.split_first() else {
            return Err(usage(
                "error: `--command` is empty\n  help: give the program and its arguments: `--command \"my-server --stdio\"`".to_string(),
            ));
        };
        block.push_str(&format!("  command = {}\n", escape(program)));
        if !rest.is_empty() {
            let quoted: Vec<String> = rest.iter().map(|a| escape(a)).collect();
            block.push_str(&format!("  args = [{}]\n", quoted.join(", ")));
        }
        server.command = Some(program.clone().into());
        server.args = rest.iter().cloned().map(Into::into).collect();
    }
    if let Some(url) = &args.url {
        block.push_str(&format!("  url = {}\n", escape(url)));
        let mut entries = Vec::new();
        for header in &args.headers {
            let Some((key, value)) = header.split_once('=') else {
                return Err(usage(format!(
                    "error: `--header {header}`: write `--header Name=value`"
                )));
            };
            let key = key.trim();
            // A header value is often a credential: the declaration reads it from a
            // secret, and the session gets it the same way.
            let var = env_var_name(&format!("{name} {key}"));
            given_secrets.insert(var.clone(), value.to_string());
            server
                .headers
                .insert(key.to_string(), ConfigValue::Secret { var: var.clone() });
            let key_text = if is_identifier(key) {
                key.to_string()
            } else {
                escape(key)
            };
            entries.push(format!("{key_text}: secret({})", escape(&var)));
        }
        if !entries.is_empty() {
            block.push_str(&format!("  headers = {{ {} }}\n", entries.join(", ")));
        }
        server.url = Some(url.clone().into());
    }
    block.push_str("}\n");
    Ok(Target {
        server,
        root,
        block: Some(block),
        given_secrets,
        file: None,
    })
}

/// A command line cut into words as a shell would for a simple command: blanks
/// separate words, single quotes keep everything, double quotes keep all but `\"` and
/// `\\`, and a backslash outside quotes keeps the next character.
fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => current.push(c),
                        None => return Err("a single quote is not closed".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => current.push(c),
                            Some(c) => {
                                current.push('\\');
                                current.push(c);
                            }
                            None => return Err("a double quote is not closed".into()),
                        },
                        Some(c) => current.push(c),
                        None => return Err("a double quote is not closed".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => current.push(c),
                    None => return Err("the command ends with a lone backslash".into()),
                }
            }
            c => {
                in_word = true;
                current.push(c);
            }
        }
    }
    if in_word {
        words.push(current);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_as_a_shell_would() {
        assert_eq!(
            split_words("python3 'my server.py' --name \"a \\\"b\\\"\" x\\ y").ok(),
            Some(vec![
                "python3".to_string(),
                "my server.py".to_string(),
                "--name".to_string(),
                "a \"b\"".to_string(),
                "x y".to_string(),
            ])
        );
        assert_eq!(split_words("  ").ok(), Some(Vec::new()));
        assert!(split_words("a 'b").is_err());
        assert_eq!(split_words("''").ok(), Some(vec![String::new()]));
    }
}
