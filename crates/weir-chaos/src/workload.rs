//! The workload: producers sending unique values at a steady rate and
//! recording what their delivery reports said, and readers that read every
//! partition back from its start to its high watermark.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
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

use crate::checker::{Coverage, Outcome, Read, Write};
use crate::Error;

/// Creates a topic with the `weir` CLI, retrying while the cluster
/// settles. (Not with librdkafka's admin client: it sends CreateTopics to
/// the node the metadata names as controller, which may be a
/// controller-only node that clients cannot reach.)
pub fn create_topic(
    weir: &Path,
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replicas: i32,
    configs: &[(&str, &str)],
) -> Result<(), Error> {
    let mut last = String::new();
    for _ in 0..10 {
        let mut command = Command::new(weir);
        command.args(["topic", "create", name, "--bootstrap", bootstrap]);
        command.args(["--partitions", &partitions.to_string()]);
        command.args(["--replication-factor", &replicas.to_string()]);
        for (key, value) in configs {
            command.args(["--config", &format!("{key}={value}")]);
        }
        let output = command.stdin(Stdio::null()).output()?;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() || stderr.contains("already exists") {
            return Ok(());
        }
        last = stderr.trim().to_owned();
        std::thread::sleep(Duration::from_secs(1));
    }
    Err(Error(format!("cannot create topic {name}: {last}")))
}

#[derive(Debug, Clone)]
pub struct WorkloadOptions {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: i32,
    pub producers: usize,
    /// Values per second, per producer.
    pub rate: u32,
    /// `acks`: "all" or "1".
    pub acks: String,
    pub idempotence: bool,
    /// How long a value may wait for its acknowledgement.
    pub message_timeout_ms: u64,
}

/// What one producer incarnation recorded; delivery reports fill it in.
#[derive(Default)]
struct ProducerLog {
    writes: Vec<Write>,
    acks: u64,
}

struct Recorder {
    log: Arc<Mutex<ProducerLog>>,
    origin: Instant,
}

impl ClientContext for Recorder {}

impl ProducerContext for Recorder {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, index: usize) {
        let at_ms = self.origin.elapsed().as_millis() as u64;
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let outcome = match result {
            Ok(message) => {
                let order = log.acks;
                log.acks += 1;
                Outcome::Acked {
                    partition: message.partition(),
                    offset: message.offset(),
                    at_ms,
                    order,
                }
            }
            Err((error, _)) => Outcome::Failed {
                error: error.to_string(),
            },
        };
        log.writes[index].outcome = outcome;
    }
}

/// Producers running in the background.
pub struct Workload {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Vec<Write>>>,
}

impl Workload {
    /// Starts the producers; times are measured from `origin`.
    pub fn start(options: &WorkloadOptions, origin: Instant) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..options.producers)
            .map(|i| {
                let options = options.clone();
                let stop = stop.clone();
                std::thread::Builder::new()
                    .name(format!("producer-{i}"))
                    .spawn(move || produce(&format!("p{i}"), &options, origin, &stop))
                    .expect("spawn a producer")
            })
            .collect();
        Self { stop, threads }
    }

    /// Stops sending, waits for the delivery reports of what is in flight
    /// (at most the message timeout), and returns every write.
    pub fn stop(self) -> Vec<Write> {
        self.stop.store(true, Ordering::SeqCst);
        self.threads
            .into_iter()
            .flat_map(|t| t.join().expect("a producer panicked"))
            .collect()
    }
}

fn producer_config(options: &WorkloadOptions) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &options.bootstrap)
        .set("acks", &options.acks)
        .set("enable.idempotence", options.idempotence.to_string())
        .set("message.timeout.ms", options.message_timeout_ms.to_string())
        .set(
            "request.timeout.ms",
            options.message_timeout_ms.min(10_000).to_string(),
        )
        .set("linger.ms", "5")
        .set("topic.metadata.refresh.interval.ms", "2000")
        .set("socket.connection.setup.timeout.ms", "5000");
    // librdkafka's own debug contexts (e.g. `eos,msg,protocol`), logged to
    // stderr: to see why a producer stops getting acknowledgements.
    if let Ok(contexts) = std::env::var("WEIR_CHAOS_RDKAFKA_DEBUG") {
        config.set("debug", contexts);
    }
    config
}

/// One producer thread: sends `{name}-{seq}` round robin over the
/// partitions at the configured rate until told to stop. A producer that
/// hits a fatal error is replaced by a new incarnation, named
/// `{name}.{n}`, with an order of its own.
fn produce(
    name: &str,
    options: &WorkloadOptions,
    origin: Instant,
    stop: &AtomicBool,
) -> Vec<Write> {
    let interval = Duration::from_secs_f64(1.0 / f64::from(options.rate.max(1)));
    let mut all = Vec::new();
    let mut incarnation = 0;
    let mut seq: u64 = 0;
    while !stop.load(Ordering::SeqCst) {
        let producer_name = match incarnation {
            0 => name.to_owned(),
            n => format!("{name}.{n}"),
        };
        incarnation += 1;
        let log = Arc::new(Mutex::new(ProducerLog::default()));
        let producer: ThreadedProducer<Recorder> = match producer_config(options)
            .create_with_context(Recorder {
                log: log.clone(),
                origin,
            }) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("weir-chaos: cannot create producer {producer_name}: {e}");
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
        };
        let mut next = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            if let Some((code, reason)) = producer.client().fatal_error() {
                eprintln!("weir-chaos: producer {producer_name} failed: {code}: {reason}");
                break;
            }
            let value = format!("{producer_name}-{seq}");
            let partition = (seq % options.partitions as u64) as i32;
            let index = {
                let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
                log.writes.push(Write {
                    producer: producer_name.clone(),
                    seq,
                    value: value.clone(),
                    sent_ms: origin.elapsed().as_millis() as u64,
                    outcome: Outcome::Unknown,
                });
                log.writes.len() - 1
            };
            let mut record = BaseRecord::with_opaque_to(&options.topic, index)
                .partition(partition)
                .payload(&value);
            loop {
                match producer.send::<(), String>(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        record = r;
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err((error, _)) => {
                        let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
                        log.writes[index].outcome = Outcome::Failed {
                            error: error.to_string(),
                        };
                        break;
                    }
                }
            }
            seq += 1;
            next += interval;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else if now - next > Duration::from_secs(1) {
                next = now;
            }
        }
        let _ = producer.flush(Timeout::After(Duration::from_millis(
            options.message_timeout_ms + 5000,
        )));
        drop(producer);
        let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
        all.append(&mut log.writes);
    }
    all
}

/// Sends `count` values `{name}-{i}` to `partition`, through `broker`
/// alone (acks=all, no retries, 3 s each), for a fault script that needs
/// a leader to append; returns them with what became of each.
pub fn send_to_leader(
    broker: &str,
    topic: &str,
    partition: i32,
    name: &str,
    count: u64,
    origin: Instant,
) -> Vec<Write> {
    let log = Arc::new(Mutex::new(ProducerLog::default()));
    let producer: Result<ThreadedProducer<Recorder>, _> = ClientConfig::new()
        .set("bootstrap.servers", broker)
        .set("acks", "all")
        .set("enable.idempotence", "false")
        .set("retries", "0")
        // One record a batch: a truncation inside their range then keeps
        // those below it.
        .set("batch.num.messages", "1")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "3000")
        .set("request.timeout.ms", "3000")
        .create_with_context(Recorder {
            log: log.clone(),
            origin,
        });
    let Ok(producer) = producer else {
        return Vec::new();
    };
    for seq in 0..count {
        let value = format!("{name}-{seq}");
        let index = {
            let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
            log.writes.push(Write {
                producer: name.to_owned(),
                seq,
                value: value.clone(),
                sent_ms: origin.elapsed().as_millis() as u64,
                outcome: Outcome::Unknown,
            });
            log.writes.len() - 1
        };
        let record = BaseRecord::with_opaque_to(topic, index)
            .partition(partition)
            .payload(&value);
        let _ = producer.send::<(), String>(record);
    }
    let _ = producer.flush(Timeout::After(Duration::from_secs(5)));
    drop(producer);
    let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
    std::mem::take(&mut log.writes)
}

/// Reads every partition of `topic` from its start to its high
/// watermark, as read pass `pass`; gives up on a partition after
/// `timeout` (its coverage is then incomplete).
pub fn read_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    pass: u32,
    timeout: Duration,
) -> (Vec<Read>, Vec<Coverage>) {
    let mut reads = Vec::new();
    let mut coverage = Vec::new();
    for partition in 0..partitions {
        let (mut r, c) = read_partition(bootstrap, topic, partition, pass, timeout);
        reads.append(&mut r);
        coverage.push(c);
    }
    (reads, coverage)
}

fn read_partition(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    pass: u32,
    timeout: Duration,
) -> (Vec<Read>, Coverage) {
    let deadline = Instant::now() + timeout;
    let mut coverage = Coverage {
        pass,
        partition,
        start: 0,
        end: 0,
        complete: false,
    };
    let mut reads = Vec::new();
    let consumer: BaseConsumer = match ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "weir-chaos-reader")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("isolation.level", "read_uncommitted")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "100")
        .create()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("weir-chaos: cannot create a consumer: {e}");
            return (reads, coverage);
        }
    };
    let Some((low, high)) = watermarks(&consumer, topic, partition, deadline) else {
        return (reads, coverage);
    };
    coverage.start = low;
    coverage.end = high;
    if low >= high {
        coverage.complete = true;
        return (reads, coverage);
    }
    let mut assignment = TopicPartitionList::new();
    if assignment
        .add_partition_offset(topic, partition, Offset::Offset(low))
        .and_then(|()| consumer.assign(&assignment))
        .is_err()
    {
        return (reads, coverage);
    }
    let mut seen = BTreeSet::new();
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                let offset = message.offset();
                if offset >= high {
                    continue;
                }
                if seen.insert(offset) {
                    reads.push(Read {
                        pass,
                        partition,
                        offset,
                        value: message
                            .payload()
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                            .unwrap_or_default(),
                    });
                }
                if offset + 1 >= high {
                    coverage.complete = true;
                    break;
                }
            }
            Some(Err(e)) => {
                eprintln!("weir-chaos: reading {topic}-{partition}: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
            None => {}
        }
    }
    (reads, coverage)
}

/// The low and high watermarks of `topic`-`partition`, asked again until
/// `deadline` while the cluster settles; `None` (said on stderr) if they
/// never came.
pub(crate) fn watermarks(
    consumer: &BaseConsumer,
    topic: &str,
    partition: i32,
    deadline: Instant,
) -> Option<(i64, i64)> {
    loop {
        match consumer.fetch_watermarks(topic, partition, Timeout::After(Duration::from_secs(5))) {
            Ok(w) => return Some(w),
            Err(e) if Instant::now() < deadline => {
                eprintln!("weir-chaos: watermarks of {topic}-{partition}: {e}; trying again");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => {
                eprintln!("weir-chaos: no watermarks of {topic}-{partition}: {e}");
                return None;
            }
        }
    }
}
