//! `pipec serve [DIR|FILE ...] [--resources SPEC ...]`: the `serve` blocks of `.pipe`
//! files and reShapr Resources specifications, served as one MCP server over stdio (the
//! default: nothing but protocol on stdout, logs on stderr) or over streamable HTTP
//! (`--http ADDR`: loopback and a bearer token by default).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::pipe_files::pipe_files;
use super::{ColorChoice, EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::diagnostic::{self, Diagnostic, TerminalOptions};
use crate::mcp::server::{
    HttpLimits, Provider, ServerIdentity, SubscriptionLimits, bind_http, serve_stdio,
};
use crate::serve::access::{AccessRequest, decide};
use crate::serve::build::{BuildOptions, registry as registry_of};
use crate::serve::catalogue::Catalogue;
use crate::serve::from_plan::catalogue_from_plan;
use crate::serve::pipelines::{PipelineTools, ServedPipeline};
use crate::serve::spec::load_spec_file;
use crate::source::{FsLoader, SourceDb};

#[derive(clap::Args)]
pub(super) struct Args {
    /// `.pipe` files, or folders of them, whose `serve` blocks are served
    paths: Vec<PathBuf>,
    /// A reShapr Resources specification (YAML) to serve; may be repeated
    #[arg(long = "resources", value_name = "SPEC")]
    resources: Vec<PathBuf>,
    /// The HTTP base URL that reShapr templates (which name no backend) read from
    #[arg(long, value_name = "URL")]
    backend: Option<String>,
    /// Serve over streamable HTTP at ADDR (such as 127.0.0.1:8080) instead of stdio
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// With --http on a loopback address: accept requests without the bearer token
    #[arg(long)]
    no_auth: bool,
    /// With --http: a host name clients use to reach this server (needed beyond loopback)
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// With --http: a browser origin allowed to call (scheme://host[:port])
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,
    /// Fetch the `remoteContent` URLs of specifications (refused otherwise)
    #[arg(long)]
    allow_remote_content: bool,
    /// The store the served pipelines' runs are kept in (default: the project's
    /// `.pipec/runs.redb`, or `PIPEC_STORE`)
    #[arg(long, value_name = "PATH")]
    store: Option<PathBuf>,
    /// How long a tool call waits for its run before answering with the run's link
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    wait: u64,
    /// Subscriptions one session may hold (over HTTP in the 2026-07-28 era: one listen)
    #[arg(long, value_name = "N", default_value_t = SubscriptionLimits::DEFAULT_PER_SESSION as u64, value_parser = clap::value_parser!(u64).range(1..))]
    max_subscriptions_per_session: u64,
    /// Subscriptions all sessions together may hold
    #[arg(long, value_name = "N", default_value_t = SubscriptionLimits::DEFAULT_TOTAL as u64, value_parser = clap::value_parser!(u64).range(1..))]
    max_subscriptions: u64,
    /// With --http: connections open at once
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: Option<u64>,
    /// With --http: how long a connection may take to send a request's headers (and
    /// stay idle between requests)
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout: Option<u64>,
    /// With --http: legacy sessions at once
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_sessions: Option<u64>,
    /// With --http: how long a legacy session outlives its client's last connection
    #[arg(long, value_name = "SECONDS")]
    session_timeout: Option<u64>,
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
}

pub(super) fn run(args: Args) -> u8 {
    if args.paths.is_empty() && args.resources.is_empty() {
        super::err(
            "error: nothing to serve: name .pipe files or folders with `serve` blocks, or specifications with --resources SPEC",
        );
        return EXIT_USAGE;
    }
    let http_only = args.no_auth
        || !args.allowed_hosts.is_empty()
        || !args.allowed_origins.is_empty()
        || args.max_connections.is_some()
        || args.header_timeout.is_some()
        || args.max_sessions.is_some()
        || args.session_timeout.is_some();
    if args.http.is_none() && http_only {
        super::err(
            "error: --no-auth, --allowed-host, --allowed-origin, --max-connections, --header-timeout, --max-sessions and --session-timeout apply to --http ADDR only",
        );
        return EXIT_USAGE;
    }
    let opts = TerminalOptions {
        color: args.color.enabled(),
        width: 100,
    };
    let files = match pipe_files(&args.paths) {
        Ok(files) => files,
        Err(problem) => {
            super::err(&problem.message());
            return EXIT_USAGE;
        }
    };
    let Some((catalogues, pipelines)) = load_all(&files, &args.resources, opts) else {
        super::err(
            "error: nothing was served: fix the errors above (`pipec check` shows them too)",
        );
        return EXIT_FINDINGS;
    };
    if pipelines.is_empty()
        && catalogues
            .iter()
            .all(|c| c.resources.is_empty() && c.templates.is_empty() && c.prompts.is_empty())
    {
        let named: Vec<String> = files
            .iter()
            .chain(&args.resources)
            .map(|f| format!("`{}`", f.display()))
            .collect();
        super::err(&format!(
            "error: nothing to serve: {} {} no resource, no resource template, no prompt and no pipeline\n  help: add a `serve {{ resources {{ ... }} }}` block, or nodes (a pipeline with nodes is served as a tool of its name)",
            named.join(", "),
            if named.len() == 1 {
                "declares"
            } else {
                "declare"
            }
        ));
        return EXIT_USAGE;
    }
    let identity = identity(&catalogues);
    let options = BuildOptions {
        backend: args.backend.clone(),
        allow_remote_content: args.allow_remote_content,
    };
    let built = match registry_of(identity.clone(), &catalogues, &options) {
        Ok(b) => b,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return EXIT_FINDINGS;
        }
    };
    let mut registry = built.registry;
    if !pipelines.is_empty() {
        let folder = pipec_runtime::credentials::config_folder();
        match crate::serve::access::state_key(folder.as_deref()) {
            Ok(key) => registry = registry.with_state_key(key),
            Err(e) => {
                super::err(&format!("error: {e}"));
                return EXIT_USAGE;
            }
        }
    }
    let registry = Arc::new(registry);
    registry.updates().set_limits(SubscriptionLimits {
        per_session: usize::try_from(args.max_subscriptions_per_session).unwrap_or(usize::MAX),
        total: usize::try_from(args.max_subscriptions).unwrap_or(usize::MAX),
    });
    let runtime = match super::common::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return EXIT_USAGE;
        }
    };
    if !pipelines.is_empty() {
        let root = pipelines
            .first()
            .map(|p| p.root.clone())
            .unwrap_or_else(super::common::default_root);
        let store_path = super::common::store_path(&args.store, &root);
        let store = match crate::store::open(
            &store_path.to_string_lossy(),
            crate::store::OpenMode::Create,
        ) {
            Ok(s) => s,
            Err(e) => {
                super::common::print_store_error(e, &store_path);
                return EXIT_USAGE;
            }
        };
        let mut tools =
            PipelineTools::new(store, pipelines, std::time::Duration::from_secs(args.wait));
        if let Some(sink) = super::telemetry::spans() {
            tools = tools.traced(sink);
        }
        if let Err(e) = runtime.block_on(async { tools.install(&registry) }) {
            super::err(&format!("error: {e}"));
            return EXIT_USAGE;
        }
    }
    let mut watched: Vec<PathBuf> = files.clone();
    watched.extend(args.resources.iter().cloned());
    let rebuild = {
        let (files, specs, options, identity) = (
            files.clone(),
            args.resources.clone(),
            options.clone(),
            identity.clone(),
        );
        Box::new(move || {
            let catalogues =
                load(&files, &specs, opts).ok_or_else(|| "the errors above".to_string())?;
            registry_of(identity.clone(), &catalogues, &options)
        }) as crate::serve::watch::Rebuild
    };
    let _watcher = runtime.block_on(async {
        crate::serve::watch::Watcher::start(
            registry.clone(),
            built.file_templates,
            Some(crate::serve::watch::Specs {
                paths: watched,
                rebuild,
            }),
        )
    });
    let provider: Arc<dyn Provider> = registry;
    match &args.http {
        None => match runtime.block_on(serve_stdio(provider)) {
            Ok(()) => EXIT_OK,
            Err(e) => {
                super::err(&format!("error: {e}"));
                EXIT_FINDINGS
            }
        },
        Some(addr) => {
            let request = AccessRequest {
                addr: addr.clone(),
                no_auth: args.no_auth,
                allowed_hosts: args.allowed_hosts.clone(),
                allowed_origins: args.allowed_origins.clone(),
                token: std::env::var("PIPEC_SERVE_TOKEN").ok(),
            };
            let access = match decide(&request) {
                Ok(a) => a,
                Err(e) => {
                    super::err(&format!("error: {e}"));
                    return EXIT_USAGE;
                }
            };
            let limits = http_limits(&args);
            runtime.block_on(async move {
                let token = access.http.token.clone();
                let server = match bind_http(provider, addr, access.http, limits).await {
                    Ok(s) => s,
                    Err(e) => {
                        super::err(&format!("error: {e}"));
                        return EXIT_USAGE;
                    }
                };
                super::err(&format!("pipec serve: MCP at http://{}/mcp", server.addr));
                match (&token, access.made_token) {
                    (Some(t), true) => super::err(&format!("pipec serve: send `Authorization: Bearer {t}` (set PIPEC_SERVE_TOKEN to choose the token)")),
                    (Some(_), false) => super::err("pipec serve: the bearer token is PIPEC_SERVE_TOKEN's"),
                    (None, _) => super::err("pipec serve: no token needed (--no-auth, loopback only)"),
                }
                server.run().await;
                EXIT_OK
            })
        }
    }
}

/// The limits of `--http`, the defaults where no option is given.
fn http_limits(args: &Args) -> HttpLimits {
    let count = |n: Option<u64>, default: usize| {
        n.map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
    };
    let seconds = |n: Option<u64>, default: Duration| n.map_or(default, Duration::from_secs);
    HttpLimits {
        max_connections: count(args.max_connections, HttpLimits::DEFAULT_MAX_CONNECTIONS),
        header_timeout: seconds(args.header_timeout, HttpLimits::DEFAULT_HEADER_TIMEOUT),
        max_sessions: count(args.max_sessions, HttpLimits::DEFAULT_MAX_SESSIONS),
        session_timeout: seconds(args.session_timeout, HttpLimits::DEFAULT_SESSION_TIMEOUT),
    }
}

/// The catalogues of the `.pipe` files and specifications, their diagnostics printed;
/// `None` when one has errors.
fn load(files: &[PathBuf], specs: &[PathBuf], opts: TerminalOptions) -> Option<Vec<Catalogue>> {
    load_all(files, specs, opts).map(|(c, _)| c)
}

/// [`load`], with the pipelines among the files (those with nodes), which are served as
/// tools.
fn load_all(
    files: &[PathBuf],
    specs: &[PathBuf],
    opts: TerminalOptions,
) -> Option<(Vec<Catalogue>, Vec<ServedPipeline>)> {
    let mut catalogues = Vec::new();
    let mut pipelines = Vec::new();
    let mut failed = false;
    for file in files {
        let name = file.to_string_lossy().into_owned();
        let analysis = crate::analyze(&FsLoader, file, &name);
        report(&analysis.db, &analysis.diagnostics, opts);
        let root = analysis.hir.project_root.clone();
        match crate::lower_analysis(analysis, file) {
            Ok(plan) => match catalogue_from_plan(&plan, &root) {
                Ok(c) => {
                    catalogues.push(c);
                    if !plan.nodes.is_empty() {
                        let source = std::path::absolute(file)
                            .unwrap_or_else(|_| file.clone())
                            .display()
                            .to_string();
                        pipelines.push(ServedPipeline {
                            plan: Arc::new(plan),
                            root: root.clone(),
                            source,
                        });
                    }
                }
                Err(e) => {
                    super::err(&format!("error[{}]: {e}", e.rule().code));
                    failed = true;
                }
            },
            Err(_) => failed = true,
        }
    }
    for spec in specs {
        let mut db = SourceDb::default();
        let name = spec.to_string_lossy().into_owned();
        let load = load_spec_file(&mut db, spec, &name);
        report(&db, &load.diagnostics, opts);
        if load.has_errors() {
            failed = true;
        } else {
            catalogues.push(load.catalogue);
        }
    }
    // Each pipeline is a tool named after it: two of one name would hide one.
    let mut names: Vec<&str> = pipelines.iter().map(|p| p.plan.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        super::err(&format!(
            "error: two served pipelines are named `{}`, and each is a tool of its name: rename one of the files",
            w[0]
        ));
        failed = true;
    }
    (!failed).then_some((catalogues, pipelines))
}

fn report(db: &SourceDb, diags: &[Diagnostic], opts: TerminalOptions) {
    if !diags.is_empty() {
        super::err(diagnostic::render_terminal(db, diags, opts).trim_end());
    }
}

/// A lone specification's service names the server; otherwise it is pipec.
fn identity(catalogues: &[Catalogue]) -> ServerIdentity {
    let services: Vec<_> = catalogues
        .iter()
        .filter_map(|c| c.service.as_ref())
        .collect();
    match services.as_slice() {
        [one] if catalogues.len() == 1 => ServerIdentity {
            name: one.name.clone(),
            version: one.version.clone(),
            title: None,
            instructions: None,
        },
        _ => ServerIdentity {
            name: "pipec".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            title: Some("pipec serve".into()),
            instructions: None,
        },
    }
}
