//! `log.dirs`, DescribeLogDirs and AlterReplicaLogDirs: partitions spread
//! over several directories, found again after a restart, described with
//! their sizes and each directory's volume, and moved between directories
//! while they serve.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::cluster::{
    assert_all_in_order, create_topic, create_topic_with, send_acked, wait_until,
};
use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey, BrokerId,
    DescribeLogDirsRequest, DescribeLogDirsResponse, FetchRequest, FetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use weir_log::testing::BatchBuilder;

/// Per directory (by path): its error code and (topic, partition, size).
type Described = Vec<(String, i16, Vec<(String, i32, i64)>)>;

fn describe(
    raw: &mut Raw,
    version: i16,
    topics: Option<&[(&str, &[i32])]>,
) -> DescribeLogDirsResponse {
    let request = DescribeLogDirsRequest::default().with_topics(topics.map(|topics| {
        topics
            .iter()
            .map(|(name, partitions)| {
                DescribableLogDirTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(name.to_string())))
                    .with_partitions(partitions.to_vec())
            })
            .collect()
    }));
    raw.call(ApiKey::DescribeLogDirs, version, &request)
}

fn summary(response: &DescribeLogDirsResponse) -> Described {
    let mut dirs: Described = response
        .results
        .iter()
        .map(|dir| {
            let mut partitions: Vec<(String, i32, i64)> = dir
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(|p| {
                        assert!(!p.is_future_key);
                        assert_eq!(p.offset_lag, 0);
                        (t.name.0.to_string(), p.partition_index, p.partition_size)
                    })
                })
                .collect();
            partitions.sort();
            (dir.log_dir.to_string(), dir.error_code, partitions)
        })
        .collect();
    dirs.sort();
    dirs
}

fn path(dir: &Path) -> String {
    dir.display().to_string()
}

/// The partition directories in `dir`, sorted.
/// A broker whose partition logs go to `a` and `b` in a new temporary
/// directory (kept alive by the first element).
fn start_with_two_log_dirs() -> (tempfile::TempDir, PathBuf, PathBuf, Weir) {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let log_dirs = format!("{},{}", path(&a), path(&b));
    let weir = Weir::start_in(
        &tmp.path().join("data"),
        &["--log-dirs", &log_dirs],
        None,
        &[],
    );
    (tmp, a, b, weir)
}

fn partition_dirs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("spread-"))
        .collect();
    names.sort();
    names
}

#[test]
fn partitions_spread_over_the_log_dirs_and_are_found_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let data = tmp.path().join("data");
    let log_dirs = format!("{},{}", path(&a), path(&b));
    let mut weir = Weir::start_in(&data, &["--log-dirs", &log_dirs], None, &[]);
    create_topic(&weir.kafka, "spread", 4, 1);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("spread");

    // Two each: every new replica goes to the directory holding fewer.
    assert_eq!(partition_dirs(&a).len(), 2, "{:?}", partition_dirs(&a));
    assert_eq!(partition_dirs(&b).len(), 2, "{:?}", partition_dirs(&b));
    assert!(partition_dirs(&data).is_empty());

    let response = describe(&mut raw, 4, None);
    assert_eq!(response.error_code, 0);
    let before = summary(&response);
    assert_eq!(before.len(), 2);
    assert_eq!((before[0].0.as_str(), before[0].1), (path(&a).as_str(), 0));
    assert_eq!((before[1].0.as_str(), before[1].1), (path(&b).as_str(), 0));
    for (dir, _, partitions) in &before {
        let on_disk: Vec<String> = partition_dirs(Path::new(dir));
        let described: Vec<String> = partitions
            .iter()
            .map(|(t, p, _)| format!("{t}-{p}"))
            .collect();
        assert_eq!(described, on_disk);
    }
    for result in &response.results {
        assert!(result.total_bytes > 0, "{result:?}");
        assert!(
            (0..=result.total_bytes).contains(&result.usable_bytes),
            "{result:?}"
        );
    }

    // Sizes grow as records arrive.
    let size_of = |described: &Described, partition: i32| -> (String, i64) {
        described
            .iter()
            .find_map(|(dir, _, ps)| {
                ps.iter()
                    .find(|(_, p, _)| *p == partition)
                    .map(|(_, _, size)| (dir.clone(), *size))
            })
            .unwrap()
    };
    let (dir0, empty) = size_of(&before, 0);
    assert_eq!(empty, 0);
    let batch = BatchBuilder::new(10).build();
    let batch_len = batch.len() as i64;
    assert_eq!(raw.produce("spread", 0, batch).0, 0);
    let grown = summary(&describe(&mut raw, 4, None));
    assert_eq!(size_of(&grown, 0), (dir0.clone(), batch_len));
    assert_eq!(raw.produce("spread", 0, BatchBuilder::new(5).build()).0, 0);
    let (_, again) = size_of(&summary(&describe(&mut raw, 4, None)), 0);
    assert!(again > batch_len);

    // Older versions: the same directories, without the volume's size.
    let v1 = describe(&mut raw, 1, None);
    assert_eq!(summary(&v1).len(), 2);

    // A restart finds every partition where it was, with its data.
    drop(raw);
    weir.restart(true);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("spread");
    let after = summary(&describe(&mut raw, 4, None));
    assert_eq!(size_of(&after, 0), (dir0, again));
    let places = |d: &Described| -> Vec<(String, Vec<i32>)> {
        d.iter()
            .map(|(dir, _, ps)| (dir.clone(), ps.iter().map(|p| p.1).collect()))
            .collect()
    };
    assert_eq!(places(&after), places(&grown));
    assert_eq!(raw.produce("spread", 3, BatchBuilder::new(1).build()).0, 0);
}

#[test]
fn the_topics_filter_keeps_hosted_partitions_named() {
    let (_tmp, _a, _b, weir) = start_with_two_log_dirs();
    create_topic(&weir.kafka, "spread", 2, 1);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("spread");

    let filtered = describe(
        &mut raw,
        4,
        Some(&[("spread", &[1, 99]), ("no-such-topic", &[0])]),
    );
    assert_eq!(filtered.error_code, 0);
    let described = summary(&filtered);
    assert_eq!(described.len(), 2, "every directory is listed");
    let named: Vec<(String, i32)> = described
        .iter()
        .flat_map(|(_, code, ps)| {
            assert_eq!(*code, 0);
            ps.iter().map(|(t, p, _)| (t.clone(), *p))
        })
        .collect();
    assert_eq!(named, vec![("spread".to_owned(), 1)]);
    // A directory left with nothing asked for lists no topic at all.
    assert!(filtered.results.iter().any(|r| r.topics.is_empty()));

    // Only an unknown topic: the directories, with nothing in them.
    let unknown = summary(&describe(&mut raw, 2, Some(&[("no-such-topic", &[0])])));
    assert_eq!(unknown.len(), 2);
    assert!(unknown
        .iter()
        .all(|(_, code, ps)| *code == 0 && ps.is_empty()));
    // An empty list asks for nothing.
    let none = summary(&describe(&mut raw, 3, Some(&[])));
    assert!(none.iter().all(|(_, _, ps)| ps.is_empty()));
}

#[test]
fn without_log_dirs_partitions_stay_in_the_data_directory() {
    let weir = Weir::start(&[]);
    create_topic(&weir.kafka, "spread", 2, 1);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("spread");
    assert_eq!(partition_dirs(&weir.data_dir).len(), 2);
    let described = summary(&describe(&mut raw, 4, None));
    let data_dir = std::path::absolute(&weir.data_dir).unwrap();
    assert_eq!(described.len(), 1);
    assert_eq!(described[0].0, path(&data_dir));
    let partitions: Vec<i32> = described[0].2.iter().map(|p| p.1).collect();
    assert_eq!(partitions, vec![0, 1]);
}

#[test]
fn an_unreadable_log_dir_is_a_storage_error() {
    let (_tmp, a, b, weir) = start_with_two_log_dirs();
    let mut raw = Raw::connect(&weir.kafka);
    // The directory goes away under the running broker.
    std::fs::remove_dir_all(&b).unwrap();
    let response = describe(&mut raw, 4, None);
    let failed = response
        .results
        .iter()
        .find(|r| r.log_dir.as_str() == path(&b))
        .unwrap();
    assert_eq!(failed.error_code, 56, "KAFKA_STORAGE_ERROR");
    assert!(failed.topics.is_empty());
    let fine = response
        .results
        .iter()
        .find(|r| r.log_dir.as_str() == path(&a))
        .unwrap();
    assert_eq!(fine.error_code, 0);
}

#[test]
fn a_partition_in_two_log_dirs_stops_the_start_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b): (PathBuf, PathBuf) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(a.join("twice-0")).unwrap();
    std::fs::create_dir_all(b.join("twice-0")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .arg("--data-dir")
        .arg(tmp.path().join("data"))
        .args(["--log-dirs", &format!("{},{}", path(&a), path(&b))])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--controller-listen",
            "127.0.0.1:0",
        ])
        .env("WEIR_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("twice-0"), "{stderr}");
    assert!(stderr.contains(&path(&a)), "{stderr}");
    assert!(stderr.contains(&path(&b)), "{stderr}");
}

/// Asks for each (path, topic, partitions) move; the error code of each
/// (topic, partition), sorted.
fn alter(raw: &mut Raw, version: i16, moves: &[(&str, &str, &[i32])]) -> Vec<(String, i32, i16)> {
    let request = AlterReplicaLogDirsRequest::default().with_dirs(
        moves
            .iter()
            .map(|(path, topic, partitions)| {
                AlterReplicaLogDir::default()
                    .with_path(StrBytes::from_string(path.to_string()))
                    .with_topics(vec![AlterReplicaLogDirTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(partitions.to_vec())])
            })
            .collect(),
    );
    let response: AlterReplicaLogDirsResponse =
        raw.call(ApiKey::AlterReplicaLogDirs, version, &request);
    let mut codes: Vec<(String, i32, i16)> = response
        .results
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic_name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    codes.sort();
    codes
}

/// Where DescribeLogDirs puts the partition: (directory, is a future
/// replica, offset lag), each entry.
fn described_at(raw: &mut Raw, topic: &str, partition: i32) -> Vec<(String, bool, i64)> {
    let response = describe(raw, 4, Some(&[(topic, &[partition])]));
    response
        .results
        .iter()
        .flat_map(|dir| {
            dir.topics.iter().flat_map(move |t| {
                t.partitions
                    .iter()
                    .map(move |p| (dir.log_dir.to_string(), p.is_future_key, p.offset_lag))
            })
        })
        .collect()
}

/// Every value in the partition, in offset order.
fn read_all(bootstrap: &str, topic: &str, partition: i32, at_least: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "log-dirs-reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, partition, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut values = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while values.len() < at_least {
        assert!(
            std::time::Instant::now() < deadline,
            "read {} of {at_least}",
            values.len()
        );
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let message = message.expect("consumed");
            values.push(String::from_utf8(message.payload().unwrap().to_vec()).unwrap());
        }
    }
    values
}

/// Sends records one after the other (acks=all) until told to stop,
/// counting those acknowledged in `acked`; the values acknowledged.
fn keep_producing(
    bootstrap: &str,
    topic: &str,
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
) -> Vec<String> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "20000")
        .create()
        .expect("producer");
    let mut values = Vec::new();
    let mut i = 0;
    while !stop.load(Ordering::Acquire) {
        let value = format!("live-{i}-{}", "x".repeat(200));
        let sent = common::cli::block_on(
            producer.send(
                FutureRecord::to(topic)
                    .key(&value)
                    .payload(&value)
                    .partition(0),
                Duration::from_secs(20),
            ),
        );
        if sent.is_ok() {
            values.push(value);
            acked.fetch_add(1, Ordering::AcqRel);
        }
        i += 1;
    }
    values
}

/// Waits until `acked` counts `more` records past `from`.
fn wait_for_acks(acked: &AtomicUsize, from: usize, more: usize) {
    wait_until(
        "records to be acknowledged",
        Duration::from_secs(30),
        || (acked.load(Ordering::Acquire) >= from + more).then_some(()),
    );
}

/// The error code of a fetch of partition 0 from its start.
fn fetch_error(raw: &mut Raw, topic: &str) -> i16 {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![FetchPartition::default()
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response: FetchResponse = raw.call(ApiKey::Fetch, 11, &request);
    response.responses[0].partitions[0].error_code
}

/// The entries of `dir` but the lock file every log directory holds while
/// its broker runs.
fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|name| name != weir_meta::LOCK_FILE)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_replica_moves_to_another_log_dir_while_records_keep_coming() {
    let (_tmp, a, b, mut weir) = start_with_two_log_dirs();
    // Small segments: most of the log is sealed segments, copied while
    // the partition serves.
    create_topic_with(&weir.kafka, "moving", 1, 1, &[("segment.bytes", "4096")]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("moving");
    assert!(
        a.join("moving-0").is_dir(),
        "the first replica goes to the first directory"
    );
    let mut acked = send_acked(&weir.kafka, "moving", "before", 2000);
    assert_eq!(acked.len(), 2000);

    let stop = Arc::new(AtomicBool::new(false));
    let live_acked = Arc::new(AtomicUsize::new(0));
    let producer = {
        let (kafka, stop, live_acked) = (weir.kafka.clone(), stop.clone(), live_acked.clone());
        std::thread::spawn(move || keep_producing(&kafka, "moving", stop, live_acked))
    };
    wait_for_acks(&live_acked, 0, 5);
    assert_eq!(
        alter(&mut raw, 2, &[(&path(&b), "moving", &[0])]),
        vec![("moving".to_owned(), 0, 0)]
    );
    wait_until("the move to finish", Duration::from_secs(30), || {
        (described_at(&mut raw, "moving", 0) == vec![(path(&b), false, 0)]).then_some(())
    });
    // Records keep being acknowledged once the moved log serves.
    wait_for_acks(&live_acked, live_acked.load(Ordering::Acquire), 5);
    stop.store(true, Ordering::Release);
    let live = producer.join().unwrap();
    acked.extend(live);

    // Every acknowledged record, once, in order.
    let read = read_all(&weir.kafka, "moving", 0, acked.len());
    assert_all_in_order(&read, &acked);
    let mut unique = read.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), read.len(), "duplicates");

    // The data is in b and nothing of it is left in a.
    assert!(
        files_in(&b.join("moving-0"))
            .iter()
            .filter(|f| f.ends_with(".log"))
            .count()
            > 1
    );
    assert!(
        files_in(&a).iter().all(|f| !f.starts_with("moving")),
        "{:?}",
        files_in(&a)
    );
    assert!(
        files_in(&b)
            .iter()
            .all(|f| f == "moving-0" || !f.starts_with("moving")),
        "{:?}",
        files_in(&b)
    );

    // A restart keeps it there.
    drop(raw);
    weir.restart(true);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("moving");
    assert_eq!(
        described_at(&mut raw, "moving", 0),
        vec![(path(&b), false, 0)]
    );
    assert_eq!(read_all(&weir.kafka, "moving", 0, read.len()), read);
    assert_eq!(raw.produce("moving", 0, BatchBuilder::new(1).build()).0, 0);
}

#[test]
fn a_move_copies_within_its_io_rate_and_speeds_up_when_the_limit_rises() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let log_dirs = format!("{},{}", path(&a), path(&b));
    let weir = Weir::start_in(
        &tmp.path().join("data"),
        &[
            "--log-dirs",
            &log_dirs,
            "--replica-alter-log-dirs-io-max-bytes-per-second",
            "100000",
        ],
        None,
        &[],
    );
    create_topic_with(&weir.kafka, "slow", 1, 1, &[("segment.bytes", "65536")]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("slow");
    // 2 MB of records: twenty seconds' worth at the limit.
    for _ in 0..40 {
        let batch = BatchBuilder::new(50).value_size(1000).build();
        assert_eq!(raw.produce("slow", 0, batch).0, 0);
    }
    assert_eq!(
        alter(&mut raw, 2, &[(&path(&b), "slow", &[0])]),
        vec![("slow".to_owned(), 0, 0)]
    );
    std::thread::sleep(Duration::from_secs(2));
    let during = described_at(&mut raw, "slow", 0);
    assert_eq!(during.len(), 2, "{during:?}");
    assert_eq!(during[0], (path(&a), false, 0));
    let (dir, future, lag) = &during[1];
    assert_eq!((dir, *future), (&path(&b), true));
    assert!(*lag > 0, "the future replica is behind while throttled");

    common::cli::run(
        &[
            "cluster",
            "alter-config",
            "--bootstrap",
            &weir.kafka,
            "--set",
            "replica.alter.log.dirs.io.max.bytes.per.second=1000000000",
        ],
        b"",
    )
    .ok();
    wait_until("the move to finish", Duration::from_secs(30), || {
        (described_at(&mut raw, "slow", 0) == vec![(path(&b), false, 0)]).then_some(())
    });
    assert_eq!(read_all(&weir.kafka, "slow", 0, 2000).len(), 2000);
}

#[test]
fn a_failed_log_dir_takes_only_its_replicas_offline() {
    let (_tmp, a, b, weir) = start_with_two_log_dirs();
    // Placed one by one: a, b, a, b. Only "right" rolls segments.
    for topic in ["left", "right"] {
        create_topic_with(&weir.kafka, topic, 1, 1, &[("segment.bytes", "1024")]);
    }
    for topic in ["left-too", "right-too"] {
        create_topic(&weir.kafka, topic, 1, 1);
    }
    let mut raw = Raw::connect(&weir.kafka);
    for topic in ["left", "right", "left-too", "right-too"] {
        raw.topic_metadata(topic);
        assert_eq!(raw.produce(topic, 0, BatchBuilder::new(1).build()).0, 0);
    }
    assert!(a.join("left-0").is_dir() && a.join("left-too-0").is_dir());
    assert!(b.join("right-0").is_dir() && b.join("right-too-0").is_dir());

    // The disk under b goes: the next segment of "right" cannot be made.
    std::fs::remove_dir_all(&b).unwrap();
    let failed = (0..20)
        .map(|_| {
            raw.produce("right", 0, BatchBuilder::new(10).value_size(100).build())
                .0
        })
        .find(|&code| code != 0);
    assert_eq!(failed, Some(56), "KAFKA_STORAGE_ERROR");
    // Every replica in b is offline, though "right-too" saw no error itself.
    wait_until(
        "b's replicas to go offline",
        Duration::from_secs(10),
        || (raw.produce("right-too", 0, BatchBuilder::new(1).build()).0 == 56).then_some(()),
    );
    let fetched = fetch_error(&mut raw, "right-too");
    assert_eq!(fetched, 56, "nothing is read from a failed directory");
    // The replicas in a serve on.
    for topic in ["left", "left-too"] {
        assert_eq!(raw.produce(topic, 0, BatchBuilder::new(1).build()).0, 0);
        assert_eq!(fetch_error(&mut raw, topic), 0);
    }
    let response = describe(&mut raw, 4, None);
    let codes: Vec<(String, i16)> = response
        .results
        .iter()
        .map(|r| (r.log_dir.to_string(), r.error_code))
        .collect();
    assert_eq!(codes, vec![(path(&a), 0), (path(&b), 56)]);
    // A new replica goes to a, though it holds more; and none moves to b.
    std::fs::create_dir_all(&b).unwrap();
    create_topic(&weir.kafka, "new", 1, 1);
    raw.topic_metadata("new");
    assert!(a.join("new-0").is_dir());
    assert_eq!(
        alter(&mut raw, 2, &[(&path(&b), "left", &[0])]),
        vec![("left".to_owned(), 0, 56)]
    );
}

#[test]
fn alter_replica_log_dirs_errors() {
    let (tmp, a, b, weir) = start_with_two_log_dirs();
    create_topic(&weir.kafka, "stay", 1, 1);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("stay");
    assert!(a.join("stay-0").is_dir());
    for version in [1, 2] {
        // Not one of log.dirs: LOG_DIR_NOT_FOUND.
        let elsewhere = path(&tmp.path().join("elsewhere"));
        assert_eq!(
            alter(&mut raw, version, &[(&elsewhere, "stay", &[0])]),
            vec![("stay".to_owned(), 0, 57)]
        );
        // Not hosted here: REPLICA_NOT_AVAILABLE.
        assert_eq!(
            alter(
                &mut raw,
                version,
                &[(&path(&b), "stay", &[7]), (&path(&b), "nothing", &[0])]
            ),
            vec![("nothing".to_owned(), 0, 9), ("stay".to_owned(), 7, 9)]
        );
        // There already: nothing to do.
        assert_eq!(
            alter(&mut raw, version, &[(&path(&a), "stay", &[0])]),
            vec![("stay".to_owned(), 0, 0)]
        );
        assert_eq!(
            described_at(&mut raw, "stay", 0),
            vec![(path(&a), false, 0)]
        );
        assert!(a.join("stay-0").is_dir());
        assert!(files_in(&b).is_empty(), "{:?}", files_in(&b));
    }
    // A replica created after it was asked for goes where it was asked to,
    // though the other directory holds fewer partitions.
    create_topic(&weir.kafka, "nothing", 1, 1);
    raw.topic_metadata("nothing");
    assert!(b.join("nothing-0").is_dir(), "{:?}", files_in(&b));
    assert_eq!(
        described_at(&mut raw, "nothing", 0),
        vec![(path(&b), false, 0)]
    );
    // An offline directory: KAFKA_STORAGE_ERROR, and the replica stays.
    std::fs::remove_dir_all(&b).unwrap();
    assert_eq!(
        alter(&mut raw, 2, &[(&path(&b), "stay", &[0])]),
        vec![("stay".to_owned(), 0, 56)]
    );
    assert!(a.join("stay-0").is_dir());
    assert_eq!(raw.produce("stay", 0, BatchBuilder::new(1).build()).0, 0);
}
