//! `kill -9` between a Kafka ack and the LSN confirm.
//!
//! The connector confirms on its status cadence (and when Postgres asks for a
//! reply), so a record Kafka acknowledged stays unconfirmed for a while. A
//! long `--status-interval` widens that window; the connector binary is
//! killed in it, under a continuous write load, round after round. After each
//! kill, while no connector runs, the slot is peeked
//! (`pg_logical_slot_peek_binary_changes`, which consumes nothing): the
//! transactions it lists are exactly what Postgres will send again. The check
//! is then that the window was real (records already in Kafka belonged to
//! those transactions) and that every record a restarted instance re-sent
//! belongs to one of them: duplicates only inside the unconfirmed window.

use super::*;

/// `(topic, partition)` -> the offset the next record will get.
type Watermarks = BTreeMap<(String, i32), i64>;

fn watermarks(consumed: &BTreeMap<String, Vec<Record>>) -> Watermarks {
    let mut marks = Watermarks::new();
    for (topic, records) in consumed {
        for r in records {
            let next = marks.entry((topic.clone(), r.partition)).or_default();
            *next = (*next).max(r.offset + 1);
        }
    }
    marks
}

fn tx_id(topic: &str, record: &Record) -> String {
    let value = record.value.as_ref().expect("the workload never deletes");
    value["payload"]["source"]["txId"]
        .as_i64()
        .unwrap_or_else(|| panic!("{topic}: payload.source.txId is not a number: {value}"))
        .to_string()
}

/// One kill: the topics' ends and the unconfirmed transactions just after it.
struct Kill {
    ends: Watermarks,
    unconfirmed: BTreeSet<String>,
    confirmed: Option<Lsn>,
}

/// The transactions Postgres would send again from the slot, by xid.
pub(super) fn unconfirmed_transactions(s: &Scenario) -> BTreeSet<String> {
    let sql = format!(
        "SELECT DISTINCT xid::text FROM pg_logical_slot_peek_binary_changes('{}', NULL, NULL, \
         'proto_version', '1', 'publication_names', '{}')",
        s.slot, s.publication
    );
    s.pg.query(&s.db, &sql)
        .unwrap_or_else(|e| panic!("peeking the slot: {}", e.report()))
        .into_iter()
        .filter_map(|row| row.into_iter().next().flatten())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_between_kafka_ack_and_lsn_confirm_resends_only_the_window() {
    const TABLES: [&str; 2] = ["deposits", "withdrawals"];
    const SCENARIO: &str = "kill -9 between ack and confirm";
    let rounds = fault_rounds(4, 10);
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(pg, "ackwindow");
    create_tables(&s, &TABLES);
    for topic in topics_of(&s, &TABLES) {
        kafka.create_topic(&topic, 2).expect("create topic");
    }
    let (mut rng, seed) = XorShift::seeded(SEED_ENV);
    let logs = LogDir::new("crash_recovery_ackwindow");
    println!(
        "[{SCENARIO}] seed {seed}; connector logs in {}",
        logs.dir().display()
    );
    // Status updates every 2 s (the default is 1 s), and kills 2.5 to 5 s
    // apart: the slot moves between kills, and up to 2 s of acknowledged
    // records are unconfirmed at each.
    let args = s.args(&bootstrap, &["--status-interval", "2s"]);
    let mut connector = ConnectorProcess::spawn(&args, logs.path(0));
    wait_until(TIMEOUT, "slot created", || async {
        connector.assert_running("before creating the slot");
        s.confirmed_flush_lsn().is_some()
    })
    .await;

    let stop_writer = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_continuously(
        pg,
        s.db.clone(),
        Workload::new(&TABLES, rng.next()),
        Arc::clone(&stop_writer),
    ));
    let topics = topics_of(&s, &TABLES);
    let mut kills: Vec<Kill> = Vec::new();
    for round in 1..=rounds {
        // Let the instance stream (and Kafka acknowledge) for a random while:
        // the kill is to land at any point of the 2 s status cadence, so the
        // moment is drawn from the seed rather than waited for.
        tokio::time::sleep(Duration::from_millis(2500 + rng.below(2500) as u64)).await;
        connector.assert_running(&format!("before kill round {round}"));
        connector.kill_9();
        wait_until(TIMEOUT, "the walsender to let go of the slot", || async {
            s.slot_active() == Some(false)
        })
        .await;
        // Produce requests the killed producer had sent may still be in the
        // broker's hands. Nothing observable says when it is done with a dead
        // client's requests, so this is a grace period; a record appended
        // after it only counts as the next instance's, from a transaction
        // the peek below lists as unconfirmed, so it cannot fail the check.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ends = watermarks(&read_topics(&bootstrap, &topics, None).await);
        let kill = Kill {
            ends,
            unconfirmed: unconfirmed_transactions(&s),
            confirmed: s.confirmed_flush_lsn(),
        };
        println!(
            "[{SCENARIO}] round {round}: killed; slot confirmed at {}, {} transactions unconfirmed",
            kill.confirmed.map_or("-".to_owned(), |l| l.to_string()),
            kill.unconfirmed.len()
        );
        kills.push(kill);
        connector = ConnectorProcess::spawn(&args, logs.path(round));
    }

    connector.await_streaming(&s).await;
    stop_writer.store(true, Ordering::Relaxed);
    let stats = writer.await.expect("writer task");
    await_confirmed_past(&s, s.current_lsn(), Some(&connector)).await;
    connector.terminate_cleanly(TIMEOUT).await;

    let source = source_rows(&s, &TABLES);
    let consumed = read_topics(&bootstrap, &topics, Some(TIMEOUT)).await;
    let (windows, resent) = check_windows(&kills, &consumed);
    let verified = verify(SCENARIO, stats.changes, &source, &consumed);
    assert_eq!(verified.changes, stats.changes);
    assert!(
        windows.iter().any(|&w| w > 0),
        "no kill landed between a Kafka ack and the confirm: the scenario tested nothing"
    );
    println!(
        "[{SCENARIO}] {rounds} kills; records in Kafka but unconfirmed at each kill: {windows:?}; \
         {resent} records re-sent, all from unconfirmed transactions; {} duplicates",
        verified.duplicates
    );
}

/// Checks the records against the kills: a record a later instance wrote
/// (at or past a kill's topic ends) whose transaction already had records
/// before those ends is a re-send, and it must belong to a transaction the
/// slot still held at that kill. Returns, per kill, the records that were in
/// Kafka but unconfirmed, and the count of re-sent records.
fn check_windows(kills: &[Kill], consumed: &BTreeMap<String, Vec<Record>>) -> (Vec<usize>, usize) {
    let mut windows = Vec::new();
    let mut resent = 0;
    let mut problems = Vec::new();
    for (i, kill) in kills.iter().enumerate() {
        let next_ends = kills.get(i + 1).map(|k| &k.ends);
        let before = |topic: &str, r: &Record, ends: &Watermarks| {
            r.offset
                < ends
                    .get(&(topic.to_owned(), r.partition))
                    .copied()
                    .unwrap_or(0)
        };
        let mut sent_before: BTreeSet<String> = BTreeSet::new();
        let mut in_window = 0;
        for (topic, records) in consumed {
            for r in records.iter().filter(|r| before(topic, r, &kill.ends)) {
                let tx = tx_id(topic, r);
                in_window += usize::from(kill.unconfirmed.contains(&tx));
                sent_before.insert(tx);
            }
        }
        windows.push(in_window);
        for (topic, records) in consumed {
            let by_next = records.iter().filter(|r| {
                !before(topic, r, &kill.ends) && next_ends.is_none_or(|e| before(topic, r, e))
            });
            for r in by_next {
                let tx = tx_id(topic, r);
                if !sent_before.contains(&tx) {
                    continue;
                }
                resent += 1;
                if !kill.unconfirmed.contains(&tx) {
                    problems.push(format!(
                        "after kill {}: {topic} partition {} offset {} re-sends transaction {tx}, \
                         which the slot had confirmed (at {:?})",
                        i + 1,
                        r.partition,
                        r.offset,
                        kill.confirmed
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "re-sends outside the unconfirmed window (first 20):\n{}",
        problems
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    (windows, resent)
}
