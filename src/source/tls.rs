//! TLS to PostgreSQL, configured the way libpq is: `sslmode`, `sslrootcert`,
//! `sslcert` and `sslkey` in the connection URL (or the `PGSSLMODE`,
//! `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY` environment variables when the
//! URL does not set them).
//!
//! Both connections honour the same settings: the SQL connection
//! (tokio-postgres, through [`MakeRustlsConnect`] here) and the replication
//! session ([`crate::source::replication`], from [`PgTls::rustls_config`]).
//! Both use rustls, with the same meaning of each mode
//! (<https://www.postgresql.org/docs/current/libpq-ssl.html#LIBPQ-SSL-PROTECTION>):
//!
//! | sslmode | encrypted | server certificate checked | host name checked |
//! |---|---|---|---|
//! | `disable` | no | | |
//! | `allow`, `prefer` (default) | if the server offers TLS | no | no |
//! | `require` | yes | no | no |
//! | `verify-ca` | yes | against `sslrootcert` | no |
//! | `verify-full` | yes | against `sslrootcert` | yes (the URL's host) |
//!
//! Unlike libpq, `verify-ca` and `verify-full` need `sslrootcert` (or
//! `~/.postgresql/root.crt`): the connector never trusts a public CA
//! silently. With a `hostaddr` the TCP connection goes there and the host
//! name is the one checked, as in libpq. SCRAM channel binding is not
//! offered (`SCRAM-SHA-256` without `-PLUS`), since its hash depends on the
//! server certificate's signature algorithm, which rustls does not expose.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// The URL parameters this module reads (tokio-postgres knows only `sslmode`,
/// and only some of its values).
pub const TLS_PARAMETERS: &[&str] = &["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it, without checking its certificate
    /// (libpq's default; `allow` means the same here).
    #[default]
    Prefer,
    /// TLS or fail, without checking the certificate.
    Require,
    /// TLS, certificate signed by `sslrootcert`.
    VerifyCa,
    /// TLS, certificate signed by `sslrootcert` and issued for the host.
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Option<SslMode> {
        Some(match s {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// The name libpq uses.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// The TLS settings of a PostgreSQL connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgTls {
    pub mode: SslMode,
    /// CA certificates (PEM) the server's certificate must chain to.
    pub root_cert: Option<PathBuf>,
    /// Client certificate (PEM), for `cert` authentication.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
}

/// A TLS setting that cannot work; `Display` names the parameter and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{parameter}: {problem}")]
pub struct TlsSettingError {
    pub parameter: &'static str,
    pub problem: String,
}

impl PgTls {
    /// Reads the settings from the URL's parameters, falling back to the
    /// `PGSSL*` environment variables for those it does not set.
    pub fn from_parameters(params: &BTreeMap<String, String>) -> Result<PgTls, TlsSettingError> {
        Self::from_lookup(|name| {
            params.get(name).cloned().or_else(|| {
                let var = format!("PG{}", name.to_ascii_uppercase());
                std::env::var(var).ok().filter(|v| !v.is_empty())
            })
        })
    }

    fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<PgTls, TlsSettingError> {
        let mode = match get("sslmode") {
            None => SslMode::default(),
            Some(text) => SslMode::parse(text.trim()).ok_or_else(|| TlsSettingError {
                parameter: "sslmode",
                problem: format!(
                    "{text:?} is not an sslmode; expected disable, allow, prefer, require, \
                     verify-ca or verify-full"
                ),
            })?,
        };
        let path = |name: &str| get(name).map(|p| PathBuf::from(p.trim()));
        let mut root_cert = path("sslrootcert");
        if root_cert.is_none() && mode.verifies() {
            // libpq's default location.
            root_cert = std::env::var_os("HOME")
                .map(|home| Path::new(&home).join(".postgresql/root.crt"))
                .filter(|p| p.is_file());
        }
        Ok(PgTls {
            mode,
            root_cert,
            cert: path("sslcert"),
            key: path("sslkey"),
        })
    }

    /// Every problem that would stop a connection, found without connecting:
    /// a verifying mode without a CA, a certificate without its key, files
    /// that cannot be read or hold no PEM of the right kind.
    pub fn problems(&self) -> Vec<TlsSettingError> {
        let mut problems = Vec::new();
        if self.mode.verifies() && self.root_cert.is_none() {
            problems.push(TlsSettingError {
                parameter: "sslmode",
                problem: format!(
                    "{} checks the server's certificate against a CA, but no CA is given; add \
                     sslrootcert=/path/to/ca.pem to --pg-url (or set PGSSLROOTCERT), or use \
                     sslmode=require to encrypt without checking",
                    self.mode.as_str()
                ),
            });
        }
        if self.mode == SslMode::Disable
            && (self.root_cert.is_some() || self.cert.is_some() || self.key.is_some())
        {
            problems.push(TlsSettingError {
                parameter: "sslmode",
                problem: "is disable, so sslrootcert, sslcert and sslkey would be ignored; \
                          remove them or choose a TLS mode (require, verify-ca, verify-full)"
                    .to_owned(),
            });
        }
        match (&self.cert, &self.key) {
            (Some(_), None) => problems.push(TlsSettingError {
                parameter: "sslkey",
                problem: "is missing: sslcert needs the certificate's private key in sslkey"
                    .to_owned(),
            }),
            (None, Some(_)) => problems.push(TlsSettingError {
                parameter: "sslcert",
                problem: "is missing: sslkey needs the client certificate in sslcert".to_owned(),
            }),
            _ => {}
        }
        if let Some(path) = &self.root_cert {
            if let Err(e) = load_certs(path) {
                problems.push(TlsSettingError {
                    parameter: "sslrootcert",
                    problem: e,
                });
            }
        }
        if let Some(path) = &self.cert {
            if let Err(e) = load_certs(path) {
                problems.push(TlsSettingError {
                    parameter: "sslcert",
                    problem: e,
                });
            }
        }
        if let Some(path) = &self.key {
            if let Err(e) = load_key(path) {
                problems.push(TlsSettingError {
                    parameter: "sslkey",
                    problem: e,
                });
            }
        }
        problems
    }

    /// The rustls client configuration of both connections (SQL and replication).
    pub fn rustls_config(&self) -> Result<rustls::ClientConfig, TlsSettingError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsSettingError {
                parameter: "sslmode",
                problem: format!("no TLS protocol version available: {e}"),
            })?;
        let mut roots = RootCertStore::empty();
        if let Some(path) = &self.root_cert {
            let certs = load_certs(path).map_err(|problem| TlsSettingError {
                parameter: "sslrootcert",
                problem,
            })?;
            roots.add_parsable_certificates(certs);
        }
        let roots = Arc::new(roots);
        let builder = match self.mode {
            SslMode::VerifyFull => builder.with_root_certificates(Arc::clone(&roots)),
            _ => builder
                .dangerous()
                .with_custom_certificate_verifier(verifier(self.mode, roots, &provider)?),
        };
        let config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let chain = load_certs(cert).map_err(|problem| TlsSettingError {
                    parameter: "sslcert",
                    problem,
                })?;
                let key = load_key(key).map_err(|problem| TlsSettingError {
                    parameter: "sslkey",
                    problem,
                })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| TlsSettingError {
                        parameter: "sslkey",
                        problem: format!("does not fit the certificate in sslcert: {e}"),
                    })?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(config)
    }

    /// What tokio-postgres itself should do: try TLS (prefer), insist on it
    /// (require and the verifying modes, whose checks are ours), or not.
    pub fn tokio_postgres_mode(&self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Mode;
        match self.mode {
            SslMode::Disable => Mode::Disable,
            SslMode::Prefer => Mode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Mode::Require,
        }
    }
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        format!(
            "cannot read a private key from {}: {e}; expected an unencrypted PEM key \
             (PKCS#8, PKCS#1 or SEC1)",
            path.display()
        )
    })
}

fn verifier(
    mode: SslMode,
    roots: Arc<RootCertStore>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ServerCertVerifier>, TlsSettingError> {
    let inner = WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(provider))
        .build()
        .ok();
    let check_chain = mode == SslMode::VerifyCa;
    match (check_chain, inner) {
        (true, None) => Err(TlsSettingError {
            parameter: "sslrootcert",
            problem: "holds no usable CA certificate".to_owned(),
        }),
        (true, inner) => Ok(Arc::new(Verifier {
            inner,
            algorithms: provider.signature_verification_algorithms,
        })),
        (false, _) => Ok(Arc::new(Verifier {
            inner: None,
            algorithms: provider.signature_verification_algorithms,
        })),
    }
}

/// `verify-ca` (`inner` set: the chain is checked, the name is not) and
/// `prefer` / `require` (no `inner`: nothing is checked, as in libpq).
/// Handshake signatures are always verified, so the peer holds the key of
/// the certificate it sent.
#[derive(Debug)]
struct Verifier {
    inner: Option<Arc<WebPkiServerVerifier>>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(inner) = &self.inner else {
            return Ok(ServerCertVerified::assertion());
        };
        match inner.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// tokio-postgres' TLS hook, backed by rustls.
#[derive(Clone)]
pub struct MakeRustlsConnect {
    config: Arc<rustls::ClientConfig>,
}

impl MakeRustlsConnect {
    pub fn new(config: rustls::ClientConfig) -> Self {
        MakeRustlsConnect {
            config: Arc::new(config),
        }
    }
}

impl<S> MakeTlsConnect<S> for MakeRustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<RustlsConnect> {
        // An empty domain (a hostaddr without host) is checked against
        // nothing: only verify-full looks at the name, and it then fails.
        let name = ServerName::try_from(domain.to_owned())
            .or_else(|_| ServerName::try_from("invalid.invalid".to_owned()))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(RustlsConnect {
            config: Arc::clone(&self.config),
            name,
        })
    }
}

/// One TLS handshake's settings.
pub struct RustlsConnect {
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move {
            connector
                .connect(self.name, stream)
                .await
                .map(|s| RustlsStream(Box::new(s)))
        })
    }
}

/// A TLS connection to PostgreSQL.
pub struct RustlsStream<S>(Box<tokio_rustls::client::TlsStream<S>>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

/// Splits the TLS parameters ([`TLS_PARAMETERS`]) off a connection string
/// (URL or `key=value` form): the rest, for tokio-postgres, and them.
pub fn split_parameters(conn: &str) -> (String, BTreeMap<String, String>) {
    let mut found = BTreeMap::new();
    let is_url = conn.starts_with("postgres://") || conn.starts_with("postgresql://");
    if is_url {
        let Some((base, query)) = conn.split_once('?') else {
            return (conn.to_owned(), found);
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if TLS_PARAMETERS.contains(&key) {
                let value: String = url::form_urlencoded::parse(format!("v={value}").as_bytes())
                    .map(|(_, v)| v.into_owned())
                    .next()
                    .unwrap_or_default();
                found.insert(key.to_owned(), value);
            } else if !pair.is_empty() {
                kept.push(pair);
            }
        }
        let rest = match kept.is_empty() {
            true => base.to_owned(),
            false => format!("{base}?{}", kept.join("&")),
        };
        return (rest, found);
    }
    let mut kept = Vec::new();
    for token in conn.split_whitespace() {
        match token.split_once('=') {
            Some((key, value)) if TLS_PARAMETERS.contains(&key.trim()) => {
                found.insert(key.trim().to_owned(), value.trim_matches('\'').to_owned());
            }
            _ => kept.push(token),
        }
    }
    (kept.join(" "), found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_tls_parameters_off_both_forms() {
        let (rest, params) = split_parameters(
            "postgres://u:p@db:5432/shop?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca.pem",
        );
        assert_eq!(rest, "postgres://u:p@db:5432/shop?application_name=x");
        assert_eq!(params["sslmode"], "verify-full");
        assert_eq!(params["sslrootcert"], "/etc/ca.pem");
        let (rest, params) = split_parameters("host=db sslmode=require sslcert='/c.pem' user=u");
        assert_eq!(rest, "host=db user=u");
        assert_eq!(params["sslmode"], "require");
        assert_eq!(params["sslcert"], "/c.pem");
        let (rest, params) = split_parameters("postgres://db/shop");
        assert_eq!(rest, "postgres://db/shop");
        assert!(params.is_empty());
    }

    #[test]
    fn verifying_modes_need_a_ca_and_certificates_need_keys() {
        let get = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let tls = PgTls::from_lookup(get(&[("sslmode", "verify-full")])).expect("parses");
        if tls.root_cert.is_none() {
            let problems = tls.problems();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].to_string().contains("sslrootcert="),
                "{}",
                problems[0]
            );
        }
        let tls = PgTls::from_lookup(get(&[
            ("sslmode", "require"),
            ("sslcert", "/nonexistent.pem"),
        ]))
        .expect("parses");
        let fields: Vec<_> = tls.problems().iter().map(|p| p.parameter).collect();
        assert_eq!(fields, ["sslkey", "sslcert"]);
        let error = PgTls::from_lookup(get(&[("sslmode", "verify")])).expect_err("unknown mode");
        assert!(error.to_string().contains("verify-full"), "{error}");
        assert_eq!(
            PgTls::from_lookup(get(&[])).expect("default").mode,
            SslMode::Prefer
        );
    }
}
