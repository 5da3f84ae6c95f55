//! The cluster's feature levels (KIP-584): what ApiVersions reports as
//! supported and finalized, and what UpdateFeatures checks a change against.
//!
//! Weir implements exactly one level of each feature, so every node
//! supports that level alone and the cluster is finalized at it. The levels
//! are therefore a property of the code, the same on every node, and
//! nothing needs storing while no feature can change.

/// `metadata.version`: 4.0-IV3. A metadata version fixes the versions
/// brokers speak to each other: Fetch 17 from 3.9-IV0 (21) until 4.1-IV1
/// (27) brings Fetch 18, and ListOffsets 10 from 4.0-IV3 (25) until
/// 4.2-IV1 (29) brings ListOffsets 11. Weir serves Fetch up to 17 and
/// ListOffsets up to 10, so 25 or 26; 4.1-IV0 (26) only turns on eligible
/// leader replicas by default, which Weir does not have.
pub(crate) const METADATA_VERSION: &str = "metadata.version";
const METADATA_VERSION_LEVEL: i16 = 25;

/// One feature and the single level Weir implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Feature {
    pub(crate) name: &'static str,
    pub(crate) level: i16,
}

/// Every feature a Kafka 4.x broker knows, at Weir's level.
pub(crate) const FEATURES: &[Feature] = &[
    Feature {
        name: METADATA_VERSION,
        level: METADATA_VERSION_LEVEL,
    },
    // 1 is KIP-848's consumer group protocol (ConsumerGroupHeartbeat),
    // which Weir does not serve.
    Feature {
        name: "group.version",
        level: 0,
    },
    // 1 writes `__transaction_state` values in their flexible version 1,
    // 2 is KIP-890's epoch bump per transaction; Weir's coordinator writes
    // version 0 values.
    Feature {
        name: "transaction.version",
        level: 0,
    },
    // 1 is KIP-853's dynamic controller quorum (AddRaftVoter and
    // RemoveRaftVoter); Weir's quorum is fixed by `--controllers`.
    Feature {
        name: "kraft.version",
        level: 0,
    },
    // 1 is KIP-966's eligible leader replicas.
    Feature {
        name: "eligible.leader.replicas.version",
        level: 0,
    },
    // KIP-932's share groups.
    Feature {
        name: "share.version",
        level: 0,
    },
    // KIP-1071's streams groups.
    Feature {
        name: "streams.version",
        level: 0,
    },
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
        .map(|f| (f.name, f.level, f.level))
}

/// The cluster's finalized levels, `(name, level)`. As Kafka, a feature
/// finalized at level 0 (off) is left out.
pub(crate) fn finalized() -> impl Iterator<Item = (&'static str, i16)> {
    FEATURES
        .iter()
        .filter(|f| f.level > 0)
        .map(|f| (f.name, f.level))
}

/// UpdateFeatures' upgrade types.
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

/// Why the cluster cannot take `name` to `level` with `upgrade_type`, in
/// the words of Kafka's controller (its checks, in its order), or `None`
/// if it can: only the level it is at, which changes nothing.
/// `controller_id` is the controller that answers.
pub(crate) fn refuse_update(
    name: &str,
    level: i16,
    upgrade_type: i8,
    controller_id: i32,
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
    let current = known.map_or(0, |f| f.level);
    if level != current {
        return refuse(if current == 0 {
            format!("Local controller {controller_id} does not support this feature.")
        } else {
            format!("Local controller {controller_id} only supports versions {current}")
        });
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
            [(METADATA_VERSION, 25, 25)]
        );
        assert_eq!(finalized().collect::<Vec<_>>(), [(METADATA_VERSION, 25)]);
        assert_eq!(FEATURES.len(), 7);
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
                refuse_update(name, level, upgrade_type, 7).as_deref(),
                expected,
                "{name} to {level} ({upgrade_type})"
            );
        }
    }
}
