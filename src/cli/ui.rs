//! `pipec ui`: the web inspector of a store's threads (`pipec_ui`), on a loopback address
//! with a token by default, as `pipec serve --http` is reached.

use std::path::PathBuf;

use super::common;
use super::{EXIT_OK, EXIT_USAGE};
use crate::serve::access::{AccessRequest, decide};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The store to inspect (default: the project's `.pipec/runs.redb`, or `PIPEC_STORE`)
    #[arg(long)]
    store: Option<PathBuf>,
    /// Where to listen (HOST:PORT; port 0 picks a free one)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:4545")]
    addr: String,
    /// On a loopback address: accept requests without the token
    #[arg(long)]
    no_auth: bool,
    /// A host name browsers use to reach the inspector (needed beyond loopback)
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
}

pub(super) fn run(args: Args) -> u8 {
    let access = match decide(&AccessRequest {
        addr: args.addr.clone(),
        no_auth: args.no_auth,
        allowed_hosts: args.allowed_hosts.clone(),
        allowed_origins: Vec::new(),
        token: std::env::var("PIPEC_UI_TOKEN").ok(),
    }) {
        Ok(a) => a,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return EXIT_USAGE;
        }
    };
    let store_path = common::store_path(&args.store, &common::default_root());
    let (rt, store) = match common::runtime_and_store(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let options = pipec_ui::UiOptions {
        token: access.http.token.clone(),
        allowed_hosts: args.allowed_hosts.clone(),
        spans: super::telemetry::spans(),
    };
    rt.block_on(async move {
        let ui = match pipec_ui::bind(store, &args.addr, options.clone()).await {
            Ok(ui) => ui,
            Err(e) => {
                super::err(&format!("error: {e}"));
                return EXIT_USAGE;
            }
        };
        let addr = match ui.addr() {
            Ok(a) => a,
            Err(e) => {
                super::err(&format!("error: {e}"));
                return EXIT_USAGE;
            }
        };
        let url = match &options.token {
            Some(t) => format!("http://{addr}/#token={t}"),
            None => format!("http://{addr}/"),
        };
        super::err(&format!(
            "pipec ui: open {url}\n  (the store is {}; stop with Ctrl-C)",
            common::shown(&store_path)
        ));
        ui.run().await;
        EXIT_OK
    })
}
