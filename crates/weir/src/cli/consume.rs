//! `weir consume TOPIC`: print records, one per line.

use std::io::Write;
use std::str::FromStr;

use anyhow::{bail, Context};
use clap::Args;
use weir_client::{Cluster, ConsumedRecord, FetchTarget, ResponseError, EARLIEST, LATEST};

use super::{block_on, check_partition, topic_error, topic_metadata, Connection};

/// Bytes per partition and per fetch response.
const PARTITION_MAX_BYTES: i32 = 1 << 20;
const FETCH_MAX_BYTES: i32 = 16 << 20;

#[derive(Args, Debug)]
pub(crate) struct ConsumeArgs {
    topic: String,
    /// Read only this partition (default: all of them).
    #[arg(long, short = 'p')]
    partition: Option<i32>,
    /// Where to start in each partition: earliest, latest, or an offset.
    #[arg(
        long,
        short = 'o',
        default_value = "earliest",
        value_name = "earliest|latest|N"
    )]
    offset: StartOffset,
    /// Exit after printing this many records (default: keep polling until
    /// interrupted).
    #[arg(long, short = 'n', value_name = "N")]
    count: Option<u64>,
    /// Exit once every partition has been read to its end.
    #[arg(long, short = 'e')]
    exit_at_end: bool,
    /// Print `key<TAB>value` instead of the value alone.
    #[arg(long)]
    print_keys: bool,
    /// How long each fetch waits for new records.
    #[arg(long, default_value_t = 500, value_name = "MS")]
    max_wait_ms: i32,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartOffset {
    Earliest,
    Latest,
    At(i64),
}

impl FromStr for StartOffset {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "earliest" | "beginning" => Ok(Self::Earliest),
            "latest" | "end" => Ok(Self::Latest),
            n => match n.parse::<i64>() {
                Ok(offset) if offset >= 0 => Ok(Self::At(offset)),
                _ => Err(format!(
                    "expected earliest, latest or an offset (0 or more), got {n:?}"
                )),
            },
        }
    }
}

pub(crate) fn run(args: ConsumeArgs) -> anyhow::Result<()> {
    block_on(consume(args))
}

/// Buffered stdout; a closed pipe (`weir consume ... | head`) ends the
/// command quietly.
struct Output {
    out: std::io::BufWriter<std::io::Stdout>,
    print_keys: bool,
}

enum Printed {
    Ok,
    Closed,
}

impl Output {
    fn record(&mut self, record: &ConsumedRecord) -> anyhow::Result<Printed> {
        let result = (|| {
            if self.print_keys {
                self.out
                    .write_all(record.key.as_deref().unwrap_or_default())?;
                self.out.write_all(b"\t")?;
            }
            self.out
                .write_all(record.value.as_deref().unwrap_or_default())?;
            self.out.write_all(b"\n")
        })();
        Self::outcome(result)
    }

    fn flush(&mut self) -> anyhow::Result<Printed> {
        let result = self.out.flush();
        Self::outcome(result)
    }

    fn outcome(result: std::io::Result<()>) -> anyhow::Result<Printed> {
        match result {
            Ok(()) => Ok(Printed::Ok),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Printed::Closed),
            Err(e) => Err(e).context("cannot write to stdout"),
        }
    }
}

async fn list_offset(
    cluster: &mut Cluster,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> anyhow::Result<i64> {
    cluster
        .list_offsets(topic, partition, timestamp)
        .await
        .map_err(|e| topic_error(e, topic))
}

/// Where to start reading one partition.
async fn start_offset(
    cluster: &mut Cluster,
    topic: &str,
    partition: i32,
    start: StartOffset,
) -> anyhow::Result<i64> {
    match start {
        StartOffset::Earliest => list_offset(cluster, topic, partition, EARLIEST).await,
        StartOffset::Latest => list_offset(cluster, topic, partition, LATEST).await,
        StartOffset::At(offset) => {
            let first = list_offset(cluster, topic, partition, EARLIEST).await?;
            let end = list_offset(cluster, topic, partition, LATEST).await?;
            if !(first..=end).contains(&offset) {
                bail!(
                    "offset {offset} is out of range for {topic}-{partition} \
                     (log start {first}, log end {end})"
                );
            }
            Ok(offset)
        }
    }
}

async fn consume(args: ConsumeArgs) -> anyhow::Result<()> {
    let mut cluster = args.connection.cluster().await?;
    let topic = topic_metadata(cluster.any(), &args.topic).await?;
    let partitions: Vec<i32> = match args.partition {
        Some(p) => {
            check_partition(&topic, p)?;
            vec![p]
        }
        None => topic.partitions.iter().map(|p| p.partition).collect(),
    };
    let mut targets = Vec::with_capacity(partitions.len());
    for &partition in &partitions {
        let offset = start_offset(&mut cluster, &args.topic, partition, args.offset).await?;
        targets.push(FetchTarget {
            topic: args.topic.clone(),
            partition,
            offset,
            max_bytes: PARTITION_MAX_BYTES,
        });
    }
    let mut out = Output {
        out: std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()),
        print_keys: args.print_keys,
    };
    let mut remaining = args.count;
    if remaining == Some(0) || targets.is_empty() {
        return Ok(());
    }
    loop {
        let fetched = cluster
            .fetch_many(&targets, FETCH_MAX_BYTES, args.max_wait_ms)
            .await
            .map_err(|e| match e.kafka_error() {
                Some(ResponseError::OffsetOutOfRange) => anyhow::Error::new(e).context(
                    "the records to read next were deleted (retention) or the log was truncated",
                ),
                _ => topic_error(e, &args.topic),
            })?;
        let mut at_end = true;
        for (target, partition) in targets.iter_mut().zip(&fetched) {
            for record in &partition.records {
                if let Printed::Closed = out.record(record)? {
                    return Ok(());
                }
                if let Some(n) = remaining.as_mut() {
                    *n -= 1;
                    if *n == 0 {
                        out.flush()?;
                        return Ok(());
                    }
                }
            }
            target.offset = partition.next_offset;
            at_end &= target.offset >= partition.high_watermark;
        }
        if let Printed::Closed = out.flush()? {
            return Ok(());
        }
        if args.exit_at_end && at_end {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StartOffset;

    #[test]
    fn start_offsets_parse() {
        assert_eq!("earliest".parse(), Ok(StartOffset::Earliest));
        assert_eq!("latest".parse(), Ok(StartOffset::Latest));
        assert_eq!("42".parse(), Ok(StartOffset::At(42)));
        assert!("-3".parse::<StartOffset>().is_err());
        assert!("soon".parse::<StartOffset>().is_err());
    }
}
