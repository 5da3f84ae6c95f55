//! Consumer lag from the broker's own view: committed offsets against the
//! high watermark (the last stable offset for groups that read committed
//! data only), and the age of the oldest record not yet consumed.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use super::remote_ends::{self, RemoteEnd, Wanted};
use crate::broker::Broker;
use crate::share::leader::SharePartitionView;
use weir_coord::classic::GroupState;

#[derive(Debug, Clone, Serialize)]
pub struct GroupLag {
    pub group: String,
    /// Kafka's name of the group's state ("Stable", "Empty", ...).
    pub state: &'static str,
    /// `classic`, `consumer` for a group of the consumer protocol
    /// (KIP-848), or `share` (KIP-932).
    #[serde(rename = "type")]
    pub group_type: &'static str,
    pub members: usize,
    /// Each member of a classic or consumer group: who it is and the
    /// partitions it is assigned.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub member_assignments: Vec<MemberAssignment>,
    /// Its consumers read committed data only (isolation.level
    /// read_committed): lag counts to the last stable offset.
    pub read_committed: bool,
    /// Sum of the partitions' lag.
    pub lag: u64,
    pub partitions: Vec<PartitionLag>,
    /// For a share group: its share-partitions this broker leads.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub share_partitions: Vec<SharePartitionView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemberAssignment {
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    /// `topic-partition`, sorted.
    pub partitions: Vec<String>,
}

/// The members of `group` with their assignments, as its coordinator
/// holds them.
fn member_assignments(broker: &Broker, group: &str) -> Vec<MemberAssignment> {
    if let Some(described) = broker.consumer_groups().describe(group) {
        let image = broker.image();
        return described
            .members
            .into_iter()
            .map(|m| MemberAssignment {
                partitions: m
                    .assignment
                    .iter()
                    .flat_map(|(id, partitions)| {
                        let topic = image
                            .topic_by_id(*id)
                            .map_or_else(|| id.to_string(), |t| t.name.clone());
                        partitions.iter().map(move |p| format!("{topic}-{p}"))
                    })
                    .collect(),
                member_id: m.member_id,
                client_id: m.client_id,
                client_host: m.client_host,
            })
            .collect();
    }
    let Some(summary) = broker.groups().describe(group) else {
        return Vec::new();
    };
    summary
        .members
        .into_iter()
        .map(|m| {
            // Only the consumer protocol's assignment is readable; a
            // Connect worker's or another's stays opaque.
            let mut partitions: Vec<String> =
                weir_client::decode_consumer_assignment(&m.assignment)
                    .map(|assigned| {
                        assigned
                            .into_iter()
                            .map(|(topic, p)| format!("{topic}-{p}"))
                            .collect()
                    })
                    .unwrap_or_default();
            partitions.sort();
            MemberAssignment {
                member_id: m.member_id,
                client_id: m.client_id,
                client_host: m.client_host,
                partitions,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
    /// The end the group's consumers can read to: the high watermark, or
    /// the last stable offset for a read_committed group.
    pub log_end_offset: u64,
    /// Records between the committed offset and the log end.
    pub lag: u64,
    /// Age of the oldest unconsumed record, from its timestamp; 0 without lag.
    pub lag_seconds: f64,
    /// Records the group never read because retention (or DeleteRecords)
    /// removed them first: how far the committed offset is below the log
    /// start. The group resumes at the log start (`auto.offset.reset`).
    pub lost_to_retention: u64,
}

/// Lag of every group this broker coordinates, or of one group, over
/// every partition they committed: those led elsewhere are asked of their
/// leaders. Off the runtime's workers where it reads logs.
pub async fn coordinated_groups(broker: Arc<Broker>, only: Option<String>) -> Vec<GroupLag> {
    let for_wanted = broker.clone();
    let only_wanted = only.clone();
    let wanted =
        tokio::task::spawn_blocking(move || not_hosted(&for_wanted, only_wanted.as_deref()))
            .await
            .unwrap_or_default();
    let remote = if wanted.is_empty() {
        HashMap::new()
    } else {
        remote_ends::ask_leaders(&broker, wanted).await
    };
    tokio::task::spawn_blocking(move || groups(&broker, only.as_deref(), &remote))
        .await
        .unwrap_or_default()
}

/// The names of the groups to report: every group with members or
/// committed offsets, or `only`.
fn group_names(broker: &Broker, only: Option<&str>) -> Vec<String> {
    let store = broker.offsets();
    match only {
        Some(group) => vec![group.to_owned()],
        None => {
            let mut names = store.groups();
            names.extend(broker.groups().list().into_iter().map(|(name, _, _)| name));
            names.extend(
                broker
                    .consumer_groups()
                    .list()
                    .into_iter()
                    .map(|g| g.group_id),
            );
            names.sort();
            names.dedup();
            names
        }
    }
}

/// The committed partitions of the groups this broker coordinates that
/// it holds no replica of.
fn not_hosted(broker: &Broker, only: Option<&str>) -> Vec<Wanted> {
    let store = broker.offsets();
    let mut wanted: Vec<Wanted> = group_names(broker, only)
        .into_iter()
        .filter(|group| store.coordinates(group))
        .flat_map(|group| store.group_offsets(&group))
        .filter(|((topic, partition), _)| broker.partition(topic, *partition).is_none())
        .map(|((topic, partition), offset)| Wanted {
            topic,
            partition,
            committed: offset.offset.max(0),
        })
        .collect();
    wanted.sort();
    wanted.dedup();
    wanted
}

/// Where a group's partition ends, from this broker's replica or from
/// its leader.
struct Ends {
    log_start: u64,
    /// The high watermark, or the last stable offset for a read_committed
    /// group.
    end: u64,
    oldest_unconsumed: Option<i64>,
}

/// Lag of every group with members or committed offsets, or of one group,
/// with `remote` the ends of partitions not hosted here.
fn groups(
    broker: &Broker,
    only: Option<&str>,
    remote: &HashMap<(String, i32, i64), RemoteEnd>,
) -> Vec<GroupLag> {
    let store = broker.offsets();
    let now = broker.now_ms();
    group_names(broker, only)
        .into_iter()
        // Only the coordinator's view: another broker may still hold a
        // group it coordinated before leadership moved, frozen.
        .filter(|group| store.coordinates(group))
        .filter_map(|group| {
            let committed = store.group_offsets(&group);
            let consumer_group = broker.consumer_groups().describe(&group);
            let (state, members, group_type) = match (&consumer_group, broker.groups().describe(&group)) {
                (Some(described), _) => (described.state.as_str(), described.members.len(), "consumer"),
                (None, Some(summary)) => (summary.state.as_str(), summary.members.len(), "classic"),
                (None, None) if committed.is_empty() => return None,
                (None, None) => (GroupState::Empty.as_str(), 0, "classic"),
            };
            let read_committed = broker.groups().reads_committed(&group);
            let partitions: Vec<PartitionLag> = committed
                .into_iter()
                .filter_map(|((topic, partition), offset)| {
                    let committed = offset.offset.max(0) as u64;
                    let Ends { log_start, end, oldest_unconsumed } = match broker.partition(&topic, partition) {
                        Some(log) => {
                            let log_start = log.log().log_start_offset();
                            let end = if read_committed {
                                log.last_stable_offset()
                            } else {
                                log.high_watermark()
                            };
                            let oldest_unconsumed = if end > committed {
                                log.timestamp_at(committed.max(log_start))
                                    .unwrap_or_else(|error| {
                                        tracing::warn!(%topic, partition, %error, "cannot read the oldest unconsumed record");
                                        None
                                    })
                            } else {
                                None
                            };
                            Ends { log_start, end, oldest_unconsumed }
                        }
                        None => {
                            let ends = remote.get(&(topic.clone(), partition, committed as i64))?;
                            Ends {
                                log_start: ends.log_start,
                                end: if read_committed { ends.last_stable } else { ends.high_watermark },
                                oldest_unconsumed: ends.first_unconsumed_timestamp,
                            }
                        }
                    };
                    let lag = end.saturating_sub(committed);
                    let lost_to_retention = log_start.saturating_sub(committed);
                    let oldest = oldest_unconsumed.filter(|_| lag > 0);
                    Some(PartitionLag {
                        topic,
                        partition,
                        committed_offset: offset.offset,
                        log_end_offset: end,
                        lag,
                        lag_seconds: oldest
                            .filter(|ts| *ts >= 0)
                            .map_or(0.0, |ts| (now - ts).max(0) as f64 / 1000.0),
                        lost_to_retention,
                    })
                })
                .collect();
            Some(GroupLag {
                lag: partitions.iter().map(|p| p.lag).sum(),
                member_assignments: member_assignments(broker, &group),
                group,
                state,
                group_type,
                members,
                read_committed,
                partitions,
                share_partitions: Vec::new(),
            })
        })
        .chain(share_groups(broker, only))
        .collect()
}

/// The share groups this broker coordinates or leads share-partitions
/// of (or only `only`): their lag is the records from each
/// share-partition's start offset on not yet acknowledged or archived.
fn share_groups(broker: &Broker, only: Option<&str>) -> Vec<GroupLag> {
    let views = broker.share_partitions().views(broker);
    let mut names: Vec<String> = broker
        .share_groups()
        .list()
        .into_iter()
        .map(|(group, _)| group)
        .chain(views.iter().map(|v| v.group.clone()))
        .filter(|group| only.is_none_or(|o| o == group))
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|group| {
            let (state, members) = match broker.share_groups().describe(&group) {
                Some(d) if d.state.members.is_empty() => ("Empty", 0),
                Some(d) => ("Stable", d.state.members.len()),
                // Coordinated by another broker.
                None => ("Unknown", 0),
            };
            let share_partitions: Vec<SharePartitionView> =
                views.iter().filter(|v| v.group == group).cloned().collect();
            let partitions: Vec<PartitionLag> = share_partitions
                .iter()
                .map(|v| PartitionLag {
                    topic: v.topic.clone(),
                    partition: v.partition,
                    committed_offset: v.start_offset,
                    log_end_offset: v.log_end_offset.max(0) as u64,
                    lag: v.in_flight,
                    lag_seconds: v.oldest_available_seconds,
                    lost_to_retention: 0,
                })
                .collect();
            GroupLag {
                lag: partitions.iter().map(|p| p.lag).sum(),
                member_assignments: Vec::new(),
                group,
                state,
                group_type: "share",
                members,
                read_committed: false,
                partitions,
                share_partitions,
            }
        })
        .collect()
}
