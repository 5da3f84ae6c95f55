//! The transactional workload: transactional producers writing a few
//! unique values per transaction over the partitions, committing most
//! transactions and aborting some on purpose, each recording what became
//! of every transaction; and a `read_committed` reader that reads every
//! partition back to its end once no transaction is open.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};

use crate::checker::{Coverage, Read};
use crate::txn_checker::{Txn, TxnOutcome, TxnValue};

/// Every this many transactions, one is aborted on purpose.
const ABORT_EVERY: u64 = 5;
/// Longer than any stall a fault causes, short enough that a transaction
/// left open by a producer that was replaced is aborted by its
/// coordinator well before the read-back gives up.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(15);
/// How long commit_transaction and abort_transaction may take before the
/// transaction is in doubt.
const END_TIMEOUT: Duration = Duration::from_secs(20);
const INIT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct TxnWorkloadOptions {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: i32,
    pub producers: usize,
    /// Values per second, per producer.
    pub rate: u32,
}

/// The size of transaction `seq`: 4, 5 or 6 values.
fn transaction_size(seq: u64) -> u64 {
    4 + seq % 3
}

/// Whether transaction `seq` is aborted on purpose.
fn aborted_on_purpose(seq: u64) -> bool {
    seq % ABORT_EVERY == ABORT_EVERY - 1
}

/// Where each value sent by one producer incarnation was written, from
/// its delivery reports (the opaque is the value's index).
struct OffsetRecorder {
    offsets: Arc<Mutex<Vec<Option<i64>>>>,
}

impl ClientContext for OffsetRecorder {}

impl ProducerContext for OffsetRecorder {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, index: usize) {
        if let Ok(message) = result {
            let mut offsets = self.offsets.lock().unwrap_or_else(PoisonError::into_inner);
            offsets[index] = Some(message.offset());
        }
    }
}

type TxnProducer = ThreadedProducer<OffsetRecorder>;

/// Transactional producers running in the background.
pub struct TxnWorkload {
    stop: Arc<AtomicBool>,
    /// Producers that have initialised their first transactional producer.
    ready: Arc<AtomicUsize>,
    producers: usize,
    threads: Vec<JoinHandle<Vec<Txn>>>,
}

impl TxnWorkload {
    /// Starts the producers; times are measured from `origin`.
    pub fn start(options: &TxnWorkloadOptions, origin: Instant) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(AtomicUsize::new(0));
        let threads = (0..options.producers)
            .map(|n| {
                let producer = TxnProducerThread {
                    n,
                    options: options.clone(),
                    origin,
                    stop: stop.clone(),
                    ready: ready.clone(),
                };
                std::thread::Builder::new()
                    .name(format!("txn-producer-{n}"))
                    .spawn(move || producer.run())
                    .expect("spawn a producer")
            })
            .collect();
        Self {
            stop,
            ready,
            producers: options.producers,
            threads,
        }
    }

    /// Waits until every producer has initialised (and so the transaction
    /// coordinators exist), at most `timeout`; whether they all did.
    pub fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.ready.load(Ordering::SeqCst) < self.producers {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        true
    }

    /// Stops beginning transactions, lets each producer end the one it is
    /// in, and returns every transaction.
    pub fn stop(mut self) -> Vec<Txn> {
        self.stop.store(true, Ordering::SeqCst);
        std::mem::take(&mut self.threads)
            .into_iter()
            .flat_map(|t| t.join().expect("a producer panicked"))
            .collect()
    }
}

impl Drop for TxnWorkload {
    /// A run that ends early (the harness gave up) stops the producers
    /// too, without waiting for them.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn producer_config(options: &TxnWorkloadOptions, transactional_id: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &options.bootstrap)
        .set("transactional.id", transactional_id)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        // message.timeout.ms defaults to this: a value not delivered in
        // time makes the transaction abortable, never a duplicate.
        .set(
            "transaction.timeout.ms",
            TRANSACTION_TIMEOUT.as_millis().to_string(),
        )
        .set("request.timeout.ms", "10000")
        .set("linger.ms", "5")
        .set("topic.metadata.refresh.interval.ms", "2000")
        .set("socket.connection.setup.timeout.ms", "5000");
    if let Ok(contexts) = std::env::var("WEIR_CHAOS_RDKAFKA_DEBUG") {
        config.set("debug", contexts);
    }
    config
}

/// How a transaction ended, and whether its producer must be replaced.
struct Ending {
    outcome: TxnOutcome,
    error: Option<String>,
    replace: bool,
}

/// Aborts the open transaction: aborted if abort_transaction succeeds
/// (nothing of it may be read), in doubt otherwise.
fn abort(producer: &TxnProducer, why: Option<String>) -> Ending {
    match producer.abort_transaction(Timeout::After(END_TIMEOUT)) {
        Ok(()) => Ending {
            outcome: TxnOutcome::Aborted,
            error: why,
            replace: false,
        },
        Err(e) => Ending {
            outcome: TxnOutcome::Unknown,
            error: Some(match why {
                Some(why) => format!("{why}; abort: {e}"),
                None => format!("abort: {e}"),
            }),
            replace: true,
        },
    }
}

/// Commits the open transaction. An abortable error (a value not
/// delivered, say) aborts it; a fatal error or a timeout leaves it in
/// doubt, and the producer is replaced: the next incarnation's
/// init_transactions fences this one and ends what it left open.
fn commit(producer: &TxnProducer) -> Ending {
    match producer.commit_transaction(Timeout::After(END_TIMEOUT)) {
        Ok(()) => Ending {
            outcome: TxnOutcome::Committed,
            error: None,
            replace: false,
        },
        // The values were not all delivered in time (the flush before the
        // commit): the commit was not asked for.
        Err(e @ KafkaError::Flush(_)) => abort(producer, Some(format!("commit: {e}"))),
        Err(KafkaError::Transaction(e)) if e.txn_requires_abort() && !e.is_fatal() => {
            abort(producer, Some(format!("commit: {e}")))
        }
        Err(e) => Ending {
            outcome: TxnOutcome::Unknown,
            error: Some(format!("commit: {e}")),
            replace: true,
        },
    }
}

/// One producer thread: transactional id `chaos-txn-{n}`, values
/// `t{n}-{seq}`.
struct TxnProducerThread {
    n: usize,
    options: TxnWorkloadOptions,
    origin: Instant,
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicUsize>,
}

impl TxnProducerThread {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// A new incarnation, initialised (which fences the previous one and
    /// ends the transaction it left open).
    fn start_incarnation(
        &self,
        transactional_id: &str,
        offsets: &Arc<Mutex<Vec<Option<i64>>>>,
    ) -> Result<TxnProducer, KafkaError> {
        let producer: TxnProducer = producer_config(&self.options, transactional_id)
            .create_with_context(OffsetRecorder {
                offsets: offsets.clone(),
            })?;
        producer.init_transactions(Timeout::After(INIT_TIMEOUT))?;
        Ok(producer)
    }

    /// Runs transactions at the configured rate of values until told to
    /// stop; a producer that must be replaced is, with the same
    /// transactional id.
    fn run(self) -> Vec<Txn> {
        let name = format!("t{}", self.n);
        let transactional_id = format!("chaos-txn-{}", self.n);
        let interval = Duration::from_secs_f64(1.0 / f64::from(self.options.rate.max(1)));
        let mut txns = Vec::new();
        let mut seq: u64 = 0;
        let mut value_seq: u64 = 0;
        let mut incarnation: u32 = 0;
        let mut first = true;
        let mut next = Instant::now();
        while !self.stopped() {
            incarnation += 1;
            let offsets = Arc::new(Mutex::new(Vec::new()));
            let producer = match self.start_incarnation(&transactional_id, &offsets) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!(
                        "weir-chaos: cannot start transactional producer {name}.{incarnation}: {e}"
                    );
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
            };
            if std::mem::take(&mut first) {
                self.ready.fetch_add(1, Ordering::SeqCst);
            }
            while !self.stopped() {
                if let Err(e) = producer.begin_transaction() {
                    eprintln!("weir-chaos: producer {name}.{incarnation}: begin: {e}");
                    break;
                }
                let mut txn = Txn {
                    producer: name.clone(),
                    incarnation,
                    seq,
                    values: Vec::new(),
                    started_ms: self.now_ms(),
                    ended_ms: 0,
                    outcome: TxnOutcome::Unknown,
                    error: None,
                };
                // Indexes of the values in `offsets`.
                let mut indexes = Vec::new();
                let mut send_error = None;
                for _ in 0..transaction_size(seq) {
                    let value = format!("{name}-{value_seq}");
                    let partition = (value_seq % self.options.partitions as u64) as i32;
                    value_seq += 1;
                    let index = {
                        let mut offsets = offsets.lock().unwrap_or_else(PoisonError::into_inner);
                        offsets.push(None);
                        offsets.len() - 1
                    };
                    match send(&producer, &self.options.topic, partition, &value, index) {
                        Ok(()) => {
                            txn.values.push(TxnValue {
                                value,
                                partition,
                                offset: None,
                            });
                            indexes.push(index);
                        }
                        Err(e) => {
                            send_error = Some(format!("send {value}: {e}"));
                            break;
                        }
                    }
                }
                let ending = match send_error {
                    Some(e) => abort(&producer, Some(e)),
                    None if aborted_on_purpose(seq) => {
                        // Delivered first: abort_transaction would purge
                        // values still lingering, and an aborted
                        // transaction that wrote nothing tests nothing.
                        let flushed = producer.flush(Timeout::After(END_TIMEOUT));
                        abort(&producer, flushed.err().map(|e| format!("flush: {e}")))
                    }
                    None => commit(&producer),
                };
                txn.ended_ms = self.now_ms();
                txn.outcome = ending.outcome;
                txn.error = ending.error;
                {
                    let offsets = offsets.lock().unwrap_or_else(PoisonError::into_inner);
                    for (v, i) in txn.values.iter_mut().zip(&indexes) {
                        v.offset = offsets[*i];
                    }
                }
                if let Some(e) = &txn.error {
                    eprintln!(
                        "weir-chaos: producer {name}.{incarnation}: transaction {seq} {:?}: {e}",
                        txn.outcome
                    );
                }
                let sent = txn.values.len() as u32;
                txns.push(txn);
                seq += 1;
                if ending.replace {
                    break;
                }
                next += interval * sent.max(1);
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else if now - next > Duration::from_secs(1) {
                    next = now;
                }
            }
        }
        txns
    }
}

/// Hands one value to the producer, waiting while its queue is full.
fn send(
    producer: &TxnProducer,
    topic: &str,
    partition: i32,
    value: &str,
    index: usize,
) -> Result<(), KafkaError> {
    let mut record = BaseRecord::with_opaque_to(topic, index)
        .partition(partition)
        .payload(value);
    loop {
        match producer.send::<(), str>(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                record = r;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Reads every partition of `topic` with `isolation.level=read_committed`
/// from its start to its end, once no transaction is open there: until
/// the last stable offset is the high watermark and the reader's position
/// is there. Gives up at `deadline` (the partition's coverage is then
/// incomplete).
pub fn read_committed_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    deadline: Instant,
) -> (Vec<Read>, Vec<Coverage>) {
    let mut reads = Vec::new();
    let mut coverage = Vec::new();
    for partition in 0..partitions {
        let (mut r, c) = read_partition(bootstrap, topic, partition, deadline);
        reads.append(&mut r);
        coverage.push(c);
    }
    (reads, coverage)
}

fn consumer(bootstrap: &str, isolation: &str) -> Result<BaseConsumer, KafkaError> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "weir-chaos-reader")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("isolation.level", isolation)
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "true")
        .set("fetch.wait.max.ms", "100")
        .create()
}

/// Where a partition ends: (high watermark, last stable offset). The
/// watermarks a consumer asks for follow its isolation level.
fn ends(
    uncommitted: &BaseConsumer,
    committed: &BaseConsumer,
    topic: &str,
    partition: i32,
) -> Result<(i64, i64), KafkaError> {
    let timeout = Timeout::After(Duration::from_secs(5));
    let (_, high) = uncommitted.fetch_watermarks(topic, partition, timeout)?;
    let (_, stable) = committed.fetch_watermarks(topic, partition, timeout)?;
    Ok((high, stable))
}

fn position(consumer: &BaseConsumer, topic: &str, partition: i32) -> Option<i64> {
    let positions = consumer.position().ok()?;
    match positions.find_partition(topic, partition)?.offset() {
        Offset::Offset(o) => Some(o),
        _ => None,
    }
}

fn read_partition(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    deadline: Instant,
) -> (Vec<Read>, Coverage) {
    let mut coverage = Coverage {
        pass: 1,
        partition,
        start: 0,
        end: 0,
        complete: false,
    };
    let mut reads = Vec::new();
    let (uncommitted, committed) = match (
        consumer(bootstrap, "read_uncommitted"),
        consumer(bootstrap, "read_committed"),
    ) {
        (Ok(u), Ok(c)) => (u, c),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("weir-chaos: cannot create a consumer: {e}");
            return (reads, coverage);
        }
    };
    let Some((low, _)) = crate::workload::watermarks(&uncommitted, topic, partition, deadline)
    else {
        return (reads, coverage);
    };
    coverage.start = low;
    let mut assignment = TopicPartitionList::new();
    if assignment
        .add_partition_offset(topic, partition, Offset::Offset(low))
        .and_then(|()| committed.assign(&assignment))
        .is_err()
    {
        return (reads, coverage);
    }
    let mut seen = BTreeSet::new();
    let mut last_check = Instant::now() - Duration::from_secs(1);
    // When the reader last said it waits for an open transaction.
    let mut last_note = Instant::now();
    while Instant::now() < deadline {
        match committed.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                let offset = message.offset();
                if seen.insert(offset) {
                    reads.push(Read {
                        pass: 1,
                        partition,
                        offset,
                        value: message
                            .payload()
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                            .unwrap_or_default(),
                    });
                }
                continue;
            }
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(e)) => {
                eprintln!("weir-chaos: reading {topic}-{partition}: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        // Nothing more to read for now: is this the end, with no
        // transaction open?
        if last_check.elapsed() < Duration::from_millis(500) {
            continue;
        }
        last_check = Instant::now();
        let Ok((high, stable)) = ends(&uncommitted, &committed, topic, partition) else {
            continue;
        };
        let at = position(&committed, topic, partition).unwrap_or(low);
        if stable == high && at >= high {
            coverage.end = high;
            coverage.complete = true;
            break;
        }
        if stable < high && last_note.elapsed() > Duration::from_secs(5) {
            eprintln!(
                "weir-chaos: {topic}-{partition}: a transaction is open (last stable offset {stable}, high watermark {high}); waiting"
            );
            last_note = Instant::now();
        }
        coverage.end = high;
    }
    (reads, coverage)
}
