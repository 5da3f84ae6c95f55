//! `weir group list|describe|reset-offsets|delete`: consumer groups, their
//! committed offsets and lag, like Kafka's `kafka-consumer-groups.sh`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use anyhow::{anyhow, bail, Context};
use clap::{ArgGroup, Args, Subcommand};
use weir_client::{
    Client, ClientError, Cluster, GroupDescription, ResponseError, TopicMetadata, EARLIEST, LATEST,
};

use super::{block_on, check_partition, table, topic_error, topic_metadata, Connection};

/// The state of a group with no members, whose offsets may be reset.
const EMPTY: &str = "Empty";

#[derive(Args, Debug)]
pub(crate) struct GroupArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: GroupCommand,
}

#[derive(Subcommand, Debug)]
enum GroupCommand {
    /// List every group with its state.
    List,
    /// Show a group's state and members and, per partition, its committed
    /// offset, the log end offset, the lag and the member consuming it.
    Describe {
        /// The group's id.
        group: String,
    },
    /// Set a group's committed offsets; only while it has no active
    /// members.
    ResetOffsets(ResetArgs),
    /// Delete a group and its committed offsets; only while it has no
    /// active members.
    Delete {
        /// The group's id.
        group: String,
    },
}

#[derive(Args, Debug)]
#[command(group(
    ArgGroup::new("target")
        .required(true)
        .args(["to_earliest", "to_latest", "to_offset", "to_datetime"])
))]
pub(super) struct ResetArgs {
    /// The group's id.
    pub(super) group: String,
    /// A topic whose offsets to reset: TOPIC for all its partitions, or
    /// TOPIC:P,P,… for some; repeat for several.
    #[arg(
        long = "topic",
        required = true,
        value_name = "TOPIC[:PARTITIONS]",
        value_parser = parse_topic_spec
    )]
    topics: Vec<TopicSpec>,
    /// To the log start offset.
    #[arg(long)]
    to_earliest: bool,
    /// To the log end offset.
    #[arg(long)]
    to_latest: bool,
    /// To this offset, or the nearest end of the log if it is outside it.
    #[arg(long, value_name = "OFFSET", value_parser = clap::value_parser!(i64).range(0..))]
    to_offset: Option<i64>,
    /// To the first record at or after this time (the log end if there is
    /// none): RFC 3339 like 2026-11-30T10:00:00Z or
    /// 2026-11-30T10:00:00.000+01:00; without a zone, local time.
    #[arg(long, value_name = "DATETIME", value_parser = parse_datetime)]
    to_datetime: Option<i64>,
    /// Print the new offsets without committing them.
    #[arg(long)]
    pub(super) dry_run: bool,
}

/// Where `reset-offsets` moves each partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ResetTo {
    Earliest,
    Latest,
    Offset(i64),
    /// Milliseconds since the Unix epoch.
    Time(i64),
}

impl ResetArgs {
    pub(super) fn reset_to(&self) -> ResetTo {
        match (self.to_offset, self.to_datetime) {
            (Some(offset), _) => ResetTo::Offset(offset),
            (_, Some(time)) => ResetTo::Time(time),
            _ if self.to_earliest => ResetTo::Earliest,
            _ => ResetTo::Latest,
        }
    }
}

/// A `--topic` argument: a topic, and some of its partitions or (`None`)
/// all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TopicSpec {
    topic: String,
    partitions: Option<Vec<i32>>,
}

fn parse_topic_spec(arg: &str) -> Result<TopicSpec, String> {
    let invalid = || format!("expected TOPIC or TOPIC:PARTITION,PARTITION,…, got {arg:?}");
    let (topic, partitions) = match arg.split_once(':') {
        None => (arg, None),
        Some((topic, list)) => {
            let mut partitions = list
                .split(',')
                .map(|p| p.trim().parse::<i32>().ok().filter(|&p| p >= 0))
                .collect::<Option<Vec<i32>>>()
                .ok_or_else(invalid)?;
            partitions.sort_unstable();
            partitions.dedup();
            (topic, Some(partitions))
        }
    };
    let topic = topic.trim();
    if topic.is_empty() {
        return Err(invalid());
    }
    Ok(TopicSpec {
        topic: topic.to_owned(),
        partitions,
    })
}

/// Milliseconds since the Unix epoch of a date and time with a zone
/// (`2026-11-30T10:00:00Z`, `2026-11-30T10:00:00.250+01:00`), or without
/// one in the local time zone, as Kafka's `--to-datetime` takes it
/// (`2026-11-30T10:00:00.000`).
fn parse_datetime(arg: &str) -> Result<i64, String> {
    use chrono::{DateTime, Local, NaiveDateTime, TimeZone};
    let zoned = DateTime::parse_from_rfc3339(arg)
        .or_else(|_| DateTime::parse_from_str(arg, "%Y-%m-%dT%H:%M:%S%.f%z"));
    let at = match zoned {
        Ok(at) => at.timestamp_millis(),
        Err(_) => {
            let local = NaiveDateTime::parse_from_str(arg, "%Y-%m-%dT%H:%M:%S%.f")
                .ok()
                .and_then(|naive| Local.from_local_datetime(&naive).earliest());
            match local {
                Some(at) => at.timestamp_millis(),
                None => {
                    return Err(format!(
                        "expected a date and time like 2026-11-30T10:00:00Z, \
                         2026-11-30T10:00:00+01:00 or 2026-11-30T10:00:00.000 \
                         (local time), got {arg:?}"
                    ))
                }
            }
        }
    };
    if at < 0 {
        return Err(format!("{arg:?} is before 1970"));
    }
    Ok(at)
}

pub(crate) fn run(args: GroupArgs) -> anyhow::Result<()> {
    block_on(async move {
        let out = match args.command {
            GroupCommand::List => list(&args.connection).await?,
            GroupCommand::Describe { group } => describe(&args.connection, &group).await?,
            GroupCommand::ResetOffsets(reset) => reset_offsets(&args.connection, reset).await?,
            GroupCommand::Delete { group } => {
                let mut clients = Clients::open(&args.connection, &group).await?;
                let results = clients
                    .coordinator()
                    .delete_groups(&[&group])
                    .await
                    .map_err(|e| group_error(e, &group))?;
                for (_, result) in results {
                    result.map_err(|e| group_error(e, &group))?;
                }
                format!("Deleted group {group}\n")
            }
        };
        super::print(format_args!("{out}"))?;
        Ok(())
    })
}

/// A client error about `group`, said the way an operator thinks of it.
pub(super) fn group_error(error: ClientError, group: &str) -> anyhow::Error {
    match error.kafka_error() {
        Some(ResponseError::GroupIdNotFound) => anyhow!("group {group} does not exist"),
        Some(ResponseError::NonEmptyGroup) => {
            anyhow!("group {group} has active members; stop its consumers first")
        }
        _ => anyhow::Error::new(error),
    }
}

/// The cluster, for topic metadata and the partitions' offsets (asked of
/// their leaders), and a connection to the group's coordinator when that is
/// another broker than the bootstrap one.
pub(super) struct Clients {
    pub(super) cluster: Cluster,
    coordinator: Option<Client>,
}

impl Clients {
    pub(super) async fn open(connection: &Connection, group: &str) -> anyhow::Result<Self> {
        let mut cluster = connection.cluster().await?;
        let bootstrap = cluster.any();
        let found = bootstrap
            .find_coordinator(group)
            .await
            .map_err(|e| group_error(e, group))?;
        let addr = found.addr();
        let coordinator = if addr == bootstrap.addr() {
            None
        } else {
            let client = bootstrap.connect_to_broker(&addr).await.with_context(|| {
                format!(
                    "cannot reach the coordinator of group {group} (node {})",
                    found.node_id
                )
            })?;
            Some(client)
        };
        Ok(Self {
            cluster,
            coordinator,
        })
    }

    pub(super) fn coordinator(&mut self) -> &mut Client {
        match &mut self.coordinator {
            Some(client) => client,
            None => self.cluster.any(),
        }
    }

    async fn describe(&mut self, group: &str) -> anyhow::Result<GroupDescription> {
        self.coordinator()
            .describe_groups(&[group])
            .await
            .map_err(|e| group_error(e, group))?
            .into_iter()
            .next()
            .with_context(|| format!("no description of group {group}"))
    }
}

/// Every broker's groups, sorted, with their states.
async fn list(connection: &Connection) -> anyhow::Result<String> {
    let states = listed_groups(connection).await?;
    let mut rows = vec![vec![
        "GROUP".to_owned(),
        "STATE".to_owned(),
        "TYPE".to_owned(),
    ]];
    rows.extend(
        states
            .into_iter()
            .map(|(group, (state, group_type))| vec![group, state, group_type]),
    );
    Ok(table(&rows))
}

/// Every group of every broker, by id: (state, type).
pub(super) async fn listed_groups(
    connection: &Connection,
) -> anyhow::Result<BTreeMap<String, (String, String)>> {
    let mut bootstrap = connection.connect().await?;
    let brokers = bootstrap.metadata(Some(&[])).await?.brokers;
    // Group → (state, type).
    let mut states: BTreeMap<String, (String, String)> = BTreeMap::new();
    for broker in brokers {
        let addr = format!("{}:{}", broker.host, broker.port);
        let mut other;
        let client = if addr == bootstrap.addr() {
            &mut bootstrap
        } else {
            other = bootstrap
                .connect_to_broker(&addr)
                .await
                .with_context(|| format!("cannot list the groups of node {}", broker.node_id))?;
            &mut other
        };
        let listed = client.list_groups().await?;
        // Brokers too old to say a group's state in ListGroups say it in
        // DescribeGroups.
        let unknown: Vec<&str> = listed
            .iter()
            .filter(|g| g.state.is_none())
            .map(|g| g.group_id.as_str())
            .collect();
        let described = if unknown.is_empty() {
            Vec::new()
        } else {
            client.describe_groups(&unknown).await?
        };
        for group in &listed {
            let state = group.state.clone().or_else(|| {
                described
                    .iter()
                    .find(|d| d.group_id == group.group_id)
                    .map(|d| d.state.clone())
            });
            let group_type = group
                .group_type
                .clone()
                .unwrap_or_else(|| "classic".to_owned());
            states.insert(
                group.group_id.clone(),
                (state.unwrap_or_default(), group_type),
            );
        }
    }
    Ok(states)
}

/// The members of a consumer group: the protocol each speaks (classic
/// members stay in a group upgraded online), epoch, assignment, and the
/// target assignment while the member is still reconciling towards it.
fn consumer_members(described: &weir_client::ConsumerGroupDescription) -> String {
    let list = |partitions: &[(String, i32)]| {
        if partitions.is_empty() {
            return "-".to_owned();
        }
        partitions
            .iter()
            .map(|(topic, partition)| format!("{topic}-{partition}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut rows = vec![[
        "MEMBER-ID",
        "INSTANCE-ID",
        "PROTOCOL",
        "EPOCH",
        "ASSIGNMENT",
        "TARGET-ASSIGNMENT",
    ]
    .map(str::to_owned)
    .to_vec()];
    for member in &described.members {
        let target = if member.target_assignment == member.assignment {
            "(reached)".to_owned()
        } else {
            list(&member.target_assignment)
        };
        rows.push(vec![
            member.member_id.clone(),
            member.instance_id.clone().unwrap_or_else(|| "-".to_owned()),
            if member.classic {
                "classic"
            } else {
                "consumer"
            }
            .to_owned(),
            member.member_epoch.to_string(),
            list(&member.assignment),
            target,
        ]);
    }
    table(&rows)
}

/// One row of `describe`: a partition, or a member with none.
#[derive(Default)]
struct Row {
    committed: Option<i64>,
    /// Index into the group's members.
    member: Option<usize>,
}

/// A member as the partitions table shows it.
struct Owner {
    member_id: String,
    client_host: String,
    client_id: String,
    assigned: Vec<(String, i32)>,
}

async fn describe(connection: &Connection, group: &str) -> anyhow::Result<String> {
    let mut clients = Clients::open(connection, group).await?;
    // A consumer group (KIP-848) first; else the classic description.
    let consumer = clients
        .coordinator()
        .describe_consumer_groups(&[group])
        .await
        .map_err(|e| group_error(e, group))?
        .pop()
        .flatten();
    let classic = match &consumer {
        Some(_) => None,
        None => Some(clients.describe(group).await?),
    };
    let committed = clients
        .coordinator()
        .offset_fetch(group, None)
        .await
        .map_err(|e| group_error(e, group))?;
    if classic.as_ref().is_some_and(|d| d.is_dead()) && committed.is_empty() {
        bail!("group {group} does not exist");
    }
    let owners: Vec<Owner> = match (&consumer, &classic) {
        (Some(described), _) => described
            .members
            .iter()
            .map(|m| Owner {
                member_id: m.member_id.clone(),
                client_host: m.client_host.clone(),
                client_id: m.client_id.clone(),
                assigned: m.assignment.clone(),
            })
            .collect(),
        (None, Some(description)) => description
            .members
            .iter()
            .map(|member| Owner {
                member_id: member.member_id.clone(),
                client_host: member.client_host.clone(),
                client_id: member.client_id.clone(),
                assigned: if description.is_consumer_group() {
                    member.consumer_assignment().unwrap_or_else(|error| {
                        tracing::warn!(group, member = %member.member_id, %error, "cannot read a member's assignment");
                        Vec::new()
                    })
                } else {
                    Vec::new()
                },
            })
            .collect(),
        (None, None) => Vec::new(),
    };

    let mut rows: BTreeMap<(String, i32), Row> = BTreeMap::new();
    for offset in committed {
        rows.entry((offset.topic, offset.partition))
            .or_default()
            .committed = Some(offset.offset);
    }
    let mut unassigned: Vec<usize> = Vec::new();
    for (index, owner) in owners.iter().enumerate() {
        if owner.assigned.is_empty() {
            unassigned.push(index);
        }
        for partition in &owner.assigned {
            rows.entry(partition.clone()).or_default().member = Some(index);
        }
    }

    let member_cells = |member: Option<usize>| -> [String; 3] {
        match member.map(|i| &owners[i]) {
            Some(m) => [
                m.member_id.clone(),
                m.client_host.clone(),
                m.client_id.clone(),
            ],
            None => ["-".to_owned(), "-".to_owned(), "-".to_owned()],
        }
    };
    let mut lines = vec![[
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    .map(str::to_owned)
    .to_vec()];
    let mut lost = Vec::new();
    for ((topic, partition), row) in &rows {
        let end = match clients
            .cluster
            .list_offsets(topic, *partition, LATEST)
            .await
        {
            Ok(end) => Some(end),
            // A topic deleted since, say: no log end to show.
            Err(error) if error.kafka_error().is_some() => None,
            Err(error) => return Err(error.into()),
        };
        if let (Some(committed), Some(_)) = (row.committed, end) {
            let start = clients
                .cluster
                .list_offsets(topic, *partition, EARLIEST)
                .await?;
            if committed < start {
                lost.push(format!(
                    "{topic}-{partition}: {} records deleted by retention before the group \
                     read them (committed offset {committed}, log start {start}); it resumes \
                     as its auto.offset.reset says",
                    start - committed
                ));
            }
        }
        let show = |n: Option<i64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
        let lag = row.committed.zip(end).map(|(c, e)| e - c);
        let mut line = vec![
            topic.clone(),
            partition.to_string(),
            show(row.committed),
            show(end),
            show(lag),
        ];
        line.extend(member_cells(row.member));
        lines.push(line);
    }
    for index in unassigned {
        let mut line = vec!["-".to_owned(); 5];
        line.extend(member_cells(Some(index)));
        lines.push(line);
    }

    let members = owners.len();
    let plural = if members == 1 { "" } else { "s" };
    let mut out = String::new();
    match (&consumer, &classic) {
        (Some(described), _) => writeln!(
            out,
            "Group {group}: consumer protocol, state {}, group epoch {}, assignment epoch {}, \
             assignor {}, {members} member{plural}",
            described.state, described.group_epoch, described.assignment_epoch, described.assignor
        )?,
        (None, Some(description)) => writeln!(
            out,
            "Group {group}: state {}, {members} member{plural}",
            description.state
        )?,
        (None, None) => {}
    }
    writeln!(out)?;
    out.push_str(&table(&lines));
    if let Some(described) = consumer.as_ref().filter(|d| !d.members.is_empty()) {
        writeln!(out)?;
        out.push_str(&consumer_members(described));
    }
    if !lost.is_empty() {
        writeln!(out)?;
        for line in lost {
            writeln!(out, "Lost to retention: {line}")?;
        }
    }
    Ok(out)
}

async fn reset_offsets(connection: &Connection, args: ResetArgs) -> anyhow::Result<String> {
    let group = args.group.as_str();
    let mut clients = Clients::open(connection, group).await?;
    let description = clients.describe(group).await?;
    if description.state != EMPTY && !description.is_dead() {
        bail!(
            "offsets can only be reset while group {group} is inactive (state is {}); \
             stop its consumers first",
            description.state
        );
    }

    let partitions = chosen_partitions(&mut clients, &args).await?;

    let previous: BTreeMap<(String, i32), i64> = clients
        .coordinator()
        .offset_fetch(group, Some(&partitions))
        .await
        .map_err(|e| group_error(e, group))?
        .into_iter()
        .map(|c| ((c.topic, c.partition), c.offset))
        .collect();

    let plan = reset_plan(&mut clients, &partitions, args.reset_to()).await?;

    if !args.dry_run {
        clients
            .coordinator()
            .offset_commit_simple(group, &plan)
            .await
            .map_err(|e| group_error(e, group))?;
    }

    reset_report(group, plan, &previous, args.dry_run)
}

/// The partitions `args` names: topic → partitions, the union of every
/// `--topic`.
pub(super) async fn chosen_partitions(
    clients: &mut Clients,
    args: &ResetArgs,
) -> anyhow::Result<Vec<(String, Vec<i32>)>> {
    // Topic → partitions (None: all), the union of every --topic.
    let mut wanted: BTreeMap<&str, Option<BTreeSet<i32>>> = BTreeMap::new();
    for spec in &args.topics {
        let entry = wanted
            .entry(spec.topic.as_str())
            .or_insert_with(|| Some(BTreeSet::new()));
        match (&spec.partitions, entry.as_mut()) {
            (Some(partitions), Some(set)) => set.extend(partitions),
            _ => *entry = None,
        }
    }
    let mut partitions: Vec<(String, Vec<i32>)> = Vec::new();
    for (topic, chosen) in wanted {
        let metadata: TopicMetadata = topic_metadata(clients.cluster.any(), topic).await?;
        let chosen: Vec<i32> = match chosen {
            None => metadata.partitions.iter().map(|p| p.partition).collect(),
            Some(chosen) => {
                for &partition in &chosen {
                    check_partition(&metadata, partition)?;
                }
                chosen.into_iter().collect()
            }
        };
        partitions.push((topic.to_owned(), chosen));
    }

    Ok(partitions)
}

/// Where `to` moves each of `partitions`: (topic, partition, offset).
pub(super) async fn reset_plan(
    clients: &mut Clients,
    partitions: &[(String, Vec<i32>)],
    to: ResetTo,
) -> anyhow::Result<Vec<(String, i32, i64)>> {
    let mut plan: Vec<(String, i32, i64)> = Vec::new();
    for (topic, chosen) in partitions {
        for &partition in chosen {
            let offset = new_offset(&mut clients.cluster, topic, partition, to).await?;
            plan.push((topic.clone(), partition, offset));
        }
    }
    Ok(plan)
}

/// What `reset-offsets` prints: the new offsets next to the previous ones.
pub(super) fn reset_report(
    group: &str,
    plan: Vec<(String, i32, i64)>,
    previous: &BTreeMap<(String, i32), i64>,
    dry_run: bool,
) -> anyhow::Result<String> {
    let mut lines = vec![["TOPIC", "PARTITION", "NEW-OFFSET", "PREVIOUS-OFFSET"]
        .map(str::to_owned)
        .to_vec()];
    for (topic, partition, offset) in plan {
        let before = previous
            .get(&(topic.clone(), partition))
            .map_or_else(|| "-".to_owned(), i64::to_string);
        lines.push(vec![
            topic,
            partition.to_string(),
            offset.to_string(),
            before,
        ]);
    }
    let mut out = String::new();
    if dry_run {
        writeln!(
            out,
            "Dry run, nothing committed. New offsets of group {group} would be:"
        )?;
    } else {
        writeln!(out, "Committed new offsets of group {group}:")?;
    }
    writeln!(out)?;
    out.push_str(&table(&lines));
    Ok(out)
}

/// The offset `to` means in one partition.
async fn new_offset(
    cluster: &mut Cluster,
    topic: &str,
    partition: i32,
    to: ResetTo,
) -> anyhow::Result<i64> {
    let mut list = async |timestamp: i64| {
        cluster
            .list_offsets(topic, partition, timestamp)
            .await
            .map_err(|e| topic_error(e, topic))
    };
    Ok(match to {
        ResetTo::Earliest => list(EARLIEST).await?,
        ResetTo::Latest => list(LATEST).await?,
        ResetTo::Offset(offset) => {
            let start = list(EARLIEST).await?;
            let end = list(LATEST).await?;
            if offset < start {
                tracing::warn!(
                    "offset {offset} is before the log start of {topic}-{partition}; using {start}"
                );
                start
            } else if offset > end {
                tracing::warn!(
                    "offset {offset} is past the log end of {topic}-{partition}; using {end}"
                );
                end
            } else {
                offset
            }
        }
        // No record at or after the time: the log end, as Kafka does.
        ResetTo::Time(time) => match list(time).await? {
            offset if offset >= 0 => offset,
            _ => list(LATEST).await?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(topic: &str, partitions: Option<Vec<i32>>) -> TopicSpec {
        TopicSpec {
            topic: topic.to_owned(),
            partitions,
        }
    }

    #[test]
    fn topics_are_whole_or_some_partitions() {
        assert_eq!(parse_topic_spec("orders"), Ok(spec("orders", None)));
        assert_eq!(
            parse_topic_spec("orders:0,2"),
            Ok(spec("orders", Some(vec![0, 2])))
        );
        assert_eq!(
            parse_topic_spec("orders:3, 1,3"),
            Ok(spec("orders", Some(vec![1, 3])))
        );
        assert_eq!(
            parse_topic_spec("a.b-c_d:7"),
            Ok(spec("a.b-c_d", Some(vec![7])))
        );
        for bad in [
            "",
            ":0",
            "orders:",
            "orders:0,",
            "orders:x",
            "orders:-1",
            "t:1:2",
        ] {
            assert!(parse_topic_spec(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn datetimes_with_zones_are_exact() {
        let cases = [
            ("1970-01-01T00:00:00Z", 0),
            ("2026-11-30T10:00:00Z", 1_796_032_800_000),
            ("2026-11-30T11:00:00+01:00", 1_796_032_800_000),
            ("2026-11-30T11:00:00+0100", 1_796_032_800_000),
            ("2026-11-30T05:30:00-04:30", 1_796_032_800_000),
            ("2026-11-30T10:00:00.5Z", 1_796_032_800_500),
            ("2026-11-30T10:00:00.123456789Z", 1_796_032_800_123),
            ("2024-02-29T00:00:00Z", 1_709_164_800_000),
        ];
        for (text, millis) in cases {
            assert_eq!(parse_datetime(text), Ok(millis), "{text}");
        }
    }

    #[test]
    fn kafka_datetimes_without_a_zone_are_local_time() {
        use chrono::{Local, NaiveDate, TimeZone};
        let naive = NaiveDate::from_ymd_opt(2026, 11, 30)
            .unwrap()
            .and_hms_opt(10, 0, 0)
            .unwrap();
        let expected = Local
            .from_local_datetime(&naive)
            .earliest()
            .unwrap()
            .timestamp_millis();
        assert_eq!(parse_datetime("2026-11-30T10:00:00.000"), Ok(expected));
        assert_eq!(parse_datetime("2026-11-30T10:00:00"), Ok(expected));
    }

    #[test]
    fn impossible_or_malformed_datetimes_are_refused() {
        for bad in [
            "",
            "2026-11-30",
            "2026-11-30T10:00",
            "2026-11-30T10:00:00Zjunk",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "1969-12-31T23:59:59Z",
            "yesterday",
        ] {
            assert!(parse_datetime(bad).is_err(), "{bad:?}");
        }
    }
}
