//! ListOffsets: where a partition starts, ends, or reaches a timestamp.

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::admin::with_subject;
use crate::error::{check, ClientError};
use crate::Client;

/// The `timestamp` asking ListOffsets for the log start offset.
pub const EARLIEST: i64 = -2;
/// The `timestamp` asking ListOffsets for the log end (the high
/// watermark: the offset the next record will get).
pub const LATEST: i64 = -1;

impl Client {
    /// The offset for `timestamp` in one partition: [`EARLIEST`] (-2) for
    /// the log start, [`LATEST`] (-1) for the log end, or a time in
    /// milliseconds for the first offset whose timestamp is at or after
    /// it (-1 if there is none).
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<i64, ClientError> {
        let version = self.require_version(ApiKey::ListOffsets)?;
        let request = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(timestamp)])]);
        let response: ListOffsetsResponse = self
            .call_version(ApiKey::ListOffsets, version, &request)
            .await?;
        let found = response
            .topics
            .into_iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| self.missing("ListOffsets", &format!("{topic}-{partition}")))?;
        check(found.error_code, None)
            .map_err(|e| with_subject(e, "partition", &format!("{topic}-{partition}")))?;
        Ok(found.offset)
    }
}
