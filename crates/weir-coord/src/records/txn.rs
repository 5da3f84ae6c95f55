//! The records of `__transaction_state`, in Kafka's key and value schemas,
//! so that tools reading the topic understand it.
//!
//! ```text
//! key   v0: version i16, transactional id string
//! value v0: version i16, producer id i64, producer epoch i16,
//!           transaction timeout ms i32, status i8,
//!           partitions [ topic string, partition ids [i32] ] (nullable),
//!           last update timestamp ms i64, start timestamp ms i64
//! ```
//!
//! Strings are an i16 length and UTF-8 bytes; arrays an i32 count (-1 for
//! null). A null value is a tombstone: the transactional id has expired.
//!
//! Value v1 (KIP-890, written once `transaction.version` is 1 or more) is
//! flexible: compact strings and arrays, and tagged fields: 0 the previous
//! producer id, 1 the next producer id (both -1 by default), 2 the client's
//! transaction version (0 by default).

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};

use super::codec::{
    get_compact_nullable, get_i16, get_i32, get_i64, get_i8, get_string, get_uvarint, put_string,
    put_uvarint, skip_tags, take, RecordError,
};
use crate::txn::{TxnMetadata, TxnStatus};

const KEY_VERSION: i16 = 0;

const PREVIOUS_PRODUCER_ID_TAG: u64 = 0;
const NEXT_PRODUCER_ID_TAG: u64 = 1;
const CLIENT_TRANSACTION_VERSION_TAG: u64 = 2;

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + transactional_id.len());
    buf.put_i16(KEY_VERSION);
    put_string(&mut buf, transactional_id);
    buf.freeze()
}

pub fn decode_key(mut buf: &[u8]) -> Result<String, RecordError> {
    match get_i16(&mut buf)? {
        KEY_VERSION => get_string(&mut buf),
        other => Err(RecordError(format!(
            "unknown transaction log key version {other}"
        ))),
    }
}

/// The value of `txn`, in v1 when `flexible`, else in v0.
pub fn encode_value(txn: &TxnMetadata, flexible: bool) -> Bytes {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(i16::from(flexible));
    buf.put_i64(txn.producer_id);
    buf.put_i16(txn.producer_epoch);
    buf.put_i32(txn.timeout_ms);
    buf.put_i8(txn.status as i8);
    // Kafka writes the partitions only while a transaction has any.
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in &txn.partitions {
        match topics.last_mut() {
            Some((last, ids)) if *last == topic.as_str() => ids.push(*partition),
            _ => topics.push((topic, vec![*partition])),
        }
    }
    put_count(&mut buf, topics.len(), flexible);
    for (topic, ids) in topics {
        if flexible {
            put_uvarint(&mut buf, topic.len() as u64 + 1);
            buf.put_slice(topic.as_bytes());
        } else {
            put_string(&mut buf, topic);
        }
        put_count(&mut buf, ids.len(), flexible);
        for id in ids {
            buf.put_i32(id);
        }
        if flexible {
            put_uvarint(&mut buf, 0);
        }
    }
    buf.put_i64(txn.last_update_ms);
    buf.put_i64(txn.start_ms);
    if flexible {
        // Tagged fields in tag order, each only when not at its default.
        let mut tagged = BytesMut::new();
        let mut count = 0;
        for (tag, value, default) in [
            (PREVIOUS_PRODUCER_ID_TAG, txn.previous_producer_id, -1),
            (NEXT_PRODUCER_ID_TAG, txn.next_producer_id, -1),
        ] {
            if value != default {
                put_uvarint(&mut tagged, tag);
                put_uvarint(&mut tagged, 8);
                tagged.put_i64(value);
                count += 1;
            }
        }
        if txn.client_transaction_version != 0 {
            put_uvarint(&mut tagged, CLIENT_TRANSACTION_VERSION_TAG);
            put_uvarint(&mut tagged, 2);
            tagged.put_i16(txn.client_transaction_version);
            count += 1;
        }
        put_uvarint(&mut buf, count);
        buf.put_slice(&tagged);
    }
    buf.freeze()
}

fn put_count(buf: &mut BytesMut, count: usize, flexible: bool) {
    if flexible {
        put_uvarint(buf, count as u64 + 1);
    } else {
        buf.put_i32(count as i32);
    }
}

/// The transaction a value describes, for `transactional_id`.
pub fn decode_value(transactional_id: &str, mut buf: &[u8]) -> Result<TxnMetadata, RecordError> {
    let version = get_i16(&mut buf)?;
    if !(0..=1).contains(&version) {
        return Err(RecordError(format!(
            "unknown transaction log value version {version}"
        )));
    }
    let flexible = version >= 1;
    let producer_id = get_i64(&mut buf)?;
    let producer_epoch = get_i16(&mut buf)?;
    let timeout_ms = get_i32(&mut buf)?;
    let status = get_i8(&mut buf)?;
    let status = TxnStatus::from_code(status)
        .ok_or_else(|| RecordError(format!("unknown transaction status {status}")))?;
    let mut partitions = BTreeSet::new();
    let topics = get_count(&mut buf, flexible)?;
    for _ in 0..topics {
        let topic = if flexible {
            get_compact_nullable(&mut buf)?.ok_or_else(|| RecordError::new("null topic"))?
        } else {
            get_string(&mut buf)?
        };
        for _ in 0..get_count(&mut buf, flexible)? {
            partitions.insert((topic.clone(), get_i32(&mut buf)?));
        }
        if flexible {
            skip_tags(&mut buf)?;
        }
    }
    let last_update_ms = get_i64(&mut buf)?;
    let start_ms = get_i64(&mut buf)?;
    let mut txn = TxnMetadata {
        transactional_id: transactional_id.to_owned(),
        producer_id,
        producer_epoch,
        timeout_ms,
        status,
        partitions,
        start_ms,
        last_update_ms,
        previous_producer_id: -1,
        next_producer_id: -1,
        client_transaction_version: 0,
    };
    if flexible {
        for _ in 0..get_uvarint(&mut buf)? {
            let tag = get_uvarint(&mut buf)?;
            let size = get_uvarint(&mut buf)? as usize;
            let mut field = take(&mut buf, size)?;
            match tag {
                PREVIOUS_PRODUCER_ID_TAG => txn.previous_producer_id = get_i64(&mut field)?,
                NEXT_PRODUCER_ID_TAG => txn.next_producer_id = get_i64(&mut field)?,
                CLIENT_TRANSACTION_VERSION_TAG => {
                    txn.client_transaction_version = get_i16(&mut field)?
                }
                _ => {}
            }
        }
    }
    Ok(txn)
}

/// An array's element count: i32 (-1 for null) in v0, an unsigned varint
/// of count + 1 (0 for null) in flexible versions.
fn get_count(buf: &mut &[u8], flexible: bool) -> Result<usize, RecordError> {
    if flexible {
        return Ok(get_uvarint(buf)?.saturating_sub(1) as usize);
    }
    Ok(usize::try_from(get_i32(buf)?).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> TxnMetadata {
        TxnMetadata {
            transactional_id: "t1".into(),
            producer_id: 7,
            producer_epoch: 3,
            timeout_ms: 60_000,
            status: TxnStatus::Ongoing,
            partitions: [
                ("a".to_owned(), 0),
                ("a".to_owned(), 2),
                ("b".to_owned(), 1),
            ]
            .into_iter()
            .collect(),
            start_ms: 1_000,
            last_update_ms: 2_000,
            previous_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 0,
        }
    }

    #[test]
    fn keys_and_values_round_trip() {
        assert_eq!(decode_key(&encode_key("t1")).unwrap(), "t1");
        let mut txn = ongoing();
        assert_eq!(decode_value("t1", &encode_value(&txn, false)).unwrap(), txn);
        assert_eq!(decode_value("t1", &encode_value(&txn, true)).unwrap(), txn);
        txn.previous_producer_id = 6;
        txn.next_producer_id = 300;
        txn.client_transaction_version = 2;
        assert_eq!(decode_value("t1", &encode_value(&txn, true)).unwrap(), txn);
    }

    #[test]
    fn value_bytes_match_kafkas_layout() {
        let mut txn = ongoing();
        txn.partitions = [("a".to_owned(), 2)].into_iter().collect();
        let mut expected = vec![0, 0]; // version
        expected.extend(7i64.to_be_bytes());
        expected.extend(3i16.to_be_bytes());
        expected.extend(60_000i32.to_be_bytes());
        expected.push(1); // Ongoing
        expected.extend(1i32.to_be_bytes()); // one topic
        expected.extend([0, 1, b'a']);
        expected.extend(1i32.to_be_bytes());
        expected.extend(2i32.to_be_bytes());
        expected.extend(2_000i64.to_be_bytes());
        expected.extend(1_000i64.to_be_bytes());
        assert_eq!(&encode_value(&txn, false)[..], &expected[..]);
        assert_eq!(&encode_key("t1")[..], &[0, 0, 0, 2, b't', b'1']);
    }

    #[test]
    fn flexible_values_are_read() {
        // v1: compact arrays and strings, tagged fields after each struct.
        let mut bytes = vec![0, 1];
        bytes.extend(7i64.to_be_bytes());
        bytes.extend(3i16.to_be_bytes());
        bytes.extend(60_000i32.to_be_bytes());
        bytes.push(4); // CompleteCommit
        bytes.push(2); // one topic
        bytes.extend([2, b'a']);
        bytes.push(2); // one partition
        bytes.extend(5i32.to_be_bytes());
        bytes.push(0); // the topic's tagged fields
        bytes.extend(2_000i64.to_be_bytes());
        bytes.extend(1_000i64.to_be_bytes());
        bytes.extend([1, 2, 2, 0, 2]); // one tagged field: client transaction version 2
        let txn = decode_value("t1", &bytes).unwrap();
        assert_eq!(txn.status, TxnStatus::CompleteCommit);
        assert_eq!(txn.client_transaction_version, 2);
        assert_eq!((txn.previous_producer_id, txn.next_producer_id), (-1, -1));
        assert_eq!(
            &encode_value(&txn, true)[..],
            &bytes[..],
            "written as Kafka writes it"
        );
        assert_eq!(
            txn.partitions,
            [("a".to_owned(), 5)].into_iter().collect::<BTreeSet<_>>()
        );
    }

    #[test]
    fn malformed_values_are_errors() {
        assert!(decode_value("t", &[0, 0, 1]).is_err());
        assert!(decode_value("t", &[0, 9]).is_err());
        assert!(decode_key(&[0, 1, 0, 0]).is_err());
    }
}
