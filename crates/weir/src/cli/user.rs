//! `weir user create|delete|list`: SCRAM users, as Kafka's
//! `kafka-configs.sh --entity-type users --alter --add-config
//! 'SCRAM-SHA-512=[password=...]'` manages them. The password is salted
//! here; the broker never sees it.

use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use weir_auth::ScramMechanism;
use weir_client::{Client, ClientError, NewScramCredential, ResponseError};

use super::{block_on, table, Connection};

/// Kafka's default iteration count for a SCRAM credential.
const DEFAULT_ITERATIONS: u32 = 4096;

#[derive(Args, Debug)]
pub(crate) struct UserArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: UserCommand,
}

#[derive(Subcommand, Debug)]
enum UserCommand {
    /// Create a SCRAM user, or give an existing one a new password for the
    /// mechanism.
    Create {
        name: String,
        /// The password (or set WEIR_USER_PASSWORD, which stays out of
        /// the process list).
        #[arg(long, env = "WEIR_USER_PASSWORD", hide_env_values = true)]
        password: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, value_parser = parse_mechanism, default_value = "SCRAM-SHA-512")]
        mechanism: ScramMechanism,
        /// PBKDF2 iterations, 4096 to 16384.
        #[arg(long, default_value_t = DEFAULT_ITERATIONS)]
        iterations: u32,
    },
    /// Delete a user's SCRAM credential for the mechanism, or all of them.
    Delete {
        name: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512 (default: every mechanism the
        /// user has).
        #[arg(long, value_parser = parse_mechanism)]
        mechanism: Option<ScramMechanism>,
    },
    /// List the SCRAM users: name, mechanism and iterations of each
    /// credential.
    List,
}

fn parse_mechanism(name: &str) -> Result<ScramMechanism, String> {
    ScramMechanism::from_name(&name.trim().to_ascii_uppercase())
        .ok_or_else(|| format!("unknown mechanism {name:?}; use SCRAM-SHA-256 or SCRAM-SHA-512"))
}

pub(crate) fn run(args: UserArgs) -> anyhow::Result<()> {
    block_on(async move {
        let mut client = args.connection.connect().await?;
        match args.command {
            UserCommand::Create {
                name,
                password,
                mechanism,
                iterations,
            } => {
                let credential = NewScramCredential {
                    user: name.clone(),
                    mechanism,
                    password,
                    iterations,
                };
                alter(&mut client, &name, Vec::new(), vec![credential])
                    .await?
                    .map_err(anyhow::Error::new)?;
                super::print_line(format_args!(
                    "Set the {mechanism} credential of user {name} ({iterations} iterations)"
                ))?;
            }
            UserCommand::Delete { name, mechanism } => {
                let mechanisms = match mechanism {
                    Some(mechanism) => vec![mechanism],
                    None => {
                        let described = client
                            .describe_scram_users(Some(std::slice::from_ref(&name)))
                            .await
                            .map_err(|e| missing(e, &name, "SCRAM"))?;
                        described
                            .into_iter()
                            .flat_map(|u| u.credentials)
                            .map(|c| c.mechanism)
                            .collect()
                    }
                };
                if mechanisms.is_empty() {
                    bail!("user {name} has no SCRAM credential");
                }
                let what = match mechanism {
                    Some(mechanism) => mechanism.name(),
                    None => "SCRAM",
                };
                // One request each: Kafka refuses two changes to a user's
                // credentials in one request.
                for mechanism in mechanisms {
                    alter(
                        &mut client,
                        &name,
                        vec![(name.clone(), mechanism)],
                        Vec::new(),
                    )
                    .await?
                    .map_err(|e| missing(e, &name, what))?;
                    super::print_line(format_args!(
                        "Deleted the {mechanism} credential of user {name}"
                    ))?;
                }
            }
            UserCommand::List => {
                let users = client.describe_scram_users(None).await?;
                let mut rows = vec![vec![
                    "USER".to_owned(),
                    "MECHANISM".to_owned(),
                    "ITERATIONS".to_owned(),
                ]];
                for user in &users {
                    for credential in &user.credentials {
                        rows.push(vec![
                            user.name.clone(),
                            credential.mechanism.to_string(),
                            credential.iterations.to_string(),
                        ]);
                    }
                }
                super::print(format_args!("{}", table(&rows)))?;
            }
        }
        Ok(())
    })
}

/// Sends the changes of one user: the broker's outcome for it.
async fn alter(
    client: &mut Client,
    name: &str,
    deletions: Vec<(String, ScramMechanism)>,
    upsertions: Vec<NewScramCredential>,
) -> anyhow::Result<Result<(), ClientError>> {
    let outcomes = client.alter_scram_users(&deletions, &upsertions).await?;
    let (_, outcome) = outcomes
        .into_iter()
        .find(|(user, _)| user == name)
        .ok_or_else(|| anyhow!("the broker did not answer for user {name}"))?;
    Ok(outcome)
}

/// RESOURCE_NOT_FOUND as an operator says it: user `name` has no `what`
/// (a mechanism's name, or "SCRAM") credential.
fn missing(error: ClientError, name: &str, what: &str) -> anyhow::Error {
    match error.kafka_error() {
        Some(ResponseError::ResourceNotFound) => anyhow!("user {name} has no {what} credential"),
        _ => anyhow::Error::new(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanisms_parse_in_any_case() {
        assert_eq!(parse_mechanism("SCRAM-SHA-256"), Ok(ScramMechanism::Sha256));
        assert_eq!(parse_mechanism("scram-sha-512"), Ok(ScramMechanism::Sha512));
        assert!(parse_mechanism("PLAIN")
            .unwrap_err()
            .contains("SCRAM-SHA-256"));
    }
}
