//! `e2e`: an open-loop producer and a consumer in one process.
//!
//! The producer does not wait for the broker: record `i` is due at
//! `start + i / rate`, whatever happened to the records before it. Its
//! first 8 bytes are that intended time (big-endian nanoseconds of the run's
//! clock), and every latency is measured from it — a broker that stalls
//! makes the records due during the stall late, and they are counted late
//! (no coordinated omission). The consumer, on its own thread, reads the
//! time back from each record: end-to-end latency is its arrival minus its
//! intended send time. The delivery reports give the produce latency from
//! the same intended time.
//!
//! The consumer starts at the end of every partition, so records already in
//! the topic are not counted, and gets a second to connect and start
//! fetching before the producer's clock starts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hdrhistogram::Histogram;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};

use crate::kafka::{self, Clock, ConsumerBenchContext};
use crate::produce::{self, BenchProducer, Counts, DeliveryContext};
use crate::progress::Progress;
use crate::report::{Latency, Report};
use crate::E2eArgs;

/// The consumer gives up this long after the producer finished if no
/// record arrives.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(15);

/// Time for the consumer to connect before the producer starts.
const CONSUMER_WARM_UP: Duration = Duration::from_secs(1);

/// What the two threads share.
#[derive(Debug)]
struct Shared {
    consumed: AtomicU64,
    /// Records the producer had acknowledged, once it has finished.
    expected: AtomicU64,
    producer_done: AtomicBool,
}

/// What the consumer saw.
struct Consumed {
    histogram: Histogram<u64>,
    count: u64,
    /// Records without a timestamp of this run.
    foreign: u64,
    errors: u64,
    last_at: Option<u64>,
}

/// When record `index` is due, in nanoseconds after the producer's start.
fn due(index: u64, rate: u64) -> u64 {
    (u128::from(index) * 1_000_000_000 / u128::from(rate)) as u64
}

pub(crate) fn run(bootstrap: &str, args: &E2eArgs, json: bool) -> anyhow::Result<Report> {
    let p = &args.producer;
    anyhow::ensure!(args.rate > 0, "--rate must be at least 1");
    anyhow::ensure!(
        p.record_size >= 8,
        "--record-size must be at least 8 (the timestamp)"
    );
    let total = (args.rate as f64 * args.duration.as_secs_f64()).round() as u64;
    anyhow::ensure!(total > 0, "--rate × --duration is less than one record");
    anyhow::ensure!(args.keys != Some(0), "--keys must be at least 1");

    let clock = Clock::start();
    let counts = Arc::new(Counts::default());
    let producer: BenchProducer = kafka::create(
        &kafka::producer_config(bootstrap, p)?,
        DeliveryContext::new(clock, counts.clone()),
    )?;
    let partitions = kafka::topic_partitions(producer.client(), &args.topic, produce::TOPIC_WAIT)?;

    let consume_bootstrap = args.consume_bootstrap.as_deref().unwrap_or(bootstrap);
    let mut config = kafka::consumer_config(consume_bootstrap);
    // A group id only because librdkafka assigns partitions in a group;
    // the assignment never joins it.
    config
        .set("group.id", "weir-bench-e2e")
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer<ConsumerBenchContext> =
        kafka::create(&config, ConsumerBenchContext::default())?;
    let mut assignment = TopicPartitionList::new();
    for &partition in &partitions {
        let (_, end) = consumer
            .fetch_watermarks(&args.topic, partition, Duration::from_secs(10))
            .with_context(|| format!("log end offset of partition {partition}"))?;
        assignment
            .add_partition_offset(&args.topic, partition, Offset::Offset(end))
            .context("building the assignment")?;
    }
    consumer.assign(&assignment).context("assigning")?;

    let shared = Arc::new(Shared {
        consumed: AtomicU64::new(0),
        expected: AtomicU64::new(u64::MAX),
        producer_done: AtomicBool::new(false),
    });
    let consumer_thread = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("consumer".into())
            .spawn(move || consume(&consumer, clock, &shared))
            .expect("spawn the consumer thread")
    };
    std::thread::sleep(CONSUMER_WARM_UP);

    let progress = {
        let shared = shared.clone();
        Progress::start("e2e", total, json, move || {
            shared.consumed.load(Ordering::Relaxed)
        })
    };
    let sent = send_at_rate(&producer, args, clock, total);
    let flushed = sent.as_ref().ok().map(|_| {
        producer
            .flush(Timeout::Never)
            .context("flushing the producer")
    });
    shared
        .expected
        .store(counts.acked.load(Ordering::Relaxed), Ordering::Release);
    shared.producer_done.store(true, Ordering::Release);
    let consumed = consumer_thread.join().expect("consumer thread panicked");
    progress.finish();
    let (start, send_end, max_lag) = sent?;
    if let Some(flushed) = flushed {
        flushed?;
    }

    let acked = counts.acked.load(Ordering::Relaxed);
    let failed = counts.failed.load(Ordering::Relaxed);
    let context = producer.context();
    let seconds = consumed
        .last_at
        .map_or(0.0, |last| last.saturating_sub(start) as f64 / 1e9);
    let send_seconds = send_end.saturating_sub(start) as f64 / 1e9;
    let first_error = context.first_error();
    Ok(Report::new("e2e")
        .parameter("bootstrap", bootstrap)
        .parameter("consume_bootstrap", consume_bootstrap)
        .parameter("topic", args.topic.as_str())
        .parameter("rate", args.rate)
        .parameter("duration_s", args.duration.as_secs_f64())
        .parameter("record_size", p.record_size as u64)
        .parameter("keys", args.keys.map(|k| k as u64))
        .parameter("acks", p.acks.as_str())
        .parameter("compression", p.compression.as_str())
        .parameter("linger_ms", p.linger_ms)
        .parameter("batch_size", p.batch_size)
        .parameter("partitions", partitions.len() as u64)
        .throughput(
            consumed.count,
            consumed.count * p.record_size as u64,
            seconds,
        )
        .latency("end to end", Latency::of(&consumed.histogram))
        .other_latency("produce_latency_ms", Latency::of(&context.histogram()))
        .result("sent", total)
        .result("acked", acked)
        .result("consumed", consumed.count)
        .result("errors", failed)
        .result("consume_errors", consumed.errors)
        .result("foreign_records", consumed.foreign)
        .result("send_s", (send_seconds * 1000.0).round() / 1000.0)
        .result("max_send_lag_ms", (max_lag as f64 / 1e3).round() / 1e3)
        .result("first_error", first_error.clone())
        .fail_if(failed > 0, || {
            format!(
                "{failed} records were not delivered (first error: {})",
                first_error.unwrap_or_default()
            )
        })
        .fail_if(consumed.count < acked, || {
            format!(
                "{} of {acked} acknowledged records were consumed",
                consumed.count
            )
        }))
}

/// Sends `total` records on schedule. Returns the clock times of the start
/// and of the last send, and how late the latest send was (nanoseconds).
fn send_at_rate(
    producer: &BenchProducer,
    args: &E2eArgs,
    clock: Clock,
    total: u64,
) -> anyhow::Result<(u64, u64, u64)> {
    let mut payload = kafka::payload(args.producer.record_size);
    // Made before the clock starts.
    let keys = args.keys.map(kafka::keys);
    let start = clock.nanos();
    let mut max_lag = 0;
    for index in 0..total {
        let due = start + due(index, args.rate);
        let now = clock.nanos();
        if due > now {
            // Late wake-ups count in the latency: it is measured from `due`.
            std::thread::sleep(Duration::from_nanos(due - now));
        } else {
            max_lag = max_lag.max(now - due);
        }
        payload[..8].copy_from_slice(&due.to_be_bytes());
        let mut record =
            BaseRecord::with_opaque_to(&args.topic, due as usize).payload(&payload[..]);
        if let Some(keys) = &keys {
            record = record.key(keys[(index % keys.len() as u64) as usize].as_slice());
        }
        produce::send(producer, record)?;
    }
    Ok((start, clock.nanos(), max_lag))
}

fn consume(
    consumer: &BaseConsumer<ConsumerBenchContext>,
    clock: Clock,
    shared: &Shared,
) -> Consumed {
    let mut result = Consumed {
        histogram: kafka::latency_histogram(),
        count: 0,
        foreign: 0,
        errors: 0,
        last_at: None,
    };
    let mut last_record = Instant::now();
    loop {
        if result.count >= shared.expected.load(Ordering::Acquire) {
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let now = clock.nanos();
                last_record = Instant::now();
                let sent = message
                    .payload()
                    .and_then(|p| p.get(..8))
                    .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
                    .filter(|&sent| sent <= now);
                match sent {
                    Some(sent) => {
                        kafka::record_nanos(&mut result.histogram, now - sent);
                        result.count += 1;
                        result.last_at = Some(now);
                        shared.consumed.store(result.count, Ordering::Relaxed);
                    }
                    None => result.foreign += 1,
                }
            }
            Some(Err(error)) => {
                result.errors += 1;
                if result.errors <= 5 {
                    eprintln!("weir-bench: e2e consumer: {error}");
                }
            }
            None => {
                if shared.producer_done.load(Ordering::Acquire)
                    && last_record.elapsed() > DRAIN_TIMEOUT
                {
                    break;
                }
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::due;

    #[test]
    fn schedule_is_exact() {
        assert_eq!(due(0, 50_000), 0);
        assert_eq!(due(1, 50_000), 20_000);
        assert_eq!(due(50_000, 50_000), 1_000_000_000);
        assert_eq!(due(1, 3), 333_333_333);
        assert_eq!(due(3, 3), 1_000_000_000);
    }
}
