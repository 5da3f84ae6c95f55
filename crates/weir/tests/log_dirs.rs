//! `log.dirs` and DescribeLogDirs: partitions spread over several
//! directories, found again after a restart, and described with their
//! sizes and each directory's volume.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::cluster::create_topic;
use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
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
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let log_dirs = format!("{},{}", path(&a), path(&b));
    let weir = Weir::start_in(
        &tmp.path().join("data"),
        &["--log-dirs", &log_dirs],
        None,
        &[],
    );
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
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let log_dirs = format!("{},{}", path(&a), path(&b));
    let weir = Weir::start_in(
        &tmp.path().join("data"),
        &["--log-dirs", &log_dirs],
        None,
        &[],
    );
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
