//! Reads from the remote tier: the batches a fetch below the local log
//! start asks for, with the same bytes a local read would give.
//!
//! A read takes the segment's offset index (kept in a cache on local disk,
//! within `remote.log.index.cache.size.bytes`), finds where the batch with
//! the fetch offset starts, and reads from there with a ranged GET. Every
//! batch is checked (size, magic, CRC) before it is served: a corrupt or
//! truncated object is an error, never records. The next chunk of a
//! segment is read ahead for a consumer reading in order.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use uuid::Uuid;
use weir_log::batch::{self, Origin};
use weir_log::{AbortedTxn, LogSlice, TimestampOffset};
use weir_meta::RemoteSegment;

use crate::quotas::rate::{QuotaWindows, Rate};
use crate::remote::store::{Part, RemoteError, RemoteStore, SegmentName};

/// What one ranged GET asks for at least: object stores answer few large
/// reads faster than many small ones.
const CHUNK_BYTES: u64 = 2 * 1024 * 1024;

/// Chunks read ahead of a consumer reading on: GETs in flight at once.
const CHUNKS_AHEAD: usize = 3;

/// Consumers reading on whose read-ahead is kept (the oldest forgotten):
/// at most this × (1 + [`CHUNKS_AHEAD`]) chunks in memory.
const STREAMS: usize = 8;

/// Kafka's defaults of `remote.log.manager.fetch.quota.window.num` and
/// `.window.size.seconds`.
const FETCH_QUOTA_WINDOWS: QuotaWindows = QuotaWindows {
    samples: 11,
    window_ms: 1000,
};

/// The bytes read for fetches, against
/// `remote.log.manager.fetch.max.bytes.per.second`.
struct FetchQuota {
    clock: Arc<dyn weir_log::Clock>,
    rate: Mutex<Rate>,
}

/// What a remote read gives a fetch.
#[derive(Debug, Default)]
pub struct RemoteRecords {
    pub records: LogSlice,
    pub aborted: Vec<AbortedTxn>,
}

/// A read of a partition's remote tier.
#[derive(Debug, Clone, Copy)]
pub struct RemoteFetch<'a> {
    pub topic: &'a str,
    pub topic_id: Uuid,
    pub partition: i32,
    pub offset: u64,
    pub max_bytes: usize,
    /// Batches starting at or above this are not served.
    pub upper_bound: u64,
    pub read_committed: bool,
}

impl<'a> RemoteFetch<'a> {
    /// The objects of `segment` of the partition read.
    fn segment_name(&self, segment: &RemoteSegment) -> SegmentName<'a> {
        SegmentName {
            topic: self.topic,
            topic_id: self.topic_id,
            partition: self.partition,
            base_offset: segment.base_offset,
            segment_id: segment.id,
        }
    }
}

/// Reads segments of the remote tier, caching their indexes on local disk.
pub struct RemoteReader {
    store: RemoteStore,
    indexes: IndexCache,
    fetch_quota: FetchQuota,
    /// Consumers reading on, with what is read of their segment beyond
    /// what they were served; the oldest first.
    streams: Mutex<VecDeque<Stream>>,
}

impl RemoteReader {
    pub fn new(
        store: RemoteStore,
        cache_dir: PathBuf,
        cache_bytes: u64,
        clock: Arc<dyn weir_log::Clock>,
    ) -> Self {
        Self {
            store,
            indexes: IndexCache::new(cache_dir, cache_bytes),
            fetch_quota: FetchQuota {
                clock,
                rate: Mutex::new(Rate::new(FETCH_QUOTA_WINDOWS.samples)),
            },
            streams: Mutex::new(VecDeque::new()),
        }
    }

    /// The store it reads from.
    pub fn store(&self) -> &RemoteStore {
        &self.store
    }

    /// Whether reads are over `remote.log.manager.fetch.max.bytes.per.second`,
    /// given as `limit`: then a fetch is answered without reading, as in
    /// Kafka, until the rate falls back.
    pub fn fetch_quota_exceeded(&self, limit: u64) -> bool {
        if limit >= i64::MAX as u64 {
            return false;
        }
        let quota = &self.fetch_quota;
        let now = quota.clock.now_ms();
        quota.rate.lock().measure_simple(FETCH_QUOTA_WINDOWS, now) > limit as f64
    }

    /// Reads whole batches of `segment` from `fetch.offset` on: at least
    /// one batch, then up to `fetch.max_bytes`.
    pub async fn read(
        self: &Arc<Self>,
        fetch: RemoteFetch<'_>,
        segment: &RemoteSegment,
    ) -> Result<RemoteRecords, RemoteError> {
        let name = fetch.segment_name(segment);
        let log = self.store.object(&name, Part::Log);
        let corrupt = |reason: String| RemoteError::Corrupt {
            object: log.to_string(),
            reason,
        };
        let want = (fetch.max_bytes as u64).max(CHUNK_BYTES);
        // A consumer reading on asks for the offset after the last one
        // served: its position is known, and its bytes read ahead.
        let stream = self.take_stream(segment.id, fetch.offset);
        let (start, mut chunk, mut ahead) = match stream {
            Some(stream) => {
                let (start, chunk, ahead) = stream.buffered(fetch.max_bytes, self).await;
                (start, chunk, ahead)
            }
            None => {
                let index = self.part(&name, Part::OffsetIndex).await?;
                let start = weir_log::sealed::position_for_offset(
                    &index,
                    segment.base_offset,
                    fetch.offset,
                );
                if start >= segment.size_bytes {
                    return Err(corrupt(format!(
                        "its index points past its end, at {start}"
                    )));
                }
                let end = (start + want).min(segment.size_bytes);
                (
                    start,
                    self.get_range(&log, start, end).await?,
                    VecDeque::new(),
                )
            }
        };
        let mut end = start + chunk.len() as u64;
        // (position in the chunk, base offset) of the first batch served.
        let mut served: Option<(usize, u64)> = None;
        let mut position = 0usize;
        while position < chunk.len() {
            let at = start + position as u64;
            let header = match batch::BatchHeader::parse(&chunk[position..], at as usize) {
                Ok(header) => header,
                Err(_) if end < segment.size_bytes && served.is_none() => {
                    // The chunk cut the header of the batch wanted.
                    end = (at + batch::HEADER_SIZE as u64 + want).min(segment.size_bytes);
                    chunk = self.get_range(&log, start, end).await?;
                    continue;
                }
                Err(_) if end < segment.size_bytes => break,
                Err(error) => return Err(corrupt(format!("at byte {at}: {error}"))),
            };
            let size = header.total_size();
            if header.base_offset() < 0 || header.last_offset() < header.base_offset() {
                return Err(corrupt(format!(
                    "the batch at byte {at} has invalid offsets"
                )));
            }
            if header.base_offset() as u64 >= fetch.upper_bound {
                break;
            }
            if position + size > chunk.len() {
                let whole = at + size as u64;
                if whole > segment.size_bytes {
                    return Err(corrupt(format!(
                        "the batch at byte {at} runs past the segment's end"
                    )));
                }
                if served.is_some() {
                    break;
                }
                end = whole;
                chunk = self.get_range(&log, start, end).await?;
                continue;
            }
            if (header.last_offset() as u64) < fetch.offset {
                position += size;
                continue;
            }
            if let Some((from, _)) = served {
                if position + size - from > fetch.max_bytes {
                    break;
                }
            }
            // A corrupt batch is never served: the ones before it are, and
            // a read that starts at it fails.
            if let Err(error) = batch::validate(
                &chunk[position..position + size],
                at as usize,
                Origin::Log,
                usize::MAX,
            ) {
                if served.is_some() {
                    break;
                }
                return Err(corrupt(error.to_string()));
            }
            served.get_or_insert((position, header.base_offset() as u64));
            position += size;
        }
        let Some((from, first)) = served else {
            return Ok(RemoteRecords::default());
        };
        let served_end = position;
        let records = chunk.slice(from..served_end);
        let last_served = {
            let mut last = first;
            let mut at = 0;
            while at < records.len() {
                let header = batch::BatchHeader::parse(&records[at..], at).expect("checked above");
                last = header.last_offset() as u64;
                at += header.total_size();
            }
            last
        };
        // What is read beyond what was served waits for the next fetch,
        // with reads of what follows under way.
        let chunk_end = start + chunk.len() as u64;
        ahead.retain(|read: &AheadRead| read.start >= chunk_end);
        if ahead.front().is_some_and(|read| read.start != chunk_end) {
            ahead.clear();
        }
        let mut next_read = ahead.back().map_or(chunk_end, |read| read.end);
        while ahead.len() < CHUNKS_AHEAD && next_read < segment.size_bytes {
            let end = (next_read + CHUNK_BYTES).min(segment.size_bytes);
            ahead.push_back(self.read_ahead(log.clone(), next_read, end));
            next_read = end;
        }
        let next = start + served_end as u64;
        if next < segment.size_bytes {
            self.keep_stream(Stream {
                segment: segment.id,
                log: log.clone(),
                offset: last_served + 1,
                position: next,
                buffered: chunk.slice(served_end..),
                ahead,
            });
        }
        let aborted = if fetch.read_committed {
            let txns = self.part(&name, Part::TxnIndex).await?;
            weir_log::sealed::decode_aborted(&txns)
                .ok_or_else(|| corrupt("its transaction index is torn".to_owned()))?
                .into_iter()
                .filter(|txn| txn.last_offset >= fetch.offset && txn.first_offset <= last_served)
                .collect()
        } else {
            Vec::new()
        };
        let now = self.fetch_quota.clock.now_ms();
        self.fetch_quota
            .rate
            .lock()
            .record(FETCH_QUOTA_WINDOWS, records.len() as f64, now);
        Ok(RemoteRecords {
            records: LogSlice::from_bytes(records, first),
            aborted,
        })
    }

    /// The first record of `segment` at or after `timestamp` and at or
    /// above `at.offset` (the log start), searched from where its copied
    /// time index says records may reach the time: ListOffsets by time in
    /// the remote tier.
    pub async fn offset_for_timestamp(
        &self,
        at: RemoteFetch<'_>,
        segment: &RemoteSegment,
        timestamp: i64,
    ) -> Result<Option<TimestampOffset>, RemoteError> {
        let name = at.segment_name(segment);
        let log = self.store.object(&name, Part::Log);
        let corrupt = |reason: String| RemoteError::Corrupt {
            object: log.to_string(),
            reason,
        };
        let times = self.part(&name, Part::TimeIndex).await?;
        let from = weir_log::sealed::time_lookup_start(&times, segment.base_offset, timestamp)
            .max(at.offset);
        let index = self.part(&name, Part::OffsetIndex).await?;
        let mut position = weir_log::sealed::position_for_offset(&index, segment.base_offset, from);
        while position < segment.size_bytes {
            let mut chunk = self
                .get_range(
                    &log,
                    position,
                    (position + CHUNK_BYTES).min(segment.size_bytes),
                )
                .await?;
            let mut used = 0usize;
            while used + batch::HEADER_SIZE <= chunk.len() {
                let header = batch::BatchHeader::parse(&chunk[used..], used)
                    .map_err(|error| corrupt(error.to_string()))?;
                let size = header.total_size();
                if used + size > chunk.len() {
                    if used > 0 {
                        break;
                    }
                    // One batch larger than a chunk: read it whole.
                    if position + size as u64 > segment.size_bytes {
                        return Err(corrupt(format!(
                            "the batch at byte {position} runs past its end"
                        )));
                    }
                    chunk = self
                        .get_range(&log, position, position + size as u64)
                        .await?;
                    continue;
                }
                let reaches =
                    header.max_timestamp() >= timestamp && header.last_offset() >= at.offset as i64;
                if reaches {
                    let whole = &chunk[used..used + size];
                    batch::validate(whole, used, Origin::Log, usize::MAX)
                        .map_err(|error| corrupt(error.to_string()))?;
                    let found = weir_log::sealed::record_at_or_after(
                        chunk.slice(used..used + size),
                        timestamp,
                        at.offset,
                    )
                    .map_err(corrupt)?;
                    if found.is_some() {
                        return Ok(found);
                    }
                }
                used += size;
            }
            if used == 0 {
                return Err(corrupt(format!("no whole batch at byte {position}")));
            }
            position += used as u64;
        }
        Ok(None)
    }

    /// `start..end` of an object, which must hold all of it: an object
    /// shorter than its metadata says is corrupt.
    async fn get_range(
        &self,
        object: &object_store::path::Path,
        start: u64,
        end: u64,
    ) -> Result<Bytes, RemoteError> {
        let bytes = self.store.get_range(object, start..end).await?;
        if bytes.len() as u64 != end - start {
            return Err(RemoteError::Corrupt {
                object: object.to_string(),
                reason: format!(
                    "{} bytes where {} were expected at byte {start}",
                    bytes.len(),
                    end - start
                ),
            });
        }
        Ok(bytes)
    }

    /// A small part of a segment (an index), from the local cache or the
    /// store.
    async fn part(&self, name: &SegmentName<'_>, part: Part) -> Result<Bytes, RemoteError> {
        if let Some(bytes) = self.indexes.get(name.segment_id, part).await {
            return Ok(bytes);
        }
        let bytes = self.store.get(&self.store.object(name, part)).await?;
        self.indexes.put(name.segment_id, part, bytes.clone()).await;
        Ok(bytes)
    }

    /// The stream of a consumer that fetches `offset` of `segment` next.
    fn take_stream(&self, segment: Uuid, offset: u64) -> Option<Stream> {
        let mut streams = self.streams.lock();
        let at = streams
            .iter()
            .position(|s| s.segment == segment && s.offset == offset)?;
        streams.remove(at)
    }

    fn keep_stream(&self, stream: Stream) {
        let mut streams = self.streams.lock();
        if streams.len() >= STREAMS {
            streams.pop_front();
        }
        streams.push_back(stream);
    }

    /// Starts reading `start..end` of `log` in the background.
    fn read_ahead(
        self: &Arc<Self>,
        log: object_store::path::Path,
        start: u64,
        end: u64,
    ) -> AheadRead {
        let bytes = Arc::new(tokio::sync::OnceCell::new());
        let reader = self.clone();
        let cell = bytes.clone();
        tokio::spawn(async move {
            cell.get_or_init(|| async { reader.get_range(&log, start, end).await.ok() })
                .await;
        });
        AheadRead { start, end, bytes }
    }
}

/// A consumer reading a segment on: where its next fetch starts, what is
/// read from there, and the reads of what follows.
struct Stream {
    segment: Uuid,
    log: object_store::path::Path,
    /// The offset its next fetch asks for, and where that batch starts.
    offset: u64,
    position: u64,
    /// The bytes from `position` read so far.
    buffered: Bytes,
    /// Reads of the ranges right after `buffered`, in order.
    ahead: VecDeque<AheadRead>,
}

impl Stream {
    /// The bytes from its position, at least `max_bytes` of them (as far
    /// as the reads ahead go), and the reads ahead not used. A read ahead
    /// that failed ends what is given; the caller reads on from there.
    async fn buffered(
        self,
        max_bytes: usize,
        reader: &RemoteReader,
    ) -> (u64, Bytes, VecDeque<AheadRead>) {
        let Stream {
            log,
            position,
            mut buffered,
            mut ahead,
            ..
        } = self;
        while buffered.len() < max_bytes.max(batch::HEADER_SIZE) {
            let Some(read) = ahead.pop_front() else {
                break;
            };
            // Waits for a read under way rather than reading twice.
            let more = read
                .bytes
                .get_or_init(|| async { reader.get_range(&log, read.start, read.end).await.ok() })
                .await
                .clone();
            let Some(more) = more else {
                ahead.clear();
                break;
            };
            let mut joined = bytes::BytesMut::with_capacity(buffered.len() + more.len());
            joined.extend_from_slice(&buffered);
            joined.extend_from_slice(&more);
            buffered = joined.freeze();
        }
        (position, buffered, ahead)
    }
}

/// A read of `start..end` of a segment, under way or done (`None` inside if
/// it failed).
struct AheadRead {
    start: u64,
    end: u64,
    bytes: Arc<tokio::sync::OnceCell<Option<Bytes>>>,
}

/// Index parts of remote segments kept on local disk, the oldest removed
/// first beyond a size.
#[derive(Debug)]
struct IndexCache {
    dir: PathBuf,
    limit: u64,
    files: Mutex<CachedFiles>,
}

/// The files of an [`IndexCache`].
#[derive(Debug, Default)]
struct CachedFiles {
    /// Oldest first, with their sizes.
    order: VecDeque<(PathBuf, u64)>,
    total: u64,
    known: HashSet<PathBuf>,
}

impl IndexCache {
    fn new(dir: PathBuf, limit: u64) -> Self {
        // What an earlier run left is not known to be complete.
        let _ = std::fs::remove_dir_all(&dir);
        Self {
            dir,
            limit,
            files: Mutex::default(),
        }
    }

    fn path(&self, segment: Uuid, part: Part) -> PathBuf {
        self.dir.join(format!("{segment}.{part:?}"))
    }

    async fn get(&self, segment: Uuid, part: Part) -> Option<Bytes> {
        let path = self.path(segment, part);
        if !self.files.lock().known.contains(&path) {
            return None;
        }
        tokio::fs::read(&path).await.ok().map(Bytes::from)
    }

    async fn put(&self, segment: Uuid, part: Part, bytes: Bytes) {
        let path = self.path(segment, part);
        let size = bytes.len() as u64;
        if size > self.limit || tokio::fs::create_dir_all(&self.dir).await.is_err() {
            return;
        }
        // Written aside and renamed: a reader never sees half a file.
        let partial = path.with_extension("partial");
        if tokio::fs::write(&partial, &bytes).await.is_err()
            || tokio::fs::rename(&partial, &path).await.is_err()
        {
            return;
        }
        let evicted = {
            let mut files = self.files.lock();
            if files.known.insert(path.clone()) {
                files.order.push_back((path, size));
                files.total += size;
            }
            let mut evicted = Vec::new();
            while files.total > self.limit {
                let Some((old, old_size)) = files.order.pop_front() else {
                    break;
                };
                files.total -= old_size;
                files.known.remove(&old);
                evicted.push(old);
            }
            evicted
        };
        for old in evicted {
            let _ = tokio::fs::remove_file(old).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::copier;
    use weir_log::testing::BatchBuilder;
    use weir_log::{Log, LogConfig};

    struct Copied {
        _dirs: (tempfile::TempDir, tempfile::TempDir),
        reader: Arc<RemoteReader>,
        log: Log,
        segment: RemoteSegment,
        store_dir: PathBuf,
    }

    /// A log of five 10-record batches in one sealed segment, copied to a
    /// file store.
    async fn copied() -> Copied {
        copied_of(5, 100).await
    }

    /// A log of `batches` 10-record batches of values of `value_size`
    /// bytes in one sealed segment, copied to a file store.
    async fn copied_of(batches: usize, value_size: usize) -> Copied {
        let log_dir = tempfile::tempdir().unwrap();
        let store_dir = tempfile::tempdir().unwrap();
        let log = Log::open(log_dir.path().join("t-0"), LogConfig::default()).unwrap();
        for _ in 0..batches {
            log.append(&BatchBuilder::new(10).value_size(value_size).build(), 0)
                .unwrap();
        }
        log.roll().unwrap();
        let sealed = log.sealed_segment_from(0, u64::MAX).unwrap().unwrap();
        let store = RemoteStore::open(
            &format!("file://{}", store_dir.path().display()),
            None,
            None,
        )
        .unwrap();
        let segment = RemoteSegment {
            id: Uuid::new_v4(),
            base_offset: 0,
            end_offset: sealed.next_offset - 1,
            max_timestamp_ms: sealed.max_timestamp,
            size_bytes: sealed.size,
            leader_epochs: sealed.segment_epochs(),
            broker: 1,
            leader_epoch: 0,
            event_ms: 0,
            state: weir_meta::RemoteSegmentState::CopyFinished,
        };
        let name = SegmentName {
            topic: "t",
            topic_id: Uuid::nil(),
            partition: 0,
            base_offset: 0,
            segment_id: segment.id,
        };
        copier::copy_segment(&store, &name, sealed, Bytes::new(), u64::MAX)
            .await
            .unwrap();
        let reader = Arc::new(RemoteReader::new(
            store,
            log_dir.path().join("cache"),
            1 << 20,
            Arc::new(weir_log::SystemClock),
        ));
        let store_path = store_dir.path().to_owned();
        Copied {
            _dirs: (log_dir, store_dir),
            reader,
            log,
            segment,
            store_dir: store_path,
        }
    }

    fn fetch(offset: u64, max_bytes: usize) -> RemoteFetch<'static> {
        RemoteFetch {
            topic: "t",
            topic_id: Uuid::nil(),
            partition: 0,
            offset,
            max_bytes,
            upper_bound: u64::MAX,
            read_committed: false,
        }
    }

    #[tokio::test]
    async fn a_remote_read_gives_the_bytes_a_local_read_gives() {
        let c = copied().await;
        for (offset, max_bytes) in [
            (0, 1 << 20),
            (15, 1 << 20),
            (49, 1 << 20),
            (0, 1),
            (25, 1500),
        ] {
            let remote = c
                .reader
                .read(fetch(offset, max_bytes), &c.segment)
                .await
                .unwrap();
            let local = c.log.read(offset, max_bytes, 50).unwrap();
            assert_eq!(
                remote.records.to_bytes().unwrap(),
                local.to_bytes().unwrap(),
                "offset {offset}, max {max_bytes}"
            );
            assert_eq!(remote.records.first_offset(), local.first_offset());
        }
        // A consumer reading on, through the chunks read ahead.
        let mut offset = 0;
        while offset < 50 {
            let remote = c
                .reader
                .read(fetch(offset, 1500), &c.segment)
                .await
                .unwrap();
            let local = c.log.read(offset, 1500, 50).unwrap().to_bytes().unwrap();
            assert_eq!(remote.records.to_bytes().unwrap(), local, "offset {offset}");
            offset += 10;
        }
        // Up to the bound only.
        let bounded = RemoteFetch {
            upper_bound: 20,
            ..fetch(0, 1 << 20)
        };
        let remote = c.reader.read(bounded, &c.segment).await.unwrap();
        assert_eq!(
            remote.records.to_bytes().unwrap(),
            c.log.read(0, 1 << 20, 20).unwrap().to_bytes().unwrap()
        );
    }

    #[tokio::test]
    async fn reads_over_the_fetch_quota_wait_for_the_rate_to_fall() {
        let c = copied().await;
        assert!(!c.reader.fetch_quota_exceeded(100));
        let read = c.reader.read(fetch(0, 1 << 20), &c.segment).await.unwrap();
        assert!(read.records.len() > 100 * 11);
        assert!(c.reader.fetch_quota_exceeded(100));
        assert!(!c.reader.fetch_quota_exceeded(u64::MAX));
        assert!(!c.reader.fetch_quota_exceeded(i64::MAX as u64));
    }

    #[tokio::test]
    async fn a_consumer_reading_a_large_segment_on_gets_every_batch_once_in_order() {
        // 8 MiB: several chunks, read ahead while the consumer reads.
        let c = copied_of(800, 1000).await;
        let mut offset = 0;
        let mut fetches = 0;
        while offset < 8000 {
            let remote = c
                .reader
                .read(fetch(offset, 300_000), &c.segment)
                .await
                .unwrap();
            let local = c
                .log
                .read(offset, 300_000, 8000)
                .unwrap()
                .to_bytes()
                .unwrap();
            let got = remote.records.to_bytes().unwrap();
            assert_eq!(got, local, "offset {offset}");
            assert!(!got.is_empty());
            let mut last = offset;
            let mut at = 0;
            while at < got.len() {
                let header = batch::BatchHeader::parse(&got[at..], at).unwrap();
                last = header.last_offset() as u64 + 1;
                at += header.total_size();
            }
            offset = last;
            fetches += 1;
        }
        assert!(fetches > 20, "{fetches} fetches");
    }

    fn the_log_object(dir: &std::path::Path) -> PathBuf {
        let partition = dir.join(format!("t-{}", Uuid::nil())).join("0");
        std::fs::read_dir(partition)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "log"))
            .unwrap()
    }

    #[tokio::test]
    async fn a_corrupt_or_truncated_copy_is_never_served() {
        let c = copied().await;
        let object = the_log_object(&c.store_dir);
        let mut bytes = std::fs::read(&object).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&object, &bytes).unwrap();
        // The first batches are whole and served; the last one is not.
        let read = c.reader.read(fetch(0, 1 << 20), &c.segment).await.unwrap();
        assert_eq!(
            read.records.to_bytes().unwrap(),
            c.log.read(0, 1 << 20, 40).unwrap().to_bytes().unwrap()
        );
        let read = c.reader.read(fetch(40, 1 << 20), &c.segment).await;
        assert!(matches!(read, Err(RemoteError::Corrupt { .. })), "{read:?}");
        bytes.truncate(bytes.len() - 100);
        std::fs::write(&object, &bytes).unwrap();
        let read = c.reader.read(fetch(45, 1 << 20), &c.segment).await;
        assert!(read.is_err(), "{read:?}");
        std::fs::remove_file(&object).unwrap();
        let read = c.reader.read(fetch(0, 1 << 20), &c.segment).await;
        assert!(read.unwrap_err().is_not_found());
    }
}
