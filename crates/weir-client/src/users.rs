//! SCRAM users: DescribeUserScramCredentials and AlterUserScramCredentials
//! (KIP-554). A password never leaves the client: it is salted here, with
//! a fresh random salt, and the broker derives what it stores from that.

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use weir_auth::{SaltedPassword, ScramMechanism};

use crate::admin::with_subject;
use crate::error::{check, ClientError};
use crate::Client;

/// A user's SCRAM credentials, as DescribeUserScramCredentials tells them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramUser {
    pub name: String,
    /// One per mechanism the user has a credential for.
    pub credentials: Vec<ScramCredentialInfo>,
}

/// One of a user's credentials: never its keys, only how they were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScramCredentialInfo {
    pub mechanism: ScramMechanism,
    /// PBKDF2 iterations.
    pub iterations: i32,
}

/// A credential to set: `user`'s password for `mechanism`.
#[derive(Clone, PartialEq, Eq)]
pub struct NewScramCredential {
    pub user: String,
    pub mechanism: ScramMechanism,
    pub password: String,
    /// PBKDF2 iterations (Kafka accepts 4096 to 16384).
    pub iterations: u32,
}

impl std::fmt::Debug for NewScramCredential {
    /// Without the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewScramCredential")
            .field("user", &self.user)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// The SCRAM credentials of `users`, or of every user with one for
    /// `None`. A user the broker reports an error for (RESOURCE_NOT_FOUND:
    /// no credential) fails the call.
    pub async fn describe_scram_users(
        &mut self,
        users: Option<&[String]>,
    ) -> Result<Vec<ScramUser>, ClientError> {
        let request = DescribeUserScramCredentialsRequest::default().with_users(users.map(|u| {
            u.iter()
                .map(|name| UserName::default().with_name(StrBytes::from_string(name.clone())))
                .collect()
        }));
        let response: DescribeUserScramCredentialsResponse = self
            .call(ApiKey::DescribeUserScramCredentials, &request)
            .await?;
        check(response.error_code, text(response.error_message))?;
        let mut described = Vec::with_capacity(response.results.len());
        for result in response.results {
            let name = result.user.to_string();
            check(result.error_code, text(result.error_message))
                .map_err(|error| with_subject(error, "user", &name))?;
            let credentials = result
                .credential_infos
                .iter()
                .map(|info| {
                    let mechanism =
                        ScramMechanism::from_type_code(info.mechanism).ok_or_else(|| {
                            ClientError::Protocol {
                                addr: self.addr().to_owned(),
                                reason: format!(
                                    "unknown SCRAM mechanism {} for user {name:?}",
                                    info.mechanism
                                ),
                            }
                        })?;
                    Ok(ScramCredentialInfo {
                        mechanism,
                        iterations: info.iterations,
                    })
                })
                .collect::<Result<_, ClientError>>()?;
            described.push(ScramUser { name, credentials });
        }
        Ok(described)
    }

    /// Deletes credentials (user, mechanism) and sets others, salting each
    /// password here: one outcome per user named, as the broker reports
    /// them. `Err` only when the request failed as a whole.
    pub async fn alter_scram_users(
        &mut self,
        deletions: &[(String, ScramMechanism)],
        upsertions: &[NewScramCredential],
    ) -> Result<Vec<(String, Result<(), ClientError>)>, ClientError> {
        // Salting costs as many hashes as iterations: refuse here what every
        // broker refuses rather than spend them.
        if let Some(u) = upsertions
            .iter()
            .find(|u| u.iterations > u.mechanism.max_iterations())
        {
            return Err(ClientError::InvalidArgument(format!(
                "{} iterations for user {:?}: {} allows at most {}",
                u.iterations,
                u.user,
                u.mechanism,
                u.mechanism.max_iterations()
            )));
        }
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(
                deletions
                    .iter()
                    .map(|(user, mechanism)| {
                        ScramCredentialDeletion::default()
                            .with_name(StrBytes::from_string(user.clone()))
                            .with_mechanism(mechanism.type_code())
                    })
                    .collect(),
            )
            .with_upsertions(
                upsertions
                    .iter()
                    .map(|u| {
                        let salted = SaltedPassword::new(u.mechanism, &u.password, u.iterations);
                        ScramCredentialUpsertion::default()
                            .with_name(StrBytes::from_string(u.user.clone()))
                            .with_mechanism(u.mechanism.type_code())
                            .with_iterations(u.iterations as i32)
                            .with_salt(Bytes::from(salted.salt))
                            .with_salted_password(Bytes::from(salted.salted_password))
                    })
                    .collect(),
            );
        let response: AlterUserScramCredentialsResponse = self
            .call(ApiKey::AlterUserScramCredentials, &request)
            .await?;
        Ok(response
            .results
            .into_iter()
            .map(|r| {
                let outcome = check(r.error_code, text(r.error_message));
                (r.user.to_string(), outcome)
            })
            .collect())
    }
}

fn text(s: Option<StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}
