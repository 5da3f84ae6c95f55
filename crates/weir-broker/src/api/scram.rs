//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554):
//! the SCRAM users in the replicated metadata. A request carries a salted
//! password, never the password; the broker derives the stored and server
//! keys from it, and the metadata keeps only those.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_auth::{ScramCredential, ScramMechanism};
use weir_meta::{AclOperation, ScramError, ScramUpsertion};

use super::admin::{failure, Failure};
use super::RequestContext;
use crate::broker::Broker;

/// Kafka's message for CLUSTER_AUTHORIZATION_FAILED, which it sends along.
const CLUSTER_DENIED: &str = "Cluster authorization failed.";

pub(super) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if !ctx.authorized_on_cluster(broker, AclOperation::Describe) {
        // As Kafka: the error at the top, and once per user asked for,
        // without the user's name.
        let denied = || {
            DescribeUserScramCredentialsResult::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str(CLUSTER_DENIED)))
        };
        let asked = request.users.as_ref().map_or(0, Vec::len);
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(CLUSTER_DENIED)))
            .with_results((0..asked).map(|_| denied()).collect());
    }
    let result = |user: &str, mechanisms: Option<Vec<(ScramMechanism, u32)>>| {
        let named = DescribeUserScramCredentialsResult::default()
            .with_user(StrBytes::from_string(user.to_owned()));
        match mechanisms {
            Some(mechanisms) => named.with_credential_infos(
                mechanisms
                    .into_iter()
                    .map(|(mechanism, iterations)| {
                        CredentialInfo::default()
                            .with_mechanism(mechanism.type_code())
                            .with_iterations(iterations as i32)
                    })
                    .collect(),
            ),
            None => named
                .with_error_code(ResponseError::ResourceNotFound.code())
                .with_error_message(Some(StrBytes::from_string(format!(
                    "Attempt to describe a user credential that does not exist: {user}"
                )))),
        }
    };
    let results = broker.with_image(|image| match request.users.as_deref() {
        // Null or empty: every user with a credential.
        None | Some([]) => image
            .scram_users()
            .map(|(user, mechanisms)| result(user, Some(mechanisms)))
            .collect(),
        Some(users) => {
            let mut seen = BTreeSet::new();
            let duplicated: BTreeSet<&str> = users
                .iter()
                .map(|u| u.name.as_str())
                .filter(|name| !seen.insert(*name))
                .collect();
            let mut answered = BTreeSet::new();
            users
                .iter()
                .map(|u| u.name.as_str())
                .filter(|name| answered.insert(*name))
                .map(|name| {
                    if duplicated.contains(name) {
                        DescribeUserScramCredentialsResult::default()
                            .with_user(StrBytes::from_string(name.to_owned()))
                            .with_error_code(ResponseError::DuplicateResource.code())
                            .with_error_message(Some(StrBytes::from_string(format!(
                                "Cannot describe SCRAM credentials for the same user twice in \
                                 a single request: {name}"
                            ))))
                    } else {
                        result(name, image.scram_user(name))
                    }
                })
                .collect()
        }
    });
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

pub(super) async fn alter(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    if !ctx.authorized_on_cluster(&broker, AclOperation::Alter) {
        // As Kafka: each user named, once and in order, fails.
        let users: BTreeSet<&str> = request
            .deletions
            .iter()
            .map(|d| d.name.as_str())
            .chain(request.upsertions.iter().map(|u| u.name.as_str()))
            .collect();
        let results = users
            .into_iter()
            .map(|user| {
                AlterUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(user.to_owned()))
                    .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_static_str(CLUSTER_DENIED)))
            })
            .collect();
        return AlterUserScramCredentialsResponse::default().with_results(results);
    }
    // Users named with a mechanism Weir does not know are answered here,
    // and left out of the command with the rest of their changes.
    let mut unknown_mechanism: Vec<String> = Vec::new();
    let mut note_unknown = |name: &str| {
        if !unknown_mechanism.iter().any(|u| u == name) {
            unknown_mechanism.push(name.to_owned());
        }
    };
    let mut deletions = Vec::new();
    for deletion in &request.deletions {
        match ScramMechanism::from_type_code(deletion.mechanism) {
            Some(mechanism) => deletions.push((deletion.name.to_string(), mechanism)),
            None => note_unknown(&deletion.name),
        }
    }
    let mut upsertions = Vec::new();
    for upsertion in &request.upsertions {
        let Some(mechanism) = ScramMechanism::from_type_code(upsertion.mechanism) else {
            note_unknown(&upsertion.name);
            continue;
        };
        upsertions.push(ScramUpsertion {
            user: upsertion.name.to_string(),
            mechanism,
            credential: ScramCredential::from_salted_password(
                mechanism,
                &upsertion.salted_password,
                upsertion.salt.to_vec(),
                u32::try_from(upsertion.iterations).unwrap_or(0),
            ),
        });
    }
    deletions.retain(|(user, _)| !unknown_mechanism.contains(user));
    upsertions.retain(|u| !unknown_mechanism.contains(&u.user));
    let mut outcomes: Vec<(String, Result<(), Failure>)> = unknown_mechanism
        .iter()
        .map(|user| {
            let error = ScramError::UnknownMechanism;
            (
                user.clone(),
                Err((ResponseError::UnsupportedSaslMechanism, error.to_string())),
            )
        })
        .collect();
    if !deletions.is_empty() || !upsertions.is_empty() {
        let users: Vec<String> = deletions
            .iter()
            .map(|(user, _)| user.clone())
            .chain(upsertions.iter().map(|u| u.user.clone()))
            .collect();
        match broker.alter_scram_credentials(deletions, upsertions).await {
            Ok(applied) => outcomes.extend(applied.into_iter().map(|(user, outcome)| {
                let outcome = outcome.map_err(|error| {
                    let code = ResponseError::try_from_code(error.kafka_error_code())
                        .unwrap_or(ResponseError::UnknownServerError);
                    (code, error.to_string())
                });
                (user, outcome)
            })),
            Err(error) => {
                let error = failure(error);
                let mut seen = BTreeSet::new();
                outcomes.extend(
                    users
                        .into_iter()
                        .filter(|user| seen.insert(user.clone()))
                        .map(|user| (user, Err(error.clone()))),
                );
            }
        }
    }
    let results = outcomes
        .into_iter()
        .map(|(user, outcome)| {
            let result =
                AlterUserScramCredentialsResult::default().with_user(StrBytes::from_string(user));
            match outcome {
                Ok(()) => result,
                Err((code, message)) => result
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}
