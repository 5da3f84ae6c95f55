//! `produce`: P threads, each with its own librdkafka producer, send N
//! records as fast as librdkafka takes them; the latency of each record is
//! the time from the `send` call to its delivery report.
//!
//! The hot loop allocates nothing of its own: one payload buffer and the K
//! keys are made before the clock starts, and the send time travels to the
//! delivery callback as the record's opaque pointer-sized integer. (The
//! `rdkafka` crate itself makes a C string of the topic name per `send`, and
//! librdkafka copies each payload into its queue.) When librdkafka's queue
//! is full the thread polls for a millisecond and sends again; the wait
//! counts in that record's latency, as it does in Kafka's own perf tool.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use hdrhistogram::Histogram;
use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::util::Timeout;

use crate::kafka::{self, Clock, ErrorLog};
use crate::progress::Progress;
use crate::report::{Latency, Report};
use crate::ProduceArgs;

/// How long a producer may take to see its topic with leaders (the broker
/// may be creating it).
pub(crate) const TOPIC_WAIT: Duration = Duration::from_secs(30);

/// Counts shared by every producer of a run, for the progress bar.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) acked: AtomicU64,
    pub(crate) failed: AtomicU64,
}

/// The producer context: delivery reports carry the time the record was
/// sent (or meant to be sent), in nanoseconds of the run's clock.
pub(crate) struct DeliveryContext {
    clock: Clock,
    counts: Arc<Counts>,
    histogram: Mutex<Histogram<u64>>,
    last_delivery: AtomicU64,
    first_error: Mutex<Option<String>>,
    client_errors: ErrorLog,
}

impl DeliveryContext {
    pub(crate) fn new(clock: Clock, counts: Arc<Counts>) -> Self {
        Self {
            clock,
            counts,
            histogram: Mutex::new(kafka::latency_histogram()),
            last_delivery: AtomicU64::new(0),
            first_error: Mutex::new(None),
            client_errors: ErrorLog::default(),
        }
    }

    /// The clock time of the last delivery report, if any arrived.
    pub(crate) fn last_delivery(&self) -> Option<u64> {
        Some(self.last_delivery.load(Ordering::Acquire)).filter(|&t| t > 0)
    }

    pub(crate) fn histogram(&self) -> Histogram<u64> {
        self.histogram.lock().expect("histogram lock").clone()
    }

    pub(crate) fn first_error(&self) -> Option<String> {
        self.first_error.lock().expect("error lock").clone()
    }
}

impl ClientContext for DeliveryContext {
    fn error(&self, error: KafkaError, reason: &str) {
        self.client_errors.report(&error, reason);
    }
}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent_nanos: usize) {
        let now = self.clock.nanos();
        match result {
            Ok(_) => {
                let latency = now.saturating_sub(sent_nanos as u64);
                kafka::record_nanos(&mut self.histogram.lock().expect("histogram lock"), latency);
                self.counts.acked.fetch_add(1, Ordering::Relaxed);
            }
            Err((error, _)) => {
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
                let mut first = self.first_error.lock().expect("error lock");
                if first.is_none() {
                    *first = Some(error.to_string());
                }
            }
        }
        self.last_delivery.fetch_max(now, Ordering::AcqRel);
    }
}

pub(crate) type BenchProducer = ThreadedProducer<DeliveryContext>;

/// Sends `record`, waiting while librdkafka's queue is full.
pub(crate) fn send(
    producer: &BenchProducer,
    mut record: BaseRecord<'_, [u8], [u8], usize>,
) -> anyhow::Result<()> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                producer.poll(Duration::from_millis(1));
            }
            Err((error, _)) => return Err(error).context("librdkafka refused a record"),
        }
    }
}

/// Waits until every record sent has its delivery report, served by the
/// producer's polling thread. rust-rdkafka's `commit_transaction` flushes
/// first, and its flush, finding records in flight, polls for up to 100 ms
/// while that thread takes the reports: every commit would wait that long,
/// a cost of the client's threading, not of the broker.
fn wait_for_deliveries(producer: &BenchProducer) {
    while producer.in_flight_count() > 0 {
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Records `first .. first + count` of the run, from one thread.
fn send_records(
    producer: &BenchProducer,
    args: &ProduceArgs,
    clock: Clock,
    payload: &[u8],
    keys: Option<&[Vec<u8>]>,
    first: u64,
    count: u64,
) -> anyhow::Result<()> {
    let per_transaction = args.transaction_records;
    for i in first..first + count {
        let sent = i - first;
        if per_transaction.is_some_and(|n| sent.is_multiple_of(n)) {
            producer
                .begin_transaction()
                .context("beginning a transaction")?;
        }
        let mut record =
            BaseRecord::with_opaque_to(&args.topic, clock.nanos() as usize).payload(payload);
        if let Some(keys) = keys {
            record = record.key(keys[(i % keys.len() as u64) as usize].as_slice());
        }
        send(producer, record)?;
        if per_transaction.is_some_and(|n| (sent + 1).is_multiple_of(n) || sent + 1 == count) {
            wait_for_deliveries(producer);
            producer
                .commit_transaction(Timeout::Never)
                .context("committing a transaction")?;
        }
    }
    producer
        .flush(Timeout::Never)
        .context("flushing the producer")
}

/// Thread `index` of `threads` sends `records / threads` records, the first
/// threads one more each when it does not divide.
fn share(records: u64, threads: u64, index: u64) -> (u64, u64) {
    let base = records / threads;
    let extra = records % threads;
    let count = base + u64::from(index < extra);
    let first = index * base + index.min(extra);
    (first, count)
}

pub(crate) fn run(bootstrap: &str, args: &ProduceArgs, json: bool) -> anyhow::Result<Report> {
    anyhow::ensure!(args.producers >= 1, "--producers must be at least 1");
    anyhow::ensure!(args.keys != Some(0), "--keys must be at least 1");
    anyhow::ensure!(
        args.transaction_records != Some(0),
        "--transaction-records must be at least 1"
    );
    let config = kafka::producer_config(bootstrap, &args.producer)?;
    let clock = Clock::start();
    let counts = Arc::new(Counts::default());
    let producers = (0..args.producers)
        .map(|index| {
            let mut config = config.clone();
            if args.transaction_records.is_some() {
                let id = format!("weir-bench-{}-{index}", std::process::id());
                config
                    .set("transactional.id", id)
                    .set("enable.idempotence", "true");
            }
            let producer: BenchProducer =
                kafka::create(&config, DeliveryContext::new(clock, counts.clone()))?;
            if args.transaction_records.is_some() {
                producer
                    .init_transactions(TOPIC_WAIT)
                    .context("initialising the transactional producer")?;
            }
            Ok(producer)
        })
        .collect::<anyhow::Result<Vec<BenchProducer>>>()?;
    // Metadata first (the broker may create the topic now), so that the
    // clock starts with every producer knowing the partition leaders.
    let mut partitions = 0;
    for producer in &producers {
        partitions = kafka::topic_partitions(producer.client(), &args.topic, TOPIC_WAIT)?.len();
    }
    let payload = kafka::payload(args.producer.record_size);
    let keys = args.keys.map(kafka::keys);

    let progress = {
        let counts = counts.clone();
        Progress::start("produce", args.records, json, move || {
            counts.acked.load(Ordering::Relaxed) + counts.failed.load(Ordering::Relaxed)
        })
    };
    let started = clock.nanos();
    std::thread::scope(|scope| {
        let threads: Vec<_> = producers
            .iter()
            .enumerate()
            .map(|(index, producer)| {
                let (first, count) = share(args.records, producers.len() as u64, index as u64);
                let (payload, keys) = (&payload, keys.as_deref());
                std::thread::Builder::new()
                    .name(format!("producer-{index}"))
                    .spawn_scoped(scope, move || {
                        send_records(producer, args, clock, payload, keys, first, count)
                    })
                    .expect("spawn a producer thread")
            })
            .collect();
        threads
            .into_iter()
            .try_for_each(|thread| thread.join().expect("producer thread panicked"))
    })?;
    let finished = clock.nanos();
    progress.finish();

    let contexts: Vec<&DeliveryContext> = producers.iter().map(|p| p.context().as_ref()).collect();
    let ended = contexts
        .iter()
        .filter_map(|c| c.last_delivery())
        .max()
        .unwrap_or(finished);
    let mut histogram = kafka::latency_histogram();
    for context in &contexts {
        histogram
            .add(context.histogram())
            .expect("histograms of the same bounds");
    }
    let first_error = contexts.iter().find_map(|c| c.first_error());
    let acked = counts.acked.load(Ordering::Relaxed);
    let failed = counts.failed.load(Ordering::Relaxed);
    let seconds = ended.saturating_sub(started) as f64 / 1e9;

    let p = &args.producer;
    Ok(Report::new("produce")
        .parameter("bootstrap", bootstrap)
        .parameter("topic", args.topic.as_str())
        .parameter("records", args.records)
        .parameter("record_size", p.record_size as u64)
        .parameter("keys", args.keys.map(|k| k as u64))
        .parameter("acks", p.acks.as_str())
        .parameter("compression", p.compression.as_str())
        .parameter("linger_ms", p.linger_ms)
        .parameter("batch_size", p.batch_size)
        .parameter("producers", args.producers as u64)
        .parameter("transaction_records", args.transaction_records)
        .parameter("partitions", partitions as u64)
        .throughput(acked, acked * p.record_size as u64, seconds)
        .latency("send to ack", Latency::of(&histogram))
        .result("acked", acked)
        .result("errors", failed)
        .result("elapsed_s", (seconds * 1000.0).round() / 1000.0)
        .result("first_error", first_error.clone())
        .fail_if(failed > 0, || {
            format!(
                "{failed} records were not delivered (first error: {})",
                first_error.unwrap_or_default()
            )
        })
        .fail_if(acked + failed != args.records, || {
            format!(
                "{} delivery reports for {} records",
                acked + failed,
                args.records
            )
        }))
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_cover_every_record_once() {
        for records in [0, 1, 7, 10, 1000] {
            for threads in 1..=5 {
                let mut next = 0;
                for index in 0..threads {
                    let (first, count) = share(records, threads, index);
                    assert_eq!(first, next, "records {records} threads {threads}");
                    next += count;
                }
                assert_eq!(next, records);
            }
        }
    }
}
