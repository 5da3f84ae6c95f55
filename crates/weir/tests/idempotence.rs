//! The idempotent producer: retried batches are acknowledged with their
//! original offsets, gaps and stale epochs are refused.

mod common;

use bytes::{Bytes, BytesMut};
use common::raw::Raw;
use common::Weir;
use indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, InitProducerIdRequest,
    InitProducerIdResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;

fn batch(producer_id: i64, epoch: i16, first_seq: i32, count: i32) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: first_seq + i,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(format!("seq {}", first_seq + i))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

fn produce(raw: &mut Raw, records: Bytes) -> (i16, i64) {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("idem")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let response: ProduceResponse = raw.call(ApiKey::Produce, 9, &request);
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn create_topic(raw: &mut Raw) {
    let created: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        5,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("idem")))
            .with_num_partitions(1)
            .with_replication_factor(1)]),
    );
    assert_eq!(created.topics[0].error_code, 0);
}

fn init_producer(raw: &mut Raw) -> (i64, i16) {
    let init: InitProducerIdResponse = raw.call(
        ApiKey::InitProducerId,
        1,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000),
    );
    assert_eq!(init.error_code, 0);
    assert!(init.producer_id.0 >= 0);
    (init.producer_id.0, init.producer_epoch)
}

#[test]
fn retried_batches_are_not_appended_twice() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    create_topic(&mut raw);
    let (pid, epoch) = init_producer(&mut raw);

    assert_eq!(produce(&mut raw, batch(pid, epoch, 0, 3)), (0, 0));
    assert_eq!(produce(&mut raw, batch(pid, epoch, 3, 2)), (0, 3));
    // A retry of either recent batch gets its original offset back...
    assert_eq!(produce(&mut raw, batch(pid, epoch, 0, 3)), (0, 0));
    assert_eq!(produce(&mut raw, batch(pid, epoch, 3, 2)), (0, 3));
    // ...and nothing was appended twice.
    assert_eq!(produce(&mut raw, batch(pid, epoch, 5, 1)), (0, 5));
    // A gap in sequences is refused.
    let (code, _) = produce(&mut raw, batch(pid, epoch, 9, 1));
    assert_eq!(code, ResponseError::OutOfOrderSequenceNumber.code());
    // A new producer id starts fresh.
    let other: InitProducerIdResponse = raw.call(
        ApiKey::InitProducerId,
        1,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000),
    );
    assert_ne!(other.producer_id.0, pid);
    assert_eq!(
        produce(&mut raw, batch(other.producer_id.0, 0, 0, 1)),
        (0, 6)
    );
    // An older epoch of a known producer is fenced.
    assert_eq!(produce(&mut raw, batch(pid, epoch + 1, 0, 1)), (0, 7));
    let (code, _) = produce(&mut raw, batch(pid, epoch, 6, 1));
    assert_eq!(code, ResponseError::InvalidProducerEpoch.code());
}

#[test]
fn producer_state_survives_restarts() {
    let mut weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    create_topic(&mut raw);
    let (pid, epoch) = init_producer(&mut raw);
    assert_eq!(produce(&mut raw, batch(pid, epoch, 0, 2)), (0, 0));
    assert_eq!(produce(&mut raw, batch(pid, epoch, 2, 2)), (0, 2));
    drop(raw);
    // After a clean restart (snapshot) the retry is still recognised...
    weir.restart(true);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(produce(&mut raw, batch(pid, epoch, 2, 2)), (0, 2));
    assert_eq!(produce(&mut raw, batch(pid, epoch, 4, 1)), (0, 4));
    drop(raw);
    // ...and after kill -9 (snapshot plus replay of the log after it).
    weir.restart(false);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(produce(&mut raw, batch(pid, epoch, 4, 1)), (0, 4));
    let (code, _) = produce(&mut raw, batch(pid, epoch, 7, 1));
    assert_eq!(code, ResponseError::OutOfOrderSequenceNumber.code());
    // New producer ids never collide with ones handed out before.
    let (other, _) = init_producer(&mut raw);
    assert_ne!(other, pid);
}
