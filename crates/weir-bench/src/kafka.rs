//! What the client-side benchmarks share: producer and consumer settings,
//! waiting for a topic's partitions, payloads, and the latency clock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::ValueEnum;
use hdrhistogram::Histogram;
use rdkafka::client::{Client, ClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;

use crate::ProducerArgs;

/// The producer's `acks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Acks {
    #[value(name = "0")]
    Zero,
    #[value(name = "1")]
    One,
    #[value(name = "all", alias = "-1")]
    All,
}

impl Acks {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Acks::Zero => "0",
            Acks::One => "1",
            Acks::All => "all",
        }
    }
}

/// The producer's `compression.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// The librdkafka configuration of a benchmark producer.
pub(crate) fn producer_config(
    bootstrap: &str,
    args: &ProducerArgs,
) -> anyhow::Result<ClientConfig> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "weir-bench")
        .set("acks", args.acks.as_str())
        .set("compression.type", args.compression.as_str())
        // librdkafka's default, spelled out: the null broker has no
        // InitProducerId, and the benchmark measures plain produce.
        .set("enable.idempotence", "false");
    if let Some(linger) = args.linger_ms {
        config.set("linger.ms", linger.to_string());
    }
    if let Some(size) = args.batch_size {
        config.set("batch.size", size.to_string());
    }
    apply_properties(&mut config, &args.properties)?;
    Ok(config)
}

/// The librdkafka configuration of a benchmark consumer.
/// (`-X` properties are applied by the caller, after its own settings.)
pub(crate) fn consumer_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "weir-bench")
        .set("enable.partition.eof", "false")
        // librdkafka stops fetching a partition for fetch.queue.backoff.ms
        // (default 1 s) whenever its prefetch queue holds queued.min.messages
        // (default 100 000): a consumer that keeps up would then measure
        // that pause rather than the broker. A deeper queue and a short
        // backoff keep the fetcher busy.
        .set("queued.min.messages", "1000000")
        .set("fetch.queue.backoff.ms", "10");
    config
}

/// Applies `-X NAME=VALUE` settings, last wins.
pub(crate) fn apply_properties(
    config: &mut ClientConfig,
    properties: &[String],
) -> anyhow::Result<()> {
    for property in properties {
        let Some((name, value)) = property.split_once('=') else {
            bail!("-X {property:?}: expected NAME=VALUE");
        };
        config.set(name.trim(), value.trim());
    }
    Ok(())
}

/// The partitions of `topic`, once every one of them has a leader. A
/// producer's metadata request also makes a broker that allows it create the
/// topic; a few seconds are allowed for that.
pub(crate) fn topic_partitions<C: ClientContext>(
    client: &Client<C>,
    topic: &str,
    timeout: Duration,
) -> anyhow::Result<Vec<i32>> {
    let deadline = Instant::now() + timeout;
    loop {
        let why_not = match client.fetch_metadata(Some(topic), Duration::from_secs(5)) {
            Ok(metadata) => match metadata.topics().iter().find(|t| t.name() == topic) {
                None => "not in the metadata response".to_owned(),
                Some(t) => match t.error() {
                    Some(error) => format!("{:?}", rdkafka::types::RDKafkaErrorCode::from(error)),
                    None if t.partitions().is_empty() => "no partitions".to_owned(),
                    None if t.partitions().iter().any(|p| p.leader() < 0) => {
                        "a partition has no leader".to_owned()
                    }
                    None => {
                        let mut ids: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
                        ids.sort_unstable();
                        return Ok(ids);
                    }
                },
            },
            Err(error) => error.to_string(),
        };
        if Instant::now() >= deadline {
            bail!("topic {topic:?} is not available: {why_not}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A record value of `size` bytes: uppercase letters from a fixed seed, as
/// Kafka's `kafka-producer-perf-test` makes them. The same buffer is sent
/// for every record.
pub(crate) fn payload(size: usize) -> Vec<u8> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..size)
        .map(|_| {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b'A' + (state % 26) as u8
        })
        .collect()
}

/// The `K` keys `key-0` … `key-(K-1)`, allocated once.
pub(crate) fn keys(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| format!("key-{i}").into_bytes())
        .collect()
}

/// Latencies are recorded in microseconds, from 1 µs to one hour, with
/// three significant digits.
pub(crate) fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Records a latency given in nanoseconds.
pub(crate) fn record_nanos(histogram: &mut Histogram<u64>, nanos: u64) {
    histogram.saturating_record((nanos / 1000).max(1));
}

/// Nanoseconds since a start shared by the threads of one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    start: Instant,
}

impl Clock {
    pub(crate) fn start() -> Self {
        Self {
            start: Instant::now(),
        }
    }

    pub(crate) fn nanos(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// Client-level errors (a refused connection, a broker gone) printed on
/// stderr, the first few only: librdkafka retries them by itself.
#[derive(Debug, Default)]
pub(crate) struct ErrorLog {
    seen: AtomicU32,
}

impl ErrorLog {
    const SHOWN: u32 = 5;

    pub(crate) fn report(&self, error: &KafkaError, reason: &str) {
        let seen = self.seen.fetch_add(1, Ordering::Relaxed);
        if seen < Self::SHOWN {
            eprintln!("weir-bench: librdkafka: {error}: {reason}");
        } else if seen == Self::SHOWN {
            eprintln!("weir-bench: librdkafka: more errors, not shown");
        }
    }
}

/// The context of benchmark consumers.
#[derive(Debug, Default)]
pub(crate) struct ConsumerBenchContext {
    errors: ErrorLog,
}

impl ClientContext for ConsumerBenchContext {
    fn error(&self, error: KafkaError, reason: &str) {
        self.errors.report(&error, reason);
    }
}

impl ConsumerContext for ConsumerBenchContext {}

/// Creates a client from `config`, naming what failed.
pub(crate) fn create<T, C>(config: &ClientConfig, context: C) -> anyhow::Result<T>
where
    T: rdkafka::config::FromClientConfigAndContext<C>,
    C: ClientContext,
{
    config
        .create_with_context(context)
        .context("creating the librdkafka client")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_letters_of_the_size_asked() {
        let p = payload(1000);
        assert_eq!(p.len(), 1000);
        assert!(p.iter().all(u8::is_ascii_uppercase));
        assert_eq!(p, payload(1000), "the same every time");
        assert!(payload(0).is_empty());
    }

    #[test]
    fn properties_need_a_value() {
        let mut config = ClientConfig::new();
        apply_properties(&mut config, &["linger.ms = 7".into()]).unwrap();
        assert_eq!(config.get("linger.ms"), Some("7"));
        assert!(apply_properties(&mut config, &["linger.ms".into()]).is_err());
    }

    #[test]
    fn latencies_are_kept_in_microseconds() {
        let mut h = latency_histogram();
        record_nanos(&mut h, 1_500_000);
        record_nanos(&mut h, 10);
        assert_eq!(h.len(), 2);
        assert_eq!(h.min(), 1);
        assert!((1499..=1501).contains(&h.max()));
    }
}
