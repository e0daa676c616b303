//! Connecting to PostgreSQL: the `postgres://` URL (parsed by tokio-postgres, with
//! `sslmode` `disable`, `prefer` or `require`; the form of it that is safe to print is
//! `select.rs`'s, which builds without PostgreSQL too), TLS with rustls on ring, and the
//! connection pool.
//!
//! `sslmode=require` means what it means to libpq without a root certificate: the
//! connection is encrypted, and the server's certificate is not checked against an
//! authority (its handshake signature is). `prefer` tries TLS and falls back to a plain
//! connection; `disable` never uses TLS.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::{StoreError, password_of, redact};

/// How long a lease lasts without a heartbeat, unless told otherwise.
pub(super) const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

/// What a Postgres store is opened with besides its URL.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// How long a lease lives after its last heartbeat (or claim). A holder renews it
    /// every third of this; a holder that stops is fenced once it has passed.
    pub lease_ttl: Duration,
    /// The most connections the pool opens.
    pub max_connections: usize,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            lease_ttl: DEFAULT_LEASE_TTL,
            max_connections: 8,
        }
    }
}

impl PgOptions {
    /// The defaults, with `PIPEC_LEASE_TTL_MS` (milliseconds) when it is set.
    pub fn from_env() -> Result<PgOptions, StoreError> {
        let mut options = PgOptions::default();
        if let Some(v) = std::env::var("PIPEC_LEASE_TTL_MS")
            .ok()
            .filter(|v| !v.is_empty())
        {
            let ms: u64 = v
                .trim()
                .parse()
                .ok()
                .filter(|ms| *ms >= 100)
                .ok_or_else(|| {
                    StoreError::Io(format!(
                        "PIPEC_LEASE_TTL_MS is `{v}`: give a number of milliseconds, at least 100"
                    ))
                })?;
            options.lease_ttl = Duration::from_millis(ms);
        }
        Ok(options)
    }
}

/// Text safe to show: the password, where it appears, replaced.
pub(super) fn scrub(text: &str, password: Option<&str>) -> String {
    match password {
        Some(p) if !p.is_empty() => text.replace(p, "***"),
        _ => text.to_string(),
    }
}

/// Accepts the server's certificate without an authority (libpq's `require`), while
/// still checking that the server holds its key.
#[derive(Debug)]
struct EncryptOnly(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

pub(super) fn tls() -> Result<MakeRustlsConnect, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Io(format!("cannot set up TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The pool for a URL. Nothing connects yet: the first use does.
pub(super) fn pool(url: &str, options: &PgOptions) -> Result<Pool, StoreError> {
    let shown = redact(url);
    let config: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| {
        StoreError::Io(format!(
            "{shown} is not a PostgreSQL URL this pipec reads: {}",
            scrub(&e.to_string(), password_of(url).as_deref())
        ))
    })?;
    let mut config = config;
    if config.get_application_name().is_none() {
        config.application_name("pipec");
    }
    config.connect_timeout(Duration::from_secs(10));
    let manager = Manager::from_config(
        config,
        tls()?,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .post_create(deadpool_postgres::Hook::async_fn(|client, _| {
            Box::pin(async move {
                // Every statement is prepared once per connection and run with values
                // that do not change its best plan (a thread's id, a status): planned
                // once, not for each run (the server's default plans each of the first
                // five runs and keeps planning when the generic plan looks no cheaper).
                client
                    .batch_execute("SET plan_cache_mode = force_generic_plan")
                    .await
                    .map_err(deadpool_postgres::HookError::Backend)
            })
        }))
        .max_size(options.max_connections.max(2))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(30)))
        .create_timeout(Some(Duration::from_secs(15)))
        .build()
        .map_err(|e| StoreError::Io(format!("cannot set up the pool for {shown}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_their_password() {
        let url =
            "postgres://pipec:s3cr%40t-pw@db.example:5433/runs?sslmode=require&password=other-pw";
        let shown = redact(url);
        assert!(!shown.contains("s3cr"), "{shown}");
        assert!(!shown.contains("other-pw"), "{shown}");
        assert!(shown.contains("pipec:***@db.example:5433/runs"), "{shown}");
        assert!(shown.contains("sslmode=require"), "{shown}");
        assert_eq!(password_of(url).as_deref(), Some("s3cr@t-pw"));
        assert_eq!(
            redact("postgres://u@%2Ftmp%2Fsock/db"),
            "postgres://u@%2Ftmp%2Fsock/db"
        );
        assert_eq!(scrub("no s3cr@t-pw here", Some("s3cr@t-pw")), "no *** here");
        assert!(crate::is_postgres_url("postgresql://x/y"));
        assert!(crate::is_postgres_url("POSTGRES://x/y"));
        assert!(!crate::is_postgres_url(".pipec/runs.redb"));
    }
}
