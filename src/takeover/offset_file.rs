//! Reading Debezium Server's offset file (`offset.storage.file.filename`).
//!
//! Kafka's `FileOffsetBackingStore.save()` writes one Java-serialized
//! object (`ObjectOutputStream.writeObject`): a `java.util.HashMap` of
//! `byte[]` keys to `byte[]` values, the keys and values being what
//! Connect's JsonConverter wrote (as in the offsets topic). This reads
//! exactly that shape of the [serialization stream protocol]: the stream
//! header, the HashMap's class descriptor, its `loadFactor` and `threshold`
//! fields, the block of bucket count and size, then `size` key/value pairs
//! of `byte[]` (or null), then the end of the block. Anything else is
//! refused with what was found: never guessed at.
//!
//! [serialization stream protocol]: https://docs.oracle.com/en/java/javase/21/docs/specs/serialization/protocol.html

use std::path::Path;

use super::{Entry, TakeoverError};

const STREAM_MAGIC: [u8; 4] = [0xAC, 0xED, 0x00, 0x05];
const TC_NULL: u8 = 0x70;
const TC_REFERENCE: u8 = 0x71;
const TC_CLASSDESC: u8 = 0x72;
const TC_OBJECT: u8 = 0x73;
const TC_ARRAY: u8 = 0x75;
const TC_BLOCKDATA: u8 = 0x77;
const TC_ENDBLOCKDATA: u8 = 0x78;
/// The first handle a stream assigns.
const BASE_HANDLE: u32 = 0x7E_0000;

/// The file's `(key, value)` entries (a missing value: null), in no
/// particular order (a HashMap's).
pub fn read(path: &Path) -> Result<Vec<Entry>, TakeoverError> {
    let bytes = std::fs::read(path).map_err(|source| TakeoverError::File {
        path: path.to_owned(),
        source,
    })?;
    parse(&bytes).map_err(|reason| TakeoverError::FileFormat {
        path: path.to_owned(),
        reason,
    })
}

/// The entries of a serialized `HashMap<byte[], byte[]>`.
pub(super) fn parse(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    let mut r = Reader {
        bytes,
        at: 0,
        handles: 0,
        byte_array_class: None,
        arrays: Vec::new(),
    };
    if r.take(4)? != STREAM_MAGIC {
        return Err("it does not start with Java serialization's stream header".to_owned());
    }
    r.expect(TC_OBJECT, "an object")?;
    r.expect(TC_CLASSDESC, "a class descriptor")?;
    let class = r.utf()?;
    if class != "java.util.HashMap" {
        return Err(format!("it holds a {class}, not a java.util.HashMap"));
    }
    r.take(8)?; // serialVersionUID
    r.handles += 1;
    r.take(1)?; // flags: SC_SERIALIZABLE | SC_WRITE_METHOD
    let fields = r.u16()?;
    let mut names = Vec::new();
    for _ in 0..fields {
        let kind = r.u8()?;
        let name = r.utf()?;
        if !matches!(kind, b'F' | b'I') {
            return Err(format!("HashMap field {name} has an unexpected type"));
        }
        names.push(name);
    }
    if names != ["loadFactor", "threshold"] {
        return Err(format!(
            "HashMap fields {names:?}, not loadFactor and threshold"
        ));
    }
    r.expect(TC_ENDBLOCKDATA, "the end of the class annotations")?;
    r.expect(TC_NULL, "no superclass descriptor")?;
    r.handles += 1; // the map itself
    r.take(8)?; // loadFactor, threshold
    r.expect(TC_BLOCKDATA, "the map's bucket count and size")?;
    if r.u8()? != 8 {
        return Err("the map's block is not 8 bytes".to_owned());
    }
    r.take(4)?; // buckets
    let size = r.u32()?;
    let mut entries = Vec::new();
    for _ in 0..size {
        let key = r.byte_array()?;
        let value = r.byte_array()?;
        let key = key.ok_or("a null key")?;
        entries.push((key, value));
    }
    r.expect(TC_ENDBLOCKDATA, "the end of the map")?;
    if r.at != bytes.len() {
        return Err(format!(
            "{} bytes follow the map",
            bytes.len().saturating_sub(r.at)
        ));
    }
    Ok(entries)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Handles assigned so far.
    handles: u32,
    /// The handle of `[B`'s class descriptor, once seen.
    byte_array_class: Option<u32>,
    /// The arrays read, by handle, for back references.
    arrays: Vec<(u32, Vec<u8>)>,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("it ends early, at byte {}", self.bytes.len()))?;
        let slice = self.bytes.get(self.at..end).unwrap_or_default();
        self.at = end;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?.first().copied().unwrap_or_default())
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn utf(&mut self) -> Result<String, String> {
        let n = usize::from(self.u16()?);
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    fn expect(&mut self, tag: u8, what: &str) -> Result<(), String> {
        let at = self.at;
        let found = self.u8()?;
        match found == tag {
            true => Ok(()),
            false => Err(format!(
                "byte {at} is 0x{found:02x} where {what} (0x{tag:02x}) belongs"
            )),
        }
    }

    /// A `byte[]` object, or null.
    fn byte_array(&mut self) -> Result<Option<Vec<u8>>, String> {
        let at = self.at;
        match self.u8()? {
            TC_NULL => Ok(None),
            TC_REFERENCE => {
                let handle = self.u32()?;
                let array = self.arrays.iter().find(|(h, _)| *h == handle);
                array
                    .map(|(_, a)| Some(a.clone()))
                    .ok_or_else(|| format!("byte {at} refers to an unknown object"))
            }
            TC_ARRAY => {
                self.array_class()?;
                let handle = BASE_HANDLE + self.handles;
                self.handles += 1;
                let n = usize::try_from(self.u32()?).map_err(|_| "an array too large")?;
                let array = self.take(n)?.to_vec();
                self.arrays.push((handle, array.clone()));
                Ok(Some(array))
            }
            other => Err(format!(
                "byte {at} is 0x{other:02x} where a byte[] or null belongs"
            )),
        }
    }

    /// `[B`'s class descriptor, in full the first time, then by reference.
    fn array_class(&mut self) -> Result<(), String> {
        let at = self.at;
        match self.u8()? {
            TC_CLASSDESC => {
                let class = self.utf()?;
                if class != "[B" {
                    return Err(format!("an array of {class}, not a byte[]"));
                }
                self.take(8)?; // serialVersionUID
                self.byte_array_class = Some(BASE_HANDLE + self.handles);
                self.handles += 1;
                self.take(1)?; // flags
                if self.u16()? != 0 {
                    return Err("byte[] with fields".to_owned());
                }
                self.expect(TC_ENDBLOCKDATA, "the end of byte[]'s annotations")?;
                self.expect(TC_NULL, "no superclass of byte[]")
            }
            TC_REFERENCE => {
                let handle = self.u32()?;
                match Some(handle) == self.byte_array_class {
                    true => Ok(()),
                    false => Err(format!("byte {at} refers to a class that is not byte[]")),
                }
            }
            other => Err(format!(
                "byte {at} is 0x{other:02x} where byte[]'s class belongs"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Kafka 4's `FileOffsetBackingStore` (in Debezium 3.6.1's
    /// classpath) saved for one Debezium offset, written by that class on
    /// Java 25 (see `tests/data/debezium-offsets.dat.md`).
    const SAVED: &[u8] = include_bytes!("../../tests/data/debezium-offsets.dat");

    #[test]
    fn reads_what_file_offset_backing_store_saves() {
        let entries = parse(SAVED).expect("the saved file reads");
        assert_eq!(entries.len(), 2);
        let keys: Vec<String> = entries
            .iter()
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .collect();
        assert!(
            keys.contains(&r#"["dbz",{"server":"app"}]"#.to_owned()),
            "{keys:?}"
        );
        let (_, value) = entries
            .iter()
            .find(|(k, _)| k.as_slice() == br#"["dbz",{"server":"app"}]"#)
            .expect("the connector's entry");
        let offset =
            super::super::DebeziumOffset::parse(value.as_deref().expect("a value"), "file")
                .expect("Debezium's offset");
        assert_eq!(offset.lsn_commit, Some(23_905_552));
        assert_eq!(offset.lsn_proc, Some(23_905_960));
    }

    #[test]
    fn anything_else_is_refused_never_guessed() {
        assert!(parse(b"").is_err());
        assert!(parse(b"{\"lsn\":1}").is_err());
        for cut in [5, 20, SAVED.len() / 2, SAVED.len() - 1] {
            assert!(parse(&SAVED[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = SAVED.to_vec();
        trailing.push(0);
        assert!(parse(&trailing).is_err());
        let mut other_class = SAVED.to_vec();
        if let Some(i) = other_class.windows(7).position(|w| w == b"HashMap") {
            other_class[i] = b'X';
        }
        let error = parse(&other_class).unwrap_err();
        assert!(error.contains("XashMap"), "{error}");
    }
}
