//! DescribeTopicPartitions (KIP-966): topics by name or all of them, in
//! name order, paged by `response_partition_limit` with a cursor; Kafka's
//! errors for unknown and invalid topics and for a bad cursor.

mod common;

use common::cluster::create_topic;
use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, MetadataRequest,
    MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn describe(
    raw: &mut Raw,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsResponse {
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(name(t)))
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(topic, partition)| {
            Cursor::default()
                .with_topic_name(name(topic))
                .with_partition_index(partition)
        }));
    raw.call(ApiKey::DescribeTopicPartitions, 0, &request)
}

type Position = (String, i32);

/// The (topic, partition) pairs a page holds, and where the next begins.
fn page(response: &DescribeTopicPartitionsResponse) -> (Vec<Position>, Option<Position>) {
    let partitions = response
        .topics
        .iter()
        .flat_map(|t| {
            let topic = t.name.as_ref().unwrap().0.to_string();
            t.partitions
                .iter()
                .map(move |p| (topic.clone(), p.partition_index))
        })
        .collect();
    let next = response
        .next_cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    (partitions, next)
}

fn pairs(list: &[(&str, i32)]) -> Vec<Position> {
    list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

fn start_with_topics() -> Weir {
    let weir = Weir::start(&[]);
    for (topic, count) in [("a-topic", 3), ("b-topic", 2), ("c-topic", 1)] {
        create_topic(&weir.kafka, topic, count, 1);
    }
    weir
}

#[test]
fn topics_by_name_with_their_partitions() {
    let weir = start_with_topics();
    let mut raw = Raw::connect(&weir.kafka);
    let r = describe(
        &mut raw,
        &["c-topic", "missing", "a-topic", "bad name!", "a-topic"],
        2000,
        None,
    );
    let summary: Vec<_> = r
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().unwrap().0.to_string(),
                t.error_code,
                t.partitions.len(),
            )
        })
        .collect();
    // In name order, each once.
    assert_eq!(
        summary,
        vec![
            ("a-topic".to_owned(), 0, 3),
            (
                "bad name!".to_owned(),
                ResponseError::InvalidTopicException.code(),
                0
            ),
            ("c-topic".to_owned(), 0, 1),
            (
                "missing".to_owned(),
                ResponseError::UnknownTopicOrPartition.code(),
                0
            ),
        ]
    );
    assert!(r.next_cursor.is_none());

    // The same topic id, leader and replicas as Metadata shows.
    let metadata: MetadataResponse = raw.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("a-topic")))
        ])),
    );
    let a = &r.topics[0];
    assert_eq!(a.topic_id, metadata.topics[0].topic_id);
    assert!(!a.topic_id.is_nil());
    assert!(!a.is_internal);
    // No authorizer: every operation a topic has (READ 3, WRITE 4,
    // CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10,
    // ALTER_CONFIGS 11).
    let every = [3, 4, 5, 6, 7, 8, 10, 11]
        .iter()
        .fold(0i32, |f, c| f | 1 << c);
    assert_eq!(a.topic_authorized_operations, every);
    for (i, p) in a.partitions.iter().enumerate() {
        let m = &metadata.topics[0].partitions[i];
        assert_eq!(p.error_code, 0);
        assert_eq!(p.partition_index, i as i32);
        assert_eq!(p.leader_id.0, 1);
        assert_eq!(p.leader_epoch, m.leader_epoch);
        assert_eq!(p.replica_nodes, m.replica_nodes);
        assert_eq!(p.isr_nodes, m.isr_nodes);
        assert_eq!(p.eligible_leader_replicas, Some(vec![]));
        assert_eq!(p.last_known_elr, Some(vec![]));
        assert!(p.offline_replicas.is_empty());
    }
    // An unknown topic has no id.
    assert!(r.topics[3].topic_id.is_nil());
}

#[test]
fn pages_follow_the_cursor() {
    let weir = start_with_topics();
    let mut raw = Raw::connect(&weir.kafka);
    let named = ["c-topic", "b-topic", "a-topic"];
    let r = describe(&mut raw, &named, 2, None);
    assert_eq!(
        page(&r),
        (
            pairs(&[("a-topic", 0), ("a-topic", 1)]),
            Some(("a-topic".to_owned(), 2))
        )
    );
    let r = describe(&mut raw, &named, 2, Some(("a-topic", 2)));
    assert_eq!(
        page(&r),
        (
            pairs(&[("a-topic", 2), ("b-topic", 0)]),
            Some(("b-topic".to_owned(), 1))
        )
    );
    let r = describe(&mut raw, &named, 2, Some(("b-topic", 1)));
    assert_eq!(page(&r), (pairs(&[("b-topic", 1), ("c-topic", 0)]), None));
    // A page that ends with a topic points at the next topic's start.
    let r = describe(&mut raw, &named, 3, None);
    assert_eq!(
        page(&r),
        (
            pairs(&[("a-topic", 0), ("a-topic", 1), ("a-topic", 2)]),
            Some(("b-topic".to_owned(), 0))
        )
    );
    // A limit below one is one.
    let r = describe(&mut raw, &named, 0, None);
    assert_eq!(
        page(&r),
        (pairs(&[("a-topic", 0)]), Some(("a-topic".to_owned(), 1)))
    );

    // No names: every topic, from the cursor on.
    let r = describe(&mut raw, &[], 2000, None);
    assert_eq!(
        page(&r),
        (
            pairs(&[
                ("a-topic", 0),
                ("a-topic", 1),
                ("a-topic", 2),
                ("b-topic", 0),
                ("b-topic", 1),
                ("c-topic", 0)
            ]),
            None
        )
    );
    let r = describe(&mut raw, &[], 2, Some(("b-topic", 1)));
    assert_eq!(page(&r), (pairs(&[("b-topic", 1), ("c-topic", 0)]), None));
    // A cursor past a topic's last partition: the topic, with none.
    let r = describe(&mut raw, &[], 2000, Some(("c-topic", 5)));
    assert_eq!(r.topics.len(), 1);
    assert!(r.topics[0].partitions.is_empty());
}

#[test]
fn a_bad_cursor_is_an_invalid_request() {
    let weir = start_with_topics();
    let mut raw = Raw::connect(&weir.kafka);
    let invalid = ResponseError::InvalidRequest.code();
    // The cursor's topic must be among those named.
    let r = describe(&mut raw, &["a-topic", "c-topic"], 10, Some(("b-topic", 0)));
    let got: Vec<_> = r
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().unwrap().0.as_str(),
                t.error_code,
                t.partitions.len(),
            )
        })
        .collect();
    assert_eq!(got, vec![("a-topic", invalid, 0), ("c-topic", invalid, 0)]);
    // And its partition not negative.
    let r = describe(&mut raw, &["a-topic"], 10, Some(("a-topic", -1)));
    assert_eq!(r.topics[0].error_code, invalid);
    assert!(r.next_cursor.is_none());
}
