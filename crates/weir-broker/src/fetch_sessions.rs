//! Incremental fetch sessions (KIP-227). A consumer or follower fetching
//! many partitions names them all once; the broker keeps them in a session,
//! later requests name only the partitions that changed (or are forgotten),
//! and responses carry only partitions with something new: records, an
//! error, or a moved high watermark or log start offset. With a thousand
//! idle partitions, each fetch then costs a few bytes each way instead of
//! a thousand partition entries.
//!
//! Kafka's rules, kept here without I/O or a clock of its own:
//! - epoch -1 (final) is a sessionless fetch, epoch 0 (initial) a full
//!   fetch that opens a session; either closes the session it names;
//! - a later epoch must be the session's next one (INVALID_FETCH_SESSION_EPOCH
//!   otherwise; FETCH_SESSION_ID_NOT_FOUND for an unknown or evicted id),
//!   and must name topics the way the session does (by id from v13 on:
//!   FETCH_SESSION_TOPIC_ID_ERROR otherwise);
//! - a full cache (`max.incremental.fetch.session.cache.slots`) makes room
//!   by evicting a session idle for two minutes, else the least valuable
//!   one (a consumer's before a follower's, smaller before larger) that is
//!   at least two minutes old, if it is worth less than the new one;
//!   otherwise the new fetch goes on without a session (id 0);
//! - partitions that returned records move to the end of the session's
//!   order, so a response bounded by `max_bytes` serves every partition in
//!   turn.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::{Mutex, MutexGuard};
use prometheus_client::metrics::gauge::Gauge;
use uuid::Uuid;

/// Kafka's `min.incremental.fetch.session.eviction.ms` (not configurable).
pub(crate) const EVICTION_MS: i64 = 120_000;
const INITIAL_EPOCH: i32 = 0;
const FINAL_EPOCH: i32 = -1;

/// How a fetch names a topic: by name before v13, by id from v13 on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TopicRef {
    Name(Arc<str>),
    Id(Uuid),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PartitionKey {
    pub(crate) topic: TopicRef,
    pub(crate) partition: i32,
}

/// What the fetcher asks of one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FetchParams {
    pub(crate) fetch_offset: i64,
    pub(crate) max_bytes: i32,
    pub(crate) current_leader_epoch: i32,
}

/// What a response said of one partition: decides whether the next
/// incremental response must include it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answered {
    pub(crate) error_code: i16,
    pub(crate) high_watermark: i64,
    pub(crate) log_start_offset: i64,
    pub(crate) has_records: bool,
}

/// A fetch request as the session cache sees it.
pub(crate) struct FetchRequestView {
    pub(crate) version: i16,
    pub(crate) session_id: i32,
    pub(crate) epoch: i32,
    /// A follower's fetch: its session outranks a consumer's.
    pub(crate) privileged: bool,
    pub(crate) partitions: Vec<(PartitionKey, FetchParams)>,
    pub(crate) forgotten: Vec<PartitionKey>,
}

/// How a fetch is answered, decided before reading.
#[derive(Debug)]
pub(crate) enum FetchContext {
    /// A session error: answered at once, with no partitions.
    Error(i16),
    /// Epoch -1: the request's partitions, no session.
    Sessionless(Vec<(PartitionKey, FetchParams)>),
    /// Epoch 0: the request's partitions; a session is opened with them.
    Full {
        partitions: Vec<(PartitionKey, FetchParams)>,
        privileged: bool,
        uses_topic_ids: bool,
    },
    /// Every partition of the session, in the session's order.
    Incremental {
        session_id: i32,
        /// The session's epoch once this request is counted.
        epoch: i32,
        partitions: Vec<(PartitionKey, FetchParams)>,
    },
}

impl FetchContext {
    /// The partitions to read, in the order to answer them.
    pub(crate) fn partitions(&self) -> &[(PartitionKey, FetchParams)] {
        match self {
            FetchContext::Error(_) => &[],
            FetchContext::Sessionless(partitions)
            | FetchContext::Full { partitions, .. }
            | FetchContext::Incremental { partitions, .. } => partitions,
        }
    }
}

/// The response's top-level fields, and which partitions it carries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) error_code: i16,
    pub(crate) session_id: i32,
    /// One flag per partition of the context: include it in the response.
    pub(crate) include: Vec<bool>,
}

struct Cached {
    key: PartitionKey,
    params: FetchParams,
    /// As last sent; -1 after an error, so the partition is sent again
    /// once the error clears.
    high_watermark: i64,
    log_start_offset: i64,
}

struct Session {
    epoch: i32,
    privileged: bool,
    uses_topic_ids: bool,
    created_ms: i64,
    last_used_ms: i64,
    partitions: Vec<Cached>,
    position: HashMap<PartitionKey, usize>,
}

impl Session {
    fn reindex(&mut self) {
        self.position = self
            .partitions
            .iter()
            .enumerate()
            .map(|(i, p)| (p.key.clone(), i))
            .collect();
    }

    fn params(&self) -> Vec<(PartitionKey, FetchParams)> {
        self.partitions
            .iter()
            .map(|p| (p.key.clone(), p.params))
            .collect()
    }

    /// Kafka's eviction rank: followers' sessions above consumers', larger
    /// above smaller.
    fn rank(&self, id: i32) -> (bool, usize, i32) {
        (self.privileged, self.partitions.len(), id)
    }
}

/// The broker's fetch sessions.
pub(crate) struct FetchSessionCache {
    max_sessions: usize,
    sessions: Mutex<HashMap<i32, Session>>,
    /// How many sessions are held.
    held: Gauge,
}

impl FetchSessionCache {
    pub(crate) fn new(max_sessions: usize, held: Gauge) -> Self {
        Self {
            max_sessions,
            sessions: Mutex::new(HashMap::new()),
            held,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    /// The sessions, counted in the gauge when the guard goes.
    fn lock(&self) -> Counted<'_> {
        Counted {
            sessions: self.sessions.lock(),
            held: &self.held,
        }
    }

    /// Decides how `request` is answered, updating the session it
    /// continues.
    pub(crate) fn new_context(&self, request: FetchRequestView, now_ms: i64) -> FetchContext {
        let mut sessions = self.lock();
        if request.epoch == INITIAL_EPOCH || request.epoch == FINAL_EPOCH {
            sessions.remove(&request.session_id);
            return if request.epoch == FINAL_EPOCH {
                FetchContext::Sessionless(request.partitions)
            } else {
                FetchContext::Full {
                    partitions: request.partitions,
                    privileged: request.privileged,
                    uses_topic_ids: request.version >= 13,
                }
            };
        }
        let Some(session) = sessions.get_mut(&request.session_id) else {
            return FetchContext::Error(ResponseError::FetchSessionIdNotFound.code());
        };
        if session.epoch != request.epoch {
            return FetchContext::Error(ResponseError::InvalidFetchSessionEpoch.code());
        }
        if session.uses_topic_ids != (request.version >= 13) {
            return FetchContext::Error(ResponseError::FetchSessionTopicIdError.code());
        }
        for (key, params) in request.partitions {
            match session.position.get(&key) {
                Some(&i) => session.partitions[i].params = params,
                None => {
                    session
                        .position
                        .insert(key.clone(), session.partitions.len());
                    session.partitions.push(Cached {
                        key,
                        params,
                        high_watermark: -1,
                        log_start_offset: -1,
                    });
                }
            }
        }
        if !request.forgotten.is_empty() {
            let before = session.partitions.len();
            session
                .partitions
                .retain(|p| !request.forgotten.contains(&p.key));
            if session.partitions.len() != before {
                session.reindex();
            }
        }
        if session.partitions.is_empty() {
            sessions.remove(&request.session_id);
            return FetchContext::Sessionless(Vec::new());
        }
        session.last_used_ms = now_ms;
        session.epoch = next_epoch(session.epoch);
        FetchContext::Incremental {
            session_id: request.session_id,
            epoch: session.epoch,
            partitions: session.params(),
        }
    }

    /// Settles the response once the partitions are read: opens the
    /// session of a full fetch, or records what an incremental one sends.
    /// `answered` follows [`FetchContext::partitions`].
    pub(crate) fn finish(
        &self,
        context: FetchContext,
        answered: &[Answered],
        now_ms: i64,
    ) -> Outcome {
        let all = || vec![true; answered.len()];
        match context {
            FetchContext::Error(error_code) => Outcome {
                error_code,
                session_id: 0,
                include: Vec::new(),
            },
            FetchContext::Sessionless(_) => Outcome {
                error_code: 0,
                session_id: 0,
                include: all(),
            },
            FetchContext::Full {
                partitions,
                privileged,
                uses_topic_ids,
            } => {
                let cached = partitions
                    .into_iter()
                    .zip(answered)
                    .map(|((key, params), answer)| Cached {
                        key,
                        params,
                        high_watermark: if answer.error_code == 0 {
                            answer.high_watermark
                        } else {
                            -1
                        },
                        log_start_offset: answer.log_start_offset,
                    })
                    .collect();
                let session_id = self.open(privileged, uses_topic_ids, cached, now_ms);
                Outcome {
                    error_code: 0,
                    session_id,
                    include: all(),
                }
            }
            FetchContext::Incremental {
                session_id,
                epoch,
                partitions,
            } => {
                let mut sessions = self.lock();
                let Some(session) = sessions.get_mut(&session_id).filter(|s| s.epoch == epoch)
                else {
                    // A retry of this request, or a session evicted while
                    // this one waited for data: the client starts over.
                    return Outcome {
                        error_code: ResponseError::InvalidFetchSessionEpoch.code(),
                        session_id,
                        include: Vec::new(),
                    };
                };
                let mut include = Vec::with_capacity(answered.len());
                let mut rotate = false;
                for ((key, _), answer) in partitions.iter().zip(answered) {
                    let Some(&i) = session.position.get(key) else {
                        include.push(false);
                        continue;
                    };
                    let cached = &mut session.partitions[i];
                    let mut send = answer.has_records || answer.error_code != 0;
                    if cached.high_watermark != answer.high_watermark {
                        send = true;
                        cached.high_watermark = answer.high_watermark;
                    }
                    if cached.log_start_offset != answer.log_start_offset {
                        send = true;
                        cached.log_start_offset = answer.log_start_offset;
                    }
                    if answer.error_code != 0 {
                        cached.high_watermark = -1;
                    }
                    rotate |= answer.has_records;
                    include.push(send);
                }
                if rotate {
                    let had_records: std::collections::HashSet<&PartitionKey> = partitions
                        .iter()
                        .zip(answered)
                        .filter(|(_, a)| a.has_records)
                        .map(|((key, _), _)| key)
                        .collect();
                    let (moved, stayed): (Vec<Cached>, Vec<Cached>) = session
                        .partitions
                        .drain(..)
                        .partition(|p| had_records.contains(&p.key));
                    session.partitions = stayed;
                    session.partitions.extend(moved);
                    session.reindex();
                }
                Outcome {
                    error_code: 0,
                    session_id,
                    include,
                }
            }
        }
    }

    /// Opens a session if there is room or a session worth less can make
    /// some: its id, or 0.
    fn open(
        &self,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: Vec<Cached>,
        now_ms: i64,
    ) -> i32 {
        let mut sessions = self.lock();
        if sessions.len() >= self.max_sessions
            && !evict_one(&mut sessions, privileged, partitions.len(), now_ms)
        {
            return 0;
        }
        let id = loop {
            let id = (Uuid::new_v4().as_u128() as i32) & i32::MAX;
            if id != 0 && !sessions.contains_key(&id) {
                break id;
            }
        };
        let mut session = Session {
            epoch: next_epoch(INITIAL_EPOCH),
            privileged,
            uses_topic_ids,
            created_ms: now_ms,
            last_used_ms: now_ms,
            partitions,
            position: HashMap::new(),
        };
        session.reindex();
        sessions.insert(id, session);
        id
    }
}

/// Makes room for a new session of `size` partitions, as Kafka's
/// `FetchSessionCacheShard.tryEvict`: true if one was evicted.
fn evict_one(
    sessions: &mut HashMap<i32, Session>,
    privileged: bool,
    size: usize,
    now_ms: i64,
) -> bool {
    let stale = sessions
        .iter()
        .min_by_key(|(id, s)| (s.last_used_ms, **id))
        .filter(|(_, s)| now_ms - s.last_used_ms > EVICTION_MS)
        .map(|(id, _)| *id);
    if let Some(id) = stale {
        sessions.remove(&id);
        return true;
    }
    let old_enough = |s: &Session| now_ms - s.created_ms > EVICTION_MS;
    let victim = sessions
        .iter()
        .filter(|(_, s)| old_enough(s) || (privileged && !s.privileged))
        .min_by_key(|(id, s)| s.rank(**id))
        .filter(|(id, s)| (privileged, size, 0) >= s.rank(**id))
        .map(|(id, _)| *id);
    match victim {
        Some(id) => sessions.remove(&id).is_some(),
        None => false,
    }
}

struct Counted<'a> {
    sessions: MutexGuard<'a, HashMap<i32, Session>>,
    held: &'a Gauge,
}

impl std::ops::Deref for Counted<'_> {
    type Target = HashMap<i32, Session>;

    fn deref(&self) -> &Self::Target {
        &self.sessions
    }
}

impl std::ops::DerefMut for Counted<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.sessions
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.held.set(self.sessions.len() as i64);
    }
}

fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        e if e < 0 => FINAL_EPOCH,
        i32::MAX => 1,
        e => e + 1,
    }
}

#[cfg(test)]
mod tests;
