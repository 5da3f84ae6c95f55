//! Hanging transactions: a partition holding an open transaction that no
//! coordinator will ever end (its data was written to a partition never
//! added to the transaction, or arrived after the transaction's markers).
//! Such a transaction holds the partition's last stable offset back for
//! good, so `read_committed` consumers stop there.
//!
//! A leader notes when it first saw each open transaction. One open for
//! longer than `transaction.max.timeout.ms` outlived any timeout its
//! coordinator could have given it; the leader then asks every broker
//! which transactions of that producer they coordinate. Only if none has an
//! open transaction with this partition in it (and every broker answered)
//! does the leader write the abort marker itself.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest,
    ListTransactionsResponse, ProducerId, TransactionalId,
};
use parking_lot::Mutex;
use weir_client::{Client, ClientConfig};

use super::TxnStatus;
use crate::partition::Partition;
use crate::txn::TxnCoordinator;

/// An open transaction of a partition: topic, partition, producer id and
/// the transaction's first offset.
type OpenKey = (String, i32, i64, u64);

/// When each open transaction of the partitions led here was first seen.
#[derive(Default)]
pub struct HangingTxns {
    first_seen: Mutex<HashMap<OpenKey, i64>>,
}

impl HangingTxns {
    /// Aborts the open transactions of the partitions led here, `led`,
    /// that have been open longer than `max_age_ms` and that no
    /// coordinator knows of (`coordinator` says how to ask them).
    pub async fn abort_hanging(
        &self,
        coordinator: &TxnCoordinator,
        led: Vec<Arc<Partition>>,
        max_age_ms: i64,
    ) {
        let now = coordinator.environment().now_ms();
        let mut suspects = Vec::new();
        {
            let mut first_seen = self.first_seen.lock();
            let mut open_now = HashMap::new();
            for partition in led {
                for open in partition.log().open_transactions() {
                    let key = (
                        partition.topic.clone(),
                        partition.index,
                        open.producer_id,
                        open.first_offset,
                    );
                    let seen = first_seen.get(&key).copied().unwrap_or(now);
                    if now - seen > max_age_ms {
                        suspects.push((partition.clone(), open.producer_id));
                    }
                    open_now.insert(key, seen);
                }
            }
            *first_seen = open_now;
        }
        for (partition, producer_id) in suspects {
            let topic = partition.topic.clone();
            match coordinator_knows(coordinator, &topic, partition.index, producer_id).await {
                Some(false) => {}
                Some(true) => continue,
                None => {
                    tracing::debug!(
                        topic,
                        partition = partition.index,
                        producer_id,
                        "cannot ask every coordinator about an old open transaction; leaving it"
                    );
                    continue;
                }
            }
            let leader_epoch = partition.replica_state().leader_epoch;
            match partition.abort_hanging(producer_id, leader_epoch).await {
                Ok(_) => tracing::warn!(
                    topic,
                    partition = partition.index,
                    producer_id,
                    "aborted a hanging transaction that no coordinator knew of"
                ),
                Err(error) => tracing::warn!(
                    topic,
                    partition = partition.index,
                    producer_id,
                    %error,
                    "cannot abort a hanging transaction"
                ),
            }
        }
    }
}

/// Whether some broker coordinates an open transaction of `producer_id`
/// that includes the partition; None if a broker could not be asked.
async fn coordinator_knows(
    coordinator: &TxnCoordinator,
    topic: &str,
    partition: i32,
    producer_id: i64,
) -> Option<bool> {
    let brokers: Vec<String> = coordinator.environment().with_image(|image| {
        image
            .live_brokers()
            .map(|b| format!("{}:{}", b.host, b.port))
            .collect()
    });
    let config = ClientConfig {
        client_id: "weir-hanging-transactions".to_owned(),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
    };
    for addr in brokers {
        let security = coordinator.inter_broker_security().clone();
        let mut client = Client::connect_with_security(&addr, config.clone(), security)
            .await
            .ok()?;
        let listed: ListTransactionsResponse = client
            .call(
                ApiKey::ListTransactions,
                &ListTransactionsRequest::default()
                    .with_producer_id_filters(vec![ProducerId(producer_id)]),
            )
            .await
            .ok()?;
        let open: Vec<TransactionalId> = listed
            .transaction_states
            .into_iter()
            .filter(|t| {
                !matches!(
                    t.transaction_state.as_str(),
                    s if s == TxnStatus::Empty.name()
                        || s == TxnStatus::CompleteCommit.name()
                        || s == TxnStatus::CompleteAbort.name()
                )
            })
            .map(|t| t.transactional_id)
            .collect();
        if open.is_empty() {
            continue;
        }
        let described: DescribeTransactionsResponse = client
            .call(
                ApiKey::DescribeTransactions,
                &DescribeTransactionsRequest::default().with_transactional_ids(open),
            )
            .await
            .ok()?;
        let includes = described.transaction_states.iter().any(|state| {
            state.error_code != 0
                || state
                    .topics
                    .iter()
                    .any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&partition))
        });
        if includes {
            return Some(true);
        }
    }
    Some(false)
}
