//! UpdateFeatures: changing the cluster's finalized feature levels
//! (KIP-584, `kafka-features.sh upgrade|downgrade`).
//!
//! Kafka's brokers pass the request on to the controller; Weir answers on
//! any node, since the levels are the code's (see [`crate::features`]):
//! asking for the level a feature is at succeeds and changes nothing, any
//! other level is refused as Kafka's controller refuses a level it does not
//! support. As Kafka, one refused feature fails the whole request.
//! `validate_only` makes no difference: an accepted request writes nothing.

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::AclOperation;

use super::RequestContext;
use crate::broker::Broker;
use crate::features;

pub(super) fn update_features(
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
    let refused = request.feature_updates.iter().find_map(|update| {
        features::refuse_update(
            update.feature.as_str(),
            update.max_version_level,
            update.upgrade_type,
            controller_id,
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
