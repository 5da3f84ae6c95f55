//! UpdateFeatures: changing the cluster's finalized feature levels
//! (KIP-584, `kafka-features.sh upgrade|downgrade`).
//!
//! Kafka's brokers pass the request on to the controller; Weir checks the
//! levels on any node (see [`crate::config::features`]): asking for the level a
//! feature is at succeeds and changes nothing, a level the code does not
//! support is refused as Kafka's controller refuses it, and
//! `eligible.leader.replicas.version`, whose level the metadata holds,
//! moves between 0 and 1 through the controller quorum (Kafka's rules on
//! upgrade types apply). As Kafka, one refused feature fails the whole
//! request, and `validate_only` checks without changing anything.

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::AclOperation;

use super::RequestContext;
use crate::broker::quorum::MetadataError;
use crate::broker::{Broker, BrokerError};
use crate::config::features;

/// UpdateFeatures v0's `allow_downgrade`, in the upgrade types of v1.
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;

pub(super) async fn update_features(
    broker: &Broker,
    ctx: &RequestContext,
    request: UpdateFeaturesRequest,
) -> UpdateFeaturesResponse {
    if !ctx.authorized_on_cluster(broker, AclOperation::Alter) {
        return UpdateFeaturesResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
    }
    // The controller's id, as Kafka's message names the controller that
    // checked the level.
    let controller_id = broker
        .controller_status()
        .leader_id
        .and_then(|id| i32::try_from(id).ok())
        .unwrap_or_else(|| broker.node_id());
    let image = broker.image();
    let upgrade_type =
        |update: &kafka_protocol::messages::update_features_request::FeatureUpdateKey| match (
            ctx.version,
            update.allow_downgrade,
        ) {
            (0, true) => SAFE_DOWNGRADE,
            (0, false) => UPGRADE,
            _ => update.upgrade_type,
        };
    let refused = request.feature_updates.iter().find_map(|update| {
        let name = update.feature.as_str();
        features::refuse_update(
            name,
            update.max_version_level,
            upgrade_type(update),
            controller_id,
            features::level_of(name, &image),
        )
    });
    if let Some(reason) = refused {
        tracing::warn!(%reason, "UpdateFeatures refused");
        return UpdateFeaturesResponse::default()
            .with_error_code(ResponseError::InvalidUpdateVersion.code())
            .with_error_message(Some(StrBytes::from_string(format!(
                "The update failed for all features since the following feature had an error: {reason}"
            ))));
    }
    if !request.validate_only {
        let changes = request.feature_updates.iter().filter(|update| {
            features::level_of(update.feature.as_str(), &image) != update.max_version_level
        });
        for update in changes {
            let name = update.feature.to_string();
            if let Err(error) = broker
                .set_feature_level(name, update.max_version_level, request.timeout_ms)
                .await
            {
                tracing::warn!(%error, "UpdateFeatures not applied");
                let code = match &error {
                    BrokerError::Controller(MetadataError::TimedOut(_)) => {
                        ResponseError::RequestTimedOut
                    }
                    BrokerError::Meta(e) => ResponseError::try_from_code(e.kafka_error_code())
                        .unwrap_or(ResponseError::UnknownServerError),
                    _ => ResponseError::NotController,
                };
                return UpdateFeaturesResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(error.to_string())));
            }
        }
    }
    // Before v2 the answer names each feature; Kafka gives them the error
    // name of "no error" as their message.
    let results = if ctx.version <= 1 {
        request
            .feature_updates
            .iter()
            .map(|update| {
                UpdatableFeatureResult::default()
                    .with_feature(update.feature.clone())
                    .with_error_message(Some(StrBytes::from_static_str("NONE")))
            })
            .collect()
    } else {
        Vec::new()
    };
    UpdateFeaturesResponse::default()
        .with_error_message(None)
        .with_results(results)
}
