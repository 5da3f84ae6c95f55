//! `weir consume TOPIC`: print records, one per line, from chosen
//! partitions or as a member of a consumer group.

use std::collections::BTreeMap;
use std::io::Write;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use tokio::time::Instant;
use weir_client::{
    ClientError, Cluster, ConsumedRecord, FetchTarget, FetchedPartition, GroupConsumer,
    HeartbeatOutcome, ResponseError, EARLIEST, LATEST,
};

use super::{block_on, check_partition, topic_error, topic_metadata, Connection};

/// Bytes per partition and per fetch response.
const PARTITION_MAX_BYTES: i32 = 1 << 20;
const FETCH_MAX_BYTES: i32 = 16 << 20;

#[derive(Args, Debug)]
pub(crate) struct ConsumeArgs {
    topic: String,
    /// Read only this partition (default: all of them).
    #[arg(long, short = 'p', conflicts_with = "group")]
    partition: Option<i32>,
    /// Read as a member of this consumer group (Kafka's consumer protocol,
    /// KIP-848): the group's members share the partitions, each starts
    /// from the group's committed offsets, and positions are committed
    /// every 5 s and on exit.
    #[arg(long, short = 'g', value_name = "GROUP")]
    group: Option<String>,
    /// Where to start in each partition: earliest, latest, or an offset
    /// (with --group: where a partition without a committed offset starts).
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
    #[arg(long, conflicts_with = "format")]
    print_keys: bool,
    /// Print each record as FMT says, as kcat's -f does: %t topic,
    /// %p partition, %o offset, %T timestamp (ms), %k key, %K key length,
    /// %s value, %S value length, %h headers (k=v,...), %% a percent sign,
    /// \n \t \\ escapes. A null key or value prints as nothing, its
    /// length as -1. Example: --format '%p:%o %k=%s\n'
    #[arg(long, short = 'f', value_name = "FMT", value_parser = Format::parse)]
    format: Option<Format>,
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

/// How a record is printed: literal bytes and fields, as kcat's -f.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Format(Vec<Part>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Timestamp,
    Key,
    KeyLength,
    Value,
    ValueLength,
    Headers,
}

impl Format {
    fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            let field = match c {
                '%' => match chars.next() {
                    Some('t') => Part::Topic,
                    Some('p') => Part::Partition,
                    Some('o') => Part::Offset,
                    Some('T') => Part::Timestamp,
                    Some('k') => Part::Key,
                    Some('K') => Part::KeyLength,
                    Some('s') => Part::Value,
                    Some('S') => Part::ValueLength,
                    Some('h') => Part::Headers,
                    Some('%') => {
                        literal.push(b'%');
                        continue;
                    }
                    other => {
                        return Err(format!(
                            "unknown format field %{} (known: %t %p %o %T %k %K %s %S %h %%)",
                            other.map(String::from).unwrap_or_default()
                        ))
                    }
                },
                '\\' => {
                    let escaped = match chars.next() {
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some('r') => '\r',
                        Some('\\') => '\\',
                        Some(other) => return Err(format!("unknown escape \\{other}")),
                        None => '\\',
                    };
                    literal.extend_from_slice(escaped.to_string().as_bytes());
                    continue;
                }
                c => {
                    literal.extend_from_slice(c.to_string().as_bytes());
                    continue;
                }
            };
            if !literal.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut literal)));
            }
            parts.push(field);
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Self(parts))
    }

    /// The value alone, or `key<TAB>value`, and a newline.
    fn plain(print_keys: bool) -> Self {
        let mut parts = Vec::new();
        if print_keys {
            parts.extend([Part::Key, Part::Text(b"\t".to_vec())]);
        }
        parts.extend([Part::Value, Part::Text(b"\n".to_vec())]);
        Self(parts)
    }

    fn write(
        &self,
        out: &mut impl Write,
        topic: &str,
        partition: i32,
        record: &ConsumedRecord,
    ) -> std::io::Result<()> {
        let length = |b: &Option<bytes::Bytes>| b.as_ref().map_or(-1, |b| b.len() as i64);
        for part in &self.0 {
            match part {
                Part::Text(text) => out.write_all(text)?,
                Part::Topic => out.write_all(topic.as_bytes())?,
                Part::Partition => write!(out, "{partition}")?,
                Part::Offset => write!(out, "{}", record.offset)?,
                Part::Timestamp => write!(out, "{}", record.timestamp)?,
                Part::Key => out.write_all(record.key.as_deref().unwrap_or_default())?,
                Part::KeyLength => write!(out, "{}", length(&record.key))?,
                Part::Value => out.write_all(record.value.as_deref().unwrap_or_default())?,
                Part::ValueLength => write!(out, "{}", length(&record.value))?,
                Part::Headers => {
                    for (i, (key, value)) in record.headers.iter().enumerate() {
                        if i > 0 {
                            out.write_all(b",")?;
                        }
                        out.write_all(key.as_bytes())?;
                        out.write_all(b"=")?;
                        out.write_all(value.as_deref().unwrap_or_default())?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Buffered stdout; a closed pipe (`weir consume ... | head`) ends the
/// command quietly.
struct Output {
    out: std::io::BufWriter<std::io::Stdout>,
    format: Format,
}

enum Printed {
    Ok,
    Closed,
}

impl Output {
    fn record(
        &mut self,
        topic: &str,
        partition: i32,
        record: &ConsumedRecord,
    ) -> anyhow::Result<Printed> {
        let result = self.format.write(&mut self.out, topic, partition, record);
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
    let format = args
        .format
        .clone()
        .unwrap_or_else(|| Format::plain(args.print_keys));
    let mut reader = Reader {
        out: Output {
            out: std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()),
            format,
        },
        remaining: args.count,
    };
    if args.count == Some(0) {
        return Ok(());
    }
    if let Some(group) = &args.group {
        return consume_in_group(&args, group, topic.topic_id, cluster, reader).await;
    }
    let partitions: Vec<i32> = match args.partition {
        Some(p) => {
            check_partition(&topic, p)?;
            vec![p]
        }
        None => topic.partitions.iter().map(|p| p.partition).collect(),
    };
    let mut positions = BTreeMap::new();
    for &partition in &partitions {
        let offset = start_offset(&mut cluster, &args.topic, partition, args.offset).await?;
        positions.insert(partition, offset);
    }
    if positions.is_empty() {
        return Ok(());
    }
    loop {
        let fetched = fetch(&mut cluster, &args, &positions, args.max_wait_ms).await?;
        match reader.print(&args.topic, &fetched, &mut positions)? {
            Read::Done => return Ok(()),
            Read::AtEnd if args.exit_at_end => return Ok(()),
            Read::AtEnd | Read::More => {}
        }
    }
}

/// Prints fetched records, counting down to `--count`.
struct Reader {
    out: Output,
    remaining: Option<u64>,
}

enum Read {
    /// Every partition read has been read to its end.
    AtEnd,
    More,
    /// `--count` records printed, or stdout closed.
    Done,
}

impl Reader {
    /// Prints what was fetched and moves each partition's position past it.
    fn print(
        &mut self,
        topic: &str,
        fetched: &[FetchedPartition],
        positions: &mut BTreeMap<i32, i64>,
    ) -> anyhow::Result<Read> {
        let mut at_end = true;
        for partition in fetched {
            for record in &partition.records {
                if let Printed::Closed = self.out.record(topic, partition.partition, record)? {
                    return Ok(Read::Done);
                }
                positions.insert(partition.partition, record.offset + 1);
                if let Some(n) = self.remaining.as_mut() {
                    *n -= 1;
                    if *n == 0 {
                        self.out.flush()?;
                        return Ok(Read::Done);
                    }
                }
            }
            positions.insert(partition.partition, partition.next_offset);
            at_end &= partition.next_offset >= partition.high_watermark;
        }
        if let Printed::Closed = self.out.flush()? {
            return Ok(Read::Done);
        }
        Ok(if at_end { Read::AtEnd } else { Read::More })
    }
}

/// One fetch of every partition in `positions`, from their leaders.
async fn fetch(
    cluster: &mut Cluster,
    args: &ConsumeArgs,
    positions: &BTreeMap<i32, i64>,
    max_wait_ms: i32,
) -> anyhow::Result<Vec<FetchedPartition>> {
    let targets: Vec<FetchTarget> = positions
        .iter()
        .map(|(&partition, &offset)| FetchTarget {
            topic: args.topic.clone(),
            partition,
            offset,
            max_bytes: PARTITION_MAX_BYTES,
        })
        .collect();
    cluster
        .fetch_many(&targets, FETCH_MAX_BYTES, max_wait_ms)
        .await
        .map_err(|e| match e.kafka_error() {
            Some(ResponseError::OffsetOutOfRange) => anyhow::Error::new(e).context(
                "the records to read next were deleted (retention) or the log was truncated",
            ),
            _ => topic_error(e, &args.topic),
        })
}

/// How often a group member commits its positions, as Kafka's
/// `auto.commit.interval.ms`.
const COMMIT_INTERVAL: Duration = Duration::from_secs(5);

/// Reads the partitions the group assigns this member, from the group's
/// committed offsets, committing positions as it goes and on the way out
/// (Ctrl-C included).
async fn consume_in_group(
    args: &ConsumeArgs,
    group: &str,
    topic_id: uuid::Uuid,
    mut cluster: Cluster,
    mut reader: Reader,
) -> anyhow::Result<()> {
    let mut member = GroupConsumer::new(group, vec![args.topic.clone()]);
    let mut interrupted = std::pin::pin!(tokio::signal::ctrl_c());
    // Partition → the next offset to read.
    let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    let mut next_commit = Instant::now() + COMMIT_INTERVAL;
    let mut assigned_once = false;
    loop {
        if Instant::now() >= member.next_heartbeat() {
            let owned = owned_partitions(topic_id, &positions);
            match member.heartbeat(&mut cluster, &owned).await? {
                HeartbeatOutcome::Unchanged => {}
                HeartbeatOutcome::Fenced => {
                    positions.clear();
                    committed.clear();
                }
                HeartbeatOutcome::Assigned(assignment) => {
                    assigned_once = true;
                    let mine: Vec<i32> = assignment
                        .into_iter()
                        .filter(|(id, _)| *id == topic_id)
                        .flat_map(|(_, partitions)| partitions)
                        .collect();
                    let revoked: Vec<i32> = positions
                        .keys()
                        .copied()
                        .filter(|p| !mine.contains(p))
                        .collect();
                    commit(&mut member, &mut cluster, args, &positions, &mut committed).await?;
                    for partition in revoked {
                        positions.remove(&partition);
                        committed.remove(&partition);
                    }
                    let added: Vec<i32> = mine
                        .into_iter()
                        .filter(|p| !positions.contains_key(p))
                        .collect();
                    start_positions(&mut member, &mut cluster, args, &added, &mut positions)
                        .await?;
                    // Confirms the new assignment at once.
                    let owned = owned_partitions(topic_id, &positions);
                    member.heartbeat(&mut cluster, &owned).await?;
                }
            }
        }
        let until_heartbeat = member
            .next_heartbeat()
            .saturating_duration_since(Instant::now());
        let outcome = if positions.is_empty() {
            if args.exit_at_end && assigned_once {
                Read::AtEnd
            } else {
                tokio::select! {
                    () = tokio::time::sleep(until_heartbeat) => Read::More,
                    _ = &mut interrupted => Read::Done,
                }
            }
        } else {
            let wait = (until_heartbeat.as_millis() as i32).clamp(0, args.max_wait_ms);
            tokio::select! {
                fetched = fetch(&mut cluster, args, &positions, wait) => {
                    reader.print(&args.topic, &fetched?, &mut positions)?
                }
                _ = &mut interrupted => Read::Done,
            }
        };
        let finished = match outcome {
            Read::Done => true,
            Read::AtEnd => args.exit_at_end,
            Read::More => false,
        };
        if finished || Instant::now() >= next_commit {
            commit(&mut member, &mut cluster, args, &positions, &mut committed).await?;
            next_commit = Instant::now() + COMMIT_INTERVAL;
        }
        if finished {
            return member
                .leave(&mut cluster)
                .await
                .with_context(|| format!("cannot leave group {group}"));
        }
    }
}

/// The partitions a member reads, as its heartbeat confirms them.
fn owned_partitions(
    topic_id: uuid::Uuid,
    positions: &BTreeMap<i32, i64>,
) -> Vec<(uuid::Uuid, Vec<i32>)> {
    if positions.is_empty() {
        return Vec::new();
    }
    vec![(topic_id, positions.keys().copied().collect())]
}

/// Commits the positions that moved since they were last committed.
async fn commit(
    member: &mut GroupConsumer,
    cluster: &mut Cluster,
    args: &ConsumeArgs,
    positions: &BTreeMap<i32, i64>,
    committed: &mut BTreeMap<i32, i64>,
) -> anyhow::Result<()> {
    let moved: Vec<(String, i32, i64)> = positions
        .iter()
        .filter(|(p, offset)| committed.get(p) != Some(offset))
        .map(|(&p, &offset)| (args.topic.clone(), p, offset))
        .collect();
    match member.commit(cluster, &moved).await {
        Ok(()) => {}
        // Fenced meanwhile: the partitions are someone else's now, and the
        // next heartbeat joins again.
        Err(error) if fenced(&error) => return Ok(()),
        Err(error) => return Err(topic_error(error, &args.topic)).context("cannot commit offsets"),
    }
    for (_, partition, offset) in moved {
        committed.insert(partition, offset);
    }
    Ok(())
}

fn fenced(error: &ClientError) -> bool {
    [
        ResponseError::FencedMemberEpoch,
        ResponseError::StaleMemberEpoch,
        ResponseError::UnknownMemberId,
        ResponseError::IllegalGeneration,
    ]
    .into_iter()
    .any(|e| error.is(e))
}

/// Where newly assigned partitions start: the group's committed offset,
/// or `--offset` for those without one.
async fn start_positions(
    member: &mut GroupConsumer,
    cluster: &mut Cluster,
    args: &ConsumeArgs,
    partitions: &[i32],
    positions: &mut BTreeMap<i32, i64>,
) -> anyhow::Result<()> {
    if partitions.is_empty() {
        return Ok(());
    }
    let committed = member
        .committed(cluster, &args.topic, partitions)
        .await
        .context("cannot read the group's committed offsets")?;
    for &partition in partitions {
        let offset = match committed.iter().find(|c| c.partition == partition) {
            Some(c) if c.offset >= 0 => c.offset,
            _ => start_offset(cluster, &args.topic, partition, args.offset).await?,
        };
        positions.insert(partition, offset);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::StartOffset;

    #[test]
    fn formats_parse_into_fields_and_text() {
        use super::{Format, Part};
        let format = Format::parse("%t/%p@%o %k=%s %%\\n").unwrap();
        assert_eq!(
            format.0,
            vec![
                Part::Topic,
                Part::Text(b"/".to_vec()),
                Part::Partition,
                Part::Text(b"@".to_vec()),
                Part::Offset,
                Part::Text(b" ".to_vec()),
                Part::Key,
                Part::Text(b"=".to_vec()),
                Part::Value,
                Part::Text(b" %\n".to_vec()),
            ]
        );
        assert!(Format::parse("%x").is_err());
    }

    #[test]
    fn a_record_prints_as_its_format_says() {
        use super::Format;
        use bytes::Bytes;
        let record = weir_client::ConsumedRecord {
            offset: 7,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from("v")),
            headers: vec![
                ("a".to_owned(), Some(Bytes::from("1"))),
                ("b".to_owned(), None),
            ],
        };
        let mut out = Vec::new();
        Format::parse("%p %o %T [%k] %K %s %S %h\\n")
            .unwrap()
            .write(&mut out, "t", 2, &record)
            .unwrap();
        assert_eq!(out, b"2 7 1700000000000 [] -1 v 1 a=1,b=\n");
    }

    #[test]
    fn start_offsets_parse() {
        assert_eq!("earliest".parse(), Ok(StartOffset::Earliest));
        assert_eq!("latest".parse(), Ok(StartOffset::Latest));
        assert_eq!("42".parse(), Ok(StartOffset::At(42)));
        assert!("-3".parse::<StartOffset>().is_err());
        assert!("soon".parse::<StartOffset>().is_err());
    }
}
