//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and
//! brokers, validated and applied live; ListConfigResources, the resources
//! that have configs.
//!
//! Broker resources follow Kafka: the name "" is the cluster-wide default
//! of the dynamic broker configs, a broker id that broker's own; a broker's
//! config in force is its own dynamic value, else the cluster-wide one,
//! else its static value (flags, `WEIR_*`, weir.toml), else the default.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ListConfigResourcesRequest,
    ListConfigResourcesResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::acl::CLUSTER_RESOURCE_NAME;
use weir_meta::topic_config::{self, ConfigType};
use weir_meta::{AclOperation, ResourceType};

use super::admin::{failure, Failure};
use super::RequestContext;
use crate::broker::Broker;
use crate::config::topic::{self, ConfigSource};
use crate::config::{self, BrokerConfig, BrokerConfigDef, STARTUP_CONFIGS};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

/// One described config.
struct Described<'a> {
    name: &'a str,
    /// `None`: null, as Kafka shows a config without a value.
    value: Option<String>,
    source: ConfigSource,
    read_only: bool,
    config_type: ConfigType,
    doc: &'a str,
    /// (name, value, source) by precedence, the first the value in force.
    /// A null value is a null default (Kafka lists those too).
    synonyms: Vec<(&'a str, Option<String>, ConfigSource)>,
}

/// Whether the principal may not do `operation` on a config resource, as
/// Kafka checks it: on the cluster for the broker-wide types, on the topic
/// or group for theirs. The error to answer it with; `None` when allowed,
/// or for a type Kafka has no check for (refused further on).
fn config_denial(
    broker: &Broker,
    ctx: &RequestContext,
    operation: AclOperation,
    resource_type: i8,
    name: &str,
) -> Option<ResponseError> {
    let (acl_type, acl_name, error) = match resource_type {
        BROKER | BROKER_LOGGER | CLIENT_METRICS => (
            ResourceType::Cluster,
            CLUSTER_RESOURCE_NAME,
            ResponseError::ClusterAuthorizationFailed,
        ),
        TOPIC => (
            ResourceType::Topic,
            name,
            ResponseError::TopicAuthorizationFailed,
        ),
        GROUP => (
            ResourceType::Group,
            name,
            ResponseError::GroupAuthorizationFailed,
        ),
        _ => return None,
    };
    (!ctx.authorized(broker, operation, acl_type, acl_name)).then_some(error)
}

/// Kafka's message for an authorization error, which it sends along.
fn denial_message(error: ResponseError) -> &'static str {
    match error {
        ResponseError::ClusterAuthorizationFailed => "Cluster authorization failed.",
        ResponseError::TopicAuthorizationFailed => "Topic authorization failed.",
        ResponseError::GroupAuthorizationFailed => "Group authorization failed.",
        _ => "",
    }
}

pub(super) fn describe_configs(
    broker: &Broker,
    ctx: &RequestContext,
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
            let entry = |c: Described| {
                // A secret is never told, as Kafka describes it: null.
                let sensitive = c.config_type == ConfigType::Password;
                let shown = |value: String| (!sensitive).then(|| StrBytes::from_string(value));
                let synonyms = if request.include_synonyms {
                    c.synonyms
                        .iter()
                        .map(|(name, value, source)| {
                            DescribeConfigsSynonym::default()
                                .with_name(StrBytes::from_string((*name).to_owned()))
                                .with_value(value.clone().and_then(shown))
                                .with_source(*source as i8)
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                DescribeConfigsResourceResult::default()
                    .with_name(StrBytes::from_string(c.name.to_owned()))
                    .with_value(c.value.and_then(shown))
                    .with_is_sensitive(sensitive)
                    .with_config_source(c.source as i8)
                    .with_read_only(c.read_only)
                    .with_config_type(c.config_type.describe_configs_type())
                    .with_synonyms(synonyms)
                    .with_documentation(
                        request
                            .include_documentation
                            .then(|| StrBytes::from_string(c.doc.to_owned())),
                    )
            };
            let error = |code: ResponseError, message: String| {
                result
                    .clone()
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message)))
            };
            if let Some(denied) = config_denial(
                broker,
                ctx,
                AclOperation::DescribeConfigs,
                resource.resource_type,
                &name,
            ) {
                return error(denied, denial_message(denied).to_owned());
            }
            match resource.resource_type {
                TOPIC => {
                    let Some(overrides) =
                        broker.with_image(|image| image.topic(&name).map(|t| t.configs.clone()))
                    else {
                        return error(
                            ResponseError::UnknownTopicOrPartition,
                            format!("Topic '{name}' does not exist."),
                        );
                    };
                    let configs = topic::effective(&broker.config(), &overrides)
                        .into_iter()
                        .filter(|c| wanted(c.def.name))
                        .map(|c| {
                            entry(Described {
                                name: c.def.name,
                                value: Some(c.value.clone()),
                                source: c.source,
                                read_only: false,
                                config_type: c.def.config_type,
                                doc: c.def.doc,
                                synonyms: c.synonyms.clone(),
                            })
                        })
                        .collect();
                    result.with_configs(configs)
                }
                // The cluster-wide default: only the dynamic configs set
                // there, as Kafka describes it.
                BROKER if name.is_empty() => {
                    let defaults = broker.with_image(|image| image.broker_configs(None).clone());
                    let configs = defaults
                        .iter()
                        .filter(|(config, _)| wanted(config))
                        .map(|(config, value)| {
                            let def = config::lookup(config);
                            let source = ConfigSource::DynamicDefaultBrokerConfig;
                            entry(Described {
                                name: config,
                                value: Some(value.clone()),
                                source,
                                read_only: false,
                                config_type: def.map_or(ConfigType::String, |d| d.config_type),
                                doc: def.map_or("", |d| d.doc),
                                synonyms: vec![(config, Some(value.clone()), source)],
                            })
                        })
                        .collect();
                    result.with_configs(configs)
                }
                BROKER if name == broker.node_id().to_string() => {
                    let config = broker.config();
                    let mut configs: Vec<_> = config::settable()
                        .filter(|def| wanted(def.name))
                        .map(|def| {
                            entry(Described {
                                name: def.name,
                                value: config.values.get(def.name).cloned(),
                                source: config.source(def.name),
                                read_only: !def.dynamic,
                                config_type: def.config_type,
                                doc: def.doc,
                                synonyms: config.synonyms(def.name),
                            })
                        })
                        .collect();
                    configs.extend(
                        STARTUP_CONFIGS
                            .iter()
                            .filter(|def| wanted(def.name))
                            .map(|def| entry(startup_entry(&config, def))),
                    );
                    result.with_configs(configs)
                }
                // A group's configs, set or the broker's (Kafka describes
                // any group id, known or not).
                GROUP => {
                    let config = broker.config();
                    let set = broker.with_image(|image| image.group_configs(&name).clone());
                    let configs = crate::config::groups::GROUP_CONFIGS
                        .iter()
                        .filter(|def| wanted(def.name))
                        .map(|def| {
                            use crate::config::groups::GroupDefault;
                            let default = match def.default {
                                GroupDefault::Broker(name) => config.values[name].clone(),
                                GroupDefault::Value(value) => value.to_owned(),
                            };
                            let mut synonyms = Vec::new();
                            let (value, source) = match set.get(def.name) {
                                Some(value) => {
                                    synonyms.push((
                                        def.name,
                                        Some(value.clone()),
                                        ConfigSource::GroupConfig,
                                    ));
                                    (value.clone(), ConfigSource::GroupConfig)
                                }
                                None => (default.clone(), ConfigSource::DefaultConfig),
                            };
                            if let GroupDefault::Broker(name) = def.default {
                                synonyms.push((name, Some(default), config.source(name)));
                            }
                            entry(Described {
                                name: def.name,
                                value: Some(value),
                                source,
                                read_only: false,
                                config_type: def.config_type,
                                doc: def.doc,
                                synonyms,
                            })
                        })
                        .collect();
                    result.with_configs(configs)
                }
                // Clients send a broker's DescribeConfigs to that broker,
                // which alone knows its static configs.
                BROKER => error(
                    ResponseError::InvalidRequest,
                    format!(
                        "Unexpected broker id, expected {} or empty string, but received {name}",
                        broker.node_id()
                    ),
                ),
                other => error(
                    ResponseError::InvalidRequest,
                    format!("Unsupported resource type {other}"),
                ),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// A startup config as Kafka describes a static one: read-only, its
/// synonyms the value given then the default (for `log.dirs`, `log.dir`'s).
fn startup_entry<'a>(config: &BrokerConfig, def: &'a BrokerConfigDef) -> Described<'a> {
    let (value, source) = config.startup.value(def.name).expect("a startup config");
    let mut synonyms = Vec::new();
    if let (Some(value), ConfigSource::StaticBrokerConfig) = (&value, source) {
        synonyms.push((def.name, Some(value.clone()), source));
    }
    let fallback = match def.name {
        "log.dirs" => config::lookup("log.dir").unwrap_or(def),
        _ => def,
    };
    if let Some(default) = fallback.default.filter(|d| !d.is_empty()) {
        synonyms.push((
            fallback.name,
            Some(default.to_owned()),
            ConfigSource::DefaultConfig,
        ));
    }
    Described {
        name: def.name,
        value,
        source,
        read_only: true,
        config_type: def.config_type,
        doc: def.doc,
        synonyms,
    }
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

/// The broker resource `name` names: `None` for the cluster-wide default
/// (""), else a broker registered in the cluster.
fn broker_resource(broker: &Broker, name: &str) -> Result<Option<i32>, Failure> {
    if name.is_empty() {
        return Ok(None);
    }
    let invalid = |message: String| (ResponseError::InvalidRequest, message);
    let id: i32 = name
        .parse()
        .map_err(|_| invalid(format!("Node id must be an integer, but it is: {name}")))?;
    if id < 0 {
        return Err(invalid("Invalid negative broker ID.".to_owned()));
    }
    if !broker.with_image(|image| image.broker(id).is_some()) {
        return Err(invalid(format!(
            "Unexpected broker id {id}: no broker with this id is registered in the cluster"
        )));
    }
    Ok(Some(id))
}

/// Configs to set and to delete on a resource.
type Changes = (BTreeMap<String, String>, Vec<String>);

/// Alters one resource with the changes `plan` makes of its current
/// configs (a topic's overrides, or the dynamic configs of a broker or of
/// the cluster-wide default); the error code and message for its response.
async fn alter_resource(
    broker: &Broker,
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    plan: impl FnOnce(Resource, &BTreeMap<String, String>) -> Result<Changes, Failure>,
) -> (i16, Option<StrBytes>) {
    if let Some(denied) =
        config_denial(broker, ctx, AclOperation::AlterConfigs, resource_type, name)
    {
        return (
            denied.code(),
            Some(StrBytes::from_static_str(denial_message(denied))),
        );
    }
    let result = match resource_type {
        TOPIC => {
            match overrides_of(broker, name).and_then(|current| plan(Resource::Topic, &current)) {
                Ok((set, delete)) => broker
                    .alter_topic_configs(name, set, delete, validate_only)
                    .await
                    .map_err(failure),
                Err(failure) => Err(failure),
            }
        }
        BROKER => {
            let planned = broker_resource(broker, name).and_then(|target| {
                let current = broker.with_image(|image| image.broker_configs(target).clone());
                Ok((target, plan(Resource::Broker, &current)?))
            });
            match planned {
                Ok((target, (set, delete))) => broker
                    .alter_broker_configs(target, set, delete, validate_only)
                    .await
                    .map_err(failure),
                Err(failure) => Err(failure),
            }
        }
        GROUP if name.is_empty() => Err((
            ResponseError::InvalidRequest,
            "The group id must not be empty.".to_owned(),
        )),
        GROUP => {
            let current = broker.with_image(|image| image.group_configs(name).clone());
            match plan(Resource::Group, &current) {
                Ok((set, delete)) => broker
                    .alter_group_configs(name, set, delete, validate_only)
                    .await
                    .map_err(failure),
                Err(failure) => Err(failure),
            }
        }
        other => Err(unsupported_resource(other)),
    };
    match result {
        Ok(()) => (0, None),
        Err((code, message)) => (code.code(), Some(StrBytes::from_string(message))),
    }
}

/// What a change is made to.
#[derive(Debug, Clone, Copy)]
enum Resource {
    Topic,
    /// A broker, or the cluster-wide default.
    Broker,
    Group,
}

/// AlterConfigs: the given configs replace all of a resource's configs
/// (a topic's overrides, the dynamic configs of a broker resource).
pub(super) async fn alter_configs(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let (code, message) = alter_resource(
            &broker,
            ctx,
            resource.resource_type,
            resource.resource_name.as_str(),
            request.validate_only,
            |_, current| {
                let mut set = BTreeMap::new();
                for config in &resource.configs {
                    let Some(value) = &config.value else {
                        return Err((
                            ResponseError::InvalidRequest,
                            format!("Null value not supported for : {}", config.name.as_str()),
                        ));
                    };
                    if set
                        .insert(config.name.to_string(), value.to_string())
                        .is_some()
                    {
                        return Err((
                            ResponseError::InvalidRequest,
                            "Error due to duplicate config keys".to_owned(),
                        ));
                    }
                }
                let delete = current
                    .keys()
                    .filter(|name| !set.contains_key(*name))
                    .cloned()
                    .collect();
                Ok((set, delete))
            },
        )
        .await;
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// IncrementalAlterConfigs: SET, DELETE, and APPEND / SUBTRACT on list
/// configs, applied to a resource's current values.
pub(super) async fn incremental_alter_configs(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let changes = resource
            .configs
            .iter()
            .map(|c| (c.name.as_str(), c.config_operation, c.value.as_deref()))
            .collect::<Vec<_>>();
        let config = broker.config();
        let (code, message) = alter_resource(
            &broker,
            ctx,
            resource.resource_type,
            resource.resource_name.as_str(),
            request.validate_only,
            |target, current| {
                incremental_changes(&changes, |name| list_value(&config, target, current, name))
            },
        )
        .await;
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// For APPEND and SUBTRACT: the value the list config `name` has now on
/// `target` (set there, else inherited); `None` if it is not a list.
fn list_value(
    config: &BrokerConfig,
    target: Resource,
    current: &BTreeMap<String, String>,
    name: &str,
) -> Result<Option<String>, Failure> {
    let unknown = |kind: &str| {
        (
            ResponseError::InvalidConfig,
            format!("Unknown {kind} config name: {name}"),
        )
    };
    let (config_type, inherited) = match target {
        Resource::Topic => {
            let def = topic_config::lookup(name).ok_or_else(|| unknown("topic"))?;
            let inherited = topic::effective(config, current)
                .into_iter()
                .find(|c| c.def.name == name)
                .map(|c| c.value);
            (def.config_type, inherited)
        }
        Resource::Broker => {
            let def = config::lookup(name).ok_or_else(|| unknown("broker"))?;
            (def.config_type, config.values.get(name).cloned())
        }
        Resource::Group => {
            let def = crate::config::groups::lookup(name).ok_or_else(|| unknown("group"))?;
            (def.config_type, None)
        }
    };
    if config_type != ConfigType::List {
        return Ok(None);
    }
    Ok(Some(
        current.get(name).cloned().or(inherited).unwrap_or_default(),
    ))
}

/// The configs to set and delete for `(name, operation, value)` changes;
/// `list_value` gives a list config's current value (`None`: not a list).
fn incremental_changes(
    changes: &[(&str, i8, Option<&str>)],
    list_value: impl Fn(&str) -> Result<Option<String>, Failure>,
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
                let Some(now) = list_value(name)? else {
                    let verb = if operation == APPEND {
                        "append"
                    } else {
                        "subtract"
                    };
                    return Err(invalid(format!(
                        "Config value {verb} is not allowed for config key: {name}"
                    )));
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

/// The resource types ListConfigResources lists at `version`: v0 was
/// ListClientMetricsResources (KIP-714), v1 (KIP-1142) lists Kafka's types
/// but BROKER_LOGGER, as Weir has no logger configs to describe.
fn listable_types(version: i16) -> &'static [i8] {
    if version == 0 {
        &[CLIENT_METRICS]
    } else {
        &[TOPIC, BROKER, CLIENT_METRICS, GROUP]
    }
}

pub(super) fn list_config_resources(
    broker: &Broker,
    ctx: &RequestContext,
    request: ListConfigResourcesRequest,
) -> ListConfigResourcesResponse {
    // Listing config resources is describing the cluster's configs.
    if !ctx.authorized_on_cluster(broker, AclOperation::DescribeConfigs) {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let listable = listable_types(ctx.version);
    // As Kafka: no types is every type, and one it cannot list fails the
    // whole request.
    let wanted: &[i8] = if request.resource_types.is_empty() {
        listable
    } else {
        &request.resource_types
    };
    if wanted.iter().any(|t| !listable.contains(t)) {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let resource = |resource_type: i8, name: String| {
        ConfigResource::default()
            .with_resource_name(StrBytes::from_string(name))
            .with_resource_type(resource_type)
    };
    let mut resources = Vec::new();
    // Kafka's order. GROUP lists the groups that have configs;
    // CLIENT_METRICS the client-metrics subscriptions, of which Weir has
    // none.
    if wanted.contains(&GROUP) {
        broker.with_image(|image| {
            resources.extend(
                image
                    .groups_with_configs()
                    .map(|g| resource(GROUP, g.to_owned())),
            );
        });
    }
    if wanted.contains(&BROKER) {
        broker.with_image(|image| {
            resources.extend(image.brokers().map(|b| resource(BROKER, b.id.to_string())));
        });
    }
    if wanted.contains(&TOPIC) {
        broker.with_image(|image| {
            resources.extend(image.topics().map(|t| resource(TOPIC, t.name.clone())));
        });
    }
    ListConfigResourcesResponse::default().with_config_resources(resources)
}
