//! The remote tier: an object store (S3, GCS, Azure Blob Storage or a
//! directory) under one prefix, and the names of a segment's objects in it.
//!
//! A copied segment is a set of objects under
//! `<prefix>/<topic>-<topic id>/<partition>/<base offset, 20 digits>-<segment id>`,
//! one per part ([`Part`]). The segment id is new for every copy, so a copy
//! after a leader change never overwrites another's objects; a topic's
//! objects all lie under its own folder, which topic deletion removes.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use uuid::Uuid;

/// Parts of one multipart upload sent at once.
const PARTS_IN_FLIGHT: usize = 4;

/// Why the remote tier could not be set up or answered.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("remote.log.storage.system.enable=true needs a remote tier: set weir.remote.storage.url (--remote-storage-url)")]
    NoUrl,
    #[error("invalid weir.remote.storage.url {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("remote storage: {0}")]
    Store(#[from] object_store::Error),
    #[error("remote storage: {0}")]
    Io(#[from] std::io::Error),
    #[error("remote segment {object}: {reason}")]
    Corrupt { object: String, reason: String },
}

impl RemoteError {
    /// Whether the object is missing: deleted behind the broker's back.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            RemoteError::Store(object_store::Error::NotFound { .. })
        )
    }
}

/// The parts of a copied segment, one object each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The `.log` bytes as they are.
    Log,
    /// The offset index.
    OffsetIndex,
    /// The time index.
    TimeIndex,
    /// The aborted transactions.
    TxnIndex,
    /// The leader epochs up to the segment's end.
    LeaderEpochs,
    /// The producer state when the segment was copied.
    ProducerSnapshot,
}

impl Part {
    pub const ALL: [Part; 6] = [
        Part::Log,
        Part::OffsetIndex,
        Part::TimeIndex,
        Part::TxnIndex,
        Part::LeaderEpochs,
        Part::ProducerSnapshot,
    ];

    fn suffix(self) -> &'static str {
        match self {
            Part::Log => "log",
            Part::OffsetIndex => "index",
            Part::TimeIndex => "timeindex",
            Part::TxnIndex => "txnindex",
            Part::LeaderEpochs => "leader-epoch-checkpoint",
            Part::ProducerSnapshot => "snapshot",
        }
    }
}

/// Where a segment's objects are: its partition and its copy.
#[derive(Debug, Clone, Copy)]
pub struct SegmentName<'a> {
    pub topic: &'a str,
    pub topic_id: Uuid,
    pub partition: i32,
    pub base_offset: u64,
    pub segment_id: Uuid,
}

/// The object store of the remote tier.
#[derive(Debug, Clone)]
pub struct RemoteStore {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    url: String,
}

impl RemoteStore {
    /// The store `url` names: `s3://bucket/prefix` (with `s3_endpoint` for
    /// an S3-compatible server, plain `http://` allowed, and `s3_region`),
    /// `gs://bucket/prefix`, `az://container/prefix` or `file:///path`
    /// (created if missing). Credentials come from the standard
    /// environment variables of each cloud.
    pub fn open(
        url: &str,
        s3_endpoint: Option<&str>,
        s3_region: Option<&str>,
    ) -> Result<Self, RemoteError> {
        let invalid = |reason: &str| RemoteError::InvalidUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid("expected scheme://bucket/prefix"))?;
        // The HTTP clients of the cloud stores take their TLS from the
        // process: the broker's (ring) unless one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (store, prefix): (Arc<dyn ObjectStore>, &str) = match scheme {
            "file" => {
                let dir = std::path::Path::new(rest);
                if !dir.is_absolute() {
                    return Err(invalid(
                        "a file:// URL needs an absolute path, file:///path",
                    ));
                }
                std::fs::create_dir_all(dir)?;
                let local = object_store::local::LocalFileSystem::new_with_prefix(dir)?
                    .with_automatic_cleanup(true);
                (Arc::new(local), "")
            }
            "s3" | "s3a" | "gs" | "az" | "abfs" => {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(invalid("the bucket (or container) is missing"));
                }
                // Short retries: a fetch waits `remote.fetch.max.wait.ms`
                // at most, and a failed copy is tried again at the next
                // pass; a store that is down is told at once.
                let retry = object_store::RetryConfig {
                    backoff: object_store::BackoffConfig {
                        init_backoff: std::time::Duration::from_millis(50),
                        max_backoff: std::time::Duration::from_millis(500),
                        base: 2.0,
                    },
                    max_retries: 2,
                    retry_timeout: std::time::Duration::from_secs(5),
                };
                let store: Arc<dyn ObjectStore> = match scheme {
                    "s3" | "s3a" => {
                        let mut builder = object_store::aws::AmazonS3Builder::from_env()
                            .with_bucket_name(bucket)
                            .with_retry(retry);
                        if let Some(endpoint) = s3_endpoint {
                            builder = builder
                                .with_endpoint(endpoint)
                                .with_allow_http(endpoint.starts_with("http://"));
                        }
                        if let Some(region) = s3_region {
                            builder = builder.with_region(region);
                        }
                        Arc::new(builder.build()?)
                    }
                    "gs" => Arc::new(
                        object_store::gcp::GoogleCloudStorageBuilder::from_env()
                            .with_bucket_name(bucket)
                            .with_retry(retry)
                            .build()?,
                    ),
                    _ => Arc::new(
                        object_store::azure::MicrosoftAzureBuilder::from_env()
                            .with_container_name(bucket)
                            .with_retry(retry)
                            .build()?,
                    ),
                };
                (store, prefix)
            }
            _ => return Err(invalid("the scheme must be s3, gs, az or file")),
        };
        Ok(Self {
            store,
            prefix: Path::from(prefix.trim_matches('/')),
            url: url.to_owned(),
        })
    }

    /// The URL it was opened from, for logs.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn topic_folder(&self, topic: &str, topic_id: Uuid) -> Path {
        self.prefix.clone().join(format!("{topic}-{topic_id}"))
    }

    /// The object of one part of a segment.
    pub fn object(&self, segment: &SegmentName<'_>, part: Part) -> Path {
        self.topic_folder(segment.topic, segment.topic_id)
            .join(segment.partition.to_string())
            .join(format!(
                "{:020}-{}.{}",
                segment.base_offset,
                segment.segment_id,
                part.suffix()
            ))
    }

    /// Writes one object whole.
    pub async fn put(&self, object: &Path, bytes: Bytes) -> Result<(), RemoteError> {
        self.store.put(object, PutPayload::from(bytes)).await?;
        Ok(())
    }

    /// Writes one object from chunks, in a multipart upload when there
    /// are several; an upload that fails is aborted.
    pub async fn put_chunks(
        &self,
        object: &Path,
        mut chunks: impl futures::Stream<Item = Result<Bytes, RemoteError>> + Unpin,
    ) -> Result<(), RemoteError> {
        use futures::StreamExt;
        let Some(first) = chunks.next().await.transpose()? else {
            return self.put(object, Bytes::new()).await;
        };
        let Some(second) = chunks.next().await.transpose()? else {
            return self.put(object, first).await;
        };
        let mut upload = self.store.put_multipart(object).await?;
        // Parts go up PARTS_IN_FLIGHT at a time: one request at a time
        // leaves a store's bandwidth mostly idle.
        // Each part is sent on its own task, so that the next chunk is
        // read meanwhile.
        let result: Result<(), RemoteError> = async {
            let mut in_flight = futures::stream::FuturesOrdered::new();
            in_flight.push_back(tokio::spawn(upload.put_part(first.into())));
            in_flight.push_back(tokio::spawn(upload.put_part(second.into())));
            while let Some(chunk) = chunks.next().await.transpose()? {
                if in_flight.len() >= PARTS_IN_FLIGHT {
                    if let Some(sent) = in_flight.next().await {
                        part_sent(sent)?;
                    }
                }
                in_flight.push_back(tokio::spawn(upload.put_part(chunk.into())));
            }
            while let Some(sent) = in_flight.next().await {
                part_sent(sent)?;
            }
            Ok(())
        }
        .await;
        match result {
            Ok(()) => {
                upload.complete().await?;
                Ok(())
            }
            Err(error) => {
                let _ = upload.abort().await;
                Err(error)
            }
        }
    }

    /// Reads one object whole.
    pub async fn get(&self, object: &Path) -> Result<Bytes, RemoteError> {
        Ok(self.store.get(object).await?.bytes().await?)
    }

    /// Reads a byte range of one object (a ranged GET).
    pub async fn get_range(&self, object: &Path, range: Range<u64>) -> Result<Bytes, RemoteError> {
        Ok(self.store.get_range(object, range).await?)
    }

    /// Deletes every part of a segment; parts already gone are fine.
    pub async fn delete_segment(&self, segment: &SegmentName<'_>) -> Result<(), RemoteError> {
        for part in Part::ALL {
            match self.store.delete(&self.object(segment, part)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// Deletes every object of a topic; returns how many it deleted.
    pub async fn delete_topic(&self, topic: &str, topic_id: Uuid) -> Result<usize, RemoteError> {
        let folder = self.topic_folder(topic, topic_id);
        let objects: Vec<Path> = self
            .store
            .list(Some(&folder))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await?;
        for object in &objects {
            match self.store.delete(object).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(objects.len())
    }
}

/// The outcome of one part's task of a multipart upload.
fn part_sent(
    sent: Result<object_store::Result<()>, tokio::task::JoinError>,
) -> Result<(), RemoteError> {
    sent.map_err(|error| RemoteError::Io(std::io::Error::other(error.to_string())))??;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_store_and_a_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}/tier", dir.path().display());
        let store = RemoteStore::open(&url, None, None).unwrap();
        assert!(dir.path().join("tier").is_dir());
        let name = SegmentName {
            topic: "orders",
            topic_id: Uuid::nil(),
            partition: 3,
            base_offset: 42,
            segment_id: Uuid::nil(),
        };
        assert_eq!(
            store.object(&name, Part::OffsetIndex).to_string(),
            format!(
                "orders-{}/3/00000000000000000042-{}.index",
                Uuid::nil(),
                Uuid::nil()
            )
        );
        let s3 = RemoteStore::open(
            "s3://bucket/some/prefix",
            Some("http://127.0.0.1:9000"),
            Some("us-east-1"),
        )
        .unwrap();
        assert!(s3
            .object(&name, Part::Log)
            .to_string()
            .starts_with("some/prefix/orders-"));
        for bad in [
            "bucket/prefix",
            "ftp://x/y",
            "s3:///prefix",
            "file://relative/dir",
        ] {
            assert!(
                matches!(
                    RemoteStore::open(bad, None, None),
                    Err(RemoteError::InvalidUrl { .. })
                ),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn a_file_store_keeps_what_it_is_given_until_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            RemoteStore::open(&format!("file://{}", dir.path().display()), None, None).unwrap();
        let name = SegmentName {
            topic: "t",
            topic_id: Uuid::new_v4(),
            partition: 0,
            base_offset: 0,
            segment_id: Uuid::new_v4(),
        };
        let chunks = futures::stream::iter(
            [b"hello ".as_slice(), b"remote ", b"tier"].map(|c| Ok(Bytes::from_static(c))),
        );
        store
            .put_chunks(&store.object(&name, Part::Log), chunks)
            .await
            .unwrap();
        let log = store.object(&name, Part::Log);
        assert_eq!(store.get(&log).await.unwrap(), "hello remote tier");
        assert_eq!(store.get_range(&log, 6..12).await.unwrap(), "remote");
        store
            .put(&store.object(&name, Part::OffsetIndex), Bytes::new())
            .await
            .unwrap();
        store.delete_segment(&name).await.unwrap();
        assert!(store.get(&log).await.unwrap_err().is_not_found());
        assert_eq!(store.delete_topic("t", name.topic_id).await.unwrap(), 0);
    }
}
