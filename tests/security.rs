//! Security against real services: PostgreSQL over TLS (`sslmode` require,
//! verify-ca, verify-full, a client certificate) with SCRAM passwords, Kafka
//! over SSL, SASL_PLAINTEXT and SASL_SSL (PLAIN and SCRAM-SHA-256), all as
//! the least-privilege role of docs/SECURITY.md, never a superuser; and
//! secrets that appear in no output.
//!
//! One TLS cluster and one secured broker serve every test. The connector
//! runs as the binary, so what an operator would see (stdout, stderr, exit
//! code) is what is checked.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::avro_reader::AvroReader;
use common::{consume, consume_raw, poll_blocking, Scenario};
use pgcdc_testcontainers::{
    Kafka, Postgres, PostgresOptions, SchemaRegistry, TestCa, SASL_PASSWORD, SASL_USER,
};

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

/// The password role, with REPLICATION and nothing else cluster-wide.
const ROLE: &str = "cdc";
const ROLE_PASSWORD: &str = "cdc-Pw-5e0b9a77";
/// What the registry's basic auth proxy lets through.
const REGISTRY_USER: &str = "cdc-registry";
const REGISTRY_PASSWORD: &str = "Reg-Pw-3f9d21c4";
/// The role that logs in with a client certificate.
const CERT_ROLE: &str = "cdc_cert";

struct Secure {
    ca: TestCa,
    pg: Postgres,
    kafka: Kafka,
    /// `ROLE_PASSWORD`, in a file, for --pg-password-file.
    password_file: PathBuf,
    /// A CA that signed nothing the services present.
    other_ca: TestCa,
}

fn secure() -> &'static Secure {
    static SECURE: OnceLock<Secure> = OnceLock::new();
    SECURE.get_or_init(|| {
        let ca = TestCa::generate().expect("test CA");
        let pg = Postgres::launch_with(&PostgresOptions {
            tls: Some(&ca),
            cert_users: vec![CERT_ROLE.to_owned()],
            ..PostgresOptions::default()
        })
        .unwrap_or_else(|e| panic!("postgres with TLS: {}", e.report()));
        pg.execute(
            "postgres",
            &format!(
                "CREATE ROLE {ROLE} LOGIN REPLICATION PASSWORD '{ROLE_PASSWORD}';\
                 CREATE ROLE {CERT_ROLE} LOGIN REPLICATION;"
            ),
        )
        .expect("create the roles");
        let kafka =
            Kafka::launch_secure(&ca).unwrap_or_else(|e| panic!("secure kafka: {}", e.report()));
        let password_file = ca.dir().join("pg-password");
        std::fs::write(&password_file, format!("{ROLE_PASSWORD}\n")).expect("password file");
        let other_ca = TestCa::generate().expect("second CA");
        Secure {
            ca,
            pg,
            kafka,
            password_file,
            other_ca,
        }
    })
}

/// The secured broker's SASL_PLAINTEXT listener.
fn sasl_plaintext_servers() -> String {
    secure()
        .kafka
        .sasl_plaintext_bootstrap_servers()
        .expect("sasl_plaintext")
}

/// Kafka over the SASL_PLAINTEXT listener as `SASL_USER` with
/// SCRAM-SHA-256; the password is given separately, by each test its way.
fn scram_plaintext_kafka() -> Vec<String> {
    strings(&[
        "--bootstrap-servers",
        &sasl_plaintext_servers(),
        "--kafka-security-protocol",
        "sasl_plaintext",
        "--kafka-sasl-mechanism",
        "SCRAM-SHA-256",
        "--kafka-sasl-username",
        SASL_USER,
    ])
}

/// The role's URL with its password, over TLS without verification.
fn role_url_with_password(s: &Scenario) -> String {
    pg_url(
        s,
        &format!("{ROLE}:{ROLE_PASSWORD}"),
        "127.0.0.1",
        "sslmode=require",
    )
}

/// A database with a table the role may read and a publication it owns:
/// exactly the grants of docs/SECURITY.md.
fn least_privilege_scenario(name: &str, role: &str) -> Scenario {
    let s = Scenario::new(&secure().pg, name);
    s.sql(&format!(
        "GRANT CREATE ON DATABASE {db} TO {role};\
         CREATE TABLE items (id int PRIMARY KEY, name text);\
         GRANT SELECT ON items TO {role};\
         CREATE PUBLICATION {publication} FOR TABLE items;\
         ALTER PUBLICATION {publication} OWNER TO {role};",
        db = s.db,
        publication = s.publication
    ));
    s
}

/// `postgres://role@host:port/db?params`.
fn pg_url(s: &Scenario, role: &str, host: &str, params: &str) -> String {
    format!(
        "postgres://{role}@{host}:{}/{}?{params}",
        secure().pg.port(),
        s.db
    )
}

fn ca_file() -> String {
    secure().ca.ca_file().display().to_string()
}

/// Runs the binary with `args` and `env` until it exits (killing it after
/// `timeout`), and returns its output.
async fn run_binary(args: Vec<String>, env: Vec<(String, String)>, timeout: Duration) -> Output {
    let described = format!("pgcdc-kafka {args:?}");
    try_run_binary(args, env, timeout)
        .await
        .unwrap_or_else(|stderr| {
            panic!("{described} still ran after {timeout:?}; stderr:\n{stderr}")
        })
}

/// [`run_binary`], returning the stderr of a run killed at `timeout` as the error.
async fn try_run_binary(
    args: Vec<String>,
    env: Vec<(String, String)>,
    timeout: Duration,
) -> Result<Output, String> {
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(BIN)
            .args(&args)
            .envs(env)
            .env("RUST_LOG", "pgcdc_kafka=debug,info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let deadline = Instant::now() + timeout;
        if poll_blocking(deadline, || child.try_wait().expect("wait")).is_none() {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            return Err(String::from_utf8_lossy(&output.stderr).into_owned());
        }
        Ok(child.wait_with_output().expect("output"))
    })
    .await
    .expect("join")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Asserts that no secret of the suite appears in `output`.
fn assert_no_secret(output: &str) {
    for secret in [ROLE_PASSWORD, SASL_PASSWORD, REGISTRY_PASSWORD] {
        assert!(
            !output.contains(secret),
            "a secret appears in the output:\n{output}"
        );
    }
}

/// `run` flags for `s` with the connection given.
fn run_args(s: &Scenario, pg_url: &str, kafka: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--log-format",
        "json",
        "run",
        "--pg-url",
        pg_url,
        "--topic-prefix",
        &s.prefix,
        "--slot",
        &s.slot,
        "--publication",
        &s.publication,
        "--stop-when-caught-up",
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    args.extend(kafka.iter().cloned());
    args
}

/// Two bounded runs: the first snapshots a row, the second streams an
/// insert, an update and a delete. Returns each record's `op` (`None` for
/// the tombstone) as read back through the broker's plaintext listener.
async fn round_trip(
    s: &Scenario,
    pg_url: &str,
    kafka: &[String],
    env: &[(&str, &str)],
) -> Vec<Option<String>> {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    s.sql("INSERT INTO items VALUES (1, 'snapshot')");
    for step in ["snapshot", "stream"] {
        if step == "stream" {
            s.sql("INSERT INTO items VALUES (2, 'new')");
            s.sql("UPDATE items SET name = 'changed' WHERE id = 1");
            s.sql("DELETE FROM items WHERE id = 2");
        }
        let output = run_binary(
            run_args(s, pg_url, kafka),
            env.clone(),
            Duration::from_secs(90),
        )
        .await;
        let all = text(&output);
        assert!(
            output.status.success(),
            "the {step} run succeeds; output:\n{all}"
        );
        assert_no_secret(&all);
    }
    let records = consume(
        &secure().kafka.bootstrap_servers(),
        &s.topic("items"),
        5,
        Duration::from_secs(30),
    )
    .await;
    records
        .iter()
        .map(|r| {
            r.value
                .as_ref()
                .map(|v| v["payload"]["op"].as_str().expect("op").to_owned())
        })
        .collect()
}

fn expected_ops() -> Vec<Option<String>> {
    ["r", "c", "u", "d"]
        .iter()
        .map(|op| Some((*op).to_owned()))
        .chain([None])
        .collect()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_scram_and_sasl_ssl_scram_as_the_least_privileged_role() {
    let s = least_privilege_scenario("sec_full", ROLE);
    let url = pg_url(
        &s,
        ROLE,
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={}", ca_file()),
    );
    let password_file = secure().password_file.display().to_string();
    let servers = secure()
        .kafka
        .sasl_ssl_bootstrap_servers()
        .expect("sasl_ssl");
    let kafka = strings(&[
        "--pg-password-file",
        &password_file,
        "--bootstrap-servers",
        &servers,
        "--kafka-security-protocol",
        "sasl_ssl",
        "--kafka-sasl-mechanism",
        "SCRAM-SHA-256",
        "--kafka-sasl-username",
        SASL_USER,
        "--kafka-ssl-ca",
        &ca_file(),
    ]);
    let ops = round_trip(
        &s,
        &url,
        &kafka,
        &[("PGCDC_KAFKA_SASL_PASSWORD", SASL_PASSWORD)],
    )
    .await;
    assert_eq!(ops, expected_ops());
    // `config show` with the same secrets, by flag and by environment.
    let mut args = strings(&["config", "show"]);
    args.extend(run_args(&s, &url, &kafka).into_iter().skip(3));
    args.extend(strings(&["--kafka-sasl-password", SASL_PASSWORD]));
    let shown = run_binary(
        args,
        vec![("PGCDC_PG_PASSWORD".into(), ROLE_PASSWORD.into())],
        Duration::from_secs(30),
    )
    .await;
    let all = text(&shown);
    // Both passwords at once are a configuration error; config show still
    // prints, and must still redact.
    assert!(all.contains("kafka_sasl_password"), "{all}");
    assert_no_secret(&all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_with_kafka_over_ssl() {
    let s = least_privilege_scenario("sec_require", ROLE);
    let url = pg_url(&s, ROLE, "127.0.0.1", "sslmode=require");
    let servers = secure().kafka.ssl_bootstrap_servers().expect("ssl");
    let kafka = strings(&[
        "--bootstrap-servers",
        &servers,
        "--kafka-security-protocol",
        "ssl",
        "--kafka-ssl-ca",
        &ca_file(),
    ]);
    let ops = round_trip(&s, &url, &kafka, &[("PGCDC_PG_PASSWORD", ROLE_PASSWORD)]).await;
    assert_eq!(ops, expected_ops());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_ca_with_kafka_sasl_plain() {
    let s = least_privilege_scenario("sec_verify_ca", ROLE);
    // An IP address: verify-ca checks the chain, not the name.
    let url = pg_url(
        &s,
        &format!("{ROLE}:{ROLE_PASSWORD}"),
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={}", ca_file()),
    );
    let password_file = s.db.clone() + "-sasl";
    let password_file = secure().ca.dir().join(password_file);
    std::fs::write(&password_file, SASL_PASSWORD).expect("write");
    let servers = sasl_plaintext_servers();
    let kafka = strings(&[
        "--bootstrap-servers",
        &servers,
        "--kafka-security-protocol",
        "sasl_plaintext",
        "--kafka-sasl-mechanism",
        "PLAIN",
        "--kafka-sasl-username",
        SASL_USER,
        "--kafka-sasl-password-file",
        &password_file.display().to_string(),
    ]);
    let ops = round_trip(&s, &url, &kafka, &[]).await;
    assert_eq!(ops, expected_ops());
}

/// `--delivery exactly-once` over SASL: the progress topic's admin client
/// and consumer log in with the producer's password too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_over_sasl_scram() {
    let s = least_privilege_scenario("sec_eos_sasl", ROLE);
    let url = pg_url(&s, ROLE, "127.0.0.1", "sslmode=require");
    let mut kafka = scram_plaintext_kafka();
    kafka.extend(strings(&["--delivery", "exactly-once"]));
    let ops = round_trip(
        &s,
        &url,
        &kafka,
        &[
            ("PGCDC_PG_PASSWORD", ROLE_PASSWORD),
            ("PGCDC_KAFKA_SASL_PASSWORD", SASL_PASSWORD),
        ],
    )
    .await;
    assert_eq!(ops, expected_ops());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificate_login() {
    let s = least_privilege_scenario("sec_cert", CERT_ROLE);
    let (cert, key) = secure()
        .ca
        .client_cert(CERT_ROLE)
        .expect("client certificate");
    let url = pg_url(
        &s,
        CERT_ROLE,
        "localhost",
        &format!(
            "sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
            ca_file(),
            cert.display(),
            key.display()
        ),
    );
    let servers = secure().kafka.bootstrap_servers();
    let ops = round_trip(&s, &url, &strings(&["--bootstrap-servers", &servers]), &[]).await;
    assert_eq!(ops, expected_ops());
}

/// Runs a connector that must fail and returns its output; asserts the
/// exit code and that no secret is in it.
async fn failing_run(s: &Scenario, url: &str, extra: &[&str], code: i32) -> String {
    let mut args = run_args(
        s,
        url,
        &strings(&["--bootstrap-servers", &secure().kafka.bootstrap_servers()]),
    );
    args.extend(strings(extra));
    let output = run_binary(args, vec![], Duration::from_secs(60)).await;
    let all = text(&output);
    assert_eq!(
        output.status.code(),
        Some(code),
        "exit code; output:\n{all}"
    );
    assert_no_secret(&all);
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tls_and_login_failures_are_clear() {
    let s = least_privilege_scenario("sec_fail", ROLE);
    let password = format!("--pg-password={ROLE_PASSWORD}");

    // A name the certificate was not issued for (hostaddr still reaches the server).
    let url = pg_url(
        &s,
        ROLE,
        "db.wrong.invalid",
        &format!(
            "hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={}",
            ca_file()
        ),
    );
    let out = failing_run(&s, &url, &[&password], 1).await;
    assert!(
        out.contains("presented a certificate that sslmode=verify-full does not accept")
            && out.contains("certificate not valid for name \\\"db.wrong.invalid\\\""),
        "{out}"
    );

    // A CA that did not sign the server's certificate.
    let other = secure().other_ca.ca_file().display().to_string();
    let url = pg_url(
        &s,
        ROLE,
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={other}"),
    );
    let out = failing_run(&s, &url, &[&password], 1).await;
    assert!(
        out.contains("sslmode=verify-ca does not accept")
            && out.contains("invalid peer certificate"),
        "{out}"
    );

    // No TLS: pg_hba.conf has no line for that.
    let url = pg_url(&s, ROLE, "127.0.0.1", "sslmode=disable");
    let out = failing_run(&s, &url, &[&password], 1).await;
    assert!(
        out.contains("refused the login") && out.contains("no encryption"),
        "{out}"
    );

    // A wrong password.
    let url = pg_url(&s, ROLE, "127.0.0.1", "sslmode=require");
    let wrong = "Wrong-Pw-for-cdc-91";
    let out = failing_run(&s, &url, &[&format!("--pg-password={wrong}")], 1).await;
    assert!(
        out.contains("refused the login") && out.contains("password authentication failed"),
        "{out}"
    );
    assert!(
        !out.contains(wrong),
        "the wrong password is not shown:\n{out}"
    );

    // verify-full without a CA: refused before connecting, with the fix.
    let url = pg_url(&s, ROLE, "localhost", "sslmode=verify-full");
    let out = failing_run(&s, &url, &[&password], 2).await;
    assert!(
        out.contains("sslrootcert=/path/to/ca.pem") && out.contains("PGSSLROOTCERT"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_kafka_password_stops_with_an_authentication_error() {
    let s = least_privilege_scenario("sec_sasl_wrong", ROLE);
    let url = role_url_with_password(&s);
    let mut args = run_args(&s, &url, &scram_plaintext_kafka());
    // Streaming only: the first Kafka client is then the producer.
    args.extend(strings(&["--snapshot-mode", "never"]));
    let env = vec![(
        "PGCDC_KAFKA_SASL_PASSWORD".to_owned(),
        "not-the-password".to_owned(),
    )];
    // The first run creates the slot and has nothing to send.
    let first = run_binary(args.clone(), env.clone(), Duration::from_secs(60)).await;
    assert!(first.status.success(), "output:\n{}", text(&first));
    s.sql("INSERT INTO items VALUES (1, 'needs kafka')");
    // An unbounded run: it must stop by itself, on the refused login.
    args.retain(|a| a != "--stop-when-caught-up");
    let output = run_binary(args, env, Duration::from_secs(80)).await;
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "exit code; output:\n{all}");
    assert!(
        all.contains("kafka refused this connector's credentials")
            && all.contains("--kafka-sasl-password-file"),
        "the error names the credentials and where they come from:\n{all}"
    );
    assert!(
        !all.contains("not-the-password"),
        "the password leaked:\n{all}"
    );
    assert_no_secret(&all);
}

/// Every Kafka client that runs before the producer sends anything (the look
/// for an earlier run's topics, topic creation, the snapshot's flush, the
/// transactional producer's initialization), and a snapshot waiting at the
/// in-flight bound, stop on a refused login as the producer does, instead of
/// retrying it like an unreachable broker or waiting out message.timeout.ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_kafka_password_stops_a_first_start() {
    const WRONG: &str = "not-the-password-7c1";
    let env = vec![("PGCDC_KAFKA_SASL_PASSWORD".to_owned(), WRONG.to_owned())];
    // Without the fix each of these retries forever (every attempt ends in a
    // timeout of 10 to 60 s); with it each stops within seconds.
    let limit = Duration::from_secs(40);
    let starts: [(&str, &[&str]); 6] = [
        ("earlier topics", &["--snapshot-mode", "initial"]),
        (
            "in-flight bound",
            &[
                "--snapshot-mode",
                "when_needed",
                "--max-in-flight-messages",
                "1",
            ],
        ),
        (
            "topic creation",
            &["--snapshot-mode", "when_needed", "--topic-partitions", "1"],
        ),
        ("snapshot flush", &["--snapshot-mode", "when_needed"]),
        (
            "exactly-once snapshot",
            &[
                "--snapshot-mode",
                "when_needed",
                "--delivery",
                "exactly-once",
            ],
        ),
        (
            "exactly-once stream",
            &["--snapshot-mode", "never", "--delivery", "exactly-once"],
        ),
    ];
    let mut failures = Vec::new();
    for (what, extra) in starts {
        let s = least_privilege_scenario("sec_sasl_first", ROLE);
        s.sql("INSERT INTO items VALUES (1, 'needs kafka'), (2, 'and more')");
        let url = role_url_with_password(&s);
        let mut args = run_args(&s, &url, &scram_plaintext_kafka());
        args.extend(strings(extra));
        let started = Instant::now();
        let output = match try_run_binary(args, env.clone(), limit).await {
            Ok(output) => output,
            Err(stderr) => {
                let last: Vec<&str> = stderr.lines().rev().take(5).collect();
                failures.push(format!(
                    "{what}: still running after {limit:?}; last lines: {last:#?}"
                ));
                continue;
            }
        };
        let all = text(&output);
        eprintln!("{what}: stopped after {:?}", started.elapsed());
        assert_eq!(
            output.status.code(),
            Some(1),
            "{what}: exit code; output:\n{all}"
        );
        assert!(
            all.contains("kafka refused this connector's credentials")
                && all.contains("--kafka-sasl-password-file"),
            "{what}: the error names the credentials and where they come from:\n{all}"
        );
        assert!(!all.contains(WRONG), "{what}: the password leaked:\n{all}");
        assert_no_secret(&all);
        if !extra.contains(&"never") {
            assert_eq!(
                s.confirmed_flush_lsn(),
                None,
                "{what}: the snapshot's slot is not promoted"
            );
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Avro through a registry that demands basic auth (Apicurio behind
/// `BasicAuthProxy`): the right credentials, by flag and by file, register
/// the schemas and deliver; a wrong password stops the connector with the
/// registry's 401 and the flags to check, confirming nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_through_a_registry_demanding_basic_auth() {
    let registry = SchemaRegistry::shared();
    let proxy = registry
        .basic_auth_proxy(REGISTRY_USER, REGISTRY_PASSWORD)
        .unwrap_or_else(|e| panic!("auth proxy: {}", e.report()));
    let s = least_privilege_scenario("sec_registry", ROLE);
    let url = role_url_with_password(&s);
    let servers = secure().kafka.bootstrap_servers();
    let proxy_url = proxy.url();
    let avro = |auth: &[&str]| {
        let mut kafka = strings(&[
            "--bootstrap-servers",
            &servers,
            "--format",
            "avro",
            "--schema-registry-url",
            &proxy_url,
        ]);
        kafka.extend(strings(auth));
        run_args(&s, &url, &kafka)
    };
    let credentials = format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}");

    // The snapshot, with the flag.
    s.sql("INSERT INTO items VALUES (1, 'snapshot')");
    let output = run_binary(
        avro(&["--schema-registry-basic-auth", &credentials]),
        vec![],
        Duration::from_secs(90),
    )
    .await;
    let all = text(&output);
    assert!(output.status.success(), "the snapshot run: {all}");
    assert_no_secret(&all);

    // A change, with the file.
    let file = secure().ca.dir().join(format!("{}-registry", s.db));
    std::fs::write(&file, format!("{credentials}\n")).expect("write");
    s.sql("INSERT INTO items VALUES (2, 'new')");
    let output = run_binary(
        avro(&[
            "--schema-registry-basic-auth-file",
            &file.display().to_string(),
        ]),
        vec![],
        Duration::from_secs(90),
    )
    .await;
    let all = text(&output);
    assert!(output.status.success(), "the streaming run: {all}");
    assert_no_secret(&all);

    let topic = s.topic("items");
    let records = consume_raw(&servers, &topic, 2, Duration::from_secs(30)).await;
    let reader = AvroReader::new(registry);
    let ops: Vec<String> = records
        .iter()
        .map(|r| {
            let value = reader.json(r.value.as_deref().expect("a value"));
            value["op"].as_str().expect("op").to_owned()
        })
        .collect();
    assert_eq!(ops, ["r", "c"]);
    let (status, subjects) = registry.get("/subjects").expect("subjects");
    assert_eq!(status, 200, "{subjects}");
    for subject in [format!("{topic}-key"), format!("{topic}-value")] {
        assert!(
            subjects.contains(&format!("\"{subject}\"")),
            "{subject} registered: {subjects}"
        );
    }
    assert!(
        proxy.forwarded() > 0,
        "the registrations went through the proxy"
    );
    assert_eq!(proxy.rejected(), 0, "no request lacked the credentials");

    // A wrong password: the registry's 401 stops the connector.
    s.sql("INSERT INTO items VALUES (3, 'refused')");
    // The WAL position right after the commit: the slot must stay before it.
    // (Not the position before the INSERT: while the connector has nothing
    // open it may confirm an idle keepalive's position, which can pass other
    // databases' writes made before this commit.)
    let committed = s.current_lsn();
    let wrong = "Wrong-Reg-Pw-77";
    let output = run_binary(
        avro(&[
            "--schema-registry-basic-auth",
            &format!("{REGISTRY_USER}:{wrong}"),
        ]),
        vec![],
        Duration::from_secs(60),
    )
    .await;
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "exit code; output:\n{all}");
    assert!(
        all.contains("schema registry refused access (HTTP 401")
            && all.contains("--schema-registry-basic-auth-file"),
        "the error names the refusal and the flags:\n{all}"
    );
    assert!(!all.contains(wrong), "the wrong password leaked:\n{all}");
    assert_no_secret(&all);
    assert!(proxy.rejected() > 0, "the proxy refused the wrong password");
    let confirmed = s.confirmed_flush_lsn().expect("the slot exists");
    assert!(
        confirmed < committed,
        "the refused change is confirmed: {confirmed} >= {committed}"
    );
    let after = consume_raw(&servers, &topic, 3, Duration::from_secs(5)).await;
    assert_eq!(after.len(), 2, "nothing more reached the topic");
}

/// `check` names a refused Kafka login too, instead of a metadata timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_a_refused_kafka_login() {
    let s = least_privilege_scenario("sec_check_sasl", ROLE);
    let url = role_url_with_password(&s);
    const WRONG: &str = "not-the-password-c4e";
    let mut args = strings(&[
        "check",
        "--pg-url",
        &url,
        "--topic-prefix",
        &s.prefix,
        "--slot",
        &s.slot,
        "--publication",
        &s.publication,
    ]);
    args.extend(scram_plaintext_kafka());
    args.extend(strings(&["--kafka-sasl-password", WRONG]));
    let started = Instant::now();
    let output = run_binary(args, vec![], Duration::from_secs(60)).await;
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "exit code; output:\n{all}");
    assert!(
        all.lines().any(|l| l.starts_with("FAIL kafka:")
            && l.contains("kafka refused this connector's credentials")),
        "the kafka check names the refused login:\n{all}"
    );
    assert!(!all.contains(WRONG), "the password leaked:\n{all}");
    assert_no_secret(&all);
    eprintln!("check stopped after {:?}", started.elapsed());
}
