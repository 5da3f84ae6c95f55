//! Dead letters (KIP-1191): a record a share group archives as
//! undeliverable (rejected, or delivered `share.delivery.count.limit`
//! times) is first written to the group's dead-letter topic
//! (`errors.deadletterqueue.topic.name`), with headers naming where it came
//! from and why, and only then archived.
//!
//! The topic must exist, allow it (`errors.deadletterqueue.group.enable`)
//! and have a name with the broker's prefix
//! (`errors.deadletterqueue.topic.name.prefix`, `dlq.`); otherwise the
//! record is archived without a dead letter, with a warning.
//!
//! Each share-partition writes its dead letters to one partition of that
//! topic, chosen from the group, topic and partition. A dead letter is
//! written once: it is written only after the record's Archiving state is
//! replicated, and marked written (Archived) after; a leader that finds
//! records still Archiving (after a failover, or a write that failed)
//! first looks among the last [`SEARCH_RECORDS`] records of that partition
//! for dead letters already written.
//!
//! Reads the log on the blocking pool, and calls the leader of the
//! dead-letter partition.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::records::Compression;
use weir_client::{ConsumedRecord, OutgoingRecord};

use crate::partition::file_io::on_the_blocking_pool;
use crate::partition::Partition;
use crate::share::persister::SharePersister;
use crate::share::DeadLetter;
use crate::share::ShareHost;

/// The header naming the record's topic.
pub const TOPIC_HEADER: &str = "__dlq.errors.topic";
/// The header naming the record's partition (decimal).
pub const PARTITION_HEADER: &str = "__dlq.errors.partition";
/// The header naming the record's offset (decimal).
pub const OFFSET_HEADER: &str = "__dlq.errors.offset";
/// The header naming the share group.
pub const GROUP_HEADER: &str = "__dlq.errors.group.id";
/// The header giving how often the record was delivered (decimal).
pub const DELIVERY_COUNT_HEADER: &str = "__dlq.errors.delivery.count";
/// The header giving why: `REJECTED` or `DELIVERY_COUNT_LIMIT`.
pub const REASON_HEADER: &str = "__dlq.errors.reason";

/// How many of the dead-letter partition's last records are searched for
/// dead letters already written.
pub const SEARCH_RECORDS: i64 = 100_000;

/// The topic config that lets a topic take dead letters.
pub const GROUP_ENABLE_CONFIG: &str = "errors.deadletterqueue.group.enable";

/// How much of a log one read takes.
const READ_BYTES: usize = 1 << 20;

/// Where a share-partition's dead letters come from.
pub(crate) struct Source<'a> {
    pub(crate) group: &'a str,
    pub(crate) topic: &'a str,
    pub(crate) partition: &'a Arc<Partition>,
}

/// Why dead letters were not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeadLetterError {
    /// They cannot be written at all (no such topic, or it does not take
    /// dead letters): archive the records without them.
    #[error("{0}")]
    Unwritable(String),
    /// Not now (no leader, a failed call): try again later.
    #[error("{0}")]
    Unavailable(String),
}

/// Writes `letters` of `source` to `dead_letter_topic`, copying each
/// record's key, value and headers when `copy_record`. With `search`, the
/// ones already in the topic are not written again. Returns, once the
/// dead-letter topic's in-sync replicas hold them, how many were written.
pub(crate) async fn write(
    host: &dyn ShareHost,
    persister: &SharePersister,
    source: &Source<'_>,
    dead_letter_topic: &str,
    copy_record: bool,
    letters: &[DeadLetter],
    search: bool,
) -> Result<usize, DeadLetterError> {
    let (partition, addr) = target(host, source, dead_letter_topic)?;
    let letters: Vec<DeadLetter> = if search {
        let written = already_written(host, persister, &addr, dead_letter_topic, partition).await?;
        letters
            .iter()
            .filter(|l| !written.iter().any(|w| is_dead_letter_of(w, source, l)))
            .copied()
            .collect()
    } else {
        letters.to_vec()
    };
    if letters.is_empty() {
        return Ok(0);
    }
    let (log, to_read) = (source.partition.clone(), letters.clone());
    let originals = on_the_blocking_pool(move || read_records(&log, &to_read))
        .await
        .map_err(|error| DeadLetterError::Unavailable(format!("cannot read the log: {error}")))?;
    let records = letters
        .iter()
        .map(|letter| {
            let original = originals
                .iter()
                .find(|r| r.offset == letter.offset)
                .filter(|_| copy_record);
            dead_letter(source, letter, original)
        })
        .collect::<Vec<_>>();
    persister
        .with_client(host, &addr, async |client| {
            client
                .produce_records(dead_letter_topic, partition, records, Compression::None)
                .await
        })
        .await
        .map(|_| letters.len())
        .map_err(|error| {
            DeadLetterError::Unavailable(format!(
                "cannot write to {dead_letter_topic}-{partition}: {error}"
            ))
        })
}

/// The partition of `dead_letter_topic` that takes `source`'s dead letters,
/// and its leader's address.
fn target(
    host: &dyn ShareHost,
    source: &Source<'_>,
    dead_letter_topic: &str,
) -> Result<(i32, String), DeadLetterError> {
    host.environment().with_image(|image| {
        let Some(topic) = image.topic(dead_letter_topic) else {
            return Err(DeadLetterError::Unwritable(format!(
                "the dead-letter topic {dead_letter_topic} does not exist"
            )));
        };
        let enabled = topic
            .configs
            .get(GROUP_ENABLE_CONFIG)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if !enabled {
            return Err(DeadLetterError::Unwritable(format!(
                "the topic {dead_letter_topic} does not take dead letters: set its {GROUP_ENABLE_CONFIG} to true"
            )));
        }
        let index = partition_for(source, topic.partition_count());
        let leader = topic.partition(index).map_or(-1, |p| p.leader);
        let addr = image
            .broker(leader)
            .filter(|_| !image.is_fenced(leader))
            .map(|b| format!("{}:{}", b.host, b.port))
            .ok_or_else(|| {
                DeadLetterError::Unavailable(format!(
                    "{dead_letter_topic}-{index} has no leader"
                ))
            })?;
        Ok((index, addr))
    })
}

/// The dead-letter partition of a share-partition: all its dead letters
/// go to one partition, so that one is all a search reads.
fn partition_for(source: &Source<'_>, partitions: i32) -> i32 {
    let mut key = Vec::new();
    key.extend_from_slice(source.group.as_bytes());
    key.push(0);
    key.extend_from_slice(source.topic.as_bytes());
    key.extend_from_slice(&source.partition.index.to_be_bytes());
    weir_client::murmur2_partition(&key, partitions.max(1))
}

/// The dead letters among the last [`SEARCH_RECORDS`] records of
/// `topic`'s `partition`.
async fn already_written(
    host: &dyn ShareHost,
    persister: &SharePersister,
    addr: &str,
    topic: &str,
    partition: i32,
) -> Result<Vec<ConsumedRecord>, DeadLetterError> {
    persister
        .with_client(host, addr, async |client| {
            let end = client
                .list_offsets(topic, partition, weir_client::LATEST)
                .await?;
            let start = client
                .list_offsets(topic, partition, weir_client::EARLIEST)
                .await?;
            let mut offset = start.max(end - SEARCH_RECORDS);
            let mut found = Vec::new();
            while offset < end {
                let target = weir_client::FetchTarget {
                    topic: topic.to_owned(),
                    partition,
                    offset,
                    max_bytes: READ_BYTES as i32,
                };
                let Some(fetched) = client
                    .fetch_many(&[target], READ_BYTES as i32, 0)
                    .await?
                    .pop()
                else {
                    break;
                };
                if fetched.next_offset <= offset {
                    break;
                }
                offset = fetched.next_offset;
                found.extend(
                    fetched
                        .records
                        .into_iter()
                        .filter(|r| header(r, GROUP_HEADER).is_some()),
                );
            }
            Ok(found)
        })
        .await
        .map_err(|error| {
            DeadLetterError::Unavailable(format!(
                "cannot search {topic}-{partition} for dead letters: {error}"
            ))
        })
}

/// Whether `record` is the dead letter of `letter`'s record.
fn is_dead_letter_of(record: &ConsumedRecord, source: &Source<'_>, letter: &DeadLetter) -> bool {
    header(record, GROUP_HEADER) == Some(source.group.as_bytes())
        && header(record, TOPIC_HEADER) == Some(source.topic.as_bytes())
        && header(record, PARTITION_HEADER) == Some(source.partition.index.to_string().as_bytes())
        && header(record, OFFSET_HEADER) == Some(letter.offset.to_string().as_bytes())
}

/// The value of `record`'s header `name`.
pub fn header<'a>(record: &'a ConsumedRecord, name: &str) -> Option<&'a [u8]> {
    record
        .headers
        .iter()
        .find(|(key, _)| key == name)
        .and_then(|(_, value)| value.as_deref())
}

/// The dead letter of `letter`: `original`'s key, value and headers when
/// it is copied, and the headers naming it.
fn dead_letter(
    source: &Source<'_>,
    letter: &DeadLetter,
    original: Option<&ConsumedRecord>,
) -> OutgoingRecord {
    let mut record = OutgoingRecord {
        key: original.and_then(|r| r.key.clone()),
        value: original.and_then(|r| r.value.clone()),
        headers: original.map(|r| r.headers.clone()).unwrap_or_default(),
    };
    for (name, value) in [
        (TOPIC_HEADER, source.topic.to_owned()),
        (PARTITION_HEADER, source.partition.index.to_string()),
        (OFFSET_HEADER, letter.offset.to_string()),
        (GROUP_HEADER, source.group.to_owned()),
        (DELIVERY_COUNT_HEADER, letter.delivery_count.to_string()),
        (REASON_HEADER, letter.reason.as_str().to_owned()),
    ] {
        record
            .headers
            .push((name.to_owned(), Some(Bytes::from(value))));
    }
    record
}

/// The records of `letters` still in the log (compaction or retention may
/// have removed some).
fn read_records(
    partition: &Partition,
    letters: &[DeadLetter],
) -> Result<Vec<ConsumedRecord>, String> {
    let (Some(first), Some(last)) = (
        letters.iter().map(|l| l.offset).min(),
        letters.iter().map(|l| l.offset).max(),
    ) else {
        return Ok(Vec::new());
    };
    let log = partition.log();
    let upper = partition.high_watermark().max(last as u64 + 1);
    let mut offset = first.max(log.log_start_offset() as i64);
    let mut found = Vec::new();
    while offset <= last {
        let slice = log
            .read(offset as u64, READ_BYTES, upper)
            .map_err(|e| e.to_string())?;
        let bytes = slice.to_bytes().map_err(|e| e.to_string())?;
        let decoded = weir_client::decode_records(bytes, offset)?;
        let Some(next) = decoded.next_offset.filter(|&next| next > offset) else {
            break;
        };
        found.extend(
            decoded
                .records
                .into_iter()
                .filter(|r| letters.iter().any(|l| l.offset == r.offset)),
        );
        offset = next;
    }
    Ok(found)
}
