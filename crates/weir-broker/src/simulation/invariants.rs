//! The promises the simulation holds the cluster to, checked after every
//! step, each by name.

use std::collections::BTreeMap;

use weir_log::batch::BatchHeader;

use super::world::{topic_id, AckedBatch, Status, World, GROUP, NODES, OFFSETS, TOPIC, TOPICS};
use crate::partition::Partition;

/// What the checks remember from one step to the next.
#[derive(Default)]
pub(super) struct Observed {
    /// The high watermark each leader (node, process, topic) last
    /// published under each leader epoch.
    high_watermarks: BTreeMap<(i32, u64, &'static str, i32), u64>,
    /// The node seen leading each partition at each leader epoch.
    leaders: BTreeMap<(&'static str, i32), i32>,
}

impl Observed {
    /// Every invariant that must hold between any two steps.
    pub(super) fn check(&mut self, world: &World) -> Result<(), String> {
        self.high_watermark_never_decreases(world)?;
        self.one_leader_per_epoch(world)?;
        acknowledged_records_are_kept(world)?;
        acknowledged_commits_are_kept(world)?;
        the_tiers_leave_no_hole(world)?;
        Ok(())
    }

    /// While a leader leads under one epoch, the high watermark it
    /// publishes only moves forward: consumers never see a record they
    /// read become unreadable, and acks=all produces are answered in
    /// order. (A new leader may start from a lower one, learnt as a
    /// follower, as in Kafka; a follower takes whatever its leader says.)
    fn high_watermark_never_decreases(&mut self, world: &World) -> Result<(), String> {
        for node in world.nodes.iter().filter(|n| n.status != Status::Down) {
            for topic in TOPICS.into_iter().filter(|t| node.leads(t)) {
                let partition = &node.partitions[topic];
                let now = partition.high_watermark();
                let epoch = partition.replica_state().leader_epoch;
                let key = (node.id, node.incarnation, topic, epoch);
                let before = self.high_watermarks.insert(key, now).unwrap_or(0);
                if now < before {
                    return Err(format!(
                        "high_watermark_never_decreases: node {} {topic} went from {before} to {now} at epoch {epoch}",
                        node.id
                    ));
                }
            }
        }
        Ok(())
    }

    /// No two nodes ever lead one partition under the same leader epoch.
    fn one_leader_per_epoch(&mut self, world: &World) -> Result<(), String> {
        for node in world.nodes.iter().filter(|n| n.status != Status::Down) {
            for topic in TOPICS.iter().filter(|t| node.leads(t)) {
                let epoch = node.partitions[topic].replica_state().leader_epoch;
                let seen = *self.leaders.entry((topic, epoch)).or_insert(node.id);
                if seen != node.id {
                    return Err(format!(
                        "one_leader_per_epoch: nodes {seen} and {} both led {topic} at epoch {epoch}",
                        node.id
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The leader the controller names holds every batch a producer was told
/// is written (acks=all), where it was written, or a finished copy in the
/// remote tier does.
fn acknowledged_records_are_kept(world: &World) -> Result<(), String> {
    let Some(leader) = controller_leader(world, TOPIC) else {
        return Ok(());
    };
    let partition = &world.node(leader).partitions[TOPIC];
    for acked in &world.acked_batches {
        if !holds(partition, acked) && !copied(world, acked) {
            return Err(format!(
                "acknowledged_records_are_kept: leader {leader} lacks acknowledged offsets {}..={} (its log ends at {})",
                acked.base_offset,
                acked.last_offset,
                partition.log().log_end_offset()
            ));
        }
    }
    Ok(())
}

/// The coordinator the controller names serves at least the last offset
/// commit it acknowledged, once it has taken over the group's partition.
fn acknowledged_commits_are_kept(world: &World) -> Result<(), String> {
    let Some(acked) = world.acked_commit else {
        return Ok(());
    };
    let Some(coordinator) = controller_leader(world, OFFSETS) else {
        return Ok(());
    };
    let node = world.node(coordinator);
    if !node.leads(OFFSETS) {
        return Ok(());
    }
    let committed = node.offsets.committed(GROUP, TOPIC, 0).map(|c| c.offset);
    if committed.is_none_or(|c| c < acked) {
        return Err(format!(
            "acknowledged_commits_are_kept: coordinator {coordinator} serves {committed:?}, but commit {acked} was acknowledged"
        ));
    }
    Ok(())
}

/// Below the local log of the leader the controller names, the finished
/// copies in the remote tier hold every offset from the first one copied:
/// local retention removed nothing not copied, and an interrupted copy left
/// no gap.
fn the_tiers_leave_no_hole(world: &World) -> Result<(), String> {
    let Some(leader) = controller_leader(world, TOPIC) else {
        return Ok(());
    };
    let local_start = world.node(leader).partitions[TOPIC]
        .log()
        .log_start_offset();
    let mut covered = 0;
    for segment in finished_copies(world) {
        if segment.base_offset > covered && covered < local_start {
            break;
        }
        covered = covered.max(segment.end_offset + 1);
    }
    if covered < local_start {
        return Err(format!(
            "the_tiers_leave_no_hole: leader {leader}'s local log starts at {local_start}, the remote tier holds offsets 0..{covered} only"
        ));
    }
    Ok(())
}

/// The finished copies of the producers' topic, by base offset.
fn finished_copies(world: &World) -> Vec<&weir_meta::RemoteSegment> {
    world
        .controller
        .remote_log(topic_id(TOPIC), 0)
        .map(|remote| remote.finished().collect())
        .unwrap_or_default()
}

/// Whether a finished copy holds `acked` at its offsets.
fn copied(world: &World, acked: &AckedBatch) -> bool {
    finished_copies(world).iter().any(|segment| {
        world.remote_objects[&segment.id].batches.contains(&(
            acked.base_offset,
            acked.last_offset,
            acked.crc,
        ))
    })
}

/// Once the cluster has healed: every replica holds the same log from the
/// highest local log start on, every acknowledged batch is there or in a
/// finished copy, the copies hold what the replicas hold at their offsets,
/// every replica remembers the same producers, and the coordinator serves
/// the last acknowledged commit below its high watermark.
pub(super) fn healed_cluster_agrees(world: &World) -> Result<(), String> {
    for topic in TOPICS {
        let from = NODES
            .iter()
            .map(|id| world.node(*id).partitions[topic].log().log_start_offset())
            .max()
            .unwrap_or(0);
        let logs: Vec<Vec<(u64, u32)>> = NODES
            .iter()
            .map(|id| batches(&world.node(*id).partitions[topic], from))
            .collect();
        if let Some(other) = logs.iter().position(|log| *log != logs[0]) {
            return Err(format!(
                "replicas_agree: {topic} on node {} differs from node {}",
                NODES[other], NODES[0]
            ));
        }
    }
    for id in NODES {
        let partition = &world.node(id).partitions[TOPIC];
        if let Some(acked) = world
            .acked_batches
            .iter()
            .find(|a| !holds(partition, a) && !copied(world, a))
        {
            return Err(format!(
                "acknowledged_records_are_kept: node {id} lacks acknowledged offsets {}..={} after healing",
                acked.base_offset, acked.last_offset
            ));
        }
        for segment in finished_copies(world) {
            for &(base, last, crc) in &world.remote_objects[&segment.id].batches {
                if base < partition.log().log_start_offset() {
                    continue;
                }
                if batch_at(partition, base) != Some((base, last, crc)) {
                    return Err(format!(
                        "remote_copies_match_the_replicas: copy {}..={} holds batch {base}..={last}, node {id} holds {:?} there",
                        segment.base_offset,
                        segment.end_offset,
                        batch_at(partition, base)
                    ));
                }
            }
        }
    }
    let producers = |id: i32| -> Vec<(i64, i16, i32)> {
        world.node(id).partitions[TOPIC]
            .active_producers()
            .iter()
            .map(|(p, _)| (p.producer_id, p.epoch, p.last_sequence))
            .collect()
    };
    for id in NODES {
        if producers(id) != producers(NODES[0]) {
            return Err(format!(
                "replicas_agree_on_producers: node {id} remembers {} producers, node {} {}",
                producers(id).len(),
                NODES[0],
                producers(NODES[0]).len()
            ));
        }
    }
    if let (Some(acked), Some(coordinator)) =
        (world.acked_commit, controller_leader(world, OFFSETS))
    {
        let node = world.node(coordinator);
        let high_watermark = node.partitions[OFFSETS].high_watermark();
        let served = node
            .offsets
            .served_offsets(GROUP, high_watermark)
            .get(&(TOPIC.to_owned(), 0))
            .map(|c| c.offset);
        if served.is_none_or(|c| c < acked) {
            return Err(format!(
                "acknowledged_commits_are_kept: coordinator {coordinator} serves {served:?} after healing, but commit {acked} was acknowledged"
            ));
        }
    }
    Ok(())
}

/// The partition's leader as the controller has it, if that node is
/// running (a paused one keeps its memory).
fn controller_leader(world: &World, topic: &str) -> Option<i32> {
    let leader = world.controller.topic(topic)?.partition(0)?.leader;
    (leader > 0 && world.node(leader).status != Status::Down).then_some(leader)
}

/// Whether the log holds `acked` at its offsets.
fn holds(partition: &Partition, acked: &AckedBatch) -> bool {
    batch_at(partition, acked.base_offset).is_some_and(|(base, last, crc)| {
        base == acked.base_offset && last == acked.last_offset && crc == acked.crc
    })
}

/// The base offset, last offset and CRC of the batch holding `offset`.
fn batch_at(partition: &Partition, offset: u64) -> Option<(u64, u64, u32)> {
    let end = partition.log().log_end_offset();
    if offset >= end {
        return None;
    }
    let slice = partition.log().read(offset, 1, end).ok()?;
    let bytes = slice.to_bytes().ok()?;
    let header = BatchHeader::parse(&bytes, 0).ok()?;
    Some((
        header.base_offset() as u64,
        header.last_offset() as u64,
        header.crc(),
    ))
}

/// Every batch of the log from `from` on, by base offset and CRC.
fn batches(partition: &Partition, from: u64) -> Vec<(u64, u32)> {
    let mut all = Vec::new();
    let mut offset = from;
    while let Some((base, last, crc)) = batch_at(partition, offset) {
        all.push((base, crc));
        offset = last + 1;
    }
    all
}
