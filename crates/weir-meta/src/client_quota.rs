//! Client quotas (Kafka's `ClientQuotaRecord`): limits set per user,
//! client id, or both, each name either given or the default of its type.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// One level of a quota entity: a given name, or the default that every
/// name without a quota of its own takes (Kafka's `<default>`, sent as a
/// null name).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntityName {
    /// The default of the entity type.
    Default,
    /// One user or client id.
    Named(String),
}

impl EntityName {
    /// From the protocol's nullable name (null = the default).
    pub fn from_nullable(name: Option<&str>) -> Self {
        name.map_or(Self::Default, |n| Self::Named(n.to_owned()))
    }

    /// The protocol's nullable name.
    pub fn as_nullable(&self) -> Option<&str> {
        match self {
            Self::Default => None,
            Self::Named(name) => Some(name),
        }
    }
}

/// Whom a quota applies to: a user, a client id, or a client id of a user.
/// At least one of the two is set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaEntity {
    /// Kafka's entity type `user`.
    pub user: Option<EntityName>,
    /// Kafka's entity type `client-id`.
    pub client_id: Option<EntityName>,
}

impl fmt::Display for QuotaEntity {
    /// As Kafka prints an entity in its messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = [("user", &self.user), ("client-id", &self.client_id)]
            .into_iter()
            .filter_map(|(kind, name)| {
                let name = name.as_ref()?.as_nullable().unwrap_or("null");
                Some(format!("{kind}={name}"))
            })
            .collect();
        write!(f, "ClientQuotaEntity(entries={{{}}})", parts.join(", "))
    }
}

/// A quota's value. Kafka's quota values are doubles; this wrapper
/// compares by bit pattern so that images and commands stay `Eq`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// The quotas of every entity that has one; an entity is dropped once its
/// last quota is removed.
pub type ClientQuotas = BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>;

/// One entity's change within [`crate::Command::AlterClientQuotas`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct QuotaAlteration {
    /// The entity changed.
    pub entity: QuotaEntity,
    /// Quotas to set (replacing any previous value).
    pub set: BTreeMap<String, QuotaValue>,
    /// Quotas to remove.
    pub remove: Vec<String>,
}

/// Serializes [`ClientQuotas`] as a list of pairs: JSON object keys must be
/// strings.
pub(crate) mod as_pairs {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        quotas: &ClientQuotas,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(quotas.iter())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<ClientQuotas, D::Error> {
        let pairs: Vec<(QuotaEntity, BTreeMap<String, QuotaValue>)> =
            Deserialize::deserialize(deserializer)?;
        Ok(pairs.into_iter().collect())
    }
}
