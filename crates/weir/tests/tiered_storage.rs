//! Tiered storage (KIP-405) against the real binary: sealed segments copied
//! to a `file://` store and to a real S3 API server (`s3s-fs`), local
//! segments removed by local retention, and real clients reading from
//! offset 0 through the remote tier.

mod common;

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

const EARLIEST: i64 = -2;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// Broker flags for tiered storage into `url`, with passes and retention
/// checks every 200 ms.
fn tiered_flags(url: &str) -> Vec<String> {
    [
        "--remote-log-storage-system-enable",
        "true",
        "--remote-storage-url",
        url,
        "--remote-log-manager-task-interval-ms",
        "200",
        "--log-retention-check-interval-ms",
        "200",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn start(flags: &[String]) -> Weir {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Weir::start_logged(&flags)
}

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)))
}

/// Creates a topic; the error message Kafka's protocol carries if refused.
fn create_topic(bootstrap: &str, name: &str, configs: &[(&str, &str)]) -> Result<(), String> {
    let mut topic = NewTopic::new(name, 1, TopicReplication::Fixed(1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let results = common::cli::block_on(admin(bootstrap).create_topics(&[topic], &options()))
        .expect("create topics");
    results[0]
        .clone()
        .map(drop)
        .map_err(|(_, code)| format!("{code:?}"))
}

/// A tiered topic of small segments that keeps one byte locally: every
/// sealed segment goes once copied.
fn create_tiered_topic(bootstrap: &str, name: &str) {
    create_topic(
        bootstrap,
        name,
        &[
            ("remote.storage.enable", "true"),
            ("segment.bytes", "16384"),
            ("local.retention.bytes", "1"),
        ],
    )
    .unwrap();
}

fn record(i: usize) -> String {
    format!("record-{i:06}-{}", "x".repeat(80))
}

fn produce(bootstrap: &str, topic: &str, range: std::ops::Range<usize>) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("linger.ms", "5")
        // Batches of a few KiB: a 16 KiB segment holds several.
        .set("batch.size", "4096")
        .create()
        .unwrap();
    for i in range {
        let payload = record(i);
        let key = format!("k{i}");
        loop {
            match producer.send(
                BaseRecord::to(topic)
                    .partition(0)
                    .key(&key)
                    .payload(&payload),
            ) {
                Ok(()) => break,
                Err((_, _)) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

fn list_offset(raw: &mut Raw, topic: &str, timestamp: i64) -> (i16, i64) {
    let response: ListOffsetsResponse = raw.call(
        ApiKey::ListOffsets,
        9,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(timestamp)])]),
    );
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.offset)
}

/// Waits until `done` holds, for at most `secs` seconds.
fn wait_for(secs: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reads partition 0 of `topic` from offset 0 with librdkafka; the values
/// in offset order, `count` of them.
fn consume_from_zero(bootstrap: &str, topic: &str, count: usize) -> Vec<(i64, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("{topic}-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(0))
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut read = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while read.len() < count {
        assert!(Instant::now() < deadline, "read {} of {count}", read.len());
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(message)) => read.push((
                message.offset(),
                String::from_utf8(message.payload().unwrap().to_vec()).unwrap(),
            )),
            Some(Err(error)) => panic!("consume: {error}"),
            None => {}
        }
    }
    read
}

/// The objects under a `file://` store, by file name suffix.
fn objects(dir: &Path, suffix: &str) -> usize {
    fn walk(dir: &Path, suffix: &str, count: &mut usize) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, suffix, count);
            } else if path.to_string_lossy().ends_with(suffix) {
                *count += 1;
            }
        }
    }
    let mut count = 0;
    walk(dir, suffix, &mut count);
    count
}

fn metric(weir: &Weir, name: &str) -> f64 {
    let (_, text) = weir.http_get("/metrics");
    text.lines()
        .filter(|line| line.starts_with(name))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Produces 3000 records to a tiered topic, waits until its local log
/// starts past 0 with the rest in the remote tier, and reads them all back
/// from offset 0.
fn tiers_and_reads_back(weir: &Weir, topic: &str) {
    create_tiered_topic(&weir.kafka, topic);
    produce(&weir.kafka, topic, 0..3000);
    let mut raw = Raw::connect(&weir.kafka);
    let deadline = Instant::now() + Duration::from_secs(60);
    while list_offset(&mut raw, topic, EARLIEST_LOCAL).1 <= 1000 {
        assert!(
            Instant::now() < deadline,
            "local segments never left for the remote tier: earliest local {:?}, latest tiered {:?}; the broker logged:\n{}",
            list_offset(&mut raw, topic, EARLIEST_LOCAL),
            list_offset(&mut raw, topic, LATEST_TIERED),
            weir.logged()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(list_offset(&mut raw, topic, EARLIEST), (0, 0));
    let (error, tiered) = list_offset(&mut raw, topic, LATEST_TIERED);
    let local_start = list_offset(&mut raw, topic, EARLIEST_LOCAL).1;
    assert_eq!(error, 0);
    assert!(
        tiered + 1 >= local_start && tiered < 3000,
        "latest tiered {tiered}, local start {local_start}"
    );
    let read = consume_from_zero(&weir.kafka, topic, 3000);
    for (i, (offset, value)) in read.iter().enumerate() {
        assert_eq!((*offset, value.as_str()), (i as i64, record(i).as_str()));
    }
    assert!(metric(weir, "weir_remote_copy_segments_total") >= 2.0);
    assert!(metric(weir, "weir_remote_fetch_bytes_total") > 0.0);
}

#[test]
fn a_tiered_topic_is_read_from_offset_0_after_its_local_segments_left_for_a_file_store() {
    let store = tempfile::tempdir().unwrap();
    let url = format!("file://{}/tier", store.path().display());
    let weir = start(&tiered_flags(&url));
    tiers_and_reads_back(&weir, "tiered");
    let tier = store.path().join("tier");
    assert!(objects(&tier, ".log") >= 2);
    assert_eq!(objects(&tier, ".log"), objects(&tier, ".index"));
    assert_eq!(
        objects(&tier, ".log"),
        objects(&tier, ".leader-epoch-checkpoint")
    );
}

/// An `s3s-fs` server on a free port over a fresh directory, holding the
/// bucket `tier`.
struct S3Server {
    child: Child,
    pub endpoint: String,
    pub dir: tempfile::TempDir,
}

const ACCESS_KEY: &str = "weir-test-access";
const SECRET_KEY: &str = "weir-test-secret-key";

impl S3Server {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tier")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("s3s-fs")
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start the S3 API server s3s-fs ({error}); install it with \
                     `cargo install s3s-fs@0.14.1 --features binary --locked` (.ci/run does)"
                )
            });
        let endpoint = format!("http://127.0.0.1:{port}");
        wait_for(20, "s3s-fs to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Self {
            child,
            endpoint,
            dir,
        }
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_against_s3(server: &S3Server) -> Weir {
    let mut flags = tiered_flags("s3://tier/cluster-a");
    flags.extend([
        "--remote-storage-s3-endpoint".to_owned(),
        server.endpoint.clone(),
    ]);
    flags.extend([
        "--remote-storage-s3-region".to_owned(),
        "us-east-1".to_owned(),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Weir::start_with_env(
        &flags,
        &[
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
        ],
    )
}

#[test]
fn a_tiered_topic_is_read_from_offset_0_through_a_real_s3_server() {
    let server = S3Server::start();
    let weir = start_against_s3(&server);
    tiers_and_reads_back(&weir, "tiered-s3");
    let prefix = server.dir.path().join("tier").join("cluster-a");
    assert!(
        objects(&prefix, ".log") >= 2,
        "objects under {}",
        prefix.display()
    );
}

#[test]
fn tiered_topics_are_refused_as_kafka_refuses_them() {
    // Without tiered storage on the broker.
    let plain = Weir::start(&[]);
    let refused =
        create_topic(&plain.kafka, "t", &[("remote.storage.enable", "true")]).unwrap_err();
    assert!(refused.contains("InvalidConfig"), "{refused}");
    let store = tempfile::tempdir().unwrap();
    let weir = start(&tiered_flags(&format!("file://{}", store.path().display())));
    for configs in [
        &[
            ("remote.storage.enable", "true"),
            ("cleanup.policy", "compact"),
        ][..],
        &[
            ("remote.storage.enable", "true"),
            ("retention.ms", "1000"),
            ("local.retention.ms", "2000"),
        ],
        &[
            ("remote.storage.enable", "true"),
            ("retention.bytes", "1000"),
            ("local.retention.bytes", "-1"),
        ],
    ] {
        let refused = create_topic(&weir.kafka, "t", configs).unwrap_err();
        assert!(refused.contains("InvalidConfig"), "{configs:?}: {refused}");
    }
    create_topic(&weir.kafka, "t", &[("remote.storage.enable", "true")]).unwrap();
    // Turned off only with its remote data deleted (KIP-950).
    let alter = |settings: &[&str]| {
        let mut args = vec![
            "topic",
            "--bootstrap",
            weir.kafka.as_str(),
            "alter-config",
            "t",
        ];
        for setting in settings {
            args.extend(["--set", setting]);
        }
        common::cli::run(&args, b"")
    };
    let refused = alter(&["remote.storage.enable=false"]).failed_with_one_line();
    assert!(
        refused.contains("without deleting remote data"),
        "{refused}"
    );
    alter(&[
        "remote.storage.enable=false",
        "remote.log.delete.on.disable=true",
    ])
    .ok();
}

#[test]
fn a_broker_with_tiered_storage_and_no_store_says_what_is_missing() {
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--remote-log-storage-system-enable", "true"])
        .arg("--data-dir")
        .arg(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--remote-storage-url"), "{stderr}");
}
