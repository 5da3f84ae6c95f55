//! DescribeClientQuotas and AlterClientQuotas: the quotas of users and
//! client ids, kept in the cluster metadata, with Kafka's matching rules
//! and errors.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::messages::alter_client_quotas_request::EntryData as AlterEntry;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AlteredEntity, EntryData as AlteredEntry,
};
use kafka_protocol::messages::describe_client_quotas_response::{
    EntityData as DescribedEntity, EntryData as DescribedEntry, ValueData,
};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::{AclOperation, EntityName, QuotaAlteration, QuotaEntity, QuotaValue};

use super::admin::{failure, Failure};
use super::RequestContext;
use crate::broker::Broker;
use crate::quotas::client::QuotaKind;

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// Kafka's message for CLUSTER_AUTHORIZATION_FAILED, which it sends along.
const CLUSTER_DENIED: &str = "Cluster authorization failed.";

pub(super) fn describe_client_quotas(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    // Quotas are configs of the cluster.
    if !ctx.authorized_on_cluster(broker, AclOperation::DescribeConfigs) {
        return DescribeClientQuotasResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(CLUSTER_DENIED)))
            .with_entries(None);
    }
    let filter = match Filter::parse(&request) {
        Ok(filter) => filter,
        Err((code, message)) => {
            return DescribeClientQuotasResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message)))
                .with_entries(None)
        }
    };
    let entries = broker.with_image(|image| {
        image
            .client_quotas()
            .iter()
            .filter(|(entity, _)| filter.matches(entity))
            .map(|(entity, values)| {
                DescribedEntry::default()
                    .with_entity(
                        parts(entity)
                            .map(|(kind, name)| {
                                DescribedEntity::default()
                                    .with_entity_type(StrBytes::from_static_str(kind))
                                    .with_entity_name(name.as_nullable().map(str_bytes))
                            })
                            .collect(),
                    )
                    .with_values(
                        values
                            .iter()
                            .map(|(key, value)| {
                                ValueData::default()
                                    .with_key(str_bytes(key))
                                    .with_value(value.0)
                            })
                            .collect(),
                    )
            })
            .collect()
    });
    DescribeClientQuotasResponse::default().with_entries(Some(entries))
}

/// A DescribeClientQuotas filter: names each entity type must have
/// (`None` for the default), and types it must merely have.
struct Filter {
    exact: BTreeMap<String, Option<String>>,
    specified: BTreeSet<String>,
    strict: bool,
}

impl Filter {
    fn parse(request: &DescribeClientQuotasRequest) -> Result<Filter, Failure> {
        let invalid = |message: String| Err((ResponseError::InvalidRequest, message));
        let mut filter = Filter {
            exact: BTreeMap::new(),
            specified: BTreeSet::new(),
            strict: request.strict,
        };
        for component in &request.components {
            let kind = component.entity_type.as_str();
            let name = component._match.as_ref().map(|m| m.to_string());
            if kind.is_empty() {
                return invalid("Invalid empty entity type.".into());
            }
            if filter.exact.contains_key(kind) || filter.specified.contains(kind) {
                return invalid(format!(
                    "Entity type {kind} cannot appear more than once in the filter."
                ));
            }
            if ![USER, CLIENT_ID, IP].contains(&kind) {
                return Err((
                    ResponseError::UnsupportedVersion,
                    format!("Unsupported entity type {kind}"),
                ));
            }
            match (component.match_type, name) {
                (MATCH_EXACT, None) => {
                    return invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                    )
                }
                (MATCH_EXACT, name) => {
                    filter.exact.insert(kind.to_owned(), name);
                }
                (MATCH_DEFAULT, None) => {
                    filter.exact.insert(kind.to_owned(), None);
                }
                (MATCH_DEFAULT, Some(_)) => {
                    return invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                            .into(),
                    )
                }
                (MATCH_SPECIFIED, None) => {
                    filter.specified.insert(kind.to_owned());
                }
                (MATCH_SPECIFIED, Some(_)) => return invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .into(),
                ),
                (other, _) => return invalid(format!("Unknown match type {other}")),
            }
        }
        let names = |kind: &str| filter.exact.contains_key(kind) || filter.specified.contains(kind);
        if names(IP) && (names(USER) || names(CLIENT_ID)) {
            return invalid(
                "Invalid entity filter component combination. IP filter component should not \
                 be used with user or clientId filter component."
                    .into(),
            );
        }
        Ok(filter)
    }

    fn matches(&self, entity: &QuotaEntity) -> bool {
        let has: BTreeMap<&str, &EntityName> = parts(entity).collect();
        if self.strict && has.len() != self.exact.len() + self.specified.len() {
            return false;
        }
        self.exact.iter().all(|(kind, name)| {
            has.get(kind.as_str())
                .is_some_and(|n| n.as_nullable() == name.as_deref())
        }) && self
            .specified
            .iter()
            .all(|kind| has.contains_key(kind.as_str()))
    }
}

pub(super) async fn alter_client_quotas(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    // As Kafka: without AlterConfigs on the cluster every entry fails, and
    // nothing is checked or changed.
    if !ctx.authorized_on_cluster(&broker, AclOperation::AlterConfigs) {
        let denied = (
            ResponseError::ClusterAuthorizationFailed,
            CLUSTER_DENIED.to_owned(),
        );
        let results = request.entries.iter().map(|_| Err(denied.clone()));
        return altered(&request, results.collect());
    }
    let mut results: Vec<Result<(), Failure>> = Vec::with_capacity(request.entries.len());
    let mut alterations = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in &request.entries {
        let checked = check_entry(entry).and_then(|alteration| {
            if seen.insert(alteration.entity.clone()) {
                Ok(alteration)
            } else {
                let entity = kafka_entity(entry);
                Err((
                    ResponseError::InvalidRequest,
                    format!("Ignoring duplicate entity {entity}"),
                ))
            }
        });
        results.push(checked.map(|alteration| alterations.push(alteration)));
    }
    if !alterations.is_empty() {
        if let Err(error) = broker
            .alter_client_quotas(alterations, request.validate_only)
            .await
        {
            let error = failure(error);
            for result in results.iter_mut().filter(|r| r.is_ok()) {
                *result = Err(error.clone());
            }
        }
    }
    altered(&request, results)
}

/// The response: each entry of the request with its outcome.
fn altered(
    request: &AlterClientQuotasRequest,
    results: Vec<Result<(), Failure>>,
) -> AlterClientQuotasResponse {
    let entries = request
        .entries
        .iter()
        .zip(results)
        .map(|(entry, result)| {
            let (code, message) = match result {
                Ok(()) => (0, None),
                Err((code, message)) => (code.code(), Some(StrBytes::from_string(message))),
            };
            AlteredEntry::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_entity(
                    entry
                        .entity
                        .iter()
                        .map(|e| {
                            AlteredEntity::default()
                                .with_entity_type(e.entity_type.clone())
                                .with_entity_name(e.entity_name.clone())
                        })
                        .collect(),
                )
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// One entity's change, checked as Kafka's controller checks it.
fn check_entry(entry: &AlterEntry) -> Result<QuotaAlteration, Failure> {
    let invalid = |message: String| Err((ResponseError::InvalidRequest, message));
    let entity_text = kafka_entity(entry);
    let mut keys = BTreeSet::new();
    for op in &entry.ops {
        if !keys.insert(op.key.as_str()) {
            return invalid(format!(
                "Duplicate quota key {} not updating quota for this entity {entity_text}",
                op.key.as_str()
            ));
        }
    }
    if entry.entity.is_empty() {
        return invalid("Invalid empty client quota entity".into());
    }
    let mut entity = QuotaEntity {
        user: None,
        client_id: None,
    };
    let mut kinds = BTreeSet::new();
    for part in &entry.entity {
        let kind = part.entity_type.as_str();
        if !kinds.insert(kind) {
            return invalid(format!(
                "Invalid client quota entity, duplicate entity entry {kind}"
            ));
        }
        let name = EntityName::from_nullable(part.entity_name.as_deref());
        match kind {
            USER => entity.user = Some(name),
            CLIENT_ID => entity.client_id = Some(name),
            // Kafka's connection-rate quotas per IP address.
            IP => {
                return invalid(
                    "Quotas of ip entities (connection_creation_rate) are not supported by this \
                     broker"
                        .into(),
                )
            }
            other => return invalid(format!("Unhandled client quota entity type: {other}")),
        }
        if part.entity_name.as_ref().is_some_and(|n| n.is_empty()) {
            return invalid(format!("Empty {kind} not supported"));
        }
    }
    let mut set = BTreeMap::new();
    let mut remove = Vec::new();
    for op in &entry.ops {
        let key = op.key.as_str();
        if op.remove {
            remove.push(key.to_owned());
            continue;
        }
        let Some(kind) = QuotaKind::from_key(key) else {
            return invalid(if key == "controller_mutation_rate" {
                format!("Quota {key} is not supported by this broker")
            } else {
                format!("Invalid configuration key {key}")
            });
        };
        let value = op.value;
        if value <= 0.0 || value.is_nan() {
            return invalid(format!("Quota {key} must be greater than 0"));
        }
        if kind.integral() {
            if value > i64::MAX as f64 {
                return invalid(format!("Proposed value for {key} is too large for a LONG."));
            }
            if (value % 1.0).abs() > 1e-6 {
                return invalid(format!("{key} cannot be a fractional value."));
            }
        }
        set.insert(key.to_owned(), QuotaValue(value));
    }
    Ok(QuotaAlteration {
        entity,
        set,
        remove,
    })
}

/// The entity as Kafka's messages print it.
fn kafka_entity(entry: &AlterEntry) -> String {
    let parts: Vec<String> = entry
        .entity
        .iter()
        .map(|e| {
            let name = e.entity_name.as_deref().map_or("null", |n| n);
            format!("{}={name}", e.entity_type.as_str())
        })
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", parts.join(", "))
}

/// The entity's types and names, user first.
fn parts(entity: &QuotaEntity) -> impl Iterator<Item = (&'static str, &EntityName)> {
    [(USER, &entity.user), (CLIENT_ID, &entity.client_id)]
        .into_iter()
        .filter_map(|(kind, name)| Some((kind, name.as_ref()?)))
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}
