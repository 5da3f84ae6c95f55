//! The producer side of transactions as a broker sees it: InitProducerId
//! for an idempotent producer, and WriteTxnMarkers, which a transaction
//! coordinator sends to partition leaders to end a transaction there (and
//! tests send to drive the data path of transactions directly).

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId, TopicName,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::error::{check, ClientError};
use crate::Client;

/// One transaction's end, to be marked in some partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Commit, or abort.
    pub commit: bool,
    /// The epoch of the coordinator writing the marker.
    pub coordinator_epoch: i32,
    /// (topic, partition) pairs, each led by the broker the marker goes to.
    pub partitions: Vec<(String, i32)>,
}

/// What a leader answered for one marker in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerOutcome {
    pub producer_id: i64,
    pub topic: String,
    pub partition: i32,
    /// 0 once the marker is on every in-sync replica; a Kafka error code
    /// otherwise.
    pub error_code: i16,
}

impl Client {
    /// InitProducerId without a transactional id: a fresh producer id and
    /// its epoch, for an idempotent producer.
    pub async fn init_producer_id(&mut self) -> Result<(i64, i16), ClientError> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let response: InitProducerIdResponse = self.call(ApiKey::InitProducerId, &request).await?;
        check(response.error_code, None)?;
        Ok((response.producer_id.0, response.producer_epoch))
    }

    /// WriteTxnMarkers: asks the broker (the leader of every partition
    /// named) to write each marker. Returns one outcome per marker and
    /// partition; per-partition errors are outcomes, not `Err`.
    pub async fn write_txn_markers(
        &mut self,
        markers: &[TxnMarker],
    ) -> Result<Vec<MarkerOutcome>, ClientError> {
        let markers = markers
            .iter()
            .map(|marker| {
                let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
                for (topic, partition) in &marker.partitions {
                    match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                        Some(t) => t.partition_indexes.push(*partition),
                        None => topics.push(
                            WritableTxnMarkerTopic::default()
                                .with_name(TopicName(StrBytes::from_string(topic.clone())))
                                .with_partition_indexes(vec![*partition]),
                        ),
                    }
                }
                WritableTxnMarker::default()
                    .with_producer_id(ProducerId(marker.producer_id))
                    .with_producer_epoch(marker.producer_epoch)
                    .with_transaction_result(marker.commit)
                    .with_coordinator_epoch(marker.coordinator_epoch)
                    .with_topics(topics)
            })
            .collect();
        let request = WriteTxnMarkersRequest::default().with_markers(markers);
        let response: WriteTxnMarkersResponse =
            self.call(ApiKey::WriteTxnMarkers, &request).await?;
        let mut outcomes = Vec::new();
        for marker in response.markers {
            for topic in marker.topics {
                for partition in topic.partitions {
                    outcomes.push(MarkerOutcome {
                        producer_id: marker.producer_id.0,
                        topic: topic.name.0.to_string(),
                        partition: partition.partition_index,
                        error_code: partition.error_code,
                    });
                }
            }
        }
        Ok(outcomes)
    }
}
