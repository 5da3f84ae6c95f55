//! Malformed and hostile input: the broker answers with an error or closes
//! that one connection, stays up, and other clients are not affected.

mod common;

use std::io::Write;
use std::time::Duration;

use common::raw::Raw;
use common::{SmallDisk, Weir};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;
use weir_log::testing::BatchBuilder;

/// A healthy client can still produce and read metadata.
fn assert_serving(weir: &Weir) {
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(raw.topic_metadata("healthy").topics[0].error_code, 0);
    assert_eq!(raw.produce("healthy", 0, BatchBuilder::new(2).build()).0, 0);
}

fn produce(raw: &mut Raw, topic: &str, records: Vec<u8>) -> (i16, i64) {
    raw.produce(topic, 0, records)
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

#[test]
fn broken_frames_close_only_their_connection() {
    let weir = Weir::start(&["--socket-request-max-bytes", "1048576"]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("negative size", (-5i32).to_be_bytes().to_vec()),
        ("zero size", 0i32.to_be_bytes().to_vec()),
        (
            "over socket.request.max.bytes",
            (2 * 1024 * 1024i32).to_be_bytes().to_vec(),
        ),
        ("truncated header", frame(&[0, 3, 0])),
        (
            "unknown api key",
            frame(&[0x03, 0xE7, 0, 0, 0, 0, 0, 1, 0, 0]),
        ),
        (
            "unsupported version",
            frame(&[0, 0, 0x7f, 0, 0, 0, 0, 1, 0, 0]),
        ),
        // Metadata v1 with a topic array of 2^31-1 entries in a tiny frame.
        (
            "huge array count",
            frame(&[0, 3, 0, 1, 0, 0, 0, 7, 0, 0, 0x7f, 0xff, 0xff, 0xff]),
        ),
        (
            "random bytes",
            frame(&[0xde, 0xad, 0xbe, 0xef, 0x12, 0x34, 0x56, 0x78, 0x9a]),
        ),
        // A TLS ClientHello's first bytes on the plaintext port.
        (
            "tls client hello",
            vec![
                0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
            ],
        ),
    ];
    for (name, bytes) in cases {
        let mut raw = Raw::connect(&weir.kafka);
        raw.send_bytes(&bytes).unwrap();
        assert!(raw.is_closed(), "{name}: connection must be closed");
        assert_serving(&weir);
    }
}

#[test]
fn unknown_api_versions_version_gets_a_v0_error_listing_versions() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    // ApiVersions v99: header v2 layout, which the broker cannot parse.
    raw.send_bytes(&frame(&[0, 18, 0, 99, 0, 0, 0, 42, 0, 0, 0]))
        .unwrap();
    let mut response = raw.read_frame().expect("a response, not a close");
    let correlation = i32::from_be_bytes(response[..4].try_into().unwrap());
    assert_eq!(correlation, 42);
    let body = response.split_off(4);
    let mut body = body;
    let decoded: ApiVersionsResponse =
        kafka_protocol::protocol::Decodable::decode(&mut body, 0).unwrap();
    assert_eq!(decoded.error_code, ResponseError::UnsupportedVersion.code());
    assert!(decoded
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16));
    // The same connection can then negotiate.
    let ok: ApiVersionsResponse = raw.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(ok.error_code, 0);
}

#[test]
fn invalid_batches_get_per_partition_errors() {
    let weir = Weir::start(&["--message-max-bytes", "2000"]);
    let mut raw = Raw::connect(&weir.kafka);
    assert_serving(&weir);
    let mut corrupt = BatchBuilder::new(3).build();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert_eq!(
        produce(&mut raw, "healthy", corrupt).0,
        ResponseError::CorruptMessage.code()
    );
    let big = BatchBuilder::new(1).value_size(5000).build();
    assert_eq!(
        produce(&mut raw, "healthy", big).0,
        ResponseError::MessageTooLarge.code()
    );
    let inconsistent = BatchBuilder::new(3).record_count_override(1).build();
    assert_eq!(
        produce(&mut raw, "healthy", inconsistent).0,
        ResponseError::InvalidRecord.code()
    );
    let mut two = BatchBuilder::new(1).build();
    two.extend(BatchBuilder::new(1).build());
    assert_eq!(
        produce(&mut raw, "healthy", two).0,
        ResponseError::InvalidRecord.code()
    );
    let (code, _) = produce(&mut raw, "no-such-topic-here", BatchBuilder::new(1).build());
    assert_eq!(code, ResponseError::UnknownTopicOrPartition.code());
    // Nothing invalid was stored.
    assert_serving(&weir);
}

#[test]
fn half_sent_frames_do_not_block_other_clients() {
    let weir = Weir::start(&[]);
    assert_serving(&weir);
    let rss_before = weir.rss_kib();
    let mut stalled = Vec::new();
    for _ in 0..200 {
        let mut stream = std::net::TcpStream::connect(&weir.kafka).unwrap();
        // Announce 50 MiB, send 10 bytes, and hold the connection open.
        stream
            .write_all(&(50 * 1024 * 1024i32).to_be_bytes())
            .unwrap();
        stream.write_all(&[0, 3, 0, 9, 0, 0, 0, 1, 0, 0]).unwrap();
        stalled.push(stream);
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_serving(&weir);
    // 200 frames announced at 50 MiB each (10 GiB) hold only what arrived.
    let grown = weir.rss_kib().saturating_sub(rss_before);
    assert!(grown < 64 * 1024, "resident memory grew by {grown} KiB");
    let (status, metrics) = weir.http_get("/metrics");
    assert_eq!(status, 200);
    assert!(metrics.contains("weir_requests_total"));
}

#[test]
fn idle_connections_are_closed() {
    let weir = Weir::start(&["--connections-max-idle-ms", "300"]);
    let mut idle = Raw::connect(&weir.kafka);
    std::thread::sleep(Duration::from_millis(1_000));
    assert!(idle.is_closed(), "an idle connection must be closed");
    assert_serving(&weir);
}

/// The base offset and record count of every batch of partition 0 of
/// `topic` from offset 0 up to the high watermark.
fn read_batches(raw: &mut Raw, topic: &str) -> Vec<(i64, i32)> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let mut batches = Vec::new();
    let mut offset = 0;
    loop {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(8 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![FetchPartition::default()
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(8 << 20)])]);
        let response: FetchResponse = raw.call(ApiKey::Fetch, 11, &request);
        let data = &response.responses[0].partitions[0];
        assert_eq!(data.error_code, 0, "fetch at {offset}");
        let mut rest = &data.records.as_ref().expect("records")[..];
        while let Ok(header) = weir_log::batch::BatchHeader::parse(rest, 0) {
            batches.push((header.base_offset(), header.record_count()));
            offset = header.next_offset();
            rest = &rest[header.total_size()..];
        }
        if offset >= data.high_watermark {
            return batches;
        }
    }
}

#[test]
fn a_full_disk_refuses_appends_with_a_storage_error_and_recovers_once_space_is_freed() {
    let disk = SmallDisk::mount(24);
    // Space an operator can free later.
    let ballast = disk.dir.join("ballast");
    std::fs::write(&ballast, vec![1u8; 6 << 20]).unwrap();
    let weir = Weir::start_in(&disk.dir.join("data"), &[], None, &[]);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(raw.topic_metadata("filling").topics[0].error_code, 0);

    let batch = || BatchBuilder::new(16).value_size(16 << 10).build();
    let mut acknowledged = Vec::new();
    let full = loop {
        let (code, base_offset) = produce(&mut raw, "filling", batch());
        if code != 0 {
            break code;
        }
        acknowledged.push(base_offset);
        assert!(acknowledged.len() < 200, "the disk never filled");
    };
    assert_eq!(full, ResponseError::KafkaStorageError.code());
    assert!(!acknowledged.is_empty());

    // Still up: what was acknowledged is read back, and a full disk is
    // answered with the same error again, not a crash.
    let expected: Vec<(i64, i32)> = acknowledged.iter().map(|&o| (o, 16)).collect();
    assert_eq!(read_batches(&mut raw, "filling"), expected);
    let (code, _) = produce(&mut raw, "filling", batch());
    assert_eq!(code, ResponseError::KafkaStorageError.code());

    // Space freed: appends succeed again with no restart, at the next offset.
    std::fs::remove_file(&ballast).unwrap();
    let (code, base_offset) = produce(&mut raw, "filling", batch());
    assert_eq!(code, 0, "appends resume once there is space");
    assert_eq!(base_offset, acknowledged.last().unwrap() + 16);
    let mut expected = expected;
    expected.push((base_offset, 16));
    assert_eq!(read_batches(&mut raw, "filling"), expected);
    drop(raw);
    drop(weir);
}
