//! A schema of its own on the PostgreSQL server the tests are given
//! (`PIPEC_TEST_POSTGRES=postgres://...`), as a store URL naming it in `options`. Without
//! the variable a test says it is skipped, unless `PIPEC_REQUIRE_POSTGRES=1`, when it
//! fails.

use std::sync::atomic::{AtomicU32, Ordering};

/// A store URL on a fresh schema, or `None` (with a line saying the test is skipped).
pub fn postgres_store(tag: &str) -> Option<String> {
    let server = match std::env::var("PIPEC_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => url,
        _ if std::env::var("PIPEC_REQUIRE_POSTGRES").as_deref() == Ok("1") => {
            panic!(
                "PIPEC_REQUIRE_POSTGRES=1 but PIPEC_TEST_POSTGRES is not set: {tag} needs a PostgreSQL server"
            )
        }
        _ => {
            eprintln!(
                "skipped {tag}: set PIPEC_TEST_POSTGRES=postgres://... to run it on PostgreSQL"
            );
            return None;
        }
    };
    static N: AtomicU32 = AtomicU32::new(0);
    let clean: String = tag
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(20)
        .collect::<String>()
        .to_ascii_lowercase();
    let name = format!(
        "w_{clean}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let out = std::process::Command::new("psql")
        .args([
            server.as_str(),
            "-qc",
            &format!("DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"),
        ])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "create the schema: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sep = if server.contains('?') { '&' } else { '?' };
    Some(format!("{server}{sep}options=-csearch_path%3D{name}"))
}

/// The server URL and the schema name of a store URL [`postgres_store`] made.
pub fn split(url: &str) -> (String, String) {
    let (server, schema) = url
        .split_once("options=-csearch_path%3D")
        .unwrap_or_else(|| panic!("a store URL of postgres_store: {url}"));
    let server = server.trim_end_matches(['?', '&']).to_string();
    (server, schema.to_string())
}
