//! Remote log segment metadata for tiered storage (KIP-405; Kafka's
//! `RemoteLogSegmentMetadata`, kept by its `RemoteLogMetadataManager`):
//! which segments of a partition a leader copied to the object store, where
//! each one is in its life, and the partition's log start offset there.
//!
//! Kafka keeps this metadata in the internal topic `__remote_log_metadata`;
//! Weir keeps it in the metadata image, so that every broker reads the same
//! segments after a leader change and every change is checked against the
//! partition's current leader and leader epoch, as `AlterPartition` is.
//!
//! A segment's life, one command per step (see [`crate::Command`]):
//!
//! 1. `RemoteSegmentCopyStarted`: the leader is uploading it. It is not read,
//!    and if the leader dies it stays an orphan that a later leader deletes
//!    once its `event_ms` is old enough.
//! 2. `RemoteSegmentCopyFinished`: the upload is complete; fetches below the
//!    local log start read it ([`RemoteLog::segment_for`]).
//! 3. `RemoteSegmentsDeleteStarted`: retention or DeleteRecords gave it up;
//!    it is no longer read while its objects are removed.
//! 4. `RemoteSegmentsDeleteFinished`: the objects are gone and so is the
//!    entry (Kafka's DELETE_SEGMENT_FINISHED is not a state here).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Kafka's `RemoteLogSegmentState`, without DELETE_SEGMENT_FINISHED: a
/// finished deletion removes the entry.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteSegmentState {
    /// The leader is uploading the segment; readers ignore it.
    CopyStarted,
    /// The segment is complete in the store and served to readers.
    CopyFinished,
    /// The segment's objects are being removed; readers ignore it.
    DeleteStarted,
}

/// One segment copied (or being copied) to the object store.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RemoteSegment {
    /// Unique per upload: it names the segment's objects in the store, so a
    /// segment copied twice (by two leaders) has two ids.
    pub id: Uuid,
    /// The first offset in the segment.
    pub base_offset: u64,
    /// The last offset in the segment, inclusive.
    pub end_offset: u64,
    /// The largest record timestamp in the segment, for time-based
    /// retention and ListOffsets by timestamp.
    pub max_timestamp_ms: i64,
    /// The size of the segment's `.log` data, for size-based retention.
    pub size_bytes: u64,
    /// (leader epoch, first offset of that epoch within the segment),
    /// ascending: what a follower or consumer truncating by leader epoch
    /// needs once the segment has left the local log.
    pub leader_epochs: Vec<(i32, u64)>,
    /// The leader that uploads it.
    pub broker: i32,
    /// That leader's epoch when the copy started: only a copy by the
    /// current leader in its current epoch is accepted.
    pub leader_epoch: i32,
    /// When the copy started (wall clock of the proposer), so that a copy
    /// its leader never finished can be aged out as an orphan.
    pub event_ms: i64,
    /// Where the segment is in its life.
    pub state: RemoteSegmentState,
}

impl RemoteSegment {
    /// True if `offset` is in the segment.
    fn contains(&self, offset: u64) -> bool {
        self.base_offset <= offset && offset <= self.end_offset
    }

    /// Why the segment cannot be what a copy starts from, if it cannot: a
    /// copy starts in `CopyStarted`, with a real id, offsets in order and
    /// leader epochs that cover the segment in order (Kafka refuses a
    /// segment without leader epochs).
    pub(crate) fn check_new(&self) -> Result<(), String> {
        if self.state != RemoteSegmentState::CopyStarted {
            return Err(format!(
                "segment {} must start in state CopyStarted, not {:?}",
                self.id, self.state
            ));
        }
        if self.id.is_nil() {
            return Err("the segment id must not be the nil UUID".to_owned());
        }
        if self.base_offset > self.end_offset {
            return Err(format!(
                "segment {} starts at {} after its end offset {}",
                self.id, self.base_offset, self.end_offset
            ));
        }
        if self.leader_epochs.is_empty() {
            return Err(format!("segment {} has no leader epochs", self.id));
        }
        let in_order = self
            .leader_epochs
            .windows(2)
            .all(|pair| pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1);
        let inside = self
            .leader_epochs
            .iter()
            .all(|(_, offset)| self.contains(*offset));
        if !in_order || !inside {
            return Err(format!(
                "segment {}: the leader epochs {:?} must ascend, by epoch and by offset, \
                 within [{}, {}]",
                self.id, self.leader_epochs, self.base_offset, self.end_offset
            ));
        }
        Ok(())
    }
}

/// The segments of a partition by (base offset, id); keyed by both since
/// two leaders may have copied overlapping segments.
type Segments = BTreeMap<(u64, Uuid), RemoteSegment>;

/// A partition's segments in remote storage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteLog {
    /// Raised by retention and DeleteRecords: offsets below it are gone even
    /// where a segment still holds them. 0 at first.
    pub log_start_offset: u64,
    /// JSON object keys must be strings: serialized as a list, in key order.
    #[serde(with = "segments_as_list")]
    segments: Segments,
}

impl RemoteLog {
    /// A log without segments, starting at offset 0.
    pub(crate) const fn new() -> Self {
        Self {
            log_start_offset: 0,
            segments: BTreeMap::new(),
        }
    }

    /// Every segment, whatever its state, by base offset (then id).
    pub fn segments(&self) -> impl Iterator<Item = &RemoteSegment> {
        self.segments.values()
    }

    /// The segments readers may use (`CopyFinished`), by base offset.
    pub fn finished(&self) -> impl Iterator<Item = &RemoteSegment> {
        self.segments
            .values()
            .filter(|s| s.state == RemoteSegmentState::CopyFinished)
    }

    /// The segment with this id, whatever its state.
    pub fn segment(&self, id: Uuid) -> Option<&RemoteSegment> {
        self.segments.values().find(|s| s.id == id)
    }

    /// A finished segment holding `offset`, if `offset` is not below the log
    /// start. After a leader change two leaders' segments may overlap; any
    /// that holds the offset has the same records, and the one reaching
    /// furthest is taken so that a reader moves on with fewer segments.
    pub fn segment_for(&self, offset: u64) -> Option<&RemoteSegment> {
        if offset < self.log_start_offset {
            return None;
        }
        self.segments
            .range(..=(offset, Uuid::max()))
            .map(|(_, segment)| segment)
            .filter(|s| s.state == RemoteSegmentState::CopyFinished && s.contains(offset))
            .max_by_key(|s| s.end_offset)
    }

    /// The first offset readable from remote storage: the log start offset,
    /// or the lowest finished segment's base offset when above it; `None`
    /// without finished segments.
    pub fn start_offset(&self) -> Option<u64> {
        let lowest_base = self.finished().next()?.base_offset;
        Some(lowest_base.max(self.log_start_offset))
    }

    /// The last offset a finished segment holds: the leader copies from the
    /// one after it.
    pub fn highest_copied_offset(&self) -> Option<u64> {
        self.finished().map(|s| s.end_offset).max()
    }

    /// The bytes of the finished segments, which size-based retention
    /// counts.
    pub fn size_bytes(&self) -> u64 {
        self.finished().map(|s| s.size_bytes).sum()
    }

    /// True without segments in any state.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// True if the log holds nothing worth keeping: no segments, and no log
    /// start offset to remember.
    pub(crate) fn is_forgettable(&self) -> bool {
        self.is_empty() && self.log_start_offset == 0
    }

    /// `RemoteSegmentCopyStarted`, checked already.
    pub(crate) fn copy_started(&mut self, segment: RemoteSegment) {
        self.segments
            .insert((segment.base_offset, segment.id), segment);
    }

    /// Moves the segments of `ids` (those present) to `state`.
    pub(crate) fn set_state(&mut self, ids: &[Uuid], state: RemoteSegmentState) {
        let ids: BTreeSet<&Uuid> = ids.iter().collect();
        self.segments
            .values_mut()
            .filter(|s| ids.contains(&s.id))
            .for_each(|s| s.state = state);
    }

    /// Raises the log start offset to `offset`; never lowers it.
    pub(crate) fn raise_log_start(&mut self, offset: u64) {
        self.log_start_offset = self.log_start_offset.max(offset);
    }

    /// `RemoteSegmentsDeleteFinished`, checked already: the segments of
    /// `ids` go; unknown ids are skipped.
    pub(crate) fn remove(&mut self, ids: &[Uuid]) {
        let ids: BTreeSet<&Uuid> = ids.iter().collect();
        self.segments.retain(|_, s| !ids.contains(&s.id));
    }
}

/// The remote logs of the image, by (topic id, partition); shared between
/// image clones until one of them changes a log.
pub(crate) type RemoteLogs = BTreeMap<(Uuid, i32), Arc<RemoteLog>>;

/// Serializes [`RemoteLogs`] as a list of ((topic id, partition), log)
/// pairs: JSON object keys must be strings.
pub(crate) mod as_pairs {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        logs: &RemoteLogs,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(logs.iter().map(|(key, log)| (key, log.as_ref())))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<RemoteLogs, D::Error> {
        let pairs: Vec<((Uuid, i32), RemoteLog)> = Deserialize::deserialize(deserializer)?;
        Ok(pairs
            .into_iter()
            .map(|(key, log)| (key, Arc::new(log)))
            .collect())
    }
}

/// Serializes a log's segments as a list in key order; reading refuses an
/// id twice, which no sequence of commands produces.
mod segments_as_list {
    use super::*;
    use serde::de::Error as _;
    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        segments: &Segments,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(segments.values())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Segments, D::Error> {
        let list: Vec<RemoteSegment> = Deserialize::deserialize(deserializer)?;
        let mut ids = BTreeSet::new();
        let mut segments = Segments::new();
        for segment in list {
            if !ids.insert(segment.id) {
                return Err(D::Error::custom(format!(
                    "remote segment {} is listed twice",
                    segment.id
                )));
            }
            segments.insert((segment.base_offset, segment.id), segment);
        }
        Ok(segments)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::command::{Applied, Command};
    use crate::error::MetaError;
    use crate::image::MetadataImage;
    use crate::model::BrokerInfo;

    const TOPIC: Uuid = Uuid::from_u128(7);

    fn register(id: i32) -> Command {
        Command::RegisterBroker(BrokerInfo {
            id,
            host: format!("host{id}"),
            port: 9092,
            rack: None,
            incarnation: Uuid::from_u128(1),
            previous_incarnation: None,
            listeners: Vec::new(),
        })
    }

    /// Brokers 1 and 2, and topic "orders" (id 7) with partition 0 led by 1
    /// and partition 1 led by 2, both at leader epoch 0.
    fn cluster() -> MetadataImage {
        let mut image = MetadataImage::new();
        for cmd in [
            register(1),
            register(2),
            Command::CreateTopic {
                name: "orders".into(),
                id: TOPIC,
                partitions: 2,
                replicas: vec![vec![1, 2], vec![2, 1]],
                configs: BTreeMap::new(),
                internal: false,
            },
        ] {
            image.apply(&cmd).unwrap();
        }
        image
    }

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(0x100 + n)
    }

    /// Segment `n` of [base, end], started by broker 1 at epoch 0, in epoch 0.
    fn segment(n: u128, base: u64, end: u64) -> RemoteSegment {
        RemoteSegment {
            id: id(n),
            base_offset: base,
            end_offset: end,
            max_timestamp_ms: 1_000 + end as i64,
            size_bytes: 100,
            leader_epochs: vec![(0, base)],
            broker: 1,
            leader_epoch: 0,
            event_ms: 5_000,
            state: RemoteSegmentState::CopyStarted,
        }
    }

    fn started(segment: RemoteSegment) -> Command {
        Command::RemoteSegmentCopyStarted {
            topic_id: TOPIC,
            partition: 0,
            segment,
        }
    }

    fn finished(n: u128) -> Command {
        Command::RemoteSegmentCopyFinished {
            topic_id: TOPIC,
            partition: 0,
            id: id(n),
            broker: 1,
            leader_epoch: 0,
        }
    }

    fn delete_started(ns: &[u128], log_start_offset: Option<u64>) -> Command {
        Command::RemoteSegmentsDeleteStarted {
            topic_id: TOPIC,
            partition: 0,
            ids: ns.iter().map(|n| id(*n)).collect(),
            log_start_offset,
            broker: 1,
            leader_epoch: 0,
        }
    }

    fn delete_finished(ns: &[u128]) -> Command {
        Command::RemoteSegmentsDeleteFinished {
            topic_id: TOPIC,
            partition: 0,
            ids: ns.iter().map(|n| id(*n)).collect(),
        }
    }

    /// Applies `cmds` in order, each of which must succeed.
    fn apply_all(image: &mut MetadataImage, cmds: &[Command]) {
        for cmd in cmds {
            assert_eq!(image.apply(cmd).unwrap(), Applied::Done, "{cmd:?}");
        }
    }

    /// Applies `cmd`, which must be refused, and checks that the image did
    /// not change.
    fn refused(image: &mut MetadataImage, cmd: &Command) -> MetaError {
        let before = image.clone();
        let error = image.apply(cmd).unwrap_err();
        assert_eq!(*image, before, "a refused {cmd:?} changed the image");
        error
    }

    fn log(image: &MetadataImage) -> &RemoteLog {
        image
            .remote_log(TOPIC, 0)
            .expect("partition 0 has a remote log")
    }

    fn state(image: &MetadataImage, n: u128) -> Option<RemoteSegmentState> {
        image
            .remote_log(TOPIC, 0)
            .and_then(|log| log.segment(id(n)))
            .map(|s| s.state)
    }

    #[test]
    fn a_segment_is_read_only_between_copy_finished_and_delete_started() {
        let mut image = cluster();
        apply_all(&mut image, &[started(segment(1, 0, 99))]);
        assert_eq!(state(&image, 1), Some(RemoteSegmentState::CopyStarted));
        assert_eq!(log(&image).segment_for(50), None);
        assert_eq!(log(&image).start_offset(), None);
        assert_eq!(log(&image).highest_copied_offset(), None);
        assert_eq!(log(&image).size_bytes(), 0);
        assert_eq!(log(&image).segments().count(), 1);

        apply_all(&mut image, &[finished(1)]);
        assert_eq!(state(&image, 1), Some(RemoteSegmentState::CopyFinished));
        assert_eq!(log(&image).segment_for(50).map(|s| s.id), Some(id(1)));
        assert_eq!(log(&image).segment_for(100), None);
        assert_eq!(log(&image).start_offset(), Some(0));
        assert_eq!(log(&image).highest_copied_offset(), Some(99));
        assert_eq!(log(&image).size_bytes(), 100);
        assert_eq!(log(&image).finished().count(), 1);

        apply_all(&mut image, &[delete_started(&[1], Some(100))]);
        assert_eq!(state(&image, 1), Some(RemoteSegmentState::DeleteStarted));
        assert_eq!(log(&image).segment_for(50), None);
        assert_eq!(log(&image).finished().count(), 0);
        assert_eq!(log(&image).log_start_offset, 100);

        apply_all(&mut image, &[delete_finished(&[1])]);
        assert_eq!(state(&image, 1), None);
        // Kept for its log start offset alone.
        assert!(log(&image).is_empty());
        assert_eq!(log(&image).log_start_offset, 100);
        assert_eq!(image.remote_logs().count(), 1);
        assert_eq!(image.remote_log(TOPIC, 1), None);
    }

    #[test]
    fn an_emptied_remote_log_is_dropped_unless_its_log_start_is_above_zero() {
        let mut image = cluster();
        apply_all(
            &mut image,
            &[
                started(segment(1, 0, 99)),
                delete_started(&[1], None),
                delete_finished(&[1]),
            ],
        );
        assert_eq!(image.remote_log(TOPIC, 0), None);
        assert_eq!(image.remote_logs().count(), 0);

        // DeleteRecords below the local log start, with nothing copied yet.
        apply_all(&mut image, &[delete_started(&[], Some(40))]);
        assert_eq!(log(&image).log_start_offset, 40);
        assert!(log(&image).is_empty());
        assert_eq!(log(&image).start_offset(), None);
    }

    #[test]
    fn delete_started_never_lowers_the_log_start_offset() {
        let mut image = cluster();
        apply_all(
            &mut image,
            &[
                delete_started(&[], Some(500)),
                delete_started(&[], Some(300)),
            ],
        );
        assert_eq!(log(&image).log_start_offset, 500);
        apply_all(&mut image, &[delete_started(&[], None)]);
        assert_eq!(log(&image).log_start_offset, 500);
    }

    #[test]
    fn segment_for_takes_the_overlapping_segment_reaching_furthest() {
        let mut image = cluster();
        // Segment 2 was copied by a leader that rolled later than the one
        // that copied segment 1 (the same records, cut differently).
        apply_all(
            &mut image,
            &[
                started(segment(1, 0, 99)),
                started(segment(2, 50, 199)),
                started(segment(3, 60, 120)),
                started(segment(4, 80, 300)),
                finished(1),
                finished(2),
                finished(3),
            ],
        );
        let at = |offset| log(&image).segment_for(offset).map(|s| s.id);
        assert_eq!(at(10), Some(id(1)));
        assert_eq!(at(49), Some(id(1)));
        assert_eq!(at(50), Some(id(2)));
        assert_eq!(at(70), Some(id(2)));
        assert_eq!(at(199), Some(id(2)));
        // Segment 4 reaches further but is not finished.
        assert_eq!(at(200), None);
        assert_eq!(log(&image).highest_copied_offset(), Some(199));
        assert_eq!(log(&image).size_bytes(), 300);
        let bases: Vec<u64> = log(&image).segments().map(|s| s.base_offset).collect();
        assert_eq!(bases, [0, 50, 60, 80]);
    }

    #[test]
    fn offsets_below_the_log_start_are_gone_even_where_a_segment_holds_them() {
        let mut image = cluster();
        apply_all(
            &mut image,
            &[
                started(segment(1, 0, 99)),
                started(segment(2, 100, 199)),
                finished(1),
                finished(2),
                delete_started(&[], Some(150)),
            ],
        );
        let at = |offset| log(&image).segment_for(offset).map(|s| s.id);
        assert_eq!(at(50), None);
        assert_eq!(at(149), None);
        assert_eq!(at(150), Some(id(2)));
        assert_eq!(log(&image).start_offset(), Some(150));

        // Below the first finished segment, that segment's base is the start.
        let mut image = cluster();
        apply_all(
            &mut image,
            &[
                started(segment(1, 200, 299)),
                finished(1),
                delete_started(&[], Some(20)),
            ],
        );
        assert_eq!(log(&image).start_offset(), Some(200));
    }

    #[test]
    fn a_copy_from_a_deposed_leader_or_a_stale_epoch_is_fenced() {
        let mut image = cluster();
        // Broker 1 goes: broker 2 leads partition 0 at epoch 1.
        apply_all(&mut image, &[Command::FenceBroker { id: 1 }]);
        let p = image.topic("orders").unwrap().partition(0).unwrap().clone();
        assert_eq!((p.leader, p.leader_epoch), (2, 1));

        let from_old_leader = segment(1, 0, 99);
        let stale_epoch = RemoteSegment {
            broker: 2,
            ..segment(1, 0, 99)
        };
        let other_broker = RemoteSegment {
            broker: 1,
            leader_epoch: 1,
            ..segment(1, 0, 99)
        };
        for segment in [from_old_leader, stale_epoch, other_broker] {
            let error = refused(&mut image, &started(segment));
            assert!(
                matches!(error, MetaError::FencedLeaderEpoch(_)),
                "{error:?}"
            );
            assert_eq!(error.kafka_error_code(), 74);
            assert!(error.to_string().contains("orders-0"), "{error}");
        }
        let current = RemoteSegment {
            broker: 2,
            leader_epoch: 1,
            ..segment(1, 0, 99)
        };
        apply_all(&mut image, &[started(current)]);

        // The deposed leader can neither delete nor finish.
        let error = refused(&mut image, &delete_started(&[1], Some(10)));
        assert!(
            matches!(error, MetaError::FencedLeaderEpoch(_)),
            "{error:?}"
        );
        let error = refused(&mut image, &finished(1));
        assert!(
            matches!(error, MetaError::FencedLeaderEpoch(_)),
            "{error:?}"
        );
    }

    #[test]
    fn a_partition_without_a_leader_takes_no_copy() {
        let mut image = cluster();
        apply_all(
            &mut image,
            &[
                Command::FenceBroker { id: 1 },
                Command::FenceBroker { id: 2 },
            ],
        );
        let p = image.topic("orders").unwrap().partition(0).unwrap().clone();
        assert_eq!(p.leader, -1);
        let headless = RemoteSegment {
            broker: -1,
            leader_epoch: p.leader_epoch,
            ..segment(1, 0, 99)
        };
        let error = refused(&mut image, &started(headless));
        assert!(
            matches!(error, MetaError::FencedLeaderEpoch(_)),
            "{error:?}"
        );
    }

    #[test]
    fn copy_finished_needs_a_copy_started_by_the_same_leader_and_epoch() {
        let mut image = cluster();
        let error = refused(&mut image, &finished(1));
        assert!(matches!(error, MetaError::InvalidRequest(_)), "{error:?}");

        apply_all(&mut image, &[started(segment(1, 0, 99)), finished(1)]);
        // Finishing twice: it is no longer CopyStarted.
        let error = refused(&mut image, &finished(1));
        assert!(matches!(error, MetaError::InvalidRequest(_)), "{error:?}");

        // Broker 1 leads again at a later epoch: the copy it started at
        // epoch 0 cannot be vouched for now.
        apply_all(
            &mut image,
            &[
                started(segment(2, 100, 199)),
                Command::FenceBroker { id: 1 },
                register(1),
            ],
        );
        let p = image.topic("orders").unwrap().partition(0).unwrap().clone();
        apply_all(
            &mut image,
            &[
                Command::AlterPartition {
                    topic: "orders".into(),
                    partition: 0,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    isr: vec![2, 1],
                },
                Command::ElectPreferredLeaders,
            ],
        );
        let p = image.topic("orders").unwrap().partition(0).unwrap().clone();
        assert_eq!((p.leader, p.leader_epoch), (1, 2));
        let error = refused(
            &mut image,
            &Command::RemoteSegmentCopyFinished {
                topic_id: TOPIC,
                partition: 0,
                id: id(2),
                broker: 1,
                leader_epoch: 2,
            },
        );
        assert!(
            matches!(error, MetaError::FencedLeaderEpoch(_)),
            "{error:?}"
        );
    }

    #[test]
    fn copy_started_refuses_a_malformed_or_repeated_segment() {
        let mut image = cluster();
        apply_all(&mut image, &[started(segment(1, 0, 99))]);
        let bad = [
            segment(1, 100, 199),
            RemoteSegment {
                state: RemoteSegmentState::CopyFinished,
                ..segment(2, 100, 199)
            },
            RemoteSegment {
                id: Uuid::nil(),
                ..segment(2, 100, 199)
            },
            segment(2, 200, 199),
            RemoteSegment {
                leader_epochs: Vec::new(),
                ..segment(2, 100, 199)
            },
            RemoteSegment {
                leader_epochs: vec![(0, 100), (0, 150)],
                ..segment(2, 100, 199)
            },
            RemoteSegment {
                leader_epochs: vec![(0, 100), (1, 200)],
                ..segment(2, 100, 199)
            },
        ];
        for segment in bad {
            let error = refused(&mut image, &started(segment.clone()));
            assert!(
                matches!(error, MetaError::InvalidRequest(_)),
                "{segment:?}: {error:?}"
            );
        }
        let good = RemoteSegment {
            leader_epochs: vec![(0, 100), (3, 150)],
            ..segment(2, 100, 199)
        };
        apply_all(&mut image, &[started(good)]);
    }

    #[test]
    fn remote_commands_for_an_unknown_topic_or_partition_are_unknown_topic() {
        let mut image = cluster();
        let commands = [
            Command::RemoteSegmentCopyStarted {
                topic_id: Uuid::from_u128(8),
                partition: 0,
                segment: segment(1, 0, 99),
            },
            Command::RemoteSegmentCopyStarted {
                topic_id: TOPIC,
                partition: 2,
                segment: segment(1, 0, 99),
            },
            Command::RemoteSegmentsDeleteFinished {
                topic_id: TOPIC,
                partition: -1,
                ids: Vec::new(),
            },
        ];
        for cmd in commands {
            let error = refused(&mut image, &cmd);
            assert!(matches!(error, MetaError::UnknownTopic(_)), "{error:?}");
        }
    }

    #[test]
    fn delete_started_needs_known_segments_in_any_state() {
        let mut image = cluster();
        let error = refused(&mut image, &delete_started(&[1], None));
        assert!(matches!(error, MetaError::InvalidRequest(_)), "{error:?}");

        // A copy never finished is deleted too, and asking twice is harmless.
        apply_all(
            &mut image,
            &[
                started(segment(1, 0, 99)),
                delete_started(&[1], None),
                delete_started(&[1], None),
            ],
        );
        assert_eq!(state(&image, 1), Some(RemoteSegmentState::DeleteStarted));
    }

    #[test]
    fn delete_finished_skips_unknown_ids_and_refuses_segments_not_being_deleted() {
        let mut image = cluster();
        apply_all(
            &mut image,
            &[
                started(segment(1, 0, 99)),
                started(segment(2, 100, 199)),
                finished(1),
                finished(2),
                delete_started(&[1], None),
            ],
        );
        let error = refused(&mut image, &delete_finished(&[1, 2]));
        assert!(matches!(error, MetaError::InvalidRequest(_)), "{error:?}");

        // Any broker may finish a deletion: no leader check.
        apply_all(&mut image, &[Command::FenceBroker { id: 1 }]);
        apply_all(&mut image, &[delete_finished(&[1, 9])]);
        assert_eq!(state(&image, 1), None);
        assert_eq!(state(&image, 2), Some(RemoteSegmentState::CopyFinished));
        // A retry after success changes nothing but the applied index.
        let before = image.clone();
        apply_all(&mut image, &[delete_finished(&[1])]);
        assert_eq!(image.applied_index(), before.applied_index() + 1);
        assert_eq!(image.remote_log(TOPIC, 0), before.remote_log(TOPIC, 0));
    }

    #[test]
    fn deleting_a_topic_with_remote_logs_leaves_it_to_purge_until_purged() {
        let mut image = cluster();
        let other = Command::CreateTopic {
            name: "audit".into(),
            id: Uuid::from_u128(9),
            partitions: 1,
            replicas: vec![vec![1]],
            configs: BTreeMap::new(),
            internal: false,
        };
        let on_partition_1 = Command::RemoteSegmentCopyStarted {
            topic_id: TOPIC,
            partition: 1,
            segment: RemoteSegment {
                broker: 2,
                ..segment(2, 0, 9)
            },
        };
        apply_all(
            &mut image,
            &[
                other,
                started(segment(1, 0, 99)),
                finished(1),
                on_partition_1,
            ],
        );
        assert_eq!(image.remote_logs().count(), 2);

        // A topic without remote logs is not purged.
        apply_all(
            &mut image,
            &[Command::DeleteTopic {
                name: "audit".into(),
            }],
        );
        assert_eq!(image.purging_topics().count(), 0);

        apply_all(
            &mut image,
            &[Command::DeleteTopic {
                name: "orders".into(),
            }],
        );
        assert_eq!(image.remote_logs().count(), 0);
        assert_eq!(image.remote_log(TOPIC, 0), None);
        let purging: Vec<(Uuid, &str)> = image.purging_topics().collect();
        assert_eq!(purging, [(TOPIC, "orders")]);
        let error = refused(&mut image, &finished(1));
        assert!(matches!(error, MetaError::UnknownTopic(_)), "{error:?}");

        // Purged: gone, and purging again (or an unknown id) is harmless.
        let purged = |topic_id| Command::RemoteTopicPurged { topic_id };
        apply_all(&mut image, &[purged(TOPIC)]);
        assert_eq!(image.purging_topics().count(), 0);
        apply_all(&mut image, &[purged(TOPIC), purged(Uuid::from_u128(99))]);
    }

    #[test]
    fn cloned_images_share_remote_logs_until_one_changes() {
        let mut image = cluster();
        apply_all(&mut image, &[started(segment(1, 0, 99))]);
        let mut clone = image.clone();
        assert!(std::ptr::eq(log(&image), log(&clone)));
        apply_all(&mut clone, &[finished(1)]);
        assert!(!std::ptr::eq(log(&image), log(&clone)));
        assert_eq!(state(&image, 1), Some(RemoteSegmentState::CopyStarted));
        assert_eq!(state(&clone, 1), Some(RemoteSegmentState::CopyFinished));
    }

    /// An image with segments in every state on two partitions, a log start
    /// above 0, and a topic to purge.
    fn tiered_image() -> MetadataImage {
        let mut image = cluster();
        let doomed = Command::CreateTopic {
            name: "doomed".into(),
            id: Uuid::from_u128(9),
            partitions: 1,
            replicas: vec![vec![1]],
            configs: BTreeMap::new(),
            internal: false,
        };
        let doomed_segment = Command::RemoteSegmentCopyStarted {
            topic_id: Uuid::from_u128(9),
            partition: 0,
            segment: segment(9, 0, 9),
        };
        apply_all(
            &mut image,
            &[
                doomed,
                doomed_segment,
                Command::DeleteTopic {
                    name: "doomed".into(),
                },
                started(segment(1, 0, 99)),
                started(segment(2, 100, 199)),
                started(segment(3, 150, 249)),
                finished(1),
                finished(2),
                delete_started(&[1], Some(100)),
                Command::RemoteSegmentCopyStarted {
                    topic_id: TOPIC,
                    partition: 1,
                    segment: RemoteSegment {
                        broker: 2,
                        leader_epochs: vec![(0, 0), (4, 5)],
                        ..segment(4, 0, 9)
                    },
                },
            ],
        );
        image
    }

    #[test]
    fn an_image_with_remote_logs_round_trips_through_json() {
        let image = tiered_image();
        assert_eq!(image.remote_logs().count(), 2);
        assert_eq!(image.purging_topics().count(), 1);
        let json = serde_json::to_string(&image).unwrap();
        let back: MetadataImage = serde_json::from_str(&json).unwrap();
        assert_eq!(back, image);
        // Serializing is deterministic: equal images, equal bytes.
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
        assert_eq!(back.remote_log(TOPIC, 0), image.remote_log(TOPIC, 0));
        assert_eq!(
            back.remote_log(TOPIC, 0)
                .and_then(|log| log.segment_for(120))
                .map(|s| s.id),
            Some(id(2))
        );
    }

    #[test]
    fn an_image_written_before_tiered_storage_still_loads() {
        let mut json = serde_json::to_value(cluster()).unwrap();
        let fields = json.as_object_mut().unwrap();
        assert!(fields.remove("remote_logs").is_some());
        assert!(fields.remove("purging_topics").is_some());
        let back: MetadataImage = serde_json::from_value(json).unwrap();
        assert_eq!(back, cluster());
        assert_eq!(back.remote_logs().count(), 0);
        assert_eq!(back.purging_topics().count(), 0);
    }

    #[test]
    fn an_image_with_a_remote_log_of_a_missing_partition_or_a_segment_twice_is_refused() {
        let mut json = serde_json::to_value(tiered_image()).unwrap();
        let logs = json["remote_logs"].as_array_mut().unwrap();
        let mut stray = logs[0].clone();
        stray[0][1] = 5.into();
        logs.push(stray);
        let error = serde_json::from_value::<MetadataImage>(json).unwrap_err();
        assert!(error.to_string().contains("does not exist"), "{error}");

        let mut json = serde_json::to_value(tiered_image()).unwrap();
        let segments = json["remote_logs"][0][1]["segments"]
            .as_array_mut()
            .unwrap();
        let twice = segments[0].clone();
        segments.push(twice);
        let error = serde_json::from_value::<MetadataImage>(json).unwrap_err();
        assert!(error.to_string().contains("listed twice"), "{error}");
    }

    #[test]
    fn remote_commands_round_trip_through_json() {
        let commands = [
            started(segment(1, 0, 99)),
            finished(1),
            delete_started(&[1, 2], Some(100)),
            delete_finished(&[1]),
            Command::RemoteTopicPurged { topic_id: TOPIC },
        ];
        for cmd in commands {
            let json = serde_json::to_string(&cmd).unwrap();
            assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), cmd);
        }
    }
}
