//! The command line and environment of `pipec-demo-crm`, read into `Settings`, and the
//! help that documents all of it.

use std::path::PathBuf;

use clap::Parser;

use super::data::Corpus;

/// The most emails or activities a deal may have: a million emails would be a gigabyte.
const MAX_RECORDS: usize = 100_000;

pub(crate) const HELP: &str = r#"Tools:
  get_deal(deal_id: string)   read-only, idempotent. The deal {deal_id, name, company, stage,
        amount, currency, owner, close_date, contacts} as structuredContent and as JSON text,
        then two resource_link blocks:
          mcp://crm/deals/{deal_id}/activity                    name {deal_id}-activity,
              description activity-history, mimeType application/json
          mcp://crm/deals/{deal_id}/emails/2025-01-01/2025-12-31   name
              {deal_id}-emails-2025-01-01-2025-12-31, description email-history, mimeType
              application/json, size = the exact byte size of that read
  get_deal_card(deal_id: string)   read-only, idempotent. No structuredContent: a text block
        "{name} ({stage}), owned by {owner}", the deal as an embedded resource
        mcp://crm/deals/{deal_id}/card (application/json; resources/read does not serve it),
        and the owner's picture as an image block (image/png, a 1x1 PNG)
  arm_expiry(count: int = 1)  the next COUNT email reads of this process fail as expired

Resource templates (application/json):
  mcp://crm/deals/{deal_id}/activity
        {"deal_id", "activity": [{at, kind, by, summary}]}
  mcp://crm/deals/{deal_id}/emails/{start}/{end}
        {deal_id, start, end, count, emails: [{id, date, from, to, subject, body}]}, the
        emails dated from START to END (YYYY-MM-DD, both included)
  An unknown URI, a bad date and an expired link all answer JSON-RPC error -32602 with
  data {"uri": URI}, the way MCP servers report a resource that is not there.
  The data is made up from the deal id and the two counts alone: the same everywhere.

Environment:
  CRM_EMAILS=N         emails per deal, just under 1 kB of JSON each (default 100: a whole
                       history of about 98 kB, under the caps of deal_research.pipe; at
                       most 100000)
  CRM_ACTIVITIES=N     activity entries per deal (default 50)
  CRM_EXPIRE_EMAILS=N  the first N email reads of this process fail as expired (default 0)
  CRM_EXPIRE_FILE=PATH a file holding a count: while it is above 0, each email read (of any
                       process) takes one from it and fails as expired
  CRM_CALL_LOG=PATH    append one line per tool call or read:
                         tool get_deal D1 [key=KEY] [fault=FAULT]
                         tool arm_expiry 2 [key=KEY] [fault=FAULT]
                         tool NAME {"arguments":"as JSON"} ...   (any other call)
                         read URI [fault=FAULT]
                       KEY is the value of the first _meta entry of the call whose name
                       contains "idempotency"; FAULT the injected fault's name
  CRM_FAULT_FILE=PATH  fault injection (below)
  CRM_TRANSPORT=stdio|streamable-http   (default stdio; --http wins)
  CRM_HTTP_PORT=PORT   the port for CRM_TRANSPORT=streamable-http, on 127.0.0.1
                       (default 8765; 0 picks a free port)
  CRM_PORT_FILE=PATH   over HTTP, also write the bound address HOST:PORT there (whole,
                       by renaming), as well as on stdout
  CRM_HEADER_LOG=PATH  over HTTP, append one line per request:
                         HTTP POST /mcp authorization='Bearer t' mcp-protocol-version='2025-11-25' mcp-session-id=set
                       (None for a header not sent)
  CRM_BEARER_TOKEN=T   over HTTP, every request must carry `Authorization: Bearer T`;
                       any other gets 401 with a WWW-Authenticate challenge and a JSON
                       body {"error", "error_description"} saying what was wrong

Fault injection: while CRM_FAULT_FILE exists, every tool call and read checks it; the
first line that applies to the request decides its answer, and a line with TIMES is
counted down in the file (0: used up). One fault a line, `FAULT ON [TIMES]`:
  ON:  tool NAME | read [URI-PREFIX]        (a number after `read` is TIMES)
  exit              the process exits at once, answering nothing
  hang              the request is never answered (others still are)
  garbage           a line that is not JSON instead of the answer
  huge BYTES        the answer is one line of at least BYTES bytes of valid JSON-RPC
  bad-link [not-a-uri|no-uri]   a tool result whose resource_links are followed by one
                    with "uri": "not a uri" (or no uri at all)
  error CODE        a JSON-RPC error of that code, message `injected error` (data {"uri"}
                    for a read)
  empty             a read with no contents (a tool: no content blocks)
  status CODE       over HTTP only: that status (200 to 599) instead of the answer
  close             over HTTP only: the connection drops halfway through the answer
Lines starting with # are comments. Example:
  hang tool get_deal 1
  error -32603 read mcp://crm/deals/D1/emails/
"#;

/// A demo CRM MCP server for pipec's examples and tests: deals with activity and email
/// histories linked from a tool result, expiring links and injected faults on request.
#[derive(Parser, Debug)]
#[command(name = "pipec-demo-crm", version, after_help = HELP)]
pub(crate) struct Args {
    /// Serve streamable HTTP at ADDR (HOST:PORT, path /mcp; port 0 picks a free one)
    /// instead of stdio
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Listen {
    Stdio,
    Http(String),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Settings {
    pub(crate) listen: Listen,
    pub(crate) corpus: Corpus,
    pub(crate) expire_emails: u64,
    pub(crate) expire_file: Option<PathBuf>,
    pub(crate) call_log: Option<PathBuf>,
    pub(crate) fault_file: Option<PathBuf>,
    pub(crate) header_log: Option<PathBuf>,
    pub(crate) port_file: Option<PathBuf>,
    pub(crate) bearer_token: Option<String>,
}

/// Why the settings were refused, and what to type instead.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SettingsError {
    pub(crate) message: String,
    pub(crate) help: String,
}

/// Reads the environment through `env` (an unset or empty variable is `None`).
pub(crate) fn settings(
    args: Args,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, SettingsError> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty());
    let path = |name: &str| var(name).map(PathBuf::from);
    let count = |name: &str, default: usize| -> Result<usize, SettingsError> {
        let Some(text) = var(name) else {
            return Ok(default);
        };
        match text.trim().parse::<usize>() {
            Ok(n) if n <= MAX_RECORDS => Ok(n),
            _ => Err(SettingsError {
                message: format!("{name} must be a whole number up to {MAX_RECORDS}, not {text:?}"),
                help: format!("set {name}={default}, or leave it unset"),
            }),
        }
    };
    let listen = match (args.http, var("CRM_TRANSPORT")) {
        (Some(addr), _) => Listen::Http(addr),
        (None, None) => Listen::Stdio,
        (None, Some(transport)) => match transport.as_str() {
            "stdio" => Listen::Stdio,
            "streamable-http" => {
                let port = match var("CRM_HTTP_PORT") {
                    None => 8765,
                    Some(text) => text.trim().parse::<u16>().map_err(|_| SettingsError {
                        message: format!("CRM_HTTP_PORT must be a port number, not {text:?}"),
                        help: "set CRM_HTTP_PORT=0 for a free port, or leave it unset for 8765"
                            .into(),
                    })?,
                };
                Listen::Http(format!("127.0.0.1:{port}"))
            }
            other => {
                let known = ["stdio", "streamable-http"];
                return Err(SettingsError {
                    message: format!("CRM_TRANSPORT is {other:?}, which is no transport"),
                    help: pipec_base::names::did_you_mean(other, known).unwrap_or_else(|| {
                        "set CRM_TRANSPORT=stdio or CRM_TRANSPORT=streamable-http".into()
                    }),
                });
            }
        },
    };
    Ok(Settings {
        listen,
        corpus: Corpus {
            emails: count("CRM_EMAILS", 100)?,
            activities: count("CRM_ACTIVITIES", 50)?,
        },
        expire_emails: count("CRM_EXPIRE_EMAILS", 0)? as u64,
        expire_file: path("CRM_EXPIRE_FILE"),
        call_log: path("CRM_CALL_LOG"),
        fault_file: path("CRM_FAULT_FILE"),
        header_log: path("CRM_HEADER_LOG"),
        port_file: path("CRM_PORT_FILE"),
        bearer_token: var("CRM_BEARER_TOKEN"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(args: &[&str], vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let args =
            Args::try_parse_from(std::iter::once("pipec-demo-crm").chain(args.iter().copied()));
        let args = match args {
            Ok(args) => args,
            Err(e) => panic!("{e}"),
        };
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        settings(args, &move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn the_defaults_are_stdio_and_a_hundred_emails() {
        let settings = read(&[], &[]);
        assert_eq!(
            settings
                .as_ref()
                .map(|s| (&s.listen, s.corpus, s.expire_emails)),
            Ok((
                &Listen::Stdio,
                Corpus {
                    emails: 100,
                    activities: 50
                },
                0
            ))
        );
    }

    #[test]
    fn http_comes_from_the_flag_or_the_environment() {
        let flag = read(&["--http", "127.0.0.1:0"], &[("CRM_TRANSPORT", "stdio")]);
        assert_eq!(
            flag.map(|s| s.listen),
            Ok(Listen::Http("127.0.0.1:0".into()))
        );
        let env = read(
            &[],
            &[("CRM_TRANSPORT", "streamable-http"), ("CRM_HTTP_PORT", "0")],
        );
        assert_eq!(
            env.map(|s| s.listen),
            Ok(Listen::Http("127.0.0.1:0".into()))
        );
        let default_port = read(&[], &[("CRM_TRANSPORT", "streamable-http")]);
        assert_eq!(
            default_port.map(|s| s.listen),
            Ok(Listen::Http("127.0.0.1:8765".into()))
        );
    }

    #[test]
    fn bad_values_are_refused_with_what_to_type() {
        let emails = read(&[], &[("CRM_EMAILS", "lots")]);
        assert!(
            matches!(&emails, Err(e) if e.help.contains("CRM_EMAILS=100")),
            "{emails:?}"
        );
        let transport = read(&[], &[("CRM_TRANSPORT", "streamable_http")]);
        assert!(
            matches!(&transport, Err(e) if e.help == "did you mean `streamable-http`?"),
            "{transport:?}"
        );
        let port = read(
            &[],
            &[
                ("CRM_TRANSPORT", "streamable-http"),
                ("CRM_HTTP_PORT", "99999"),
            ],
        );
        assert!(port.is_err());
        assert!(read(&[], &[("CRM_ACTIVITIES", "1000000")]).is_err());
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let settings = read(&[], &[("CRM_EMAILS", ""), ("CRM_CALL_LOG", "")]);
        assert_eq!(
            settings.map(|s| (s.corpus.emails, s.call_log)),
            Ok((100, None))
        );
    }
}
