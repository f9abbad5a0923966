//! Kafka records in a file, for "Kafka alone" ([`super::ceiling`]): the
//! records of a topic are written here before the timed run and read back
//! during it, so the harness holds one buffer of them at a time instead of
//! every record (7.3 GB for 2,000,000 JSON snapshot rows).
//!
//! The layout is plain and little-endian, one record after another:
//! `u32` length of the rest, `i32` partition, `i64` timestamp (ms; `i64::MIN`
//! for none, which the broker does not return), key and value each as a `u32`
//! length (`u32::MAX` for null) and the bytes, a `u16` header count, and per
//! header a `u16` name length, the name, a `u32` value length (`u32::MAX`
//! for null) and the value. The file's name is removed as soon as it is
//! opened for writing and for reading, so a harness that is killed leaves
//! nothing on disk (gigabytes for a large snapshot).

use std::fs::File;
use std::io::{BufWriter, Read, Write};

use rdkafka::message::{Header, OwnedHeaders};

use super::Result;

const NULL: u32 = u32::MAX;
/// What the reader takes from the file at once: large enough that a read
/// system call per buffer costs nothing next to producing its records,
/// small enough to stay in the cache while they are produced.
pub const READ_BUFFER: usize = 1 << 20;
/// The least buffer a reader of one of many files gets: a read system call
/// still spans a few dozen records.
pub const MIN_READ_BUFFER: usize = 64 << 10;

/// A temporary file of records, without a name: it goes when its last
/// handle closes.
pub struct RecordFile {
    read: File,
}

impl RecordFile {
    /// A new, empty file in the temp directory, named after `topic`.
    pub fn create(topic: &str) -> Result<(Self, RecordWriter)> {
        let path = std::env::temp_dir().join(format!(
            "pgcdc-bench-{}-{}.records",
            std::process::id(),
            topic.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        ));
        let write = File::create(&path);
        let read = write.as_ref().ok().map(|_| File::open(&path));
        let _ = std::fs::remove_file(&path);
        let (write, read) = (write?, read.transpose()?);
        let read = read.ok_or("the record file could not be opened")?;
        Ok((
            RecordFile { read },
            RecordWriter {
                out: BufWriter::with_capacity(MIN_READ_BUFFER, write),
            },
        ))
    }

    /// Reads the records back from the start through a buffer of `buffer`
    /// bytes (once: the reader takes the file).
    pub fn reader(self, buffer: usize) -> Result<RecordReader> {
        Ok(RecordReader {
            file: self.read,
            buf: vec![0; buffer],
            start: 0,
            end: 0,
        })
    }
}

/// Appends records to a [`RecordFile`].
pub struct RecordWriter {
    out: BufWriter<File>,
}

impl RecordWriter {
    /// Appends one record; `headers` are (name, value) pairs.
    pub fn write(
        &mut self,
        partition: i32,
        timestamp: Option<i64>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> Result<()> {
        let field = |f: Option<&[u8]>| 4 + f.map_or(0, <[u8]>::len);
        let header_bytes: usize = headers.iter().map(|(n, v)| 2 + n.len() + field(*v)).sum();
        let length = 4 + 8 + field(key) + field(value) + 2 + header_bytes;
        self.out.write_all(&u32::try_from(length)?.to_le_bytes())?;
        self.out.write_all(&partition.to_le_bytes())?;
        self.out
            .write_all(&timestamp.unwrap_or(i64::MIN).to_le_bytes())?;
        self.bytes(key)?;
        self.bytes(value)?;
        let count = u16::try_from(headers.len())?;
        self.out.write_all(&count.to_le_bytes())?;
        for &(name, value) in headers {
            self.out
                .write_all(&u16::try_from(name.len())?.to_le_bytes())?;
            self.out.write_all(name.as_bytes())?;
            self.bytes(value)?;
        }
        Ok(())
    }

    fn bytes(&mut self, field: Option<&[u8]>) -> Result<()> {
        match field {
            Some(bytes) => {
                self.out
                    .write_all(&u32::try_from(bytes.len())?.to_le_bytes())?;
                self.out.write_all(bytes)?;
            }
            None => self.out.write_all(&NULL.to_le_bytes())?,
        }
        Ok(())
    }

    /// Writes out what is buffered.
    pub fn finish(mut self) -> Result<()> {
        self.out.flush()?;
        Ok(())
    }
}

/// One record read back, borrowing the reader's buffer.
pub struct StoredRecord<'a> {
    pub partition: i32,
    /// The timestamp the connector gave it (ms), produced again with it.
    pub timestamp: Option<i64>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Option<OwnedHeaders>,
}

/// Reads a [`RecordFile`] through one buffer, handing out records as
/// slices of it.
pub struct RecordReader {
    file: File,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl RecordReader {
    /// The next record, or `None` at the end of the file.
    pub fn next_record(&mut self) -> Result<Option<StoredRecord<'_>>> {
        if !self.fill(4)? {
            return Ok(None);
        }
        let length = u32::from_le_bytes(self.buf[self.start..self.start + 4].try_into()?) as usize;
        if !self.fill(4 + length)? {
            return Err("the record file ends inside a record".into());
        }
        let body = &self.buf[self.start + 4..self.start + 4 + length];
        self.start += 4 + length;
        parse(body).map(Some)
    }

    /// Makes `n` bytes available from `start`, reading more of the file
    /// (and moving what is left to the front, or growing the buffer for a
    /// record larger than it). `false` at a clean end of the file.
    fn fill(&mut self, n: usize) -> Result<bool> {
        while self.end - self.start < n {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() < n {
                self.buf.resize(n.next_power_of_two(), 0);
            }
            let read = self.file.read(&mut self.buf[self.end..])?;
            if read == 0 {
                return match self.end {
                    0 => Ok(false),
                    _ => Err("the record file ends inside a record".into()),
                };
            }
            self.end += read;
        }
        Ok(true)
    }
}

/// A record's fields from its bytes (after the length).
fn parse(mut body: &[u8]) -> Result<StoredRecord<'_>> {
    fn take<'a>(body: &mut &'a [u8], n: usize) -> Result<&'a [u8]> {
        if body.len() < n {
            return Err("a record in the record file is cut short".into());
        }
        let (head, rest) = body.split_at(n);
        *body = rest;
        Ok(head)
    }
    fn field<'a>(body: &mut &'a [u8]) -> Result<Option<&'a [u8]>> {
        let length = u32::from_le_bytes(take(body, 4)?.try_into()?);
        if length == NULL {
            return Ok(None);
        }
        take(body, length as usize).map(Some)
    }
    fn header<'a>(body: &mut &'a [u8]) -> Result<(&'a str, Option<&'a [u8]>)> {
        let length = u16::from_le_bytes(take(body, 2)?.try_into()?);
        let name = std::str::from_utf8(take(body, usize::from(length))?)?;
        Ok((name, field(body)?))
    }
    let partition = i32::from_le_bytes(take(&mut body, 4)?.try_into()?);
    let timestamp = i64::from_le_bytes(take(&mut body, 8)?.try_into()?);
    let timestamp = (timestamp != i64::MIN).then_some(timestamp);
    let key = field(&mut body)?;
    let value = field(&mut body)?;
    let count = u16::from_le_bytes(take(&mut body, 2)?.try_into()?);
    let mut headers = None;
    if count > 0 {
        // Sized first, as the connector's sink does (src/sink/kafka.rs), so
        // that the reference pays no more allocations than the connector.
        let mut sizing = body;
        let mut size = 0;
        for _ in 0..count {
            let (name, value) = header(&mut sizing)?;
            size += name.len() + value.map_or(0, <[u8]>::len);
        }
        let mut list = OwnedHeaders::new_sized(usize::from(count), size);
        for _ in 0..count {
            let (name, value) = header(&mut body)?;
            list = list.insert(Header { key: name, value });
        }
        headers = Some(list);
    }
    Ok(StoredRecord {
        partition,
        timestamp,
        key,
        value,
        headers,
    })
}
