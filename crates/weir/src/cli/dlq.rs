//! `weir dlq list|replay TOPIC`: the dead letters share groups wrote to a
//! dead-letter topic (KIP-1191), and republishing chosen ones to the
//! partition they came from.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use weir_broker::share::dead_letters::{
    header, DELIVERY_COUNT_HEADER, GROUP_HEADER, OFFSET_HEADER, PARTITION_HEADER, REASON_HEADER,
    TOPIC_HEADER,
};
use weir_client::{
    Cluster, Compression, ConsumedRecord, FetchTarget, OutgoingRecord, EARLIEST, LATEST,
};

use super::{block_on, print, print_line, table, topic_error, topic_metadata, Connection};

const PARTITION_MAX_BYTES: i32 = 1 << 20;

#[derive(Args, Debug)]
pub(crate) struct DlqArgs {
    #[command(subcommand)]
    command: DlqCommand,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Subcommand, Debug)]
enum DlqCommand {
    /// List the dead letters of a dead-letter topic: where each came from,
    /// how often it was delivered, and why it was given up on.
    List {
        /// The dead-letter topic.
        topic: String,
        /// Only the dead letters of this share group.
        #[arg(long)]
        group: Option<String>,
    },
    /// Republish dead letters to the topic and partition they came from:
    /// their key, value and headers (read from the source topic when the
    /// dead letter has no copy of the record).
    Replay {
        /// The dead-letter topic.
        topic: String,
        /// A dead letter to replay, as PARTITION:OFFSET in the dead-letter
        /// topic (repeatable).
        #[arg(
            long = "offset",
            value_name = "PARTITION:OFFSET",
            required_unless_present = "all"
        )]
        offsets: Vec<String>,
        /// Replay every dead letter (of --group, if given).
        #[arg(long, conflicts_with = "offsets")]
        all: bool,
        /// Only the dead letters of this share group.
        #[arg(long)]
        group: Option<String>,
    },
}

pub(crate) fn run(args: DlqArgs) -> anyhow::Result<()> {
    block_on(async move {
        let mut cluster = args.connection.cluster().await?;
        match args.command {
            DlqCommand::List { topic, group } => list(&mut cluster, &topic, group.as_deref()).await,
            DlqCommand::Replay {
                topic,
                offsets,
                all,
                group,
            } => {
                let chosen = offsets
                    .iter()
                    .map(|o| parse_position(o))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                replay(&mut cluster, &topic, &chosen, all, group.as_deref()).await
            }
        }
    })
}

/// A dead letter and where it is in the dead-letter topic.
struct Letter {
    partition: i32,
    record: ConsumedRecord,
}

impl Letter {
    fn text(&self, name: &str) -> String {
        header(&self.record, name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    }

    fn source(&self) -> anyhow::Result<(String, i32, i64)> {
        let topic = self.text(TOPIC_HEADER);
        let partition = self.text(PARTITION_HEADER).parse();
        let offset = self.text(OFFSET_HEADER).parse();
        match (topic.is_empty(), partition, offset) {
            (false, Ok(partition), Ok(offset)) => Ok((topic, partition, offset)),
            _ => bail!(
                "the record at {}:{} is not a dead letter (it lacks the {TOPIC_HEADER}, {PARTITION_HEADER} and {OFFSET_HEADER} headers)",
                self.partition,
                self.record.offset
            ),
        }
    }
}

fn parse_position(text: &str) -> anyhow::Result<(i32, i64)> {
    let parsed = text
        .split_once(':')
        .and_then(|(p, o)| Some((p.trim().parse().ok()?, o.trim().parse().ok()?)));
    parsed.with_context(|| format!("expected PARTITION:OFFSET, got {text:?}"))
}

/// Every dead letter of `topic` (of `group`, if given), partition by
/// partition.
async fn read_letters(
    cluster: &mut Cluster,
    topic: &str,
    group: Option<&str>,
) -> anyhow::Result<Vec<Letter>> {
    let metadata = topic_metadata(cluster.any(), topic).await?;
    let mut letters = Vec::new();
    for partition in metadata.partitions.iter().map(|p| p.partition) {
        let mut offset = cluster
            .list_offsets(topic, partition, EARLIEST)
            .await
            .map_err(|e| topic_error(e, topic))?;
        let end = cluster
            .list_offsets(topic, partition, LATEST)
            .await
            .map_err(|e| topic_error(e, topic))?;
        while offset < end {
            let target = FetchTarget {
                topic: topic.to_owned(),
                partition,
                offset,
                max_bytes: PARTITION_MAX_BYTES,
            };
            let fetched = cluster
                .fetch_many(&[target], PARTITION_MAX_BYTES, 0)
                .await
                .map_err(|e| topic_error(e, topic))?;
            let Some(fetched) = fetched.into_iter().next() else {
                break;
            };
            if fetched.next_offset <= offset {
                break;
            }
            offset = fetched.next_offset;
            letters.extend(
                fetched
                    .records
                    .into_iter()
                    .filter(|r| r.offset < end)
                    .map(|record| Letter { partition, record })
                    .filter(|l| group.is_none_or(|g| l.text(GROUP_HEADER) == g)),
            );
        }
    }
    Ok(letters)
}

async fn list(cluster: &mut Cluster, topic: &str, group: Option<&str>) -> anyhow::Result<()> {
    let letters = read_letters(cluster, topic, group).await?;
    let mut rows = vec![[
        "PARTITION",
        "OFFSET",
        "GROUP",
        "SOURCE",
        "DELIVERIES",
        "REASON",
        "TIMESTAMP",
        "VALUE",
    ]
    .map(String::from)
    .to_vec()];
    for letter in &letters {
        let source = format!(
            "{}-{}@{}",
            letter.text(TOPIC_HEADER),
            letter.text(PARTITION_HEADER),
            letter.text(OFFSET_HEADER)
        );
        let value = match &letter.record.value {
            Some(value) => {
                let text = String::from_utf8_lossy(value);
                let shown: String = text.chars().take(40).collect();
                if shown.len() < text.len() {
                    format!("{shown}…")
                } else {
                    shown
                }
            }
            None => "(not copied)".to_owned(),
        };
        rows.push(vec![
            letter.partition.to_string(),
            letter.record.offset.to_string(),
            letter.text(GROUP_HEADER),
            source,
            letter.text(DELIVERY_COUNT_HEADER),
            letter.text(REASON_HEADER),
            letter.record.timestamp.to_string(),
            value,
        ]);
    }
    print(format_args!("{}", table(&rows)))?;
    print_line(format_args!("{} dead letters", letters.len()))?;
    Ok(())
}

async fn replay(
    cluster: &mut Cluster,
    topic: &str,
    chosen: &[(i32, i64)],
    all: bool,
    group: Option<&str>,
) -> anyhow::Result<()> {
    let letters = read_letters(cluster, topic, group).await?;
    let picked: Vec<&Letter> = letters
        .iter()
        .filter(|l| all || chosen.contains(&(l.partition, l.record.offset)))
        .collect();
    for &(partition, offset) in chosen {
        if !picked
            .iter()
            .any(|l| l.partition == partition && l.record.offset == offset)
        {
            bail!(
                "no dead letter at {topic} {partition}:{offset}{}",
                match group {
                    Some(g) => format!(" of group {g}"),
                    None => String::new(),
                }
            );
        }
    }
    for letter in &picked {
        let (source_topic, source_partition, source_offset) = letter.source()?;
        let record = match letter.record.value {
            Some(_) => OutgoingRecord {
                key: letter.record.key.clone(),
                value: letter.record.value.clone(),
                headers: letter
                    .record
                    .headers
                    .iter()
                    .filter(|(name, _)| !name.starts_with("__dlq.errors."))
                    .cloned()
                    .collect(),
            },
            None => original(cluster, &source_topic, source_partition, source_offset).await?,
        };
        let offset = cluster
            .produce_records(
                &source_topic,
                source_partition,
                vec![record],
                Compression::None,
            )
            .await
            .map_err(|e| topic_error(e, &source_topic))?;
        print_line(format_args!(
            "replayed {topic} {}:{} to {source_topic}-{source_partition} at offset {offset}",
            letter.partition, letter.record.offset
        ))?;
    }
    print_line(format_args!("{} dead letters replayed", picked.len()))?;
    Ok(())
}

/// The record a dead letter without a copy names, from its source topic.
async fn original(
    cluster: &mut Cluster,
    topic: &str,
    partition: i32,
    offset: i64,
) -> anyhow::Result<OutgoingRecord> {
    let records = cluster
        .fetch(topic, partition, offset, PARTITION_MAX_BYTES, 0)
        .await
        .map_err(|e| {
            topic_error(e, topic).context(format!(
                "the dead letter has no copy of its record, and {topic}-{partition} no longer holds offset {offset}"
            ))
        })?;
    let record = records
        .into_iter()
        .find(|r| r.offset == offset)
        .with_context(|| {
            format!("the dead letter has no copy of its record, and {topic}-{partition} no longer holds offset {offset}")
        })?;
    Ok(OutgoingRecord {
        key: record.key,
        value: record.value,
        headers: record.headers,
    })
}
