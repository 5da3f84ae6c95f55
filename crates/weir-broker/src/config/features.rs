//! The cluster's feature levels (KIP-584): what ApiVersions reports as
//! supported and finalized, and what UpdateFeatures checks a change against.
//!
//! Weir implements exactly one level of most features, so every node
//! supports that level alone and the cluster is finalized at it: a
//! property of the code, the same on every node. The exceptions are
//! `eligible.leader.replicas.version` (KIP-966), at 0 or 1, and
//! `transaction.version` (KIP-890), at 0 to 2: their levels are stored in
//! the metadata image, set to the highest when a cluster is created (as
//! Kafka 4.1 does for new clusters) and changed by UpdateFeatures.

/// `metadata.version`: 4.0-IV3. A metadata version fixes the versions
/// brokers speak to each other: Fetch 17 from 3.9-IV0 (21) until 4.1-IV1
/// (27) brings Fetch 18, and ListOffsets 10 from 4.0-IV3 (25) until
/// 4.2-IV1 (29) brings ListOffsets 11. Weir serves Fetch up to 17 and
/// ListOffsets up to 10, so 25 or 26; 4.1-IV0 (26) only turns on eligible
/// leader replicas by default, which Weir's new clusters get regardless
/// (their level is a feature of its own, below).
pub(crate) const METADATA_VERSION: &str = "metadata.version";
const METADATA_VERSION_LEVEL: i16 = 25;

/// One feature and the levels Weir implements, `min..=level`: a single
/// level unless `min` is lower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Feature {
    pub(crate) name: &'static str,
    pub(crate) min: i16,
    pub(crate) level: i16,
}

impl Feature {
    /// A feature finalized by the code at its only level.
    const fn fixed(name: &'static str, level: i16) -> Self {
        Feature {
            name,
            min: level,
            level,
        }
    }

    /// Kafka's words for the levels (`VersionRange.toString`).
    fn range(&self) -> String {
        if self.min == self.level {
            self.level.to_string()
        } else {
            format!("{}-{}", self.min, self.level)
        }
    }
}

/// `eligible.leader.replicas.version`, the one feature whose level the
/// metadata image holds.
pub(crate) const ELIGIBLE_LEADER_REPLICAS: &str = weir_meta::ELR_FEATURE;

/// `transaction.version`, stored in the metadata image.
pub(crate) const TRANSACTION_VERSION: &str = "transaction.version";

/// Every feature a Kafka 4.x broker knows, at Weir's level.
pub(crate) const FEATURES: &[Feature] = &[
    Feature::fixed(METADATA_VERSION, METADATA_VERSION_LEVEL),
    // 1 is KIP-848's consumer group protocol (ConsumerGroupHeartbeat),
    // which Weir does not serve.
    Feature::fixed("group.version", 0),
    // 1 writes `__transaction_state` values in their flexible version 1,
    // 2 is KIP-890's epoch bump per transaction (clients take it up from
    // the finalized level: Produce v12, EndTxn v5, TxnOffsetCommit v5).
    Feature {
        name: TRANSACTION_VERSION,
        min: 0,
        level: 2,
    },
    // 1 is KIP-853's dynamic controller quorum (AddRaftVoter and
    // RemoveRaftVoter); Weir's quorum is fixed by `--controllers`.
    Feature::fixed("kraft.version", 0),
    // KIP-966's eligible leader replicas: 1 on new clusters, 0 after a
    // downgrade (and in clusters created before Weir had them).
    Feature {
        name: ELIGIBLE_LEADER_REPLICAS,
        min: 0,
        level: 1,
    },
    // KIP-932's share groups.
    Feature::fixed("share.version", 0),
    // KIP-1071's streams groups.
    Feature::fixed("streams.version", 0),
];

/// The feature called `name`, if Kafka knows one.
pub(crate) fn feature(name: &str) -> Option<Feature> {
    FEATURES.iter().copied().find(|f| f.name == name)
}

/// The levels this node supports, `(name, min, max)`. As Kafka's brokers, a
/// feature supported only at level 0 (not at all) is left out.
pub(crate) fn supported() -> impl Iterator<Item = (&'static str, i16, i16)> {
    FEATURES
        .iter()
        .filter(|f| f.level > 0)
        .map(|f| (f.name, f.min, f.level))
}

/// The cluster's finalized levels, `(name, level)`, those in the image
/// taken from it. As Kafka, a feature finalized at level 0 (off) is left
/// out.
pub(crate) fn finalized(image: &weir_meta::MetadataImage) -> Vec<(&'static str, i16)> {
    FEATURES
        .iter()
        .map(|f| (f.name, current_level(f, image)))
        .filter(|(_, level)| *level > 0)
        .collect()
}

/// The level feature `f` is finalized at.
fn current_level(f: &Feature, image: &weir_meta::MetadataImage) -> i16 {
    if f.min == f.level {
        f.level
    } else {
        image.feature_level(f.name)
    }
}

/// The level `name` is finalized at now (0 for a feature Kafka does not
/// know).
pub(crate) fn level_of(name: &str, image: &weir_meta::MetadataImage) -> i16 {
    feature(name).map_or(0, |f| current_level(&f, image))
}

/// UpdateFeatures' upgrade types.
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

/// Why the cluster cannot take `name` from `current` to `level` with
/// `upgrade_type`, in the words of Kafka's controller
/// (`FeatureControlManager.updateFeature`: its checks, in its order), or
/// `None` if it can. `controller_id` is the controller that answers.
pub(crate) fn refuse_update(
    name: &str,
    level: i16,
    upgrade_type: i8,
    controller_id: i32,
    current: i16,
) -> Option<String> {
    let refuse = |reason: String| {
        Some(format!(
            "Invalid update version {level} for feature {name}. {reason}"
        ))
    };
    if ![UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE].contains(&upgrade_type) {
        return refuse("The controller does not support the given upgrade type.".into());
    }
    if level < 0 {
        return refuse("A feature version cannot be less than 0.".into());
    }
    let known = feature(name);
    // An unknown feature is one supported at no level but 0.
    let supported = known.unwrap_or(Feature::fixed("", 0));
    if !(supported.min..=supported.level).contains(&level) {
        return refuse(if supported.level == 0 {
            format!("Local controller {controller_id} does not support this feature.")
        } else {
            format!(
                "Local controller {controller_id} only supports versions {}",
                supported.range()
            )
        });
    }
    if level < current && upgrade_type == UPGRADE {
        return refuse(
            "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
                .into(),
        );
    }
    if level > current && upgrade_type != UPGRADE {
        return refuse("Can't downgrade to a newer version.".into());
    }
    if known.is_none() {
        return refuse(format!("Feature {name} not found."));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_and_finalized_leave_out_level_0() {
        assert_eq!(
            supported().collect::<Vec<_>>(),
            [
                (METADATA_VERSION, 25, 25),
                (TRANSACTION_VERSION, 0, 2),
                (ELIGIBLE_LEADER_REPLICAS, 0, 1)
            ]
        );
        let mut image = weir_meta::MetadataImage::new();
        assert_eq!(finalized(&image), [(METADATA_VERSION, 25)]);
        image
            .apply(&weir_meta::Command::SetFeatureLevel {
                name: ELIGIBLE_LEADER_REPLICAS.to_owned(),
                level: 1,
            })
            .unwrap();
        assert_eq!(
            finalized(&image),
            [(METADATA_VERSION, 25), (ELIGIBLE_LEADER_REPLICAS, 1)]
        );
        assert_eq!(FEATURES.len(), 7);
    }

    #[test]
    fn eligible_leader_replicas_go_between_0_and_1_with_kafkas_upgrade_types() {
        let elr = ELIGIBLE_LEADER_REPLICAS;
        let cases: &[(i16, i16, i8, Option<&str>)] = &[
            (1, 0, SAFE_DOWNGRADE, None),
            (1, 0, UNSAFE_DOWNGRADE, None),
            (0, 1, UPGRADE, None),
            (1, 1, UPGRADE, None),
            (
                1,
                0,
                UPGRADE,
                Some("Invalid update version 0 for feature eligible.leader.replicas.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."),
            ),
            (
                0,
                1,
                SAFE_DOWNGRADE,
                Some("Invalid update version 1 for feature eligible.leader.replicas.version. Can't downgrade to a newer version."),
            ),
            (
                1,
                2,
                UPGRADE,
                Some("Invalid update version 2 for feature eligible.leader.replicas.version. Local controller 7 only supports versions 0-1"),
            ),
        ];
        for &(current, level, upgrade_type, expected) in cases {
            assert_eq!(
                refuse_update(elr, level, upgrade_type, 7, current).as_deref(),
                expected,
                "{current} to {level} ({upgrade_type})"
            );
        }
    }

    #[test]
    fn only_the_current_level_is_accepted() {
        let cases: &[(&str, i16, i8, Option<&str>)] = &[
            ("metadata.version", 25, UPGRADE, None),
            ("metadata.version", 25, SAFE_DOWNGRADE, None),
            ("group.version", 0, UPGRADE, None),
            ("transaction.version", 0, UNSAFE_DOWNGRADE, None),
            (
                "group.version",
                1,
                UPGRADE,
                Some("Invalid update version 1 for feature group.version. Local controller 7 does not support this feature."),
            ),
            (
                "metadata.version",
                26,
                UPGRADE,
                Some("Invalid update version 26 for feature metadata.version. Local controller 7 only supports versions 25"),
            ),
            (
                "metadata.version",
                7,
                SAFE_DOWNGRADE,
                Some("Invalid update version 7 for feature metadata.version. Local controller 7 only supports versions 25"),
            ),
            (
                "no.such.feature",
                1,
                UPGRADE,
                Some("Invalid update version 1 for feature no.such.feature. Local controller 7 does not support this feature."),
            ),
            (
                "no.such.feature",
                0,
                UPGRADE,
                Some("Invalid update version 0 for feature no.such.feature. Feature no.such.feature not found."),
            ),
            (
                "group.version",
                -1,
                SAFE_DOWNGRADE,
                Some("Invalid update version -1 for feature group.version. A feature version cannot be less than 0."),
            ),
            (
                "group.version",
                0,
                0,
                Some("Invalid update version 0 for feature group.version. The controller does not support the given upgrade type."),
            ),
        ];
        for &(name, level, upgrade_type, expected) in cases {
            assert_eq!(
                refuse_update(
                    name,
                    level,
                    upgrade_type,
                    7,
                    feature(name).map_or(0, |f| f.level)
                )
                .as_deref(),
                expected,
                "{name} to {level} ({upgrade_type})"
            );
        }
    }
}
