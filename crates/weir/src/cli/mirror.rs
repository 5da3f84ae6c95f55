//! `weir mirror create|list|describe|pause|resume|failover|delete`: mirrors of a
//! source cluster (KIP-1279), defined on this (the destination) cluster
//! through a broker's HTTP endpoint (`/v1/mirrors`); `describe` asks every
//! broker for the mirror partitions it leads.

use std::collections::BTreeMap;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use serde::Deserialize;
use weir_client::Cluster;

use super::broker_http::BrokerHttp;
use super::{block_on, print_line, table, Connection};

#[derive(Args, Debug)]
pub(crate) struct MirrorArgs {
    #[command(subcommand)]
    command: MirrorCommand,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Subcommand, Debug)]
enum MirrorCommand {
    /// Mirror a source cluster's topics into this one, byte for byte and
    /// offset for offset, under their names and topic ids; the mirror
    /// topics are read-only here.
    Create {
        /// The mirror's name.
        name: String,
        /// The source cluster's bootstrap servers.
        #[arg(long, value_name = "HOST:PORT")]
        source_bootstrap: String,
        /// The source topics to mirror, a regular expression matching whole
        /// names (default: every topic but internal ones).
        #[arg(long, value_name = "REGEX")]
        topics: Option<String>,
        /// The groups whose committed offsets to copy, a regular
        /// expression matching whole ids.
        #[arg(long, value_name = "REGEX")]
        groups: Option<String>,
        /// A client setting for the source, with Kafka's name
        /// (security.protocol, sasl.mechanism, ssl.truststore.location, ...);
        /// repeat for more.
        #[arg(long = "source-config", value_name = "KEY=VALUE")]
        source_config: Vec<String>,
        /// Copy the source's ACLs here too, and remove those the source
        /// removes (the mirror's client needs Describe on the source's
        /// cluster).
        #[arg(long)]
        sync_acls: bool,
    },
    /// List the mirrors.
    List,
    /// Show a mirror and, per partition, the source's end offset, the
    /// offset mirrored up to, the lag in records and in seconds, and the
    /// state.
    Describe {
        /// The mirror's name.
        name: String,
    },
    /// Stop fetching for now; the mirror topics stay read-only.
    Pause {
        /// The mirror's name.
        name: String,
    },
    /// Fetch again after a pause.
    Resume {
        /// The mirror's name.
        name: String,
    },
    /// Fail over: stop mirroring the topics (all, or those named), cut each
    /// partition at its last stable offset, record the last mirrored
    /// offsets, and make the topics writable here.
    Failover {
        /// The mirror's name.
        name: String,
        /// A topic to fail over (repeat for more); all without.
        #[arg(long = "topic", value_name = "TOPIC")]
        topics: Vec<String>,
    },
    /// Remove a mirror; its topics stay, and take writes.
    Delete {
        /// The mirror's name.
        name: String,
    },
}

#[derive(Deserialize)]
struct MirrorView {
    name: String,
    source_bootstrap: String,
    topics: String,
    groups: Option<String>,
    paused: bool,
    mirror_topics: Vec<MirrorTopicView>,
}

#[derive(Deserialize)]
struct MirrorTopicView {
    name: String,
    state: String,
    #[serde(default)]
    last_mirrored_offsets: Vec<LastMirrored>,
}

#[derive(Deserialize)]
struct LastMirrored {
    partition: i32,
    offset: u64,
}

#[derive(Deserialize)]
struct MirrorDescription {
    #[serde(flatten)]
    mirror: MirrorView,
    partitions: Vec<PartitionProgress>,
}

#[derive(Deserialize)]
struct PartitionProgress {
    topic: String,
    partition: i32,
    source_end_offset: Option<u64>,
    mirrored_offset: u64,
    lag_records: u64,
    lag_seconds: f64,
    state: String,
}

pub(crate) fn run(args: MirrorArgs) -> anyhow::Result<()> {
    block_on(async move {
        let http = BrokerHttp::new(&args.connection.security()?)?;
        let mut cluster = args.connection.cluster().await?;
        match args.command {
            MirrorCommand::Create {
                name,
                source_bootstrap,
                topics,
                groups,
                source_config,
                sync_acls,
            } => {
                let mut settings = BTreeMap::new();
                for setting in &source_config {
                    let (key, value) = setting
                        .split_once('=')
                        .ok_or_else(|| anyhow!("--source-config {setting}: expected KEY=VALUE"))?;
                    settings.insert(key.trim().to_owned(), value.to_owned());
                }
                let body = serde_json::json!({
                    "name": name,
                    "source_bootstrap": source_bootstrap,
                    "topics": topics,
                    "groups": groups,
                    "source_config": settings,
                    "sync_acls": sync_acls,
                });
                let url = format!("{}/v1/mirrors", any_endpoint(&mut cluster).await?);
                http.change(url, Some(body)).await?;
                print_line(format_args!("created mirror {name} of {source_bootstrap}"))?;
            }
            MirrorCommand::List => {
                let url = format!("{}/v1/mirrors", any_endpoint(&mut cluster).await?);
                let mirrors: Vec<MirrorView> = http.get_json(url).await?.unwrap_or_default();
                let mut rows = vec![[
                    "MIRROR",
                    "SOURCE",
                    "TOPICS",
                    "GROUPS",
                    "STATE",
                    "MIRROR-TOPICS",
                ]
                .map(str::to_owned)
                .to_vec()];
                rows.extend(mirrors.into_iter().map(|m| {
                    vec![
                        m.name,
                        m.source_bootstrap,
                        m.topics,
                        m.groups.unwrap_or_else(|| "-".to_owned()),
                        state(m.paused).to_owned(),
                        m.mirror_topics.len().to_string(),
                    ]
                }));
                super::print(format_args!("{}", table(&rows)))?;
            }
            MirrorCommand::Describe { name } => describe(&http, &mut cluster, &name).await?,
            MirrorCommand::Pause { name } => {
                let url = format!(
                    "{}/v1/mirrors/{name}/pause",
                    any_endpoint(&mut cluster).await?
                );
                http.change(url, Some(serde_json::json!({}))).await?;
                print_line(format_args!("paused mirror {name}"))?;
            }
            MirrorCommand::Resume { name } => {
                let url = format!(
                    "{}/v1/mirrors/{name}/resume",
                    any_endpoint(&mut cluster).await?
                );
                http.change(url, Some(serde_json::json!({}))).await?;
                print_line(format_args!("resumed mirror {name}"))?;
            }
            MirrorCommand::Failover { name, topics } => {
                failover(&http, &mut cluster, &name, topics).await?
            }
            MirrorCommand::Delete { name } => {
                let url = format!("{}/v1/mirrors/{name}", any_endpoint(&mut cluster).await?);
                http.change(url, None).await?;
                print_line(format_args!("deleted mirror {name}"))?;
            }
        }
        Ok(())
    })
}

fn state(paused: bool) -> &'static str {
    if paused {
        "paused"
    } else {
        "running"
    }
}

/// How long a failover may take: every partition's leader reports its
/// cut, as a metadata change.
const FAILOVER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Starts the failover, then waits until every topic chosen took it and
/// prints where each partition's mirrored records end.
async fn failover(
    http: &BrokerHttp,
    cluster: &mut Cluster,
    name: &str,
    topics: Vec<String>,
) -> anyhow::Result<()> {
    let endpoint = any_endpoint(cluster).await?;
    http.change(
        format!("{endpoint}/v1/mirrors/{name}/failover"),
        Some(serde_json::json!({ "topics": topics })),
    )
    .await?;
    let deadline = std::time::Instant::now() + FAILOVER_TIMEOUT;
    loop {
        let mirror: MirrorView = http
            .get_json(format!("{endpoint}/v1/mirrors/{name}"))
            .await?
            .ok_or_else(|| anyhow!("mirror '{name}' does not exist"))?;
        let chosen: Vec<&MirrorTopicView> = mirror
            .mirror_topics
            .iter()
            .filter(|t| topics.is_empty() || topics.contains(&t.name))
            .collect();
        let waiting: Vec<&str> = chosen
            .iter()
            .filter(|t| t.state != "failed-over")
            .map(|t| t.name.as_str())
            .collect();
        if waiting.is_empty() {
            let mut rows = vec![["TOPIC", "PARTITION", "LAST-MIRRORED-OFFSET"]
                .map(str::to_owned)
                .to_vec()];
            for topic in chosen {
                for last in &topic.last_mirrored_offsets {
                    rows.push(vec![
                        topic.name.clone(),
                        last.partition.to_string(),
                        last.offset.to_string(),
                    ]);
                }
            }
            print_line(format_args!(
                "failed over mirror {name}; the topics take writes"
            ))?;
            return super::print(format_args!("{}", table(&rows))).map_err(Into::into);
        }
        if std::time::Instant::now() > deadline {
            return Err(anyhow!(
                "the failover of {} is not done after {}s: a partition's leader has not reported its cut (is it running?)",
                waiting.join(", "),
                FAILOVER_TIMEOUT.as_secs()
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The HTTP endpoint of a broker of the cluster.
async fn any_endpoint(cluster: &mut Cluster) -> anyhow::Result<String> {
    let metadata = cluster.metadata(Some(&[])).await?;
    let node = metadata
        .brokers
        .first()
        .map(|b| b.node_id)
        .ok_or_else(|| anyhow!("the cluster names no broker"))?;
    BrokerHttp::endpoint_of(cluster, node).await
}

/// Every broker's part of the mirror: each reports the partitions it
/// leads.
async fn describe(http: &BrokerHttp, cluster: &mut Cluster, name: &str) -> anyhow::Result<()> {
    let metadata = cluster.metadata(Some(&[])).await?;
    let mut mirror = None;
    let mut partitions = Vec::new();
    for broker in &metadata.brokers {
        let described = async {
            let endpoint = BrokerHttp::endpoint_of(cluster, broker.node_id).await?;
            http.get_json::<MirrorDescription>(format!("{endpoint}/v1/mirrors/{name}"))
                .await
        };
        match described.await {
            Ok(Some(description)) => {
                partitions.extend(description.partitions);
                mirror.get_or_insert(description.mirror);
            }
            Ok(None) => return Err(anyhow!("mirror '{name}' does not exist")),
            // The others still tell theirs.
            Err(error) => eprintln!(
                "warning: broker {} did not answer ({error:#}); the partitions it leads are left out",
                broker.node_id
            ),
        }
    }
    let mirror = mirror.ok_or_else(|| anyhow!("the cluster names no broker"))?;
    print_line(format_args!(
        "mirror {} of {} ({}), topics {}, groups {}",
        mirror.name,
        mirror.source_bootstrap,
        state(mirror.paused),
        mirror.topics,
        mirror.groups.as_deref().unwrap_or("-")
    ))?;
    partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    let mut rows = vec![[
        "TOPIC",
        "PARTITION",
        "SOURCE-END-OFFSET",
        "MIRRORED-OFFSET",
        "LAG",
        "LAG-SECONDS",
        "STATE",
    ]
    .map(str::to_owned)
    .to_vec()];
    rows.extend(partitions.into_iter().map(|p| {
        vec![
            p.topic,
            p.partition.to_string(),
            p.source_end_offset
                .map_or_else(|| "-".to_owned(), |o| o.to_string()),
            p.mirrored_offset.to_string(),
            p.lag_records.to_string(),
            format!("{:.1}", p.lag_seconds),
            p.state,
        ]
    }));
    // Topics failing over or failed over: where their mirrored records
    // end. (Those mirroring or failing back are in their leaders' rows.)
    for topic in mirror
        .mirror_topics
        .iter()
        .filter(|t| t.state != "mirroring" && t.state != "failing-back")
    {
        if topic.last_mirrored_offsets.is_empty() {
            rows.push(vec![
                topic.name.clone(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                topic.state.clone(),
            ]);
        }
        for last in &topic.last_mirrored_offsets {
            rows.push(vec![
                topic.name.clone(),
                last.partition.to_string(),
                "-".to_owned(),
                last.offset.to_string(),
                "-".to_owned(),
                "-".to_owned(),
                topic.state.clone(),
            ]);
        }
    }
    super::print(format_args!("{}", table(&rows)))?;
    Ok(())
}
