//! The spool on a real directory: memory bound, files, replay order,
//! aborts of transactions and of subtransactions, leftovers.

use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

/// A fresh directory under the system's temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "pgcdc-spool-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        TempDir(path)
    }

    fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<_> = fs::read_dir(&self.0)
            .map(|entries| entries.map(|e| e.expect("entry").path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn spool(dir: &TempDir, limit: usize) -> Spool {
    Spool::new(dir.0.clone(), limit, Arc::new(Metrics::new())).expect("spool")
}

/// An insert as pgoutput sends it in a stream block, made by `xid`, with
/// `n` as its value.
fn insert(xid: u32, n: u32) -> Vec<u8> {
    let mut out = vec![b'I'];
    out.extend(xid.to_be_bytes());
    out.extend(16384u32.to_be_bytes());
    out.extend(b"N\0\x01t\0\0\0\x04");
    out.extend(n.to_be_bytes());
    out
}

fn relation(xid: u32) -> Vec<u8> {
    let mut out = vec![b'R'];
    out.extend(xid.to_be_bytes());
    out.extend(b"rest of a relation");
    out
}

fn drain(mut replay: Replay) -> Vec<(Lsn, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some((lsn, data)) = replay.next().expect("replay") {
        out.push((lsn, data.to_vec()));
    }
    out
}

#[test]
fn a_transaction_under_the_bound_stays_in_memory() {
    let dir = TempDir::new();
    let mut spool = spool(&dir, 1 << 20);
    assert!(spool.start(7, true));
    let messages: Vec<_> = (0..100).map(|n| insert(7, n)).collect();
    for (n, data) in messages.iter().enumerate() {
        spool
            .append(7, Some(7), Lsn::new(n as u64), data)
            .expect("append");
    }
    assert_eq!(spool.in_memory(), 100 * (HEADER + messages[0].len()));
    assert_eq!((spool.on_disk(), dir.files().len()), (0, 0));
    let replayed = drain(spool.commit(7).expect("commit").expect("known"));
    let expected: Vec<_> = messages
        .into_iter()
        .enumerate()
        .map(|(n, data)| (Lsn::new(n as u64), data))
        .collect();
    assert_eq!(replayed, expected);
    assert_eq!((spool.in_memory(), spool.open_transactions()), (0, 0));
}

#[test]
fn past_the_bound_a_transaction_goes_to_disk_and_comes_back_in_order() {
    let dir = TempDir::new();
    let limit = 10 * 1024;
    let mut spool = spool(&dir, limit);
    // Two interleaved transactions: the one that passes the bound moves.
    assert!(spool.start(1, true));
    assert!(spool.start(2, true));
    let mut expected = (Vec::new(), Vec::new());
    for n in 0..5_000u32 {
        let (xid, list) = if n % 50 == 0 {
            (2, &mut expected.1)
        } else {
            (1, &mut expected.0)
        };
        let data = insert(xid, n);
        spool
            .append(xid, Some(xid), Lsn::new(u64::from(n)), &data)
            .expect("append");
        list.push((Lsn::new(u64::from(n)), data));
        assert!(spool.in_memory() <= limit, "memory stays under the bound");
    }
    assert_eq!(dir.files().len(), 1, "{:?}", dir.files());
    assert!(spool.on_disk() > limit as u64);
    let replay = spool.commit(1).expect("commit").expect("known");
    assert_eq!(spool.on_disk(), 0);
    assert_eq!(drain(replay), expected.0);
    assert!(dir.files().is_empty(), "the replayed file is removed");
    assert_eq!(
        drain(spool.commit(2).expect("commit").expect("known")),
        expected.1
    );
}

#[test]
fn with_no_memory_everything_goes_to_disk() {
    let dir = TempDir::new();
    let mut spool = spool(&dir, 0);
    assert!(spool.start(3, true));
    spool
        .append(3, None, Lsn::new(1), b"O origin")
        .expect("append");
    spool
        .append(3, Some(3), Lsn::new(2), &insert(3, 1))
        .expect("append");
    assert_eq!(spool.in_memory(), 0);
    assert_eq!(dir.files().len(), 1);
    let replayed = drain(spool.commit(3).expect("commit").expect("known"));
    assert_eq!(replayed.len(), 2);
    assert_eq!(replayed[0], (Lsn::new(1), b"O origin".to_vec()));
}

#[test]
fn an_abort_drops_the_transaction_and_its_file() {
    let dir = TempDir::new();
    let mut spool = spool(&dir, 64);
    assert!(spool.start(5, true));
    for n in 0..10 {
        spool
            .append(5, Some(5), Lsn::new(n), &insert(5, n as u32))
            .expect("append");
    }
    assert_eq!(dir.files().len(), 1);
    spool.abort(5, 5);
    assert!(dir.files().is_empty());
    assert_eq!((spool.in_memory(), spool.on_disk()), (0, 0));
    assert!(
        spool.commit(5).expect("commit").is_none(),
        "nothing left to commit"
    );
    // A later block of a transaction never seen cannot be completed.
    assert!(!spool.start(6, false));
}

#[test]
fn a_rolled_back_subtransaction_loses_its_changes_but_not_its_relations() {
    for limit in [0, 1 << 20] {
        let dir = TempDir::new();
        let mut spool = spool(&dir, limit);
        assert!(spool.start(10, true));
        let messages = [
            (10, insert(10, 1)),
            (11, relation(11)),
            (11, insert(11, 2)),
            (12, insert(12, 3)),
            (10, insert(10, 4)),
        ];
        for (n, (xid, data)) in messages.iter().enumerate() {
            spool
                .append(10, Some(*xid), Lsn::new(n as u64), data)
                .expect("append");
        }
        spool.abort(10, 11);
        spool.abort(10, 99); // never seen: nothing to do
        let kept: Vec<_> = drain(spool.commit(10).expect("commit").expect("known"))
            .into_iter()
            .map(|(lsn, _)| lsn.as_u64())
            .collect();
        assert_eq!(kept, [0, 1, 3, 4], "memory limit {limit}");
    }
}

#[test]
fn a_new_spool_removes_the_leftovers_of_an_earlier_process() {
    let dir = TempDir::new();
    {
        let mut spool = spool(&dir, 0);
        assert!(spool.start(1, true));
        spool
            .append(1, Some(1), Lsn::new(1), &insert(1, 1))
            .expect("append");
        // As after a kill -9: the file stays behind.
        std::mem::forget(spool);
    }
    fs::write(dir.0.join("notes.txt"), "kept").expect("write");
    assert_eq!(dir.files().len(), 2);
    let _spool = spool(&dir, 0);
    assert_eq!(dir.files(), [dir.0.join("notes.txt")]);
}

#[test]
fn the_directory_goes_with_the_spool_when_empty() {
    let dir = TempDir::new();
    let mut kept = spool(&dir, 0);
    assert!(dir.0.is_dir(), "made when the spool is");
    assert!(kept.start(1, true));
    kept.append(1, Some(1), Lsn::new(1), &insert(1, 1))
        .expect("append");
    drop(kept);
    assert!(!dir.0.exists(), "its open transaction's file went, then it");

    let other = spool(&dir, 0);
    fs::write(dir.0.join("notes.txt"), "kept").expect("write");
    drop(other);
    assert_eq!(dir.files(), [dir.0.join("notes.txt")], "not emptied by us");
}

#[test]
fn a_replay_survives_its_file_being_unlinked() {
    let dir = TempDir::new();
    let mut spool = spool(&dir, 0);
    assert!(spool.start(1, true));
    for n in 0..1000 {
        spool
            .append(1, Some(1), Lsn::new(n), &insert(1, n as u32))
            .expect("append");
    }
    for file in dir.files() {
        fs::remove_file(file).expect("unlink");
    }
    assert_eq!(
        drain(spool.commit(1).expect("commit").expect("known")).len(),
        1000
    );
}

#[test]
fn an_unwritable_directory_is_named() {
    let file = std::env::current_exe().expect("the test binary");
    let error = Spool::new(file.join("spool"), 0, Arc::new(Metrics::new())).expect_err("not a dir");
    assert!(!error.is_retryable());
    assert!(error.to_string().contains("--spool-dir"), "{error}");
}
