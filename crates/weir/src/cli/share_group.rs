//! `weir share-group list|describe`: share groups (KIP-932), their members
//! and, per partition, where the group stands in the log.

use clap::{Args, Subcommand};
use weir_client::LATEST;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::bail;
use serde::Deserialize;
use weir_client::{Cluster, ShareGroupOffset};

use super::broker_http::BrokerHttp;
use super::group::{
    chosen_partitions, group_error, listed_groups, reset_plan, reset_report, Clients, ResetArgs,
};
use super::{block_on, table, Connection};

#[derive(Args, Debug)]
pub(crate) struct ShareGroupArgs {
    #[command(subcommand)]
    command: ShareGroupCommand,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Subcommand, Debug)]
enum ShareGroupCommand {
    /// List every share group with its state.
    List,
    /// Show a share group's members and their partitions and, per
    /// partition, its start offset (everything before it is acknowledged
    /// or archived), the log end offset, the records in flight (from the
    /// start offset on, not yet acknowledged or archived), available and
    /// acquired, and the age of the oldest available record.
    Describe {
        /// The group's id.
        group: String,
    },
    /// Start a share group's partitions over at a new offset, with nothing
    /// in flight; only while it has no members.
    ResetOffsets(ResetArgs),
    /// Delete a share group and its state; only while it has no members.
    Delete {
        /// The group's id.
        group: String,
    },
}

pub(crate) fn run(args: ShareGroupArgs) -> anyhow::Result<()> {
    block_on(async move {
        let out = match args.command {
            ShareGroupCommand::List => {
                let mut rows = vec![vec!["GROUP".to_owned(), "STATE".to_owned()]];
                rows.extend(
                    listed_groups(&args.connection)
                        .await?
                        .into_iter()
                        .filter(|(_, (_, group_type))| group_type == "share")
                        .map(|(group, (state, _))| vec![group, state]),
                );
                table(&rows)
            }
            ShareGroupCommand::Describe { group } => describe(&args.connection, &group).await?,
            ShareGroupCommand::ResetOffsets(reset) => {
                reset_offsets(&args.connection, reset).await?
            }
            ShareGroupCommand::Delete { group } => {
                let mut clients = Clients::open(&args.connection, &group).await?;
                let results = clients
                    .coordinator()
                    .delete_groups(&[&group])
                    .await
                    .map_err(|e| group_error(e, &group))?;
                for (_, result) in results {
                    result.map_err(|e| group_error(e, &group))?;
                }
                format!("Deleted share group {group}\n")
            }
        };
        super::print(format_args!("{out}"))?;
        Ok(())
    })
}

/// The clients for `group` (its coordinator found) and its description.
async fn open_group(
    connection: &Connection,
    group: &str,
) -> anyhow::Result<(Clients, weir_client::ShareGroupDescription)> {
    let mut clients = Clients::open(connection, group).await?;
    let described = clients
        .coordinator()
        .describe_share_group(group)
        .await
        .map_err(|e| group_error(e, group))?;
    Ok((clients, described))
}

async fn describe(connection: &Connection, group: &str) -> anyhow::Result<String> {
    let (mut clients, described) = open_group(connection, group).await?;
    let offsets = clients
        .coordinator()
        .share_group_offsets(group)
        .await
        .map_err(|e| group_error(e, group))?;
    let mut out = format!(
        "Group {group}: {}, epoch {}, {} members\n\n",
        described.state,
        described.group_epoch,
        described.members.len()
    );
    let in_flight = in_flight_views(connection, &mut clients.cluster, group, &offsets).await?;
    let mut rows = vec![[
        "TOPIC",
        "PARTITION",
        "START-OFFSET",
        "LOG-END-OFFSET",
        "IN-FLIGHT",
        "AVAILABLE",
        "ACQUIRED",
        "OLDEST-AVAILABLE-AGE",
        "MEMBERS",
    ]
    .map(String::from)
    .to_vec()];
    for offset in offsets {
        let at = (offset.topic.clone(), offset.partition);
        let holders = described
            .members
            .iter()
            .filter(|m| m.assignment.contains(&at))
            .count();
        let end = clients
            .cluster
            .list_offsets(&offset.topic, offset.partition, LATEST)
            .await?;
        let start = match offset.start_offset {
            Ok(Some(start)) => start.to_string(),
            Ok(None) => "-".to_owned(),
            Err(error) => error.to_string(),
        };
        let counts = match in_flight.get(&at) {
            Some(view) => [
                view.in_flight.to_string(),
                view.available.to_string(),
                view.acquired.to_string(),
                format!("{:.1}s", view.oldest_available_seconds),
            ],
            None => ["-", "-", "-", "-"].map(String::from),
        };
        let mut row = vec![
            offset.topic,
            offset.partition.to_string(),
            start,
            end.to_string(),
        ];
        row.extend(counts);
        row.push(holders.to_string());
        rows.push(row);
    }
    out.push_str(&table(&rows));
    let mut members = vec![["MEMBER", "CLIENT", "HOST", "EPOCH", "PARTITIONS"]
        .map(String::from)
        .to_vec()];
    for m in &described.members {
        let partitions: Vec<String> = m
            .assignment
            .iter()
            .map(|(topic, p)| format!("{topic}-{p}"))
            .collect();
        members.push(vec![
            m.member_id.clone(),
            m.client_id.clone(),
            m.client_host.clone(),
            m.member_epoch.to_string(),
            partitions.join(","),
        ]);
    }
    out.push('\n');
    out.push_str(&table(&members));
    Ok(out)
}

async fn reset_offsets(connection: &Connection, args: ResetArgs) -> anyhow::Result<String> {
    let group = args.group.as_str();
    let (mut clients, described) = open_group(connection, group).await?;
    if !described.members.is_empty() {
        bail!(
            "offsets can only be reset while share group {group} has no members ({} now); \
             stop its consumers first",
            described.members.len()
        );
    }
    let partitions = chosen_partitions(&mut clients, &args).await?;
    let previous: BTreeMap<(String, i32), i64> = clients
        .coordinator()
        .share_group_offsets(group)
        .await
        .map_err(|e| group_error(e, group))?
        .into_iter()
        .filter_map(|o| Some(((o.topic, o.partition), o.start_offset.ok()??)))
        .collect();
    let plan = reset_plan(&mut clients, &partitions, args.reset_to()).await?;
    if !args.dry_run {
        clients
            .coordinator()
            .alter_share_group_offsets(group, &plan)
            .await
            .map_err(|e| group_error(e, group))?;
    }
    reset_report(group, plan, &previous, args.dry_run)
}

/// A share-partition as its leader's `/v1/groups` shows it.
#[derive(Debug, Deserialize)]
struct SharePartitionView {
    topic: String,
    partition: i32,
    in_flight: u64,
    available: u64,
    acquired: u64,
    oldest_available_seconds: f64,
}

#[derive(Debug, Deserialize)]
struct GroupView {
    #[serde(default)]
    share_partitions: Vec<SharePartitionView>,
}

/// What the leaders of the group's share-partitions hold in flight, read
/// from their HTTP endpoints: the Kafka protocol has no request for it. A
/// leader that cannot be read is warned about and its partitions shown
/// without counts; one that has not loaded the share-partition (nothing
/// fetched since it became leader) shows none either.
async fn in_flight_views(
    connection: &Connection,
    cluster: &mut Cluster,
    group: &str,
    offsets: &[ShareGroupOffset],
) -> anyhow::Result<BTreeMap<(String, i32), SharePartitionView>> {
    let http = BrokerHttp::new(&connection.security()?)?;
    let mut leaders = BTreeSet::new();
    for offset in offsets {
        if let Ok(leader) = cluster.leader_of(&offset.topic, offset.partition).await {
            leaders.insert(leader);
        }
    }
    let path = format!(
        "/v1/groups/{}",
        percent_encoding::utf8_percent_encode(group, percent_encoding::NON_ALPHANUMERIC)
    );
    let mut views = BTreeMap::new();
    for leader in leaders {
        let read = async {
            let endpoint = BrokerHttp::endpoint_of(cluster, leader).await?;
            http.get_json::<GroupView>(format!("{endpoint}{path}"))
                .await
        };
        match read.await {
            Ok(view) => views.extend(
                view.into_iter()
                    .flat_map(|v| v.share_partitions)
                    .map(|v| ((v.topic.clone(), v.partition), v)),
            ),
            Err(error) => eprintln!(
                "warning: cannot read the records in flight from broker {leader}: {error:#}"
            ),
        }
    }
    Ok(views)
}
