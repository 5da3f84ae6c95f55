//! The byte format of the legacy `metadata.log`: a header, then command
//! records. The Raft files frame their records the same way.
//!
//! ```text
//! header  = magic "WEIRMLOG" (8) | version u32 = 1 | base_index u64 | crc32c u32 of the previous 20 bytes
//! record  = length u32 | crc32c u32 of payload | payload (`length` bytes of JSON: one Command)
//! ```
//!
//! All integers are big-endian. `base_index` is the number of commands
//! applied before the first record of the file; record `k` (from 1) holds
//! the command with index `base_index + k`. See `DESIGN.md`.

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::command::Command;
use crate::error::MetaError;

/// The magic bytes at the start of the log.
const MAGIC: &[u8; 8] = b"WEIRMLOG";
/// The log format version.
const VERSION: u32 = 1;
/// The size of the file header.
const HEADER_LEN: usize = 24;
/// The size of a record's length and checksum.
const RECORD_HEADER_LEN: usize = 8;
/// The largest payload a record may hold. Larger lengths are corruption.
pub(crate) const MAX_PAYLOAD_LEN: usize = 16 << 20;

#[cfg(test)]
pub(crate) fn encode_header(base_index: u64) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_be_bytes());
    header[12..20].copy_from_slice(&base_index.to_be_bytes());
    let crc = crc32c::crc32c(&header[..20]);
    header[20..].copy_from_slice(&crc.to_be_bytes());
    header
}

/// The base index stored in a header, or what is wrong with it.
pub(crate) fn decode_header(bytes: &[u8]) -> Result<u64, String> {
    if bytes.len() < HEADER_LEN {
        return Err(format!(
            "the file is {} bytes long, shorter than its {HEADER_LEN}-byte header",
            bytes.len()
        ));
    }
    if &bytes[..8] != MAGIC {
        return Err("bad magic at byte 0: not a Weir metadata log".to_owned());
    }
    let stored = u32::from_be_bytes(word(&bytes[20..24]));
    let computed = crc32c::crc32c(&bytes[..20]);
    if stored != computed {
        return Err(format!(
            "header checksum mismatch at byte 20 (stored {stored:#010x}, computed {computed:#010x})"
        ));
    }
    let version = u32::from_be_bytes(word(&bytes[8..12]));
    if version != VERSION {
        return Err(format!(
            "unsupported log format version {version} at byte 8 (this build reads {VERSION})"
        ));
    }
    let mut base = [0u8; 8];
    base.copy_from_slice(&bytes[12..20]);
    Ok(u64::from_be_bytes(base))
}

pub(crate) fn encode_record(payload: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(RECORD_HEADER_LEN + payload.len());
    // Payloads are capped at MAX_PAYLOAD_LEN by the caller, so this fits.
    record.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    record.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    record.extend_from_slice(payload);
    record
}

/// The records of a log file, read from its bytes.
#[derive(Debug)]
pub(crate) struct Scan<T = Command> {
    /// Each record's byte position and decoded payload, in order.
    pub(crate) records: Vec<(u64, T)>,
    /// The length of the file up to the end of the last good record.
    pub(crate) valid_len: u64,
    /// What was found after `valid_len` when it is a torn write to drop.
    pub(crate) torn: Option<String>,
}

/// Reads every record after the header. A torn final record (the tail of a
/// write interrupted by a crash) ends the scan and is reported in
/// [`Scan::torn`]; any other damage is a `Corrupt` error naming the file,
/// the record and its byte position.
pub(crate) fn scan(bytes: &[u8], path: &Path) -> Result<Scan, MetaError> {
    scan_records(bytes, HEADER_LEN, path)
}

/// Reads the records that start at byte `start` (after a file header of
/// that length), each payload a JSON `T`, with the torn-tail rules of
/// [`scan`].
pub(crate) fn scan_records<T: DeserializeOwned>(
    bytes: &[u8],
    start: usize,
    path: &Path,
) -> Result<Scan<T>, MetaError> {
    let corrupt = |reason: String| MetaError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    let mut records = Vec::new();
    let mut pos = start.min(bytes.len());
    let mut torn = None;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let number = records.len() + 1;
        if rest.iter().all(|&b| b == 0) {
            torn = Some(format!("{} zero bytes at byte {pos}", rest.len()));
            break;
        }
        if rest.len() < RECORD_HEADER_LEN {
            torn = Some(format!(
                "a {}-byte partial record header at byte {pos}",
                rest.len()
            ));
            break;
        }
        let len = u32::from_be_bytes(word(&rest[..4])) as usize;
        let stored_crc = u32::from_be_bytes(word(&rest[4..8]));
        if len == 0 || len > MAX_PAYLOAD_LEN {
            return Err(corrupt(format!(
                "record {number} at byte {pos} has an invalid length {len}"
            )));
        }
        let end = RECORD_HEADER_LEN + len;
        if end > rest.len() {
            // A write cut short leaves a prefix of one JSON payload, maybe
            // followed by zeros; more records after it mean the length
            // itself is damaged.
            if is_torn_tail(&rest[RECORD_HEADER_LEN..]) {
                torn = Some(format!(
                    "record {number} at byte {pos} is {} bytes long but only {} remain",
                    end,
                    rest.len()
                ));
                break;
            }
            return Err(corrupt(format!(
                "record {number} at byte {pos} has length {len}, reaching past the end of the file, yet other data follows it"
            )));
        }
        let payload = &rest[RECORD_HEADER_LEN..end];
        let computed_crc = crc32c::crc32c(payload);
        if computed_crc != stored_crc {
            // JSON never holds a NUL byte: zeros at the end of the final
            // record are sectors a crash left unwritten.
            let at_end = end == rest.len();
            if at_end && payload.contains(&0) && is_torn_tail(payload) {
                torn = Some(format!(
                    "record {number} at byte {pos} ends in unwritten (zero) bytes"
                ));
                break;
            }
            return Err(corrupt(format!(
                "record {number} at byte {pos}: checksum mismatch (stored {stored_crc:#010x}, computed {computed_crc:#010x})"
            )));
        }
        let command: T = serde_json::from_slice(payload).map_err(|e| {
            corrupt(format!(
                "record {number} at byte {pos}: the checksum matches but the payload does not decode: {e}"
            ))
        })?;
        records.push((pos as u64, command));
        pos += end;
    }
    Ok(Scan {
        records,
        valid_len: pos as u64,
        torn,
    })
}

/// True when no non-zero byte follows a zero byte: non-zero data, then
/// only zeros (either part may be empty).
fn is_torn_tail(bytes: &[u8]) -> bool {
    match bytes.iter().position(|&b| b == 0) {
        Some(first_zero) => bytes[first_zero..].iter().all(|&b| b == 0),
        None => true,
    }
}

fn word(bytes: &[u8]) -> [u8; 4] {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[..4]);
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_damage() {
        let header = encode_header(42);
        assert_eq!(decode_header(&header), Ok(42));
        for i in 0..HEADER_LEN {
            let mut damaged = header;
            damaged[i] ^= 0x01;
            assert!(
                decode_header(&damaged).is_err(),
                "flip at byte {i} accepted"
            );
        }
        assert!(decode_header(&header[..10]).is_err());
    }

    #[test]
    fn torn_tail_shapes() {
        assert!(is_torn_tail(b""));
        assert!(is_torn_tail(b"{\"a\":"));
        assert!(is_torn_tail(b"{\"a\":\0\0\0"));
        assert!(is_torn_tail(b"\0\0"));
        assert!(!is_torn_tail(b"{\"a\"\0\0\x01x"));
    }
}
