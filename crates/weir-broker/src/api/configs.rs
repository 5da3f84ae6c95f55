//! DescribeConfigs for topics and this broker; AlterConfigs and
//! IncrementalAlterConfigs for topics, validated and applied live.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use weir_meta::topic_config::{self, ConfigType};

use super::admin::{failure, Failure};
use super::RequestContext;
use crate::broker::Broker;
use crate::config::BROKER_CONFIGS;
use crate::topic_configs::{self, ConfigSource};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

pub(super) fn describe_configs(
    broker: &Broker,
    _ctx: &RequestContext,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let name = resource.resource_name.to_string();
            let wanted = |config: &str| {
                resource
                    .configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.iter().any(|k| k.as_str() == config))
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let entry =
                |name: &str, value: &str, source: ConfigSource, config_type: i8, doc: &str| {
                    DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_string(name.to_owned()))
                        .with_value(Some(StrBytes::from_string(value.to_owned())))
                        .with_config_source(source as i8)
                        .with_config_type(config_type)
                        .with_documentation(
                            request
                                .include_documentation
                                .then(|| StrBytes::from_string(doc.to_owned())),
                        )
                };
            match resource.resource_type {
                TOPIC => {
                    let Some(overrides) =
                        broker.with_image(|image| image.topic(&name).map(|t| t.configs.clone()))
                    else {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(StrBytes::from_string(format!(
                                "Topic '{name}' does not exist."
                            ))));
                    };
                    let configs = topic_configs::effective(broker.config(), &overrides)
                        .into_iter()
                        .filter(|c| wanted(c.def.name))
                        .map(|c| {
                            entry(
                                c.def.name,
                                &c.value,
                                c.source,
                                c.def.config_type.describe_configs_type(),
                                c.def.doc,
                            )
                        })
                        .collect();
                    result.with_configs(configs)
                }
                BROKER if name.is_empty() || name == broker.config().node_id.to_string() => {
                    let config = broker.config();
                    let configs = BROKER_CONFIGS
                        .iter()
                        .filter(|def| wanted(def.name))
                        .map(|def| {
                            let source = if config.overridden.iter().any(|o| o == def.name) {
                                ConfigSource::StaticBrokerConfig
                            } else {
                                ConfigSource::DefaultConfig
                            };
                            entry(def.name, &config.values[def.name], source, 0, def.doc)
                                .with_read_only(true)
                        })
                        .collect();
                    result.with_configs(configs)
                }
                BROKER => result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Broker id {name} is not this broker ({})",
                        broker.config().node_id
                    )))),
                other => result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Unsupported resource type {other}"
                    )))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Broker configs are fixed at start (flags, environment, weir.toml).
fn broker_configs_are_static() -> Failure {
    (
        ResponseError::InvalidRequest,
        "broker configs cannot be changed while the broker runs; set them with flags, \
         WEIR_* variables or weir.toml and restart"
            .to_owned(),
    )
}

fn unsupported_resource(resource_type: i8) -> Failure {
    (
        ResponseError::InvalidRequest,
        format!("resource type {resource_type} has no configs here"),
    )
}

/// The topic's current overrides, or UNKNOWN_TOPIC_OR_PARTITION.
fn overrides_of(broker: &Broker, topic: &str) -> Result<BTreeMap<String, String>, Failure> {
    broker
        .with_image(|image| image.topic(topic).map(|t| t.configs.clone()))
        .ok_or_else(|| {
            (
                ResponseError::UnknownTopicOrPartition,
                format!("topic {topic} does not exist"),
            )
        })
}

/// Overrides to set and to delete on a topic.
type Changes = (BTreeMap<String, String>, Vec<String>);

/// Alters one resource with the changes `plan` makes of its current
/// overrides; the error code and message for its response.
fn alter_resource(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    plan: impl FnOnce(&BTreeMap<String, String>) -> Result<Changes, Failure>,
) -> (i16, Option<StrBytes>) {
    let result = match resource_type {
        TOPIC => overrides_of(broker, name)
            .and_then(|current| plan(&current))
            .and_then(|(set, delete)| {
                broker
                    .alter_topic_configs(name, set, delete, validate_only)
                    .map_err(failure)
            }),
        BROKER => Err(broker_configs_are_static()),
        other => Err(unsupported_resource(other)),
    };
    match result {
        Ok(()) => (0, None),
        Err((code, message)) => (code.code(), Some(StrBytes::from_string(message))),
    }
}

/// AlterConfigs: the given configs replace all of a topic's overrides.
pub(super) fn alter_configs(
    broker: &Broker,
    _ctx: &RequestContext,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
    let responses = request
        .resources
        .into_iter()
        .map(|resource| {
            let (code, message) = alter_resource(
                broker,
                resource.resource_type,
                resource.resource_name.as_str(),
                request.validate_only,
                |current| {
                    let set: BTreeMap<String, String> = resource
                        .configs
                        .iter()
                        .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                        .collect();
                    let delete = current
                        .keys()
                        .filter(|name| !set.contains_key(*name))
                        .cloned()
                        .collect();
                    Ok((set, delete))
                },
            );
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// IncrementalAlterConfigs: SET, DELETE, and APPEND / SUBTRACT on list
/// configs, applied to a topic's current values.
pub(super) fn incremental_alter_configs(
    broker: &Broker,
    _ctx: &RequestContext,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
    let responses = request
        .resources
        .into_iter()
        .map(|resource| {
            let changes = resource
                .configs
                .iter()
                .map(|c| (c.name.as_str(), c.config_operation, c.value.as_deref()))
                .collect::<Vec<_>>();
            let (code, message) = alter_resource(
                broker,
                resource.resource_type,
                resource.resource_name.as_str(),
                request.validate_only,
                |current| incremental_changes(broker, current, &changes),
            );
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// The overrides to set and delete for `(name, operation, value)` changes.
fn incremental_changes(
    broker: &Broker,
    current: &BTreeMap<String, String>,
    changes: &[(&str, i8, Option<&str>)],
) -> Result<Changes, Failure> {
    let invalid = |message: String| (ResponseError::InvalidConfig, message);
    let mut set = BTreeMap::new();
    let mut delete = Vec::new();
    for (i, &(name, operation, value)) in changes.iter().enumerate() {
        if changes[..i].iter().any(|(other, _, _)| *other == name) {
            return Err((
                ResponseError::InvalidRequest,
                format!("Error due to duplicate config keys: {name}"),
            ));
        }
        match operation {
            SET => {
                let value = value.ok_or_else(|| invalid(format!("Null value for {name}")))?;
                set.insert(name.to_owned(), value.to_owned());
            }
            DELETE => delete.push(name.to_owned()),
            APPEND | SUBTRACT => {
                let def = topic_config::lookup(name)
                    .ok_or_else(|| invalid(format!("Unknown topic config name: {name}")))?;
                if def.config_type != ConfigType::List {
                    let verb = if operation == APPEND {
                        "append"
                    } else {
                        "subtract"
                    };
                    return Err(invalid(format!(
                        "Config value {verb} is not allowed for config key: {name}"
                    )));
                }
                let now = match current.get(name) {
                    Some(value) => value.clone(),
                    None => topic_configs::effective(broker.config(), current)
                        .into_iter()
                        .find(|c| c.def.name == name)
                        .map(|c| c.value)
                        .unwrap_or_default(),
                };
                let mut items: Vec<&str> = now.split(',').filter(|s| !s.is_empty()).collect();
                for item in value
                    .unwrap_or_default()
                    .split(',')
                    .filter(|s| !s.is_empty())
                {
                    if operation == APPEND && !items.contains(&item) {
                        items.push(item);
                    } else if operation == SUBTRACT {
                        items.retain(|existing| *existing != item);
                    }
                }
                set.insert(name.to_owned(), items.join(","));
            }
            other => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("unknown config operation {other} for {name}"),
                ))
            }
        }
    }
    Ok((set, delete))
}
