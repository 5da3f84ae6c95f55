//! `consume`: one librdkafka consumer reads N records. Without a group it
//! assigns itself every partition from the beginning; with one it
//! subscribes (`auto.offset.reset=earliest`).
//!
//! Throughput is measured from the first record to the Nth, so that
//! connecting and joining a group (which waits out the broker's initial
//! rebalance delay) are not counted; the time to the first record is
//! reported apart as `startup_ms`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::kafka::{self, ConsumerBenchContext};
use crate::progress::Progress;
use crate::report::Report;
use crate::ConsumeArgs;

pub(crate) fn run(bootstrap: &str, args: &ConsumeArgs, json: bool) -> anyhow::Result<Report> {
    let mut config = kafka::consumer_config(bootstrap);
    config.set("auto.offset.reset", "earliest");
    match &args.group {
        Some(group) => config.set("group.id", group),
        // librdkafka assigns partitions only in a group, but an assignment
        // never joins it, and there is nothing to commit.
        None => config
            .set("group.id", "weir-bench-assign")
            .set("enable.auto.commit", "false"),
    };
    kafka::apply_properties(&mut config, &args.properties)?;
    let consumer: BaseConsumer<ConsumerBenchContext> =
        kafka::create(&config, ConsumerBenchContext::default())?;
    let partitions =
        kafka::topic_partitions(consumer.client(), &args.topic, crate::produce::TOPIC_WAIT)?;
    let started = Instant::now();
    match &args.group {
        Some(_) => consumer.subscribe(&[&args.topic]).context("subscribing")?,
        None => {
            let mut assignment = TopicPartitionList::new();
            for &partition in &partitions {
                assignment
                    .add_partition_offset(&args.topic, partition, Offset::Beginning)
                    .context("building the assignment")?;
            }
            consumer.assign(&assignment).context("assigning")?;
        }
    }

    let received = Arc::new(AtomicU64::new(0));
    let progress = {
        let received = received.clone();
        Progress::start("consume", args.records, json, move || {
            received.load(Ordering::Relaxed)
        })
    };
    let mut count = 0u64;
    let mut bytes = 0u64;
    let mut first: Option<(Instant, u64)> = None;
    let mut errors = 0u64;
    // For the idle timeout: the count when it last changed, and when.
    let (mut seen, mut seen_at) = (0u64, Instant::now());
    while count < args.records {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                count += 1;
                bytes += message.payload_len() as u64;
                if first.is_none() {
                    first = Some((Instant::now(), bytes));
                }
                if count.is_multiple_of(1024) {
                    received.store(count, Ordering::Relaxed);
                }
            }
            Some(Err(error)) => {
                errors += 1;
                if errors <= 5 {
                    eprintln!("weir-bench: consume: {error}");
                }
            }
            None => {
                received.store(count, Ordering::Relaxed);
                if count != seen {
                    (seen, seen_at) = (count, Instant::now());
                } else if seen_at.elapsed() > args.idle_timeout {
                    break;
                }
            }
        }
    }
    let ended = Instant::now();
    progress.finish();

    let (seconds, after_first, after_first_bytes) = match first {
        Some((at, first_bytes)) => (
            ended.duration_since(at).as_secs_f64(),
            count - 1,
            bytes - first_bytes,
        ),
        None => (0.0, 0, 0),
    };
    let startup_ms = first.map(|(at, _)| at.duration_since(started).as_secs_f64() * 1000.0);
    Ok(Report::new("consume")
        .parameter("bootstrap", bootstrap)
        .parameter("topic", args.topic.as_str())
        .parameter("records", args.records)
        .parameter("group", args.group.clone())
        .parameter("partitions", partitions.len() as u64)
        .throughput(after_first, after_first_bytes, seconds)
        .result("received", count)
        .result("bytes", bytes)
        .result("errors", errors)
        .result("elapsed_s", (seconds * 1000.0).round() / 1000.0)
        .result(
            "startup_ms",
            startup_ms.map(|ms| (ms * 10.0).round() / 10.0),
        )
        .fail_if(count < args.records, || {
            format!(
                "only {count} of {} records arrived (none for {:?})",
                args.records, args.idle_timeout
            )
        }))
}
