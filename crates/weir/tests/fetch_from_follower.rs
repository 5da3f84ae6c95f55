//! Fetch from follower (KIP-392) on three nodes in racks a, b and c: with
//! `replica.selector.class` set to Kafka's rack-aware selector, a consumer
//! in a follower's rack reads from that follower, as the per-replica
//! `consumer_bytes_out` metric shows; without it, from the leader. The
//! leader answers such a consumer with no records and the replica to read
//! from; a follower serves up to the high watermark it knows, with Kafka's
//! errors; a follower that stops is no longer read from.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{admin, partitions, send_acked, wait_until, Cluster};
use common::raw::Raw;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

const RACK_AWARE: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";
const RECORDS: usize = 300;

/// Nodes 1, 2 and 3 in racks a, b and c, all given `extra`.
fn racked_cluster(extra: &[&str]) -> Cluster {
    Cluster::start_each(
        extra,
        &[
            &["--broker-rack", "a"],
            &["--broker-rack", "b"],
            &["--broker-rack", "c"],
        ],
    )
}

/// A one-partition topic led by node 1 with followers 2 and 3, holding
/// `RECORDS` acknowledged records, every replica in sync.
fn topic_led_by_node_1(cluster: &Cluster, topic: &str) -> Vec<String> {
    let bootstrap = cluster.bootstrap();
    let new = NewTopic::new(topic, 1, TopicReplication::Variable(&[&[1, 2, 3]]));
    let created = common::cli::block_on(admin(&bootstrap).create_topics(
        &[new],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(20))),
    ))
    .expect("create topics");
    created.into_iter().for_each(|r| {
        r.expect("topic created");
    });
    let in_sync = || {
        let view = partitions(&bootstrap, topic).remove(0);
        (view.leader == 1 && view.isr.len() == 3).then_some(())
    };
    wait_until(
        "node 1 to lead with all in sync",
        Duration::from_secs(20),
        in_sync,
    );
    let acked = send_acked(&bootstrap, topic, "v", RECORDS);
    assert_eq!(acked.len(), RECORDS);
    wait_until("all in sync", Duration::from_secs(20), in_sync);
    acked
}

/// Record bytes node `id`'s replica of `topic`-0 sent to consumers.
fn consumer_bytes_out(cluster: &Cluster, id: i32, topic: &str) -> u64 {
    let (status, metrics) = cluster.node(id).http_get("/metrics");
    assert_eq!(status, 200);
    let series = format!("weir_consumer_bytes_out_total{{topic=\"{topic}\",partition=\"0\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0, |value| value.trim().parse().expect("a counter"))
}

fn consumer(bootstrap: &str, rack: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.rack", rack)
        .set("group.id", format!("reader-{rack}"))
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .expect("consumer")
}

/// Reads `topic`-0 from the start until `count` records have come, or
/// `timeout`; returns the values in order.
fn read(consumer: &BaseConsumer, topic: &str, count: usize, timeout: Duration) -> Vec<String> {
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    poll_values(consumer, count, timeout)
}

fn poll_values(consumer: &BaseConsumer, count: usize, timeout: Duration) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    let mut values = Vec::new();
    while values.len() < count && Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            let value = message.payload_view::<str>().unwrap().unwrap();
            values.push(value.to_owned());
        }
    }
    values
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// A consumer's fetch of `topic`-0 from `offset` at `epoch` (-1: none).
fn fetch(topic: &str, rack: &str, offset: i64, epoch: i32, isolation: i8) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation)
        .with_session_epoch(-1)
        .with_rack_id(StrBytes::from_string(rack.to_owned()))
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_current_leader_epoch(epoch)
                .with_partition_max_bytes(1 << 20)])])
}

/// (error, high watermark, last stable offset, preferred read replica,
/// record bytes) of the one partition answered.
fn answer(response: &FetchResponse) -> (i16, i64, i64, i32, usize) {
    let p = &response.responses[0].partitions[0];
    (
        p.error_code,
        p.high_watermark,
        p.last_stable_offset,
        p.preferred_read_replica.0,
        p.records.as_ref().map_or(0, |r| r.len()),
    )
}

/// Waits until the follower on `raw` serves `topic`-0 up to `end`: it
/// learns the high watermark from its next fetch from the leader.
fn knows_high_watermark(raw: &mut Raw, topic: &str, end: i64) {
    wait_until(
        "the follower to know the high watermark",
        Duration::from_secs(10),
        || {
            let read = answer(&raw.call(ApiKey::Fetch, 12, &fetch(topic, "", 0, -1, 0)));
            (read.1 == end).then_some(())
        },
    );
}

fn leader_epoch(raw: &mut Raw, topic: &str) -> i32 {
    raw.topic_metadata(topic).topics[0].partitions[0].leader_epoch
}

/// A consumer in rack b reads every record from node 2, the follower in
/// its rack: the leader sends it there at its first fetch and serves no
/// record itself, and the follower in rack c serves none either.
#[test]
fn a_consumer_in_a_followers_rack_reads_everything_from_that_follower() {
    let cluster = racked_cluster(&["--replica-selector-class", RACK_AWARE]);
    let acked = topic_led_by_node_1(&cluster, "near");
    let consumer = consumer(&cluster.bootstrap(), "b");
    let values = read(&consumer, "near", RECORDS, Duration::from_secs(30));
    assert_eq!(values, acked);
    let served: Vec<u64> = (1..=3)
        .map(|id| consumer_bytes_out(&cluster, id, "near"))
        .collect();
    eprintln!("record bytes served to the rack-b consumer by nodes 1, 2, 3: {served:?}");
    assert_eq!(served[0], 0, "the leader sent records: {served:?}");
    assert!(served[1] > 0, "{served:?}");
    assert_eq!(served[2], 0, "{served:?}");
}

/// Without `replica.selector.class` the leader serves a consumer of any
/// rack, as Kafka's default does.
#[test]
fn without_a_replica_selector_the_leader_serves_every_rack() {
    let cluster = racked_cluster(&[]);
    let acked = topic_led_by_node_1(&cluster, "far");
    let consumer = consumer(&cluster.bootstrap(), "b");
    let values = read(&consumer, "far", RECORDS, Duration::from_secs(30));
    assert_eq!(values, acked);
    let served: Vec<u64> = (1..=3)
        .map(|id| consumer_bytes_out(&cluster, id, "far"))
        .collect();
    eprintln!("record bytes served to the rack-b consumer by nodes 1, 2, 3: {served:?}");
    assert!(served[0] > 0, "{served:?}");
    assert_eq!(&served[1..], [0, 0], "{served:?}");

    // A v11+ consumer may still read a follower directly, as in Kafka.
    let mut follower = Raw::connect(&cluster.node(2).kafka);
    knows_high_watermark(&mut follower, "far", RECORDS as i64);
    let read = answer(&follower.call(ApiKey::Fetch, 12, &fetch("far", "b", 0, -1, 0)));
    assert_eq!((read.0, read.1, read.3), (0, RECORDS as i64, -1));
    assert!(read.4 > 0);
}

/// What the leader and a follower answer, field by field: the leader
/// names the follower and sends no records (for read_committed too); the
/// follower serves up to its high watermark, to v11+ consumers only, with
/// Kafka's epoch and offset errors (the leader epoch checks are the
/// leader's, a stale epoch is FENCED_LEADER_EPOCH on either); ListOffsets stays with the leader; an
/// incremental fetch session on the follower carries new records.
#[test]
fn the_leader_names_the_replica_to_read_and_the_follower_serves_it_as_kafka_does() {
    let cluster = racked_cluster(&["--replica-selector-class", RACK_AWARE]);
    topic_led_by_node_1(&cluster, "exact");
    let end = RECORDS as i64;
    let mut leader = Raw::connect(&cluster.node(1).kafka);
    let epoch = leader_epoch(&mut leader, "exact");

    for isolation in [0, 1] {
        let redirected = leader.call(ApiKey::Fetch, 12, &fetch("exact", "b", 0, epoch, isolation));
        assert_eq!(answer(&redirected), (0, end, end, 2, 0));
    }
    let c = answer(&leader.call(ApiKey::Fetch, 12, &fetch("exact", "c", 5, -1, 0)));
    assert_eq!(c, (0, end, end, 3, 0));
    // Its own rack, an unknown rack and no rack read from the leader.
    for rack in ["a", "z", ""] {
        let read = answer(&leader.call(ApiKey::Fetch, 12, &fetch("exact", rack, 0, -1, 0)));
        assert_eq!((read.0, read.3), (0, -1), "rack {rack:?}");
        assert!(read.4 > 0, "rack {rack:?}");
    }
    // An epoch the leader does not know is refused before any redirection.
    let ahead = answer(&leader.call(ApiKey::Fetch, 12, &fetch("exact", "b", 0, epoch + 1, 0)));
    assert_eq!(ahead.0, ResponseError::UnknownLeaderEpoch.code());

    let mut follower = Raw::connect(&cluster.node(2).kafka);
    knows_high_watermark(&mut follower, "exact", end);
    for isolation in [0, 1] {
        let read =
            answer(&follower.call(ApiKey::Fetch, 12, &fetch("exact", "b", 0, epoch, isolation)));
        assert_eq!((read.0, read.1, read.2, read.3), (0, end, end, -1));
        assert!(read.4 > 0);
    }
    // Before v11 a consumer reads from the leader only.
    let old = answer(&follower.call(ApiKey::Fetch, 10, &fetch("exact", "", 0, -1, 0)));
    assert_eq!(old.0, ResponseError::NotLeaderOrFollower.code());
    let ahead = answer(&follower.call(ApiKey::Fetch, 12, &fetch("exact", "b", 0, epoch + 1, 0)));
    assert_eq!(ahead.0, ResponseError::UnknownLeaderEpoch.code());
    let past_end = answer(&follower.call(ApiKey::Fetch, 12, &fetch("exact", "b", end + 1, -1, 0)));
    assert_eq!(past_end.0, ResponseError::OffsetOutOfRange.code());
    let offsets: ListOffsetsResponse = follower.call(
        ApiKey::ListOffsets,
        7,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name("exact"))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]),
    );
    assert_eq!(
        offsets.topics[0].partitions[0].error_code,
        ResponseError::NotLeaderOrFollower.code()
    );

    // A fetch session on the follower: opened at the log end, then woken
    // by records replicated to it.
    let mut opening = fetch("exact", "b", end, -1, 0).with_session_epoch(0);
    opening.max_wait_ms = 0;
    let opened: FetchResponse = follower.call(ApiKey::Fetch, 12, &opening);
    assert_eq!(opened.error_code, 0);
    assert!(opened.session_id > 0);
    let more = send_acked(&cluster.bootstrap(), "exact", "w", 10);
    assert_eq!(more.len(), 10);
    let incremental = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(5000)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_id(opened.session_id)
        .with_session_epoch(1)
        .with_rack_id(StrBytes::from_static_str("b"));
    let carried: FetchResponse = follower.call(ApiKey::Fetch, 12, &incremental);
    assert_eq!(carried.error_code, 0);
    let read = answer(&carried);
    assert_eq!((read.0, read.3), (0, -1));
    assert!(read.4 > 0, "{read:?}");
    assert!(read.1 > end, "{read:?}");
}

/// The follower in the consumer's rack stops: the consumer goes back to
/// the leader, which no longer sends it to a replica out of the ISR, and
/// reads every record, those written after the stop included.
#[test]
fn a_consumer_reads_everything_when_the_follower_it_reads_from_stops() {
    let mut cluster = racked_cluster(&["--replica-selector-class", RACK_AWARE]);
    let mut acked = topic_led_by_node_1(&cluster, "lost");
    let consumer = consumer(&cluster.bootstrap(), "b");
    let mut values = read(&consumer, "lost", RECORDS, Duration::from_secs(30));
    assert_eq!(values, acked);
    let from_follower = consumer_bytes_out(&cluster, 2, "lost");
    assert!(from_follower > 0);
    assert_eq!(consumer_bytes_out(&cluster, 1, "lost"), 0);

    cluster.node_mut(2).kill();
    let bootstrap = cluster.bootstrap();
    wait_until("node 2 to leave the ISR", Duration::from_secs(30), || {
        let view = partitions(&bootstrap, "lost").remove(0);
        (!view.isr.contains(&2)).then_some(())
    });
    let after = send_acked(&bootstrap, "lost", "after", RECORDS);
    assert_eq!(after.len(), RECORDS);
    values.extend(poll_values(&consumer, RECORDS, Duration::from_secs(60)));
    acked.extend(after);
    assert_eq!(values, acked);
    let from_leader = consumer_bytes_out(&cluster, 1, "lost");
    eprintln!(
        "record bytes served to the rack-b consumer: node 2 before it stopped \
         {from_follower}, node 1 after {from_leader}, node 3 {}",
        consumer_bytes_out(&cluster, 3, "lost")
    );
    assert!(from_leader > 0);
}

/// A `replica.selector.class` Weir does not implement stops the node at
/// start, naming the config, the class and the ones it knows.
#[test]
fn an_unknown_replica_selector_class_is_refused_at_start() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "serve",
            "--replica-selector-class",
            "com.example.NearestReplicaSelector",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for needle in [
        "replica.selector.class",
        "com.example.NearestReplicaSelector",
        RACK_AWARE,
    ] {
        assert!(stderr.contains(needle), "{needle} in {stderr}");
    }
}
