//! Request routing: decode the header, check the version, hand the request
//! to its API family, encode the response. One module per API family.

mod acls;
mod admin;
mod api_versions;
mod authorized_operations;
mod client_quotas;
mod cluster;
mod configs;
mod consumer_groups;
mod elect_leaders;
mod error_response;
mod fetch;
mod fetch_response;
mod groups;
mod leader_epoch;
mod list_offsets;
mod log_dirs;
mod membership;
mod metadata;
mod offsets;
mod produce;
mod producer_id;
mod producers;
mod reassignments;
pub(crate) mod sasl;
mod scram;
mod share;
mod share_admin;
mod share_state;
mod topic_partitions;
mod txn;
mod txn_markers;

#[cfg(test)]
mod tests;
mod update_features;

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use futures::future::BoxFuture;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::broker::Broker;
use crate::net::{Channel, Outgoing};
use crate::quotas::client::{Client, QuotaKind};
use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::{AclOperation, Authorizer, ResourceType};

use error_response::ErrorResponse;
pub(crate) use sasl::{Authenticator, Intercepted};

/// The versions of each API whose semantics Weir implements, and which it
/// therefore advertises in ApiVersions.
pub(crate) const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 17),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::AlterPartitionReassignments, 0, 0),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::FindCoordinator, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 1),
    (ApiKey::ShareAcknowledge, 1, 1),
    (ApiKey::InitializeShareGroupState, 0, 0),
    (ApiKey::ReadShareGroupState, 0, 0),
    (ApiKey::WriteShareGroupState, 0, 0),
    (ApiKey::DescribeShareGroupOffsets, 0, 0),
    (ApiKey::AlterShareGroupOffsets, 0, 0),
    (ApiKey::DeleteShareGroupOffsets, 0, 0),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::ListConfigResources, 0, 1),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
];

pub(crate) fn supported_versions(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|&(_, min, max)| (min, max))
}

/// What a request produces: a response ready now, a response that needs
/// waiting for (run as its own task), or nothing (acks=0).
pub(crate) enum Reply {
    Now(Option<Outgoing>),
    Later(BoxFuture<'static, Option<Outgoing>>),
}

/// A request the connection cannot go on after.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    #[error("request shorter than a header ({0} bytes)")]
    TooShort(usize),
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("{key:?} version {version} is not supported")]
    UnsupportedVersion { key: ApiKey, version: i16 },
    #[error("malformed {key:?} v{version} request: {reason}")]
    Malformed {
        key: ApiKey,
        version: i16,
        reason: String,
    },
}

/// Who asked, and how to answer.
#[derive(Debug, Clone)]
pub(crate) struct RequestContext {
    pub(crate) key: ApiKey,
    pub(crate) version: i16,
    pub(crate) correlation_id: i32,
    /// The client's `client.id`, empty if it sent none.
    pub(crate) client_id: String,
    /// The client's address as Kafka shows it ("/127.0.0.1").
    pub(crate) client_host: String,
    /// The connection's number: a later connection has a larger one.
    pub(crate) connection: u64,
    /// The request's size in bytes, as produce quotas count it.
    pub(crate) request_size: usize,
    /// The connection's throttling, shared by its requests.
    pub(crate) channel: Arc<Channel>,
    /// Who asked: `User:alice`, `User:ANONYMOUS`.
    pub(crate) principal: Arc<str>,
    /// The client's IP address, as ACL hosts name it.
    pub(crate) client_ip: String,
    /// The ACLs to check requests against; `None`: no authorizer is
    /// configured and everything is allowed.
    pub(crate) authorizer: Option<Arc<Authorizer>>,
}

impl RequestContext {
    /// The client as quotas see it.
    pub(crate) fn quota_client(&self) -> Client<'_> {
        Client {
            user: crate::net::principal_name(&self.principal),
            client_id: &self.client_id,
        }
    }

    /// Records `value` against the client's quota of `kind`; returns the
    /// throttle time, 0 within the quota (or with no quota of that kind).
    /// The caller answers with it and throttles the channel.
    pub(crate) fn record_quota(&self, broker: &Broker, kind: QuotaKind, value: f64) -> u32 {
        let quotas = broker.client_quotas();
        if !quotas.enabled(kind) || self.channel.is_inter_broker() {
            return 0;
        }
        quotas.record(kind, &self.quota_client(), value, broker.now_ms())
    }

    /// Whether the principal may do `operation` on the resource. A denial
    /// is counted (and answered with an authorization error by the
    /// caller).
    pub(crate) fn authorized(
        &self,
        broker: &Broker,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.may(operation, resource_type, name) {
            return true;
        }
        let shown = self.shown_resource(broker, resource_type, name);
        broker
            .metrics()
            .authorization_denied(&self.principal, operation, resource_type, shown);
        false
    }

    /// The name a denial's metric labels may carry: the resource's own only
    /// if it exists and the principal may describe it, so that the names a
    /// client makes up, or may not see, never become labels (each would be
    /// a series kept for the life of the process).
    fn shown_resource<'a>(
        &self,
        broker: &Broker,
        resource_type: ResourceType,
        name: &'a str,
    ) -> &'a str {
        let exists = match resource_type {
            // One name, not the client's.
            ResourceType::Cluster => return name,
            ResourceType::Topic => broker.image().topic(name).is_some(),
            ResourceType::Group => {
                broker.groups().describe(name).is_some()
                    || broker.consumer_groups().hosts(name)
                    || broker.share_groups().hosts(name)
                    || !broker.offsets().group_offsets(name).is_empty()
            }
            _ => false,
        };
        if exists && self.may(AclOperation::Describe, resource_type, name) {
            name
        } else {
            crate::server::metrics::HIDDEN_RESOURCE
        }
    }

    /// [`authorized`](Self::authorized) on the cluster resource.
    pub(crate) fn authorized_on_cluster(&self, broker: &Broker, operation: AclOperation) -> bool {
        self.authorized(
            broker,
            operation,
            ResourceType::Cluster,
            CLUSTER_RESOURCE_NAME,
        )
    }

    /// Whether the principal may do `operation` on the resource, not
    /// counted as a denial: for leaving out of a listing what it may not
    /// see, as Kafka does without logging.
    pub(crate) fn may(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.authorizer.as_ref().is_none_or(|authorizer| {
            authorizer.authorize(
                &self.principal,
                &self.client_ip,
                operation,
                resource_type,
                name,
            )
        })
    }

    /// Whether the principal may do `operation` on some resource of the
    /// type (Kafka's `authorizeByResourceType`).
    pub(crate) fn may_on_some(&self, operation: AclOperation, resource_type: ResourceType) -> bool {
        self.authorizer.as_ref().is_none_or(|authorizer| {
            authorizer.authorize_by_resource_type(
                &self.principal,
                &self.client_ip,
                operation,
                resource_type,
            )
        })
    }

    /// Frames `body` with the response header for this request; see
    /// [`response_frame`].
    pub(crate) fn respond<R: ErrorResponse>(&self, body: &R) -> Outgoing {
        response_frame(self.key, self.version, self.correlation_id, body)
    }
}

/// Frames `body` with the response header. A response that does not fit
/// its version's schema is a bug of the broker's, which the client should
/// not pay for with its connection: it is logged and answered with the
/// API's error response (UNKNOWN_SERVER_ERROR), as Kafka answers a request
/// whose handler failed. Only if that does not encode either does the
/// connection close.
pub(crate) fn response_frame<R: ErrorResponse>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Outgoing {
    let error = match encode_response(key, version, correlation_id, body) {
        Ok(frame) => return frame.into(),
        Err(error) => error,
    };
    let api = api_key_name(key);
    tracing::error!(
        api,
        version,
        %error,
        "cannot encode the response; answering UNKNOWN_SERVER_ERROR"
    );
    let code = kafka_protocol::ResponseError::UnknownServerError.code();
    let fallback = body.error_response(version, code);
    match encode_response(key, version, correlation_id, &fallback) {
        Ok(frame) => frame.into(),
        Err(error) => {
            tracing::error!(
                api,
                version,
                %error,
                "cannot encode the error response either; closing the connection"
            );
            Outgoing::closing()
        }
    }
}

fn encode_response<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> anyhow::Result<Bytes> {
    let header_version = key.response_header_version(version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i32(0);
    header.encode(&mut buf, header_version)?;
    body.encode(&mut buf, version)?;
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// Where a response's `throttle_time_ms` sits in its frame (size prefix
/// included), for the responses whose body starts with it; `None` for
/// the others: Produce and ApiVersions carry it further on, OffsetDelete
/// after its error code, DescribeQuorum and WriteTxnMarkers not at all,
/// and older versions of some APIs not at all.
pub(crate) fn throttle_time_offset(key: ApiKey, version: i16) -> Option<usize> {
    let since = match key {
        ApiKey::DeleteRecords
        | ApiKey::InitProducerId
        | ApiKey::AddPartitionsToTxn
        | ApiKey::AddOffsetsToTxn
        | ApiKey::EndTxn
        | ApiKey::TxnOffsetCommit
        | ApiKey::DescribeConfigs
        | ApiKey::AlterConfigs
        | ApiKey::CreatePartitions
        | ApiKey::DeleteGroups
        | ApiKey::IncrementalAlterConfigs
        | ApiKey::AlterPartitionReassignments
        | ApiKey::ListPartitionReassignments
        | ApiKey::DescribeClientQuotas
        | ApiKey::AlterClientQuotas
        | ApiKey::DescribeCluster
        | ApiKey::DescribeProducers
        | ApiKey::DescribeTransactions
        | ApiKey::ListTransactions
        | ApiKey::DescribeTopicPartitions
        | ApiKey::ElectLeaders
        | ApiKey::UpdateFeatures
        | ApiKey::ListConfigResources
        | ApiKey::DescribeLogDirs
        | ApiKey::AlterReplicaLogDirs
        | ApiKey::DescribeUserScramCredentials
        | ApiKey::AlterUserScramCredentials
        | ApiKey::DescribeAcls
        | ApiKey::CreateAcls
        | ApiKey::DeleteAcls
        | ApiKey::ConsumerGroupHeartbeat
        | ApiKey::ConsumerGroupDescribe
        | ApiKey::ShareGroupHeartbeat
        | ApiKey::ShareGroupDescribe
        | ApiKey::ShareFetch
        | ApiKey::ShareAcknowledge
        | ApiKey::DescribeShareGroupOffsets
        | ApiKey::AlterShareGroupOffsets
        | ApiKey::DeleteShareGroupOffsets => 0,
        ApiKey::Fetch
        | ApiKey::FindCoordinator
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup
        | ApiKey::SyncGroup
        | ApiKey::DescribeGroups
        | ApiKey::ListGroups
        | ApiKey::DeleteTopics => 1,
        ApiKey::ListOffsets
        | ApiKey::JoinGroup
        | ApiKey::CreateTopics
        | ApiKey::OffsetForLeaderEpoch => 2,
        ApiKey::Metadata | ApiKey::OffsetCommit | ApiKey::OffsetFetch => 3,
        _ => return None,
    };
    // Size and correlation id, then (flexible versions) the header's
    // tagged fields, which Weir always sends empty: one byte.
    let header = 4 + 4 + usize::from(key.response_header_version(version) >= 1);
    (version >= since).then_some(header)
}

/// The key and version of a raw request, if it has them.
pub(crate) fn key_and_version(body: &[u8]) -> Option<(ApiKey, i16)> {
    let raw = body.get(..4)?;
    let key = ApiKey::try_from(i16::from_be_bytes([raw[0], raw[1]])).ok()?;
    Some((key, i16::from_be_bytes([raw[2], raw[3]])))
}

/// The request header's client id, read from the raw request: a nullable
/// string of the classic encoding in every header version. Empty if
/// absent or malformed.
pub(crate) fn header_client_id(body: &[u8]) -> &str {
    let Some(len) = body.get(8..10).map(|b| i16::from_be_bytes([b[0], b[1]])) else {
        return "";
    };
    usize::try_from(len)
        .ok()
        .and_then(|len| body.get(10..10 + len))
        .and_then(|id| std::str::from_utf8(id).ok())
        .unwrap_or("")
}

/// The API's name for metrics, from the first bytes of a request.
pub(crate) fn api_name(body: &[u8]) -> &'static str {
    body.get(..2)
        .and_then(|b| ApiKey::try_from(i16::from_be_bytes([b[0], b[1]])).ok())
        .map_or("Unknown", api_key_name)
}

fn api_key_name(key: ApiKey) -> &'static str {
    match key {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
        ApiKey::AlterPartitionReassignments => "AlterPartitionReassignments",
        ApiKey::ListPartitionReassignments => "ListPartitionReassignments",
        ApiKey::ElectLeaders => "ElectLeaders",
        ApiKey::Metadata => "Metadata",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::WriteTxnMarkers => "WriteTxnMarkers",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::DescribeCluster => "DescribeCluster",
        ApiKey::DescribeQuorum => "DescribeQuorum",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::TxnOffsetCommit => "TxnOffsetCommit",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::DeleteGroups => "DeleteGroups",
        ApiKey::JoinGroup => "JoinGroup",
        ApiKey::SyncGroup => "SyncGroup",
        ApiKey::Heartbeat => "Heartbeat",
        ApiKey::LeaveGroup => "LeaveGroup",
        ApiKey::ConsumerGroupHeartbeat => "ConsumerGroupHeartbeat",
        ApiKey::ConsumerGroupDescribe => "ConsumerGroupDescribe",
        ApiKey::ShareGroupHeartbeat => "ShareGroupHeartbeat",
        ApiKey::ShareGroupDescribe => "ShareGroupDescribe",
        ApiKey::ShareFetch => "ShareFetch",
        ApiKey::DescribeShareGroupOffsets => "DescribeShareGroupOffsets",
        ApiKey::AlterShareGroupOffsets => "AlterShareGroupOffsets",
        ApiKey::DeleteShareGroupOffsets => "DeleteShareGroupOffsets",
        ApiKey::ShareAcknowledge => "ShareAcknowledge",
        ApiKey::InitializeShareGroupState => "InitializeShareGroupState",
        ApiKey::ReadShareGroupState => "ReadShareGroupState",
        ApiKey::WriteShareGroupState => "WriteShareGroupState",
        ApiKey::OffsetDelete => "OffsetDelete",
        ApiKey::DeleteRecords => "DeleteRecords",
        ApiKey::AlterConfigs => "AlterConfigs",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        ApiKey::AddPartitionsToTxn => "AddPartitionsToTxn",
        ApiKey::AddOffsetsToTxn => "AddOffsetsToTxn",
        ApiKey::EndTxn => "EndTxn",
        ApiKey::DescribeTransactions => "DescribeTransactions",
        ApiKey::ListTransactions => "ListTransactions",
        ApiKey::DescribeProducers => "DescribeProducers",
        ApiKey::DescribeTopicPartitions => "DescribeTopicPartitions",
        ApiKey::DescribeClientQuotas => "DescribeClientQuotas",
        ApiKey::AlterClientQuotas => "AlterClientQuotas",
        ApiKey::UpdateFeatures => "UpdateFeatures",
        ApiKey::ListConfigResources => "ListConfigResources",
        ApiKey::DescribeLogDirs => "DescribeLogDirs",
        ApiKey::AlterReplicaLogDirs => "AlterReplicaLogDirs",
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        ApiKey::DescribeUserScramCredentials => "DescribeUserScramCredentials",
        ApiKey::AlterUserScramCredentials => "AlterUserScramCredentials",
        ApiKey::DescribeAcls => "DescribeAcls",
        ApiKey::CreateAcls => "CreateAcls",
        ApiKey::DeleteAcls => "DeleteAcls",
        _ => "Other",
    }
}

/// What a group request answered with `code` from
/// [`Broker::check_coordinator`] tells the client.
pub(crate) fn coordinator_error_message(code: i16) -> &'static str {
    if code == kafka_protocol::ResponseError::CoordinatorLoadInProgress.code() {
        "the coordinator is still loading the group's partition; try again"
    } else {
        "this broker is not the group's coordinator"
    }
}

/// Whether dispatching the request may wait: on a file (opening a log, a
/// coordinator's append), on a lock held across one, or on the controller
/// quorum. Such requests are dispatched on the blocking pool, so that a
/// runtime worker never waits and other connections go on. The rest answer
/// from memory, or return at once a future that only awaits.
///
/// Produce and WriteTxnMarkers append inline: their append is a write to
/// the page cache (and an fsync only under a flush policy), and a hop to
/// the blocking pool per request cost the data path more than it saved
/// (BENCHMARKS.md, "Group commit through the broker"). Requests that need
/// the controller read the image and await the commit.
pub(crate) fn dispatch_may_block(body: &[u8]) -> bool {
    let key = body
        .get(..2)
        .and_then(|b| ApiKey::try_from(i16::from_be_bytes([b[0], b[1]])).ok());
    !matches!(
        key,
        None | Some(
            ApiKey::ApiVersions
                | ApiKey::SaslHandshake
                | ApiKey::SaslAuthenticate
                | ApiKey::DescribeUserScramCredentials
                | ApiKey::AlterUserScramCredentials
                | ApiKey::DescribeAcls
                | ApiKey::CreateAcls
                | ApiKey::DeleteAcls
                | ApiKey::Produce
                | ApiKey::WriteTxnMarkers
                | ApiKey::Fetch
                | ApiKey::Metadata
                | ApiKey::DescribeTopicPartitions
                | ApiKey::FindCoordinator
                | ApiKey::CreateTopics
                | ApiKey::DeleteTopics
                | ApiKey::CreatePartitions
                | ApiKey::AlterConfigs
                | ApiKey::IncrementalAlterConfigs
                | ApiKey::AlterPartitionReassignments
                | ApiKey::DescribeClientQuotas
                | ApiKey::AlterClientQuotas
                | ApiKey::UpdateFeatures
                | ApiKey::ListConfigResources
                | ApiKey::ElectLeaders
        )
    )
}

pub(crate) fn dispatch(
    broker: &Arc<Broker>,
    mut body: Bytes,
    peer: Option<std::net::SocketAddr>,
    connection: u64,
    channel: Arc<Channel>,
) -> Result<Reply, RequestError> {
    let request_size = body.len();
    if body.len() < 8 {
        return Err(RequestError::TooShort(body.len()));
    }
    let raw_key = i16::from_be_bytes([body[0], body[1]]);
    let version = i16::from_be_bytes([body[2], body[3]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| RequestError::UnknownApiKey(raw_key))?;
    let supported =
        supported_versions(key).is_some_and(|(min, max)| (min..=max).contains(&version));
    if !supported {
        if key == ApiKey::ApiVersions {
            // Kafka answers an ApiVersions it cannot parse with a v0 error
            // response listing what it supports, so the client can retry.
            let correlation_id = i32::from_be_bytes([body[4], body[5], body[6], body[7]]);
            let response = api_versions::unsupported_version_response();
            return Ok(Reply::Now(Some(response_frame(
                key,
                0,
                correlation_id,
                &response,
            ))));
        }
        return Err(RequestError::UnsupportedVersion { key, version });
    }
    let malformed = |reason: anyhow::Error| RequestError::Malformed {
        key,
        version,
        reason: reason.to_string(),
    };
    let header =
        RequestHeader::decode(&mut body, key.request_header_version(version)).map_err(malformed)?;
    let ctx = RequestContext {
        key,
        version,
        correlation_id: header.correlation_id,
        client_id: header
            .client_id
            .as_ref()
            .map(|id| id.to_string())
            .unwrap_or_default(),
        client_host: peer.map(|p| format!("/{}", p.ip())).unwrap_or_default(),
        client_ip: peer.map(|p| p.ip().to_string()).unwrap_or_default(),
        principal: channel.principal(),
        authorizer: broker.authorizer(),
        connection,
        request_size,
        channel,
    };
    macro_rules! decode {
        () => {
            Decodable::decode(&mut body, version).map_err(malformed)?
        };
    }
    let broker = broker.clone();
    Ok(match key {
        ApiKey::ApiVersions => Reply::Now(Some(ctx.respond(&api_versions::handle(&broker, &ctx)))),
        ApiKey::Metadata => Reply::Now(Some(ctx.respond(&metadata::handle(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::Produce => {
            let request = decode!();
            produce::handle(&broker, ctx, request)
        }
        ApiKey::WriteTxnMarkers => {
            let request = decode!();
            txn_markers::handle(&broker, ctx, request)
        }
        ApiKey::Fetch => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                Some(fetch::handle(&broker, &ctx, request).await)
            }))
        }
        ApiKey::AlterPartitionReassignments => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let altered = reassignments::alter(broker, &ctx, request).await;
                Some(ctx.respond(&altered))
            }))
        }
        ApiKey::ElectLeaders => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let elected = elect_leaders::elect_leaders(broker, &ctx, request).await;
                Some(ctx.respond(&elected))
            }))
        }
        ApiKey::ListPartitionReassignments => Reply::Now(Some(ctx.respond(&reassignments::list(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::OffsetForLeaderEpoch => Reply::Now(Some(ctx.respond(&leader_epoch::handle(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::ListOffsets => Reply::Now(Some(ctx.respond(&list_offsets::handle(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::CreateTopics => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let changed = admin::create_topics(broker, &ctx, request).await;
                Some(ctx.respond(&changed))
            }))
        }
        ApiKey::DeleteTopics => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let changed = admin::delete_topics(broker, &ctx, request).await;
                Some(ctx.respond(&changed))
            }))
        }
        ApiKey::CreatePartitions => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let changed = admin::create_partitions(broker, &ctx, request).await;
                Some(ctx.respond(&changed))
            }))
        }
        ApiKey::InitProducerId => {
            let request: kafka_protocol::messages::InitProducerIdRequest = decode!();
            match request.transactional_id.as_ref().map(|id| id.0.to_string()) {
                Some(id) => txn::init_producer_id(&broker, ctx, request, id),
                None => Reply::Now(Some(
                    ctx.respond(&producer_id::handle(&broker, &ctx, request)),
                )),
            }
        }
        ApiKey::AddPartitionsToTxn => {
            let request = decode!();
            txn::add_partitions_to_txn(&broker, ctx, request)
        }
        ApiKey::AddOffsetsToTxn => {
            let request = decode!();
            txn::add_offsets_to_txn(&broker, ctx, request)
        }
        ApiKey::EndTxn => {
            let request = decode!();
            txn::end_txn(&broker, ctx, request)
        }
        ApiKey::DescribeTransactions => Reply::Now(Some(ctx.respond(&txn::describe_transactions(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::ListTransactions => Reply::Now(Some(ctx.respond(&txn::list_transactions(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::DescribeProducers => Reply::Now(Some(ctx.respond(&producers::describe_producers(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::DescribeTopicPartitions => Reply::Now(Some(ctx.respond(
            &topic_partitions::describe_topic_partitions(&broker, &ctx, decode!()),
        ))),
        ApiKey::DescribeConfigs => Reply::Now(Some(ctx.respond(&configs::describe_configs(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::UpdateFeatures => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let updated = update_features::update_features(&broker, &ctx, request).await;
                Some(ctx.respond(&updated))
            }))
        }
        ApiKey::ListConfigResources => Reply::Now(Some(
            ctx.respond(&configs::list_config_resources(&broker, &ctx, decode!())),
        )),
        ApiKey::DescribeLogDirs => Reply::Now(Some(ctx.respond(&log_dirs::describe_log_dirs(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::AlterReplicaLogDirs => Reply::Now(Some(
            ctx.respond(&log_dirs::alter_replica_log_dirs(&broker, &ctx, decode!())),
        )),
        ApiKey::DescribeCluster => Reply::Now(Some(ctx.respond(&cluster::describe_cluster(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::DescribeQuorum => Reply::Now(Some(ctx.respond(&cluster::describe_quorum(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::FindCoordinator => Reply::Now(Some(ctx.respond(&offsets::find_coordinator(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::OffsetCommit => offsets::offset_commit(&broker, ctx, decode!()),
        ApiKey::OffsetFetch => Reply::Now(Some(ctx.respond(&offsets::offset_fetch(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::TxnOffsetCommit if ctx.version >= 5 => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let committed =
                    offsets::txn_offset_commit_adding_partition(broker, &ctx, request).await;
                Some(ctx.respond(&committed))
            }))
        }
        ApiKey::TxnOffsetCommit => {
            let committed = offsets::txn_offset_commit(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&committed.await)) }))
        }
        ApiKey::ListGroups => Reply::Now(Some(ctx.respond(&groups::list_groups(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::DescribeGroups => Reply::Now(Some(ctx.respond(&groups::describe_groups(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::DeleteGroups => {
            let deleted = groups::delete_groups(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&deleted.await)) }))
        }
        ApiKey::DeleteRecords => Reply::Now(Some(ctx.respond(&admin::delete_records(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::AlterConfigs => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let altered = configs::alter_configs(broker, &ctx, request).await;
                Some(ctx.respond(&altered))
            }))
        }
        ApiKey::IncrementalAlterConfigs => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let altered = configs::incremental_alter_configs(broker, &ctx, request).await;
                Some(ctx.respond(&altered))
            }))
        }
        ApiKey::OffsetDelete => {
            let deleted = offsets::offset_delete(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&deleted.await)) }))
        }
        ApiKey::JoinGroup => {
            let response = membership::join_group(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&response.await)) }))
        }
        ApiKey::SyncGroup => {
            let response = membership::sync_group(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&response.await)) }))
        }
        ApiKey::Heartbeat => {
            let response = membership::heartbeat(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&response.await)) }))
        }
        ApiKey::ConsumerGroupDescribe => Reply::Now(Some(ctx.respond(&consumer_groups::describe(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::ConsumerGroupHeartbeat => {
            let response = consumer_groups::heartbeat(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&response.await)) }))
        }
        ApiKey::ShareGroupHeartbeat => {
            let response = share::heartbeat(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&response.await)) }))
        }
        ApiKey::ShareGroupDescribe => Reply::Now(Some(ctx.respond(&share::describe(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::DescribeShareGroupOffsets => Reply::Now(Some(
            ctx.respond(&share_admin::describe_offsets(&broker, &ctx, decode!())),
        )),
        ApiKey::AlterShareGroupOffsets => {
            let altered = share_admin::alter_offsets(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&altered.await)) }))
        }
        ApiKey::DeleteShareGroupOffsets => {
            let deleted = share_admin::delete_offsets(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&deleted.await)) }))
        }
        ApiKey::ShareFetch => {
            let response = share::fetch(&broker, ctx.clone(), decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&response.await)) }))
        }
        ApiKey::ShareAcknowledge => {
            let response = share::acknowledge_request(&broker, ctx.clone(), decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&response.await)) }))
        }
        ApiKey::ReadShareGroupState => Reply::Now(Some(ctx.respond(&share_state::read(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::WriteShareGroupState => {
            let response = share_state::write_state(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&response.await)) }))
        }
        ApiKey::InitializeShareGroupState => {
            let response = share_state::initialize(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&response.await)) }))
        }
        ApiKey::LeaveGroup => {
            let response = membership::leave_group(&broker, &ctx, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&response.await)) }))
        }
        ApiKey::DescribeClientQuotas => Reply::Now(Some(ctx.respond(
            &client_quotas::describe_client_quotas(&broker, &ctx, decode!()),
        ))),
        ApiKey::AlterClientQuotas => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let altered = client_quotas::alter_client_quotas(broker, &ctx, request).await;
                Some(ctx.respond(&altered))
            }))
        }
        ApiKey::DescribeUserScramCredentials => Reply::Now(Some(ctx.respond(&scram::describe(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::AlterUserScramCredentials => {
            let request = decode!();
            Reply::Later(Box::pin(async move {
                let altered = scram::alter(broker, &ctx, request).await;
                Some(ctx.respond(&altered))
            }))
        }
        ApiKey::DescribeAcls => Reply::Now(Some(ctx.respond(&acls::describe_acls(
            &broker,
            &ctx,
            decode!(),
        )))),
        ApiKey::CreateAcls => {
            let allowed = ctx.authorized_on_cluster(&broker, AclOperation::Alter);
            let created = acls::create_acls(broker, allowed, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&created.await)) }))
        }
        ApiKey::DeleteAcls => {
            let allowed = ctx.authorized_on_cluster(&broker, AclOperation::Alter);
            let deleted = acls::delete_acls(broker, allowed, decode!());
            Reply::Later(Box::pin(async move { Some(ctx.respond(&deleted.await)) }))
        }
        // A SASL listener's connection answers these before dispatch; on
        // any other listener, or once authenticated, they are out of place.
        ApiKey::SaslHandshake => Reply::Now(Some(
            ctx.respond(
                &kafka_protocol::messages::SaslHandshakeResponse::default()
                    .with_error_code(kafka_protocol::ResponseError::IllegalSaslState.code()),
            ),
        )),
        ApiKey::SaslAuthenticate => Reply::Now(Some(
            ctx.respond(
                &kafka_protocol::messages::SaslAuthenticateResponse::default()
                    .with_error_code(kafka_protocol::ResponseError::IllegalSaslState.code())
                    .with_error_message(Some(kafka_protocol::protocol::StrBytes::from_static_str(
                        "SaslAuthenticate request received on a listener without SASL",
                    ))),
            ),
        )),
        _ => return Err(RequestError::UnsupportedVersion { key, version }),
    })
}
