//! The coordinator runtime: one shard per internal-topic partition led
//! here, owning everything stored in that partition, and the events that
//! read and change it, run one at a time off the runtime's workers.
//!
//! The shape is Kafka's `CoordinatorRuntime`: an operation looks at its
//! shard and returns an [`Outcome`], the records to write and its result;
//! the runtime appends the records to the partition, replays them into the
//! shard (the same code that rebuilds the shard when it is loaded, so the
//! state in memory is always what the log says), and answers once the
//! in-sync replicas hold the write. Events of one shard run in order on
//! the blocking pool, so an operation never waits on a lock held across
//! disk I/O, and neither does a runtime worker: callers await the event's
//! outcome.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::oneshot;
use weir_log::LogError;

use super::batches::{encode_batch, for_each_item, Entry, Item, TxnProducer};
use crate::partition::{
    check_single_batch, AppendError, AppendOrigin, Appended, Partition, ReplicatedWrite,
    RequiredAcks, Written,
};

/// How long a coordinator's write may take to reach the in-sync replicas
/// before the request it answers fails (Kafka's `offsets.commit.timeout.ms`).
pub const COORDINATOR_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The state one internal-topic partition holds, rebuilt from its log.
pub trait Shard: Default + Send + 'static {
    /// Applies one record (or transaction marker) of the partition's log:
    /// while loading, and after each write of the shard's own.
    fn replay(&mut self, item: Item);

    /// Applies a record the shard's own operation just wrote at `item`'s
    /// offset, which the in-sync replicas may not hold yet (they hold what
    /// is below `high_watermark`).
    fn replay_written(&mut self, item: Item, high_watermark: u64) {
        let _ = high_watermark;
        self.replay(item);
    }

    /// How many entries the shard holds, for the line that reports a load.
    fn size(&self) -> usize;
}

/// What an operation gives: the records to write (none for a read or a
/// refusal), and its result, answered once they are replicated.
pub struct Outcome<R> {
    pub records: Vec<Entry>,
    /// The producer whose transaction the records belong to, if any.
    pub producer: Option<TxnProducer>,
    pub result: R,
}

impl<R> Outcome<R> {
    /// A result with nothing to write.
    pub fn answer(result: R) -> Self {
        Self {
            records: Vec::new(),
            producer: None,
            result,
        }
    }

    /// A result to give once `records` are in the log and replicated.
    pub fn write(records: Vec<Entry>, result: R) -> Self {
        Self {
            records,
            producer: None,
            result,
        }
    }
}

/// An operation applied to its shard, its records (if any) in the local
/// log: the result, and the write to await for the in-sync replicas.
pub struct Applied<R> {
    pub result: R,
    pub write: Option<ReplicatedWrite>,
}

/// Why the runtime could not run an operation or write its records, as a
/// coordinator answers it.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    #[error("this broker does not lead the coordinator's partition")]
    NotCoordinator,
    #[error("the coordinator's partition is being loaded")]
    LoadInProgress,
    #[error("the coordinator's write failed: {0}")]
    Append(#[from] AppendError),
    #[error("the coordinator's write was not replicated: {0:?}")]
    NotReplicated(ResponseError),
}

impl CoordinatorError {
    /// Kafka's error for it: a write that failed or was not replicated in
    /// time is COORDINATOR_NOT_AVAILABLE, or NOT_COORDINATOR once
    /// leadership moved.
    pub fn response_error(&self) -> ResponseError {
        match self {
            Self::NotCoordinator => ResponseError::NotCoordinator,
            Self::LoadInProgress => ResponseError::CoordinatorLoadInProgress,
            Self::Append(AppendError::NotLeader { .. }) => ResponseError::NotCoordinator,
            Self::Append(_) => ResponseError::CoordinatorNotAvailable,
            Self::NotReplicated(error) => *error,
        }
    }

    pub fn code(&self) -> i16 {
        self.response_error().code()
    }
}

/// The shards of one internal topic's partitions led by this node.
pub struct CoordinatorRuntime<S> {
    topic: &'static str,
    node_id: i32,
    /// How long a write may take to reach the in-sync replicas.
    write_timeout: Duration,
    shards: Mutex<HashMap<i32, Arc<Hosted<S>>>>,
}

/// What the operations of a shard may know of where it is hosted.
pub struct ShardContext<'a> {
    pub partition: &'a Arc<Partition>,
    /// The leader epoch the shard was loaded at: Kafka's coordinator
    /// epoch, written into transaction markers.
    pub leader_epoch: i32,
}

type Event<S> = Box<dyn FnOnce(&mut ShardTurn<'_, S>, &ShardContext<'_>) + Send>;

/// The shard an event runs on, in its turn: it derefs to the shard. A
/// write ([`append`](Self::append)) lets go of it while the partition
/// writes, so that a read between events ([`CoordinatorRuntime::inspect`])
/// never waits for disk I/O.
pub struct ShardTurn<'a, S>(MutexGuard<'a, S>);

impl<S> std::ops::Deref for ShardTurn<'_, S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.0
    }
}

impl<S> std::ops::DerefMut for ShardTurn<'_, S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.0
    }
}

impl<S: Shard> ShardTurn<'_, S> {
    /// Appends `records` to the shard's partition, the shard let go while
    /// the partition writes, then replays them into the shard at the
    /// offsets they were given. For an event that holds no part of the
    /// shard out: a read between events may see the shard as it was
    /// before the records, never half changed; the next event waits.
    pub fn append(
        &mut self,
        context: &ShardContext<'_>,
        records: &[Entry],
        producer: Option<TxnProducer>,
        now_ms: i64,
    ) -> Result<ReplicatedWrite, CoordinatorError> {
        let appended = MutexGuard::unlocked(&mut self.0, || {
            write_batch(context, records, producer, now_ms)
        })?;
        Ok(replay_appended(
            &mut *self.0,
            context.partition,
            records,
            producer,
            &appended,
        ))
    }
}

/// One shard and its queue of events.
struct Hosted<S> {
    partition: Arc<Partition>,
    leader_epoch: i32,
    /// Taken by the drain running the events, one at a time (and let go
    /// while an event's records are written), and by reads between events.
    shard: Mutex<S>,
    queue: Mutex<Queue<S>>,
}

struct Queue<S> {
    events: Vec<Event<S>>,
    draining: bool,
}

impl<S: Shard> CoordinatorRuntime<S> {
    pub fn new(topic: &'static str, node_id: i32) -> Self {
        Self {
            topic,
            node_id,
            write_timeout: COORDINATOR_WRITE_TIMEOUT,
            shards: Mutex::default(),
        }
    }

    /// Writes wait up to `timeout` for the in-sync replicas instead.
    pub fn with_write_timeout(self, timeout: Duration) -> Self {
        Self {
            write_timeout: timeout,
            ..self
        }
    }

    /// This node leads `partition` now: its shard is rebuilt by replaying
    /// the log, then takes events. Reads the log where it is called, which
    /// must not be a runtime worker. Returns the shard's size.
    ///
    /// The shard is in place, locked, before the log is read: events for it
    /// wait for the load, and what reaches the log meanwhile from outside
    /// the shard (a transaction marker) is either read or applied after.
    pub fn load(&self, partition: Arc<Partition>) -> Result<usize, LogError> {
        self.load_with(partition, |_| {})
    }

    /// [`load`](Self::load), then `loaded` on the shard before any event
    /// reaches it: for what a shard derives from its records at once.
    pub fn load_with(
        &self,
        partition: Arc<Partition>,
        loaded: impl FnOnce(&mut S),
    ) -> Result<usize, LogError> {
        let hosted = Arc::new(Hosted {
            leader_epoch: partition.replica_state().leader_epoch,
            shard: Mutex::new(S::default()),
            queue: Mutex::new(Queue {
                events: Vec::new(),
                draining: false,
            }),
            partition: partition.clone(),
        });
        let mut shard = hosted.shard.lock();
        self.shards.lock().insert(partition.index, hosted.clone());
        let replayed = for_each_item(&partition, |item| shard.replay(item));
        if let Err(error) = replayed {
            drop(shard);
            self.unload_if(partition.index, &hosted);
            return Err(error);
        }
        loaded(&mut shard);
        Ok(shard.size())
    }

    /// Unloads `index` if `hosted` is still its shard.
    fn unload_if(&self, index: i32, hosted: &Arc<Hosted<S>>) {
        let mut shards = self.shards.lock();
        if shards.get(&index).is_some_and(|h| Arc::ptr_eq(h, hosted)) {
            shards.remove(&index);
        }
    }

    /// Another node leads `index` now. Events already queued still run,
    /// and their writes fail: the partition's leader epoch moved on.
    pub fn unload(&self, index: i32) {
        self.shards.lock().remove(&index);
    }

    /// Whether the shard of `index` is loaded here.
    pub fn hosts(&self, index: i32) -> bool {
        self.shards.lock().contains_key(&index)
    }

    /// The partitions whose shards are loaded here, in order.
    pub fn hosted(&self) -> Vec<i32> {
        let mut hosted: Vec<i32> = self.shards.lock().keys().copied().collect();
        hosted.sort_unstable();
        hosted
    }

    /// Runs `op` on the shard of `index` at once, on this thread, between
    /// two of its events (it waits for a running one, never for its
    /// write): for reads that cannot wait for their turn. `None` if the
    /// shard is not loaded here.
    pub fn inspect<R>(&self, index: i32, op: impl FnOnce(&S) -> R) -> Option<R> {
        let hosted = self.shards.lock().get(&index).cloned()?;
        let shard = hosted.shard.lock();
        Some(op(&shard))
    }

    /// [`inspect`](Self::inspect) on every shard loaded here, in partition
    /// order.
    pub fn inspect_all<R>(&self, mut op: impl FnMut(i32, &S) -> R) -> Vec<R> {
        let mut hosted: Vec<(i32, Arc<Hosted<S>>)> = self
            .shards
            .lock()
            .iter()
            .map(|(index, hosted)| (*index, hosted.clone()))
            .collect();
        hosted.sort_unstable_by_key(|(index, _)| *index);
        hosted
            .into_iter()
            .map(|(index, hosted)| op(index, &hosted.shard.lock()))
            .collect()
    }

    /// Runs `op` on the shard of `index` in turn and writes what it
    /// returns; the future answers once the in-sync replicas hold it.
    pub fn write<R, E>(
        &self,
        index: i32,
        now_ms: i64,
        op: impl FnOnce(&mut S, &ShardContext<'_>) -> Result<Outcome<R>, E> + Send + 'static,
    ) -> impl Future<Output = Result<R, E>> + Send + 'static
    where
        R: Send + 'static,
        E: From<CoordinatorError> + Send + 'static,
    {
        let written = self.write_unreplicated(index, now_ms, op);
        let (node_id, timeout) = (self.node_id, self.write_timeout);
        async move {
            let Applied { result, write } = written.await?;
            if let Some(write) = write {
                write
                    .replicated(node_id, timeout)
                    .await
                    .map_err(|error| E::from(CoordinatorError::NotReplicated(error)))?;
            }
            Ok(result)
        }
    }

    /// [`write`](Self::write), answering once the records are in the
    /// local log, with the write to await for the in-sync replicas.
    pub fn write_unreplicated<R, E>(
        &self,
        index: i32,
        now_ms: i64,
        op: impl FnOnce(&mut S, &ShardContext<'_>) -> Result<Outcome<R>, E> + Send + 'static,
    ) -> EventOutcome<Result<Applied<R>, E>>
    where
        R: Send + 'static,
        E: From<CoordinatorError> + Send + 'static,
    {
        self.submit(index, move |turn, context| {
            let outcome = op(turn, context)?;
            let write = if outcome.records.is_empty() {
                None
            } else {
                // The operation is done with the shard: it is whole.
                let write = turn
                    .append(context, &outcome.records, outcome.producer, now_ms)
                    .map_err(E::from)?;
                Some(write)
            };
            Ok(Applied {
                result: outcome.result,
                write,
            })
        })
    }

    /// Runs `op` on the shard of `index` in turn, with where the shard is
    /// hosted: for an operation that writes by itself
    /// ([`ShardTurn::append`]).
    pub fn run<R, E>(
        &self,
        index: i32,
        op: impl FnOnce(&mut ShardTurn<'_, S>, &ShardContext<'_>) -> Result<R, E> + Send + 'static,
    ) -> EventOutcome<Result<R, E>>
    where
        R: Send + 'static,
        E: From<CoordinatorError> + Send + 'static,
    {
        self.submit(index, op)
    }

    /// Runs `op` on the shard of `index` in turn, after the events queued
    /// before it.
    pub fn read<R, E>(
        &self,
        index: i32,
        op: impl FnOnce(&S) -> Result<R, E> + Send + 'static,
    ) -> EventOutcome<Result<R, E>>
    where
        R: Send + 'static,
        E: From<CoordinatorError> + Send + 'static,
    {
        self.submit(index, move |shard, _| op(shard))
    }

    fn submit<T, E>(
        &self,
        index: i32,
        event: impl FnOnce(&mut ShardTurn<'_, S>, &ShardContext<'_>) -> Result<T, E> + Send + 'static,
    ) -> EventOutcome<Result<T, E>>
    where
        T: Send + 'static,
        E: From<CoordinatorError> + Send + 'static,
    {
        let (reply, outcome) = oneshot::channel();
        let Some(hosted) = self.shards.lock().get(&index).cloned() else {
            let _ = reply.send(Err(E::from(CoordinatorError::NotCoordinator)));
            return EventOutcome(outcome);
        };
        let start_drain = {
            let mut queue = hosted.queue.lock();
            queue.events.push(Box::new(move |shard, context| {
                let _ = reply.send(event(shard, context));
            }));
            !std::mem::replace(&mut queue.draining, true)
        };
        if start_drain {
            let topic = self.topic;
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn_blocking(move || hosted.drain(topic));
                }
                // No runtime (a tool, a plain test): the caller's thread is
                // the one to run it.
                Err(_) => hosted.drain(topic),
            }
        }
        EventOutcome(outcome)
    }
}

impl<S: Shard> Hosted<S> {
    /// Runs the queued events, pass after pass, until none is left. An
    /// event that panics fails alone (its caller hears it was abandoned);
    /// the events after it run.
    fn drain(&self, topic: &'static str) {
        let context = ShardContext {
            partition: &self.partition,
            leader_epoch: self.leader_epoch,
        };
        loop {
            let events = {
                let mut queue = self.queue.lock();
                if queue.events.is_empty() {
                    queue.draining = false;
                    return;
                }
                std::mem::take(&mut queue.events)
            };
            let mut turn = ShardTurn(self.shard.lock());
            for event in events {
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    event(&mut turn, &context);
                }));
                if run.is_err() {
                    tracing::error!(
                        topic,
                        partition = self.partition.index,
                        "a coordinator event panicked; its request fails"
                    );
                }
            }
            tracing::trace!(
                topic,
                partition = self.partition.index,
                "coordinator events run"
            );
        }
    }
}

/// Appends `records` to the shard's partition and replays them into the
/// shard at the offsets they were given: what a caller that hosts a shard
/// by itself (the seeded simulation) does, [`ShardTurn::append`] without
/// the lock.
#[cfg(test)]
pub(crate) fn append<S: Shard>(
    shard: &mut S,
    context: &ShardContext<'_>,
    records: &[Entry],
    producer: Option<TxnProducer>,
    now_ms: i64,
) -> Result<ReplicatedWrite, CoordinatorError> {
    let appended = write_batch(context, records, producer, now_ms)?;
    Ok(replay_appended(
        shard,
        context.partition,
        records,
        producer,
        &appended,
    ))
}

/// Writes `records` as one batch to the shard's partition, durable as the
/// partition's `flush.messages` asks.
fn write_batch(
    context: &ShardContext<'_>,
    records: &[Entry],
    producer: Option<TxnProducer>,
    now_ms: i64,
) -> Result<Appended, CoordinatorError> {
    let partition = context.partition;
    let batch = check_single_batch(&encode_batch(records, now_ms, producer).freeze())?;
    let written = partition.append_unflushed(
        &batch,
        context.leader_epoch,
        AppendOrigin::Coordinator,
        RequiredAcks::All,
    )?;
    Ok(match written {
        Written::Appended(appended) => appended,
        Written::FlushDue(due) => {
            let appended = due.appended();
            partition.flush_appended(due)?;
            appended
        }
    })
}

/// Replays `records`, just written at `appended`, into `shard`: the write
/// for the caller to await.
fn replay_appended<S: Shard>(
    shard: &mut S,
    partition: &Arc<Partition>,
    records: &[Entry],
    producer: Option<TxnProducer>,
    appended: &Appended,
) -> ReplicatedWrite {
    let high_watermark = partition.high_watermark();
    for (at, entry) in (appended.base_offset..).zip(records) {
        let item = Item::Record {
            key: entry.key.clone(),
            value: entry.value.clone(),
            at,
            transaction: producer.map(|p| p.id),
        };
        shard.replay_written(item, high_watermark);
    }
    ReplicatedWrite::of(partition.clone(), appended)
}

/// The outcome of an event queued on a shard. Await it, or wait for it
/// from a thread of the blocking pool.
#[must_use = "the event runs either way; its outcome is lost unless awaited"]
pub struct EventOutcome<T>(oneshot::Receiver<T>);

impl<T, E: From<CoordinatorError>> Future for EventOutcome<Result<T, E>> {
    type Output = Result<T, E>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map(|outcome| outcome.unwrap_or_else(|_| Err(abandoned())))
    }
}

/// An event that panicked, or was dropped unrun.
fn abandoned<E: From<CoordinatorError>>() -> E {
    E::from(CoordinatorError::Append(AppendError::Abandoned))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use weir_log::LogConfig;

    use super::*;

    /// A shard keeping the latest value of each key and where it was read.
    #[derive(Default)]
    struct Latest(HashMap<Bytes, (u64, Option<Bytes>)>);

    impl Shard for Latest {
        fn replay(&mut self, item: Item) {
            if let Item::Record { key, value, at, .. } = item {
                self.0.insert(key, (at, value));
            }
        }

        fn size(&self) -> usize {
            self.0.len()
        }
    }

    fn entry(key: &'static str, value: &'static str) -> Entry {
        Entry {
            key: Bytes::from_static(key.as_bytes()),
            value: Some(Bytes::from_static(value.as_bytes())),
        }
    }

    fn led_partition(dir: &std::path::Path) -> Arc<Partition> {
        let partition = Partition::open(
            dir,
            "__internal",
            uuid::Uuid::nil(),
            0,
            LogConfig::default(),
        )
        .unwrap();
        // The only replica: what it appends is replicated at once.
        partition.lead_for_tests(&[1], 0, 1);
        Arc::new(partition)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn writes_are_replayed_in_log_order_and_rebuilt_by_a_load() {
        let dir = tempfile::tempdir().unwrap();
        let partition = led_partition(dir.path());
        let runtime = CoordinatorRuntime::<Latest>::new("__internal", 1);
        assert_eq!(runtime.load(partition.clone()).unwrap(), 0);
        let writes: Vec<_> = ["a", "b", "a"]
            .into_iter()
            .zip(["1", "2", "3"])
            .map(|(key, value)| {
                runtime.write(0, 0, move |shard: &mut Latest, _| {
                    // Each write sees every write queued before it.
                    let seen = shard.size();
                    Ok::<_, CoordinatorError>(Outcome::write(vec![entry(key, value)], seen))
                })
            })
            .collect();
        let mut seen = Vec::new();
        for write in writes {
            seen.push(write.await.unwrap());
        }
        assert_eq!(seen, [0, 1, 2]);
        let read = runtime.read(0, |shard: &Latest| {
            Ok::<_, CoordinatorError>(shard.0.get(b"a".as_slice()).cloned())
        });
        assert_eq!(
            read.await.unwrap(),
            Some((2, Some(Bytes::from_static(b"3"))))
        );

        let reloaded = CoordinatorRuntime::<Latest>::new("__internal", 1);
        assert_eq!(reloaded.load(partition).unwrap(), 2);
        let read = reloaded.read(0, |shard: &Latest| {
            Ok::<_, CoordinatorError>(shard.0.get(b"b".as_slice()).cloned())
        });
        assert_eq!(
            read.await.unwrap(),
            Some((1, Some(Bytes::from_static(b"2"))))
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_partition_not_loaded_here_is_not_coordinated_and_a_refusal_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let partition = led_partition(dir.path());
        let runtime = CoordinatorRuntime::<Latest>::new("__internal", 1);
        let elsewhere = runtime.read(0, |_: &Latest| Ok::<_, CoordinatorError>(()));
        assert!(matches!(
            elsewhere.await,
            Err(CoordinatorError::NotCoordinator)
        ));
        runtime.load(partition.clone()).unwrap();
        let refused = runtime.write(0, 0, |_: &mut Latest, _| {
            Err::<Outcome<()>, _>(CoordinatorError::LoadInProgress)
        });
        assert!(matches!(
            refused.await,
            Err(CoordinatorError::LoadInProgress)
        ));
        assert_eq!(partition.log().log_end_offset(), 0);
        runtime.unload(0);
        let moved = runtime.write(0, 0, |_: &mut Latest, _| {
            Ok::<_, CoordinatorError>(Outcome::write(vec![entry("a", "1")], ()))
        });
        assert!(matches!(moved.await, Err(CoordinatorError::NotCoordinator)));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_event_that_panics_fails_alone_and_the_shard_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = CoordinatorRuntime::<Latest>::new("__internal", 1);
        runtime.load(led_partition(dir.path())).unwrap();
        let panicked = runtime.read(0, |_: &Latest| -> Result<(), CoordinatorError> {
            panic!("a bug in an operation")
        });
        // Queued behind the panic, maybe in the same pass.
        let behind = runtime.write(0, 0, |_: &mut Latest, _| {
            Ok::<_, CoordinatorError>(Outcome::write(vec![entry("a", "1")], "behind"))
        });
        assert!(panicked.await.is_err());
        assert_eq!(behind.await.unwrap(), "behind");
        let write = runtime.write(0, 0, |_: &mut Latest, _| {
            Ok::<_, CoordinatorError>(Outcome::write(vec![entry("b", "2")], "written"))
        });
        assert_eq!(write.await.unwrap(), "written");
    }

    #[test]
    fn a_caller_on_a_plain_thread_waits_for_its_event() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let coordinator = CoordinatorRuntime::<Latest>::new("__internal", 1);
        coordinator.load(led_partition(dir.path())).unwrap();
        let _context = runtime.enter();
        let applied = futures::executor::block_on(coordinator.write_unreplicated(
            0,
            0,
            |_: &mut Latest, _| Ok::<_, CoordinatorError>(Outcome::write(vec![entry("a", "1")], 7)),
        ))
        .unwrap();
        assert_eq!(applied.result, 7);
        assert_eq!(applied.write.map(|w| w.until), Some(1));
    }
}
