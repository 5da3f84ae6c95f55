//! `weir produce TOPIC`: one record per stdin line, batched per partition,
//! written by an idempotent producer that carries on across broker
//! failures until its delivery timeout.

use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Args, ValueEnum};
use tokio::io::{AsyncBufReadExt, BufReader};
use weir_client::{
    murmur2_partition, ClientError, Cluster, Compression, IdempotentProducer, OutgoingRecord,
};

use super::{block_on, check_partition, topic_error, topic_metadata, Connection};

#[derive(Args, Debug)]
pub(crate) struct ProduceArgs {
    topic: String,
    /// Split each line at the first SEP into key and value. Keyed records
    /// go to the partition the Java client's default partitioner picks
    /// (murmur2 of the key), so a key always lands on the same partition.
    #[arg(long, short = 'K', value_name = "SEP")]
    key_separator: Option<String>,
    /// Send every record to this partition.
    #[arg(long, short = 'p')]
    partition: Option<i32>,
    /// Records per produce request and partition.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    batch_records: usize,
    /// Bytes per produce request and partition, at most (a longer line
    /// goes alone); keep it under the broker's `message.max.bytes`.
    #[arg(long, default_value_t = 1_000_000, value_name = "BYTES")]
    batch_bytes: usize,
    /// Send what is buffered once stdin has been quiet this long.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    linger_ms: u64,
    /// Compress batches.
    #[arg(long, value_enum, default_value_t = Codec::None)]
    compression: Codec,
    /// A header for every record, KEY=VALUE (repeat for several; KEY
    /// alone for a null value).
    #[arg(long = "header", short = 'H', value_name = "KEY=VALUE", value_parser = parse_header)]
    headers: Vec<(String, Option<Bytes>)>,
    /// How long a batch is retried (leader changes, brokers restarting,
    /// not enough replicas) before the command gives up, as Kafka's
    /// `delivery.timeout.ms`. Retries never write a record twice.
    #[arg(long, default_value_t = 120_000, value_name = "MS")]
    delivery_timeout_ms: u64,
    #[command(flatten)]
    connection: Connection,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    fn compression(self) -> Compression {
        match self {
            Self::None => Compression::None,
            Self::Gzip => Compression::Gzip,
            Self::Snappy => Compression::Snappy,
            Self::Lz4 => Compression::Lz4,
            Self::Zstd => Compression::Zstd,
        }
    }
}

type Record = OutgoingRecord;

fn parse_header(text: &str) -> Result<(String, Option<Bytes>), String> {
    let (key, value) = match text.split_once('=') {
        Some((key, value)) => (key, Some(Bytes::copy_from_slice(value.as_bytes()))),
        None => (text, None),
    };
    if key.is_empty() {
        return Err(format!("expected KEY=VALUE, got {text:?}"));
    }
    Ok((key.to_owned(), value))
}

/// A bound on a v2 record's framing: length, attributes, timestamp and
/// offset deltas, key and value lengths, header count.
const RECORD_OVERHEAD: usize = 24;

/// Records waiting to be sent, per partition.
struct Batches {
    pending: Vec<(Vec<Record>, usize)>,
    max_records: usize,
    max_bytes: usize,
    /// Where unkeyed records go: it moves on each time its batch is sent,
    /// as the Java client's sticky partitioner does.
    sticky: usize,
}

impl Batches {
    fn new(partitions: usize, max_records: usize, max_bytes: usize, sticky: usize) -> Self {
        Self {
            pending: (0..partitions).map(|_| (Vec::new(), 0)).collect(),
            max_records: max_records.max(1),
            max_bytes: max_bytes.max(1),
            sticky: sticky % partitions.max(1),
        }
    }

    /// Adds a record to partition index `index` (the sticky one if
    /// `None`), and returns the batches now ready to send: a batch the
    /// record did not fit in, and the record's batch if it is full.
    fn add(&mut self, index: Option<usize>, record: Record) -> Vec<(usize, Vec<Record>)> {
        // Key, value, and at most this much framing per record.
        let headers: usize = record
            .headers
            .iter()
            .map(|(key, value)| key.len() + value.as_ref().map_or(0, Bytes::len) + 10)
            .sum();
        let size = record.key.as_ref().map_or(0, Bytes::len)
            + record.value.as_ref().map_or(0, Bytes::len)
            + headers
            + RECORD_OVERHEAD;
        let mut ready = Vec::new();
        let mut at = index.unwrap_or(self.sticky);
        let (records, bytes) = &self.pending[at];
        if !records.is_empty() && bytes + size > self.max_bytes {
            ready.push((at, self.take(at)));
            at = index.unwrap_or(self.sticky);
        }
        let (records, bytes) = &mut self.pending[at];
        records.push(record);
        *bytes += size;
        if records.len() >= self.max_records || *bytes >= self.max_bytes {
            ready.push((at, self.take(at)));
        }
        ready
    }

    /// Takes the batch of `index`.
    fn take(&mut self, index: usize) -> Vec<Record> {
        if index == self.sticky {
            self.sticky = (self.sticky + 1) % self.pending.len();
        }
        let (records, bytes) = &mut self.pending[index];
        *bytes = 0;
        std::mem::take(records)
    }

    fn is_empty(&self) -> bool {
        self.pending.iter().all(|(records, _)| records.is_empty())
    }

    /// Records waiting, in every partition.
    fn len(&self) -> usize {
        self.pending.iter().map(|(records, _)| records.len()).sum()
    }

    /// Takes every batch with records, in partition order.
    fn take_all(&mut self) -> Vec<(usize, Vec<Record>)> {
        let mut ready = Vec::new();
        for index in 0..self.pending.len() {
            if !self.pending[index].0.is_empty() {
                ready.push((index, self.take(index)));
            }
        }
        ready
    }
}

struct Sender {
    cluster: Cluster,
    producer: IdempotentProducer,
    topic: String,
    /// Partition id of each index.
    partitions: Vec<i32>,
    compression: Compression,
    /// Records acknowledged.
    written: u64,
}

/// Why the command gave up, with what became of the records: an
/// operator must know which to send again.
#[derive(Debug)]
struct Unfinished {
    written: u64,
    /// In the batch the broker refused.
    refused: usize,
    /// In the batch that failed otherwise: written or not, no one can tell.
    in_doubt: usize,
    /// Read but never sent.
    unsent: usize,
}

impl std::fmt::Display for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} record(s) written; ", self.written)?;
        if self.refused > 0 {
            write!(f, "{} refused; ", self.refused)?;
        }
        if self.in_doubt > 0 {
            write!(
                f,
                "{} in the failed batch may or may not have been written; ",
                self.in_doubt
            )?;
        }
        write!(f, "{} read but not sent", self.unsent)
    }
}

impl Sender {
    /// Sends the `ready` batches in order; `waiting` records are still
    /// buffered (for the account given if a batch fails).
    async fn send(
        &mut self,
        ready: Vec<(usize, Vec<Record>)>,
        waiting: usize,
    ) -> anyhow::Result<()> {
        let mut unsent: usize = waiting + ready.iter().map(|(_, r)| r.len()).sum::<usize>();
        for (index, records) in ready {
            let partition = self.partitions[index];
            let count = records.len();
            unsent -= count;
            let sent = self
                .producer
                .send(
                    &mut self.cluster,
                    &self.topic,
                    partition,
                    records,
                    self.compression,
                )
                .await;
            if let Err(error) = sent {
                // An error the broker answered with, and would again, says
                // the batch was not appended; a timeout or a lost
                // connection leaves it unknown.
                let refused = matches!(error, ClientError::Kafka { .. })
                    && !error.kafka_error().is_some_and(|e| e.is_retriable());
                let unfinished = Unfinished {
                    written: self.written,
                    refused: if refused { count } else { 0 },
                    in_doubt: if refused { 0 } else { count },
                    unsent,
                };
                return Err(topic_error(error, &self.topic)
                    .context(format!("cannot produce to {}-{partition}", self.topic))
                    .context(unfinished.to_string()));
            }
            self.written += count as u64;
        }
        Ok(())
    }
}

/// Splits `line` at the first `separator`.
fn split_key<'a>(line: &'a [u8], separator: &[u8]) -> Option<(&'a [u8], &'a [u8])> {
    if separator.is_empty() || line.len() < separator.len() {
        return None;
    }
    let at = line
        .windows(separator.len())
        .position(|window| window == separator)?;
    Some((&line[..at], &line[at + separator.len()..]))
}

pub(crate) fn run(args: ProduceArgs) -> anyhow::Result<()> {
    if args.key_separator.as_deref() == Some("") {
        bail!("--key-separator must not be empty");
    }
    block_on(produce(args))
}

async fn produce(args: ProduceArgs) -> anyhow::Result<()> {
    let mut cluster = args.connection.cluster().await?;
    let delivery_timeout = Duration::from_millis(args.delivery_timeout_ms);
    let topic = topic_metadata(cluster.any(), &args.topic).await?;
    if let Some(partition) = args.partition {
        check_partition(&topic, partition)?;
    }
    let partitions: Vec<i32> = topic.partitions.iter().map(|p| p.partition).collect();
    if partitions.is_empty() {
        bail!("topic '{}' has no partitions", args.topic);
    }
    let count = partitions.len() as i32;
    let fixed = args
        .partition
        .map(|p| partitions.iter().position(|&q| q == p).expect("checked"));
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as usize);
    let mut batches = Batches::new(
        partitions.len(),
        args.batch_records,
        args.batch_bytes,
        start,
    );
    let producer = IdempotentProducer::start(&mut cluster, delivery_timeout)
        .await
        .context("cannot get a producer id")?;
    let mut sender = Sender {
        cluster,
        producer,
        topic: args.topic.clone(),
        partitions: partitions.clone(),
        compression: args.compression.compression(),
        written: 0,
    };
    let separator = args.key_separator.as_deref().map(str::as_bytes);
    let linger = Duration::from_millis(args.linger_ms);
    let mut stdin = BufReader::with_capacity(1 << 16, tokio::io::stdin());
    let mut line = Vec::new();
    let mut line_number = 0u64;
    loop {
        // `read_until` keeps what it has read in `line` when the linger
        // timer cancels it, so the next call just goes on.
        let read = if batches.is_empty() {
            stdin.read_until(b'\n', &mut line).await
        } else {
            match tokio::time::timeout(linger, stdin.read_until(b'\n', &mut line)).await {
                Ok(read) => read,
                Err(_) => {
                    sender.send(batches.take_all(), 0).await?;
                    continue;
                }
            }
        };
        let n = read.context("cannot read stdin")?;
        if n == 0 && line.is_empty() {
            break;
        }
        line_number += 1;
        let mut text: &[u8] = &line;
        if let Some(rest) = text.strip_suffix(b"\n") {
            text = rest.strip_suffix(b"\r").unwrap_or(rest);
        }
        let ((key, value), index) = match separator {
            None => ((None, Some(Bytes::copy_from_slice(text))), fixed),
            Some(separator) => {
                let Some((key, value)) = split_key(text, separator) else {
                    sender.send(batches.take_all(), 0).await?;
                    bail!(
                        "line {line_number} has no key separator {:?}",
                        String::from_utf8_lossy(separator)
                    );
                };
                let index = fixed.or_else(|| {
                    let partition = murmur2_partition(key, count);
                    partitions.iter().position(|&p| p == partition)
                });
                let record = (
                    Some(Bytes::copy_from_slice(key)),
                    Some(Bytes::copy_from_slice(value)),
                );
                (record, index)
            }
        };
        line.clear();
        let record = OutgoingRecord {
            key,
            value,
            headers: args.headers.clone(),
        };
        let ready = batches.add(index, record);
        sender.send(ready, batches.len()).await?;
    }
    sender.send(batches.take_all(), 0).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_at_the_first_separator() {
        assert_eq!(
            split_key(b"user-1:hello:world", b":"),
            Some((&b"user-1"[..], &b"hello:world"[..]))
        );
        assert_eq!(split_key(b"k::v", b"::"), Some((&b"k"[..], &b"v"[..])));
        assert_eq!(split_key(b":v", b":"), Some((&b""[..], &b"v"[..])));
        assert_eq!(split_key(b"novalue", b":"), None);
        assert_eq!(split_key(b"", b":"), None);
    }

    fn record(n: usize) -> Record {
        OutgoingRecord {
            value: Some(Bytes::from(vec![b'x'; n])),
            ..OutgoingRecord::default()
        }
    }

    #[test]
    fn headers_parse_with_and_without_a_value() {
        assert_eq!(
            parse_header("trace=a=b"),
            Ok(("trace".to_owned(), Some(Bytes::from("a=b"))))
        );
        assert_eq!(parse_header("flag"), Ok(("flag".to_owned(), None)));
        assert_eq!(parse_header("k="), Ok(("k".to_owned(), Some(Bytes::new()))));
        assert!(parse_header("=v").is_err());
    }

    fn sizes(ready: &[(usize, Vec<Record>)]) -> Vec<(usize, usize)> {
        ready.iter().map(|(i, r)| (*i, r.len())).collect()
    }

    #[test]
    fn a_batch_is_sent_at_the_record_limit() {
        let mut batches = Batches::new(2, 3, 1000, 0);
        assert!(batches.add(Some(1), record(1)).is_empty());
        assert!(batches.add(Some(1), record(1)).is_empty());
        assert_eq!(sizes(&batches.add(Some(1), record(1))), vec![(1, 3)]);
        assert!(batches.is_empty());
    }

    #[test]
    fn a_batch_never_exceeds_the_byte_limit() {
        let size = 500 - RECORD_OVERHEAD;
        let mut batches = Batches::new(2, 100, 1000, 0);
        assert!(batches.add(Some(0), record(size - 1)).is_empty());
        // 499 + 500 bytes fit in 1000; one more byte would not.
        assert!(batches.add(Some(0), record(size)).is_empty());
        assert_eq!(sizes(&batches.add(Some(0), record(1))), vec![(0, 2)]);
        assert_eq!(sizes(&batches.take_all()), vec![(0, 1)]);
        // A record over the limit goes alone.
        assert!(batches.add(Some(1), record(1)).is_empty());
        assert_eq!(
            sizes(&batches.add(Some(1), record(5000))),
            vec![(1, 1), (1, 1)]
        );
    }

    #[test]
    fn unkeyed_records_stick_to_a_partition_until_its_batch_is_sent() {
        let mut batches = Batches::new(3, 2, 1 << 20, 1);
        assert!(batches.add(None, record(1)).is_empty());
        assert_eq!(sizes(&batches.add(None, record(1))), vec![(1, 2)]);
        assert!(batches.add(None, record(1)).is_empty());
        assert_eq!(sizes(&batches.take_all()), vec![(2, 1)]);
        batches.add(None, record(1));
        assert_eq!(sizes(&batches.take_all()), vec![(0, 1)]);
        // Sending another partition's batch does not move the sticky one
        // (now partition 1).
        batches.add(Some(2), record(1));
        assert_eq!(sizes(&batches.add(Some(2), record(1))), vec![(2, 2)]);
        batches.add(None, record(1));
        assert_eq!(sizes(&batches.take_all()), vec![(1, 1)]);
    }
}
