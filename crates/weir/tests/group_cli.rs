//! `weir group list|describe|reset-offsets|delete` run as a process
//! against the real broker, with offsets committed through weir-client.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::cli::{block_on, run, Out};
use common::Weir;
use weir_client::Client;
use weir_log::testing::BatchBuilder;

/// 2024-05-01T12:00:00Z in milliseconds.
const MAY_FIRST_NOON: i64 = 1_714_564_800_000;

/// `weir ARGS --bootstrap <broker>`; killed after a minute.
fn cli(broker: &Weir, args: &[&str]) -> Out {
    let mut all = args.to_vec();
    all.extend(["--bootstrap", &broker.kafka]);
    run(&all, b"")
}

/// Commits offsets as a consumer that assigns partitions itself.
fn commit(broker: &Weir, group: &str, offsets: &[(&str, i32, i64)]) {
    let offsets: Vec<(String, i32, i64)> = offsets
        .iter()
        .map(|&(t, p, o)| (t.to_owned(), p, o))
        .collect();
    block_on(async {
        let mut client = Client::connect(&broker.kafka).await.unwrap();
        // As a client would: the first one creates __consumer_offsets.
        client.find_coordinator(group).await.unwrap();
        client.offset_commit_simple(group, &offsets).await.unwrap();
    });
}

/// What `group` has committed: (topic, partition) → offset.
fn committed(broker: &Weir, group: &str) -> BTreeMap<(String, i32), i64> {
    block_on(async {
        let mut client = Client::connect(&broker.kafka).await.unwrap();
        client.find_coordinator(group).await.unwrap();
        client
            .offset_fetch(group, None)
            .await
            .unwrap()
            .into_iter()
            .map(|c| ((c.topic, c.partition), c.offset))
            .collect()
    })
}

fn offsets(entries: &[(&str, i32, i64)]) -> BTreeMap<(String, i32), i64> {
    entries
        .iter()
        .map(|&(t, p, o)| ((t.to_owned(), p), o))
        .collect()
}

/// `count` records on `partition`, one second apart from `first` (ms).
fn produce_timed(broker: &Weir, topic: &str, partition: i32, first: i64, count: i64) {
    let mut raw = common::raw::Raw::connect(&broker.kafka);
    for i in 0..count {
        let batch = BatchBuilder::new(1).timestamp(first + i * 1000).build();
        assert_eq!(raw.produce(topic, partition, batch).0, 0);
    }
}

fn produce_lines(broker: &Weir, topic: &str, partition: i32, count: usize) {
    let input: String = (0..count).map(|i| format!("m{i}\n")).collect();
    let partition = partition.to_string();
    let mut all = vec!["produce", topic, "--partition", &partition];
    all.extend(["--bootstrap", &broker.kafka]);
    run(&all, input.as_bytes()).ok();
}

#[test]
fn list_and_describe_show_committed_offsets_log_ends_and_lag() {
    let broker = Weir::start(&[]);
    cli(&broker, &["topic", "create", "orders", "-p", "3"]).ok();
    cli(&broker, &["topic", "create", "audit", "-p", "1"]).ok();
    produce_lines(&broker, "orders", 0, 5);
    produce_lines(&broker, "orders", 1, 3);
    produce_lines(&broker, "audit", 0, 4);

    let out = cli(&broker, &["group", "list"]).ok();
    assert_eq!(out.stdout, "GROUP  STATE  TYPE\n");

    commit(
        &broker,
        "billing",
        &[("orders", 0, 2), ("orders", 1, 3), ("audit", 0, 1)],
    );
    commit(&broker, "reporting", &[("orders", 2, 0)]);

    let out = cli(&broker, &["group", "list"]).ok();
    assert_eq!(
        out.table("GROUP"),
        vec![
            vec!["GROUP", "STATE", "TYPE"],
            vec!["billing", "Empty", "classic"],
            vec!["reporting", "Empty", "classic"],
        ]
    );

    let out = cli(&broker, &["group", "describe", "billing"]).ok();
    assert_eq!(
        out.stdout.lines().next(),
        Some("Group billing: state Empty, 0 members"),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.table("TOPIC"),
        vec![
            vec![
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID"
            ],
            vec!["audit", "0", "1", "4", "3", "-", "-", "-"],
            vec!["orders", "0", "2", "5", "3", "-", "-", "-"],
            vec!["orders", "1", "3", "3", "0", "-", "-", "-"],
        ],
        "{}",
        out.stdout
    );

    // The log end moves on; the lag with it.
    produce_lines(&broker, "orders", 2, 6);
    let out = cli(&broker, &["group", "describe", "reporting"]).ok();
    assert_eq!(
        out.table("TOPIC")[1..],
        [vec!["orders", "2", "0", "6", "6", "-", "-", "-"]],
        "{}",
        out.stdout
    );

    let line = cli(&broker, &["group", "describe", "ghost"]).failed_with_one_line();
    assert_eq!(line, "error: group ghost does not exist");
}

#[test]
fn reset_offsets_to_each_kind_of_target() {
    let broker = Weir::start(&[]);
    cli(&broker, &["topic", "create", "events", "-p", "2"]).ok();
    // Partition 0: ten records stamped 12:00:00 to 12:00:09 on May 1st
    // 2024; partition 1: four, 12:00:00 to 12:00:03.
    produce_timed(&broker, "events", 0, MAY_FIRST_NOON, 10);
    produce_timed(&broker, "events", 1, MAY_FIRST_NOON, 4);
    commit(&broker, "g", &[("events", 0, 7)]);
    let reset = |target: &[&str], topics: &[&str]| {
        let mut args = vec!["group", "reset-offsets", "g"];
        for topic in topics {
            args.extend(["--topic", topic]);
        }
        args.extend(target);
        cli(&broker, &args).ok()
    };
    let header = vec!["TOPIC", "PARTITION", "NEW-OFFSET", "PREVIOUS-OFFSET"];

    // A dry run shows the plan and commits nothing.
    let out = reset(&["--to-earliest", "--dry-run"], &["events"]);
    assert!(
        out.stdout
            .starts_with("Dry run, nothing committed. New offsets of group g would be:\n"),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.table("TOPIC"),
        vec![
            header.clone(),
            vec!["events", "0", "0", "7"],
            vec!["events", "1", "0", "-"],
        ]
    );
    assert_eq!(committed(&broker, "g"), offsets(&[("events", 0, 7)]));

    // Some partitions only.
    let out = reset(&["--to-earliest"], &["events:1"]);
    assert!(
        out.stdout
            .starts_with("Committed new offsets of group g:\n"),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.table("TOPIC"),
        vec![header.clone(), vec!["events", "1", "0", "-"]]
    );
    assert_eq!(
        committed(&broker, "g"),
        offsets(&[("events", 0, 7), ("events", 1, 0)])
    );

    let out = reset(&["--to-latest"], &["events"]);
    assert_eq!(
        out.table("TOPIC"),
        vec![
            header.clone(),
            vec!["events", "0", "10", "7"],
            vec!["events", "1", "4", "0"],
        ]
    );
    assert_eq!(
        committed(&broker, "g"),
        offsets(&[("events", 0, 10), ("events", 1, 4)])
    );

    // An offset inside the log is taken as it is; past the end, it is the
    // end. Repeated --topic options add up.
    reset(&["--to-offset", "3"], &["events:0", "events:1"]);
    assert_eq!(
        committed(&broker, "g"),
        offsets(&[("events", 0, 3), ("events", 1, 3)])
    );
    let out = reset(&["--to-offset", "50"], &["events"]);
    assert_eq!(
        out.table("TOPIC"),
        vec![
            header.clone(),
            vec!["events", "0", "10", "3"],
            vec!["events", "1", "4", "3"],
        ]
    );
    assert_eq!(
        committed(&broker, "g"),
        offsets(&[("events", 0, 10), ("events", 1, 4)])
    );

    // By time: the first record at or after it, or the log end when there
    // is none. The same instant in any zone.
    for time in [
        "2024-05-01T12:00:03.500Z",
        "2024-05-01T14:00:03.500+02:00",
        "2024-05-01T08:00:03.500-0400",
    ] {
        reset(&["--to-offset", "0"], &["events"]);
        let out = reset(&["--to-datetime", time], &["events"]);
        assert_eq!(
            out.table("TOPIC"),
            vec![
                header.clone(),
                vec!["events", "0", "4", "0"],
                vec!["events", "1", "4", "0"],
            ],
            "{time}"
        );
        assert_eq!(
            committed(&broker, "g"),
            offsets(&[("events", 0, 4), ("events", 1, 4)]),
            "{time}"
        );
    }
    reset(&["--to-datetime", "2024-05-01T12:00:02Z"], &["events"]);
    assert_eq!(
        committed(&broker, "g"),
        offsets(&[("events", 0, 2), ("events", 1, 2)])
    );
    reset(&["--to-datetime", "2020-01-01T00:00:00Z"], &["events"]);
    assert_eq!(
        committed(&broker, "g"),
        offsets(&[("events", 0, 0), ("events", 1, 0)])
    );
    reset(&["--to-datetime", "2030-01-01T00:00:00Z"], &["events"]);
    assert_eq!(
        committed(&broker, "g"),
        offsets(&[("events", 0, 10), ("events", 1, 4)])
    );

    // The group's state is unchanged: no members, offsets only.
    let out = cli(&broker, &["group", "describe", "g"]).ok();
    assert!(
        out.stdout.starts_with("Group g: state Empty, 0 members\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_reset_can_start_a_group_and_delete_ends_it() {
    let broker = Weir::start(&[]);
    cli(&broker, &["topic", "create", "t", "-p", "1"]).ok();
    produce_lines(&broker, "t", 0, 3);

    // An unknown group may be given offsets: that makes it.
    let out = cli(
        &broker,
        &[
            "group",
            "reset-offsets",
            "fresh",
            "--topic",
            "t",
            "--to-latest",
        ],
    )
    .ok();
    assert_eq!(
        out.table("TOPIC")[1..],
        [vec!["t", "0", "3", "-"]],
        "{}",
        out.stdout
    );
    assert_eq!(committed(&broker, "fresh"), offsets(&[("t", 0, 3)]));
    let out = cli(&broker, &["group", "list"]).ok();
    assert_eq!(
        out.table("GROUP"),
        vec![
            vec!["GROUP", "STATE", "TYPE"],
            vec!["fresh", "Empty", "classic"]
        ]
    );

    let out = cli(&broker, &["group", "delete", "fresh"]).ok();
    assert_eq!(out.stdout, "Deleted group fresh\n");
    assert_eq!(committed(&broker, "fresh"), BTreeMap::new());
    let out = cli(&broker, &["group", "list"]).ok();
    assert_eq!(out.stdout, "GROUP  STATE  TYPE\n");
    for args in [
        &["group", "delete", "fresh"][..],
        &["group", "describe", "fresh"],
    ] {
        let line = cli(&broker, args).failed_with_one_line();
        assert_eq!(line, "error: group fresh does not exist", "{args:?}");
    }
}

#[test]
fn reset_offsets_arguments_are_checked() {
    let broker = Weir::start(&[]);
    cli(&broker, &["topic", "create", "t", "-p", "2"]).ok();
    commit(&broker, "g", &[("t", 0, 0)]);
    let reset = |extra: &[&str]| {
        let mut args = vec!["group", "reset-offsets", "g"];
        args.extend(extra);
        cli(&broker, &args)
    };

    // Exactly one target, and at least one topic.
    let stderr = reset(&["--topic", "t"]).usage_error();
    assert!(
        stderr.contains("the following required arguments were not provided"),
        "{stderr}"
    );
    let stderr = reset(&["--topic", "t", "--to-earliest", "--to-latest"]).usage_error();
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    let stderr = reset(&[
        "--topic",
        "t",
        "--to-offset",
        "1",
        "--to-datetime",
        "2024-01-01T00:00:00Z",
    ])
    .usage_error();
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    let stderr = reset(&["--to-earliest"]).usage_error();
    assert!(stderr.contains("--topic"), "{stderr}");

    // Malformed values.
    for (args, value) in [
        (&["--topic", "t", "--to-offset=-1"][..], "'-1'"),
        (&["--topic", "t:x", "--to-latest"], "'t:x'"),
        (
            &["--topic", "t", "--to-datetime", "yesterday"],
            "'yesterday'",
        ),
        (
            &["--topic", "t", "--to-datetime", "2026-02-30T00:00:00Z"],
            "'2026-02-30T00:00:00Z'",
        ),
    ] {
        let stderr = reset(args).usage_error();
        assert!(
            stderr.starts_with(&format!("error: invalid value {value}")),
            "{args:?}: {stderr}"
        );
    }

    // Topics and partitions that do not exist; nothing is committed.
    let line = reset(&["--topic", "ghost", "--to-latest"]).failed_with_one_line();
    assert_eq!(line, "error: topic 'ghost' does not exist");
    let line = reset(&["--topic", "t:1,2", "--to-latest"]).failed_with_one_line();
    assert_eq!(
        line,
        "error: topic 't' has no partition 2 (it has 2: 0 to 1)"
    );
    assert_eq!(committed(&broker, "g"), offsets(&[("t", 0, 0)]));

    // Nothing listens on a port just released.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["group", "list", "--bootstrap", &addr])
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("error: cannot connect to {addr}: Connection refused\n")
    );
}

/// `weir group describe` polled until `ready` holds for its output.
fn describe_until(broker: &Weir, group: &str, ready: impl Fn(&Out) -> bool) -> Out {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = cli(broker, &["group", "describe", group]);
        if out.code == Some(0) && ready(&out) {
            return out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "gave up waiting\nstdout: {}\nstderr: {}",
            out.stdout,
            out.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_group_with_a_live_consumer_shows_its_member_and_refuses_resets() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};

    let broker = Weir::start(&["--group-initial-rebalance-delay-ms", "0"]);
    cli(&broker, &["topic", "create", "live", "-p", "2"]).ok();
    produce_lines(&broker, "live", 0, 3);
    produce_lines(&broker, "live", 1, 2);

    // One member reads everything, committing as it goes, until told to
    // stop; then it leaves the group.
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let kafka = broker.kafka.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            block_on(async move {
                let consumer: StreamConsumer = ClientConfig::new()
                    .set("bootstrap.servers", &kafka)
                    .set("group.id", "readers")
                    .set("client.id", "reader-1")
                    .set("auto.offset.reset", "earliest")
                    .set("enable.auto.commit", "false")
                    .create()
                    .expect("consumer");
                consumer.subscribe(&["live"]).expect("subscribe");
                while !stop.load(Ordering::Relaxed) {
                    let next = tokio::time::timeout(Duration::from_millis(200), consumer.recv());
                    if let Ok(Ok(message)) = next.await {
                        consumer
                            .commit_message(&message, CommitMode::Sync)
                            .expect("commit");
                    }
                }
                consumer.unsubscribe();
            })
        })
    };

    // Both partitions are the member's, read to the end.
    let out = describe_until(&broker, "readers", |out| {
        let rows = out.table("TOPIC");
        out.stdout
            .starts_with("Group readers: state Stable, 1 member\n")
            && rows.len() == 3
            && rows[1][..5] == ["live", "0", "3", "3", "0"]
            && rows[2][..5] == ["live", "1", "2", "2", "0"]
    });
    let member = block_on(async {
        let mut client = Client::connect(&broker.kafka).await.unwrap();
        let mut described = client.describe_groups(&["readers"]).await.unwrap();
        described.remove(0).members.remove(0)
    });
    assert_eq!(member.client_id, "reader-1");
    for row in &out.table("TOPIC")[1..] {
        assert_eq!(
            row[5..],
            [
                member.member_id.as_str(),
                member.client_host.as_str(),
                "reader-1"
            ],
            "{}",
            out.stdout
        );
    }

    let line = cli(
        &broker,
        &[
            "group",
            "reset-offsets",
            "readers",
            "--topic",
            "live",
            "--to-earliest",
        ],
    )
    .failed_with_one_line();
    assert_eq!(
        line,
        "error: offsets can only be reset while group readers is inactive (state is Stable); \
         stop its consumers first"
    );
    let line = cli(&broker, &["group", "delete", "readers"]).failed_with_one_line();
    assert_eq!(
        line,
        "error: group readers has active members; stop its consumers first"
    );
    assert_eq!(
        committed(&broker, "readers"),
        offsets(&[("live", 0, 3), ("live", 1, 2)])
    );

    // Once the member has left, the offsets are the operator's.
    stop.store(true, Ordering::Relaxed);
    consumer.join().unwrap();
    describe_until(&broker, "readers", |out| {
        out.stdout
            .starts_with("Group readers: state Empty, 0 members\n")
    });
    cli(
        &broker,
        &[
            "group",
            "reset-offsets",
            "readers",
            "--topic",
            "live",
            "--to-earliest",
        ],
    )
    .ok();
    assert_eq!(
        committed(&broker, "readers"),
        offsets(&[("live", 0, 0), ("live", 1, 0)])
    );
}

#[test]
fn describe_flags_records_lost_to_retention() {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::{
        ApiKey, DeleteRecordsRequest, DeleteRecordsResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    let broker = Weir::start(&[]);
    cli(
        &broker,
        &["topic", "create", "expiring", "--partitions", "1"],
    )
    .ok();
    produce_lines(&broker, "expiring", 0, 10);
    commit(&broker, "late", &[("expiring", 0, 2)]);
    let out = cli(&broker, &["group", "describe", "late"]).ok();
    assert!(!out.stdout.contains("Lost to retention"), "{}", out.stdout);
    let response: DeleteRecordsResponse = common::raw::Raw::connect(&broker.kafka).call(
        ApiKey::DeleteRecords,
        2,
        &DeleteRecordsRequest::default().with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("expiring")))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(6)])]),
    );
    assert_eq!(response.topics[0].partitions[0].error_code, 0);
    let out = cli(&broker, &["group", "describe", "late"]).ok();
    assert!(
        out.stdout
            .contains("Lost to retention: expiring-0: 4 records"),
        "{}",
        out.stdout
    );
}
