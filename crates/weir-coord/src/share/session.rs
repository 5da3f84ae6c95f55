//! Share sessions (KIP-932): a member's ShareFetch and ShareAcknowledge
//! requests to one broker form a session, so that an incremental fetch
//! names only the partitions it adds or forgets. Each request carries the
//! session epoch: 0 opens a session (replacing the member's previous one),
//! -1 closes it, anything else must be the epoch the session expects next,
//! which every request of the session moves on by one.
//!
//! Pure bookkeeping: the caller releases the records a member acquired
//! when its session closes or is replaced ([`SessionChange::ended`]).

use std::collections::{BTreeSet, HashMap};

use uuid::Uuid;

/// A share-partition as a session names it.
pub type TopicIdPartition = (Uuid, i32);

/// Opens a new session.
pub const OPEN_SESSION_EPOCH: i32 = 0;
/// Closes the session (the last request of a member).
pub const FINAL_SESSION_EPOCH: i32 = -1;

/// Why a request was refused by the session cache; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareSessionError {
    #[error("the share session was not found")]
    NotFound,
    #[error("the share session epoch is invalid")]
    InvalidEpoch,
    #[error("the limit of share sessions has been reached")]
    LimitReached,
}

impl ShareSessionError {
    pub fn code(&self) -> i16 {
        match self {
            ShareSessionError::NotFound => 122,
            ShareSessionError::InvalidEpoch => 123,
            ShareSessionError::LimitReached => 133,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Session {
    /// The epoch the next request must carry.
    next_epoch: i32,
    partitions: BTreeSet<TopicIdPartition>,
}

/// What a request did to its member's session.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionChange {
    /// The session's partitions after the request (empty once closed).
    pub partitions: BTreeSet<TopicIdPartition>,
    /// A session of this member ended (closed, or replaced by a new one):
    /// its acquired records are to be released.
    pub ended: bool,
}

/// The share sessions of one broker, by group and member.
#[derive(Debug, Clone)]
pub struct ShareSessions {
    /// `group.share.max.share.sessions`.
    max_sessions: usize,
    sessions: HashMap<(String, String), Session>,
}

impl ShareSessions {
    pub fn new(max_sessions: usize) -> Self {
        Self {
            max_sessions,
            sessions: HashMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// A ShareFetch of `member` of `group` at `epoch`, adding `added`
    /// partitions and forgetting `forgotten` ones (incremental fetches
    /// only; a new session is exactly `added`).
    pub fn fetch(
        &mut self,
        group: &str,
        member: &str,
        epoch: i32,
        added: &[TopicIdPartition],
        forgotten: &[TopicIdPartition],
    ) -> Result<SessionChange, ShareSessionError> {
        let key = (group.to_owned(), member.to_owned());
        match epoch {
            OPEN_SESSION_EPOCH => {
                let replaced = self.sessions.contains_key(&key);
                if !replaced && self.sessions.len() >= self.max_sessions {
                    return Err(ShareSessionError::LimitReached);
                }
                let partitions: BTreeSet<TopicIdPartition> = added.iter().copied().collect();
                self.sessions.insert(
                    key,
                    Session {
                        next_epoch: 1,
                        partitions: partitions.clone(),
                    },
                );
                Ok(SessionChange {
                    partitions,
                    ended: replaced,
                })
            }
            FINAL_SESSION_EPOCH => self.close(key),
            _ => {
                let session = self.expect(&key, epoch)?;
                session.partitions.extend(added.iter().copied());
                for partition in forgotten {
                    session.partitions.remove(partition);
                }
                session.next_epoch = next(session.next_epoch);
                Ok(SessionChange {
                    partitions: session.partitions.clone(),
                    ended: false,
                })
            }
        }
    }

    /// A ShareAcknowledge of `member` at `epoch`: it moves the session on
    /// (or closes it at -1); it cannot open one.
    pub fn acknowledge(
        &mut self,
        group: &str,
        member: &str,
        epoch: i32,
    ) -> Result<SessionChange, ShareSessionError> {
        let key = (group.to_owned(), member.to_owned());
        match epoch {
            OPEN_SESSION_EPOCH => Err(ShareSessionError::InvalidEpoch),
            FINAL_SESSION_EPOCH => self.close(key),
            _ => {
                let session = self.expect(&key, epoch)?;
                session.next_epoch = next(session.next_epoch);
                Ok(SessionChange {
                    partitions: session.partitions.clone(),
                    ended: false,
                })
            }
        }
    }

    /// The member left its group: its session goes (if it had one).
    pub fn remove_member(&mut self, group: &str, member: &str) -> bool {
        self.sessions
            .remove(&(group.to_owned(), member.to_owned()))
            .is_some()
    }

    fn close(&mut self, key: (String, String)) -> Result<SessionChange, ShareSessionError> {
        match self.sessions.remove(&key) {
            Some(_) => Ok(SessionChange {
                partitions: BTreeSet::new(),
                ended: true,
            }),
            None => Err(ShareSessionError::NotFound),
        }
    }

    fn expect(
        &mut self,
        key: &(String, String),
        epoch: i32,
    ) -> Result<&mut Session, ShareSessionError> {
        let session = self
            .sessions
            .get_mut(key)
            .ok_or(ShareSessionError::NotFound)?;
        if session.next_epoch != epoch {
            return Err(ShareSessionError::InvalidEpoch);
        }
        Ok(session)
    }
}

/// The epoch after `epoch`; it wraps to 1, never to 0 or -1.
fn next(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(topic: u128, partition: i32) -> TopicIdPartition {
        (Uuid::from_u128(topic), partition)
    }

    #[test]
    fn a_session_opens_moves_on_with_each_request_and_closes() {
        let mut sessions = ShareSessions::new(10);
        let opened = sessions
            .fetch("g", "m", 0, &[tp(1, 0), tp(1, 1)], &[])
            .unwrap();
        assert_eq!(opened.partitions.len(), 2);
        assert!(!opened.ended);
        // Incremental: adds one, forgets one.
        let next = sessions
            .fetch("g", "m", 1, &[tp(2, 0)], &[tp(1, 0)])
            .unwrap();
        assert_eq!(next.partitions, [tp(1, 1), tp(2, 0)].into());
        assert_eq!(
            sessions.acknowledge("g", "m", 2).map(|c| c.ended),
            Ok(false)
        );
        // A replayed or skipped epoch is refused and changes nothing.
        assert_eq!(
            sessions.fetch("g", "m", 2, &[], &[]),
            Err(ShareSessionError::InvalidEpoch)
        );
        assert_eq!(
            sessions.fetch("g", "m", 3, &[], &[]).unwrap().partitions,
            [tp(1, 1), tp(2, 0)].into()
        );
        assert_eq!(
            sessions.fetch("g", "m", -1, &[], &[]).map(|c| c.ended),
            Ok(true)
        );
        assert_eq!(
            sessions.fetch("g", "m", 5, &[], &[]),
            Err(ShareSessionError::NotFound)
        );
        assert!(sessions.is_empty());
    }

    #[test]
    fn opening_again_replaces_the_session_and_the_cache_is_bounded() {
        let mut sessions = ShareSessions::new(1);
        sessions.fetch("g", "m", 0, &[tp(1, 0)], &[]).unwrap();
        let reopened = sessions.fetch("g", "m", 0, &[tp(1, 1)], &[]).unwrap();
        assert!(reopened.ended, "the old session's records are released");
        assert_eq!(reopened.partitions, [tp(1, 1)].into());
        assert_eq!(
            sessions.fetch("g", "other", 0, &[tp(1, 0)], &[]),
            Err(ShareSessionError::LimitReached)
        );
        assert_eq!(
            sessions.acknowledge("g", "m", 0),
            Err(ShareSessionError::InvalidEpoch),
            "an acknowledgement cannot open a session"
        );
        assert!(sessions.remove_member("g", "m"));
        assert!(sessions.fetch("g", "other", 0, &[], &[]).is_ok());
    }

    #[test]
    fn epochs_wrap_past_the_largest_to_one() {
        assert_eq!(next(i32::MAX), 1);
        assert_eq!(next(1), 2);
    }
}
