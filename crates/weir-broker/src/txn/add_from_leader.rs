//! A partition's leader adding the partition to its producer's transaction
//! (transactions v2, KIP-890): a Produce v12+ or TxnOffsetCommit v5+ of a
//! producer with no transaction open on the partition first asks the
//! producer's coordinator to add it, so that data is never written to a
//! partition the coordinator will not end with a marker.
//!
//! The coordinator is called in place when this node is it, else over
//! AddPartitionsToTxn v5 on a connection kept for the next call.

use std::collections::HashMap;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use weir_client::{Client, ClientConfig, SecurityConfig};

use super::coordinator::{partition_for, TxnCoordinator, TRANSACTION_STATE_TOPIC};

/// The version brokers of Kafka 4.x send.
const ADD_PARTITIONS_VERSION: i16 = 5;

/// Connections to other brokers' coordinators, idle between calls.
#[derive(Default)]
pub struct CoordinatorConnections {
    idle: Mutex<HashMap<String, Vec<Client>>>,
}

/// More idle connections to one broker are closed.
const MAX_IDLE_PER_BROKER: usize = 4;

impl CoordinatorConnections {
    async fn take(
        &self,
        security: &SecurityConfig,
        addr: &str,
    ) -> Result<Client, weir_client::ClientError> {
        if let Some(client) = self.idle.lock().get_mut(addr).and_then(Vec::pop) {
            return Ok(client);
        }
        let config = ClientConfig {
            client_id: "weir-partition-leader".to_owned(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        };
        Client::connect_with_security(addr, config, security.clone()).await
    }

    fn give_back(&self, addr: &str, client: Client) {
        let mut idle = self.idle.lock();
        let clients = idle.entry(addr.to_owned()).or_default();
        if clients.len() < MAX_IDLE_PER_BROKER {
            clients.push(client);
        }
    }
}

/// Adds `partitions` to the open transaction of `transactional_id`, run by
/// `producer` (id and epoch); the coordinator's error otherwise.
pub async fn add_to_transaction(
    coordinator: &TxnCoordinator,
    transactional_id: &str,
    producer: (i64, i16),
    partitions: &[(String, i32)],
) -> Result<(), ResponseError> {
    let env = coordinator.environment();
    let found = env.with_image(|image| {
        let count = image.topic(TRANSACTION_STATE_TOPIC)?.partition_count();
        let leader = image
            .topic(TRANSACTION_STATE_TOPIC)?
            .partition(partition_for(transactional_id, count))?
            .leader;
        let node = image.broker(leader).filter(|_| !image.is_fenced(leader))?;
        Some((leader, format!("{}:{}", node.host, node.port)))
    });
    let Some((leader, addr)) = found else {
        return Err(ResponseError::CoordinatorNotAvailable);
    };
    if leader == env.node_id() {
        return coordinator
            .add_for_leader(transactional_id, producer, partitions.to_vec(), false)
            .await
            .map_err(|error| error.response_error(true));
    }
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (topic, index) in partitions {
        match topics.last_mut() {
            Some(last) if last.name.0.as_str() == topic => last.partitions.push(*index),
            _ => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![*index]),
            ),
        }
    }
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_owned(),
            )))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_verify_only(false)
            .with_topics(topics),
    ]);
    let connections = coordinator.connections();
    let outcome = async {
        let mut client = connections
            .take(coordinator.inter_broker_security(), &addr)
            .await?;
        let response: AddPartitionsToTxnResponse = client
            .call_version(ApiKey::AddPartitionsToTxn, ADD_PARTITIONS_VERSION, &request)
            .await?;
        connections.give_back(&addr, client);
        Ok::<_, weir_client::ClientError>(response)
    }
    .await;
    let response = match outcome {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(addr, %error, "cannot reach the transaction coordinator");
            return Err(ResponseError::CoordinatorNotAvailable);
        }
    };
    let codes = std::iter::once(response.error_code).chain(
        response
            .results_by_transaction
            .iter()
            .flat_map(|txn| &txn.topic_results)
            .flat_map(|topic| &topic.results_by_partition)
            .map(|partition| partition.partition_error_code),
    );
    match codes.into_iter().find(|code| *code != 0) {
        None => Ok(()),
        Some(code) => {
            Err(ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError))
        }
    }
}
