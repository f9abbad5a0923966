//! The schema registry: the Confluent API registers and serves Avro schemas.

use pgcdc_testcontainers::{unique_name, SchemaRegistry};

const SCHEMA: &str =
    r#"{\"type\":\"record\",\"name\":\"Row\",\"fields\":[{\"name\":\"id\",\"type\":\"int\"}]}"#;

fn register(registry: &SchemaRegistry, subject: &str) -> u64 {
    let (status, body) = registry
        .post(
            &format!("/subjects/{subject}/versions"),
            &format!(r#"{{"schema":"{SCHEMA}"}}"#),
        )
        .expect("register");
    assert_eq!(status, 200, "{body}");
    let id = body
        .trim()
        .strip_prefix(r#"{"id":"#)
        .and_then(|rest| rest.strip_suffix('}'))
        .unwrap_or_else(|| panic!("unexpected answer {body}"));
    id.parse().expect("numeric id")
}

#[test]
fn registers_and_fetches_an_avro_schema() {
    let registry = SchemaRegistry::shared();
    assert!(registry.url().ends_with("/apis/ccompat/v7"));
    let subject = format!("{}-value", unique_name("orders"));
    let id = register(registry, &subject);
    let (status, body) = registry.get(&format!("/schemas/ids/{id}")).expect("fetch");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#"\"name\":\"Row\""#), "{body}");
    let (status, body) = registry.get("/subjects").expect("subjects");
    assert_eq!(status, 200);
    assert!(body.contains(&subject), "{body}");
}

#[test]
fn private_registry_restarts_empty() {
    let registry = SchemaRegistry::launch().expect("launch registry");
    register(&registry, "x-value");
    registry.stop().expect("stop");
    assert!(registry.get("/subjects").is_err(), "stopped");
    registry.start().expect("start");
    assert_eq!(
        registry.get("/subjects").expect("subjects"),
        (200, "[]".to_owned())
    );
}
