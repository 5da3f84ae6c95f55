//! The operator's CLI (`weir topic|produce|consume`) run as a process
//! against the real broker.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::cli::{block_on, run, Out};
use common::Weir;
use weir_client::{murmur2_partition, Client, EARLIEST, LATEST};

/// `weir ARGS --bootstrap <broker>`.
fn cli(broker: &Weir, args: &[&str], input: &[u8]) -> Out {
    let mut all = args.to_vec();
    all.extend(["--bootstrap", &broker.kafka]);
    run(&all, input)
}

#[test]
fn topic_create_list_describe_delete() {
    let broker = Weir::start(&[]);
    let out = cli(
        &broker,
        &[
            "topic",
            "create",
            "orders",
            "--partitions",
            "3",
            "--config",
            "retention.ms=3600000",
            "--config",
            "cleanup.policy=compact",
        ],
        b"",
    )
    .ok();
    assert_eq!(out.stdout, "Created topic orders with 3 partitions\n");
    cli(
        &broker,
        &["topic", "create", "audit", "--partitions", "1"],
        b"",
    )
    .ok();

    let out = cli(&broker, &["topic", "list"], b"").ok();
    assert_eq!(out.stdout, "audit\norders\n");

    // Some records so that log end offsets show (keyed: the topic is
    // compacted).
    cli(
        &broker,
        &[
            "produce",
            "orders",
            "--partition",
            "1",
            "--key-separator",
            ":",
        ],
        b"a:1\nb:2\n",
    )
    .ok();
    let out = cli(&broker, &["topic", "describe", "orders"], b"").ok();
    let text = out.stdout;
    assert!(text.contains("Topic:      orders\n"), "{text}");
    assert!(text.contains("Partitions: 3\n"), "{text}");
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("Topic ID:   "))
        .unwrap_or_else(|| panic!("no topic id in {text}"));
    assert_eq!(id.len(), 36, "{id}");
    assert_ne!(id, "00000000-0000-0000-0000-000000000000");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("PARTITION"))
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        vec![
            vec![
                "PARTITION",
                "LEADER",
                "REPLICAS",
                "ISR",
                "LOG-START",
                "LOG-END"
            ],
            vec!["0", "1", "1", "1", "0", "0"],
            vec!["1", "1", "1", "1", "0", "2"],
            vec!["2", "1", "1", "1", "0", "0"],
        ],
        "{text}"
    );
    assert!(text.contains("  retention.ms=3600000  (topic)\n"), "{text}");
    assert!(
        text.contains("  cleanup.policy=compact  (topic)\n"),
        "{text}"
    );
    // Defaults are left out.
    assert!(!text.contains("segment.bytes"), "{text}");

    // The cluster-wide min.insync.replicas the controller keeps while
    // eligible leader replicas are on (KIP-966) is listed, as Kafka 4.x's tools list it.
    let out = cli(&broker, &["topic", "describe", "audit"], b"").ok();
    assert!(
        out.stdout.contains(
            "Configs (non-default):\n  min.insync.replicas=1  (cluster-wide broker config)\n"
        ),
        "{}",
        out.stdout
    );

    let out = cli(&broker, &["topic", "delete", "orders"], b"").ok();
    assert_eq!(out.stdout, "Deleted topic orders\n");
    let out = cli(&broker, &["topic", "list"], b"").ok();
    assert_eq!(out.stdout, "audit\n");
    let line = cli(&broker, &["topic", "describe", "orders"], b"").failed_with_one_line();
    assert_eq!(line, "error: topic 'orders' does not exist");

    let line = cli(&broker, &["topic", "create", "audit", "-p", "2"], b"").failed_with_one_line();
    assert_eq!(line, "error: topic 'audit' already exists");
}

#[test]
fn keyed_records_land_on_the_java_partition() {
    let broker = Weir::start(&[]);
    let partitions = 5;
    cli(
        &broker,
        &["topic", "create", "keyed", "--partitions", "5"],
        b"",
    )
    .ok();
    let keys: Vec<String> = (0..23).map(|i| format!("customer-{i}")).collect();
    let mut input = String::new();
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for i in 0..400 {
        let key = &keys[i % keys.len()];
        let value = format!("order {i}: with spaces, and = signs");
        input.push_str(&format!("{key}|{value}\n"));
        expected.entry(key.clone()).or_default().push(value);
    }
    cli(
        &broker,
        &["produce", "keyed", "--key-separator", "|"],
        input.as_bytes(),
    )
    .ok();

    // Through the CLI: each partition holds exactly the keys murmur2 puts
    // there, each key's values in the order produced.
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for partition in 0..partitions {
        let p = partition.to_string();
        let out = cli(
            &broker,
            &[
                "consume",
                "keyed",
                "--partition",
                &p,
                "--print-keys",
                "--exit-at-end",
            ],
            b"",
        )
        .ok();
        for line in out.lines() {
            let (key, value) = line.split_once('\t').expect("key<TAB>value");
            assert_eq!(
                murmur2_partition(key.as_bytes(), partitions),
                partition,
                "{key} on partition {partition}"
            );
            seen.entry(key.to_owned())
                .or_default()
                .push(value.to_owned());
        }
    }
    assert_eq!(seen, expected);

    // Through weir-client directly.
    block_on(async {
        let mut client = Client::connect(&broker.kafka).await.unwrap();
        let mut total = 0;
        for partition in 0..partitions {
            let end = client
                .list_offsets("keyed", partition, LATEST)
                .await
                .unwrap();
            let mut offset = client
                .list_offsets("keyed", partition, EARLIEST)
                .await
                .unwrap();
            while offset < end {
                let records = client
                    .fetch("keyed", partition, offset, 1 << 20, 100)
                    .await
                    .unwrap();
                assert!(!records.is_empty());
                for record in &records {
                    assert_eq!(record.offset, offset);
                    offset += 1;
                    let key = record.key.as_ref().expect("keyed");
                    assert_eq!(murmur2_partition(key, partitions), partition);
                    total += 1;
                }
            }
        }
        assert_eq!(total, 400);
    });
}

#[test]
fn keyed_partitions_agree_with_librdkafka_murmur2() {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{FutureProducer, FutureRecord};

    let broker = Weir::start(&[]);
    let partitions = 7;
    cli(&broker, &["topic", "create", "mixed", "-p", "7"], b"").ok();
    // librdkafka's murmur2 partitioners are the Java client's algorithm.
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker.kafka)
        .set("partitioner", "murmur2_random")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    for i in 0..60 {
        let key = format!("k{i}-{}", "x".repeat(i % 9));
        let delivered = futures::executor::block_on(producer.send(
            FutureRecord::to("mixed").key(&key).payload("v"),
            Duration::from_secs(30),
        ))
        .map_err(|(e, _)| e)
        .expect("delivered");
        assert_eq!(
            delivered.partition,
            murmur2_partition(key.as_bytes(), partitions),
            "{key}"
        );
    }
}

#[test]
fn consume_from_an_offset_for_a_count() {
    let broker = Weir::start(&[]);
    cli(
        &broker,
        &["topic", "create", "log", "--partitions", "1"],
        b"",
    )
    .ok();
    let input: String = (0..10).map(|i| format!("m{i}\n")).collect();
    cli(&broker, &["produce", "log"], input.as_bytes()).ok();

    let out = cli(
        &broker,
        &["consume", "log", "--offset", "3", "--count", "4"],
        b"",
    )
    .ok();
    assert_eq!(out.lines(), vec!["m3", "m4", "m5", "m6"]);
    let out = cli(
        &broker,
        &["consume", "log", "--offset", "earliest", "--count", "2"],
        b"",
    )
    .ok();
    assert_eq!(out.lines(), vec!["m0", "m1"]);
    let out = cli(&broker, &["consume", "log", "--exit-at-end"], b"").ok();
    assert_eq!(out.lines().len(), 10);
    let out = cli(
        &broker,
        &["consume", "log", "--offset", "10", "--exit-at-end"],
        b"",
    )
    .ok();
    assert_eq!(out.stdout, "");
    let line = cli(
        &broker,
        &["consume", "log", "--offset", "11", "--count", "1"],
        b"",
    )
    .failed_with_one_line();
    assert_eq!(
        line,
        "error: offset 11 is out of range for log-0 (log start 0, log end 10)"
    );

    // From latest: only records produced after the consumer started. Keep
    // producing until the waiting consumer has one.
    let kafka = broker.kafka.clone();
    let consumer = std::thread::spawn(move || {
        run(
            &[
                "consume",
                "log",
                "--offset",
                "latest",
                "--count",
                "1",
                "--bootstrap",
                &kafka,
            ],
            b"",
        )
    });
    let mut n = 0;
    while !consumer.is_finished() {
        assert!(n < 200, "the consumer never saw a new record");
        cli(
            &broker,
            &["produce", "log"],
            format!("late-{n}\n").as_bytes(),
        )
        .ok();
        n += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = consumer.join().unwrap().ok();
    let lines = out.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("late-"), "{lines:?}");
}

#[test]
fn consume_waits_for_records_without_a_count_limit_reached() {
    let broker = Weir::start(&[]);
    cli(
        &broker,
        &["topic", "create", "slow", "--partitions", "2"],
        b"",
    )
    .ok();
    let kafka = broker.kafka.clone();
    let consumer = std::thread::spawn(move || {
        run(
            &["consume", "slow", "--count", "3", "--bootstrap", &kafka],
            b"",
        )
    });
    std::thread::sleep(Duration::from_millis(700));
    assert!(!consumer.is_finished(), "nothing to read yet");
    cli(&broker, &["produce", "slow", "-p", "0"], b"one\n").ok();
    cli(&broker, &["produce", "slow", "-p", "1"], b"two\nthree\n").ok();
    let out = consumer.join().unwrap().ok();
    let got: BTreeSet<&str> = out.lines().into_iter().collect();
    assert_eq!(got, BTreeSet::from(["one", "two", "three"]));
}

#[test]
fn unkeyed_lines_all_arrive_spread_over_partitions() {
    let broker = Weir::start(&[]);
    cli(
        &broker,
        &["topic", "create", "bulk", "--partitions", "3"],
        b"",
    )
    .ok();
    let input: String = (0..5000).map(|i| format!("line-{i}\n")).collect();
    cli(
        &broker,
        &["produce", "bulk", "--batch-records", "1000"],
        input.as_bytes(),
    )
    .ok();
    let out = cli(&broker, &["consume", "bulk", "--exit-at-end"], b"").ok();
    let got: BTreeSet<&str> = out.lines().into_iter().collect();
    let expected: BTreeSet<String> = (0..5000).map(|i| format!("line-{i}")).collect();
    assert_eq!(out.lines().len(), 5000, "no duplicates");
    assert_eq!(
        got,
        expected.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    // Batches of 1000 move the sticky partition on: all three get some.
    let ends = block_on(async {
        let mut client = Client::connect(&broker.kafka).await.unwrap();
        let mut ends = vec![];
        for p in 0..3 {
            ends.push(client.list_offsets("bulk", p, LATEST).await.unwrap());
        }
        ends
    });
    assert_eq!(ends.iter().sum::<i64>(), 5000);
    assert!(ends.iter().all(|&n| n > 0), "{ends:?}");
}

#[test]
fn long_lines_go_in_batches_the_broker_accepts() {
    let broker = Weir::start(&[]);
    cli(
        &broker,
        &["topic", "create", "wide", "--partitions", "1"],
        b"",
    )
    .ok();
    // Two of these exceed the broker's message.max.bytes (1 MiB).
    let lines: Vec<String> = (0..3)
        .map(|i| format!("{i}{}", "w".repeat(600_000)))
        .collect();
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    cli(&broker, &["produce", "wide"], input.as_bytes()).ok();
    let out = cli(&broker, &["consume", "wide", "--count", "3"], b"").ok();
    assert_eq!(out.lines(), lines);
}

#[test]
fn an_explicit_partition_takes_every_record() {
    let broker = Weir::start(&[]);
    cli(
        &broker,
        &["topic", "create", "pinned", "--partitions", "4"],
        b"",
    )
    .ok();
    cli(
        &broker,
        &[
            "produce",
            "pinned",
            "--partition",
            "2",
            "--key-separator",
            ":",
        ],
        b"a:1\nb:2\nc:3\n",
    )
    .ok();
    let out = cli(
        &broker,
        &["consume", "pinned", "-p", "2", "--print-keys", "-e"],
        b"",
    )
    .ok();
    assert_eq!(out.lines(), vec!["a\t1", "b\t2", "c\t3"]);
    let line =
        cli(&broker, &["produce", "pinned", "--partition", "4"], b"x\n").failed_with_one_line();
    assert_eq!(
        line,
        "error: topic 'pinned' has no partition 4 (it has 4: 0 to 3)"
    );
}

#[test]
fn errors_are_one_line_and_exit_non_zero() {
    let broker = Weir::start(&[]);
    for args in [
        &["produce", "ghost"][..],
        &["consume", "ghost", "--count", "1"],
        &["topic", "describe", "ghost"],
        &["topic", "delete", "ghost"],
    ] {
        let line = cli(&broker, args, b"x\n").failed_with_one_line();
        assert_eq!(line, "error: topic 'ghost' does not exist", "{args:?}");
    }
    // Unknown topics are not created as a side effect.
    let out = cli(&broker, &["topic", "list"], b"").ok();
    assert_eq!(out.stdout, "");

    cli(&broker, &["topic", "create", "t", "-p", "1"], b"").ok();
    let line = cli(
        &broker,
        &["produce", "t", "-K", ":"],
        b"k:v\nno separator\n",
    )
    .failed_with_one_line();
    assert_eq!(line, "error: line 2 has no key separator \":\"");
    // The lines before it were sent.
    let out = cli(&broker, &["consume", "t", "-e", "--print-keys"], b"").ok();
    assert_eq!(out.lines(), vec!["k\tv"]);

    let line = cli(
        &broker,
        &["topic", "create", "u", "--config", "no.such.config=1"],
        b"",
    )
    .failed_with_one_line();
    assert!(line.starts_with("error: INVALID_CONFIG"), "{line}");

    // Nothing listens on a port we just released.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    for args in [&["topic", "list"][..], &["produce", "t"], &["consume", "t"]] {
        let mut args = args.to_vec();
        args.extend(["--bootstrap", &addr]);
        let line = run(&args, b"x\n").failed_with_one_line();
        assert_eq!(
            line,
            format!("error: cannot connect to {addr}: Connection refused"),
            "{args:?}"
        );
    }

    // A bad flag: clap's usage error, exit code 2.
    let out = cli(&broker, &["consume", "t", "--offset", "soon"], b"");
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr
            .starts_with("error: invalid value 'soon' for '--offset"),
        "{}",
        out.stderr
    );
    let out = cli(&broker, &["topic", "create", "t", "--partitions", "0"], b"");
    assert_eq!(
        out.failed_with_one_line(),
        "error: --partitions must be at least 1"
    );
}

#[test]
fn topic_alter_config_sets_and_deletes_overrides() {
    let broker = Weir::start(&[]);
    cli(
        &broker,
        &[
            "topic",
            "create",
            "prices",
            "--config",
            "retention.ms=3600000",
        ],
        b"",
    )
    .ok();
    let out = cli(
        &broker,
        &[
            "topic",
            "alter-config",
            "prices",
            "--set",
            "cleanup.policy=compact",
            "--set",
            "segment.bytes=1048576",
            "--delete",
            "retention.ms",
        ],
        b"",
    )
    .ok();
    assert_eq!(out.stdout, "Altered configs of topic prices\n");
    let text = cli(&broker, &["topic", "describe", "prices"], b"")
        .ok()
        .stdout;
    assert!(text.contains("cleanup.policy=compact"), "{text}");
    assert!(text.contains("segment.bytes=1048576"), "{text}");
    assert!(!text.contains("retention.ms"), "{text}");
    // An invalid value is refused with the broker's reason, and nothing changes.
    let error = cli(
        &broker,
        &[
            "topic",
            "alter-config",
            "prices",
            "--set",
            "segment.bytes=-5",
            "--set",
            "retention.ms=1",
        ],
        b"",
    )
    .failed_with_one_line();
    assert!(error.contains("segment.bytes"), "{error}");
    let text = cli(&broker, &["topic", "describe", "prices"], b"")
        .ok()
        .stdout;
    assert!(!text.contains("retention.ms"), "{text}");
    let error = cli(
        &broker,
        &["topic", "alter-config", "nope", "--set", "retention.ms=1"],
        b"",
    )
    .failed_with_one_line();
    assert!(error.contains("does not exist"), "{error}");
}

#[test]
fn adding_partitions_to_a_keyed_topic_needs_force() {
    let broker = Weir::start(&[]);
    cli(
        &broker,
        &["topic", "create", "plain", "--partitions", "2"],
        b"",
    )
    .ok();
    cli(&broker, &["produce", "plain"], b"a\nb\n").ok();
    let out = cli(
        &broker,
        &["topic", "add-partitions", "plain", "--partitions", "4"],
        b"",
    )
    .ok();
    assert_eq!(out.stdout, "Topic plain now has 4 partitions\n");

    cli(
        &broker,
        &["topic", "create", "keyed", "--partitions", "2"],
        b"",
    )
    .ok();
    cli(
        &broker,
        &["produce", "keyed", "--key-separator", ":"],
        b"alice:1\nbob:2\n",
    )
    .ok();
    let error = cli(
        &broker,
        &["topic", "add-partitions", "keyed", "-p", "3"],
        b"",
    )
    .failed_with_one_line();
    assert!(
        error.contains("keyed records") && error.contains("--force"),
        "{error}"
    );
    let text = cli(&broker, &["topic", "describe", "keyed"], b"")
        .ok()
        .stdout;
    assert!(!text.contains("\n  2 "), "nothing added: {text}");
    let out = cli(
        &broker,
        &["topic", "add-partitions", "keyed", "-p", "3", "--force"],
        b"",
    )
    .ok();
    assert_eq!(out.stdout, "Topic keyed now has 3 partitions\n");
    assert!(out.stderr.contains("warning"), "{}", out.stderr);
    let error = cli(
        &broker,
        &["topic", "add-partitions", "keyed", "-p", "2"],
        b"",
    )
    .failed_with_one_line();
    assert!(error.contains("already has 3"), "{error}");
}

/// `weir topic list | head -1` style: the reader closes the pipe before
/// the output ends; the command ends quietly instead of panicking.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    use std::process::{Command, Stdio};
    let broker = Weir::start(&[]);
    cli(&broker, &["topic", "create", "wide", "-p", "2000"], b"").ok();
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["topic", "describe", "wide", "--bootstrap", &broker.kafka])
        .env("WEIR_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run weir");
    // The reader goes before reading anything.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
}

#[test]
fn internal_topics_need_force_and_describe_without_a_name_describes_all() {
    let broker = Weir::start(&[]);
    cli(&broker, &["topic", "create", "first"], b"").ok();
    cli(&broker, &["topic", "create", "second"], b"").ok();
    let all = cli(&broker, &["topic", "describe"], b"").ok();
    assert!(
        all.stdout.contains("first") && all.stdout.contains("second"),
        "{}",
        all.stdout
    );
    // A group's offsets live in __consumer_offsets.
    let mut raw = common::raw::Raw::connect(&broker.kafka);
    while raw.find_coordinator(0, "g").error_code != 0 {
        std::thread::sleep(Duration::from_millis(100));
    }
    let refused =
        cli(&broker, &["topic", "delete", "__consumer_offsets"], b"").failed_with_one_line();
    assert!(
        refused.contains("every group's committed offsets") && refused.contains("--force"),
        "{refused}"
    );
    let refused =
        cli(&broker, &["topic", "create", "__transaction_state"], b"").failed_with_one_line();
    assert!(
        refused.contains("internal topic") && refused.contains("--force"),
        "{refused}"
    );
    assert!(cli(&broker, &["topic", "list"], b"")
        .ok()
        .stdout
        .contains("__consumer_offsets"));

    // The broker refuses what Kafka refuses: records appended to an
    // internal topic by a client, and records deleted from one.
    let refused = cli(
        &broker,
        &["produce", "__consumer_offsets", "-K", ":"],
        b"k:v\n",
    )
    .failed_with_one_line();
    assert!(
        refused.contains("1 refused")
            && refused.contains("INVALID_TOPIC_EXCEPTION")
            && refused.contains("Cannot append to internal topic __consumer_offsets"),
        "{refused}"
    );
    let deleted = block_on(async {
        use kafka_protocol::messages::delete_records_request::{
            DeleteRecordsPartition, DeleteRecordsTopic,
        };
        use kafka_protocol::messages::{
            ApiKey, DeleteRecordsRequest, DeleteRecordsResponse, TopicName,
        };
        let mut client = Client::connect(&broker.kafka).await.unwrap();
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName("__consumer_offsets".into()))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(-1)])]);
        let response: DeleteRecordsResponse =
            client.call(ApiKey::DeleteRecords, &request).await.unwrap();
        response.topics[0].partitions[0].error_code
    });
    assert_eq!(
        deleted,
        weir_client::ResponseError::InvalidTopicException.code()
    );
}

/// `weir produce --header` stamps every record; `weir consume --format`
/// prints partition, offset, timestamp, key and headers as kcat's -f does.
#[test]
fn headers_go_in_and_a_format_prints_every_field() {
    let broker = Weir::start(&[]);
    cli(&broker, &["topic", "create", "stamped", "-p", "1"], b"").ok();
    cli(
        &broker,
        &[
            "produce",
            "stamped",
            "-K",
            ":",
            "--header",
            "trace=t-1",
            "-H",
            "flag",
        ],
        b"k1:v1\nk2:\n",
    )
    .ok();
    let out = cli(
        &broker,
        &[
            "consume",
            "stamped",
            "-e",
            "--format",
            "%t/%p@%o %k(%K)=%s(%S) [%h] %T\\n",
        ],
        b"",
    )
    .ok();
    let lines = out.lines();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for (line, expected) in lines.iter().zip([
        "stamped/0@0 k1(2)=v1(2) [trace=t-1,flag=] ",
        "stamped/0@1 k2(2)=(0) [trace=t-1,flag=] ",
    ]) {
        let timestamp: i64 = line
            .strip_prefix(expected)
            .unwrap_or_else(|| panic!("{line:?} should start with {expected:?}"))
            .parse()
            .expect("a timestamp");
        assert!((now - timestamp).abs() < 60_000, "{timestamp} is now");
    }
    let usage = cli(&broker, &["consume", "stamped", "--format", "%q"], b"").usage_error();
    assert!(usage.contains("unknown format field %q"), "{usage}");
}

/// `weir consume --group`: members share the partitions and resume from
/// the group's committed offsets, so every record is printed once across
/// runs, and the group shows no lag afterwards.
#[test]
fn consuming_in_a_group_resumes_from_committed_offsets() {
    let broker = Weir::start(&[]);
    cli(&broker, &["topic", "create", "shared", "-p", "4"], b"").ok();
    let first: String = (0..400).map(|i| format!("k{i}:first-{i}\n")).collect();
    cli(&broker, &["produce", "shared", "-K", ":"], first.as_bytes()).ok();

    let group = |extra: &[&str]| {
        let mut args = vec!["consume", "shared", "--group", "readers", "-e"];
        args.extend(extra);
        cli(&broker, &args, b"").ok().stdout
    };
    // Two members at once: together they print every record once.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| group(&[]));
        let b = s.spawn(|| group(&[]));
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut printed: Vec<&str> = a.lines().chain(b.lines()).collect();
    printed.sort();
    let mut expected: Vec<String> = (0..400).map(|i| format!("first-{i}")).collect();
    expected.sort();
    assert_eq!(printed, expected, "each record printed by one member, once");

    // A new run starts where the group stopped.
    assert_eq!(group(&[]), "");
    cli(&broker, &["produce", "shared"], b"second-1\nsecond-2\n").ok();
    let mut next: Vec<String> = group(&[]).lines().map(str::to_owned).collect();
    next.sort();
    assert_eq!(next, ["second-1", "second-2"]);

    let described = cli(&broker, &["group", "describe", "readers"], b"").ok();
    let rows = described.table("TOPIC");
    assert_eq!(rows.len(), 5, "{}", described.stdout);
    for row in &rows[1..] {
        assert_eq!(row[4], "0", "no lag left: {}", described.stdout);
    }
}

/// When the cluster stays out of reach past the delivery timeout,
/// `weir produce` gives up saying what it wrote and what it did not.
#[test]
fn a_produce_that_gives_up_says_how_many_records_were_written() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut broker = Weir::start(&[]);
    cli(&broker, &["topic", "create", "doomed", "-p", "1"], b"").ok();
    let mut producer = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["produce", "doomed", "--linger-ms", "5"])
        .args([
            "--delivery-timeout-ms",
            "2000",
            "--bootstrap",
            &broker.kafka,
        ])
        .env("WEIR_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run weir");
    let mut stdin = producer.stdin.take().expect("stdin");
    stdin.write_all(b"1\n2\n3\n").unwrap();
    stdin.flush().unwrap();
    common::cluster::wait_until("3 records", Duration::from_secs(10), || {
        let read = cli(&broker, &["consume", "doomed", "-e"], b"").ok();
        (read.lines().len() == 3).then_some(())
    });
    broker.kill();
    stdin.write_all(b"4\n5\n").unwrap();
    drop(stdin);
    let out = producer.wait_with_output().expect("weir produce");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "3 record(s) written; 2 in the failed batch may or may not have been written; \
             0 read but not sent: cannot produce to doomed-0"
        ),
        "{stderr}"
    );
}
