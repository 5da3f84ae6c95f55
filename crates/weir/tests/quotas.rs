//! Client quotas: DescribeClientQuotas / AlterClientQuotas with Kafka's
//! matching and errors, kept in the cluster metadata across restarts, and
//! enforced: a client over its produce or fetch byte rate, or its share of
//! request time, gets a throttle time and is not read from until it has
//! passed, while other clients go on (KIP-219).

mod common;

use std::time::{Duration, Instant};

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, ApiVersionsRequest,
    ApiVersionsResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse, FetchRequest,
    FetchResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::ClientConfig;
use weir_log::testing::BatchBuilder;

/// A quota entity: (type, name), name `None` for the default.
type Entity<'a> = &'a [(&'a str, Option<&'a str>)];

fn entry(entity: Entity, ops: &[(&str, Option<f64>)]) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(kind, name)| {
                    EntityData::default()
                        .with_entity_type(StrBytes::from_string((*kind).to_owned()))
                        .with_entity_name(name.map(|n| StrBytes::from_string(n.to_owned())))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(key, value)| {
                    OpData::default()
                        .with_key(StrBytes::from_string((*key).to_owned()))
                        .with_value(value.unwrap_or(0.0))
                        .with_remove(value.is_none())
                })
                .collect(),
        )
}

/// Alters quotas; each entry's (error code, message).
fn alter(
    raw: &mut Raw,
    entries: Vec<EntryData>,
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let request = AlterClientQuotasRequest::default()
        .with_entries(entries)
        .with_validate_only(validate_only);
    let response: AlterClientQuotasResponse = raw.call(ApiKey::AlterClientQuotas, 1, &request);
    response
        .entries
        .into_iter()
        .map(|e| (e.error_code, e.error_message.map(|m| m.to_string())))
        .collect()
}

fn set_quota(raw: &mut Raw, entity: Entity, key: &str, value: f64) {
    let answer = alter(raw, vec![entry(entity, &[(key, Some(value))])], false);
    assert_eq!(answer, vec![(0, None)]);
}

/// Described quotas: each entity as text with its values.
type Described = Vec<(String, Vec<(String, f64)>)>;

/// Describes quotas matching the filter (type, match type, match):
/// sorted `(entity, values)` as text.
fn describe(
    raw: &mut Raw,
    filter: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Result<Described, (i16, String)> {
    let request = DescribeClientQuotasRequest::default()
        .with_components(
            filter
                .iter()
                .map(|(kind, match_type, name)| {
                    ComponentData::default()
                        .with_entity_type(StrBytes::from_string((*kind).to_owned()))
                        .with_match_type(*match_type)
                        .with_match(name.map(|n| StrBytes::from_string(n.to_owned())))
                })
                .collect(),
        )
        .with_strict(strict);
    let response: DescribeClientQuotasResponse =
        raw.call(ApiKey::DescribeClientQuotas, 1, &request);
    if response.error_code != 0 {
        assert!(response.entries.is_none(), "entries are null on an error");
        return Err((
            response.error_code,
            response
                .error_message
                .map(|m| m.to_string())
                .unwrap_or_default(),
        ));
    }
    let mut entries: Described = response
        .entries
        .expect("entries")
        .into_iter()
        .map(|e| {
            let entity = e
                .entity
                .iter()
                .map(|p| {
                    let name = p.entity_name.as_deref().unwrap_or("<default>");
                    format!("{}={name}", p.entity_type.as_str())
                })
                .collect::<Vec<_>>()
                .join(",");
            let values = e
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            (entity, values)
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

fn names(described: &[(String, Vec<(String, f64)>)]) -> Vec<&str> {
    described
        .iter()
        .map(|(entity, _)| entity.as_str())
        .collect()
}

const EXACT: i8 = 0;
const DEFAULT: i8 = 1;
const SPECIFIED: i8 = 2;

#[test]
fn quotas_are_altered_and_described_as_kafka_does_and_outlive_a_restart() {
    let mut weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    set_quota(
        &mut raw,
        &[("client-id", Some("noisy"))],
        "producer_byte_rate",
        1024.0,
    );
    set_quota(
        &mut raw,
        &[("client-id", None)],
        "consumer_byte_rate",
        2048.0,
    );
    set_quota(
        &mut raw,
        &[("user", Some("ANONYMOUS")), ("client-id", Some("noisy"))],
        "request_percentage",
        12.5,
    );

    let all = describe(&mut raw, &[], false).unwrap();
    assert_eq!(
        all,
        vec![
            (
                "client-id=<default>".into(),
                vec![("consumer_byte_rate".into(), 2048.0)]
            ),
            (
                "client-id=noisy".into(),
                vec![("producer_byte_rate".into(), 1024.0)]
            ),
            (
                "user=ANONYMOUS,client-id=noisy".into(),
                vec![("request_percentage".into(), 12.5)]
            ),
        ]
    );
    let exact = describe(&mut raw, &[("client-id", EXACT, Some("noisy"))], false).unwrap();
    assert_eq!(
        names(&exact),
        ["client-id=noisy", "user=ANONYMOUS,client-id=noisy"]
    );
    let strict = describe(&mut raw, &[("client-id", EXACT, Some("noisy"))], true).unwrap();
    assert_eq!(names(&strict), ["client-id=noisy"]);
    let default = describe(&mut raw, &[("client-id", DEFAULT, None)], false).unwrap();
    assert_eq!(names(&default), ["client-id=<default>"]);
    let users = describe(&mut raw, &[("user", SPECIFIED, None)], false).unwrap();
    assert_eq!(names(&users), ["user=ANONYMOUS,client-id=noisy"]);

    // Kafka's errors, one per entry; valid entries of the request apply.
    let answer = alter(
        &mut raw,
        vec![
            entry(&[("client-id", Some("a"))], &[("no_such_quota", Some(1.0))]),
            entry(
                &[("client-id", Some("b"))],
                &[("producer_byte_rate", Some(0.0))],
            ),
            entry(
                &[("client-id", Some("c"))],
                &[("producer_byte_rate", Some(1.5))],
            ),
            entry(&[], &[("producer_byte_rate", Some(1.0))]),
            entry(
                &[("client-id", Some(""))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            entry(
                &[("group", Some("g"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            entry(
                &[("client-id", Some("d"))],
                &[
                    ("producer_byte_rate", Some(1.0)),
                    ("producer_byte_rate", None),
                ],
            ),
            entry(
                &[("client-id", Some("ok"))],
                &[("producer_byte_rate", Some(4096.0))],
            ),
        ],
        false,
    );
    let invalid = ResponseError::InvalidRequest.code();
    let expected: Vec<(i16, Option<String>)> = [
        Some("Invalid configuration key no_such_quota"),
        Some("Quota producer_byte_rate must be greater than 0"),
        Some("producer_byte_rate cannot be a fractional value."),
        Some("Invalid empty client quota entity"),
        Some("Empty client-id not supported"),
        Some("Unhandled client quota entity type: group"),
        Some(
            "Duplicate quota key producer_byte_rate not updating quota for this entity \
             ClientQuotaEntity(entries={client-id=d})",
        ),
        None,
    ]
    .into_iter()
    .map(|message| match message {
        Some(m) => (invalid, Some(m.to_owned())),
        None => (0, None),
    })
    .collect();
    assert_eq!(answer, expected);

    // validate_only changes nothing; a removal drops the entity.
    let answer = alter(
        &mut raw,
        vec![entry(
            &[("client-id", Some("dry"))],
            &[("producer_byte_rate", Some(1.0))],
        )],
        true,
    );
    assert_eq!(answer, vec![(0, None)]);
    let answer = alter(
        &mut raw,
        vec![entry(
            &[("client-id", Some("ok"))],
            &[("producer_byte_rate", None)],
        )],
        false,
    );
    assert_eq!(answer, vec![(0, None)]);
    let clients = describe(&mut raw, &[("client-id", SPECIFIED, None)], true).unwrap();
    assert_eq!(names(&clients), ["client-id=<default>", "client-id=noisy"]);

    let (code, message) = describe(&mut raw, &[("group", EXACT, Some("g"))], false).unwrap_err();
    assert_eq!(code, ResponseError::UnsupportedVersion.code());
    assert_eq!(message, "Unsupported entity type group");
    let (code, message) = describe(&mut raw, &[("user", EXACT, None)], false).unwrap_err();
    assert_eq!(code, invalid);
    assert_eq!(
        message,
        "Request specified MATCH_TYPE_EXACT, but set match string to null."
    );

    drop(raw);
    weir.restart(false);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(describe(&mut raw, &[], false).unwrap(), all);
}

/// Small quota windows, so that a test sees throttling within seconds:
/// rates are measured over at least one second.
const SHORT_WINDOWS: &[&str] = &[
    "--quota-window-num",
    "2",
    "--quota-window-size-seconds",
    "1",
];

fn create_topic(weir: &Weir, topic: &str) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "topic",
            "create",
            topic,
            "--partitions",
            "1",
            "--bootstrap",
            &weir.kafka,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn produce_request(topic: &str, value_bytes: usize) -> ProduceRequest {
    let records = bytes::Bytes::from(BatchBuilder::new(1).value_size(value_bytes).build());
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

fn api_versions(raw: &mut Raw) -> Duration {
    let asked = Instant::now();
    let _: ApiVersionsResponse = raw.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    asked.elapsed()
}

#[test]
fn a_producer_over_its_byte_rate_is_throttled_and_muted_while_others_go_on() {
    let weir = Weir::start(SHORT_WINDOWS);
    create_topic(&weir, "metered");
    let mut admin = Raw::connect_as(&weir.kafka, "admin");
    set_quota(
        &mut admin,
        &[("client-id", Some("noisy"))],
        "producer_byte_rate",
        10_000.0,
    );

    let mut noisy = Raw::connect_as(&weir.kafka, "noisy");
    // 50 kB against 10 kB/s over the minimum one-second span: four seconds
    // bring the rate back to the quota.
    let response: ProduceResponse =
        noisy.call(ApiKey::Produce, 9, &produce_request("metered", 50_000));
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(
        partition.error_code, 0,
        "the records are appended all the same"
    );
    assert!(
        (3_500..=4_500).contains(&response.throttle_time_ms),
        "throttle time {}",
        response.throttle_time_ms
    );
    // Another client is answered while the noisy one is muted ...
    let mut quiet = Raw::connect_as(&weir.kafka, "quiet");
    let response: ProduceResponse =
        quiet.call(ApiKey::Produce, 9, &produce_request("metered", 50_000));
    assert_eq!(response.throttle_time_ms, 0);
    // ... and the noisy one's next request waits out its throttle time.
    let waited = api_versions(&mut noisy);
    assert!(
        waited >= Duration::from_secs(3),
        "answered after {waited:?}"
    );
}

#[test]
fn a_consumer_over_its_byte_rate_gets_empty_throttled_fetches() {
    let weir = Weir::start(SHORT_WINDOWS);
    create_topic(&weir, "metered");
    let mut admin = Raw::connect_as(&weir.kafka, "admin");
    for _ in 0..10 {
        let response: ProduceResponse =
            admin.call(ApiKey::Produce, 9, &produce_request("metered", 10_000));
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    }
    set_quota(
        &mut admin,
        &[("client-id", Some("reader"))],
        "consumer_byte_rate",
        15_000.0,
    );

    let fetch = |offset: i64| {
        FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(10_000_000)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("metered")))
                .with_partitions(vec![FetchPartition::default()
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(10_000_000)])])
    };
    let records_of = |response: &FetchResponse| {
        response.responses[0].partitions[0]
            .records
            .as_ref()
            .map_or(0, |r| r.len())
    };
    let mut reader = Raw::connect_as(&weir.kafka, "reader");
    // A fetch asks no more than the quota lets through in a window: one
    // batch of 10 kB (of the ten there are).
    let first: FetchResponse = reader.call(ApiKey::Fetch, 11, &fetch(0));
    let read = records_of(&first);
    assert!((10_000..20_000).contains(&read), "read {read} bytes");
    assert_eq!(first.throttle_time_ms, 0);
    // The next one would go over: no records, and a throttle time.
    let second: FetchResponse = reader.call(ApiKey::Fetch, 11, &fetch(1));
    assert!(second.throttle_time_ms > 0, "not throttled");
    assert!(second.responses.is_empty(), "{:?}", second.responses);
    // Once it has passed, the records come.
    std::thread::sleep(Duration::from_millis(second.throttle_time_ms as u64));
    let third: FetchResponse = reader.call(ApiKey::Fetch, 11, &fetch(1));
    assert!(records_of(&third) >= 10_000);
}

#[test]
fn a_client_over_its_share_of_request_time_is_muted() {
    let weir = Weir::start(SHORT_WINDOWS);
    let mut admin = Raw::connect_as(&weir.kafka, "admin");
    // A share of request time no request fits in.
    set_quota(
        &mut admin,
        &[("client-id", Some("busy"))],
        "request_percentage",
        0.000_001,
    );
    let mut busy = Raw::connect_as(&weir.kafka, "busy");
    // The response tells the client its delay, at most one window ...
    let metadata: MetadataResponse = busy.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![])),
    );
    assert!(
        (1..=1000).contains(&metadata.throttle_time_ms),
        "throttle time {}",
        metadata.throttle_time_ms
    );
    // ... and the connection waits it out.
    let waited = api_versions(&mut busy);
    assert!(
        waited >= Duration::from_millis(800),
        "answered after {waited:?}"
    );
    let mut other = Raw::connect_as(&weir.kafka, "other");
    api_versions(&mut other);
    api_versions(&mut other);
}

#[test]
fn a_noisy_librdkafka_producer_is_slowed_and_a_quiet_one_is_not() {
    let weir = Weir::start(SHORT_WINDOWS);
    create_topic(&weir, "shared");
    let mut admin = Raw::connect_as(&weir.kafka, "admin");
    const QUOTA: f64 = 100_000.0;
    set_quota(
        &mut admin,
        &[("client-id", Some("noisy"))],
        "producer_byte_rate",
        QUOTA,
    );

    let producer = |client_id: &str| -> FutureProducer {
        ClientConfig::new()
            .set("bootstrap.servers", &weir.kafka)
            .set("client.id", client_id)
            .set("linger.ms", "5")
            .create()
            .unwrap()
    };
    let run = |producer: FutureProducer| {
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let value = vec![1u8; 1000];
                let started = Instant::now();
                let mut delivered = 0usize;
                while started.elapsed() < Duration::from_secs(4) {
                    let mut pending = Vec::new();
                    for _ in 0..100 {
                        let record = FutureRecord::<(), _>::to("shared").payload(&value);
                        match producer.send_result(record) {
                            Ok(delivery) => pending.push(delivery),
                            Err(_) => break, // the local queue is full
                        }
                    }
                    for delivery in pending {
                        if let Ok(Ok(_)) = delivery.await {
                            delivered += value.len();
                        }
                    }
                }
                producer.flush(Duration::from_secs(10)).unwrap();
                delivered
            })
        })
    };
    let noisy = run(producer("noisy"));
    let quiet = run(producer("quiet"));
    let (noisy, quiet) = (noisy.join().unwrap(), quiet.join().unwrap());
    // Four seconds at the quota, plus the one-second span it may burst.
    assert!(
        (noisy as f64) < QUOTA * 7.0,
        "the noisy producer delivered {noisy} bytes"
    );
    assert!(
        quiet > noisy * 5,
        "quiet {quiet} bytes, noisy {noisy} bytes"
    );
}
