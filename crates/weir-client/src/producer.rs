//! An idempotent producer (KIP-98's `enable.idempotence`): every batch
//! carries a producer id, epoch and sequence number, so a batch sent again
//! after a broker failure is appended once, however often it is retried.
//! Batches are retried across leader changes and broker restarts until
//! Kafka's `delivery.timeout.ms` has passed.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::produce::{encode_as, now_ms, BatchProducer};
use crate::{ClientError, Cluster, Compression, OutgoingRecord};

/// Kafka's default `delivery.timeout.ms`.
pub const DEFAULT_DELIVERY_TIMEOUT: Duration = Duration::from_secs(120);

/// Whether a produce that failed with `error` may be sent again: the
/// broker was unreachable, or answered with an error Kafka calls
/// retriable (not the leader, not enough replicas, timed out, ...).
/// An idempotent batch may be sent again even if it was appended.
pub(crate) fn retriable(error: &ClientError) -> bool {
    matches!(error, ClientError::Io { .. } | ClientError::Timeout { .. })
        || error.kafka_error().is_some_and(|e| e.is_retriable())
}

/// A producer id with its next sequence number per partition.
pub struct IdempotentProducer {
    producer_id: i64,
    producer_epoch: i16,
    next_sequence: HashMap<(String, i32), i32>,
    delivery_timeout: Duration,
}

impl IdempotentProducer {
    /// Asks the cluster for a producer id (InitProducerId), retrying
    /// until `delivery_timeout` passes.
    pub async fn start(
        cluster: &mut Cluster,
        delivery_timeout: Duration,
    ) -> Result<Self, ClientError> {
        let deadline = Instant::now() + delivery_timeout;
        loop {
            match init_producer_id(cluster).await {
                Ok((producer_id, producer_epoch)) => {
                    return Ok(Self {
                        producer_id,
                        producer_epoch,
                        next_sequence: HashMap::new(),
                        delivery_timeout,
                    })
                }
                Err(error) if cluster.again(&error, retriable, &[], deadline).await => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// The producer id and epoch batches are written with.
    pub fn id(&self) -> (i64, i16) {
        (self.producer_id, self.producer_epoch)
    }

    /// Appends `records` to `partition` of `topic` as one batch with
    /// acks=all, and returns the offset of its first record. The batch is
    /// sent again to whichever broker leads the partition after a
    /// retriable failure, until the delivery timeout; once this returns an
    /// error the records may or may not have been appended.
    pub async fn send(
        &mut self,
        cluster: &mut Cluster,
        topic: &str,
        partition: i32,
        records: Vec<OutgoingRecord>,
        compression: Compression,
    ) -> Result<i64, ClientError> {
        let count = i32::try_from(records.len())
            .map_err(|_| ClientError::InvalidArgument("too many records in a batch".to_owned()))?;
        let key = (topic.to_owned(), partition);
        let mut base_sequence = self.next_sequence.get(&key).copied().unwrap_or(0);
        if base_sequence.checked_add(count).is_none() {
            // Sequences would wrap: go on under a new producer id.
            *self = Self::start(cluster, self.delivery_timeout).await?;
            base_sequence = 0;
        }
        let producer = BatchProducer {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence,
        };
        let batch = encode_as(records, now_ms(), compression, Some(producer))?;
        let base_offset =
            send_until(cluster, topic, partition, batch, self.delivery_timeout).await?;
        self.next_sequence.insert(key, base_sequence + count);
        Ok(base_offset)
    }
}

async fn init_producer_id(cluster: &mut Cluster) -> Result<(i64, i16), ClientError> {
    // Any broker answers; a failed one makes the next metadata request
    // move the bootstrap connection elsewhere.
    let outcome = cluster.any().init_producer_id().await;
    if outcome
        .as_ref()
        .is_err_and(|e| !matches!(e, ClientError::Kafka { .. }))
    {
        // Its own error, if it has one, is the one the retry decides on.
        let _ = cluster.metadata(Some(&[])).await;
    }
    outcome
}

/// Sends `batch` to the partition's leader until it is acknowledged, a
/// non-retriable error comes back, or `timeout` passes.
async fn send_until(
    cluster: &mut Cluster,
    topic: &str,
    partition: i32,
    batch: Bytes,
    timeout: Duration,
) -> Result<i64, ClientError> {
    let deadline = Instant::now() + timeout;
    let key = [(topic.to_owned(), partition)];
    loop {
        let outcome = match cluster.leader(topic, partition).await {
            Ok(client) => {
                let produce = client.produce_batch(topic, partition, batch.clone());
                match tokio::time::timeout_at(deadline, produce).await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(ClientError::Timeout {
                        context: format!("cannot produce to {topic}-{partition}"),
                        after: timeout,
                    }),
                }
            }
            Err(error) => Err(error),
        };
        match outcome {
            Err(error) if cluster.again(&error, retriable, &key, deadline).await => {}
            outcome => return outcome,
        }
    }
}
