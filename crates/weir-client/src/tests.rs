//! The client against a scripted in-process broker: version negotiation,
//! framing, correlation ids, timeouts, and error mapping.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, MetadataResponse, RequestHeader, ResponseHeader,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::{Client, ClientConfig, ClientError};

/// What the fake broker saw: (connection number, header).
type Seen = Arc<Mutex<Vec<(usize, RequestHeader)>>>;

/// A response frame (size prefix included) as a broker would send it.
fn respond<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, key.response_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.freeze()
}

fn api_versions(ranges: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
        ranges
            .iter()
            .map(|&(key, min, max)| {
                ApiVersion::default()
                    .with_api_key(key as i16)
                    .with_min_version(min)
                    .with_max_version(max)
            })
            .collect(),
    )
}

/// Serves connections one after another; `handler` answers each request
/// (or not, with `None`).
async fn fake_broker<H>(mut handler: H) -> (String, Seen)
where
    H: FnMut(usize, &RequestHeader) -> Option<Bytes> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        let mut connection = 0;
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            connection += 1;
            loop {
                let mut size = [0u8; 4];
                if stream.read_exact(&mut size).await.is_err() {
                    break;
                }
                let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
                if stream.read_exact(&mut body).await.is_err() {
                    break;
                }
                let mut body = Bytes::from(body);
                let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
                let version = i16::from_be_bytes([body[2], body[3]]);
                let header =
                    RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
                log.lock().unwrap().push((connection, header.clone()));
                if let Some(reply) = handler(connection, &header) {
                    if stream.write_all(&reply).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    (addr, seen)
}

const RANGES: &[(ApiKey, i16, i16)] = &[
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::Metadata, 0, 9),
    (ApiKey::Produce, 3, 7),
    (ApiKey::Fetch, 4, 15),
];

/// Answers ApiVersions like a broker that knows v0-3, and Metadata with
/// `metadata` (given the correlation id and version).
fn standard<M>(mut metadata: M) -> impl FnMut(usize, &RequestHeader) -> Option<Bytes> + Send
where
    M: FnMut(usize, i32, i16) -> Option<Bytes> + Send,
{
    move |connection, header| {
        let version = header.request_api_version;
        let id = header.correlation_id;
        match ApiKey::try_from(header.request_api_key).unwrap() {
            ApiKey::ApiVersions if version > 3 => {
                let answer = api_versions(RANGES).with_error_code(35);
                Some(respond(ApiKey::ApiVersions, 0, id, &answer))
            }
            ApiKey::ApiVersions => Some(respond(
                ApiKey::ApiVersions,
                version,
                id,
                &api_versions(RANGES),
            )),
            ApiKey::Metadata => metadata(connection, id, version),
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn metadata_with_controller(id: i32, version: i16, controller: i32) -> Bytes {
    let body = MetadataResponse::default()
        .with_controller_id(BrokerId(controller))
        .with_cluster_id(Some(StrBytes::from_static_str("c")));
    respond(ApiKey::Metadata, version, id, &body)
}

fn quick() -> ClientConfig {
    ClientConfig {
        client_id: "test".into(),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_millis(300),
    }
}

#[tokio::test]
async fn negotiates_the_highest_common_version_of_each_api() {
    let (addr, seen) = fake_broker(standard(|_, _, _| None)).await;
    let client = Client::connect_with(&addr, quick()).await.unwrap();
    // ApiVersions at v4 is refused with a v0 answer; the client retries
    // at the broker's highest.
    let versions: Vec<i16> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, h)| h.request_api_version)
        .collect();
    assert_eq!(versions, vec![4, 3]);
    assert_eq!(client.version(ApiKey::Metadata), Some(9));
    assert_eq!(client.version(ApiKey::Produce), Some(7));
    // The broker offers Fetch up to v15; this client fills in topics by
    // name, which ends at v12.
    assert_eq!(client.version(ApiKey::Fetch), Some(12));
    assert_eq!(client.version(ApiKey::CreateTopics), None);
    assert_eq!(client.broker_versions(ApiKey::Fetch), Some((4, 15)));
}

#[tokio::test]
async fn an_api_the_broker_lacks_fails_without_a_request() {
    let (addr, seen) = fake_broker(standard(|_, _, _| None)).await;
    let mut client = Client::connect_with(&addr, quick()).await.unwrap();
    let error = client.create_topic("t", 1, &[]).await.unwrap_err();
    assert!(
        matches!(&error, ClientError::UnsupportedApi { api, .. } if api.contains("CreateTopics")),
        "{error:?}"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "only the ApiVersions exchange"
    );
}

#[tokio::test]
async fn requests_carry_increasing_correlation_ids_and_the_client_id() {
    let (addr, seen) = fake_broker(standard(|_, id, version| {
        Some(metadata_with_controller(id, version, 7))
    }))
    .await;
    let mut client = Client::connect_with(&addr, quick()).await.unwrap();
    for _ in 0..3 {
        let metadata = client.metadata(None).await.unwrap();
        assert_eq!(metadata.controller_id, 7);
        assert_eq!(metadata.cluster_id.as_deref(), Some("c"));
    }
    let seen = seen.lock().unwrap();
    let ids: Vec<i32> = seen.iter().map(|(_, h)| h.correlation_id).collect();
    assert_eq!(ids, vec![1, 2, 3, 4, 5]);
    assert!(seen
        .iter()
        .all(|(_, h)| h.client_id.as_deref() == Some("test")));
    // Metadata v9 is flexible: sent with request header v2, answered with
    // response header v1; both decoded above.
    assert_eq!(seen[2].1.request_api_version, 9);
}

#[tokio::test]
async fn a_foreign_correlation_id_fails_the_call_and_the_connection() {
    let (addr, seen) = fake_broker(standard(|connection, id, version| {
        let id = if connection == 1 { id + 100 } else { id };
        Some(metadata_with_controller(id, version, 3))
    }))
    .await;
    let mut client = Client::connect_with(&addr, quick()).await.unwrap();
    let error = client.metadata(None).await.unwrap_err();
    match &error {
        ClientError::Protocol { addr: a, reason } => {
            assert_eq!(a, &addr);
            assert!(
                reason.contains("correlation id 103, expected 3"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    // The next call opens a fresh connection and succeeds.
    let metadata = client.metadata(None).await.unwrap();
    assert_eq!(metadata.controller_id, 3);
    let connections: Vec<usize> = seen.lock().unwrap().iter().map(|(c, _)| *c).collect();
    assert_eq!(connections, vec![1, 1, 1, 2]);
}

#[tokio::test]
async fn no_answer_is_a_timeout_naming_the_broker() {
    let (addr, _) = fake_broker(standard(|_, _, _| None)).await;
    let mut client = Client::connect_with(&addr, quick()).await.unwrap();
    let error = client.metadata(None).await.unwrap_err();
    assert!(matches!(error, ClientError::Timeout { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!("Metadata request to {addr}: timed out after 300ms")
    );
}

#[tokio::test]
async fn a_refused_connection_names_the_address() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let error = Client::connect(&addr).await.unwrap_err();
    assert!(matches!(error, ClientError::Io { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!("cannot connect to {addr}: Connection refused")
    );
}

#[tokio::test]
async fn bootstrap_tries_each_address_in_turn() {
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let (addr, _) = fake_broker(standard(|_, _, _| None)).await;
    let client = Client::connect_with(&format!("{dead}, {addr}"), quick())
        .await
        .unwrap();
    assert_eq!(client.addr(), addr);
}

#[tokio::test]
async fn topic_error_codes_become_kafka_errors() {
    let (addr, _) = fake_broker(standard(|_, id, version| {
        let body = MetadataResponse::default().with_topics(vec![MetadataResponseTopic::default()
            .with_error_code(3)
            .with_name(Some(TopicName(StrBytes::from_static_str("nope"))))]);
        Some(respond(ApiKey::Metadata, version, id, &body))
    }))
    .await;
    let mut client = Client::connect_with(&addr, quick()).await.unwrap();
    let error = client.metadata(Some(&["nope".into()])).await.unwrap_err();
    match &error {
        ClientError::Kafka {
            code,
            name,
            message,
        } => {
            assert_eq!(*code, 3);
            assert_eq!(name, "UNKNOWN_TOPIC_OR_PARTITION");
            assert_eq!(message.as_deref(), Some("topic 'nope'"));
        }
        other => panic!("{other:?}"),
    }
    assert!(error.is(crate::ResponseError::UnknownTopicOrPartition));
}

/// A coordinator that answers OffsetCommit with each partition's code in
/// turn from `codes` (the last one for ever after).
async fn committing_coordinator(codes: &'static [i16]) -> (String, Seen) {
    use kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };
    use kafka_protocol::messages::OffsetCommitResponse;
    let mut commits = 0;
    fake_broker(move |_, header| {
        let version = header.request_api_version;
        let id = header.correlation_id;
        match ApiKey::try_from(header.request_api_key).unwrap() {
            ApiKey::ApiVersions => {
                let ranges =
                    api_versions(&[(ApiKey::ApiVersions, 0, 3), (ApiKey::OffsetCommit, 2, 2)]);
                Some(respond(ApiKey::ApiVersions, version.min(3), id, &ranges))
            }
            ApiKey::OffsetCommit => {
                let code = codes[commits.min(codes.len() - 1)];
                commits += 1;
                let body = OffsetCommitResponse::default().with_topics(vec![
                    OffsetCommitResponseTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("t")))
                        .with_partitions(vec![OffsetCommitResponsePartition::default()
                            .with_partition_index(0)
                            .with_error_code(code)]),
                ]);
                Some(respond(ApiKey::OffsetCommit, version, id, &body))
            }
            other => panic!("unexpected {other:?}"),
        }
    })
    .await
}

fn commits_seen(seen: &Seen) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(_, h)| h.request_api_key == ApiKey::OffsetCommit as i16)
        .count()
}

#[tokio::test]
async fn a_commit_is_sent_again_while_the_coordinator_loads() {
    // COORDINATOR_LOAD_IN_PROGRESS twice, then done.
    let (addr, seen) = committing_coordinator(&[14, 14, 0]).await;
    let mut client = Client::connect_with(&addr, quick()).await.unwrap();
    client
        .offset_commit_simple("g", &[("t".to_owned(), 0, 5)])
        .await
        .unwrap();
    assert_eq!(commits_seen(&seen), 3);
}

#[tokio::test]
async fn a_coordinator_that_stays_loading_fails_the_commit_after_the_request_timeout() {
    let (addr, seen) = committing_coordinator(&[14]).await;
    let mut client = Client::connect_with(&addr, quick()).await.unwrap();
    let error = client
        .offset_commit_simple("g", &[("t".to_owned(), 0, 5)])
        .await
        .unwrap_err();
    assert!(
        error.is(crate::ResponseError::CoordinatorLoadInProgress),
        "{error:?}"
    );
    // 300 ms of request timeout, 100 ms apart.
    assert!((2..=5).contains(&commits_seen(&seen)), "{seen:?}");
}

#[tokio::test]
async fn other_commit_errors_are_not_retried() {
    // NOT_COORDINATOR: the client must find the coordinator again.
    // COORDINATOR_NOT_AVAILABLE: the commit did not reach the in-sync
    // replicas, which the caller must hear of.
    let cases: [(&'static [i16], _); 2] = [
        (&[16, 0], crate::ResponseError::NotCoordinator),
        (&[15, 0], crate::ResponseError::CoordinatorNotAvailable),
    ];
    for (codes, error) in cases {
        let (addr, seen) = committing_coordinator(codes).await;
        let mut client = Client::connect_with(&addr, quick()).await.unwrap();
        let refused = client
            .offset_commit_simple("g", &[("t".to_owned(), 0, 5)])
            .await
            .unwrap_err();
        assert!(refused.is(error), "{refused:?}");
        assert_eq!(commits_seen(&seen), 1);
    }
}
