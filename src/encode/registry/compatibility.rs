//! Asking the registry whether a schema would be accepted under a subject,
//! without registering it: `POST /compatibility/subjects/{subject}/versions/latest`
//! (Confluent's API, which Apicurio's ccompat serves too), and the
//! subject's compatibility level (`GET /config/{subject}`, else the
//! registry's `GET /config`), to name it when the answer is no. Used by the
//! takeover's dry run ([`crate::takeover::subjects`]).

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde::Deserialize;

use super::{
    classify, error_message, RegistryError, SchemaRegistry, ACCEPT_TYPES, CONTENT_TYPE_V1,
};

/// What the registry says of a schema under a subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compatibility {
    /// The subject has no version yet: anything is accepted.
    NoSubject,
    Compatible,
    /// Refused under `level`, with the registry's reasons (if it gave any).
    Incompatible {
        level: String,
        reasons: Vec<String>,
    },
}

impl SchemaRegistry {
    /// Whether `schema` (Avro JSON) would be accepted as the next version
    /// of `subject`.
    ///
    /// # Errors
    /// When the registry does not answer, or answers otherwise than the API says.
    pub async fn compatibility(
        &self,
        subject: &str,
        schema: &str,
    ) -> Result<Compatibility, RegistryError> {
        let request = format!(
            "POST {}/compatibility/subjects/{subject}/versions/latest",
            self.shown.trim_end_matches('/')
        );
        let body = serde_json::json!({ "schema": schema }).to_string();
        let path = ["compatibility", "subjects", subject, "versions", "latest"];
        let answer = self
            .send(reqwest::Method::POST, &path, Some(body), &request, subject)
            .await?;
        let Some(answer) = answer else {
            return Ok(Compatibility::NoSubject);
        };
        #[derive(Deserialize)]
        struct Answer {
            is_compatible: bool,
            #[serde(default)]
            messages: Vec<serde_json::Value>,
        }
        let answer: Answer =
            serde_json::from_slice(&answer).map_err(|_| RegistryError::BadAnswer {
                request,
                message: error_message(&answer),
            })?;
        if answer.is_compatible {
            return Ok(Compatibility::Compatible);
        }
        let reasons = answer
            .messages
            .iter()
            .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned))
            .collect();
        Ok(Compatibility::Incompatible {
            level: self.level(subject).await?,
            reasons,
        })
    }

    /// The compatibility level in force for `subject`: its own, else the
    /// registry's.
    async fn level(&self, subject: &str) -> Result<String, RegistryError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Config {
            compatibility_level: Option<String>,
            compatibility: Option<String>,
        }
        let shown = self.shown.trim_end_matches('/').to_owned();
        for path in [&["config", subject][..], &["config"][..]] {
            let request = format!("GET {shown}/{}", path.join("/"));
            let answer = self
                .send(reqwest::Method::GET, path, None, &request, subject)
                .await?;
            let config = answer.and_then(|a| serde_json::from_slice::<Config>(&a).ok());
            if let Some(level) = config.and_then(|c| c.compatibility_level.or(c.compatibility)) {
                return Ok(level);
            }
        }
        Ok("unknown".to_owned())
    }

    /// One request to the API at `path`; `None` for a 404.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &[&str],
        body: Option<String>,
        request: &str,
        subject: &str,
    ) -> Result<Option<Vec<u8>>, RegistryError> {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.extend(path);
        }
        let mut call = self.http.request(method, url).header(ACCEPT, ACCEPT_TYPES);
        if let Some(body) = body {
            call = call.header(CONTENT_TYPE, CONTENT_TYPE_V1).body(body);
        }
        if let Some(auth) = &self.auth {
            call = call.basic_auth(&auth.user, Some(auth.password.expose()));
        }
        let unreachable = |source| RegistryError::Unreachable {
            url: self.shown.clone(),
            source,
        };
        let response = call.send().await.map_err(unreachable)?;
        let status = response.status();
        let answer = response.bytes().await.map_err(unreachable)?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(classify(status, &answer, subject, request));
        }
        Ok(Some(answer.to_vec()))
    }
}
