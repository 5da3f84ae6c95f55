//! A partition's appender: where client batches and transaction markers are
//! written, off the runtime's workers (the partition I/O boundary).
//!
//! [`Partition::append`] and [`Partition::write_marker_async`] queue their
//! write at once, so writes a connection makes one after another keep their
//! order, and return a future of its outcome. While no write runs, the first
//! one queued starts a drain on the blocking pool; writes that arrive while
//! it runs are taken together in its next pass. Appends that
//! `flush.messages` wants synced go on to a second stage, the sync drain,
//! which runs one fsync for all those waiting while the writes drain goes
//! on with the next ones (group commit by construction). A runtime worker never waits on the log's locks,
//! a `pwrite` or an fsync, so a partition stalled on its disk holds up only
//! the requests that wait for it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::sync::oneshot;
use weir_log::batch::CheckedBatch;

use super::{AppendError, AppendOrigin, Appended, FlushDue, Partition, RequiredAcks, Written};

/// A write queued on a partition's appender: resolves to where it went in
/// the log, or why it was refused.
#[must_use = "the write is queued either way; its outcome is lost unless awaited"]
pub struct QueuedWrite(oneshot::Receiver<Result<Appended, AppendError>>);

impl Future for QueuedWrite {
    type Output = Result<Appended, AppendError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|outcome| outcome.unwrap_or(Err(AppendError::Abandoned)))
    }
}

/// The writes queued for a partition and the appends waiting for their
/// fsync, each with whether a drain is taking them. Writing and syncing
/// are two stages: the next writes go into the log while the last ones
/// are synced, and one fsync covers every append made before it.
#[derive(Default)]
pub(super) struct Appender {
    queue: Mutex<Queue>,
    syncs: Mutex<Syncs>,
}

#[derive(Default)]
struct Queue {
    writes: Vec<Write>,
    draining: bool,
}

/// Appends in the log that `flush.messages` wants synced before they are
/// answered.
#[derive(Default)]
struct Syncs {
    due: Vec<(Reply, FlushDue)>,
    syncing: bool,
}

type Reply = oneshot::Sender<Result<Appended, AppendError>>;

/// A queued write and who waits for its outcome.
struct Write {
    kind: WriteKind,
    reply: Reply,
}

enum WriteKind {
    Batch {
        batch: CheckedBatch,
        leader_epoch: i32,
        origin: AppendOrigin,
        acks: RequiredAcks,
    },
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: i32,
    },
}

impl Partition {
    /// Appends one producer batch, checked where it arrived, as
    /// [`append_from`](Self::append_from) does, off the runtime's workers: the batch is queued now, and the
    /// future gives where it went once it is in the log (and synced, when
    /// `flush.messages` asks).
    pub fn append(
        self: &Arc<Self>,
        batch: CheckedBatch,
        leader_epoch: i32,
        origin: AppendOrigin,
        acks: RequiredAcks,
    ) -> QueuedWrite {
        self.queue_write(WriteKind::Batch {
            batch,
            leader_epoch,
            origin,
            acks,
        })
    }

    /// Writes a transaction marker as [`write_marker`](Self::write_marker)
    /// does, off the runtime's workers.
    pub fn write_marker_async(
        self: &Arc<Self>,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: i32,
    ) -> QueuedWrite {
        self.queue_write(WriteKind::Marker {
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            leader_epoch,
        })
    }

    fn queue_write(self: &Arc<Self>, kind: WriteKind) -> QueuedWrite {
        let (reply, outcome) = oneshot::channel();
        let start_drain = {
            let mut queue = self.appender.queue.lock();
            queue.writes.push(Write { kind, reply });
            !std::mem::replace(&mut queue.draining, true)
        };
        if start_drain {
            let partition = self.clone();
            tokio::task::spawn_blocking(move || partition.drain_writes());
        }
        QueuedWrite(outcome)
    }

    /// Takes the queued writes, pass after pass, until none is left.
    fn drain_writes(self: Arc<Self>) {
        let _reset = ResetOnPanic(&self.appender);
        loop {
            let writes = {
                let mut queue = self.appender.queue.lock();
                if queue.writes.is_empty() {
                    queue.draining = false;
                    return;
                }
                std::mem::take(&mut queue.writes)
            };
            let mut to_sync = Vec::new();
            for Write { kind, reply } in writes {
                let written = match kind {
                    WriteKind::Batch {
                        batch,
                        leader_epoch,
                        origin,
                        acks,
                    } => self.append_unflushed(&batch, leader_epoch, origin, acks),
                    WriteKind::Marker {
                        producer_id,
                        producer_epoch,
                        commit,
                        coordinator_epoch,
                        leader_epoch,
                    } => self.write_marker_unflushed(
                        producer_id,
                        producer_epoch,
                        commit,
                        coordinator_epoch,
                        leader_epoch,
                    ),
                };
                match written {
                    Ok(Written::Appended(appended)) => {
                        let _ = reply.send(Ok(appended));
                    }
                    Ok(Written::FlushDue(due)) => to_sync.push((reply, due)),
                    Err(error) => {
                        let _ = reply.send(Err(error));
                    }
                }
            }
            if !to_sync.is_empty() {
                self.queue_syncs(to_sync);
            }
        }
    }

    fn queue_syncs(self: &Arc<Self>, due: Vec<(Reply, FlushDue)>) {
        let start_sync = {
            let mut syncs = self.appender.syncs.lock();
            syncs.due.extend(due);
            !std::mem::replace(&mut syncs.syncing, true)
        };
        if start_sync {
            let partition = self.clone();
            tokio::task::spawn_blocking(move || partition.drain_syncs());
        }
    }

    /// Syncs what the appends queued for it, one fsync for all of those
    /// waiting, until none is left.
    fn drain_syncs(&self) {
        let _reset = ResetOnPanic(&self.appender);
        loop {
            let due = {
                let mut syncs = self.appender.syncs.lock();
                if syncs.due.is_empty() {
                    syncs.syncing = false;
                    return;
                }
                std::mem::take(&mut syncs.due)
            };
            let (replies, dues): (Vec<_>, Vec<_>) = due.into_iter().unzip();
            match self.flush_appended_all(&dues) {
                Ok(()) => {
                    for (reply, due) in replies.into_iter().zip(&dues) {
                        let _ = reply.send(Ok(due.appended()));
                    }
                }
                Err(error) => {
                    tracing::error!(topic = %self.topic, partition = self.index, %error, "flush failed");
                    let message = error.to_string();
                    for reply in replies {
                        let _ = reply.send(Err(AppendError::FlushFailed(message.clone())));
                    }
                }
            }
        }
    }
}

/// Should an append or a sync panic, both queues are emptied (their
/// writers hear [`AppendError::Abandoned`]) and the next write starts new
/// drains, so a bug fails the writes at hand, not the partition for good.
struct ResetOnPanic<'a>(&'a Appender);

impl Drop for ResetOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut queue = self.0.queue.lock();
            queue.writes.clear();
            queue.draining = false;
            drop(queue);
            let mut syncs = self.0.syncs.lock();
            syncs.due.clear();
            syncs.syncing = false;
        }
    }
}
