//! Transactions with librdkafka's transactional producer and
//! read_committed consumer against the real broker: commits become
//! visible, aborts never do, a second producer fences the first, an open
//! transaction times out, and a delayed EndTxn cannot end a later
//! transaction.

mod common;

use std::time::{Duration, Instant};

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, EndTxnRequest, EndTxnResponse,
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::Message;

const TIMEOUT: Duration = Duration::from_secs(30);

fn create_topic(bootstrap: &str, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    let results =
        common::cli::block_on(admin.create_topics(&[topic], &AdminOptions::new())).unwrap();
    results.into_iter().for_each(|r| {
        r.unwrap();
    });
}

fn transactional_producer(bootstrap: &str, id: &str, extra: &[(&str, &str)]) -> BaseProducer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", id)
        .set("linger.ms", "0");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    let producer: BaseProducer = config.create().unwrap();
    producer.init_transactions(TIMEOUT).unwrap();
    producer
}

fn send(producer: &BaseProducer, topic: &str, values: &[&str]) {
    for (i, value) in values.iter().enumerate() {
        let key = format!("k{i}");
        producer
            .send(BaseRecord::to(topic).key(&key).payload(*value))
            .unwrap();
    }
    producer.flush(TIMEOUT).unwrap();
}

/// Every value in `topic` (all partitions), read with `isolation`, until
/// `expected` are read or the deadline passes; sorted.
fn read_values(bootstrap: &str, topic: &str, isolation: &str, expected: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("reader-{isolation}-{}", uuid()))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while values.len() < expected && Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            values.push(String::from_utf8(message.payload().unwrap().to_vec()).unwrap());
        }
    }
    // Anything beyond what was expected would show up in a little while.
    let settle = Instant::now() + Duration::from_secs(2);
    while Instant::now() < settle {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) {
            values.push(String::from_utf8(message.payload().unwrap().to_vec()).unwrap());
        }
    }
    values.sort();
    values
}

fn uuid() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn committed_records_are_read_and_aborted_ones_only_by_read_uncommitted() {
    let weir = Weir::start(&[]);
    create_topic(&weir.kafka, "orders", 2);
    let producer = transactional_producer(&weir.kafka, "orders-writer", &[]);

    producer.begin_transaction().unwrap();
    send(&producer, "orders", &["c1", "c2", "c3"]);
    producer.commit_transaction(TIMEOUT).unwrap();

    producer.begin_transaction().unwrap();
    send(&producer, "orders", &["a1", "a2", "a3"]);
    producer.abort_transaction(TIMEOUT).unwrap();

    producer.begin_transaction().unwrap();
    send(&producer, "orders", &["c4"]);
    producer.commit_transaction(TIMEOUT).unwrap();

    assert_eq!(
        read_values(&weir.kafka, "orders", "read_committed", 4),
        ["c1", "c2", "c3", "c4"]
    );
    assert_eq!(
        read_values(&weir.kafka, "orders", "read_uncommitted", 7),
        ["a1", "a2", "a3", "c1", "c2", "c3", "c4"]
    );

    // The coordinator's view, through the CLI.
    let listed = common::cli::run(&["txn", "list", "--bootstrap", &weir.kafka], b"").ok();
    let rows = listed.table("TRANSACTIONAL ID");
    assert_eq!(rows.len(), 2, "{}", listed.stdout);
    assert_eq!(rows[1][0], "orders-writer");
    assert_eq!(rows[1][2], "CompleteCommit");
    let described = common::cli::run(
        &[
            "txn",
            "describe",
            "orders-writer",
            "--bootstrap",
            &weir.kafka,
        ],
        b"",
    )
    .ok();
    assert!(
        described.stdout.contains("CompleteCommit"),
        "{}",
        described.stdout
    );
    let missing = common::cli::run(
        &["txn", "describe", "nobody", "--bootstrap", &weir.kafka],
        b"",
    )
    .failed_with_one_line();
    assert!(missing.contains("nobody"), "{missing}");
}

#[test]
fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    let weir = Weir::start(&[]);
    create_topic(&weir.kafka, "ledger", 1);
    let first = transactional_producer(&weir.kafka, "ledger-writer", &[]);
    first.begin_transaction().unwrap();
    send(&first, "ledger", &["from-the-zombie"]);

    // The newcomer's InitProducerId aborts the open transaction and bumps
    // the epoch.
    let second = transactional_producer(&weir.kafka, "ledger-writer", &[]);
    let refused = first.commit_transaction(TIMEOUT).unwrap_err();
    assert!(
        refused.to_string().to_lowercase().contains("fenced"),
        "{refused}"
    );

    second.begin_transaction().unwrap();
    send(&second, "ledger", &["from-the-new-producer"]);
    second.commit_transaction(TIMEOUT).unwrap();
    assert_eq!(
        read_values(&weir.kafka, "ledger", "read_committed", 1),
        ["from-the-new-producer"]
    );
}

#[test]
fn a_transaction_left_open_past_its_timeout_is_aborted() {
    let weir = Weir::start(&[
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "200",
    ]);
    create_topic(&weir.kafka, "slow", 1);
    let producer = transactional_producer(
        &weir.kafka,
        "slow-writer",
        &[("transaction.timeout.ms", "1500")],
    );
    producer.begin_transaction().unwrap();
    send(&producer, "slow", &["never-committed"]);
    std::thread::sleep(Duration::from_secs(4));
    assert!(producer.commit_transaction(TIMEOUT).is_err());

    let described = common::cli::run(
        &["txn", "describe", "slow-writer", "--bootstrap", &weir.kafka],
        b"",
    )
    .ok();
    assert!(
        described.stdout.contains("CompleteAbort"),
        "{}",
        described.stdout
    );
    assert!(read_values(&weir.kafka, "slow", "read_committed", 0).is_empty());
    assert_eq!(
        read_values(&weir.kafka, "slow", "read_uncommitted", 1),
        ["never-committed"]
    );
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

fn init_transactional(raw: &mut Raw, id: &str, timeout_ms: i32) -> (i64, i16) {
    let found = raw.find_coordinator(1, id);
    assert_eq!(found.error_code, 0);
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(timeout_ms);
    for _ in 0..100 {
        let r: InitProducerIdResponse = raw.call(ApiKey::InitProducerId, 3, &request);
        if r.error_code == 0 {
            return (r.producer_id.0, r.producer_epoch);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the coordinator never answered InitProducerId");
}

fn add_partition(raw: &mut Raw, id: &str, producer: (i64, i16), topic: &str) -> i16 {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(id))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![0])]);
    let r: AddPartitionsToTxnResponse = raw.call(ApiKey::AddPartitionsToTxn, 3, &request);
    r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

fn end_txn(raw: &mut Raw, id: &str, producer: (i64, i16), commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    let r: EndTxnResponse = raw.call(ApiKey::EndTxn, 3, &request);
    r.error_code
}

/// Waits until `id` has no transaction being ended (its markers written).
fn until_settled(raw: &mut Raw, id: &str, producer: (i64, i16)) {
    // A new AddPartitionsToTxn is refused with CONCURRENT_TRANSACTIONS
    // while the previous transaction's markers are being written.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let code = add_partition(raw, id, producer, "ledger");
        if code == 0 {
            return;
        }
        assert_eq!(code, ResponseError::ConcurrentTransactions.code());
        assert!(Instant::now() < deadline, "markers never written");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_delayed_end_txn_never_ends_a_later_transaction() {
    let weir = Weir::start(&[]);
    create_topic(&weir.kafka, "ledger", 1);
    // The producer's first connection, whose EndTxn is held up in the
    // network.
    let mut old_connection = Raw::connect(&weir.kafka);
    let id = "ledger-writer";
    let producer = init_transactional(&mut old_connection, id, 60_000);
    assert_eq!(
        add_partition(&mut old_connection, id, producer, "ledger"),
        0
    );
    assert_eq!(
        old_connection.produce_transactional(id, producer, 0, "ledger", 9),
        0
    );

    // The EndTxn times out at the client, which reconnects and retries it;
    // the retry commits the first transaction.
    let mut new_connection = Raw::connect(&weir.kafka);
    assert_eq!(end_txn(&mut new_connection, id, producer, true), 0);
    // The second transaction starts (until_settled adds its partition).
    until_settled(&mut new_connection, id, producer);
    assert_eq!(
        new_connection.produce_transactional(id, producer, 1, "ledger", 9),
        0
    );

    // Now the first EndTxn arrives, over the old connection: it must not
    // commit the second transaction.
    let delayed = end_txn(&mut old_connection, id, producer, true);
    assert_eq!(delayed, ResponseError::InvalidTxnState.code());

    // The second transaction is still open and its producer aborts it.
    assert_eq!(end_txn(&mut new_connection, id, producer, false), 0);
    let committed = read_values(&weir.kafka, "ledger", "read_committed", 1);
    assert_eq!(committed.len(), 1, "only the first transaction's record");
    assert_eq!(
        read_values(&weir.kafka, "ledger", "read_uncommitted", 2).len(),
        2
    );
}

#[test]
fn a_hanging_transaction_no_coordinator_knows_is_aborted() {
    let weir = Weir::start(&[
        "--transaction-max-timeout-ms",
        "2000",
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "200",
    ]);
    create_topic(&weir.kafka, "held", 1);
    let mut raw = Raw::connect(&weir.kafka);
    // A transactional write to a partition never added to the transaction:
    // no coordinator will ever write its marker.
    let stray = init_transactional(&mut raw, "stray", 1_000);
    assert_eq!(raw.produce_transactional("stray", stray, 0, "held", 9), 0);
    // A proper transaction behind it commits, but read_committed
    // consumers cannot pass the stray one.
    let good = init_transactional(&mut raw, "good", 1_000);
    assert_eq!(add_partition(&mut raw, "good", good, "held"), 0);
    assert_eq!(raw.produce_transactional("good", good, 0, "held", 9), 0);
    assert_eq!(end_txn(&mut raw, "good", good, true), 0);
    assert_eq!(raw.last_stable_offset("held"), 0);

    // Once it has been open longer than transaction.max.timeout.ms, and no
    // coordinator has it, the partition's leader aborts it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while raw.last_stable_offset("held") < 3 {
        assert!(
            Instant::now() < deadline,
            "the hanging transaction stayed open"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        read_values(&weir.kafka, "held", "read_committed", 1).len(),
        1
    );
    assert_eq!(
        read_values(&weir.kafka, "held", "read_uncommitted", 2).len(),
        2
    );
}

/// Reads `count` records of `topic` in `group` with `isolation`, then
/// commits the position.
fn consume_and_commit(bootstrap: &str, topic: &str, group: &str, isolation: &str, count: usize) {
    use rdkafka::consumer::CommitMode;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while read < count && Instant::now() < deadline {
        if let Some(Ok(_)) = consumer.poll(Duration::from_millis(200)) {
            read += 1;
        }
    }
    assert_eq!(read, count, "{group}");
    consumer.commit_consumer_state(CommitMode::Sync).unwrap();
}

#[test]
fn a_read_committed_group_lags_behind_the_last_stable_offset_only() {
    let weir = Weir::start(&["--group-initial-rebalance-delay-ms", "0"]);
    create_topic(&weir.kafka, "lagged", 1);
    let plain: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .create()
        .unwrap();
    send(&plain, "lagged", &["p1", "p2", "p3", "p4", "p5"]);
    let producer = transactional_producer(&weir.kafka, "lag-writer", &[]);
    producer.begin_transaction().unwrap();
    send(&producer, "lagged", &["t1", "t2", "t3"]);

    // Offsets 0-4 are committed data, 5-7 an open transaction.
    consume_and_commit(
        &weir.kafka,
        "lagged",
        "committed-readers",
        "read_committed",
        5,
    );
    consume_and_commit(&weir.kafka, "lagged", "all-readers", "read_uncommitted", 8);
    let (status, body) = weir.http_get("/v1/groups/committed-readers");
    assert_eq!(status, 200);
    assert!(
        body.contains("\"read_committed\":true") && body.contains("\"lag\":0"),
        "nothing a read_committed consumer may read is left: {body}"
    );
    let (_, body) = weir.http_get("/v1/groups/all-readers");
    assert!(body.contains("\"read_committed\":false"), "{body}");

    // Committed, the transaction's records (and its marker) are lag.
    producer.commit_transaction(TIMEOUT).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = weir.http_get("/v1/groups/committed-readers");
        if body.contains("\"lag\":4") {
            break;
        }
        assert!(Instant::now() < deadline, "{body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
