//! Fetch by topic id (v13+) and incremental fetch sessions (KIP-227): a
//! session remembers the partitions and offsets a fetcher named, later
//! requests name only what changed, and responses carry only what is new.

mod common;

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;
use weir_log::testing::BatchBuilder;

const VERSION: i16 = 17;
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const UNKNOWN_TOPIC_ID: i16 = 100;

/// Creates `topic` with `partitions` partitions; its topic id.
fn create(raw: &mut Raw, topic: &str, partitions: i32) -> Uuid {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let name = TopicName(StrBytes::from_string(topic.to_owned()));
    let response: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(name.clone())
            .with_num_partitions(partitions)
            .with_replication_factor(1)]),
    );
    assert_eq!(response.topics[0].error_code, 0);
    let metadata: MetadataResponse = raw.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name))
        ])),
    );
    metadata.topics[0].topic_id
}

/// A fetch of `partitions` (index, offset) of the topic `id`, answered at
/// once.
fn fetch(id: Uuid, session_id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchRequest {
    let topics = if partitions.is_empty() {
        Vec::new()
    } else {
        vec![FetchTopic::default().with_topic_id(id).with_partitions(
            partitions
                .iter()
                .map(|&(partition, offset)| {
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20)
                })
                .collect(),
        )]
    };
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_id(session_id)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

/// The partitions a response carries: (index, high watermark, has records).
fn carried(response: &FetchResponse, id: Uuid) -> Vec<(i32, i64, bool)> {
    response
        .responses
        .iter()
        .inspect(|t| assert_eq!(t.topic_id, id))
        .flat_map(|t| &t.partitions)
        .map(|p| {
            assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
            let has_records = p.records.as_ref().is_some_and(|r| !r.is_empty());
            (p.partition_index, p.high_watermark, has_records)
        })
        .collect()
}

fn call(raw: &mut Raw, request: &FetchRequest) -> FetchResponse {
    raw.call(ApiKey::Fetch, VERSION, request)
}

#[test]
fn an_incremental_session_answers_only_partitions_with_something_new() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let id = create(&mut raw, "sessions", 3);
    let (code, _) = raw.produce("sessions", 0, BatchBuilder::new(2).build());
    assert_eq!(code, 0);

    // A full fetch (epoch 0) opens a session and answers every partition.
    let full = call(&mut raw, &fetch(id, 0, 0, &[(0, 0), (1, 0), (2, 0)]));
    assert_eq!(full.error_code, 0);
    let session = full.session_id;
    assert_ne!(session, 0, "no session was opened");
    assert_eq!(
        carried(&full, id),
        [(0, 2, true), (1, 0, false), (2, 0, false)]
    );

    // Nothing new: an empty answer, though the request named only the
    // offset that moved.
    let quiet = call(&mut raw, &fetch(id, session, 1, &[(0, 2)]));
    assert_eq!((quiet.error_code, quiet.session_id), (0, session));
    assert_eq!(carried(&quiet, id), []);

    // Records on partition 2: only it is sent, from the session's offset.
    raw.produce("sessions", 2, BatchBuilder::new(3).build());
    let news = call(&mut raw, &fetch(id, session, 2, &[]));
    assert_eq!(carried(&news, id), [(2, 3, true)]);

    // A forgotten partition is no longer read.
    raw.produce("sessions", 1, BatchBuilder::new(1).build());
    let mut forget = fetch(id, session, 3, &[(2, 3)]);
    forget.forgotten_topics_data = vec![ForgottenTopic::default()
        .with_topic_id(id)
        .with_partitions(vec![1])];
    assert_eq!(carried(&call(&mut raw, &forget), id), []);

    // A repeated epoch, or an unknown session, is a top-level error.
    let stale = call(&mut raw, &fetch(id, session, 3, &[]));
    assert_eq!(
        (stale.error_code, stale.session_id),
        (INVALID_FETCH_SESSION_EPOCH, 0)
    );
    assert!(stale.responses.is_empty());
    let unknown = call(&mut raw, &fetch(id, session.wrapping_add(1), 1, &[]));
    assert_eq!(unknown.error_code, FETCH_SESSION_ID_NOT_FOUND);

    // The final epoch fetches without a session and closes this one.
    let last = call(&mut raw, &fetch(id, session, -1, &[(1, 0)]));
    assert_eq!((last.error_code, last.session_id), (0, 0));
    assert_eq!(carried(&last, id), [(1, 1, true)]);
    let closed = call(&mut raw, &fetch(id, session, 4, &[]));
    assert_eq!(closed.error_code, FETCH_SESSION_ID_NOT_FOUND);
    let (_, metrics) = weir.http_get("/metrics");
    assert!(
        metrics.lines().any(|l| l == "weir_fetch_sessions 0"),
        "{metrics}"
    );
}

#[test]
fn a_session_long_poll_wakes_for_records_on_any_of_its_partitions() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let id = create(&mut raw, "polled", 4);
    let full = call(
        &mut raw,
        &fetch(id, 0, 0, &[(0, 0), (1, 0), (2, 0), (3, 0)]),
    );
    let session = full.session_id;
    assert_ne!(session, 0);

    let mut waiting = fetch(id, session, 1, &[]);
    waiting.max_wait_ms = 30_000;
    waiting.min_bytes = 1;
    let correlation_id = raw.send(ApiKey::Fetch, VERSION, &waiting);
    let mut producer = Raw::connect(&weir.kafka);
    producer.produce("polled", 3, BatchBuilder::new(1).build());
    let woken: FetchResponse = raw.receive(ApiKey::Fetch, VERSION, correlation_id);
    assert_eq!(carried(&woken, id), [(3, 1, true)]);
}

#[test]
fn a_topic_id_the_broker_does_not_know_is_unknown_topic_id() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let stranger = Uuid::from_u128(0xfeed);
    for epoch in [-1, 0] {
        let response = call(&mut raw, &fetch(stranger, 0, epoch, &[(0, 0)]));
        assert_eq!(response.error_code, 0);
        let topic = &response.responses[0];
        assert_eq!(topic.topic_id, stranger);
        assert_eq!(topic.partitions[0].error_code, UNKNOWN_TOPIC_ID);
    }
}

#[test]
fn a_session_opened_by_name_cannot_go_on_by_topic_id() {
    const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let id = create(&mut raw, "by-name", 1);
    let by_name = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(0)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("by-name")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1 << 20)])]);
    let opened: FetchResponse = raw.call(ApiKey::Fetch, 12, &by_name);
    assert_ne!(opened.session_id, 0);
    let by_id = call(&mut raw, &fetch(id, opened.session_id, 1, &[]));
    assert_eq!(by_id.error_code, FETCH_SESSION_TOPIC_ID_ERROR);
}
