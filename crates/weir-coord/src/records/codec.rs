//! The primitives every internal-topic schema is written in: Kafka's
//! classic encoding (big-endian integers, strings with an i16 length, -1
//! for null, bytes with an i32 length) and its flexible one (unsigned
//! varints, compact lengths of n + 1 with 0 for null, tagged fields), as
//! Kafka's generated `*Key`/`*Value` classes write them. Readers take a
//! `&mut &[u8]` and move it past what they read; a record cut short or
//! malformed is a [`RecordError`], never a panic.

use bytes::{Buf, BufMut, BytesMut};
use uuid::Uuid;

/// A record of an internal topic that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed record of an internal topic: {0}")]
pub struct RecordError(pub(crate) String);

impl RecordError {
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }
}

pub(crate) fn put_string(buf: &mut BytesMut, s: &str) {
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

pub(crate) fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(buf, s),
        None => buf.put_i16(-1),
    }
}

pub(crate) fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(b.len() as i32);
    buf.put_slice(b);
}

pub(crate) fn put_uvarint(buf: &mut BytesMut, mut n: u64) {
    while n >= 0x80 {
        buf.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    buf.put_u8(n as u8);
}

/// A compact array's or string's length (+ 1: 0 is null).
pub(crate) fn put_length(buf: &mut BytesMut, len: usize) {
    put_uvarint(buf, len as u64 + 1);
}

pub(crate) fn put_compact_string(buf: &mut BytesMut, s: &str) {
    put_length(buf, s.len());
    buf.put_slice(s.as_bytes());
}

pub(crate) fn put_compact_nullable(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_compact_string(buf, s),
        None => put_uvarint(buf, 0),
    }
}

/// An empty set of tagged fields.
pub(crate) fn put_no_tags(buf: &mut BytesMut) {
    put_uvarint(buf, 0);
}

/// The next `n` bytes.
pub(crate) fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], RecordError> {
    if buf.len() < n {
        return Err(RecordError(format!("{n} bytes needed, {} left", buf.len())));
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

pub(crate) fn get_i8(buf: &mut &[u8]) -> Result<i8, RecordError> {
    Ok(take(buf, 1)?[0] as i8)
}

pub(crate) fn get_i16(buf: &mut &[u8]) -> Result<i16, RecordError> {
    Ok(take(buf, 2)?.get_i16())
}

pub(crate) fn get_i32(buf: &mut &[u8]) -> Result<i32, RecordError> {
    Ok(take(buf, 4)?.get_i32())
}

pub(crate) fn get_i64(buf: &mut &[u8]) -> Result<i64, RecordError> {
    Ok(take(buf, 8)?.get_i64())
}

pub(crate) fn get_uuid(buf: &mut &[u8]) -> Result<Uuid, RecordError> {
    Ok(Uuid::from_slice(take(buf, 16)?).expect("16 bytes"))
}

fn utf8(bytes: &[u8]) -> Result<String, RecordError> {
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| RecordError::new("string is not UTF-8"))
}

/// A classic string that may not be null.
pub(crate) fn get_string(buf: &mut &[u8]) -> Result<String, RecordError> {
    get_nullable_string(buf)?.ok_or_else(|| RecordError::new("null string"))
}

pub(crate) fn get_nullable_string(buf: &mut &[u8]) -> Result<Option<String>, RecordError> {
    let len = get_i16(buf)?;
    if len == -1 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| RecordError::new("negative string length"))?;
    utf8(take(buf, len)?).map(Some)
}

/// Classic bytes that may not be null.
pub(crate) fn get_bytes(buf: &mut &[u8]) -> Result<Vec<u8>, RecordError> {
    let len = get_i32(buf)?;
    let len = usize::try_from(len).map_err(|_| RecordError::new("null bytes"))?;
    Ok(take(buf, len)?.to_vec())
}

/// An unsigned varint of at most 32 bits, as Kafka's `readUnsignedVarint`.
pub(crate) fn get_uvarint(buf: &mut &[u8]) -> Result<u64, RecordError> {
    let mut value = 0u64;
    for shift in (0..35).step_by(7) {
        let byte = take(buf, 1)?[0];
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(RecordError::new("varint too long"))
}

/// A compact length; null (0) reads as `None`.
pub(crate) fn get_nullable_length(buf: &mut &[u8]) -> Result<Option<usize>, RecordError> {
    Ok(get_uvarint(buf)?.checked_sub(1).map(|n| n as usize))
}

/// A compact length; null reads as empty.
pub(crate) fn get_length(buf: &mut &[u8]) -> Result<usize, RecordError> {
    Ok(get_nullable_length(buf)?.unwrap_or(0))
}

pub(crate) fn get_compact_nullable(buf: &mut &[u8]) -> Result<Option<String>, RecordError> {
    match get_nullable_length(buf)? {
        None => Ok(None),
        Some(len) => utf8(take(buf, len)?).map(Some),
    }
}

/// A compact string; null reads as empty.
pub(crate) fn get_compact_string(buf: &mut &[u8]) -> Result<String, RecordError> {
    Ok(get_compact_nullable(buf)?.unwrap_or_default())
}

/// Skips a set of tagged fields: fields this version does not know are
/// left for newer readers, as Kafka's schemas allow.
pub(crate) fn skip_tags(buf: &mut &[u8]) -> Result<(), RecordError> {
    for _ in 0..get_uvarint(buf)? {
        get_uvarint(buf)?;
        let size = get_uvarint(buf)? as usize;
        take(buf, size)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_primitive_reads_back_what_was_written() {
        let mut buf = BytesMut::new();
        put_string(&mut buf, "group");
        put_nullable_string(&mut buf, None);
        put_bytes(&mut buf, b"\x00\x01");
        put_uvarint(&mut buf, 300);
        put_compact_string(&mut buf, "topic");
        put_compact_nullable(&mut buf, None);
        put_no_tags(&mut buf);
        let mut read = &buf[..];
        assert_eq!(get_string(&mut read).unwrap(), "group");
        assert_eq!(get_nullable_string(&mut read).unwrap(), None);
        assert_eq!(get_bytes(&mut read).unwrap(), b"\x00\x01");
        assert_eq!(get_uvarint(&mut read).unwrap(), 300);
        assert_eq!(get_compact_string(&mut read).unwrap(), "topic");
        assert_eq!(get_compact_nullable(&mut read).unwrap(), None);
        skip_tags(&mut read).unwrap();
        assert!(read.is_empty());
    }

    #[test]
    fn a_record_cut_short_or_malformed_is_an_error() {
        assert!(get_i64(&mut &[0u8; 7][..]).is_err());
        assert!(get_string(&mut &[0xff, 0xff][..]).is_err(), "null");
        assert!(get_string(&mut &[0, 5, b'a'][..]).is_err(), "cut short");
        assert!(get_string(&mut &[0, 1, 0xff][..]).is_err(), "not UTF-8");
        assert!(get_uvarint(&mut &[0xff; 6][..]).is_err(), "too long");
        assert!(skip_tags(&mut &[1, 0, 9, 0][..]).is_err(), "tag cut short");
    }
}
