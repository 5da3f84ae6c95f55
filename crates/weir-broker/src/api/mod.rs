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
mod table;
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

/// The versions of `key` Weir implements, and therefore advertises in
/// ApiVersions.
/// Kafka's internal topics (`Topic.isInternal`), by name: a topic not
/// created yet is internal all the same.
pub(crate) const INTERNAL_TOPICS: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

/// Whether `topic` is one of Kafka's internal topics.
pub(crate) fn is_internal_topic(topic: &str) -> bool {
    INTERNAL_TOPICS.contains(&topic)
}

/// The client id Kafka lets append to internal topics
/// (`AdminUtils.ADMIN_CLIENT_ID`), for repair tools.
const ADMIN_CLIENT_ID: &str = "__admin_client";

pub(crate) fn supported_versions(key: ApiKey) -> Option<(i16, i16)> {
    table::api(key).map(|api| (api.min_version, api.max_version))
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
            crate::metrics::HIDDEN_RESOURCE
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
/// included), for the responses whose body starts with it (see
/// [`table::Api::throttle_from`]); `None` for the others.
pub(crate) fn throttle_time_offset(key: ApiKey, version: i16) -> Option<usize> {
    let from = table::api(key)?.throttle_from?;
    // Size and correlation id, then (flexible versions) the header's
    // tagged fields, which Weir always sends empty: one byte.
    let header = 4 + 4 + usize::from(key.response_header_version(version) >= 1);
    (version >= from).then_some(header)
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
    table::api(key).map_or("Other", |api| api.name)
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
    let api = table::api(key).filter(|api| (api.min_version..=api.max_version).contains(&version));
    let Some(api) = api else {
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
    };
    let header = RequestHeader::decode(&mut body, key.request_header_version(version)).map_err(
        |reason| RequestError::Malformed {
            key,
            version,
            reason: reason.to_string(),
        },
    )?;
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
    (api.handle)(broker.clone(), ctx, table::Body(body))
}
