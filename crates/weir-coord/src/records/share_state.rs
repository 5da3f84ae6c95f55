//! Share-partition state in `__share_group_state`, in Kafka's record
//! schemas (KIP-932's share coordinator): a ShareSnapshot (key version 0)
//! holds a share-partition's whole state, a ShareUpdate (key version 1)
//! what changed since; the key is the group id, topic id and partition.
//! A share-partition's state is its last snapshot with the later updates
//! applied in log order ([`PersistedState::apply_update`]).

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

pub use super::codec::RecordError;
use super::codec::{get_i16, get_i32, get_i64, get_uvarint, put_uvarint, skip_tags, take};
use crate::share::{PersistedState, RecordState, StateBatch};

pub const SHARE_SNAPSHOT: i16 = 0;
pub const SHARE_UPDATE: i16 = 1;

/// Which share-partition a record is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharePartitionKey {
    pub group: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

/// One record of `__share_group_state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareStateRecord {
    /// The whole state, at `state_epoch` (bumped when the state is reset).
    Snapshot {
        snapshot_epoch: u16,
        state_epoch: i32,
        leader_epoch: i32,
        state: PersistedState,
    },
    /// What changed since the snapshot of `snapshot_epoch`; a start offset
    /// of -1 leaves it unchanged.
    Update {
        snapshot_epoch: u16,
        leader_epoch: i32,
        state: PersistedState,
    },
}

pub fn encode_key(key: &SharePartitionKey, record: &ShareStateRecord) -> Bytes {
    let mut out = BytesMut::with_capacity(24 + key.group.len());
    out.put_i16(match record {
        ShareStateRecord::Snapshot { .. } => SHARE_SNAPSHOT,
        ShareStateRecord::Update { .. } => SHARE_UPDATE,
    });
    out.put_i16(key.group.len() as i16);
    out.put_slice(key.group.as_bytes());
    out.put_slice(key.topic_id.as_bytes());
    out.put_i32(key.partition);
    out.freeze()
}

pub fn encode_value(record: &ShareStateRecord) -> Bytes {
    let (snapshot_epoch, state_epoch, leader_epoch, state) = match record {
        ShareStateRecord::Snapshot {
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            state,
        } => (*snapshot_epoch, Some(*state_epoch), *leader_epoch, state),
        ShareStateRecord::Update {
            snapshot_epoch,
            leader_epoch,
            state,
        } => (*snapshot_epoch, None, *leader_epoch, state),
    };
    let mut out = BytesMut::with_capacity(32 + state.batches.len() * 20);
    out.put_i16(0);
    out.put_u16(snapshot_epoch);
    if let Some(state_epoch) = state_epoch {
        out.put_i32(state_epoch);
    }
    out.put_i32(leader_epoch);
    out.put_i64(state.start_offset);
    put_uvarint(&mut out, state.batches.len() as u64 + 1);
    for batch in &state.batches {
        out.put_i64(batch.first_offset);
        out.put_i64(batch.last_offset);
        out.put_i8(batch.state.id());
        out.put_i16(batch.delivery_count as i16);
        put_uvarint(&mut out, 0);
    }
    put_uvarint(&mut out, 0);
    out.freeze()
}

pub fn decode(
    mut key: &[u8],
    mut value: &[u8],
) -> Result<(SharePartitionKey, ShareStateRecord), RecordError> {
    let kind = get_i16(&mut key)?;
    let group_len = get_i16(&mut key)?;
    let group = std::str::from_utf8(take(&mut key, group_len.max(0) as usize)?)
        .map_err(|_| RecordError("a group id that is not UTF-8".into()))?
        .to_owned();
    let topic_id = Uuid::from_slice(take(&mut key, 16)?).expect("16 bytes");
    let partition = get_i32(&mut key)?;
    let key = SharePartitionKey {
        group,
        topic_id,
        partition,
    };
    let version = get_i16(&mut value)?;
    if version != 0 {
        return Err(RecordError(format!("value version {version}")));
    }
    let snapshot_epoch = u16::from_be_bytes(take(&mut value, 2)?.try_into().expect("2 bytes"));
    let state_epoch = match kind {
        SHARE_SNAPSHOT => Some(get_i32(&mut value)?),
        SHARE_UPDATE => None,
        other => return Err(RecordError(format!("key version {other}"))),
    };
    let leader_epoch = get_i32(&mut value)?;
    let start_offset = get_i64(&mut value)?;
    let count = get_uvarint(&mut value)?
        .checked_sub(1)
        .ok_or_else(|| RecordError("null state batches".into()))?;
    let mut batches = Vec::with_capacity(count.min(4096) as usize);
    for _ in 0..count {
        let first_offset = get_i64(&mut value)?;
        let last_offset = get_i64(&mut value)?;
        let state_id = take(&mut value, 1)?[0] as i8;
        let state = RecordState::from_id(state_id)
            .ok_or_else(|| RecordError(format!("delivery state {state_id}")))?;
        let delivery_count = i16::from_be_bytes(take(&mut value, 2)?.try_into().expect("2"));
        skip_tags(&mut value)?;
        batches.push(StateBatch {
            first_offset,
            last_offset,
            state,
            delivery_count: delivery_count.max(0) as u16,
        });
    }
    skip_tags(&mut value)?;
    let state = PersistedState {
        start_offset,
        batches,
    };
    let record = match state_epoch {
        Some(state_epoch) => ShareStateRecord::Snapshot {
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            state,
        },
        None => ShareStateRecord::Update {
            snapshot_epoch,
            leader_epoch,
            state,
        },
    };
    Ok((key, record))
}

impl PersistedState {
    /// Applies an update written after this state: its start offset (unless
    /// -1) drops what is below it, and its batches replace the state of
    /// the offsets they cover.
    pub fn apply_update(&mut self, update: &PersistedState) {
        if update.start_offset >= 0 {
            self.start_offset = update.start_offset;
        }
        let mut merged: Vec<StateBatch> =
            Vec::with_capacity(self.batches.len() + update.batches.len());
        let covered = |offset: i64| {
            update
                .batches
                .iter()
                .any(|b| b.first_offset <= offset && offset <= b.last_offset)
        };
        // What the update does not cover keeps its state, split around it.
        for batch in &self.batches {
            let mut first = batch.first_offset;
            while first <= batch.last_offset {
                if covered(first) {
                    first += 1;
                    continue;
                }
                let mut last = first;
                while last < batch.last_offset && !covered(last + 1) {
                    last += 1;
                }
                merged.push(StateBatch {
                    first_offset: first,
                    last_offset: last,
                    ..*batch
                });
                first = last + 1;
            }
        }
        merged.extend(update.batches.iter().copied());
        merged.sort_by_key(|b| b.first_offset);
        let start = self.start_offset;
        merged.retain(|b| b.last_offset >= start);
        for batch in &mut merged {
            batch.first_offset = batch.first_offset.max(start);
        }
        self.batches = merged;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(first: i64, last: i64, state: RecordState, count: u16) -> StateBatch {
        StateBatch {
            first_offset: first,
            last_offset: last,
            state,
            delivery_count: count,
        }
    }

    #[test]
    fn records_round_trip_in_kafkas_layout() {
        let key = SharePartitionKey {
            group: "queue".into(),
            topic_id: Uuid::from_u128(7),
            partition: 3,
        };
        let snapshot = ShareStateRecord::Snapshot {
            snapshot_epoch: 2,
            state_epoch: 1,
            leader_epoch: 5,
            state: PersistedState {
                start_offset: 10,
                batches: vec![
                    batch(10, 12, RecordState::Available, 1),
                    batch(13, 13, RecordState::Archived, 5),
                ],
            },
        };
        let key_bytes = encode_key(&key, &snapshot);
        // Key: version 0, the group as a classic string, the topic id, the partition.
        assert_eq!(&key_bytes[..4], &[0, 0, 0, 5]);
        assert_eq!(key_bytes.len(), 4 + 5 + 16 + 4);
        let value = encode_value(&snapshot);
        // Value: version, snapshot epoch, state epoch, leader epoch, start offset.
        assert_eq!(&value[..4], &[0, 0, 0, 2]);
        assert_eq!(decode(&key_bytes, &value), Ok((key.clone(), snapshot)));
        let update = ShareStateRecord::Update {
            snapshot_epoch: 2,
            leader_epoch: 5,
            state: PersistedState {
                start_offset: -1,
                batches: vec![batch(12, 12, RecordState::Acknowledged, 1)],
            },
        };
        let key_bytes = encode_key(&key, &update);
        assert_eq!(&key_bytes[..2], &[0, 1]);
        assert_eq!(
            decode(&key_bytes, &encode_value(&update)),
            Ok((key, update))
        );
    }

    #[test]
    fn updates_replace_what_they_cover_and_the_start_offset_prunes() {
        let mut state = PersistedState {
            start_offset: 0,
            batches: vec![batch(0, 9, RecordState::Available, 1)],
        };
        state.apply_update(&PersistedState {
            start_offset: -1,
            batches: vec![batch(3, 4, RecordState::Acknowledged, 1)],
        });
        assert_eq!(
            state.batches,
            vec![
                batch(0, 2, RecordState::Available, 1),
                batch(3, 4, RecordState::Acknowledged, 1),
                batch(5, 9, RecordState::Available, 1),
            ]
        );
        state.apply_update(&PersistedState {
            start_offset: 4,
            batches: vec![batch(5, 5, RecordState::Available, 2)],
        });
        assert_eq!(state.start_offset, 4);
        assert_eq!(
            state.batches,
            vec![
                batch(4, 4, RecordState::Acknowledged, 1),
                batch(5, 5, RecordState::Available, 2),
                batch(6, 9, RecordState::Available, 1),
            ]
        );
    }

    #[test]
    fn a_partition_loaded_from_snapshot_and_updates_is_the_one_that_wrote_them() {
        use crate::share::{AcknowledgeType, LogRecord, SharePartition, SharePartitionConfig};
        let config = SharePartitionConfig::default();
        let mut sp = SharePartition::new(config.clone(), 0);
        let log: Vec<LogRecord> = (0..8)
            .map(|offset| LogRecord {
                offset,
                batch_last_offset: offset,
                deliver_at_ms: None,
            })
            .collect();
        sp.acquire("a", 0, log.iter().copied(), 8);
        let mut persisted = sp.snapshot();
        sp.acknowledge(
            "a",
            0,
            &[
                (0, 1, AcknowledgeType::Accept),
                (3, 3, AcknowledgeType::Reject),
                (5, 6, AcknowledgeType::Release),
            ],
        )
        .unwrap();
        let (update, _) = sp.take_changes();
        persisted.apply_update(&update.unwrap());
        let loaded = SharePartition::load(config, &persisted);
        assert_eq!(loaded.start_offset(), sp.start_offset());
        assert_eq!(loaded.end_offset(), sp.end_offset());
        for offset in sp.start_offset()..sp.end_offset() {
            let (state, count) = sp.record(offset).unwrap();
            let expected = if state == RecordState::Acquired {
                RecordState::Available
            } else {
                state
            };
            assert_eq!(
                loaded.record(offset),
                Some((expected, count)),
                "offset {offset}"
            );
        }
    }
}
