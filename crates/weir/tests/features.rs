//! The cluster's features (ApiVersions v3+, UpdateFeatures) and
//! ListConfigResources, against the real binary.

mod common;

use std::collections::BTreeSet;

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const INVALID_UPDATE_VERSION: i16 = 95;
const UNSUPPORTED_VERSION: i16 = 35;
/// ListConfigResources' resource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

fn features(raw: &mut Raw, version: i16) -> ApiVersionsResponse {
    let r: ApiVersionsResponse =
        raw.call(ApiKey::ApiVersions, version, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0, "ApiVersions v{version}");
    r
}

/// ApiVersions v3 and v4 report metadata.version 4.0-IV3 (25) as the one
/// level supported and finalized, and eligible leader replicas (KIP-966)
/// supported from 0 to 1 (v4 only: Kafka leaves ranges from 0 out of v3)
/// and finalized at 1, as on a new Kafka 4.1 cluster; the other features
/// are at 0, which Kafka leaves out of both lists. The epoch is the
/// metadata offset: it grows when the metadata changes.
#[test]
fn api_versions_carries_the_features() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let mut epochs = Vec::new();
    for version in [3, 4] {
        let r = features(&mut raw, version);
        let supported: Vec<_> = r
            .supported_features
            .iter()
            .map(|f| (f.name.as_str(), f.min_version, f.max_version))
            .collect();
        let expected: &[(&str, i16, i16)] = if version >= 4 {
            &[
                ("metadata.version", 25, 25),
                ("transaction.version", 0, 2),
                ("eligible.leader.replicas.version", 0, 1),
            ]
        } else {
            &[("metadata.version", 25, 25)]
        };
        assert_eq!(supported, expected, "v{version}");
        let finalized: Vec<_> = r
            .finalized_features
            .iter()
            .map(|f| (f.name.as_str(), f.min_version_level, f.max_version_level))
            .collect();
        assert_eq!(
            finalized,
            [
                ("metadata.version", 25, 25),
                ("transaction.version", 2, 2),
                ("eligible.leader.replicas.version", 1, 1)
            ],
            "v{version}"
        );
        assert!(r.finalized_features_epoch >= 0, "v{version}");
        assert!(!r.zk_migration_ready, "v{version}");
        epochs.push(r.finalized_features_epoch);
    }
    raw.topic_metadata("epoch-grows");
    let after = features(&mut raw, 3).finalized_features_epoch;
    assert!(
        after > epochs[1],
        "epoch {} before a topic was created, {after} after",
        epochs[1]
    );
}

fn update(feature: &str, level: i16, upgrade_type: i8) -> FeatureUpdateKey {
    FeatureUpdateKey::default()
        .with_feature(StrBytes::from_string(feature.to_owned()))
        .with_max_version_level(level)
        .with_upgrade_type(upgrade_type)
}

fn update_features(
    raw: &mut Raw,
    version: i16,
    updates: Vec<FeatureUpdateKey>,
    validate_only: bool,
) -> UpdateFeaturesResponse {
    let request = UpdateFeaturesRequest::default()
        .with_timeout_ms(10_000)
        .with_feature_updates(updates)
        .with_validate_only(validate_only);
    raw.call(ApiKey::UpdateFeatures, version, &request)
}

/// Asking for the finalized level succeeds and changes nothing; any other
/// level, or an unknown feature, fails the whole request with Kafka's
/// controller's error and message.
#[test]
fn update_features_accepts_only_the_finalized_levels() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    wait_for_producer_ids(&mut raw);
    let before = features(&mut raw, 4);

    // v0 has neither upgrade types nor validate_only.
    let cases = [
        (0, 1, false),
        (1, 2, false),
        (1, 2, true),
        (2, 2, false),
        (2, 3, true),
    ];
    for (version, upgrade_type, validate_only) in cases {
        let label = format!("v{version} validate_only={validate_only}");
        let r = update_features(
            &mut raw,
            version,
            vec![
                update("metadata.version", 25, 1),
                update("group.version", 0, upgrade_type),
            ],
            validate_only,
        );
        assert_eq!(r.error_code, 0, "{label}");
        assert_eq!(r.error_message, None, "{label}");
        // Before v2 each feature has a result, with the name of "no
        // error" as its message, as Kafka.
        let results: Vec<_> = r
            .results
            .iter()
            .map(|f| {
                (
                    f.feature.as_str(),
                    f.error_code,
                    f.error_message.as_ref().map(|m| m.as_str()),
                )
            })
            .collect();
        if version <= 1 {
            assert_eq!(
                results,
                [
                    ("metadata.version", 0, Some("NONE")),
                    ("group.version", 0, Some("NONE"))
                ],
                "{label}"
            );
        } else {
            assert!(results.is_empty(), "{label}");
        }
    }

    let refusals = [
        (
            vec![update("group.version", 1, 1)],
            "Invalid update version 1 for feature group.version. Local controller 1 does not support this feature.",
        ),
        (
            // One refused feature fails the others too.
            vec![
                update("metadata.version", 25, 1),
                update("transaction.version", 3, 1),
            ],
            "Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2",
        ),
        (
            vec![update("metadata.version", 27, 1)],
            "Invalid update version 27 for feature metadata.version. Local controller 1 only supports versions 25",
        ),
        (
            vec![update("metadata.version", 22, 2)],
            "Invalid update version 22 for feature metadata.version. Local controller 1 only supports versions 25",
        ),
        (
            vec![update("no.such.feature", 1, 1)],
            "Invalid update version 1 for feature no.such.feature. Local controller 1 does not support this feature.",
        ),
        (
            vec![update("no.such.feature", 0, 1)],
            "Invalid update version 0 for feature no.such.feature. Feature no.such.feature not found.",
        ),
        (
            vec![update("group.version", 0, 9)],
            "Invalid update version 0 for feature group.version. The controller does not support the given upgrade type.",
        ),
    ];
    for version in 1..=2 {
        for (updates, reason) in &refusals {
            let r = update_features(&mut raw, version, updates.clone(), false);
            assert_eq!(r.error_code, INVALID_UPDATE_VERSION, "v{version} {reason}");
            assert_eq!(
                r.error_message.as_ref().map(|m| m.as_str()),
                Some(format!("The update failed for all features since the following feature had an error: {reason}").as_str()),
                "v{version}"
            );
            assert!(r.results.is_empty(), "v{version} {reason}");
        }
    }

    let after = features(&mut raw, 4);
    assert_eq!(after.finalized_features, before.finalized_features);
    assert_eq!(
        after.finalized_features_epoch, before.finalized_features_epoch,
        "nothing was written"
    );
}

/// Waits until the broker holds its first block of producer ids: the last
/// metadata change a new broker makes by itself, which would move the
/// finalized features' epoch.
fn wait_for_producer_ids(raw: &mut Raw) {
    for _ in 0..200 {
        let init: InitProducerIdResponse = raw.call(
            ApiKey::InitProducerId,
            1,
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
        );
        if init.error_code == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no producer ids");
}

fn list_config_resources(raw: &mut Raw, version: i16, types: &[i8]) -> ListConfigResourcesResponse {
    let request = ListConfigResourcesRequest::default().with_resource_types(types.to_vec());
    raw.call(ApiKey::ListConfigResources, version, &request)
}

fn listed(r: &ListConfigResourcesResponse) -> Vec<(i8, String)> {
    r.config_resources
        .iter()
        .map(|c| (c.resource_type, c.resource_name.to_string()))
        .collect()
}

/// v0 lists client-metrics subscriptions (Weir has none); v1 lists the
/// brokers and every topic, in Kafka's order (brokers, then topics), and
/// refuses a type it cannot list.
#[test]
fn list_config_resources_lists_brokers_and_topics() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    raw.topic_metadata("listed-b");
    raw.topic_metadata("listed-a");
    let all: MetadataResponse = raw.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    );
    let topics: BTreeSet<String> = all
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    assert!(topics.contains("listed-a") && topics.contains("listed-b"));

    let r = list_config_resources(&mut raw, 0, &[]);
    assert_eq!(r.error_code, 0, "v0");
    assert!(r.config_resources.is_empty(), "v0: {:?}", listed(&r));

    let r = list_config_resources(&mut raw, 1, &[]);
    assert_eq!(r.error_code, 0, "v1, every type");
    let resources = listed(&r);
    assert_eq!(resources[0], (BROKER, "1".to_owned()), "{resources:?}");
    let listed_topics: BTreeSet<String> = resources[1..]
        .iter()
        .map(|(t, name)| {
            assert_eq!(*t, TOPIC, "{resources:?}");
            name.clone()
        })
        .collect();
    assert_eq!(listed_topics, topics);
    assert_eq!(listed_topics.len(), resources.len() - 1, "no topic twice");

    // The order of the types asked for changes nothing.
    let r = list_config_resources(&mut raw, 1, &[TOPIC, BROKER]);
    assert_eq!(listed(&r), resources);
    let r = list_config_resources(&mut raw, 1, &[BROKER]);
    assert_eq!(listed(&r), [(BROKER, "1".to_owned())]);
    let r = list_config_resources(&mut raw, 1, &[CLIENT_METRICS, GROUP]);
    assert_eq!(r.error_code, 0);
    assert!(r.config_resources.is_empty(), "{:?}", listed(&r));

    for types in [&[BROKER_LOGGER][..], &[TOPIC, 64], &[0]] {
        let r = list_config_resources(&mut raw, 1, types);
        assert_eq!(r.error_code, UNSUPPORTED_VERSION, "{types:?}");
        assert!(r.config_resources.is_empty(), "{types:?}");
    }
}

/// `eligible.leader.replicas.version` moves between 0 and 1 with Kafka's
/// upgrade types: a downgrade needs a downgrade type, an upgrade the
/// upgrade type, and `validate_only` changes nothing.
#[test]
fn eligible_leader_replicas_go_down_and_up_with_update_features() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let elr = "eligible.leader.replicas.version";
    let level = |raw: &mut Raw| {
        features(raw, 4)
            .finalized_features
            .iter()
            .find(|f| f.name.as_str() == elr)
            .map_or(0, |f| f.max_version_level)
    };
    assert_eq!(level(&mut raw), 1);
    let r = update_features(&mut raw, 1, vec![update(elr, 0, 1)], false);
    assert_eq!(r.error_code, INVALID_UPDATE_VERSION);
    assert_eq!(
        r.error_message.as_deref(),
        Some("The update failed for all features since the following feature had an error: Invalid update version 0 for feature eligible.leader.replicas.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
    );
    let r = update_features(&mut raw, 1, vec![update(elr, 0, 2)], true);
    assert_eq!((r.error_code, level(&mut raw)), (0, 1), "validate only");
    let r = update_features(&mut raw, 1, vec![update(elr, 0, 2)], false);
    assert_eq!((r.error_code, level(&mut raw)), (0, 0), "downgraded");
    // v0's allow_downgrade is no upgrade type: back up with it unset.
    let r = update_features(&mut raw, 0, vec![update(elr, 1, 1)], false);
    assert_eq!((r.error_code, level(&mut raw)), (0, 1), "upgraded");
}
