//! `weir topic create|list|describe|delete`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::bail;
use clap::{Args, Subcommand};
use weir_client::{Cluster, ConfigResource, ConfigSource, EARLIEST, LATEST};

use super::broker_http::BrokerHttp;
use super::{block_on, topic_error, topic_metadata, Connection};

#[derive(Args, Debug)]
pub(crate) struct TopicArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: TopicCommand,
}

#[derive(Subcommand, Debug)]
enum TopicCommand {
    /// Create a topic.
    Create {
        name: String,
        /// Number of partitions (default: the broker's `num.partitions`).
        #[arg(long, short = 'p')]
        partitions: Option<i32>,
        /// Replicas of each partition (default: the broker's
        /// `default.replication.factor`).
        #[arg(long, short = 'r')]
        replication_factor: Option<i16>,
        /// A topic config override, KEY=VALUE (e.g. retention.ms=86400000);
        /// repeat for several.
        #[arg(long = "config", short = 'c', value_name = "KEY=VALUE", value_parser = parse_config)]
        configs: Vec<(String, String)>,
        /// Create it even though its name is an internal topic's
        /// (`__consumer_offsets`, ...), which the broker creates itself.
        #[arg(long)]
        force: bool,
    },
    /// List topic names, one per line.
    List,
    /// Show a topic's partitions, offsets and non-default configs; every
    /// topic's without a name.
    Describe { name: Option<String> },
    /// Delete a topic and all its records.
    Delete {
        name: String,
        /// Delete it even though it is an internal topic: deleting
        /// `__consumer_offsets` deletes every group's committed offsets.
        #[arg(long)]
        force: bool,
    },
    /// Grow a topic to more partitions. Keys then map to other partitions
    /// than before, so a topic holding keyed records needs --force.
    AddPartitions {
        name: String,
        /// The new total number of partitions.
        #[arg(long, short = 'p')]
        partitions: i32,
        /// Add them even though the topic has keyed records.
        #[arg(long)]
        force: bool,
    },
    /// Move a topic's partitions to other brokers while they stay
    /// available: the new replicas catch up, then the old ones are dropped.
    Reassign {
        name: String,
        /// The partition to move (with --replicas) or whose move to cancel
        /// (with --cancel).
        #[arg(long, required_unless_present = "drain")]
        partition: Option<i32>,
        /// The partition's new replicas, preferred leader first: 2,3,4.
        #[arg(long, value_delimiter = ',', required_unless_present_any = ["drain", "cancel"])]
        replicas: Vec<i32>,
        /// Move every replica of the topic off this broker (to the live
        /// brokers holding the fewest of its replicas), e.g. before
        /// decommissioning it.
        #[arg(long, conflicts_with_all = ["partition", "replicas", "cancel"], value_name = "BROKER")]
        drain: Option<i32>,
        /// Cancel the partition's move: back to its replicas before it.
        #[arg(long, conflicts_with = "replicas")]
        cancel: bool,
    },
    /// List the partitions being moved, with the replicas being added and
    /// removed.
    Reassignments,
    /// Change a topic's config overrides while it is in use; the broker
    /// validates every change and applies them all or none.
    AlterConfig {
        name: String,
        /// Set an override, KEY=VALUE; repeat for several.
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_config)]
        set: Vec<(String, String)>,
        /// Remove an override (back to the broker's default); repeat for
        /// several.
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
    },
}

pub(super) fn parse_config(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!("expected KEY=VALUE, got {arg:?}")),
    }
}

pub(crate) fn run(args: TopicArgs) -> anyhow::Result<()> {
    block_on(async move {
        let mut cluster = args.connection.cluster().await?;
        match args.command {
            TopicCommand::Create {
                name,
                partitions,
                replication_factor,
                configs,
                force,
            } => {
                if is_internal(&name) && !force {
                    bail!(
                        "{name} is an internal topic's name: the broker creates it itself, with \
                         the configs it needs (cleanup.policy=compact, ...); pass --force to \
                         create it anyway"
                    );
                }
                if partitions.is_some_and(|p| p < 1) {
                    bail!("--partitions must be at least 1");
                }
                if replication_factor.is_some_and(|r| r < 1) {
                    bail!("--replication-factor must be at least 1");
                }
                let created = cluster
                    .any()
                    .create_topic_replicated(
                        &name,
                        partitions.unwrap_or(-1),
                        replication_factor.unwrap_or(-1),
                        &configs,
                    )
                    .await
                    .map_err(|e| topic_error(e, &name))?;
                let n = created.partitions;
                let plural = if n == 1 { "" } else { "s" };
                super::print_line(format_args!(
                    "Created topic {name} with {n} partition{plural}"
                ))?;
            }
            TopicCommand::List => {
                let metadata = cluster.any().metadata(None).await?;
                let mut out = String::new();
                for topic in &metadata.topics {
                    writeln!(out, "{}", topic.name)?;
                }
                super::print(format_args!("{out}"))?;
            }
            TopicCommand::Describe { name } => {
                let http = BrokerHttp::new(&args.connection.security()?)?;
                let names = match name {
                    Some(name) => vec![name],
                    None => {
                        let mut names: Vec<String> = cluster
                            .any()
                            .metadata(None)
                            .await?
                            .topics
                            .into_iter()
                            .map(|t| t.name)
                            .collect();
                        names.sort();
                        names
                    }
                };
                for (i, name) in names.iter().enumerate() {
                    if i > 0 {
                        super::print_line(format_args!(""))?;
                    }
                    super::print(format_args!(
                        "{}",
                        describe(&mut cluster, &http, name).await?
                    ))?;
                }
            }
            TopicCommand::AddPartitions {
                name,
                partitions,
                force,
            } => {
                let current = topic_metadata(cluster.any(), &name).await?.partitions.len();
                if partitions as usize <= current {
                    bail!("topic {name} already has {current} partitions; give a larger total");
                }
                if has_keyed_records(&mut cluster, &name, current as i32).await? {
                    let why = format!(
                        "topic {name} holds keyed records: with {partitions} partitions instead \
                         of {current}, most keys map to a different partition (murmur2(key) % \
                         partitions), so a key's new records no longer follow its old ones"
                    );
                    if !force {
                        bail!("{why}; add --force to add the partitions anyway");
                    }
                    eprintln!("warning: {why}");
                }
                cluster
                    .any()
                    .create_partitions(&name, partitions)
                    .await
                    .map_err(|e| topic_error(e, &name))?;
                super::print_line(format_args!("Topic {name} now has {partitions} partitions"))?;
            }
            TopicCommand::AlterConfig { name, set, delete } => {
                if set.is_empty() && delete.is_empty() {
                    bail!("nothing to change: give --set KEY=VALUE or --delete KEY");
                }
                cluster
                    .any()
                    .alter_topic_configs(&name, &set, &delete)
                    .await
                    .map_err(|e| topic_error(e, &name))?;
                super::print_line(format_args!("Altered configs of topic {name}"))?;
            }
            TopicCommand::Delete { name, force } => {
                if is_internal(&name) && !force {
                    bail!(
                        "{name} is an internal topic{}; pass --force to delete it anyway",
                        if name == "__consumer_offsets" {
                            ": deleting it deletes every group's committed offsets"
                        } else {
                            " the broker keeps its own state in"
                        }
                    );
                }
                cluster
                    .any()
                    .delete_topic(&name)
                    .await
                    .map_err(|e| topic_error(e, &name))?;
                super::print_line(format_args!("Deleted topic {name}"))?;
            }
            TopicCommand::Reassign {
                name,
                partition,
                replicas,
                drain,
                cancel,
            } => {
                let topic = topic_metadata(cluster.any(), &name).await?;
                let moves = match (drain, partition) {
                    (Some(broker), _) => {
                        let live: Vec<i32> = cluster
                            .any()
                            .metadata(Some(std::slice::from_ref(&name)))
                            .await?
                            .brokers
                            .iter()
                            .map(|b| b.node_id)
                            .collect();
                        drain_moves(&topic, broker, &live)?
                    }
                    (None, Some(p)) => {
                        super::check_partition(&topic, p)?;
                        vec![(p, (!cancel).then_some(replicas))]
                    }
                    (None, None) => bail!("give --partition or --drain"),
                };
                if moves.is_empty() {
                    super::print_line(format_args!("Nothing to move"))?;
                }
                for (p, target) in moves {
                    cluster
                        .any()
                        .reassign_partition(&name, p, target.as_deref())
                        .await
                        .map_err(|e| topic_error(e, &name))?;
                    match target {
                        Some(target) => {
                            let list = |ids: &[i32]| {
                                ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
                            };
                            let current = &topic.partitions[p as usize].replicas;
                            super::print_line(format_args!(
                                "Moving {name}-{p}: {} -> {}",
                                list(current),
                                list(&target)
                            ))?;
                        }
                        None => {
                            super::print_line(format_args!("Cancelled the move of {name}-{p}"))?
                        }
                    }
                }
            }
            TopicCommand::Reassignments => {
                let ongoing = cluster.any().list_reassignments().await?;
                let list =
                    |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
                let mut rows = vec![vec![
                    "PARTITION".to_owned(),
                    "REPLICAS".to_owned(),
                    "ADDING".to_owned(),
                    "REMOVING".to_owned(),
                ]];
                for (topic, p, replicas, adding, removing) in &ongoing {
                    rows.push(vec![
                        format!("{topic}-{p}"),
                        list(replicas),
                        list(adding),
                        list(removing),
                    ]);
                }
                super::print(format_args!("{}", super::table(&rows)))?;
            }
        }
        Ok(())
    })
}

/// For `--drain BROKER`: each partition holding a replica on `broker` gets
/// it replaced, in place, by the live broker holding the fewest replicas of
/// the topic among those the partition does not use yet.
fn drain_moves(
    topic: &weir_client::TopicMetadata,
    broker: i32,
    live: &[i32],
) -> anyhow::Result<Vec<(i32, Option<Vec<i32>>)>> {
    let mut load: std::collections::BTreeMap<i32, usize> = live
        .iter()
        .filter(|b| **b != broker)
        .map(|b| (*b, 0))
        .collect();
    for p in &topic.partitions {
        for r in &p.replicas {
            if let Some(n) = load.get_mut(r) {
                *n += 1;
            }
        }
    }
    let mut moves = Vec::new();
    for p in &topic.partitions {
        if !p.replicas.contains(&broker) {
            continue;
        }
        let Some((&replacement, _)) = load
            .iter()
            .filter(|(b, _)| !p.replicas.contains(b))
            .min_by_key(|(b, n)| (**n, **b))
        else {
            bail!(
                "no live broker can take {}-{}'s replica from broker {broker}: every other one holds it already",
                topic.name,
                p.partition
            );
        };
        *load.entry(replacement).or_default() += 1;
        let target = p
            .replicas
            .iter()
            .map(|r| if *r == broker { replacement } else { *r })
            .collect();
        moves.push((p.partition, Some(target)));
    }
    Ok(moves)
}

/// Whether the latest records of any partition carry keys: a sample of
/// each partition's tail, which is where keyed topics show their keys.
async fn has_keyed_records(
    cluster: &mut Cluster,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<bool> {
    const SAMPLE: i64 = 100;
    for partition in 0..partitions {
        let start = cluster.list_offsets(topic, partition, EARLIEST).await?;
        let end = cluster.list_offsets(topic, partition, LATEST).await?;
        if end <= start {
            continue;
        }
        let from = start.max(end - SAMPLE);
        let records = cluster.fetch(topic, partition, from, 1 << 20, 0).await?;
        if records.iter().any(|r| r.key.is_some()) {
            return Ok(true);
        }
    }
    Ok(false)
}

async fn describe(cluster: &mut Cluster, http: &BrokerHttp, name: &str) -> anyhow::Result<String> {
    let topic = topic_metadata(cluster.any(), name).await?;
    let configs = cluster
        .any()
        .describe_configs(ConfigResource::Topic(name.to_owned()))
        .await
        .map_err(|e| topic_error(e, name))?;
    let tiered = configs
        .iter()
        .any(|c| c.name == "remote.storage.enable" && c.value.as_deref() == Some("true"));
    let mut header = vec![
        "PARTITION",
        "LEADER",
        "REPLICAS",
        "ISR",
        "LOG-START",
        "LOG-END",
    ];
    if tiered {
        header.extend(["LOCAL-START", "LOCAL-SIZE", "REMOTE-START", "REMOTE-SIZE"]);
    }
    let mut rows = vec![header.into_iter().map(str::to_owned).collect::<Vec<_>>()];
    let tiers = if tiered {
        remote_logs(cluster, http, name, &topic.partitions).await
    } else {
        Default::default()
    };
    let list = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    for p in &topic.partitions {
        // A partition with no leader at the moment (its only replica is
        // down, its log is still opening) is shown, not an error.
        let offsets = if p.leader < 0 {
            Ok(None)
        } else {
            match cluster.list_offsets(name, p.partition, EARLIEST).await {
                Ok(start) => cluster
                    .list_offsets(name, p.partition, LATEST)
                    .await
                    .map(|end| Some((start, end))),
                Err(error) => Err(error),
            }
        };
        let (start, end) = match offsets {
            Ok(Some((start, end))) => (start.to_string(), end.to_string()),
            Ok(None) => ("-".to_owned(), "-".to_owned()),
            Err(error) if error.kafka_error().is_some_and(|e| e.is_retriable()) => {
                ("-".to_owned(), "-".to_owned())
            }
            Err(error) => return Err(topic_error(error, name)),
        };
        let leader = if p.leader < 0 {
            "none".to_owned()
        } else {
            p.leader.to_string()
        };
        let mut row = vec![
            p.partition.to_string(),
            leader,
            list(&p.replicas),
            list(&p.isr),
            start,
            end,
        ];
        if tiered {
            let tier = tiers.get(&p.partition);
            let local = tier.and_then(|t| t.local.as_ref());
            let or_dash = |value: Option<u64>| value.map_or("-".to_owned(), |v| v.to_string());
            row.extend([
                or_dash(local.map(|l| l.log_start_offset)),
                or_dash(local.map(|l| l.size_bytes)),
                or_dash(tier.and_then(|t| t.remote.log_start_offset)),
                or_dash(tier.map(|t| t.remote.size_bytes)),
            ]);
        }
        rows.push(row);
    }

    let mut out = String::new();
    writeln!(out, "Topic:      {name}")?;
    if !topic.topic_id.is_nil() {
        writeln!(out, "Topic ID:   {}", topic.topic_id)?;
    }
    writeln!(out, "Partitions: {}", topic.partitions.len())?;
    if topic.is_internal {
        writeln!(out, "Internal:   yes")?;
    }
    writeln!(out)?;
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                write!(line, "{cell:<width$}  ", width = widths[i])?;
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    writeln!(out)?;
    let overrides: Vec<_> = configs.iter().filter(|c| !c.is_default()).collect();
    if overrides.is_empty() {
        writeln!(out, "Configs: all defaults")?;
    } else {
        writeln!(out, "Configs (non-default):")?;
        for config in overrides {
            let value = match (&config.value, config.is_sensitive) {
                (_, true) => "(sensitive)".to_owned(),
                (Some(v), false) => v.clone(),
                (None, false) => "(null)".to_owned(),
            };
            let source = match config.source {
                ConfigSource::DynamicTopic => "topic",
                ConfigSource::StaticBroker => "broker config",
                ConfigSource::DynamicBroker => "dynamic broker config",
                ConfigSource::DynamicDefaultBroker => "cluster-wide broker config",
                _ => "other",
            };
            writeln!(out, "  {}={value}  ({source})", config.name)?;
        }
    }
    Ok(out)
}

/// What each partition's leader says of its remote tier and its local log
/// (`GET /v1/topics/{topic}/remote-log` of its HTTP endpoint), by
/// partition; partitions whose leader does not answer are left out.
async fn remote_logs(
    cluster: &mut Cluster,
    http: &BrokerHttp,
    name: &str,
    partitions: &[weir_client::PartitionMetadata],
) -> BTreeMap<i32, PartitionRemoteLog> {
    // As the cluster's own metadata has them, so that it can reach them.
    let mut leaders = std::collections::BTreeSet::new();
    for p in partitions {
        if let Ok(leader) = cluster.leader_of(name, p.partition).await {
            leaders.insert(leader);
        }
    }
    let mut by_partition = BTreeMap::new();
    for leader in leaders {
        let Ok(endpoint) = BrokerHttp::endpoint_of(cluster, leader).await else {
            continue;
        };
        let url = format!(
            "{}/v1/topics/{name}/remote-log",
            endpoint.trim_end_matches('/')
        );
        let Ok(Some(view)) = http.get_json::<TopicRemoteLog>(url).await else {
            continue;
        };
        by_partition.extend(
            view.partitions
                .into_iter()
                .filter(|p| p.leader == leader)
                .map(|p| (p.partition, p)),
        );
    }
    by_partition
}

#[derive(serde::Deserialize)]
struct TopicRemoteLog {
    partitions: Vec<PartitionRemoteLog>,
}

#[derive(serde::Deserialize)]
struct PartitionRemoteLog {
    partition: i32,
    leader: i32,
    remote: RemoteTierView,
    local: Option<LocalLogView>,
}

#[derive(serde::Deserialize)]
struct RemoteTierView {
    log_start_offset: Option<u64>,
    size_bytes: u64,
}

#[derive(serde::Deserialize)]
struct LocalLogView {
    log_start_offset: u64,
    size_bytes: u64,
}

/// Whether `name` is one of the topics a broker creates and keeps its
/// state in.
fn is_internal(name: &str) -> bool {
    matches!(
        name,
        "__consumer_offsets"
            | "__transaction_state"
            | "__share_group_state"
            | "__remote_log_metadata"
            | "__cluster_metadata"
    )
}

#[cfg(test)]
mod tests {
    use super::parse_config;

    #[test]
    fn configs_are_key_equals_value() {
        assert_eq!(
            parse_config("retention.ms=1000"),
            Ok(("retention.ms".into(), "1000".into()))
        );
        assert_eq!(parse_config("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(
            parse_config("cleanup.policy="),
            Ok(("cleanup.policy".into(), "".into()))
        );
        assert!(parse_config("retention.ms").is_err());
        assert!(parse_config("=1").is_err());
    }
}
