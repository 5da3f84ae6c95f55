//! A follower whose leader answered OFFSET_MOVED_TO_TIERED_STORAGE: what
//! it wants lies below the leader's local log start, in the remote tier.
//! It restarts its log empty at that start, as Kafka's followers do, with
//! what the remote copy just below it records (Kafka's
//! `buildRemoteLogAuxState`, KIP-405): the leader epochs, so that it answers
//! OffsetForLeaderEpoch for the whole log, and the producer state at the
//! copy's end, so that as a leader it de-duplicates retries as its
//! predecessor did.

use std::sync::Arc;

use weir_log::{EpochEntry, LogError};
use weir_meta::{MetadataImage, RemoteSegment};

use crate::partition::producer_snapshots::ProducerSnapshot;
use crate::partition::producer_state::ProducerStates;
use crate::partition::Partition;
use crate::remote::aux_state::{read_aux_state, AuxState};
use crate::remote::{RemoteStore, SegmentName};

/// The remote tier as a follower reads it: the store and the metadata
/// naming the copies.
#[derive(Clone)]
pub struct RemoteTierSource {
    pub store: RemoteStore,
    pub image: tokio::sync::watch::Receiver<Arc<MetadataImage>>,
}

/// Where a follower restarts, and what it takes from the remote tier.
pub struct RemoteRestart {
    /// The leader's local log start.
    pub local_start: u64,
    /// The leader epochs below `local_start` and the producer state there;
    /// `None` when no copy holds the offset before it.
    pub aux: Option<(Vec<EpochEntry>, Option<ProducerStates>)>,
}

/// What a restart at the leader's local log start takes from the remote
/// tier, as a broker's metadata shows it.
pub enum CopyBelow {
    /// Nothing: the replica holds the offset already, the log is not
    /// tiered, or nothing below is kept.
    Nothing,
    /// The finished copy holding the offset before the local log start.
    Copy(RemoteSegment),
    /// The copy should be there, but this metadata does not show it yet.
    NotYetKnown,
}

/// Which copy a restart of `partition` at `local_start` takes its state
/// from, by `image`.
pub fn copy_below(image: &MetadataImage, partition: &Partition, local_start: u64) -> CopyBelow {
    // A replica holding the leader's local log start goes on from its own
    // end; an empty log below it has nothing to take.
    if partition.log().log_end_offset() >= local_start
        || local_start == 0
        || !partition.remote().is_tiered()
    {
        return CopyBelow::Nothing;
    }
    let remote = image.remote_log(partition.topic_id, partition.index);
    match remote.and_then(|r| r.segment_for(local_start - 1)) {
        Some(segment) => CopyBelow::Copy(segment.clone()),
        None if local_start > remote.map_or(0, |r| r.log_start_offset) => CopyBelow::NotYetKnown,
        None => CopyBelow::Nothing,
    }
}

/// The restart at `local_start` with what the copy `segment` holds.
pub fn with_copy(
    partition: &Partition,
    local_start: u64,
    segment: &RemoteSegment,
    aux: AuxState,
) -> RemoteRestart {
    let producers = ProducerSnapshot::from_json(&aux.producer_snapshot).map(|s| s.producers);
    if producers.is_none() {
        tracing::warn!(topic = %partition.topic, partition = partition.index, segment = %segment.id, "the remote copy's producer snapshot is corrupt; restarting without the producer state below the leader's local log start");
    }
    RemoteRestart {
        local_start,
        aux: Some((aux.epochs, producers)),
    }
}

/// How `partition` restarts at its leader's local log start `local_start`;
/// `None` to try again at the next fetch (the store cannot be read now, or
/// this broker's metadata does not show the copy yet).
pub async fn plan(
    source: Option<&RemoteTierSource>,
    partition: &Partition,
    local_start: u64,
) -> Option<RemoteRestart> {
    let without_copy = Some(RemoteRestart {
        local_start,
        aux: None,
    });
    let Some(source) = source else {
        return without_copy;
    };
    let lookup = copy_below(&source.image.borrow(), partition, local_start);
    let segment = match lookup {
        CopyBelow::Nothing => return without_copy,
        CopyBelow::NotYetKnown => {
            tracing::debug!(topic = %partition.topic, partition = partition.index, local_start, "the remote copy below the leader's local log start is not in this broker's metadata yet");
            return None;
        }
        CopyBelow::Copy(segment) => segment,
    };
    let name = SegmentName {
        topic: &partition.topic,
        topic_id: partition.topic_id,
        partition: partition.index,
        base_offset: segment.base_offset,
        segment_id: segment.id,
    };
    match read_aux_state(&source.store, &name).await {
        Ok(aux) => Some(with_copy(partition, local_start, &segment, aux)),
        Err(error) if error.is_not_found() => {
            tracing::warn!(topic = %partition.topic, partition = partition.index, segment = %segment.id, %error, "the remote copy below the leader's local log start is gone; restarting without its epochs and producer state");
            without_copy
        }
        Err(error) => {
            tracing::debug!(topic = %partition.topic, partition = partition.index, %error, "cannot read the remote copy below the leader's local log start");
            None
        }
    }
}

/// Restarts `partition` as `restart` says, if its log ends below the
/// leader's local log start.
pub fn apply(partition: &Partition, restart: RemoteRestart) -> Result<(), LogError> {
    let local_start = restart.local_start;
    if partition.log().log_end_offset() >= local_start {
        return Ok(());
    }
    tracing::info!(topic = %partition.topic, partition = partition.index, local_start, "restarting the replica at the leader's local log start; the rest is in the remote tier");
    match restart.aux {
        Some((epochs, producers)) => partition.restart_from_remote(local_start, &epochs, producers),
        None => partition.restart_at(local_start),
    }
}
