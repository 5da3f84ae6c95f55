//! The promises the simulation holds the cluster to, checked after every
//! step, each by name.

use std::collections::BTreeMap;

use weir_log::batch::BatchHeader;

use super::world::{AckedBatch, Status, World, GROUP, NODES, OFFSETS, TOPIC, TOPICS};
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
/// is written (acks=all), where it was written.
fn acknowledged_records_are_kept(world: &World) -> Result<(), String> {
    let Some(leader) = controller_leader(world, TOPIC) else {
        return Ok(());
    };
    let partition = &world.node(leader).partitions[TOPIC];
    for acked in &world.acked_batches {
        if !holds(partition, acked) {
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

/// Once the cluster has healed: every replica holds the same log, with
/// every acknowledged batch, and the coordinator serves the last
/// acknowledged commit below its high watermark.
pub(super) fn healed_cluster_agrees(world: &World) -> Result<(), String> {
    for topic in TOPICS {
        let logs: Vec<Vec<(u64, u32)>> = NODES
            .iter()
            .map(|id| batches(&world.node(*id).partitions[topic]))
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
        if let Some(acked) = world.acked_batches.iter().find(|a| !holds(partition, a)) {
            return Err(format!(
                "acknowledged_records_are_kept: node {id} lacks acknowledged offsets {}..={} after healing",
                acked.base_offset, acked.last_offset
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

/// Every batch of the log, by base offset and CRC.
fn batches(partition: &Partition) -> Vec<(u64, u32)> {
    let mut all = Vec::new();
    let mut offset = partition.log().log_start_offset();
    while let Some((base, last, crc)) = batch_at(partition, offset) {
        all.push((base, crc));
        offset = last + 1;
    }
    all
}
