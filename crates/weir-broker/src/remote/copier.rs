//! Copies a sealed segment to the remote tier: its indexes, leader epochs
//! and producer state, each an object of its own, then its `.log` bytes as
//! they are, streamed in chunks (a multipart upload).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use weir_log::sealed::SealedSegment;
use weir_log::storage::StorageFile;

use crate::remote::store::{Part, RemoteError, RemoteStore, SegmentName};

/// The size of one part of a multipart upload (S3 wants at least 5 MiB).
const CHUNK_BYTES: u64 = 8 * 1024 * 1024;

/// Copies `segment` under `name`, at most `max_bytes_per_second`; returns
/// the bytes copied. Objects of a copy that fails stay until the segment's
/// metadata is cleaned up as an orphan.
pub async fn copy_segment(
    store: &RemoteStore,
    name: &SegmentName<'_>,
    segment: SealedSegment,
    producer_state: Bytes,
    max_bytes_per_second: u64,
) -> Result<u64, RemoteError> {
    // The small parts first: a copy cut short most likely leaves a partial
    // `.log`, which an object store never shows.
    let epochs = weir_log::format_checkpoint(&segment.epochs);
    let parts = [
        (Part::OffsetIndex, Bytes::from(segment.offset_index)),
        (Part::TimeIndex, Bytes::from(segment.time_index)),
        (
            Part::TxnIndex,
            Bytes::from(weir_log::sealed::encode_aborted(&segment.aborted)),
        ),
        (Part::LeaderEpochs, Bytes::from(epochs)),
        (Part::ProducerSnapshot, producer_state),
    ];
    for (part, bytes) in parts {
        store.put(&store.object(name, part), bytes).await?;
    }
    let started = Instant::now();
    let log = segment.log.clone();
    let size = segment.size;
    let chunks = futures::stream::unfold(0u64, move |position| {
        let log = log.clone();
        async move {
            if position >= size {
                return None;
            }
            let len = CHUNK_BYTES.min(size - position);
            let chunk = read_chunk(log, position, len).await;
            // Kept under the rate: a copy catching up does not take all
            // of the disk and the network.
            let due =
                Duration::from_secs_f64((position + len) as f64 / max_bytes_per_second as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
            Some((chunk, position + len))
        }
    });
    store
        .put_chunks(&store.object(name, Part::Log), Box::pin(chunks))
        .await?;
    Ok(size)
}

/// Reads `len` bytes at `position` of a segment file, off the runtime's
/// workers.
async fn read_chunk(
    log: Arc<dyn StorageFile>,
    position: u64,
    len: u64,
) -> Result<Bytes, RemoteError> {
    tokio::task::spawn_blocking(move || {
        let mut buf = vec![0; len as usize];
        log.read_exact_at(&mut buf, position)?;
        Ok(Bytes::from(buf))
    })
    .await
    .map_err(|error| RemoteError::Io(std::io::Error::other(error.to_string())))?
}
