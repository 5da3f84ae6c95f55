//! DescribeProducers: the producers a partition's replica remembers, with
//! their last sequence and timestamp, coordinator epoch and the start of
//! an open transaction; Kafka's errors for topics and partitions that are
//! unknown, or not hosted by the broker asked.

mod common;

use std::time::Duration;

use common::cluster::{create_topic, partitions, wait_until, Cluster};
use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, InitProducerIdRequest,
    InitProducerIdResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use rdkafka::producer::Producer;
use weir_log::testing::BatchBuilder;

fn describe(raw: &mut Raw, topics: &[(&str, &[i32])]) -> Vec<(String, PartitionResponse)> {
    let request = DescribeProducersRequest::default().with_topics(
        topics
            .iter()
            .map(|(name, partitions)| {
                TopicRequest::default()
                    .with_name(TopicName(StrBytes::from_string((*name).to_owned())))
                    .with_partition_indexes(partitions.to_vec())
            })
            .collect(),
    );
    let response: DescribeProducersResponse = raw.call(ApiKey::DescribeProducers, 0, &request);
    response
        .topics
        .into_iter()
        .flat_map(|t| {
            let name = t.name.0.to_string();
            t.partitions.into_iter().map(move |p| (name.clone(), p))
        })
        .collect()
}

fn producers_of(raw: &mut Raw, topic: &str, partition: i32) -> Vec<ProducerState> {
    let mut answer = describe(raw, &[(topic, &[partition])]);
    let (_, p) = answer.remove(0);
    assert_eq!(
        p.error_code, 0,
        "{topic}-{partition}: {:?}",
        p.error_message
    );
    let mut producers = p.active_producers;
    producers.sort_by_key(|s| s.producer_id.0);
    producers
}

fn idempotent_producer(raw: &mut Raw) -> (i64, i16) {
    let r: InitProducerIdResponse = raw.call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000),
    );
    assert_eq!(r.error_code, 0);
    (r.producer_id.0, r.producer_epoch)
}

#[test]
fn idempotent_and_transactional_producers_are_described() {
    let timeout = Duration::from_secs(30);
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("described");
    assert!(producers_of(&mut raw, "described", 0).is_empty());

    // An idempotent producer writes sequences 0..=2, then 3..=4.
    let (id, epoch) = idempotent_producer(&mut raw);
    for (first, count, ts) in [(0, 3, 1_000), (3, 2, 2_000)] {
        let batch = BatchBuilder::new(count)
            .timestamp(ts)
            .producer(id, epoch, first)
            .build();
        assert_eq!(raw.produce("described", 0, batch).0, 0);
    }
    let idempotent = producers_of(&mut raw, "described", 0);
    assert_eq!(idempotent.len(), 1);
    let p = &idempotent[0];
    assert_eq!(p.producer_id.0, id);
    assert_eq!(p.producer_epoch, i32::from(epoch));
    assert_eq!(p.last_sequence, 4);
    // The batch's largest timestamp (each record one millisecond later).
    assert_eq!(p.last_timestamp, 2_001);
    assert_eq!(p.coordinator_epoch, -1);
    assert_eq!(p.current_txn_start_offset, -1);

    // A transactional producer leaves a transaction open at offset 5.
    let producer = common::open_transaction(&weir.kafka, "described-writer", "described", 3_000);
    let both = producers_of(&mut raw, "described", 0);
    assert_eq!(both.len(), 2);
    let txn = both.iter().find(|p| p.producer_id.0 != id).unwrap();
    assert_eq!(txn.last_sequence, 0);
    assert_eq!(txn.last_timestamp, 3_000);
    assert_eq!(txn.coordinator_epoch, -1, "no marker written yet");
    assert_eq!(txn.current_txn_start_offset, 5);
    let txn_id = txn.producer_id.0;

    // Committed: no transaction open, and the marker's coordinator epoch.
    producer.commit_transaction(timeout).unwrap();
    let committed = wait_until("the commit marker", timeout, || {
        let p = producers_of(&mut raw, "described", 0)
            .into_iter()
            .find(|p| p.producer_id.0 == txn_id)
            .unwrap();
        (p.current_txn_start_offset == -1).then_some(p)
    });
    assert!(committed.coordinator_epoch >= 0, "{committed:?}");
    assert_eq!(committed.last_sequence, 0);
}

#[test]
fn unknown_and_invalid_topics_and_partitions() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("known");
    let answers = describe(
        &mut raw,
        &[
            ("known", &[0, 3]),
            ("never-created", &[0, 1]),
            ("bad name!", &[0]),
        ],
    );
    let got: Vec<_> = answers
        .iter()
        .map(|(topic, p)| (topic.as_str(), p.partition_index, p.error_code))
        .collect();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        got,
        vec![
            ("known", 0, 0),
            ("known", 3, unknown),
            ("never-created", 0, unknown),
            ("never-created", 1, unknown),
            ("bad name!", 0, ResponseError::InvalidTopicException.code()),
        ]
    );
    // Topic-level errors carry Kafka's message; a partition's none.
    let message = |i: usize| answers[i].1.error_message.as_ref().map(|m| m.to_string());
    assert_eq!(
        message(2).as_deref(),
        Some("This server does not host this topic-partition.")
    );
    assert!(message(4).unwrap().contains("illegal"), "{:?}", message(4));
    assert_eq!(message(1), None);
    // The topic was not auto-created by the ask.
    assert_eq!(
        describe(&mut raw, &[("never-created", &[0])])[0]
            .1
            .error_code,
        unknown
    );
}

/// Any replica answers, as in Kafka (a follower replays the producers from
/// the batches it replicates); a broker with no replica of the partition
/// answers NOT_LEADER_OR_FOLLOWER.
#[test]
fn followers_answer_and_other_brokers_do_not() {
    let cluster = Cluster::start(&[]);
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, "replicated", 1, 2);
    let view = partitions(&bootstrap, "replicated").remove(0);
    let follower = *view.replicas.iter().find(|&&id| id != view.leader).unwrap();
    let outsider = (1..=3).find(|id| !view.replicas.contains(id)).unwrap();

    let mut leader = Raw::connect(&cluster.node(view.leader).kafka);
    let (id, epoch) = idempotent_producer(&mut leader);
    let batch = BatchBuilder::new(4).producer(id, epoch, 0).build();
    assert_eq!(leader.produce("replicated", 0, batch).0, 0);
    assert_eq!(
        producers_of(&mut leader, "replicated", 0)[0].last_sequence,
        3
    );

    // acks=all: the follower has the batch already.
    let mut follower = Raw::connect(&cluster.node(follower).kafka);
    let seen = producers_of(&mut follower, "replicated", 0);
    assert_eq!(seen.len(), 1);
    assert_eq!((seen[0].producer_id.0, seen[0].last_sequence), (id, 3));

    let mut outsider = Raw::connect(&cluster.node(outsider).kafka);
    let answer = &describe(&mut outsider, &[("replicated", &[0, 1])]);
    assert_eq!(
        answer[0].1.error_code,
        ResponseError::NotLeaderOrFollower.code()
    );
    assert_eq!(
        answer[1].1.error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}
