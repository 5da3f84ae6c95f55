//! The API table: one row per Kafka API Weir serves, with the versions it
//! advertises in ApiVersions, where its responses carry `throttle_time_ms`,
//! and the handler itself. Kafka
//! keeps the same facts in `ApiKeys` and `KafkaApis.handle`; here they are
//! one row, so adding an API is a row and a module.
//!
//! Rows are sorted by API key (a test checks it) and looked up by binary
//! search.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;
use weir_meta::AclOperation;

use super::*;
use crate::broker::Broker;

/// One API: its key, its name in metrics and logs, the versions Weir
/// implements, and what serves it.
pub(crate) struct Api {
    pub(crate) key: ApiKey,
    pub(crate) name: &'static str,
    pub(crate) min_version: i16,
    pub(crate) max_version: i16,
    /// From which version the response body starts with
    /// `throttle_time_ms` (where a request quota's throttle is written
    /// into an encoded response); `None` where it never does: Produce and
    /// ApiVersions carry it further on, OffsetDelete after its error code,
    /// DescribeQuorum, WriteTxnMarkers and the share-state APIs not at all.
    pub(crate) throttle_from: Option<i16>,
    pub(crate) handle: Handler,
}

/// A handler: the request's body after its header, to decode at the
/// context's version, and the reply. It is called on the connection's
/// task and never waits there: it answers from memory, or returns at once
/// a future that only awaits (a partition's appender, a shard's event, the
/// blocking pool for file I/O, the controller's commit, another broker).
pub(crate) type Handler = fn(Arc<Broker>, RequestContext, Body) -> Result<Reply, RequestError>;

/// A request's body after its header.
pub(crate) struct Body(pub(super) Bytes);

impl Body {
    /// The request at `ctx`'s version; a request that does not parse is
    /// one the connection cannot go on after.
    fn decode<T: Decodable>(mut self, ctx: &RequestContext) -> Result<T, RequestError> {
        T::decode(&mut self.0, ctx.version).map_err(|reason| RequestError::Malformed {
            key: ctx.key,
            version: ctx.version,
            reason: reason.to_string(),
        })
    }
}

/// The row of `key`, if Weir serves it.
pub(crate) fn api(key: ApiKey) -> Option<&'static Api> {
    APIS.binary_search_by_key(&(key as i16), |api| api.key as i16)
        .ok()
        .map(|index| &APIS[index])
}

/// Answers now with `response`.
fn now<R: ErrorResponse>(ctx: &RequestContext, response: R) -> Result<Reply, RequestError> {
    Ok(Reply::Now(Some(ctx.respond(&response))))
}

/// Answers with what `$work` gives once it is ready: an expression that may
/// `.await` and borrow `$ctx`, which the reply owns.
macro_rules! later {
    ($ctx:ident, $work:expr) => {
        Ok(Reply::Later(Box::pin(async move {
            let response = $work;
            Some($ctx.respond(&response))
        })))
    };
}

macro_rules! api {
    ($key:ident, $min:literal..=$max:literal, throttle $throttle:expr, $handle:expr) => {
        Api {
            key: ApiKey::$key,
            name: stringify!($key),
            min_version: $min,
            max_version: $max,
            throttle_from: $throttle,
            handle: $handle,
        }
    };
}

const NEVER: Option<i16> = None;

/// Every API Weir serves, by key.
pub(crate) static APIS: &[Api] = &[
    api!(Produce, 3..=13, throttle NEVER, |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        Ok(produce::handle(&broker, ctx, request))
    }),
    api!(Fetch, 4..=17, throttle Some(1), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        Ok(Reply::Later(Box::pin(async move {
            Some(fetch::handle(&broker, &ctx, request).await)
        })))
    }),
    api!(ListOffsets, 1..=10, throttle Some(2), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, list_offsets::handle(&broker, &ctx, request).await)
    }),
    api!(Metadata, 0..=13, throttle Some(3), |broker, ctx, body| {
        now(&ctx, metadata::handle(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(OffsetCommit, 2..=9, throttle Some(3), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        Ok(offsets::offset_commit(&broker, ctx, request))
    }),
    api!(OffsetFetch, 1..=9, throttle Some(3), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, offsets::offset_fetch(&broker, &ctx, request).await)
    }),
    api!(FindCoordinator, 0..=5, throttle Some(1), |broker, ctx, body| {
        now(&ctx, offsets::find_coordinator(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(JoinGroup, 0..=9, throttle Some(2), |broker, ctx, body| {
        let response = membership::join_group(&broker, &ctx, body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(Heartbeat, 0..=4, throttle Some(1), |broker, ctx, body| {
        let response = membership::heartbeat(&broker, &ctx, body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(LeaveGroup, 0..=5, throttle Some(1), |broker, ctx, body| {
        let response = membership::leave_group(&broker, &ctx, body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(SyncGroup, 0..=5, throttle Some(1), |broker, ctx, body| {
        let response = membership::sync_group(&broker, &ctx, body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(DescribeGroups, 0..=6, throttle Some(1), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, groups::describe_groups(&broker, &ctx, request).await)
    }),
    api!(ListGroups, 0..=5, throttle Some(1), |broker, ctx, body| {
        now(&ctx, groups::list_groups(&broker, &ctx, body.decode(&ctx)?))
    }),
    // A SASL listener's connection answers SaslHandshake and
    // SaslAuthenticate before dispatch; on any other listener, or once
    // authenticated, they are out of place.
    api!(SaslHandshake, 0..=1, throttle NEVER, |_, ctx, _| {
        now(
            &ctx,
            SaslHandshakeResponse::default()
                .with_error_code(ResponseError::IllegalSaslState.code()),
        )
    }),
    api!(ApiVersions, 0..=4, throttle NEVER, |broker, ctx, _| {
        now(&ctx, api_versions::handle(&broker, &ctx))
    }),
    api!(CreateTopics, 2..=7, throttle Some(2), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, admin::create_topics(broker, &ctx, request).await)
    }),
    api!(DeleteTopics, 1..=6, throttle Some(1), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, admin::delete_topics(broker, &ctx, request).await)
    }),
    api!(DeleteRecords, 0..=2, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, admin::delete_records(&broker, &ctx, request).await)
    }),
    api!(InitProducerId, 0..=5, throttle Some(0), |broker, ctx, body| {
        let request: InitProducerIdRequest = body.decode(&ctx)?;
        match request.transactional_id.as_ref().map(|id| id.0.to_string()) {
            Some(id) => Ok(txn::init_producer_id(&broker, ctx, request, id)),
            None => now(&ctx, producer_id::handle(&broker, &ctx, request)),
        }
    }),
    api!(OffsetForLeaderEpoch, 2..=4, throttle Some(2), |broker, ctx, body| {
        now(&ctx, leader_epoch::handle(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(AddPartitionsToTxn, 0..=5, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        Ok(txn::add_partitions_to_txn(&broker, ctx, request))
    }),
    api!(AddOffsetsToTxn, 0..=4, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        Ok(txn::add_offsets_to_txn(&broker, ctx, request))
    }),
    api!(EndTxn, 0..=5, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        Ok(txn::end_txn(&broker, ctx, request))
    }),
    api!(WriteTxnMarkers, 1..=1, throttle NEVER, |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        Ok(txn_markers::handle(&broker, ctx, request))
    }),
    api!(TxnOffsetCommit, 0..=5, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        if ctx.version >= 5 {
            later!(
                ctx,
                offsets::txn_offset_commit_adding_partition(broker, &ctx, request).await
            )
        } else {
            later!(ctx, offsets::txn_offset_commit(&broker, &ctx, request).await)
        }
    }),
    api!(DescribeAcls, 1..=3, throttle Some(0), |broker, ctx, body| {
        now(&ctx, acls::describe_acls(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(CreateAcls, 1..=3, throttle Some(0), |broker, ctx, body| {
        let allowed = ctx.authorized_on_cluster(&broker, AclOperation::Alter);
        let created = acls::create_acls(broker, allowed, body.decode(&ctx)?);
        later!(ctx, created.await)
    }),
    api!(DeleteAcls, 1..=3, throttle Some(0), |broker, ctx, body| {
        let allowed = ctx.authorized_on_cluster(&broker, AclOperation::Alter);
        let deleted = acls::delete_acls(broker, allowed, body.decode(&ctx)?);
        later!(ctx, deleted.await)
    }),
    api!(DescribeConfigs, 1..=4, throttle Some(0), |broker, ctx, body| {
        now(&ctx, configs::describe_configs(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(AlterConfigs, 0..=2, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, configs::alter_configs(broker, &ctx, request).await)
    }),
    api!(AlterReplicaLogDirs, 1..=2, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, log_dirs::alter_replica_log_dirs(broker, &ctx, request).await)
    }),
    api!(DescribeLogDirs, 1..=4, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, log_dirs::describe_log_dirs(broker, &ctx, request).await)
    }),
    api!(SaslAuthenticate, 0..=2, throttle NEVER, |_, ctx, _| {
        now(
            &ctx,
            SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::IllegalSaslState.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "SaslAuthenticate request received on a listener without SASL",
                ))),
        )
    }),
    api!(CreatePartitions, 0..=3, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, admin::create_partitions(broker, &ctx, request).await)
    }),
    api!(DeleteGroups, 0..=2, throttle Some(0), |broker, ctx, body| {
        let deleted = groups::delete_groups(&broker, &ctx, body.decode(&ctx)?);
        later!(ctx, deleted.await)
    }),
    api!(ElectLeaders, 0..=2, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, elect_leaders::elect_leaders(broker, &ctx, request).await)
    }),
    api!(IncrementalAlterConfigs, 0..=1, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, configs::incremental_alter_configs(broker, &ctx, request).await)
    }),
    api!(AlterPartitionReassignments, 0..=0, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, reassignments::alter(broker, &ctx, request).await)
    }),
    api!(ListPartitionReassignments, 0..=0, throttle Some(0), |broker, ctx, body| {
        now(&ctx, reassignments::list(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(OffsetDelete, 0..=0, throttle NEVER, |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, offsets::offset_delete(&broker, &ctx, request).await)
    }),
    api!(DescribeClientQuotas, 0..=1, throttle Some(0), |broker, ctx, body| {
        now(&ctx, client_quotas::describe_client_quotas(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(AlterClientQuotas, 0..=1, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, client_quotas::alter_client_quotas(broker, &ctx, request).await)
    }),
    api!(DescribeUserScramCredentials, 0..=0, throttle Some(0), |broker, ctx, body| {
        now(&ctx, scram::describe(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(AlterUserScramCredentials, 0..=0, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, scram::alter(broker, &ctx, request).await)
    }),
    api!(DescribeQuorum, 0..=2, throttle NEVER, |broker, ctx, body| {
        now(&ctx, cluster::describe_quorum(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(UpdateFeatures, 0..=2, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, update_features::update_features(&broker, &ctx, request).await)
    }),
    api!(DescribeCluster, 0..=2, throttle Some(0), |broker, ctx, body| {
        now(&ctx, cluster::describe_cluster(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(DescribeProducers, 0..=0, throttle Some(0), |broker, ctx, body| {
        now(&ctx, producers::describe_producers(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(DescribeTransactions, 0..=0, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, txn::describe_transactions(&broker, &ctx, request).await)
    }),
    api!(ListTransactions, 0..=2, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, txn::list_transactions(&broker, &ctx, request).await)
    }),
    api!(ConsumerGroupHeartbeat, 0..=1, throttle Some(0), |broker, ctx, body| {
        let response = consumer_groups::heartbeat(&broker, &ctx, body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(ConsumerGroupDescribe, 0..=1, throttle Some(0), |broker, ctx, body| {
        now(&ctx, consumer_groups::describe(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(ListConfigResources, 0..=1, throttle Some(0), |broker, ctx, body| {
        now(&ctx, configs::list_config_resources(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(DescribeTopicPartitions, 0..=0, throttle Some(0), |broker, ctx, body| {
        now(
            &ctx,
            topic_partitions::describe_topic_partitions(&broker, &ctx, body.decode(&ctx)?),
        )
    }),
    api!(ShareGroupHeartbeat, 1..=1, throttle Some(0), |broker, ctx, body| {
        let response = share::heartbeat(&broker, &ctx, body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(ShareGroupDescribe, 1..=1, throttle Some(0), |broker, ctx, body| {
        now(&ctx, share::describe(&broker, &ctx, body.decode(&ctx)?))
    }),
    api!(ShareFetch, 1..=1, throttle Some(0), |broker, ctx, body| {
        let response = share::fetch(&broker, ctx.clone(), body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(ShareAcknowledge, 1..=1, throttle Some(0), |broker, ctx, body| {
        let response = share::acknowledge_request(&broker, ctx.clone(), body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(InitializeShareGroupState, 0..=0, throttle NEVER, |broker, ctx, body| {
        let response = share_state::initialize(&broker, &ctx, body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(ReadShareGroupState, 0..=0, throttle NEVER, |broker, ctx, body| {
        let response = share_state::read(&broker, &ctx, body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(WriteShareGroupState, 0..=0, throttle NEVER, |broker, ctx, body| {
        let response = share_state::write_state(&broker, &ctx, body.decode(&ctx)?);
        later!(ctx, response.await)
    }),
    api!(DescribeShareGroupOffsets, 0..=0, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, share_admin::describe_offsets(&broker, &ctx, request).await)
    }),
    api!(AlterShareGroupOffsets, 0..=0, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, share_admin::alter_offsets(&broker, &ctx, request).await)
    }),
    api!(DeleteShareGroupOffsets, 0..=0, throttle Some(0), |broker, ctx, body| {
        let request = body.decode(&ctx)?;
        later!(ctx, share_admin::delete_offsets(&broker, &ctx, request).await)
    }),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_sorted_by_key_once_each() {
        for pair in APIS.windows(2) {
            assert!(
                (pair[0].key as i16) < (pair[1].key as i16),
                "{} must come after {}",
                pair[0].name,
                pair[1].name
            );
        }
    }

    #[test]
    fn each_row_is_found_by_its_key_and_named_as_kafka_names_it() {
        for row in APIS {
            assert_eq!(api(row.key).map(|found| found.name), Some(row.name));
            assert_eq!(format!("{:?}", row.key), row.name);
            assert!(row.min_version <= row.max_version, "{}", row.name);
        }
        assert!(
            api(ApiKey::Vote).is_none(),
            "a controller API is not served here"
        );
    }
}
