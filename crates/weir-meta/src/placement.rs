//! Replica placement for new partitions: where `CreateTopic` and
//! `CreatePartitions` put replicas when the client gives no assignment.
//!
//! The algorithm is Kafka's rack-aware assignment (`AdminUtils`):
//!
//! 1. the brokers are ordered rack by rack in turn (the "rack-alternated
//!    list"): the first broker of each rack (racks by name, brokers by id
//!    within a rack), then the second of each, and so on;
//! 2. partition `p` is led by the broker at position `(p + start) % n` of
//!    that list, so leaders go round robin;
//! 3. its followers come from the positions after the leader, shifted by an
//!    amount that grows every `n` partitions (so that the same broker does
//!    not always follow the same leader), skipping a broker whose rack
//!    already holds a replica of the partition while some rack holds none.
//!
//! Brokers without a rack count as one rack of their own; when no broker
//! has a rack this is Kafka's rack-unaware assignment.
//!
//! Everything is a function of the arguments, `start` included (the caller
//! picks it), so the result can travel in a command.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::MetaError;

/// `count` replica lists for partitions `first_partition..`, each of
/// `replication_factor` distinct brokers from `brokers` (id and rack), the
/// preferred leader first.
pub(crate) fn assign(
    brokers: &[(i32, Option<&str>)],
    first_partition: i32,
    count: i32,
    replication_factor: i32,
    start: usize,
) -> Result<Vec<Vec<i32>>, MetaError> {
    if count < 1 {
        return Err(MetaError::InvalidPartitions(
            "Number of partitions must be larger than 0.".to_owned(),
        ));
    }
    if replication_factor < 1 {
        return Err(MetaError::InvalidReplicationFactor(
            "Replication factor must be larger than 0.".to_owned(),
        ));
    }
    let (list, racks) = rack_alternated(brokers);
    let n = list.len();
    let rf = replication_factor as usize;
    if rf > n {
        return Err(MetaError::InvalidReplicationFactor(format!(
            "Replication factor: {rf} larger than available brokers: {n}."
        )));
    }
    let first = usize::try_from(first_partition).map_err(|_| {
        MetaError::InvalidPartitions(format!("Invalid first partition index {first_partition}."))
    })?;
    let rack_count = racks.iter().collect::<BTreeSet<_>>().len();
    let assignment = (first..first + count as usize)
        .map(|p| {
            let leader = (p % n + start % n) % n;
            let mut replicas = vec![list[leader]];
            if rf == 1 {
                return replicas;
            }
            // Followers are taken from the other n - 1 positions, starting
            // at an offset that moves every n partitions.
            let others = n - 1;
            let shift = (start % others + (p / n) % others) % others * (rack_count % others);
            let mut used_racks = BTreeSet::from([racks[leader]]);
            let mut k = 0;
            while replicas.len() < rf {
                let at = (leader + 1 + (shift + k) % others) % n;
                k += 1;
                let (broker, rack) = (list[at], racks[at]);
                // Skip a broker already chosen, and one whose rack holds a
                // replica while another rack holds none. Within n - 1 steps
                // some broker passes: an unused rack's brokers are all
                // unchosen, and with every rack used any unchosen broker
                // does (fewer than rf <= n are chosen).
                let rack_ok = !used_racks.contains(&rack) || used_racks.len() == rack_count;
                if rack_ok && !replicas.contains(&broker) {
                    replicas.push(broker);
                    used_racks.insert(rack);
                }
            }
            replicas
        })
        .collect();
    Ok(assignment)
}

/// The brokers in rack-alternated order, and each one's rack at the same
/// position.
fn rack_alternated<'a>(brokers: &[(i32, Option<&'a str>)]) -> (Vec<i32>, Vec<Option<&'a str>>) {
    let mut by_rack: BTreeMap<Option<&str>, BTreeSet<i32>> = BTreeMap::new();
    for &(id, rack) in brokers {
        by_rack.entry(rack).or_default().insert(id);
    }
    let mut queues: Vec<(Option<&str>, std::collections::btree_set::IntoIter<i32>)> = by_rack
        .into_iter()
        .map(|(rack, ids)| (rack, ids.into_iter()))
        .collect();
    let total: usize = brokers
        .iter()
        .map(|(id, _)| *id)
        .collect::<BTreeSet<_>>()
        .len();
    let (mut list, mut racks) = (Vec::with_capacity(total), Vec::with_capacity(total));
    while list.len() < total {
        for (rack, ids) in queues.iter_mut() {
            if let Some(id) = ids.next() {
                list.push(id);
                racks.push(*rack);
            }
        }
    }
    (list, racks)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Broker ids with their racks.
    type Brokers = Vec<(i32, Option<&'static str>)>;

    fn plain(ids: &[i32]) -> Brokers {
        ids.iter().map(|id| (*id, None)).collect()
    }

    fn racked(pairs: &[(i32, &'static str)]) -> Brokers {
        pairs.iter().map(|(id, r)| (*id, Some(*r))).collect()
    }

    #[test]
    fn rack_alternated_order() {
        let table: &[(&str, Brokers, Vec<i32>)] = &[
            ("no racks: by id", plain(&[3, 1, 2]), vec![1, 2, 3]),
            (
                "two per rack",
                racked(&[(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]),
                vec![1, 3, 5, 2, 4, 6],
            ),
            (
                "uneven racks",
                racked(&[(1, "a"), (2, "a"), (3, "a"), (4, "b")]),
                vec![1, 4, 2, 3],
            ),
            (
                "racks by name, not by broker id",
                racked(&[(1, "z"), (2, "y"), (3, "x")]),
                vec![3, 2, 1],
            ),
            (
                "brokers without a rack form one rack",
                vec![(1, None), (2, Some("a")), (3, None), (4, Some("a"))],
                vec![1, 2, 3, 4],
            ),
        ];
        for (name, brokers, want) in table {
            assert_eq!(&rack_alternated(brokers).0, want, "{name}");
        }
    }

    /// Exact layouts, worked out by hand from Kafka's algorithm.
    #[test]
    fn known_layouts() {
        struct Row {
            name: &'static str,
            brokers: Brokers,
            /// First partition, count, replication factor, start.
            args: (i32, i32, i32, usize),
            want: Vec<Vec<i32>>,
        }
        let table = [
            Row {
                name: "3 brokers, rf 3, start 0",
                brokers: plain(&[1, 2, 3]),
                args: (0, 4, 3, 0),
                want: vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2], vec![1, 3, 2]],
            },
            Row {
                name: "3 brokers, rf 2, start 1",
                brokers: plain(&[1, 2, 3]),
                args: (0, 3, 2, 1),
                want: vec![vec![2, 1], vec![3, 2], vec![1, 3]],
            },
            Row {
                name: "one broker",
                brokers: plain(&[7]),
                args: (0, 2, 1, 5),
                want: vec![vec![7], vec![7]],
            },
            Row {
                name: "numbering from a later partition",
                brokers: plain(&[1, 2, 3]),
                args: (3, 1, 3, 0),
                want: vec![vec![1, 3, 2]],
            },
            Row {
                name: "racks a,a,b,b: followers on the other rack",
                brokers: racked(&[(1, "a"), (2, "a"), (3, "b"), (4, "b")]),
                args: (0, 4, 2, 0),
                want: vec![vec![1, 3], vec![3, 2], vec![2, 4], vec![4, 1]],
            },
        ];
        for row in table {
            let (first, count, rf, start) = row.args;
            let got = assign(&row.brokers, first, count, rf, start).unwrap();
            assert_eq!(got, row.want, "{}", row.name);
        }
    }

    #[test]
    fn errors() {
        let three = plain(&[1, 2, 3]);
        let none = plain(&[]);
        // (name, brokers, count, rf, error code, message)
        type Row<'a> = (&'a str, &'a Brokers, i32, i32, i16, &'a str);
        let table: &[Row] = &[
            (
                "no partitions",
                &three,
                0,
                1,
                37,
                "Number of partitions must be larger than 0.",
            ),
            (
                "rf 0",
                &three,
                1,
                0,
                38,
                "Replication factor must be larger than 0.",
            ),
            (
                "rf above the brokers",
                &three,
                1,
                4,
                38,
                "Replication factor: 4 larger than available brokers: 3.",
            ),
            (
                "no brokers",
                &none,
                1,
                1,
                38,
                "Replication factor: 1 larger than available brokers: 0.",
            ),
        ];
        for (name, brokers, count, rf, code, message) in table {
            let e = assign(brokers, 0, *count, *rf, 0).unwrap_err();
            assert_eq!(e.kafka_error_code(), *code, "{name}");
            assert_eq!(e.to_string(), *message, "{name}");
        }
        assert_eq!(
            assign(&three, -1, 1, 1, 0).unwrap_err().kafka_error_code(),
            37
        );
    }

    /// The properties that must hold for every layout: the right length,
    /// no broker twice, leaders spread evenly, as many racks as possible
    /// per partition, and the same answer for the same arguments.
    #[test]
    fn invariants_over_many_shapes() {
        let clusters: Vec<Brokers> = vec![
            plain(&[1]),
            plain(&[1, 2]),
            plain(&[1, 2, 3]),
            plain(&[4, 9, 2, 7, 5]),
            racked(&[(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]),
            racked(&[(1, "a"), (2, "a"), (3, "a"), (4, "b"), (5, "c")]),
            racked(&[(10, "r1"), (11, "r2"), (12, "r1"), (13, "r2")]),
            vec![(1, Some("a")), (2, None), (3, Some("b")), (4, None)],
        ];
        for brokers in &clusters {
            let n = brokers.len();
            let rack_of: BTreeMap<i32, Option<&str>> = brokers.iter().copied().collect();
            let racks = rack_of.values().collect::<BTreeSet<_>>().len();
            for rf in 1..=n {
                for start in [0, 1, 2, 7, usize::MAX] {
                    let count = 2 * n as i32;
                    let layout = assign(brokers, 0, count, rf as i32, start).unwrap();
                    let ctx = format!("{brokers:?} rf {rf} start {start}");
                    assert_eq!(layout.len(), count as usize, "{ctx}");
                    let mut leaders = BTreeMap::new();
                    for replicas in &layout {
                        assert_eq!(replicas.len(), rf, "{ctx}");
                        let distinct: BTreeSet<_> = replicas.iter().collect();
                        assert_eq!(distinct.len(), rf, "{ctx}: {replicas:?}");
                        let spanned: BTreeSet<_> = replicas.iter().map(|b| rack_of[b]).collect();
                        assert_eq!(spanned.len(), rf.min(racks), "{ctx}: {replicas:?}");
                        *leaders.entry(replicas[0]).or_insert(0) += 1;
                    }
                    assert_eq!(leaders.len(), n, "{ctx}: {leaders:?}");
                    assert!(leaders.values().all(|&c| c == 2), "{ctx}: {leaders:?}");
                    assert_eq!(
                        layout,
                        assign(brokers, 0, count, rf as i32, start).unwrap(),
                        "{ctx}"
                    );
                }
            }
        }
    }

    #[test]
    fn three_brokers_six_partitions_each_leads_two() {
        for start in 0..6 {
            let layout = assign(&plain(&[1, 2, 3]), 0, 6, 3, start).unwrap();
            for broker in 1..=3 {
                assert_eq!(
                    layout.iter().filter(|r| r[0] == broker).count(),
                    2,
                    "start {start}: {layout:?}"
                );
            }
        }
    }
}
