//! `weir cluster status`: the brokers, the active controller and its Raft
//! state, and the partitions that need attention. `weir cluster
//! alter-config` and `describe-config`: the dynamic broker configs, of one
//! broker or the cluster-wide default.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use weir_client::{
    BrokerMetadata, Client, ClientError, ConfigEntry, ConfigResource, ConfigSource, Metadata,
    QuorumStatus, ResponseError,
};

use super::topic::parse_config;
use super::{block_on, table, Connection};

#[derive(Args, Debug)]
pub(crate) struct ClusterArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
enum ClusterCommand {
    /// Brokers, the active controller with its Raft term and commit index,
    /// partitions without a leader and under-replicated partitions.
    Status,
    /// Change dynamic broker configs while the cluster runs: the
    /// cluster-wide default every broker takes, or with --broker one
    /// broker's own, which beats the default. Topics without an override
    /// follow the new defaults at once; the change survives restarts.
    AlterConfig {
        /// The broker to change (default: the cluster-wide default).
        #[arg(long, value_name = "ID")]
        broker: Option<i32>,
        /// Set a config, KEY=VALUE (e.g. log.retention.ms=3600000); repeat
        /// for several.
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_config)]
        set: Vec<(String, String)>,
        /// Remove a dynamic config (back to the cluster-wide default, or
        /// the broker's static config); repeat for several.
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
    },
    /// Show the dynamic cluster-wide broker configs, or with --broker every
    /// config of that broker with the value in force and where it comes
    /// from.
    DescribeConfig {
        /// The broker to describe (default: the cluster-wide default).
        #[arg(long, value_name = "ID")]
        broker: Option<i32>,
    },
    /// Move partitions' leadership back to their preferred replica (the
    /// first of their replicas), as after a broker's restart; or, with
    /// --unclean, give a partition without a leader one out of sync
    /// (records it alone held are lost). Kafka's
    /// kafka-leader-election.sh.
    ElectLeaders {
        /// A preferred-replica election (the default).
        #[arg(long, conflicts_with = "unclean")]
        preferred: bool,
        /// An unclean election, for partitions without a leader.
        #[arg(long)]
        unclean: bool,
        /// Only this topic's partitions (default: every partition).
        #[arg(long, value_name = "TOPIC")]
        topic: Option<String>,
        /// Only this partition of --topic.
        #[arg(long, short = 'p', requires = "topic", value_name = "N")]
        partition: Option<i32>,
    },
}

pub(crate) fn run(args: ClusterArgs) -> anyhow::Result<()> {
    block_on(async move {
        let mut client = args.connection.connect().await?;
        match args.command {
            ClusterCommand::Status => {
                let metadata = client.metadata(None).await?;
                let quorum = client.describe_quorum().await?;
                let registered = client.registered_brokers().await?;
                super::print(format_args!(
                    "{}",
                    render_status(&metadata, &quorum, &registered)
                ))?;
            }
            ClusterCommand::AlterConfig {
                broker,
                set,
                delete,
            } => {
                if set.is_empty() && delete.is_empty() {
                    bail!("nothing to change: give --set KEY=VALUE or --delete KEY");
                }
                let resource = match broker {
                    Some(id) => ConfigResource::Broker(id),
                    None => ConfigResource::BrokerDefault,
                };
                client.alter_configs(resource, &set, &delete).await?;
                match broker {
                    Some(id) => super::print_line(format_args!(
                        "Altered the dynamic configs of broker {id}"
                    ))?,
                    None => super::print_line(format_args!(
                        "Altered the cluster-wide dynamic broker configs"
                    ))?,
                }
            }
            ClusterCommand::DescribeConfig { broker: None } => {
                let configs = client
                    .describe_configs(ConfigResource::BrokerDefault)
                    .await?;
                super::print(format_args!("{}", render_cluster_configs(&configs)))?;
            }
            ClusterCommand::ElectLeaders {
                preferred: _,
                unclean,
                topic,
                partition,
            } => {
                let partitions = match (&topic, partition) {
                    (None, _) => None,
                    (Some(topic), Some(p)) => Some(vec![(topic.clone(), p)]),
                    (Some(topic), None) => {
                        let metadata = super::topic_metadata(&mut client, topic).await?;
                        Some(
                            metadata
                                .partitions
                                .iter()
                                .map(|p| (topic.clone(), p.partition))
                                .collect(),
                        )
                    }
                };
                let results = client.elect_leaders(unclean, partitions.as_deref()).await?;
                let (text, failed) = render_elections(unclean, &results);
                super::print(format_args!("{text}"))?;
                if failed > 0 {
                    bail!("the election failed for {failed} partition(s)");
                }
            }
            ClusterCommand::DescribeConfig { broker: Some(id) } => {
                // Only a broker itself knows its static configs.
                let mut target = connect_to_broker(&mut client, id).await?;
                let configs = target
                    .as_mut()
                    .unwrap_or(&mut client)
                    .describe_configs(ConfigResource::Broker(id))
                    .await?;
                super::print(format_args!("{}", render_broker_configs(id, &configs)))?;
            }
        }
        Ok(())
    })
}

/// What each partition's election came to, grouped as Kafka's tool says
/// it, and how many failed.
fn render_elections(
    unclean: bool,
    results: &[(String, i32, Option<ClientError>)],
) -> (String, usize) {
    let kind = if unclean { "UNCLEAN" } else { "PREFERRED" };
    let mut elected = Vec::new();
    let mut not_needed = Vec::new();
    let mut failed = Vec::new();
    for (topic, partition, error) in results {
        let name = format!("{topic}-{partition}");
        match error {
            None => elected.push(name),
            Some(e) if e.is(ResponseError::ElectionNotNeeded) => not_needed.push(name),
            Some(e) => failed.push(format!("{name}: {e}")),
        }
    }
    let mut out = String::new();
    if !elected.is_empty() {
        out += &format!(
            "Successfully completed leader election ({kind}) for partitions {}\n",
            elected.join(", ")
        );
    }
    if !not_needed.is_empty() {
        out += &format!(
            "Valid replica already elected for partitions {}\n",
            not_needed.join(", ")
        );
    }
    if elected.is_empty() && not_needed.is_empty() && failed.is_empty() {
        out += "No partition needed an election\n";
    }
    for failure in &failed {
        out += &format!("Election failed for {failure}\n");
    }
    (out, failed.len())
}

/// A client of broker `id`, unless `client` is connected to it already.
async fn connect_to_broker(client: &mut Client, id: i32) -> anyhow::Result<Option<Client>> {
    let metadata = client.metadata(None).await?;
    let Some(broker) = metadata.brokers.iter().find(|b| b.node_id == id) else {
        let live: Vec<String> = metadata
            .brokers
            .iter()
            .map(|b| b.node_id.to_string())
            .collect();
        bail!("no live broker {id} (live brokers: {})", live.join(", "));
    };
    let addr = format!("{}:{}", broker.host, broker.port);
    if addr == client.addr() {
        return Ok(None);
    }
    let target = client
        .connect_to_broker(&addr)
        .await
        .with_context(|| format!("cannot reach broker {id} at {addr}"))?;
    Ok(Some(target))
}

fn render_cluster_configs(configs: &[ConfigEntry]) -> String {
    if configs.is_empty() {
        return "Cluster-wide dynamic broker configs: none\n".to_owned();
    }
    let mut out = "Cluster-wide dynamic broker configs:\n".to_owned();
    let mut rows = vec![vec!["NAME".to_owned(), "VALUE".to_owned()]];
    for config in configs {
        rows.push(vec![config.name.clone(), value_of(config)]);
    }
    out.push_str(&table(&rows));
    out
}

fn render_broker_configs(id: i32, configs: &[ConfigEntry]) -> String {
    let mut out = format!("Broker {id} configs:\n");
    let mut rows = vec![vec![
        "NAME".to_owned(),
        "VALUE".to_owned(),
        "SOURCE".to_owned(),
        "UPDATE".to_owned(),
    ]];
    for config in configs {
        let source = match config.source {
            ConfigSource::DynamicBroker => "dynamic (this broker)",
            ConfigSource::DynamicDefaultBroker => "dynamic (cluster-wide)",
            ConfigSource::StaticBroker => "static",
            ConfigSource::Default => "default",
            _ => "other",
        };
        let update = if config.read_only {
            "read-only"
        } else {
            "dynamic"
        };
        rows.push(vec![
            config.name.clone(),
            value_of(config),
            source.to_owned(),
            update.to_owned(),
        ]);
    }
    out.push_str(&table(&rows));
    out
}

fn value_of(config: &ConfigEntry) -> String {
    match (&config.value, config.is_sensitive) {
        (_, true) => "(sensitive)".to_owned(),
        (Some(v), false) => v.clone(),
        (None, false) => "(null)".to_owned(),
    }
}

fn render_status(
    metadata: &Metadata,
    quorum: &QuorumStatus,
    registered: &[(BrokerMetadata, bool)],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Cluster id: {}",
        metadata.cluster_id.as_deref().unwrap_or("-")
    );
    let voters: Vec<String> = quorum.voters.iter().map(i32::to_string).collect();
    let _ = writeln!(
        out,
        "Active controller: {} (Raft term {}, commit index {}, voters {})",
        if quorum.leader_id < 0 {
            "none".to_owned()
        } else {
            quorum.leader_id.to_string()
        },
        quorum.term,
        quorum.commit_index,
        voters.join(",")
    );
    let mut leaders: BTreeMap<i32, usize> = BTreeMap::new();
    let mut offline = Vec::new();
    let mut under_replicated = Vec::new();
    for topic in &metadata.topics {
        for p in &topic.partitions {
            let name = format!("{}-{}", topic.name, p.partition);
            let list = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
            let detail = format!(
                "{name} (leader {}, replicas {}, isr {})",
                p.leader,
                list(&p.replicas),
                list(&p.isr)
            );
            if p.leader < 0 {
                offline.push(detail);
            } else {
                *leaders.entry(p.leader).or_default() += 1;
                if p.isr.len() < p.replicas.len() {
                    under_replicated.push(detail);
                }
            }
        }
    }
    // The live brokers, and the fenced ones the cluster still counts on.
    let mut brokers: Vec<(&BrokerMetadata, bool)> =
        metadata.brokers.iter().map(|b| (b, false)).collect();
    for (broker, fenced) in registered {
        if *fenced && !brokers.iter().any(|(b, _)| b.node_id == broker.node_id) {
            brokers.push((broker, true));
        }
    }
    brokers.sort_by_key(|(b, _)| b.node_id);
    let fenced = brokers.iter().filter(|(_, f)| *f).count();
    let _ = writeln!(
        out,
        "\nBrokers ({} live, {fenced} fenced):",
        brokers.len() - fenced
    );
    let mut rows = vec![vec![
        "ID".to_owned(),
        "HOST".to_owned(),
        "PORT".to_owned(),
        "RACK".to_owned(),
        "STATE".to_owned(),
        "LEADERS".to_owned(),
    ]];
    for (broker, is_fenced) in brokers {
        rows.push(vec![
            broker.node_id.to_string(),
            broker.host.clone(),
            broker.port.to_string(),
            broker.rack.clone().unwrap_or_else(|| "-".to_owned()),
            if is_fenced { "fenced" } else { "live" }.to_owned(),
            leaders
                .get(&broker.node_id)
                .copied()
                .unwrap_or(0)
                .to_string(),
        ]);
    }
    out.push_str(&table(&rows));
    for (title, partitions) in [
        ("Partitions without a leader", &offline),
        ("Under-replicated partitions", &under_replicated),
    ] {
        let _ = writeln!(out, "\n{title}: {}", partitions.len());
        for p in partitions.iter() {
            let _ = writeln!(out, "  {p}");
        }
    }
    out
}
