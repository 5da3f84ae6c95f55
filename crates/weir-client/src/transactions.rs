//! Transactions as an operator sees them: the coordinator of a
//! transactional id, ListTransactions and DescribeTransactions.

use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest,
    ListTransactionsResponse, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::admin::with_subject;
use crate::error::{check, ClientError};
use crate::groups::Coordinator;
use crate::Client;

/// FindCoordinator's key type for a transactional id.
const TRANSACTION_KEY_TYPE: i8 = 1;

/// One transaction of a ListTransactions answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTransaction {
    pub transactional_id: String,
    pub producer_id: i64,
    /// `Empty`, `Ongoing`, `PrepareCommit`, `CompleteCommit`, …
    pub state: String,
}

/// A transactional id as DescribeTransactions tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    pub transactional_id: String,
    pub state: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    /// When the open transaction started (-1: none open).
    pub start_time_ms: i64,
    /// The partitions of the open transaction, by topic.
    pub partitions: Vec<(String, Vec<i32>)>,
}

impl Client {
    /// The coordinator of `transactional_id`.
    pub async fn find_transaction_coordinator(
        &mut self,
        transactional_id: &str,
    ) -> Result<Coordinator, ClientError> {
        self.find_coordinator_of(TRANSACTION_KEY_TYPE, "transactional id", transactional_id)
            .await
    }

    /// The transactions this broker coordinates, sorted by id.
    pub async fn list_transactions(&mut self) -> Result<Vec<ListedTransaction>, ClientError> {
        let response: ListTransactionsResponse = self
            .call(
                ApiKey::ListTransactions,
                &ListTransactionsRequest::default(),
            )
            .await?;
        check(response.error_code, None)?;
        let mut listed: Vec<ListedTransaction> = response
            .transaction_states
            .into_iter()
            .map(|t| ListedTransaction {
                transactional_id: t.transactional_id.0.to_string(),
                producer_id: t.producer_id.0,
                state: t.transaction_state.to_string(),
            })
            .collect();
        listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(listed)
    }

    /// One transactional id, asked of this broker (its coordinator).
    pub async fn describe_transaction(
        &mut self,
        transactional_id: &str,
    ) -> Result<TransactionDescription, ClientError> {
        let request =
            DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
                StrBytes::from_string(transactional_id.to_owned()),
            )]);
        let response: DescribeTransactionsResponse =
            self.call(ApiKey::DescribeTransactions, &request).await?;
        let state = response
            .transaction_states
            .into_iter()
            .find(|t| t.transactional_id.0.as_str() == transactional_id)
            .ok_or_else(|| self.missing("DescribeTransactions", transactional_id))?;
        check(state.error_code, None)
            .map_err(|e| with_subject(e, "transactional id", transactional_id))?;
        Ok(TransactionDescription {
            transactional_id: transactional_id.to_owned(),
            state: state.transaction_state.to_string(),
            producer_id: state.producer_id.0,
            producer_epoch: state.producer_epoch,
            timeout_ms: state.transaction_timeout_ms,
            start_time_ms: state.transaction_start_time_ms,
            partitions: state
                .topics
                .into_iter()
                .map(|t| (t.topic.0.to_string(), t.partitions))
                .collect(),
        })
    }
}
