//! The spool: where the changes of streamed, still-open transactions wait
//! for their Stream Commit (pgoutput protocol 2, `--stream-in-progress`).
//!
//! # What it keeps
//!
//! Each message of a stream block is kept as the server sent it (its
//! `XLogData` payload, so the xid after its tag stays with it) with its WAL
//! position, appended to the spool of its top-level transaction. Several
//! transactions may be open at once (their blocks interleave), so there is
//! one spool per top-level xid; the memory bound
//! (`--spool-memory-bytes`) is for all of them together. An append that
//! would pass it moves that transaction's spool to a file in the spool
//! directory, where all its later messages go too (through a buffer of
//! [`FILE_BUFFER`] bytes): memory stays flat however large transactions
//! grow, and only the transactions that grow past the bound touch the disk.
//!
//! # Why the changes wait for the commit
//!
//! A streamed transaction may still abort, and Kafka must receive
//! transactions in commit order, which is not the order their blocks
//! arrive in (a small transaction committing in between is sent whole, and
//! goes first). So nothing of a streamed transaction is encoded or produced
//! before its Stream Commit: at the commit the spool hands its messages
//! back in order ([`Replay`]), and they go through exactly the path of an
//! unstreamed transaction, with the same positions: the output is the same.
//! The same holds under exactly-once: chunks never enter an open Kafka
//! transaction (an abort would have to abort the Kafka transaction, with
//! the other PostgreSQL transactions it holds, and a long PostgreSQL
//! transaction would hold a Kafka one open past `transaction.timeout.ms`).
//!
//! # Aborts
//!
//! A Stream Abort of the top-level xid drops the transaction's spool (and
//! file). One of a subtransaction (`ROLLBACK TO SAVEPOINT`) voids only the
//! changes that subtransaction made: its xid is remembered, and the replay
//! skips its messages. Relation and Type messages are never skipped: the
//! server counts a relation as described to this transaction once it sent
//! the description, whichever subtransaction it was sent in, and sends no
//! other before the next change of that relation.
//!
//! # Files
//!
//! `xid-<xid>-<n>.spool` in the pipeline's own directory
//! ([`crate::source::streaming::StreamingOptions::spool_dir_for`]). A file
//! is removed when its transaction commits (after the replay) or aborts,
//! when the attempt ends (the server sends open transactions again from
//! their start on the next connection), and every leftover of an earlier
//! process (a `kill -9`) when a spool is created. The directory is made
//! when the spool is (so an unwritable one fails the start, not the first
//! large transaction) and removed with it when empty. Writes go to the page
//! cache through a buffer, so they are made from the async task directly:
//! a hand-over to a blocking thread per buffer would cost more than the
//! write.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::lsn::Lsn;
use crate::metrics::Metrics;

/// Bytes of a spooled message's header: WAL position (8), xid (4), length (4).
const HEADER: usize = 16;
/// The write (and read) buffer of a transaction spooled to a file.
pub const FILE_BUFFER: usize = 256 * 1024;
/// The spool files' extension: what a start clears.
const EXTENSION: &str = "spool";

/// Why the spool could not keep or give back a streamed transaction.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// The directory could not be made or cleared.
    #[error(
        "cannot prepare the spool directory {}; set --spool-dir to a directory the connector \
         may write (or --stream-in-progress false)", .path.display()
    )]
    Dir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A spool file could not be written or read back.
    #[error(
        "cannot {action} the spool file {}; check the free space of --spool-dir (the \
         transaction is streamed again from its start after the restart)", .path.display()
    )]
    File {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A spool file ended inside a message: it was changed under us.
    #[error(
        "the spool file {} ends inside a message; another process may share --spool-dir \
         (the transaction is streamed again from its start after the restart)", .path.display()
    )]
    Truncated { path: PathBuf },
}

impl SpoolError {
    /// Whether a restart may succeed: the server streams the open
    /// transactions again, and a full disk may have room by then. A
    /// directory that cannot be made will not be the next time either.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, SpoolError::Dir { .. })
    }
}

/// The open streamed transactions of one attempt, by top-level xid.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    memory_limit: usize,
    /// Bytes held in memory by the transactions not on disk.
    in_memory: usize,
    /// Bytes written to the files of open transactions.
    on_disk: u64,
    open: HashMap<u32, TxnSpool>,
    /// Files made so far: a file name is never reused within an attempt.
    files: u64,
    metrics: Arc<Metrics>,
}

/// One open streamed transaction.
#[derive(Debug, Default)]
struct TxnSpool {
    /// Its messages, while in memory: one [`HEADER`] and payload each.
    memory: Vec<u8>,
    /// Its file, once it passed the memory bound; `memory` is then empty.
    file: Option<SpoolFile>,
    /// Subtransactions rolled back: their changes are skipped at the replay.
    aborted: HashSet<u32>,
}

/// A file of the spool, removed when dropped.
#[derive(Debug)]
struct SpoolFile {
    path: PathBuf,
    writer: Option<BufWriter<File>>,
    len: u64,
}

impl Drop for SpoolFile {
    fn drop(&mut self) {
        // Unflushed bytes are of no use to anybody: drop them unwritten.
        if let Some(writer) = self.writer.take() {
            let _ = writer.into_parts();
        }
        if let Err(error) = fs::remove_file(&self.path) {
            if error.kind() != io::ErrorKind::NotFound {
                tracing::warn!(path = %self.path.display(), %error, "a spool file could not be removed");
            }
        }
    }
}

impl Spool {
    /// A spool in `dir` (created if missing, its leftover files removed)
    /// keeping up to `memory_limit` bytes in memory.
    pub fn new(
        dir: PathBuf,
        memory_limit: usize,
        metrics: Arc<Metrics>,
    ) -> Result<Self, SpoolError> {
        let dir_error = |source| SpoolError::Dir {
            path: dir.clone(),
            source,
        };
        fs::create_dir_all(&dir).map_err(dir_error)?;
        let mut removed = 0;
        for entry in fs::read_dir(&dir).map_err(dir_error)? {
            let path = entry.map_err(dir_error)?.path();
            if path.extension().is_some_and(|e| e == EXTENSION) {
                fs::remove_file(&path).map_err(dir_error)?;
                removed += 1;
            }
        }
        if removed > 0 {
            tracing::info!(dir = %dir.display(), files = removed, "removed the spool files of an earlier run");
        }
        metrics.streamed().spooled(0, 0);
        Ok(Spool {
            dir,
            memory_limit,
            in_memory: 0,
            on_disk: 0,
            open: HashMap::new(),
            files: 0,
            metrics,
        })
    }

    /// A Stream Start: `first` when it is the transaction's first block.
    /// Returns `false` for a later block of a transaction this spool never
    /// saw begin (it cannot be completed: the caller reconnects, and the
    /// server streams it again from its start).
    pub fn start(&mut self, xid: u32, first: bool) -> bool {
        if first {
            if let Some(stale) = self.open.insert(xid, TxnSpool::default()) {
                // A server restreams a transaction only on a new connection.
                tracing::warn!(
                    xid,
                    "a streamed transaction started again; its earlier blocks are dropped"
                );
                self.forget(stale);
            }
            true
        } else {
            self.open.contains_key(&xid)
        }
    }

    /// Keeps one message of `xid`'s block: `made_by` is the
    /// (sub)transaction after its tag (none for Origin), `lsn` its WAL
    /// position.
    pub fn append(
        &mut self,
        xid: u32,
        made_by: Option<u32>,
        lsn: Lsn,
        data: &[u8],
    ) -> Result<(), SpoolError> {
        let Some(txn) = self.open.get_mut(&xid) else {
            debug_assert!(false, "append to transaction {xid} that did not start");
            return Ok(());
        };
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let mut header = [0; HEADER];
        header[..8].copy_from_slice(&lsn.as_u64().to_be_bytes());
        header[8..12].copy_from_slice(&made_by.unwrap_or(0).to_be_bytes());
        header[12..].copy_from_slice(&len.to_be_bytes());
        let size = HEADER + data.len();
        if txn.file.is_none() && self.in_memory + size > self.memory_limit {
            self.files += 1;
            let path = self
                .dir
                .join(format!("xid-{xid}-{}.{EXTENSION}", self.files));
            let mut file = SpoolFile::create(path)?;
            file.write(&txn.memory)?;
            self.in_memory -= txn.memory.len();
            self.on_disk += txn.memory.len() as u64;
            txn.memory = Vec::new();
            tracing::debug!(xid, path = %file.path.display(), "a streamed transaction passed the spool's memory bound; spooling it to disk");
            txn.file = Some(file);
        }
        match &mut txn.file {
            Some(file) => {
                file.write(&header)?;
                file.write(data)?;
                self.on_disk += size as u64;
            }
            None => {
                txn.memory.extend_from_slice(&header);
                txn.memory.extend_from_slice(data);
                self.in_memory += size;
            }
        }
        self.report();
        Ok(())
    }

    /// A Stream Abort: of the whole transaction when `subxid == xid`, else
    /// of that subtransaction only.
    pub fn abort(&mut self, xid: u32, subxid: u32) {
        if xid == subxid {
            if let Some(txn) = self.open.remove(&xid) {
                self.forget(txn);
                self.metrics.streamed().aborted();
            }
        } else if let Some(txn) = self.open.get_mut(&xid) {
            txn.aborted.insert(subxid);
            self.metrics.streamed().subtransaction_aborted();
        }
    }

    /// A Stream Commit: the transaction's messages, in the order they
    /// came, without those of rolled-back subtransactions; `None` if this
    /// spool never saw it start.
    pub fn commit(&mut self, xid: u32) -> Result<Option<Replay>, SpoolError> {
        let Some(mut txn) = self.open.remove(&xid) else {
            return Ok(None);
        };
        self.metrics.streamed().committed();
        let aborted = std::mem::take(&mut txn.aborted);
        let source = match txn.file.take() {
            Some(file) => {
                self.on_disk -= file.len;
                Source::Disk(file.into_reader()?)
            }
            None => {
                self.in_memory -= txn.memory.len();
                Source::Memory(Bytes::from(std::mem::take(&mut txn.memory)))
            }
        };
        self.report();
        Ok(Some(Replay { source, aborted }))
    }

    /// Bytes of open transactions in memory.
    #[cfg(test)]
    pub fn in_memory(&self) -> usize {
        self.in_memory
    }

    /// Bytes of open transactions on disk.
    #[cfg(test)]
    pub fn on_disk(&self) -> u64 {
        self.on_disk
    }

    /// Open transactions.
    #[cfg(test)]
    pub fn open_transactions(&self) -> usize {
        self.open.len()
    }

    fn forget(&mut self, txn: TxnSpool) {
        self.in_memory -= txn.memory.len();
        if let Some(file) = &txn.file {
            self.on_disk -= file.len;
        }
        drop(txn);
        self.report();
    }

    fn report(&self) {
        self.metrics
            .streamed()
            .spooled(self.in_memory as u64, self.on_disk);
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        // The files go with their transactions; the gauges go to zero.
        self.open.clear();
        self.metrics.streamed().spooled(0, 0);
        // An empty directory is of no use after the run (one per slot
        // would pile up); `remove_dir` leaves one that holds anything.
        let _ = fs::remove_dir(&self.dir);
    }
}

impl SpoolFile {
    fn create(path: PathBuf) -> Result<Self, SpoolError> {
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| SpoolError::File {
                action: "create",
                path: path.clone(),
                source,
            })?;
        Ok(SpoolFile {
            path,
            writer: Some(BufWriter::with_capacity(FILE_BUFFER, file)),
            len: 0,
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), SpoolError> {
        let Some(writer) = &mut self.writer else {
            debug_assert!(false, "write to a spool file being read");
            return Ok(());
        };
        writer.write_all(bytes).map_err(|source| SpoolError::File {
            action: "write",
            path: self.path.clone(),
            source,
        })?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// The file from its start, for the replay. The handle is the one
    /// written through, so a file removed meanwhile (by a start of another
    /// process on the same directory) still reads back whole.
    fn into_reader(mut self) -> Result<FileReader, SpoolError> {
        let error = |path: &Path, source| SpoolError::File {
            action: "read back",
            path: path.to_owned(),
            source,
        };
        let writer = self.writer.take();
        let mut file = match writer.map(BufWriter::into_inner) {
            Some(Ok(file)) => file,
            Some(Err(e)) => return Err(error(&self.path, e.into_error())),
            None => return Err(error(&self.path, io::ErrorKind::Other.into())),
        };
        file.rewind().map_err(|e| error(&self.path, e))?;
        Ok(FileReader {
            reader: BufReader::with_capacity(FILE_BUFFER, file),
            left: self.len,
            file: self,
        })
    }
}

/// A spool file being read back; removed when dropped.
#[derive(Debug)]
struct FileReader {
    reader: BufReader<File>,
    /// Bytes not read yet.
    left: u64,
    file: SpoolFile,
}

#[derive(Debug)]
enum Source {
    Memory(Bytes),
    Disk(FileReader),
}

/// A committed streamed transaction's messages, handed back in order by
/// [`Replay::next`]; its file (if any) is removed when the replay is dropped.
#[derive(Debug)]
pub struct Replay {
    source: Source,
    aborted: HashSet<u32>,
}

impl Replay {
    /// The next message to apply and its WAL position, `None` at the end.
    pub fn next(&mut self) -> Result<Option<(Lsn, Bytes)>, SpoolError> {
        loop {
            let Some((lsn, made_by, data)) = self.read()? else {
                return Ok(None);
            };
            let kept =
                !self.aborted.contains(&made_by) || matches!(data.first(), Some(b'R' | b'Y'));
            if kept {
                return Ok(Some((lsn, data)));
            }
        }
    }

    fn read(&mut self) -> Result<Option<(Lsn, u32, Bytes)>, SpoolError> {
        let header: [u8; HEADER] = match &mut self.source {
            Source::Memory(bytes) if bytes.is_empty() => return Ok(None),
            Source::Memory(bytes) => match bytes.get(..HEADER) {
                Some(header) => {
                    let header = header.try_into().unwrap_or([0; HEADER]);
                    let _ = bytes.split_to(HEADER);
                    header
                }
                None => {
                    debug_assert!(false, "the spool's memory ends inside a header");
                    return Ok(None);
                }
            },
            Source::Disk(file) if file.left == 0 => return Ok(None),
            Source::Disk(file) => {
                let mut header = [0; HEADER];
                file.read_exact(&mut header)?;
                header
            }
        };
        let (lsn, rest) = header.split_at(8);
        let (made_by, len) = rest.split_at(4);
        let lsn = Lsn::new(u64::from_be_bytes(lsn.try_into().unwrap_or_default()));
        let made_by = u32::from_be_bytes(made_by.try_into().unwrap_or_default());
        let len = u32::from_be_bytes(len.try_into().unwrap_or_default()) as usize;
        let data = match &mut self.source {
            Source::Memory(bytes) => {
                if bytes.len() < len {
                    debug_assert!(false, "the spool's memory ends inside a message");
                    return Ok(None);
                }
                bytes.split_to(len)
            }
            Source::Disk(file) => {
                let mut data = vec![0; len];
                file.read_exact(&mut data)?;
                Bytes::from(data)
            }
        };
        Ok(Some((lsn, made_by, data)))
    }
}

impl FileReader {
    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), SpoolError> {
        if (out.len() as u64) > self.left {
            return Err(SpoolError::Truncated {
                path: self.file.path.clone(),
            });
        }
        self.reader
            .read_exact(out)
            .map_err(|source| match source.kind() {
                io::ErrorKind::UnexpectedEof => SpoolError::Truncated {
                    path: self.file.path.clone(),
                },
                _ => SpoolError::File {
                    action: "read back",
                    path: self.file.path.clone(),
                    source,
                },
            })?;
        self.left -= out.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
