//! The schema registry part of `check` (with `--format avro`): it answers,
//! with the given credentials and CA.

use std::time::Duration;

use super::Report;
use crate::config::RunConfig;

pub(super) async fn check_registry(config: &RunConfig, timeout: Duration, report: &mut Report) {
    let Some(url) = config.encode.schema_registry_url.as_deref() else {
        report.fail(
            "schema registry",
            "--format avro without --schema-registry-url",
            "pass --schema-registry-url",
        );
        return;
    };
    let shown = url::Url::parse(url).map_or_else(
        |_| url.to_owned(),
        |mut u| {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        },
    );
    match probe_registry(config, url, timeout).await {
        Ok(subjects) => report.pass(
            "schema registry",
            format!("{shown} answered ({subjects} subjects)"),
        ),
        Err(RegistryProblem { detail, fix }) => {
            report.fail("schema registry", format!("{shown}: {detail}"), fix)
        }
    }
}

struct RegistryProblem {
    detail: String,
    fix: &'static str,
}

async fn probe_registry(
    config: &RunConfig,
    url: &str,
    timeout: Duration,
) -> Result<usize, RegistryProblem> {
    let problem = |detail: String, fix: &'static str| RegistryProblem { detail, fix };
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .connect_timeout(timeout)
        .timeout(timeout);
    if let Some(path) = &config.encode.schema_registry_ca {
        let file = path.clone();
        let pem = tokio::task::spawn_blocking(move || std::fs::read(file))
            .await
            .map_err(|e| problem(e.to_string(), "report this as a bug"))?
            .map_err(|e| {
                problem(
                    format!("cannot read {}: {e}", path.display()),
                    "check --schema-registry-ca",
                )
            })?;
        let certificates = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            problem(
                format!("{} holds no usable PEM certificate: {e}", path.display()),
                "check --schema-registry-ca",
            )
        })?;
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    // Building reads the system's root certificates from disk.
    let client = tokio::task::spawn_blocking(move || builder.build())
        .await
        .map_err(|e| problem(e.to_string(), "report this as a bug"))?
        .map_err(|e| problem(crate::error_chain(&e), "check --schema-registry-ca"))?;
    let subjects = format!("{}/subjects", url.trim_end_matches('/'));
    let mut request = client.get(&subjects).header(
        reqwest::header::ACCEPT,
        "application/vnd.schemaregistry.v1+json, application/json",
    );
    if let Some(auth) = config.encode.schema_registry_auth() {
        let (user, password) = auth.expose().split_once(':').ok_or_else(|| {
            problem(
                "--schema-registry-basic-auth is not user:password".into(),
                "pass --schema-registry-basic-auth user:password",
            )
        })?;
        request = request.basic_auth(user, Some(password));
    }
    let response = request.send().await.map_err(|e| {
        problem(
            // Without the URL: it may carry credentials (it is shown above without them).
            format!("no answer: {}", crate::error_chain(&e.without_url())),
            "check --schema-registry-url and that the registry runs and is reachable",
        )
    })?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err(problem(
            format!("refused access (HTTP {})", status.as_u16()),
            "check --schema-registry-basic-auth",
        ));
    }
    if !status.is_success() {
        return Err(problem(
            format!("GET /subjects answered HTTP {}", status.as_u16()),
            "check that --schema-registry-url is a Confluent-compatible API (for Apicurio, its /apis/ccompat/v7)",
        ));
    }
    let not_json = |e: &dyn std::error::Error| {
        problem(
            format!("GET /subjects did not answer JSON: {e}"),
            "check that --schema-registry-url is a Confluent-compatible API (for Apicurio, its /apis/ccompat/v7)",
        )
    };
    let body = response.bytes().await.map_err(|e| not_json(&e))?;
    let body: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
        problem(
            format!("GET /subjects did not answer JSON: {e}"),
            "check that --schema-registry-url is a Confluent-compatible API (for Apicurio, its /apis/ccompat/v7)",
        )
    })?;
    Ok(body.as_array().map_or(0, Vec::len))
}
