//! The transaction coordinator's APIs: InitProducerId with a
//! transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
//! DescribeTransactions and ListTransactions.
//!
//! Each request is checked and takes its turn on the transactional id at
//! once, in the order the connection sent it; only the write to
//! `__transaction_state` is waited for.

use std::future::Future;
use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse,
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use weir_meta::{AclOperation, ResourceType};

use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::groups::offsets::OFFSETS_TOPIC;
use crate::txn::{TxnError, TxnMetadata, TxnRequestError, TxnStatus};
use weir_coord::txn::{EndOutcome, InitOutcome};

/// Kafka's error code for a coordinator error; clients before KIP-588
/// (the request versions below `fenced_from`) know a fenced producer only
/// as INVALID_PRODUCER_EPOCH.
fn error_code(error: &TxnRequestError, version: i16, fenced_from: i16) -> i16 {
    error.response_error(version >= fenced_from).code()
}

/// Answers with `respond(outcome)` once the request's turn on its
/// transactional id is over: its state, if it wrote one, replicated.
fn after_turn<T, F>(
    broker: &Arc<Broker>,
    turn: impl Future<Output = Result<T, TxnRequestError>> + Send + 'static,
    respond: F,
) -> Reply
where
    F: FnOnce(&Arc<Broker>, Result<T, TxnRequestError>) -> Option<crate::net::Outgoing>
        + Send
        + 'static,
{
    let broker = broker.clone();
    Reply::Later(Box::pin(async move {
        let outcome = turn.await;
        respond(&broker, outcome)
    }))
}

/// Writes the markers of the transaction `id` in the background.
fn complete_in_background(broker: &Arc<Broker>, id: String) {
    let broker = broker.clone();
    tokio::spawn(async move {
        let coordinator = broker.txns().clone();
        coordinator.complete(&id).await;
    });
}

/// InitProducerId for a transactional producer: its producer id with a
/// bumped epoch, fencing every earlier producer of the same id.
pub(super) fn init_producer_id(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: InitProducerIdRequest,
    transactional_id: String,
) -> Reply {
    let failure = |code: i16| {
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if !ctx.authorized(
        broker,
        AclOperation::Write,
        ResourceType::TransactionalId,
        &transactional_id,
    ) {
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return Reply::Now(Some(ctx.respond(&failure(code))));
    }
    // Taken before the id's turn, so that the controller is never waited
    // for while other requests of the id are held up; unused ids are
    // simply skipped.
    let Some(fresh_id) = broker.producer_id() else {
        let code = ResponseError::CoordinatorLoadInProgress.code();
        return Reply::Now(Some(ctx.respond(&failure(code))));
    };
    let max_timeout_ms = broker.txn_settings().max_timeout_ms;
    let expected =
        (request.producer_id.0 >= 0).then_some((request.producer_id.0, request.producer_epoch));
    let (id, timeout_ms, now) = (
        transactional_id.clone(),
        request.transaction_timeout_ms,
        broker.now_ms(),
    );
    let turn = broker
        .txns()
        .coordinate(&transactional_id, None, move |current| {
            let (abort_first, next) = match weir_coord::txn::init_producer_id(
                current,
                &id,
                timeout_ms,
                max_timeout_ms,
                expected,
                || fresh_id,
                now,
            )? {
                InitOutcome::Ready(next) => (false, next),
                InitOutcome::AbortFirst(next) => (true, next),
            };
            let producer = (next.producer_id, next.producer_epoch);
            Ok(((abort_first, producer), Some(next)))
        });
    after_turn(broker, turn, move |broker, outcome| {
        let response = match outcome {
            // The open transaction is being aborted; the producer retries.
            Ok((true, _)) => {
                complete_in_background(broker, transactional_id);
                failure(ResponseError::ConcurrentTransactions.code())
            }
            Ok((false, (producer_id, epoch))) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch),
            Err(error) => failure(error_code(&error, ctx.version, 4)),
        };
        Some(ctx.respond(&response))
    })
}

/// Adds `partitions` to the open transaction of `transactional_id`; the
/// outcome for all of them.
fn add_to_txn(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    transactional_id: &str,
    producer_id: i64,
    epoch: i16,
    partitions: Vec<(String, i32)>,
) -> impl Future<Output = Result<(), TxnRequestError>> + Send + 'static {
    let now = broker.now_ms();
    broker
        .txns()
        .coordinate(transactional_id, Some(ctx.connection), move |current| {
            let current = current.ok_or(TxnError::InvalidProducerIdMapping)?;
            Ok((
                (),
                weir_coord::txn::add_partitions(current, producer_id, epoch, &partitions, 0, now)?,
            ))
        })
}

pub(super) fn add_partitions_to_txn(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: AddPartitionsToTxnRequest,
) -> Reply {
    if ctx.version >= 4 {
        return add_partitions_for_leaders(broker, ctx, request);
    }
    let transactional_id = request.v3_and_below_transactional_id.0.to_string();
    let partitions: Vec<(String, i32)> = request
        .v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect();
    let requested = partitions.clone();
    let respond = move |ctx: &RequestContext, code_of: &dyn Fn(&(String, i32)) -> i16| {
        let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
        for partition in &requested {
            let result = AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(partition.1)
                .with_partition_error_code(code_of(partition));
            match topics.iter_mut().find(|t| t.name.0.as_str() == partition.0) {
                Some(topic) => topic.results_by_partition.push(result),
                None => topics.push(
                    AddPartitionsToTxnTopicResult::default()
                        .with_name(TopicName(StrBytes::from_string(partition.0.clone())))
                        .with_results_by_partition(vec![result]),
                ),
            }
        }
        Some(ctx.respond(
            &AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics),
        ))
    };
    // Write on the transactional id, then on every topic: as Kafka, a
    // denied topic fails the request and the others are not attempted.
    if !ctx.authorized(
        broker,
        AclOperation::Write,
        ResourceType::TransactionalId,
        &transactional_id,
    ) {
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return Reply::Now(respond(&ctx, &|_| code));
    }
    let denied: Vec<String> = request
        .v3_and_below_topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|topic| !ctx.authorized(broker, AclOperation::Write, ResourceType::Topic, topic))
        .collect();
    if !denied.is_empty() {
        return Reply::Now(respond(&ctx, &|(topic, _)| {
            if denied.contains(topic) {
                ResponseError::TopicAuthorizationFailed.code()
            } else {
                ResponseError::OperationNotAttempted.code()
            }
        }));
    }
    // Kafka adds none of the partitions if any is unknown.
    let unknown: Vec<(String, i32)> = partitions
        .iter()
        .filter(|(topic, index)| {
            !broker.with_image(|image| {
                image
                    .topic(topic)
                    .and_then(|t| t.partition(*index))
                    .is_some()
            })
        })
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Reply::Now(respond(&ctx, &|p| {
            if unknown.contains(p) {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                ResponseError::OperationNotAttempted.code()
            }
        }));
    }
    // A mirror topic takes no producer's records, nor transaction markers,
    // which would take offsets of the source's records.
    let mirrored: Vec<(String, i32)> = partitions
        .iter()
        .filter(|(topic, _)| {
            broker.with_image(|image| {
                image
                    .topic(topic)
                    .is_some_and(|t| image.mirror_feeding(t.id).is_some())
            })
        })
        .cloned()
        .collect();
    if !mirrored.is_empty() {
        return Reply::Now(respond(&ctx, &|p| {
            if mirrored.contains(p) {
                ResponseError::InvalidRequest.code()
            } else {
                ResponseError::OperationNotAttempted.code()
            }
        }));
    }
    let turn = add_to_txn(
        broker,
        &ctx,
        &transactional_id,
        request.v3_and_below_producer_id.0,
        request.v3_and_below_producer_epoch,
        partitions,
    );
    after_turn(broker, turn, move |_, outcome| {
        let code = match &outcome {
            Ok(()) => 0,
            Err(error) => error_code(error, ctx.version, 2),
        };
        respond(&ctx, &|_| code)
    })
}

/// AddPartitionsToTxn v4 and up, which only brokers send: the leaders of
/// partitions verifying (`verify_only`) or adding them to their producers'
/// transactions, several transactions at once.
fn add_partitions_for_leaders(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: AddPartitionsToTxnRequest,
) -> Reply {
    use kafka_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnResult;
    if !ctx.authorized_on_cluster(broker, AclOperation::ClusterAction) {
        let code = ResponseError::ClusterAuthorizationFailed.code();
        return Reply::Now(Some(
            ctx.respond(&AddPartitionsToTxnResponse::default().with_error_code(code)),
        ));
    }
    let broker = broker.clone();
    Reply::Later(Box::pin(async move {
        let results = request.transactions.into_iter().map(|txn| {
            let broker = broker.clone();
            async move {
                let partitions: Vec<(String, i32)> = txn
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
                    .collect();
                let outcome = broker
                    .txns()
                    .add_for_leader(
                        &txn.transactional_id.0,
                        (txn.producer_id.0, txn.producer_epoch),
                        partitions,
                        txn.verify_only,
                    )
                    .await;
                let code = outcome.map_or_else(|error| error.response_error(true).code(), |()| 0);
                let topic_results = txn
                    .topics
                    .into_iter()
                    .map(|topic| {
                        let results = topic
                            .partitions
                            .iter()
                            .map(|index| {
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(*index)
                                    .with_partition_error_code(code)
                            })
                            .collect();
                        AddPartitionsToTxnTopicResult::default()
                            .with_name(topic.name)
                            .with_results_by_partition(results)
                    })
                    .collect();
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(txn.transactional_id)
                    .with_topic_results(topic_results)
            }
        });
        let results = futures::future::join_all(results).await;
        Some(
            ctx.respond(
                &AddPartitionsToTxnResponse::default().with_results_by_transaction(results),
            ),
        )
    }))
}

/// AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the
/// transaction, so that its TxnOffsetCommit ends with it.
pub(super) fn add_offsets_to_txn(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: AddOffsetsToTxnRequest,
) -> Reply {
    let respond = |ctx: &RequestContext, code: i16| {
        Some(ctx.respond(&AddOffsetsToTxnResponse::default().with_error_code(code)))
    };
    if !ctx.authorized(
        broker,
        AclOperation::Write,
        ResourceType::TransactionalId,
        &request.transactional_id,
    ) {
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return Reply::Now(respond(&ctx, code));
    }
    if !ctx.authorized(
        broker,
        AclOperation::Read,
        ResourceType::Group,
        &request.group_id,
    ) {
        let code = ResponseError::GroupAuthorizationFailed.code();
        return Reply::Now(respond(&ctx, code));
    }
    let Some((index, _)) = broker.coordinator_of(&request.group_id.0) else {
        if let Err(error) = broker.auto_create_topic(OFFSETS_TOPIC) {
            tracing::warn!(%error, "cannot create {OFFSETS_TOPIC}");
        }
        return Reply::Now(respond(&ctx, ResponseError::CoordinatorNotAvailable.code()));
    };
    let turn = add_to_txn(
        broker,
        &ctx,
        &request.transactional_id.0,
        request.producer_id.0,
        request.producer_epoch,
        vec![(OFFSETS_TOPIC.to_owned(), index)],
    );
    after_turn(broker, turn, move |_, outcome| {
        let code = match &outcome {
            Ok(()) => 0,
            Err(error) => error_code(error, ctx.version, 2),
        };
        respond(&ctx, code)
    })
}

/// EndTxn: answers once the decision (PrepareCommit / PrepareAbort) is
/// replicated; the markers follow in the background. From v5 on
/// (transactions v2) the epoch is bumped and the answer carries the
/// producer id and epoch to go on with.
pub(super) fn end_txn(broker: &Arc<Broker>, ctx: RequestContext, request: EndTxnRequest) -> Reply {
    let respond = |ctx: &RequestContext, code: i16, producer: (i64, i16)| {
        Some(
            ctx.respond(
                &EndTxnResponse::default()
                    .with_error_code(code)
                    .with_producer_id(ProducerId(producer.0))
                    .with_producer_epoch(producer.1),
            ),
        )
    };
    const NO_PRODUCER: (i64, i16) = (-1, -1);
    let transactional_id = request.transactional_id.0.to_string();
    if !ctx.authorized(
        broker,
        AclOperation::Write,
        ResourceType::TransactionalId,
        &transactional_id,
    ) {
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return Reply::Now(respond(&ctx, code, NO_PRODUCER));
    }
    let transaction_version = if ctx.version >= 5 {
        weir_coord::txn::TRANSACTIONS_V2
    } else {
        0
    };
    // A bump past the producer id's last epoch moves to a new id, taken
    // before the id's turn (the controller may be asked for a block).
    let fresh_id = if transaction_version >= weir_coord::txn::TRANSACTIONS_V2
        && request.producer_epoch >= i16::MAX - 1
    {
        match broker.producer_id() {
            Some(id) => Some(id),
            None => {
                let code = ResponseError::CoordinatorLoadInProgress.code();
                return Reply::Now(respond(&ctx, code, NO_PRODUCER));
            }
        }
    } else {
        None
    };
    let (now, committed) = (broker.now_ms(), request.committed);
    let (producer_id, epoch) = (request.producer_id.0, request.producer_epoch);
    let turn = broker
        .txns()
        .coordinate(&transactional_id, Some(ctx.connection), move |current| {
            let current = current.ok_or(TxnError::InvalidProducerIdMapping)?;
            match weir_coord::txn::end_txn(
                current,
                producer_id,
                epoch,
                committed,
                transaction_version,
                || fresh_id.unwrap_or(-1),
                now,
            )? {
                EndOutcome::AlreadyDone { producer_id, epoch } => {
                    Ok((((producer_id, epoch), false), None))
                }
                EndOutcome::Prepare(next) => Ok(((next.producer_after_end(), true), Some(next))),
            }
        });
    after_turn(broker, turn, move |broker, outcome| match outcome {
        Ok((producer, prepared)) => {
            if prepared {
                complete_in_background(broker, transactional_id);
            }
            respond(&ctx, 0, producer)
        }
        Err(error) => respond(&ctx, error_code(&error, ctx.version, 2), NO_PRODUCER),
    })
}

pub(super) async fn describe_transactions(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
    let mut states = Vec::with_capacity(request.transactional_ids.len());
    for id in request.transactional_ids {
        let state = TransactionState::default().with_transactional_id(id.clone());
        if !ctx.authorized(
            broker,
            AclOperation::Describe,
            ResourceType::TransactionalId,
            &id.0,
        ) {
            states.push(
                state.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code()),
            );
            continue;
        }
        let described = broker.txns().describe(&id.0).await;
        states.push({
            match described {
                Ok(Some(meta)) => {
                    let mut topics: Vec<TopicData> = Vec::new();
                    for (topic, index) in &meta.partitions {
                        match topics.last_mut() {
                            Some(last) if last.topic.0.as_str() == topic => {
                                last.partitions.push(*index)
                            }
                            _ => topics.push(
                                TopicData::default()
                                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                                    .with_partitions(vec![*index]),
                            ),
                        }
                    }
                    // As Kafka: only the topics the principal may describe.
                    topics.retain(|t| {
                        ctx.authorized(
                            broker,
                            AclOperation::Describe,
                            ResourceType::Topic,
                            &t.topic,
                        )
                    });
                    state
                        .with_transaction_state(StrBytes::from_static_str(meta.status.name()))
                        .with_transaction_timeout_ms(meta.timeout_ms)
                        .with_transaction_start_time_ms(meta.start_ms)
                        .with_producer_id(ProducerId(meta.producer_id))
                        .with_producer_epoch(meta.producer_epoch)
                        .with_topics(topics)
                }
                Ok(None) => state.with_error_code(ResponseError::TransactionalIdNotFound.code()),
                Err(error) => state.with_error_code(error_code(&error, 0, 0)),
            }
        });
    }
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

const STATES: [TxnStatus; 8] = [
    TxnStatus::Empty,
    TxnStatus::Ongoing,
    TxnStatus::PrepareCommit,
    TxnStatus::PrepareAbort,
    TxnStatus::CompleteCommit,
    TxnStatus::CompleteAbort,
    TxnStatus::Dead,
    TxnStatus::PrepareEpochFence,
];

/// ListTransactions: the transactions this broker coordinates, filtered
/// by state, producer id and (v1+) how long they have been running.
pub(super) async fn list_transactions(
    broker: &Broker,
    ctx: &RequestContext,
    request: ListTransactionsRequest,
) -> ListTransactionsResponse {
    use kafka_protocol::messages::list_transactions_response::TransactionState;
    let (known, unknown): (Vec<StrBytes>, Vec<StrBytes>) = request
        .state_filters
        .into_iter()
        .partition(|name| STATES.iter().any(|s| s.name() == name.as_str()));
    // v2 (KIP-1152): ids the whole of which match the pattern, as Java's
    // `Matcher.matches`; an empty pattern matches every id.
    let pattern = match request.transactional_id_pattern.as_deref() {
        None | Some("") => None,
        Some(pattern) => match regex::Regex::new(&format!("^(?:{pattern})$")) {
            Ok(pattern) => Some(pattern),
            Err(_) => {
                return ListTransactionsResponse::default()
                    .with_error_code(ResponseError::InvalidRegularExpression.code())
            }
        },
    };
    let now = broker.now_ms();
    let wanted = |meta: &TxnMetadata| {
        pattern
            .as_ref()
            .is_none_or(|p| p.is_match(&meta.transactional_id))
            && (known.is_empty() && unknown.is_empty()
                || known.iter().any(|s| s.as_str() == meta.status.name()))
            && (request.producer_id_filters.is_empty()
                || request
                    .producer_id_filters
                    .contains(&ProducerId(meta.producer_id)))
            && (request.duration_filter < 0
                || meta.start_ms >= 0 && now - meta.start_ms >= request.duration_filter)
    };
    let states = broker
        .txns()
        .list()
        .await
        .into_iter()
        .filter(|view| wanted(&view.meta))
        // As Kafka: only the transactions the principal may describe.
        .filter(|view| {
            ctx.authorized(
                broker,
                AclOperation::Describe,
                ResourceType::TransactionalId,
                &view.meta.transactional_id,
            )
        })
        .map(|view| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(
                    view.meta.transactional_id.clone(),
                )))
                .with_producer_id(ProducerId(view.meta.producer_id))
                .with_transaction_state(StrBytes::from_static_str(view.meta.status.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(states)
}
