//! Exactly-once consume-transform-produce across a broker failure: in a
//! three-node cluster, a librdkafka application reads `in` in a consumer
//! group with `read_committed` and writes one transformed record per input
//! to `out`, committing its consumer offsets in the same transaction
//! (`send_offsets_to_transaction`). A broker leading partitions of both
//! topics is killed with -9 while a transaction with records and offsets
//! is open, and restarted: once with the application's transaction and
//! group coordinators elsewhere, the held transaction then committed; once
//! with both coordinators on it, the application then abandoning the held
//! transaction and starting again, as after a crash. The application
//! handles errors as a real one does (an abortable error aborts the
//! transaction and rewinds the consumer to its committed offsets; a fatal
//! one replaces producer and consumer). A `read_committed` reader then
//! finds every input exactly once in `out`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use common::cluster::{
    create_topic_with, partitions, send_acked, wait_until, Cluster, SESSION_TIMEOUT_MS,
};
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use weir_chaos::txn_workload::read_committed_all;

const INPUT: &str = "in";
const OUTPUT: &str = "out";
const PARTITIONS: i32 = 3;
const INPUTS: usize = 3000;
/// Inputs per transaction.
const PER_TRANSACTION: usize = 50;
/// The work of transforming one input: a transaction stays open most of
/// the time, as in an application that does something per record.
const WORK_PER_INPUT: Duration = Duration::from_millis(2);
/// Inputs the application may only take once the killed broker is back,
/// so that transactions commit after its restart too.
const AFTER_RESTART: usize = 500;
/// The longest any one librdkafka call may block.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// The whole run of the application, failures included.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Committed,
    Aborted,
    /// Its producer was replaced before it knew.
    InDoubt,
}

/// One transaction the application ran.
#[derive(Debug, Clone)]
struct Transaction {
    began: Instant,
    ended: Instant,
    inputs: usize,
    outcome: Outcome,
}

/// What the test and the application share.
#[derive(Default)]
struct Progress {
    /// Inputs the application may have committed in all; it waits there.
    budget: AtomicUsize,
    /// Inputs it has committed.
    committed: AtomicUsize,
    /// Asked by the test: stop before the next commit, with the
    /// transaction's records and offsets sent, and say so in `held`.
    hold: AtomicBool,
    held: AtomicBool,
    /// Told by the test: commit now.
    release: AtomicBool,
    /// Set by the test: instead of committing the held transaction, leave
    /// it open and replace producer and consumer, as an application that
    /// crashed and was started again does.
    abandon_held: AtomicBool,
    transactions: Mutex<Vec<Transaction>>,
    /// Errors handled and clients replaced, for the log.
    events: Mutex<Vec<String>>,
    incarnations: AtomicUsize,
}

impl Progress {
    fn note(&self, origin: Instant, event: String) {
        let line = format!("{:>6.2}s {event}", origin.elapsed().as_secs_f64());
        eprintln!("eos loop: {line}");
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }

    fn transactions(&self) -> Vec<Transaction> {
        self.transactions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What the application does after an error.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// Call again.
    Retry,
    /// Abort the transaction and rewind the consumer.
    Abort,
    /// Replace the producer and the consumer.
    Replace,
}

/// librdkafka's advice for an error of a transactional call.
fn step_after(error: &KafkaError) -> Step {
    match error {
        KafkaError::Transaction(e) if e.is_fatal() => Step::Replace,
        KafkaError::Transaction(e) if e.txn_requires_abort() => Step::Abort,
        KafkaError::Transaction(e) if e.is_retriable() => Step::Retry,
        _ => Step::Replace,
    }
}

/// The consumer's context: notes every rebalance, after which the open
/// transaction may hold inputs of partitions this consumer lost, or will
/// read again.
#[derive(Default)]
struct Rebalances {
    happened: AtomicBool,
}

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, _: &Rebalance<'_>) {
        self.happened.store(true, Ordering::SeqCst);
    }
}

/// Dropped in this order: the producer first, then the consumer, whose
/// close leaves the group.
struct Clients {
    producer: ThreadedProducer<DefaultProducerContext>,
    consumer: BaseConsumer<Rebalances>,
}

/// The application: one thread, one producer and one consumer at a time.
struct App {
    bootstrap: String,
    transactional_id: String,
    group: String,
    progress: Arc<Progress>,
    origin: Instant,
    deadline: Instant,
    /// The committed offset of each input partition, as last known.
    committed: BTreeMap<i32, i64>,
    /// When the open transaction began, and its inputs so far.
    open: Option<(Instant, usize)>,
}

impl App {
    fn note(&self, event: String) {
        self.progress.note(self.origin, event);
    }

    fn done(&self) -> usize {
        self.committed.values().map(|o| *o as usize).sum()
    }

    fn end_open(&mut self, outcome: Outcome) {
        // A transaction that took no input is no transaction of interest.
        if let Some((began, inputs)) = self.open.take().filter(|(_, inputs)| *inputs > 0) {
            self.progress
                .transactions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Transaction {
                    began,
                    ended: Instant::now(),
                    inputs,
                    outcome,
                });
        }
    }

    /// Calls `call` until it succeeds or says what else to do; a call
    /// that keeps failing with retriable errors replaces the clients.
    fn call(&self, what: &str, mut call: impl FnMut() -> KafkaResult<()>) -> Result<(), Step> {
        let give_up = Instant::now() + 3 * CALL_TIMEOUT;
        loop {
            let Err(error) = call() else {
                return Ok(());
            };
            let step = step_after(&error);
            self.note(format!("{what}: {error} ({step:?})"));
            match step {
                Step::Retry if Instant::now() < give_up.min(self.deadline) => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Step::Retry => return Err(Step::Replace),
                step => return Err(step),
            }
        }
    }

    /// A transactional producer, initialised (which fences the previous
    /// one and ends the transaction it left open), then a consumer in the
    /// group, which starts from the offsets committed by then.
    fn start(&mut self) -> Result<Clients, String> {
        let incarnation = self.progress.incarnations.fetch_add(1, Ordering::SeqCst) + 1;
        let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("transactional.id", &self.transactional_id)
            .set("transaction.timeout.ms", "30000")
            .set("linger.ms", "5")
            .set("socket.connection.setup.timeout.ms", "5000")
            .set("reconnect.backoff.max.ms", "1000")
            .create()
            .map_err(|e| format!("producer: {e}"))?;
        self.call("init_transactions", || {
            producer.init_transactions(Timeout::After(CALL_TIMEOUT))
        })
        .map_err(|_| "init_transactions failed".to_owned())?;
        let consumer: BaseConsumer<Rebalances> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", &self.group)
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "500")
            .set("fetch.wait.max.ms", "100")
            .set("socket.connection.setup.timeout.ms", "5000")
            .set("reconnect.backoff.max.ms", "1000")
            .create_with_context(Rebalances::default())
            .map_err(|e| format!("consumer: {e}"))?;
        consumer
            .subscribe(&[INPUT])
            .map_err(|e| format!("subscribe: {e}"))?;
        let mut all = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            all.add_partition(INPUT, p);
        }
        let found = consumer
            .committed_offsets(all, Timeout::After(CALL_TIMEOUT))
            .map_err(|e| format!("committed offsets: {e}"))?;
        self.record_committed(&found);
        if incarnation > 1 {
            self.note(format!(
                "clients replaced (incarnation {incarnation}); {} inputs committed",
                self.done()
            ));
        }
        Ok(Clients { producer, consumer })
    }

    fn record_committed(&mut self, found: &TopicPartitionList) {
        for e in found.elements() {
            if let Offset::Offset(o) = e.offset() {
                self.committed.insert(e.partition(), o);
            }
        }
        self.progress.committed.store(self.done(), Ordering::SeqCst);
    }

    /// Seeks the consumer back to the committed offsets of its partitions
    /// (the start where none is).
    fn rewind(&mut self, consumer: &BaseConsumer<Rebalances>) -> KafkaResult<()> {
        let found = consumer.committed(Timeout::After(CALL_TIMEOUT))?;
        self.record_committed(&found);
        let mut to = TopicPartitionList::new();
        for e in found.elements() {
            let offset = match e.offset() {
                Offset::Offset(o) => Offset::Offset(o),
                _ => Offset::Beginning,
            };
            to.add_partition_offset(e.topic(), e.partition(), offset)?;
        }
        if to.count() == 0 {
            return Ok(());
        }
        for e in consumer
            .seek_partitions(to, Timeout::After(CALL_TIMEOUT))?
            .elements()
        {
            e.error()?;
        }
        Ok(())
    }

    /// Hands one record to the producer, waiting while its queue is full.
    fn send(clients: &Clients, key: Option<&[u8]>, value: &[u8]) -> KafkaResult<()> {
        let mut record = BaseRecord::<[u8], [u8]>::to(OUTPUT).payload(value);
        if let Some(key) = key {
            record = record.key(key);
        }
        loop {
            match clients.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// One transaction: up to PER_TRANSACTION inputs read, each written
    /// transformed, the consumer's offsets sent, committed.
    fn transaction(&mut self, clients: &Clients) -> Result<(), Step> {
        let budget = self.progress.budget.load(Ordering::SeqCst);
        let wanted = budget.saturating_sub(self.done()).min(PER_TRANSACTION);
        if wanted == 0 {
            std::thread::sleep(Duration::from_millis(50));
            return Ok(());
        }
        if let Err(e) = clients.producer.begin_transaction() {
            self.note(format!("begin_transaction: {e}"));
            return Err(Step::Replace);
        }
        self.open = Some((Instant::now(), 0));
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        let collect_until = Instant::now() + Duration::from_secs(2);
        let mut taken = 0;
        while taken < wanted && Instant::now() < collect_until {
            let polled = clients.consumer.poll(Duration::from_millis(100));
            if clients
                .consumer
                .context()
                .happened
                .swap(false, Ordering::SeqCst)
            {
                self.note("rebalance".to_owned());
                return Err(Step::Abort);
            }
            let message = match polled {
                None => continue,
                Some(Err(e)) => {
                    self.note(format!("consumer: {e}"));
                    continue;
                }
                Some(Ok(message)) => message,
            };
            let mut value = b"out-".to_vec();
            value.extend_from_slice(message.payload().unwrap_or_default());
            if let Err(e) = Self::send(clients, message.key(), &value) {
                self.note(format!("send: {e}"));
                return Err(Step::Abort);
            }
            next.insert(message.partition(), message.offset() + 1);
            taken += 1;
            self.open = self.open.map(|(began, _)| (began, taken));
            std::thread::sleep(WORK_PER_INPUT);
        }
        if taken == 0 {
            self.open = None;
            return self.call("abort_transaction (empty)", || {
                clients
                    .producer
                    .abort_transaction(Timeout::After(CALL_TIMEOUT))
            });
        }
        let mut offsets = TopicPartitionList::new();
        for (p, o) in &next {
            offsets
                .add_partition_offset(INPUT, *p, Offset::Offset(*o))
                .expect("an offset");
        }
        let Some(group) = clients.consumer.group_metadata() else {
            self.note("no consumer group metadata".to_owned());
            return Err(Step::Replace);
        };
        self.call("send_offsets_to_transaction", || {
            clients.producer.send_offsets_to_transaction(
                &offsets,
                &group,
                Timeout::After(CALL_TIMEOUT),
            )
        })?;
        if self.progress.hold.swap(false, Ordering::SeqCst) {
            self.progress.held.store(true, Ordering::SeqCst);
            let until = Instant::now() + Duration::from_secs(30);
            while !self.progress.release.load(Ordering::SeqCst) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            if self.progress.abandon_held.load(Ordering::SeqCst) {
                self.note(format!(
                    "abandoning the transaction held open ({taken} inputs)"
                ));
                return Err(Step::Replace);
            }
            self.note(format!(
                "committing the transaction held open ({taken} inputs)"
            ));
        }
        self.call("commit_transaction", || {
            clients
                .producer
                .commit_transaction(Timeout::After(CALL_TIMEOUT))
        })?;
        self.end_open(Outcome::Committed);
        self.committed.extend(next);
        self.progress.committed.store(self.done(), Ordering::SeqCst);
        Ok(())
    }

    /// Runs transactions until every input is committed.
    fn run(mut self) -> Result<(), String> {
        while self.done() < INPUTS {
            if Instant::now() > self.deadline {
                return Err(format!("only {} inputs committed in time", self.done()));
            }
            let clients = match self.start() {
                Ok(clients) => clients,
                Err(e) => {
                    self.note(format!("starting the clients: {e}"));
                    std::thread::sleep(Duration::from_millis(500));
                    continue;
                }
            };
            while self.done() < INPUTS && Instant::now() < self.deadline {
                let step = match self.transaction(&clients) {
                    Ok(()) => continue,
                    Err(step) => step,
                };
                if step == Step::Abort {
                    let aborted = self.call("abort_transaction", || {
                        clients
                            .producer
                            .abort_transaction(Timeout::After(CALL_TIMEOUT))
                    });
                    if aborted.is_ok() {
                        self.end_open(Outcome::Aborted);
                        match self.rewind(&clients.consumer) {
                            Ok(()) => continue,
                            Err(e) => self.note(format!("rewinding the consumer: {e}")),
                        }
                    }
                }
                // The next producer's init_transactions ends whatever this
                // one left open.
                self.end_open(Outcome::InDoubt);
                break;
            }
        }
        Ok(())
    }
}

/// Which broker is killed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Victim {
    /// A leader of partitions of `in` and `out` that coordinates neither
    /// the application's transactions nor its group.
    DataLeader,
    /// The leader of partitions of `in` and `out` that coordinates both.
    Coordinators,
}

/// What the application does with the transaction held open across the
/// kill.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Held {
    /// Commits it, the broker dead.
    Commit,
    /// Leaves it open and replaces producer and consumer: the new
    /// producer's init_transactions fences the old one and aborts the
    /// transaction, and the new consumer starts from the offsets committed
    /// before it.
    Abandon,
}

/// The broker coordinating `key` (a transactional id if `transactional`,
/// else a group), once the coordinator exists.
fn coordinator(bootstrap: &str, key: &str, transactional: bool) -> i32 {
    wait_until(
        &format!("the coordinator of {key}"),
        Duration::from_secs(20),
        || {
            common::cli::block_on(async {
                let mut client = weir_client::Client::connect(bootstrap).await.ok()?;
                let found = if transactional {
                    client.find_transaction_coordinator(key).await
                } else {
                    client.find_coordinator(key).await
                };
                found.ok().map(|c| c.node_id)
            })
        },
    )
}

/// The first of `{prefix}-0`, `{prefix}-1`, ... whose coordinator is the
/// victim, or is not, as wanted.
fn name_coordinated(
    bootstrap: &str,
    prefix: &str,
    transactional: bool,
    victim: i32,
    on_victim: bool,
) -> String {
    (0..60)
        .map(|i| format!("{prefix}-{i}"))
        .find(|name| (coordinator(bootstrap, name, transactional) == victim) == on_victim)
        .unwrap_or_else(|| panic!("no {prefix} coordinated as wanted"))
}

fn exactly_once_across_a_kill(kill: Victim, held: Held) {
    let origin = Instant::now();
    // The restarted broker takes its leaderships back within a second,
    // under the running transactions too.
    let mut cluster = Cluster::start(&["--leader-imbalance-check-interval-seconds", "1"]);
    for topic in [INPUT, OUTPUT] {
        create_topic_with(
            &cluster.node(1).kafka,
            topic,
            PARTITIONS,
            3,
            &[("min.insync.replicas", "2")],
        );
    }
    let progress = Arc::new(Progress::default());
    let bootstrap = cluster.bootstrap();
    let inputs = send_acked(&bootstrap, INPUT, "in", INPUTS);
    assert_eq!(inputs.len(), INPUTS, "every input acknowledged");

    // A broker other than the active controller (so that this is not a
    // controller failover too); the leaders of each topic's partitions are
    // spread over the three brokers.
    let controller = cluster.controller(1) as i32;
    let victim = partitions(&bootstrap, OUTPUT)
        .iter()
        .map(|v| v.leader)
        .find(|l| *l != controller)
        .expect("a leader of `out` that is not the controller");
    assert!(
        partitions(&bootstrap, INPUT)
            .iter()
            .any(|v| v.leader == victim),
        "broker {victim} leads a partition of `in` too"
    );
    let on_victim = kill == Victim::Coordinators;
    let via = &cluster.node(controller).kafka;
    let transactional_id = name_coordinated(via, "transformer", true, victim, on_victim);
    let group = name_coordinated(via, "transformers", false, victim, on_victim);
    progress.note(
        origin,
        format!(
            "broker {victim} to be killed; it coordinates {transactional_id} and {group}: {on_victim}"
        ),
    );

    progress
        .budget
        .store(INPUTS - AFTER_RESTART, Ordering::SeqCst);
    progress
        .abandon_held
        .store(held == Held::Abandon, Ordering::SeqCst);
    let app = App {
        bootstrap: bootstrap.clone(),
        transactional_id,
        group,
        progress: progress.clone(),
        origin,
        deadline: Instant::now() + RUN_TIMEOUT,
        committed: BTreeMap::new(),
        open: None,
    };
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("eos-loop".to_owned())
        .spawn(move || {
            let _ = done_tx.send(app.run());
        })
        .expect("spawn the loop");
    let committed = || progress.committed.load(Ordering::SeqCst);

    wait_until(
        "the loop to commit a fifth of the inputs",
        Duration::from_secs(30),
        || (committed() >= INPUTS / 5).then_some(()),
    );
    // Killed with a transaction open, its records and offsets sent.
    progress.hold.store(true, Ordering::SeqCst);
    wait_until(
        "the loop to hold a transaction open",
        Duration::from_secs(30),
        || progress.held.load(Ordering::SeqCst).then_some(()),
    );
    let killed_at = Instant::now();
    cluster.node_mut(victim).kill();
    progress.release.store(true, Ordering::SeqCst);
    let at_kill = committed();
    progress.note(
        origin,
        format!("broker {victim} killed with -9 ({at_kill} inputs committed)"),
    );

    let survivor = (1..=3).find(|id| *id != victim).unwrap();
    let via = cluster.node(survivor).kafka.clone();
    wait_until(
        "leaderships to move off the killed broker",
        Duration::from_millis(SESSION_TIMEOUT_MS + 15_000),
        || {
            [INPUT, OUTPUT]
                .iter()
                .flat_map(|t| partitions(&via, t))
                .all(|v| v.leader >= 0 && v.leader != victim)
                .then_some(())
        },
    );
    progress.note(origin, "leaderships moved".to_owned());
    wait_until(
        "the loop to commit with the broker down",
        Duration::from_secs(40),
        || (committed() >= at_kill + 2 * PER_TRANSACTION).then_some(()),
    );
    cluster.node_mut(victim).restart(false);
    let restarted_at = Instant::now();
    progress.note(
        origin,
        format!(
            "broker {victim} restarted ({} inputs committed)",
            committed()
        ),
    );
    progress.budget.store(INPUTS, Ordering::SeqCst);

    let outcome = done_rx
        .recv_timeout(RUN_TIMEOUT)
        .expect("the loop to finish");
    outcome.unwrap_or_else(|e| panic!("the loop failed: {e}"));
    let loop_time = origin.elapsed();

    let (reads, coverage) = read_committed_all(
        &cluster.node(survivor).kafka,
        OUTPUT,
        PARTITIONS,
        Instant::now() + Duration::from_secs(30),
    );
    let incomplete: Vec<_> = coverage.iter().filter(|c| !c.complete).collect();
    assert!(
        incomplete.is_empty(),
        "`out` not read to its end with no transaction open: {incomplete:?}"
    );
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for read in &reads {
        *counts.entry(read.value.as_str()).or_default() += 1;
    }
    let expected: BTreeSet<String> = inputs.iter().map(|v| format!("out-{v}")).collect();
    let missing: Vec<&String> = expected
        .iter()
        .filter(|v| !counts.contains_key(v.as_str()))
        .collect();
    let duplicated: Vec<(&str, usize)> = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(v, n)| (*v, *n))
        .collect();
    let unexpected: Vec<&str> = counts
        .keys()
        .filter(|v| !expected.contains(**v))
        .copied()
        .collect();
    let where_is = |value: &str| -> Vec<(i32, i64)> {
        reads
            .iter()
            .filter(|r| r.value == value)
            .map(|r| (r.partition, r.offset))
            .collect()
    };
    assert!(
        missing.is_empty(),
        "{} inputs never written, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert!(
        duplicated.is_empty(),
        "{} inputs written more than once, e.g. {:?}",
        duplicated.len(),
        duplicated
            .iter()
            .take(5)
            .map(|(v, _)| (v, where_is(v)))
            .collect::<Vec<_>>()
    );
    assert!(unexpected.is_empty(), "values never input: {unexpected:?}");
    assert_eq!(reads.len(), INPUTS);

    // The kill came in the middle of the work: transactions committed
    // before it, one was open across it, and more committed with the
    // broker down and after its restart.
    let transactions = progress.transactions();
    let committed_between = |from: Instant, to: Instant| {
        transactions
            .iter()
            .filter(|t| t.outcome == Outcome::Committed && t.ended > from && t.ended < to)
            .count()
    };
    let far = Instant::now() + Duration::from_secs(3600);
    assert!(committed_between(origin, killed_at) > 0);
    let across: Vec<&Transaction> = transactions
        .iter()
        .filter(|t| t.began < killed_at && t.ended > killed_at && t.inputs > 0)
        .collect();
    assert!(!across.is_empty(), "a transaction open across the kill");
    if held == Held::Abandon {
        assert!(
            across.iter().any(|t| t.outcome == Outcome::InDoubt),
            "the held transaction abandoned: {across:?}"
        );
        assert!(progress.incarnations.load(Ordering::SeqCst) >= 2);
    }
    assert!(committed_between(killed_at, restarted_at) > 0);
    assert!(committed_between(restarted_at, far) > 0);

    let by_outcome =
        |outcome: Outcome| transactions.iter().filter(|t| t.outcome == outcome).count();
    eprintln!(
        "eos loop: {INPUTS} inputs exactly once; broker {victim} ({kill:?}, {held:?}) killed at {:.1}s, restarted at {:.1}s; \
         transactions: {} committed ({} before the kill, {} with the broker down, {} after its restart), \
         {} aborted, {} in doubt; {} clients incarnations; loop done at {:.1}s, checked at {:.1}s",
        (killed_at - origin).as_secs_f64(),
        (restarted_at - origin).as_secs_f64(),
        by_outcome(Outcome::Committed),
        committed_between(origin, killed_at),
        committed_between(killed_at, restarted_at),
        committed_between(restarted_at, far),
        by_outcome(Outcome::Aborted),
        by_outcome(Outcome::InDoubt),
        progress.incarnations.load(Ordering::SeqCst),
        loop_time.as_secs_f64(),
        origin.elapsed().as_secs_f64(),
    );
}

#[test]
fn each_input_once_across_a_data_partition_leader_killed_with_minus_nine() {
    exactly_once_across_a_kill(Victim::DataLeader, Held::Commit);
}

#[test]
fn each_input_once_across_the_coordinators_broker_killed_with_minus_nine_and_the_app_restarted() {
    exactly_once_across_a_kill(Victim::Coordinators, Held::Abandon);
}
