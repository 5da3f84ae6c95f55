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
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeProducersRequest, DescribeProducersResponse, ListOffsetsRequest,
    ListOffsetsResponse, TopicName,
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
        .set("enable.idempotence", "true")
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
    assert!(all_in_order(&consume_from_zero(&weir.kafka, topic, 3000)));
    assert!(metric(weir, "weir_remote_copy_segments_total") >= 2.0);
    assert!(metric(weir, "weir_remote_fetch_bytes_total") > 0.0);
}

#[test]
fn a_tiered_topic_is_read_from_offset_0_after_its_local_segments_left_for_a_file_store() {
    let store = tempfile::tempdir().unwrap();
    let url = format!("file://{}/tier", store.path().display());
    let weir = start(&tiered_flags(&url));
    tiers_and_reads_back(&weir, "tiered");
    // The CLI shows both tiers, from the leader's HTTP endpoint.
    let described = common::cli::run(
        &[
            "topic",
            "--bootstrap",
            weir.kafka.as_str(),
            "describe",
            "tiered",
        ],
        b"",
    )
    .ok();
    let table = described.table("PARTITION");
    assert_eq!(
        table[0],
        [
            "PARTITION",
            "LEADER",
            "REPLICAS",
            "ISR",
            "LOG-START",
            "LOG-END",
            "LOCAL-START",
            "LOCAL-SIZE",
            "REMOTE-START",
            "REMOTE-SIZE"
        ]
    );
    let row = &table[1];
    let number = |i: usize| row[i].parse::<u64>().unwrap_or_else(|_| panic!("{row:?}"));
    assert_eq!((number(4), number(5), number(8)), (0, 3000, 0));
    assert!(
        number(6) > 1000 && number(7) > 0 && number(9) > 0,
        "{row:?}"
    );
    let (status, body) = weir.http_get("/v1/topics/tiered/remote-log");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"remote_storage_enable\":true"), "{body}");
    assert_eq!(weir.http_get("/v1/topics/nothing/remote-log").0, 404);
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
        let child = Self::spawn(dir.path(), port);
        Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    fn port(&self) -> u16 {
        self.endpoint.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// Stops the server: the object store is unreachable.
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again over the same directory and port.
    fn resume(&mut self) {
        self.child = Self::spawn(self.dir.path(), self.port());
    }

    fn spawn(dir: &Path, port: u16) -> Child {
        let child = Command::new("s3s-fs")
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start the S3 API server s3s-fs ({error}); install it with \
                     `cargo install s3s-fs@0.14.1 --features binary --locked` (.ci/run does)"
                )
            });
        wait_for(20, "s3s-fs to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        child
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
    let refused = alter(&weir, "t", &["remote.storage.enable=false"]).failed_with_one_line();
    assert!(
        refused.contains("without deleting remote data"),
        "{refused}"
    );
    alter(
        &weir,
        "t",
        &[
            "remote.storage.enable=false",
            "remote.log.delete.on.disable=true",
        ],
    )
    .ok();
}

/// `weir topic alter-config TOPIC --set ...`.
fn alter(weir: &Weir, topic: &str, settings: &[&str]) -> common::cli::Out {
    let mut args = vec![
        "topic",
        "--bootstrap",
        weir.kafka.as_str(),
        "alter-config",
        topic,
    ];
    for setting in settings {
        args.extend(["--set", setting]);
    }
    common::cli::run(&args, b"")
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

/// A consumer's fetch of partition 0 at `offset`: (error code, log start
/// offset, bytes of records).
fn fetch_at(raw: &mut Raw, topic: &str, offset: i64) -> (i16, i64, usize) {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, FetchResponse};
    let response: FetchResponse = raw.call(
        ApiKey::Fetch,
        12,
        &FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]),
    );
    let p = &response.responses[0].partitions[0];
    (
        p.error_code,
        p.log_start_offset,
        p.records.as_ref().map_or(0, |r| r.len()),
    )
}

/// Waits until the local log of partition 0 starts past `offset`: the
/// segments below it are only in the remote tier.
fn wait_until_tiered_past(raw: &mut Raw, topic: &str, offset: i64) {
    wait_for(60, "local segments to leave for the remote tier", || {
        list_offset(raw, topic, EARLIEST_LOCAL).1 > offset
    });
}

const KAFKA_STORAGE_ERROR: i16 = 56;
const OFFSET_OUT_OF_RANGE: i16 = 1;

fn all_in_order(read: &[(i64, String)]) -> bool {
    read.iter()
        .enumerate()
        .all(|(i, (offset, value))| *offset == i as i64 && *value == record(i))
}

#[test]
fn with_the_object_store_down_produce_and_reads_go_on_and_nothing_uncopied_is_deleted() {
    let mut server = S3Server::start();
    let weir = start_against_s3(&server);
    create_tiered_topic(&weir.kafka, "down");
    server.stop();
    produce(&weir.kafka, "down", 0..3000);
    let mut raw = Raw::connect(&weir.kafka);
    wait_for(30, "failed copies to be counted", || {
        metric(&weir, "weir_remote_errors_total") > 0.0
    });
    // Nothing copied, so nothing local goes, whatever local retention says.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(list_offset(&mut raw, "down", EARLIEST_LOCAL), (0, 0));
    assert_eq!(list_offset(&mut raw, "down", LATEST_TIERED), (0, -1));
    assert!(metric(&weir, "weir_remote_copy_lag_segments") >= 2.0);
    assert!(all_in_order(&consume_from_zero(&weir.kafka, "down", 3000)));
    // Back up: the copies resume, and the local segments go.
    server.resume();
    wait_until_tiered_past(&mut raw, "down", 1000);
    assert!(all_in_order(&consume_from_zero(&weir.kafka, "down", 3000)));
    // With the store down again, a read of the remote tier answers a
    // retriable error, while the local log is still served.
    server.stop();
    let local_start = list_offset(&mut raw, "down", EARLIEST_LOCAL).1;
    wait_for(10, "a read of the remote tier to fail", || {
        fetch_at(&mut raw, "down", 0).0 == KAFKA_STORAGE_ERROR
    });
    let (error, _, bytes) = fetch_at(&mut raw, "down", local_start);
    assert_eq!(error, 0);
    assert!(bytes > 0);
}

#[test]
fn a_bucket_emptied_behind_the_brokers_back_answers_an_error_never_wrong_records() {
    let store = tempfile::tempdir().unwrap();
    let weir = start(&tiered_flags(&format!("file://{}", store.path().display())));
    create_tiered_topic(&weir.kafka, "emptied");
    produce(&weir.kafka, "emptied", 0..3000);
    let mut raw = Raw::connect(&weir.kafka);
    wait_until_tiered_past(&mut raw, "emptied", 1000);
    // Copies of later segments may be landing meanwhile: removed until
    // one pass finds everything gone.
    wait_for(30, "the store to be emptied", || {
        let entries: Vec<_> = std::fs::read_dir(store.path()).unwrap().collect();
        for entry in &entries {
            let _ = std::fs::remove_dir_all(entry.as_ref().unwrap().path());
        }
        entries.is_empty()
    });
    // What only the store held is gone: a retriable error, never records
    // of another offset.
    let (error, log_start, bytes) = fetch_at(&mut raw, "emptied", 0);
    assert_eq!((error, log_start, bytes), (KAFKA_STORAGE_ERROR, 0, 0));
    // What the broker holds is served, and produce goes on.
    let local_start = list_offset(&mut raw, "emptied", EARLIEST_LOCAL).1;
    let (error, _, bytes) = fetch_at(&mut raw, "emptied", local_start);
    assert_eq!(error, 0);
    assert!(bytes > 0);
    produce(&weir.kafka, "emptied", 3000..3100);
    assert_eq!(list_offset(&mut raw, "emptied", -1), (0, 3100));
}

#[test]
fn remote_retention_deletes_expired_segments_and_moves_the_log_start() {
    let store = tempfile::tempdir().unwrap();
    let weir = start(&tiered_flags(&format!("file://{}", store.path().display())));
    create_topic(
        &weir.kafka,
        "expiring",
        &[
            ("remote.storage.enable", "true"),
            ("segment.bytes", "16384"),
            ("retention.ms", "3600000"),
            ("local.retention.ms", "1000"),
        ],
    )
    .unwrap();
    // Records from two hours ago, past retention.ms already.
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("batch.size", "4096")
        .create()
        .unwrap();
    let two_hours_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 2 * 3_600_000;
    for i in 0..1000 {
        let payload = record(i);
        producer
            .send(
                BaseRecord::<(), _>::to("expiring")
                    .partition(0)
                    .payload(&payload)
                    .timestamp(two_hours_ago),
            )
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let mut raw = Raw::connect(&weir.kafka);
    // Every sealed segment is copied, then deleted by retention.ms: the
    // log starts at the active segment, in both tiers.
    wait_for(60, "remote retention to move the log start", || {
        let start = list_offset(&mut raw, "expiring", EARLIEST).1;
        start > 0 && start == list_offset(&mut raw, "expiring", EARLIEST_LOCAL).1
    });
    wait_for(30, "the copies' objects to go", || {
        objects(store.path(), ".log") == 0 && objects(store.path(), ".index") == 0
    });
    assert!(metric(&weir, "weir_remote_delete_segments_total") >= 2.0);
    assert_eq!(fetch_at(&mut raw, "expiring", 0).0, OFFSET_OUT_OF_RANGE);
}

#[test]
fn delete_records_and_topic_deletion_reach_the_remote_tier() {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
    let store = tempfile::tempdir().unwrap();
    let weir = start(&tiered_flags(&format!("file://{}", store.path().display())));
    create_tiered_topic(&weir.kafka, "trimmed");
    produce(&weir.kafka, "trimmed", 0..3000);
    let mut raw = Raw::connect(&weir.kafka);
    wait_until_tiered_past(&mut raw, "trimmed", 1000);
    let copies = objects(store.path(), ".log");
    let response: DeleteRecordsResponse = raw.call(
        ApiKey::DeleteRecords,
        2,
        &DeleteRecordsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("trimmed")))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(500)])]),
    );
    let result = &response.topics[0].partitions[0];
    assert_eq!((result.error_code, result.low_watermark), (0, 500));
    assert_eq!(list_offset(&mut raw, "trimmed", EARLIEST), (0, 500));
    assert_eq!(fetch_at(&mut raw, "trimmed", 100).0, OFFSET_OUT_OF_RANGE);
    let (error, log_start, bytes) = fetch_at(&mut raw, "trimmed", 500);
    assert_eq!((error, log_start), (0, 500));
    assert!(bytes > 0);
    // The copies wholly below 500 go.
    wait_for(30, "the copies below the log start to go", || {
        objects(store.path(), ".log") < copies
    });
    // Deleting the topic removes all it had in the store.
    common::cli::run(
        &[
            "topic",
            "--bootstrap",
            weir.kafka.as_str(),
            "delete",
            "trimmed",
        ],
        b"",
    )
    .ok();
    wait_for(30, "the deleted topic's objects to go", || {
        objects(store.path(), "") == 0
    });
}

#[test]
fn a_broker_killed_mid_copy_leaves_no_hole_and_no_orphan() {
    let store = tempfile::tempdir().unwrap();
    let mut flags = tiered_flags(&format!("file://{}", store.path().display()));
    // A copy of a 64 KiB segment takes about two seconds.
    flags.extend([
        "--remote-log-manager-copy-max-bytes-per-second".to_owned(),
        "32768".to_owned(),
    ]);
    let mut weir = start(&flags);
    create_topic(
        &weir.kafka,
        "killed",
        &[
            ("remote.storage.enable", "true"),
            ("segment.bytes", "65536"),
            ("local.retention.bytes", "1"),
        ],
    )
    .unwrap();
    produce(&weir.kafka, "killed", 0..2000);
    // Killed once the first copy has written its small parts, before its
    // `.log` is complete.
    wait_for(30, "a copy to start", || {
        objects(store.path(), ".index") > objects(store.path(), ".log")
    });
    weir.restart(false);
    let mut raw = Raw::connect(&weir.kafka);
    wait_until_tiered_past(&mut raw, "killed", 1000);
    assert!(all_in_order(&consume_from_zero(
        &weir.kafka,
        "killed",
        2000
    )));
    // The interrupted copy's objects were removed: every part of every
    // copy is there once.
    wait_for(30, "the orphan to be removed", || {
        objects(store.path(), ".index") == objects(store.path(), ".log")
    });
    assert_eq!(
        objects(store.path(), ".snapshot"),
        objects(store.path(), ".log")
    );
}

/// A three-node cluster with tiered storage into one `file://` store,
/// node `i + 1` also given `own[i]`.
fn tiered_cluster(store: &Path, extra: &[&str]) -> common::cluster::Cluster {
    let mut flags = tiered_flags(&format!("file://{}", store.display()));
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    common::cluster::Cluster::start(&flags)
}

fn create_replicated_tiered_topic(bootstrap: &str, name: &str, segment_bytes: &str) {
    common::cluster::create_topic_with(
        bootstrap,
        name,
        1,
        3,
        &[
            ("remote.storage.enable", "true"),
            ("segment.bytes", segment_bytes),
            ("local.retention.bytes", "1"),
        ],
    );
}

fn leader_of(bootstrap: &str, topic: &str) -> i32 {
    common::cluster::partitions(bootstrap, topic)[0].leader
}

/// The producers a replica of partition 0 remembers, as (producer id,
/// last sequence), from DescribeProducers.
fn producers_on(raw: &mut Raw, topic: &str) -> Vec<(i64, i32)> {
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
        .with_partition_indexes(vec![0])]);
    let response: DescribeProducersResponse = raw.call(ApiKey::DescribeProducers, 0, &request);
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0, "{:?}", partition.error_message);
    let mut producers: Vec<(i64, i32)> = partition
        .active_producers
        .iter()
        .map(|p| (p.producer_id.0, p.last_sequence))
        .collect();
    producers.sort_unstable();
    producers
}

#[test]
fn a_follower_behind_the_leaders_local_log_starts_over_at_it_with_the_state_below() {
    let store = tempfile::tempdir().unwrap();
    let mut cluster = tiered_cluster(store.path(), &[]);
    let bootstrap = cluster.bootstrap();
    create_replicated_tiered_topic(&bootstrap, "behind", "16384");
    let leader = leader_of(&bootstrap, "behind");
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    assert!(cluster.node_mut(follower).stop().success());
    // Two idempotent producers; the first one's batches all end up below
    // the leader's local log start, in the remote tier only.
    produce(&cluster.node(leader).kafka, "behind", 0..3000);
    produce(&cluster.node(leader).kafka, "behind", 3000..3600);
    let mut raw = Raw::connect(&cluster.node(leader).kafka);
    wait_for(
        60,
        "the first producer's batches to leave the local log",
        || list_offset(&mut raw, "behind", EARLIEST_LOCAL).1 > 3000,
    );
    let local_start = list_offset(&mut raw, "behind", EARLIEST_LOCAL).1;
    let leaders_producers = producers_on(&mut raw, "behind");
    assert_eq!(leaders_producers.len(), 2, "{leaders_producers:?}");
    // The follower comes back behind the leader's local log: it is told
    // OFFSET_MOVED_TO_TIERED_STORAGE, starts over at the leader's local
    // log start with the epochs and producer state of the remote copy
    // below it, and catches up into the ISR.
    cluster.node_mut(follower).start_again();
    let bootstrap = cluster.bootstrap();
    wait_for(60, "the follower back in the ISR", || {
        common::cluster::partitions(&bootstrap, "behind")[0]
            .isr
            .len()
            == 3
    });
    let dir = cluster.node(follower).data_dir.join("behind-0");
    let first_local = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".log")?.parse::<i64>().ok()
        })
        .min()
        .unwrap();
    assert!(
        first_local >= local_start,
        "the follower's first segment starts at {first_local}, the leader's local log at {local_start}"
    );
    // It remembers the producer whose batches it never fetched, as the
    // leader does: it would answer that producer's retry as a duplicate.
    let mut on_follower = Raw::connect(&cluster.node(follower).kafka);
    assert_eq!(producers_on(&mut on_follower, "behind"), leaders_producers);
    // Its leader-epoch checkpoint (Kafka's format) reaches down to offset
    // 0, below its first local segment.
    let checkpoint = std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).unwrap();
    let first_epoch_start = checkpoint.lines().nth(2).and_then(|l| l.split(' ').nth(1));
    assert_eq!(first_epoch_start, Some("0"), "{checkpoint}");
    // With the old leader gone, a new one serves everything from offset 0.
    cluster.node_mut(leader).kill();
    let bootstrap = cluster.bootstrap();
    wait_until_leader_moves(&bootstrap, "behind", leader);
    assert!(all_in_order(&consume_from_zero(&bootstrap, "behind", 3600)));
}

#[test]
fn a_leader_change_mid_copy_leaves_no_hole_and_no_orphan() {
    let store = tempfile::tempdir().unwrap();
    // A copy of a 64 KiB segment takes about two seconds.
    let mut cluster = tiered_cluster(
        store.path(),
        &["--remote-log-manager-copy-max-bytes-per-second", "32768"],
    );
    let bootstrap = cluster.bootstrap();
    create_replicated_tiered_topic(&bootstrap, "moved", "65536");
    let leader = leader_of(&bootstrap, "moved");
    produce(&bootstrap, "moved", 0..2000);
    wait_for(30, "a copy to start", || {
        objects(store.path(), ".index") > objects(store.path(), ".log")
    });
    // Leadership moves while the copy runs: the old leader can no longer
    // finish it, and the new one removes it and copies on its own.
    assert!(cluster.node_mut(leader).stop().success());
    let bootstrap = cluster.bootstrap();
    let new_leader = wait_until_leader_moves(&bootstrap, "moved", leader);
    let mut raw = Raw::connect(&cluster.node(new_leader).kafka);
    wait_until_tiered_past(&mut raw, "moved", 1000);
    assert!(all_in_order(&consume_from_zero(&bootstrap, "moved", 2000)));
    wait_for(30, "the interrupted copy to be removed", || {
        objects(store.path(), ".index") == objects(store.path(), ".log")
    });
    cluster.node_mut(leader).start_again();
}

fn wait_until_leader_moves(bootstrap: &str, topic: &str, from: i32) -> i32 {
    let mut leader = -1;
    wait_for(60, "a new leader", || {
        leader = common::cluster::partitions(bootstrap, topic)[0].leader;
        leader > 0 && leader != from
    });
    leader
}

#[test]
fn a_lookup_by_time_finds_records_in_the_remote_tier() {
    let store = tempfile::tempdir().unwrap();
    let weir = start(&tiered_flags(&format!("file://{}", store.path().display())));
    create_tiered_topic(&weir.kafka, "dated");
    // Record i at T0 + i seconds.
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 3_600_000;
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("batch.size", "4096")
        .create()
        .unwrap();
    for i in 0..3000 {
        let payload = record(i);
        producer
            .send(
                BaseRecord::<(), _>::to("dated")
                    .partition(0)
                    .payload(&payload)
                    .timestamp(t0 + i as i64 * 1000),
            )
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let mut raw = Raw::connect(&weir.kafka);
    wait_until_tiered_past(&mut raw, "dated", 1000);
    let local_start = list_offset(&mut raw, "dated", EARLIEST_LOCAL).1;
    // In the remote tier: the first record at or after the time.
    assert_eq!(list_offset(&mut raw, "dated", t0 + 500_000 + 1), (0, 501));
    assert_eq!(list_offset(&mut raw, "dated", t0 - 1), (0, 0));
    // In the local log, as before.
    let later = local_start + 10;
    assert_eq!(
        list_offset(&mut raw, "dated", t0 + later * 1000),
        (0, later)
    );
    // Past the last record: none.
    assert_eq!(list_offset(&mut raw, "dated", t0 + 4_000_000), (0, -1));
}

#[test]
fn copying_stops_with_copy_disable_and_copies_go_with_delete_on_disable() {
    let store = tempfile::tempdir().unwrap();
    let weir = start(&tiered_flags(&format!("file://{}", store.path().display())));
    create_tiered_topic(&weir.kafka, "switched");
    produce(&weir.kafka, "switched", 0..3000);
    let mut raw = Raw::connect(&weir.kafka);
    wait_until_tiered_past(&mut raw, "switched", 1000);
    // Read-only remote data: nothing more is copied, what is there stays
    // readable (Kafka wants local retention as long as the total then).
    alter(
        &weir,
        "switched",
        &["remote.log.copy.disable=true", "local.retention.bytes=-2"],
    )
    .ok();
    // A copy under way when the switch came may still finish.
    let mut tiered = list_offset(&mut raw, "switched", LATEST_TIERED).1;
    wait_for(30, "the copies under way to finish", || {
        std::thread::sleep(Duration::from_secs(1));
        let now = list_offset(&mut raw, "switched", LATEST_TIERED).1;
        std::mem::replace(&mut tiered, now) == now
    });
    produce(&weir.kafka, "switched", 3000..6000);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(list_offset(&mut raw, "switched", LATEST_TIERED).1, tiered);
    assert!(all_in_order(&consume_from_zero(
        &weir.kafka,
        "switched",
        3000
    )));
    // Turned off with its remote data deleted (KIP-950): the copies go,
    // and the log starts where the local log does.
    alter(
        &weir,
        "switched",
        &[
            "remote.storage.enable=false",
            "remote.log.delete.on.disable=true",
        ],
    )
    .ok();
    wait_for(30, "the copies to go", || objects(store.path(), "") == 0);
    wait_for(10, "the log to start at the local log", || {
        list_offset(&mut raw, "switched", EARLIEST)
            == list_offset(&mut raw, "switched", EARLIEST_LOCAL)
    });
    assert_eq!(fetch_at(&mut raw, "switched", 0).0, OFFSET_OUT_OF_RANGE);
    assert_eq!(list_offset(&mut raw, "switched", LATEST_TIERED), (0, -1));
}
