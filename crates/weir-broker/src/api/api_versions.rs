//! ApiVersions: the APIs and versions this broker implements, and from v3
//! the cluster's features (KIP-584).

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::table::APIS;
use super::RequestContext;
use crate::broker::Broker;
use crate::config::features;

fn api_keys() -> Vec<ApiVersion> {
    APIS.iter()
        .map(|api| {
            ApiVersion::default()
                .with_api_key(api.key as i16)
                .with_min_version(api.min_version)
                .with_max_version(api.max_version)
        })
        .collect()
}

pub(super) fn handle(broker: &Broker, ctx: &RequestContext) -> ApiVersionsResponse {
    let supported = features::supported()
        // Before v4 a supported range starting at 0 broke some clients'
        // parsing (KAFKA-17011): Kafka leaves such features out.
        .filter(|&(_, min, _)| ctx.version >= 4 || min > 0)
        .map(|(name, min, max)| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    let finalized = broker
        .with_image(features::finalized)
        .into_iter()
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_version_level(level)
                .with_max_version_level(level)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_api_keys(api_keys())
        .with_supported_features(supported)
        .with_finalized_features(finalized)
        // As Kafka's brokers, the epoch of the finalized features is the
        // metadata image's offset: it grows with every metadata change.
        .with_finalized_features_epoch(broker.with_image(|image| image.applied_index() as i64))
}

/// The v0 answer to an ApiVersions request of a version we do not know.
pub(super) fn unsupported_version_response() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_keys())
}
