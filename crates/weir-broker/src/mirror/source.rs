//! The source cluster as a mirror reads it: a client with the mirror's
//! settings (Kafka's client config names, `--source-config`), the source's
//! metadata, and Fetch requests as a consumer reading committed records
//! (`isolation.level=read_committed`), which stop at the source's last
//! stable offset and carry every batch below it as the source stores it:
//! aborted ones and transaction markers too.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;
use weir_client::{Client, ClientConfig, ClientError, Cluster, SecurityConfig};
use weir_meta::Mirror;

use crate::mirror::failback::{BatchId, SourceBatch};

/// How long a fetch waits at the source for new records.
pub const FETCH_WAIT_MS: i32 = 500;
/// The most bytes one fetch asks for per partition, and in all.
const PARTITION_MAX_BYTES: i32 = 1 << 20;
const FETCH_MAX_BYTES: i32 = 16 << 20;
/// Kafka's `READ_COMMITTED`.
const READ_COMMITTED: i8 = 1;

/// The client settings of `mirror`'s source, or what is wrong with them.
pub fn security(mirror: &Mirror) -> Result<SecurityConfig, String> {
    SecurityConfig::from_properties(&mirror.source_config).map_err(|e| e.to_string())
}

/// Connects to `mirror`'s source cluster.
pub async fn connect(mirror: &Mirror, node_id: i32) -> Result<Cluster, String> {
    let config = ClientConfig {
        client_id: format!("weir-mirror-{}-{node_id}", mirror.name),
        connect_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(30),
    };
    Cluster::connect_with_security(&mirror.source_bootstrap, config, security(mirror)?)
        .await
        .map_err(|e| e.to_string())
}

/// A partition to fetch, from `offset` on.
#[derive(Debug, Clone)]
pub struct Target {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub offset: u64,
}

/// What the source answered for one partition.
#[derive(Debug)]
pub struct Answer {
    pub error: Option<ResponseError>,
    /// The batches, as the source stores them (the last may be cut).
    pub records: Bytes,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

/// One Fetch of `targets` from `client`, the source broker leading them;
/// the answers in the order of `targets` (`None`: not in the response).
pub async fn fetch(
    client: &mut Client,
    targets: &[Target],
) -> Result<Vec<Option<Answer>>, ClientError> {
    fetch_with(client, targets, FETCH_WAIT_MS, PARTITION_MAX_BYTES).await
}

/// The source's batch holding `target`'s offset, or the first after it,
/// without waiting for one (a failback comparing logs).
pub async fn first_batch(client: &mut Client, target: &Target) -> Result<SourceBatch, ClientError> {
    // A fetch answers at least one whole batch whatever its size limit.
    let answer = fetch_with(client, std::slice::from_ref(target), 0, 1)
        .await?
        .pop()
        .flatten()
        .ok_or_else(|| ClientError::Protocol {
            addr: client.addr().to_owned(),
            reason: format!(
                "no answer for partition {} of {}",
                target.partition, target.topic
            ),
        })?;
    match answer.error {
        None => {
            Ok(BatchId::first_of(&answer.records).map_or(SourceBatch::None, SourceBatch::Batch))
        }
        Some(ResponseError::OffsetOutOfRange)
            if (target.offset as i64) < answer.log_start_offset =>
        {
            Ok(SourceBatch::BelowLogStart)
        }
        Some(ResponseError::OffsetOutOfRange) => Ok(SourceBatch::None),
        Some(error) => Err(ClientError::Kafka {
            code: error.code(),
            name: format!("{error:?}"),
            message: None,
        }),
    }
}

async fn fetch_with(
    client: &mut Client,
    targets: &[Target],
    max_wait_ms: i32,
    partition_max_bytes: i32,
) -> Result<Vec<Option<Answer>>, ClientError> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for target in targets {
        let partition = FetchPartition::default()
            .with_partition(target.partition)
            .with_fetch_offset(target.offset as i64)
            .with_partition_max_bytes(partition_max_bytes);
        match topics.iter_mut().find(|t| t.topic_id == target.topic_id) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(target.topic.clone())))
                    .with_topic_id(target.topic_id)
                    .with_partitions(vec![partition]),
            ),
        }
    }
    let request = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_isolation_level(READ_COMMITTED)
        .with_session_epoch(-1)
        .with_topics(topics);
    let response: FetchResponse = client.call(ApiKey::Fetch, &request).await?;
    if let Some(error) = ResponseError::try_from_code(response.error_code) {
        return Err(ClientError::Kafka {
            code: response.error_code,
            name: format!("{error:?}"),
            message: None,
        });
    }
    // By (topic id or name, partition): a response names topics one way,
    // as its version has it.
    let mut answers: BTreeMap<(Uuid, String, i32), Answer> = BTreeMap::new();
    for topic in response.responses {
        for p in topic.partitions {
            answers.insert(
                (topic.topic_id, topic.topic.0.to_string(), p.partition_index),
                Answer {
                    error: ResponseError::try_from_code(p.error_code),
                    records: p.records.unwrap_or_default(),
                    high_watermark: p.high_watermark,
                    log_start_offset: p.log_start_offset,
                },
            );
        }
    }
    Ok(targets
        .iter()
        .map(|t| {
            let by_id = (t.topic_id, String::new(), t.partition);
            let by_name = (Uuid::nil(), t.topic.clone(), t.partition);
            answers.remove(&by_id).or_else(|| answers.remove(&by_name))
        })
        .collect())
}
