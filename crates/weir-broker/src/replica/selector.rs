//! The preferred read replica (KIP-392, fetch from follower): which replica
//! a partition leader tells a consumer to read from instead of itself.
//! Kafka's `ReplicaSelector` plugin, chosen by the broker config
//! `replica.selector.class`; Weir knows Kafka's two implementations by
//! their class names: none (Kafka's default, the leader serves everyone,
//! as its `LeaderSelector` does) and `RackAwareReplicaSelector` (a replica
//! in the client's `client.rack`). Pure: the leader hands it the replicas
//! Kafka's `findPreferredReadReplica` deems eligible.

use std::cmp::Ordering;

pub use crate::config::replica_selector::{
    ReplicaSelector, LEADER_SELECTOR, RACK_AWARE_REPLICA_SELECTOR,
};

impl ReplicaSelector {
    /// The replica a consumer in `client_rack` should read from, if not
    /// the leader. `replicas` are the followers eligible to serve it (in
    /// the ISR, holding the fetch offset); a follower reached through no
    /// endpoint of the client's listener is not among them.
    pub fn select(
        self,
        client_rack: &str,
        leader: &ReplicaView<'_>,
        replicas: &[ReplicaView<'_>],
    ) -> Option<i32> {
        match self {
            Self::Leader => None,
            Self::RackAware => {
                if client_rack.is_empty() || leader.rack == Some(client_rack) {
                    return None;
                }
                // The most caught-up replica in the rack; ties go to the
                // one caught up most recently, then the highest id (the
                // order of Kafka's `ReplicaView.comparator`).
                replicas
                    .iter()
                    .filter(|r| r.rack == Some(client_rack))
                    .max_by(|a, b| a.rank(b))
                    .map(|r| r.id)
            }
        }
    }
}

/// One replica as the leader sees it (Kafka's `ReplicaView`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaView<'a> {
    pub id: i32,
    pub rack: Option<&'a str>,
    pub log_end: u64,
    /// How long ago it last reached the leader's log end (0 for the
    /// leader itself).
    pub since_caught_up_ms: i64,
}

impl ReplicaView<'_> {
    fn rank(&self, other: &Self) -> Ordering {
        self.log_end
            .cmp(&other.log_end)
            .then(other.since_caught_up_ms.cmp(&self.since_caught_up_ms))
            .then(self.id.cmp(&other.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: i32, rack: &'static str, log_end: u64, since: i64) -> ReplicaView<'static> {
        ReplicaView {
            id,
            rack: Some(rack),
            log_end,
            since_caught_up_ms: since,
        }
    }

    const LEADER: ReplicaView<'static> = ReplicaView {
        id: 1,
        rack: Some("a"),
        log_end: 100,
        since_caught_up_ms: 0,
    };

    #[test]
    fn class_names_are_kafkas_and_an_unknown_one_is_refused() {
        let parse = ReplicaSelector::from_class_name;
        assert_eq!(parse(""), Ok(ReplicaSelector::Leader));
        assert_eq!(parse(LEADER_SELECTOR), Ok(ReplicaSelector::Leader));
        assert_eq!(
            parse(RACK_AWARE_REPLICA_SELECTOR),
            Ok(ReplicaSelector::RackAware)
        );
        let error = parse("com.example.NearestSelector").unwrap_err();
        assert!(error.contains("com.example.NearestSelector"), "{error}");
        assert!(error.contains(RACK_AWARE_REPLICA_SELECTOR), "{error}");
    }

    #[test]
    fn without_a_selector_the_leader_serves_every_rack() {
        let followers = [view(2, "b", 100, 0)];
        assert_eq!(
            ReplicaSelector::Leader.select("b", &LEADER, &followers),
            None
        );
    }

    #[test]
    fn a_client_in_a_followers_rack_is_sent_to_that_follower() {
        let followers = [view(2, "b", 100, 0), view(3, "c", 100, 0)];
        let select = |rack| ReplicaSelector::RackAware.select(rack, &LEADER, &followers);
        assert_eq!(select("b"), Some(2));
        assert_eq!(select("c"), Some(3));
    }

    #[test]
    fn the_leader_serves_its_own_rack_an_unknown_rack_and_no_rack() {
        let followers = [view(2, "a", 100, 0), view(3, "c", 100, 0)];
        let select = |rack| ReplicaSelector::RackAware.select(rack, &LEADER, &followers);
        assert_eq!(select("a"), None, "the leader is in the client's rack");
        assert_eq!(select("z"), None);
        assert_eq!(select(""), None);
    }

    #[test]
    fn among_replicas_of_the_rack_the_most_caught_up_is_chosen() {
        let table = [
            // (followers, chosen)
            (vec![view(2, "b", 90, 0), view(3, "b", 100, 500)], 3),
            (vec![view(2, "b", 100, 10), view(3, "b", 100, 500)], 2),
            (vec![view(2, "b", 100, 10), view(3, "b", 100, 10)], 3),
            (vec![view(2, "b", 100, 10), view(3, "c", 120, 0)], 2),
        ];
        for (followers, chosen) in table {
            assert_eq!(
                ReplicaSelector::RackAware.select("b", &LEADER, &followers),
                Some(chosen),
                "{followers:?}"
            );
        }
    }

    #[test]
    fn a_replica_without_a_rack_is_never_chosen() {
        let followers = [ReplicaView {
            id: 2,
            rack: None,
            log_end: 100,
            since_caught_up_ms: 0,
        }];
        assert_eq!(
            ReplicaSelector::RackAware.select("b", &LEADER, &followers),
            None
        );
    }
}
