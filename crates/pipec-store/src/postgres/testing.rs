//! A fresh place for each test in the server the tests are given
//! (`PIPEC_TEST_POSTGRES=postgres://...`, a server where they may create schemas): a
//! schema of its own, named on the URL's `options`, dropped when the test ends. Without
//! the variable the Postgres tests say that they are skipped, unless
//! `PIPEC_REQUIRE_POSTGRES=1` (which `scripts/test` sets), when they fail.

use std::sync::atomic::{AtomicU32, Ordering};

use super::{PgOpen, PgOptions, PostgresStore};
use crate::StoreError;

/// The server's URL, or `None` (with a line saying the test is skipped).
pub(crate) fn server(test: &str) -> Option<String> {
    match std::env::var("PIPEC_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("PIPEC_REQUIRE_POSTGRES").as_deref() == Ok("1") => panic!(
            "PIPEC_REQUIRE_POSTGRES=1 but PIPEC_TEST_POSTGRES is not set: {test} needs a PostgreSQL server (scripts/test starts one)"
        ),
        _ => {
            eprintln!(
                "skipped {test}: set PIPEC_TEST_POSTGRES=postgres://... (or run scripts/test) to run the PostgreSQL tests"
            );
            None
        }
    }
}

/// A schema of its own on the test server; dropped with it.
pub(crate) struct TestSchema {
    pub url: String,
    server: String,
    pub name: String,
}

impl TestSchema {
    pub(crate) fn new(server: &str, tag: &str) -> TestSchema {
        static N: AtomicU32 = AtomicU32::new(0);
        let clean: String = tag
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(24)
            .collect::<String>()
            .to_ascii_lowercase();
        let name = format!(
            "t_{clean}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        admin(
            server,
            &format!("DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"),
        )
        .expect("create the test schema");
        TestSchema {
            url: with_schema(server, &name),
            server: server.to_string(),
            name,
        }
    }

    pub(crate) fn store(&self) -> PostgresStore {
        self.store_with(PgOptions::default())
    }

    pub(crate) fn store_with(&self, options: PgOptions) -> PostgresStore {
        PostgresStore::connect_with(&self.url, PgOpen::Create, options).expect("connect")
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let _ = admin(
            &self.server,
            &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name),
        );
    }
}

/// The URL with `search_path` set to `schema`.
pub(crate) fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-csearch_path%3D{schema}")
}

/// Runs statements on the server (as the tests' administrator).
pub(crate) fn admin(url: &str, statements: &str) -> Result<(), StoreError> {
    let store = PostgresStore::unchecked(url, PgOptions::default())?;
    let db = store.db().clone();
    let statements = statements.to_string();
    store.block_on(async move {
        let client = db.client().await?;
        client.batch_execute(&statements).await.map_err(super::pg)
    })
}

/// The first column of each row a query returns, as text (the query casts it).
pub(crate) fn texts(url: &str, query: &str) -> Vec<String> {
    let store = PostgresStore::unchecked(url, PgOptions::default()).expect("store");
    let db = store.db().clone();
    let query = query.to_string();
    store
        .block_on(async move {
            let client = db.client().await?;
            let rows = client.query(&query, &[]).await.map_err(super::pg)?;
            Ok::<_, StoreError>(rows.iter().map(|r| r.get::<_, String>(0)).collect())
        })
        .expect("query")
}
