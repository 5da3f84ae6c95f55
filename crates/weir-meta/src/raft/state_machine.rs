//! The Raft state machine: committed entries applied to a
//! [`MetadataImage`], and snapshots of it kept in `raft.snapshot`.
//!
//! The image itself is not written on every apply: the log holds the
//! entries, and a snapshot (the image, the last applied log id and the
//! membership) is written whenever openraft builds or installs one. After
//! a restart the state machine starts from the last snapshot and openraft
//! applies the committed entries after it again.
//!
//! `raft.snapshot` is the magic `WEIRRSNP`, the crc32c (big-endian) of the
//! rest, then JSON `{"meta": ..., "body": {"last_applied", "membership",
//! "image"}}`; it is replaced whole (temporary file, fsync, rename,
//! directory fsync).

use std::fs;
use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, StorageIOError};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::{debug, info};

use crate::command::Applied;
use crate::disk::{remove_if_exists, sync_dir, write_synced};
use crate::error::{IoContext, MetaError};
use crate::image::MetadataImage;

use super::types::{
    ApplyResult, Entry, LogId, Rejection, Snapshot, SnapshotMeta, StorageError, StoredMembership,
    TypeConfig,
};

/// The snapshot's file name.
pub(crate) const RAFT_SNAPSHOT_FILE: &str = "raft.snapshot";
const RAFT_SNAPSHOT_TMP: &str = "raft.snapshot.tmp";
const MAGIC: &[u8; 8] = b"WEIRRSNP";

/// What a snapshot holds: the bytes sent to followers are this as JSON.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct SnapshotBody {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    image: MetadataImage,
}

/// `raft.snapshot` as JSON.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta,
    body: SnapshotBody,
}

/// The current snapshot: its description and its bytes.
#[derive(Clone, Debug)]
struct Stored {
    meta: SnapshotMeta,
    data: Vec<u8>,
}

/// The state machine; clones share it (one serves as snapshot builder).
#[derive(Clone, Debug)]
pub(crate) struct StateMachine {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    image: MetadataImage,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    snapshot: Option<Stored>,
    /// Makes snapshot ids unique within this process.
    snapshot_seq: u64,
    publisher: watch::Sender<Arc<MetadataImage>>,
}

impl StateMachine {
    /// Opens the state machine in `dir`: the image of `raft.snapshot`, or
    /// the empty image. The receiver sees the image after every apply.
    pub(crate) fn open(
        dir: &Path,
    ) -> Result<(StateMachine, watch::Receiver<Arc<MetadataImage>>), MetaError> {
        fs::create_dir_all(dir).context(dir)?;
        remove_if_exists(&dir.join(RAFT_SNAPSHOT_TMP))?;
        let path = dir.join(RAFT_SNAPSHOT_FILE);
        let (image, last_applied, membership, snapshot) = match read_snapshot(&path)? {
            Some(file) => {
                let data = encode_body(&file.body, &path)?;
                info!(
                    dir = %dir.display(),
                    last_applied = ?file.body.last_applied,
                    "raft snapshot loaded"
                );
                (
                    file.body.image,
                    file.body.last_applied,
                    file.body.membership,
                    Some(Stored {
                        meta: file.meta,
                        data,
                    }),
                )
            }
            None => (
                MetadataImage::default(),
                None,
                StoredMembership::default(),
                None,
            ),
        };
        let (publisher, receiver) = watch::channel(Arc::new(image.clone()));
        Ok((
            StateMachine {
                inner: Arc::new(Mutex::new(Inner {
                    dir: dir.to_owned(),
                    image,
                    last_applied,
                    membership,
                    snapshot,
                    snapshot_seq: 0,
                    publisher,
                })),
            },
            receiver,
        ))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Inner {
    fn publish(&self) {
        self.publisher.send_replace(Arc::new(self.image.clone()));
    }

    /// Writes `raft.snapshot` atomically and makes it the current one.
    fn persist(&mut self, meta: SnapshotMeta, body: SnapshotBody) -> Result<Vec<u8>, MetaError> {
        let path = self.dir.join(RAFT_SNAPSHOT_FILE);
        let data = encode_body(&body, &path)?;
        let file = SnapshotFile { meta, body };
        let json = serde_json::to_vec(&file).map_err(|e| MetaError::Corrupt {
            path: path.clone(),
            reason: format!("the snapshot cannot be encoded: {e}"),
        })?;
        let mut bytes = Vec::with_capacity(12 + json.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&crc32c::crc32c(&json).to_be_bytes());
        bytes.extend_from_slice(&json);
        let tmp = self.dir.join(RAFT_SNAPSHOT_TMP);
        write_synced(&tmp, &bytes)?;
        fs::rename(&tmp, &path).context(&path)?;
        sync_dir(&self.dir)?;
        self.snapshot = Some(Stored {
            meta: file.meta,
            data: data.clone(),
        });
        Ok(data)
    }
}

fn encode_body(body: &SnapshotBody, path: &Path) -> Result<Vec<u8>, MetaError> {
    serde_json::to_vec(body).map_err(|e| MetaError::Corrupt {
        path: path.to_owned(),
        reason: format!("the snapshot cannot be encoded: {e}"),
    })
}

fn read_snapshot(path: &Path) -> Result<Option<SnapshotFile>, MetaError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(MetaError::Io {
                path: path.to_owned(),
                source,
            })
        }
    };
    let corrupt = |reason: String| MetaError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Err(corrupt(
            "bad magic at byte 0: not a Weir raft snapshot".into(),
        ));
    }
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[8..12]);
    let stored = u32::from_be_bytes(word);
    let computed = crc32c::crc32c(&bytes[12..]);
    if stored != computed {
        return Err(corrupt(format!(
            "checksum mismatch over bytes 12..{} (stored {stored:#010x}, computed {computed:#010x})",
            bytes.len()
        )));
    }
    serde_json::from_slice(&bytes[12..])
        .map(Some)
        .map_err(|e| corrupt(format!("the snapshot does not decode: {e}")))
}

fn snapshot_error(meta: Option<&SnapshotMeta>, verb: ErrorVerb, e: &MetaError) -> StorageError {
    StorageIOError::new(ErrorSubject::Snapshot(meta.map(|m| m.signature())), verb, e).into()
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let mut inner = self.lock();
        inner.snapshot_seq += 1;
        let last_applied = inner.last_applied;
        let meta = SnapshotMeta {
            last_log_id: last_applied,
            last_membership: inner.membership.clone(),
            snapshot_id: format!(
                "{}-{}-{}",
                last_applied.map_or(0, |id| id.leader_id.term),
                last_applied.map_or(0, |id| id.index),
                inner.snapshot_seq
            ),
        };
        let body = SnapshotBody {
            last_applied,
            membership: inner.membership.clone(),
            image: inner.image.clone(),
        };
        let data = inner
            .persist(meta.clone(), body)
            .map_err(|e| snapshot_error(Some(&meta), ErrorVerb::Write, &e))?;
        info!(snapshot_id = %meta.snapshot_id, bytes = data.len(), "raft snapshot built");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let inner = self.lock();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ApplyResult>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut inner = self.lock();
        let mut results = Vec::new();
        let mut changed = false;
        for entry in entries {
            inner.last_applied = Some(entry.log_id);
            let result = match entry.payload {
                EntryPayload::Blank => Ok(Applied::Done),
                EntryPayload::Normal(cmd) => match inner.image.apply(&cmd) {
                    Ok(applied) => {
                        changed = true;
                        Ok(applied)
                    }
                    Err(e) => {
                        debug!(log_id = %entry.log_id, error = %e, "command rejected");
                        Err(Rejection::from(&e))
                    }
                },
                EntryPayload::Membership(m) => {
                    inner.membership = StoredMembership::new(Some(entry.log_id), m);
                    Ok(Applied::Done)
                }
            };
            results.push(ApplyResult(result));
        }
        if changed {
            inner.publish();
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let body: SnapshotBody = serde_json::from_slice(&data).map_err(|e| {
            let e = MetaError::Corrupt {
                path: PathBuf::from("<received snapshot>"),
                reason: format!("the snapshot does not decode: {e}"),
            };
            snapshot_error(Some(meta), ErrorVerb::Read, &e)
        })?;
        let mut inner = self.lock();
        let body = SnapshotBody {
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            image: body.image,
        };
        inner.image = body.image.clone();
        inner.last_applied = body.last_applied;
        inner.membership = body.membership.clone();
        inner
            .persist(meta.clone(), body)
            .map_err(|e| snapshot_error(Some(meta), ErrorVerb::Write, &e))?;
        inner.publish();
        info!(snapshot_id = %meta.snapshot_id, last_log_id = ?meta.last_log_id, "raft snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let inner = self.lock();
        Ok(inner.snapshot.as_ref().map(|s| Snapshot {
            meta: s.meta.clone(),
            snapshot: Box::new(Cursor::new(s.data.clone())),
        }))
    }
}

#[cfg(test)]
mod replay_prop;

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use openraft::testing::log_id;
    use openraft::Membership;

    use super::*;
    use crate::command::Command;
    use crate::model::BrokerInfo;
    use crate::raft::types::ControllerNode;

    fn normal(index: u64, cmd: Command) -> Entry {
        Entry {
            log_id: log_id(1, 1, index),
            payload: EntryPayload::Normal(cmd),
        }
    }

    fn broker(id: i32) -> Command {
        Command::RegisterBroker(BrokerInfo {
            id,
            host: "h".into(),
            port: 9092,
            rack: None,
            incarnation: uuid::Uuid::from_u128(1),
            previous_incarnation: None,
            listeners: Vec::new(),
        })
    }

    fn membership() -> Membership<u64, ControllerNode> {
        Membership::new(
            vec![BTreeSet::from([1])],
            BTreeMap::from([(
                1,
                ControllerNode {
                    addr: "127.0.0.1:1".into(),
                },
            )]),
        )
    }

    #[tokio::test]
    async fn apply_reports_rejections_and_publishes_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sm, mut rx) = StateMachine::open(dir.path()).unwrap();
        let results = sm
            .apply([
                Entry {
                    log_id: log_id(0, 0, 0),
                    payload: EntryPayload::Membership(membership()),
                },
                normal(1, broker(1)),
                normal(
                    2,
                    Command::DeleteTopic {
                        name: "none".into(),
                    },
                ),
                normal(3, Command::AllocateProducerIds { count: 3 }),
            ])
            .await
            .unwrap();
        assert_eq!(
            results,
            vec![
                ApplyResult(Ok(Applied::Done)),
                ApplyResult(Ok(Applied::Done)),
                ApplyResult(Err(Rejection::UnknownTopic("none".into()))),
                ApplyResult(Ok(Applied::ProducerIds { first: 0, count: 3 })),
            ]
        );
        assert!(rx.has_changed().unwrap());
        let image = rx.borrow_and_update().clone();
        assert_eq!(image.applied_index(), 2);
        let (applied, stored) = sm.applied_state().await.unwrap();
        assert_eq!(applied, Some(log_id(1, 1, 3)));
        assert_eq!(stored.log_id(), &Some(log_id(0, 0, 0)));
    }

    #[tokio::test]
    async fn snapshots_survive_reopen_and_install_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sm, _rx) = StateMachine::open(dir.path()).unwrap();
        sm.apply([
            Entry {
                log_id: log_id(0, 0, 0),
                payload: EntryPayload::Membership(membership()),
            },
            normal(1, broker(1)),
            normal(2, broker(2)),
        ])
        .await
        .unwrap();
        let snapshot = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        assert_eq!(snapshot.meta.last_log_id, Some(log_id(1, 1, 2)));
        let image = sm.lock().image.clone();
        drop(sm);

        let (mut reopened, rx) = StateMachine::open(dir.path()).unwrap();
        assert_eq!(**rx.borrow(), image);
        let (applied, _) = reopened.applied_state().await.unwrap();
        assert_eq!(applied, Some(log_id(1, 1, 2)));
        let current = reopened.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(current.meta, snapshot.meta);

        let other = tempfile::tempdir().unwrap();
        let (mut follower, mut rx) = StateMachine::open(other.path()).unwrap();
        follower
            .install_snapshot(&current.meta, current.snapshot)
            .await
            .unwrap();
        assert_eq!(**rx.borrow_and_update(), image);
        let (applied, stored) = follower.applied_state().await.unwrap();
        assert_eq!(applied, Some(log_id(1, 1, 2)));
        assert_eq!(stored.log_id(), &Some(log_id(0, 0, 0)));
        drop(follower);
        let (_, rx) = StateMachine::open(other.path()).unwrap();
        assert_eq!(**rx.borrow(), image);

        // A damaged snapshot file is reported, never half loaded.
        let path = other.path().join(RAFT_SNAPSHOT_FILE);
        let mut bytes = fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x01;
        fs::write(&path, bytes).unwrap();
        assert!(matches!(
            StateMachine::open(other.path()),
            Err(MetaError::Corrupt { .. })
        ));
    }
}
