//! A client of a Confluent-compatible schema registry, and the cache that
//! keeps it off the hot path.
//!
//! Only what a producer needs: `POST /subjects/{subject}/versions` registers
//! a schema (or finds it: the registry answers with the existing id when the
//! subject already holds the same schema, so registering twice never makes a
//! second version) and returns its `schema_id`. Ids are cached per
//! `(subject, schema)`, so each schema costs one request per cache lifetime
//! and encoding a message does no HTTP.
//!
//! The cache lives as long as its encoder, which is one pipeline attempt: a
//! retryable failure anywhere (the registry down, Kafka or Postgres gone)
//! restarts the pipeline from the slot with an empty cache, so every schema
//! is registered again before its first message. On a registry that kept
//! its data that is a lookup; on one that lost it (Apicurio with in-memory
//! storage restarted) it registers the schemas anew, and no message produced
//! after the restart carries an id of the old registry.
//!
//! Failures are classified for the pipeline: unreachable, timed out, HTTP
//! 408, 429 and 5xx are retryable (it restarts from the slot with backoff,
//! confirming nothing past the unsent message); 409 (incompatible schema),
//! 422 (invalid schema), 401/403 and other answers are definite and name the
//! setting to fix.
//!
//! A hand-written client rather than the `schema_registry_converter` crate:
//! its encoder caches ids per subject only (a new schema version for the
//! same subject would get the old id), it reports every HTTP failure except
//! 502/503 as non-retryable with the status only inside a message string,
//! and it would pin our apache-avro and reqwest versions to its own.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{StatusCode, Url};
use serde::Deserialize;

use crate::options::Secret;

mod compatibility;
pub use compatibility::Compatibility;

/// How long connecting to the registry may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take, answer included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The registry's own media type, then plain JSON.
const ACCEPT_TYPES: &str =
    "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json; qs=0.9, \
     application/json; qs=0.5";
const CONTENT_TYPE_V1: &str = "application/vnd.schemaregistry.v1+json";
/// Longest excerpt of a registry's answer kept in an error.
const MAX_MESSAGE: usize = 1000;

/// A schema's id in the registry, as written after the magic byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SchemaId(pub u32);

impl fmt::Display for SchemaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A failed registry operation.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("--schema-registry-url is required with --format avro")]
    MissingUrl,
    #[error(
        "schema registry url {url:?} is not an http(s) URL; expected e.g. \
         http://registry:8081 or https://host/apis/ccompat/v7"
    )]
    InvalidUrl {
        url: String,
        #[source]
        source: Option<url::ParseError>,
    },
    #[error("--schema-registry-basic-auth must be user:password")]
    BasicAuthFormat,
    #[error("cannot read the schema registry CA file {}", .path.display())]
    ReadCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the schema registry CA file {} holds no usable PEM certificate", .path.display())]
    InvalidCa {
        path: PathBuf,
        #[source]
        source: Option<reqwest::Error>,
    },
    #[error("cannot build the schema registry's HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("building the schema registry's HTTP client failed")]
    ClientTask(#[source] Box<tokio::task::JoinError>),
    #[error("schema registry at {url} did not answer; retrying with backoff")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error(
        "the schema registry at {url} presented a TLS certificate that is not trusted; \
         pass the PEM of the CA that signed it with --schema-registry-ca"
    )]
    Untrusted {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("schema registry is unavailable (HTTP {status}: {message}); retrying with backoff")]
    Unavailable { status: u16, message: String },
    #[error("schema registry found the schema incompatible with subject {subject:?}: {message}")]
    Incompatible { subject: String, message: String },
    #[error("schema registry rejected the schema for subject {subject:?} as invalid (HTTP {status}): {message}")]
    InvalidSchema {
        subject: String,
        status: u16,
        message: String,
    },
    #[error(
        "schema registry refused access (HTTP {status}: {message}); check the user:password \
         of --schema-registry-basic-auth (or PGCDC_SCHEMA_REGISTRY_BASIC_AUTH, \
         --schema-registry-basic-auth-file) and its rights on the subject"
    )]
    Unauthorized { status: u16, message: String },
    #[error(
        "schema registry answered {request} with HTTP {status}: {message}; check that \
         --schema-registry-url is a Confluent-compatible API (for Apicurio, its /apis/ccompat/v7)"
    )]
    Rejected {
        request: String,
        status: u16,
        message: String,
    },
    #[error(
        "schema registry answered {request} with something other than a schema id: {message}; \
         check --schema-registry-url"
    )]
    BadAnswer { request: String, message: String },
}

impl RegistryError {
    /// Whether trying again later may succeed (the registry was unreachable
    /// or briefly unable to serve).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            RegistryError::Unreachable { .. } | RegistryError::Unavailable { .. }
        )
    }
}

/// Whether a failed request failed because the server's certificate was not
/// trusted: retrying cannot help, the CA setting must change. rustls's error
/// reaches us only as text in the source chain (reqwest boxes it), so this
/// looks for rustls's own wording of a certificate rejection.
fn is_certificate_rejection(error: &reqwest::Error) -> bool {
    let mut cause: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = cause {
        if e.to_string().contains("invalid peer certificate") {
            return true;
        }
        cause = e.source();
    }
    false
}

/// The failure an HTTP error answer to a registration stands for.
fn classify(status: StatusCode, body: &[u8], subject: &str, request: &str) -> RegistryError {
    let message = error_message(body);
    let code = status.as_u16();
    match code {
        409 => RegistryError::Incompatible {
            subject: subject.to_owned(),
            message,
        },
        422 => RegistryError::InvalidSchema {
            subject: subject.to_owned(),
            status: code,
            message,
        },
        401 | 403 => RegistryError::Unauthorized {
            status: code,
            message,
        },
        408 | 429 | 500..=599 => RegistryError::Unavailable {
            status: code,
            message,
        },
        _ => RegistryError::Rejected {
            request: request.to_owned(),
            status: code,
            message,
        },
    }
}

/// The `message` of a Confluent error answer (`{"error_code":..,"message":..}`),
/// or the start of whatever else came back.
fn error_message(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct ErrorAnswer {
        message: Option<String>,
    }
    let text = match serde_json::from_slice::<ErrorAnswer>(body) {
        Ok(ErrorAnswer {
            message: Some(message),
        }) => message,
        _ => String::from_utf8_lossy(body).trim().to_owned(),
    };
    if text.is_empty() {
        return "(no message)".to_owned();
    }
    match text.char_indices().nth(MAX_MESSAGE) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// Basic auth credentials; the password is never printed.
#[derive(Debug, Clone)]
struct BasicAuth {
    user: String,
    password: Secret,
}

/// Schema ids by subject, then by schema text.
type Ids = HashMap<String, HashMap<String, SchemaId>>;

/// A schema registry client with its id cache. Clones share the cache (an
/// encoder's forks register a schema once between them).
#[derive(Clone)]
pub struct SchemaRegistry {
    http: reqwest::Client,
    /// The API base, as configured (with any credentials).
    base: Url,
    /// The API base without credentials, for messages.
    shown: String,
    auth: Option<BasicAuth>,
    ids: Arc<Mutex<Ids>>,
}

/// A schema's id, and whether this registration was the first of it by
/// this client and its clones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    pub id: SchemaId,
    pub first: bool,
}

impl fmt::Debug for SchemaRegistry {
    /// Without credentials: the URL as shown, the user name only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchemaRegistry")
            .field("url", &self.shown)
            .field("user", &self.auth.as_ref().map(|a| a.user.as_str()))
            .field("subjects_cached", &self.ids().len())
            .finish_non_exhaustive()
    }
}

impl SchemaRegistry {
    /// A client of the registry at `url` (user info in the URL is used as
    /// basic auth unless `basic_auth`, `user:password`, is given), trusting
    /// the PEM certificates in `ca_file` besides the system's roots.
    ///
    /// # Errors
    /// When a setting is invalid; nothing is sent yet.
    pub async fn new(
        url: &str,
        basic_auth: Option<&Secret>,
        ca_file: Option<&Path>,
    ) -> Result<Self, RegistryError> {
        let invalid = |source| RegistryError::InvalidUrl {
            url: url.to_owned(),
            source,
        };
        let mut base = Url::parse(url).map_err(|e| invalid(Some(e)))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(invalid(None));
        }
        let auth = match basic_auth {
            Some(secret) => {
                let (user, password) = secret
                    .expose()
                    .split_once(':')
                    .ok_or(RegistryError::BasicAuthFormat)?;
                Some(BasicAuth {
                    user: user.to_owned(),
                    password: password.parse().unwrap_or_else(|never| match never {}),
                })
            }
            // reqwest sends user info in the URL as basic auth by itself.
            None => None,
        };
        let mut shown = base.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);

        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("pgcdc-kafka/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = ca_file {
            for certificate in read_ca(path).await? {
                builder = builder.add_root_certificate(certificate);
            }
        }
        base.path_segments_mut()
            .map_err(|()| invalid(None))?
            .pop_if_empty();
        // Building reads the system's root certificates from disk.
        let http = tokio::task::spawn_blocking(move || builder.build())
            .await
            .map_err(|join| RegistryError::ClientTask(Box::new(join)))?
            .map_err(RegistryError::Client)?;
        Ok(SchemaRegistry {
            http,
            base,
            shown: shown.to_string(),
            auth,
            ids: Arc::default(),
        })
    }

    /// The registry's API base URL, without credentials.
    pub fn url(&self) -> &str {
        &self.shown
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, Ids> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached id of `schema` under `subject`, if it was registered.
    pub fn cached(&self, subject: &str, schema: &str) -> Option<SchemaId> {
        self.ids().get(subject)?.get(schema).copied()
    }

    /// Registers `schema` (Avro JSON) under `subject`, or finds it there,
    /// and returns its id; from the cache when this client or a clone did
    /// so before. Clones registering the same new schema at once each ask
    /// the registry (which gives both the same id); one of them is `first`.
    ///
    /// # Errors
    /// See [`RegistryError`]; [`RegistryError::is_retryable`] tells whether
    /// the registry may accept it later.
    pub async fn register(
        &self,
        subject: &str,
        schema: &str,
    ) -> Result<Registration, RegistryError> {
        if let Some(id) = self.cached(subject, schema) {
            return Ok(Registration { id, first: false });
        }
        let id = self.post_version(subject, schema).await?;
        let earlier = self
            .ids()
            .entry(subject.to_owned())
            .or_default()
            .insert(schema.to_owned(), id);
        Ok(Registration {
            id,
            first: earlier.is_none(),
        })
    }

    async fn post_version(&self, subject: &str, schema: &str) -> Result<SchemaId, RegistryError> {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.extend(["subjects", subject, "versions"]);
        }
        let request = format!(
            "POST {}/subjects/{subject}/versions",
            self.shown.trim_end_matches('/')
        );
        let body = serde_json::json!({ "schema": schema }).to_string();
        let mut post = self
            .http
            .post(url)
            .header(CONTENT_TYPE, CONTENT_TYPE_V1)
            .header(ACCEPT, ACCEPT_TYPES)
            .body(body);
        if let Some(auth) = &self.auth {
            post = post.basic_auth(&auth.user, Some(auth.password.expose()));
        }
        let unreachable = |source: reqwest::Error| {
            let url = self.shown.clone();
            match is_certificate_rejection(&source) {
                true => RegistryError::Untrusted { url, source },
                false => RegistryError::Unreachable { url, source },
            }
        };
        let response = post.send().await.map_err(unreachable)?;
        let status = response.status();
        let answer = response.bytes().await.map_err(unreachable)?;
        if !status.is_success() {
            return Err(classify(status, &answer, subject, &request));
        }
        #[derive(Deserialize)]
        struct Registered {
            id: i64,
        }
        serde_json::from_slice::<Registered>(&answer)
            .ok()
            .and_then(|r| u32::try_from(r.id).ok())
            .map(SchemaId)
            .ok_or_else(|| RegistryError::BadAnswer {
                request,
                message: error_message(&answer),
            })
    }
}

/// The certificates of a PEM file, read off the async runtime.
async fn read_ca(path: &Path) -> Result<Vec<reqwest::Certificate>, RegistryError> {
    let owned = path.to_path_buf();
    let pem = tokio::task::spawn_blocking(move || std::fs::read(owned))
        .await
        .map_err(|join| RegistryError::ClientTask(Box::new(join)))?
        .map_err(|source| RegistryError::ReadCa {
            path: path.to_path_buf(),
            source,
        })?;
    match reqwest::Certificate::from_pem_bundle(&pem) {
        Ok(certificates) if !certificates.is_empty() => Ok(certificates),
        Ok(_) => Err(RegistryError::InvalidCa {
            path: path.to_path_buf(),
            source: None,
        }),
        Err(source) => Err(RegistryError::InvalidCa {
            path: path.to_path_buf(),
            source: Some(source),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[test]
    fn answers_are_classified() {
        let body = br#"{"error_code":409,"message":"Schema being registered is incompatible"}"#;
        let incompatible = classify(StatusCode::CONFLICT, body, "t-value", "POST x");
        assert!(
            matches!(&incompatible, RegistryError::Incompatible { message, .. } if message == "Schema being registered is incompatible")
        );
        assert!(!incompatible.is_retryable());
        for retryable in [500, 502, 503, 504, 429, 408] {
            let status = StatusCode::from_u16(retryable).expect("status");
            assert!(
                classify(status, b"", "s", "r").is_retryable(),
                "{retryable}"
            );
        }
        for definite in [400, 401, 403, 404, 422] {
            let status = StatusCode::from_u16(definite).expect("status");
            assert!(
                !classify(status, b"<html>", "s", "r").is_retryable(),
                "{definite}"
            );
        }
        assert_eq!(error_message(b"  plain text "), "plain text");
        assert_eq!(error_message(b""), "(no message)");
    }

    /// Serves one canned HTTP answer per connection and hands back each request.
    async fn fake_registry(
        answers: Vec<&'static str>,
    ) -> (String, tokio::sync::mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!(
            "http://{}/apis/ccompat/v7/",
            listener.local_addr().expect("addr")
        );
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        tokio::spawn(async move {
            for answer in answers {
                let (mut socket, _) = listener.accept().await.expect("accept");
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // Read the head, then as much body as Content-Length says.
                loop {
                    let n = socket.read(&mut buf).await.expect("read");
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if body.len() >= length {
                            break;
                        }
                    }
                    if n == 0 {
                        break;
                    }
                }
                let _ = tx
                    .send(String::from_utf8_lossy(&request).into_owned())
                    .await;
                let (status, body) = answer.split_once(' ').expect("status and body");
                let response = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(response.as_bytes()).await.expect("write");
            }
        });
        (url, rx)
    }

    #[tokio::test]
    async fn registers_once_per_subject_and_schema_with_basic_auth() {
        let (url, mut requests) = fake_registry(vec![
            r#"200 {"id":7}"#,
            r#"200 {"id":8}"#,
            r#"409 {"error_code":409,"message":"nope"}"#,
        ])
        .await;
        let auth: Secret = "alice:s3cr:et".parse().expect("secret");
        let registry = SchemaRegistry::new(&url, Some(&auth), None)
            .await
            .expect("client");
        assert!(!format!("{registry:?}").contains("s3cr"));
        let first = registry
            .register("app.public.t-value", "\"int\"")
            .await
            .expect("registered");
        assert_eq!(
            first,
            Registration {
                id: SchemaId(7),
                first: true
            }
        );
        let request = requests.recv().await.expect("request");
        assert!(
            request
                .starts_with("POST /apis/ccompat/v7/subjects/app.public.t-value/versions HTTP/1.1"),
            "{request}"
        );
        // alice:s3cr:et
        assert!(
            request.contains("authorization: Basic YWxpY2U6czNjcjpldA=="),
            "{request}"
        );
        assert!(request.ends_with(r#"{"schema":"\"int\""}"#), "{request}");
        // Cached, in a clone too: no second request for the same subject
        // and schema, and not the first registration.
        assert_eq!(
            registry
                .clone()
                .register("app.public.t-value", "\"int\"")
                .await
                .expect("cached"),
            Registration {
                id: SchemaId(7),
                first: false
            }
        );
        // A new schema for the same subject is registered; subjects are escaped.
        assert_eq!(
            registry
                .register("a b/c-value", "\"long\"")
                .await
                .expect("registered")
                .id,
            SchemaId(8)
        );
        let request = requests.recv().await.expect("request");
        assert!(
            request.starts_with("POST /apis/ccompat/v7/subjects/a%20b%2Fc-value/versions "),
            "{request}"
        );
        let error = registry
            .register("a b/c-value", "\"string\"")
            .await
            .expect_err("incompatible");
        assert!(
            matches!(error, RegistryError::Incompatible { ref message, .. } if message == "nope"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn unreachable_registry_is_retryable_and_bad_settings_are_not() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        drop(listener);
        let registry = SchemaRegistry::new(&url, None, None).await.expect("client");
        let error = registry
            .register("s", "\"int\"")
            .await
            .expect_err("refused");
        assert!(error.is_retryable(), "{error}");
        assert!(matches!(
            SchemaRegistry::new("registry:8081", None, None).await,
            Err(RegistryError::InvalidUrl { .. })
        ));
        let no_colon: Secret = "alice".parse().expect("secret");
        assert!(matches!(
            SchemaRegistry::new("http://r", Some(&no_colon), None).await,
            Err(RegistryError::BasicAuthFormat)
        ));
        let missing = Path::new("/nonexistent/ca.pem");
        assert!(matches!(
            SchemaRegistry::new("https://r", None, Some(missing)).await,
            Err(RegistryError::ReadCa { .. })
        ));
        let not_pem = std::env::temp_dir().join(format!("pgcdc-not-pem-{}", std::process::id()));
        std::fs::write(&not_pem, "hello").expect("write");
        let result = SchemaRegistry::new("https://r", None, Some(&not_pem)).await;
        let _ = std::fs::remove_file(&not_pem);
        assert!(matches!(result, Err(RegistryError::InvalidCa { .. })));
    }

    #[tokio::test]
    async fn credentials_in_the_url_become_basic_auth() {
        let (url, mut requests) = fake_registry(vec![r#"200 {"id":1}"#]).await;
        let url = url.replacen("http://", "http://bob:p%40ss@", 1);
        let registry = SchemaRegistry::new(&url, None, None).await.expect("client");
        assert!(!registry.url().contains("bob"), "{}", registry.url());
        assert!(!format!("{registry:?}").contains("p%40ss"), "{registry:?}");
        registry.register("s", "\"int\"").await.expect("registered");
        let request = requests.recv().await.expect("request");
        // bob:p@ss
        assert!(
            request.contains("authorization: Basic Ym9iOnBAc3M="),
            "{request}"
        );
    }
}
