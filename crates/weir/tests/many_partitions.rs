//! Ten thousand partitions on one node: created, written and read with a
//! real client, and serving again after a clean and a kill -9 restart,
//! while the broker keeps no more segment files open than
//! `log.max.open.files` allows.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const TOPIC: &str = "wide";
const PARTITIONS: i32 = 10_000;
const PER_PARTITION: i64 = 10;
const MAX_OPEN_FILES: usize = 2_000;
/// The bound on each step (create, restart) on a 2-core machine;
/// a functional timeout, not a benchmark.
const STEP: Duration = Duration::from_secs(120);

/// The log end offset of every partition (ListOffsets, latest), or the
/// first error code met.
fn end_offsets(raw: &mut Raw) -> Result<Vec<i64>, i16> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(
                (0..PARTITIONS)
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_timestamp(-1)
                    })
                    .collect(),
            )]);
    let response: ListOffsetsResponse = raw.call(ApiKey::ListOffsets, 7, &request);
    let mut partitions = response.topics[0].partitions.clone();
    partitions.sort_by_key(|p| p.partition_index);
    partitions
        .iter()
        .map(|p| {
            if p.error_code == 0 {
                Ok(p.offset)
            } else {
                Err(p.error_code)
            }
        })
        .collect()
}

/// Waits (within [`STEP`]) until every partition answers, and returns
/// their end offsets.
fn wait_serving(weir: &Weir) -> Vec<i64> {
    let deadline = Instant::now() + STEP;
    let mut raw = Raw::connect(&weir.kafka);
    loop {
        match end_offsets(&mut raw) {
            Ok(offsets) => return offsets,
            Err(code) if Instant::now() < deadline => {
                eprintln!("not serving every partition yet (error {code})");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(code) => panic!("partitions still answer error {code} after {STEP:?}"),
        }
    }
}

fn open_descriptors(weir: &Weir) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", weir.pid()))
        .expect("proc fd")
        .count()
}

/// Every record of every partition, counted per partition, with a consumer
/// assigned all of them from the start.
fn read_all(bootstrap: &str) -> HashMap<i32, i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "wide-reader")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "50")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        assignment
            .add_partition_offset(TOPIC, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut counts: HashMap<i32, i64> = HashMap::new();
    let total = i64::from(PARTITIONS) * PER_PARTITION;
    let deadline = Instant::now() + STEP;
    let mut read = 0;
    while read < total {
        assert!(Instant::now() < deadline, "read {read} of {total} records");
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                assert_eq!(
                    message.offset(),
                    counts.get(&message.partition()).copied().unwrap_or(0)
                );
                *counts.entry(message.partition()).or_default() += 1;
                read += 1;
            }
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(error)) => panic!("consume: {error}"),
        }
    }
    counts
}

#[test]
fn ten_thousand_partitions_on_one_node() {
    let max_open = MAX_OPEN_FILES.to_string();
    let mut weir = Weir::start(&["--log-max-open-files", &max_open]);
    let created = Instant::now();
    let partitions = PARTITIONS.to_string();
    common::cli::run(
        &[
            "topic",
            "create",
            TOPIC,
            "-p",
            &partitions,
            "--bootstrap",
            &weir.kafka,
        ],
        b"",
    )
    .ok();
    assert_eq!(wait_serving(&weir), vec![0; PARTITIONS as usize]);
    eprintln!("created and serving in {:?}", created.elapsed());

    let written = Instant::now();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("acks", "all")
        .set("linger.ms", "20")
        .set("message.timeout.ms", "120000")
        .create()
        .expect("producer");
    for round in 0..PER_PARTITION {
        for p in 0..PARTITIONS {
            let value = format!("{p}-{round}");
            let record = BaseRecord::<(), str>::to(TOPIC)
                .partition(p)
                .payload(&value);
            common::send_queued(&producer, record);
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(STEP).expect("every record acknowledged");
    eprintln!(
        "wrote {} records in {:?}",
        i64::from(PARTITIONS) * PER_PARTITION,
        written.elapsed()
    );

    let every = vec![PER_PARTITION; PARTITIONS as usize];
    assert_eq!(wait_serving(&weir), every);
    let read = Instant::now();
    let counts = read_all(&weir.kafka);
    assert!(counts.values().all(|&n| n == PER_PARTITION));
    eprintln!("read them back in {:?}", read.elapsed());
    let open = open_descriptors(&weir);
    assert!(
        open < MAX_OPEN_FILES + 200,
        "{open} descriptors open for {PARTITIONS} partitions, log.max.open.files={MAX_OPEN_FILES}"
    );

    for clean in [true, false] {
        let restarted = Instant::now();
        weir.restart(clean);
        assert_eq!(
            wait_serving(&weir),
            every,
            "after a restart, clean: {clean}"
        );
        eprintln!(
            "restarted (clean: {clean}) and serving in {:?}",
            restarted.elapsed()
        );
    }
    assert_eq!(read_all(&weir.kafka).len(), PARTITIONS as usize);
    assert!(open_descriptors(&weir) < MAX_OPEN_FILES + 200);
}
