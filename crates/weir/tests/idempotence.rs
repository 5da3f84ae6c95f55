//! The idempotent producer: retried batches are acknowledged with their
//! original offsets, gaps and stale epochs are refused.

mod common;

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, InitProducerIdRequest,
    InitProducerIdResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_log::testing::BatchBuilder;

fn batch(producer_id: i64, epoch: i16, first_seq: i32, count: usize) -> Vec<u8> {
    BatchBuilder::new(count)
        .producer(producer_id, epoch, first_seq)
        .build()
}

fn produce(raw: &mut Raw, records: Vec<u8>) -> (i16, i64) {
    raw.produce("idem", 0, records)
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

/// A fresh idempotent producer id, asked again while the broker waits for
/// its first block of ids (COORDINATOR_LOAD_IN_PROGRESS), as clients do.
fn init_producer(raw: &mut Raw) -> (i64, i16) {
    let mut tries = 0;
    let init = loop {
        let init: InitProducerIdResponse = raw.call(
            ApiKey::InitProducerId,
            1,
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
        );
        tries += 1;
        if init.error_code != ResponseError::CoordinatorLoadInProgress.code() || tries == 200 {
            break init;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
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
    let (other, _) = init_producer(&mut raw);
    assert_ne!(other, pid);
    assert_eq!(produce(&mut raw, batch(other, 0, 0, 1)), (0, 6));
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

/// A producer that wrote nothing for `producer.id.expiration.ms` is
/// forgotten, as in Kafka: its next batch may start at any sequence.
#[test]
fn idle_producers_expire() {
    let weir = Weir::start(&[
        "--producer-id-expiration-ms",
        "1500",
        "--producer-id-expiration-check-interval-ms",
        "100",
    ]);
    let mut raw = Raw::connect(&weir.kafka);
    create_topic(&mut raw);
    let (pid, epoch) = init_producer(&mut raw);
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let batch_now = |first_seq, count| {
        BatchBuilder::new(count)
            .producer(pid, epoch, first_seq)
            .timestamp(now_ms())
            .build()
    };
    assert_eq!(produce(&mut raw, batch_now(0, 3)), (0, 0));
    let gap = produce(&mut raw, batch_now(10, 1));
    assert_eq!(gap.0, ResponseError::OutOfOrderSequenceNumber.code());

    let started = std::time::Instant::now();
    loop {
        let (code, offset) = produce(&mut raw, batch_now(10, 1));
        if code == 0 {
            assert_eq!(offset, 3, "appended after the first batch");
            break;
        }
        assert_eq!(code, ResponseError::OutOfOrderSequenceNumber.code());
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the producer never expired"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(started.elapsed() >= std::time::Duration::from_millis(1000));
}
