//! Table tests of the assignors and the target assignment builder. The cases
//! follow the scenarios of Kafka's UniformAssignorTest / RangeAssignorTest,
//! with the expected assignments worked out for these assignors.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::super::*;
use super::{parts, topic_id};

const T1: u128 = 1;
const T2: u128 = 2;
const T3: u128 = 3;

/// A spec with `topics` (number, partitions) and `members`
/// (id, instance id, subscribed topic numbers, current assignment).
fn spec(
    topics: &[(u128, i32)],
    members: &[(&str, Option<&str>, &[u128], Assignment)],
) -> GroupSpec {
    GroupSpec {
        topics: topics
            .iter()
            .map(|(n, partitions)| {
                (
                    topic_id(*n),
                    TopicSpec {
                        name: format!("t{n}"),
                        partitions: *partitions,
                    },
                )
            })
            .collect(),
        members: members
            .iter()
            .map(|(id, instance, subscribed, assignment)| {
                (
                    (*id).to_owned(),
                    MemberSpec {
                        instance_id: instance.map(str::to_owned),
                        rack_id: None,
                        subscribed_topics: subscribed.iter().map(|n| topic_id(*n)).collect(),
                        assignment: assignment.clone(),
                    },
                )
            })
            .collect(),
    }
}

fn expect(members: &[(&str, Assignment)]) -> BTreeMap<String, Assignment> {
    members
        .iter()
        .map(|(id, a)| ((*id).to_owned(), a.clone()))
        .collect()
}

fn counts(result: &BTreeMap<String, Assignment>) -> Vec<usize> {
    result.values().map(partition_count).collect()
}

/// Checks an assignment is valid: every partition of a subscribed topic
/// assigned exactly once, only to subscribers.
fn assert_complete(spec: &GroupSpec, result: &BTreeMap<String, Assignment>) {
    let mut seen = BTreeSet::new();
    for (member_id, assignment) in result {
        let member = &spec.members[member_id];
        for (topic, partitions) in assignment {
            assert!(
                member.subscribed_topics.contains(topic),
                "{member_id} got unsubscribed {topic}"
            );
            let n = spec.topics[topic].partitions;
            for p in partitions {
                assert!((0..n).contains(p), "{topic}-{p} does not exist");
                assert!(seen.insert((*topic, *p)), "{topic}-{p} assigned twice");
            }
        }
    }
    for (topic, t) in &spec.topics {
        if spec
            .members
            .values()
            .any(|m| m.subscribed_topics.contains(topic))
        {
            for p in 0..t.partitions {
                assert!(seen.contains(&(*topic, p)), "{topic}-{p} unassigned");
            }
        }
    }
}

// ---- uniform ----

#[test]
fn uniform_no_members_and_no_topics() {
    let empty = spec(&[(T1, 3)], &[]);
    assert!(ServerAssignor::Uniform.assign(&empty).is_empty());

    let unknown_topic = spec(&[(T1, 3)], &[("a", None, &[T3], Assignment::new())]);
    assert_eq!(
        ServerAssignor::Uniform.assign(&unknown_topic),
        expect(&[("a", Assignment::new())]),
        "a topic missing from the metadata is ignored"
    );
}

#[test]
fn uniform_one_member_gets_everything() {
    let s = spec(
        &[(T1, 3), (T2, 2)],
        &[("a", None, &[T1, T2], Assignment::new())],
    );
    assert_eq!(
        ServerAssignor::Uniform.assign(&s),
        expect(&[("a", parts(&[(T1, &[0, 1, 2]), (T2, &[0, 1])]))])
    );
}

#[test]
fn uniform_first_assignment_two_members_two_topics() {
    let s = spec(
        &[(T1, 3), (T2, 3)],
        &[
            ("a", None, &[T1, T2], Assignment::new()),
            ("b", None, &[T1, T2], Assignment::new()),
        ],
    );
    // T1 first (same ratio, lower id): a, b, a; then T2 to the least loaded: b, a, b.
    assert_eq!(
        ServerAssignor::Uniform.assign(&s),
        expect(&[
            ("a", parts(&[(T1, &[0, 2]), (T2, &[1])])),
            ("b", parts(&[(T1, &[1]), (T2, &[0, 2])])),
        ])
    );
}

#[test]
fn uniform_more_members_than_partitions() {
    let s = spec(
        &[(T1, 2)],
        &[
            ("a", None, &[T1], Assignment::new()),
            ("b", None, &[T1], Assignment::new()),
            ("c", None, &[T1], Assignment::new()),
        ],
    );
    let result = ServerAssignor::Uniform.assign(&s);
    assert_complete(&s, &result);
    assert_eq!(result["c"], Assignment::new());
    assert_eq!(counts(&result), vec![1, 1, 0]);
}

#[test]
fn uniform_new_member_takes_only_its_share() {
    // a had everything; b joins: a keeps 3 of its 6, b gets the other 3.
    let s = spec(
        &[(T1, 3), (T2, 3)],
        &[
            (
                "a",
                None,
                &[T1, T2],
                parts(&[(T1, &[0, 1, 2]), (T2, &[0, 1, 2])]),
            ),
            ("b", None, &[T1, T2], Assignment::new()),
        ],
    );
    assert_eq!(
        ServerAssignor::Uniform.assign(&s),
        expect(&[
            ("a", parts(&[(T2, &[0, 1, 2])])),
            ("b", parts(&[(T1, &[0, 1, 2])])),
        ])
    );
}

#[test]
fn uniform_member_leaves_and_others_keep_theirs() {
    // c left: its partitions go to a and b, which keep all they had.
    let s = spec(
        &[(T1, 6)],
        &[
            ("a", None, &[T1], parts(&[(T1, &[0, 1])])),
            ("b", None, &[T1], parts(&[(T1, &[2, 3])])),
        ],
    );
    assert_eq!(
        ServerAssignor::Uniform.assign(&s),
        expect(&[
            ("a", parts(&[(T1, &[0, 1, 4])])),
            ("b", parts(&[(T1, &[2, 3, 5])])),
        ])
    );
}

#[test]
fn uniform_keeps_an_uneven_but_balanced_assignment() {
    // 7 partitions over 3 members: 3/2/2 in any order is balanced; nothing moves.
    let current = [
        ("a", parts(&[(T1, &[0, 1])])),
        ("b", parts(&[(T1, &[2, 3, 4])])),
        ("c", parts(&[(T1, &[5, 6])])),
    ];
    let s = spec(
        &[(T1, 7)],
        &[
            ("a", None, &[T1], current[0].1.clone()),
            ("b", None, &[T1], current[1].1.clone()),
            ("c", None, &[T1], current[2].1.clone()),
        ],
    );
    assert_eq!(ServerAssignor::Uniform.assign(&s), expect(&current));
}

#[test]
fn uniform_drops_unsubscribed_topics_and_vanished_partitions() {
    let s = spec(
        &[(T1, 2), (T2, 2)],
        &[
            // a no longer subscribes to T2; T1 shrank to 2 partitions.
            ("a", None, &[T1], parts(&[(T1, &[0, 3]), (T2, &[0, 1])])),
            ("b", None, &[T2], Assignment::new()),
        ],
    );
    assert_eq!(
        ServerAssignor::Uniform.assign(&s),
        expect(&[
            ("a", parts(&[(T1, &[0, 1])])),
            ("b", parts(&[(T2, &[0, 1])]))
        ])
    );
}

#[test]
fn uniform_heterogeneous_balances_through_shared_topics() {
    // a: T1, b: T1+T2, c: T2; 6 partitions each. Filling gives a 3, b 5, c 4;
    // balancing moves one T1 partition from b to a: 4 each.
    let s = spec(
        &[(T1, 6), (T2, 6)],
        &[
            ("a", None, &[T1], Assignment::new()),
            ("b", None, &[T1, T2], Assignment::new()),
            ("c", None, &[T2], Assignment::new()),
        ],
    );
    let result = ServerAssignor::Uniform.assign(&s);
    assert_complete(&s, &result);
    assert_eq!(counts(&result), vec![4, 4, 4]);
    assert_eq!(
        result,
        expect(&[
            ("a", parts(&[(T1, &[0, 2, 4, 5])])),
            ("b", parts(&[(T1, &[1, 3]), (T2, &[3, 5])])),
            ("c", parts(&[(T2, &[0, 1, 2, 4])])),
        ])
    );
}

#[test]
fn uniform_heterogeneous_constrained_topic_first() {
    // b alone subscribes to T2 (1 partition); T1 (4 partitions) is shared.
    // Balanced: a 2 of T1... b gets T2 and one fewer of T1.
    let s = spec(
        &[(T1, 4), (T2, 1)],
        &[
            ("a", None, &[T1], Assignment::new()),
            ("b", None, &[T1, T2], Assignment::new()),
        ],
    );
    let result = ServerAssignor::Uniform.assign(&s);
    assert_complete(&s, &result);
    let a = partition_count(&result["a"]);
    let b = partition_count(&result["b"]);
    assert!(a.abs_diff(b) <= 1, "a {a}, b {b}");
}

#[test]
fn uniform_heterogeneous_subscription_change_is_sticky() {
    // b stops subscribing to T1: its T1 partitions go to a, the only
    // subscriber left, which then has 6 to b's 2; balance on T2 moves a's T2
    // partitions to b. Balance comes before stickiness.
    let s = spec(
        &[(T1, 4), (T2, 4)],
        &[
            ("a", None, &[T1, T2], parts(&[(T1, &[0, 1]), (T2, &[0, 1])])),
            ("b", None, &[T2], parts(&[(T1, &[2, 3]), (T2, &[2, 3])])),
        ],
    );
    let result = ServerAssignor::Uniform.assign(&s);
    assert_complete(&s, &result);
    assert_eq!(result["a"], parts(&[(T1, &[0, 1, 2, 3])]));
    assert_eq!(result["b"], parts(&[(T2, &[0, 1, 2, 3])]));
}

// ---- range ----

#[test]
fn range_non_existent_topic_gets_nothing() {
    let s = spec(&[(T1, 3)], &[("a", None, &[T2], Assignment::new())]);
    assert_eq!(
        ServerAssignor::Range.assign(&s),
        expect(&[("a", Assignment::new())])
    );
}

#[test]
fn range_two_members_two_topics() {
    let s = spec(
        &[(T1, 3), (T3, 2)],
        &[
            ("a", None, &[T1, T3], Assignment::new()),
            ("b", None, &[T1, T3], Assignment::new()),
        ],
    );
    assert_eq!(
        ServerAssignor::Range.assign(&s),
        expect(&[
            ("a", parts(&[(T1, &[0, 1]), (T3, &[0])])),
            ("b", parts(&[(T1, &[2]), (T3, &[1])])),
        ])
    );
}

#[test]
fn range_co_partitions_topics_of_the_same_size() {
    let s = spec(
        &[(T1, 5), (T2, 5)],
        &[
            ("a", None, &[T1, T2], Assignment::new()),
            ("b", None, &[T1, T2], Assignment::new()),
            ("c", None, &[T1, T2], Assignment::new()),
        ],
    );
    let result = ServerAssignor::Range.assign(&s);
    assert_eq!(
        result,
        expect(&[
            ("a", parts(&[(T1, &[0, 1]), (T2, &[0, 1])])),
            ("b", parts(&[(T1, &[2, 3]), (T2, &[2, 3])])),
            ("c", parts(&[(T1, &[4]), (T2, &[4])])),
        ])
    );
}

#[test]
fn range_heterogeneous_subscriptions() {
    // T1: a only; T2: a, c; T3: b, c.
    let s = spec(
        &[(T1, 3), (T2, 3), (T3, 2)],
        &[
            ("a", None, &[T1, T2], Assignment::new()),
            ("b", None, &[T3], Assignment::new()),
            ("c", None, &[T2, T3], Assignment::new()),
        ],
    );
    assert_eq!(
        ServerAssignor::Range.assign(&s),
        expect(&[
            ("a", parts(&[(T1, &[0, 1, 2]), (T2, &[0, 1])])),
            ("b", parts(&[(T3, &[0])])),
            ("c", parts(&[(T2, &[2]), (T3, &[1])])),
        ])
    );
}

#[test]
fn range_more_members_than_partitions() {
    let s = spec(
        &[(T1, 2)],
        &[
            ("a", None, &[T1], Assignment::new()),
            ("b", None, &[T1], Assignment::new()),
            ("c", None, &[T1], Assignment::new()),
        ],
    );
    assert_eq!(
        ServerAssignor::Range.assign(&s),
        expect(&[
            ("a", parts(&[(T1, &[0])])),
            ("b", parts(&[(T1, &[1])])),
            ("c", Assignment::new()),
        ])
    );
}

#[test]
fn range_orders_static_members_by_instance_id_first() {
    // Member ids would put "m-a" first, but static members come first, by
    // instance id: "m-z" (i-1), "m-y" (i-2), then dynamic "m-a".
    let s = spec(
        &[(T1, 3)],
        &[
            ("m-a", None, &[T1], Assignment::new()),
            ("m-y", Some("i-2"), &[T1], Assignment::new()),
            ("m-z", Some("i-1"), &[T1], Assignment::new()),
        ],
    );
    assert_eq!(
        ServerAssignor::Range.assign(&s),
        expect(&[
            ("m-z", parts(&[(T1, &[0])])),
            ("m-y", parts(&[(T1, &[1])])),
            ("m-a", parts(&[(T1, &[2])])),
        ])
    );

    // The static members restart with new member ids: same ranges.
    let s = spec(
        &[(T1, 3)],
        &[
            ("m-a", None, &[T1], Assignment::new()),
            ("m-b", Some("i-2"), &[T1], Assignment::new()),
            ("m-c", Some("i-1"), &[T1], Assignment::new()),
        ],
    );
    let result = ServerAssignor::Range.assign(&s);
    assert_eq!(result["m-c"], parts(&[(T1, &[0])]));
    assert_eq!(result["m-b"], parts(&[(T1, &[1])]));
}

#[test]
fn assignor_names() {
    assert_eq!(
        ServerAssignor::from_name("uniform"),
        Some(ServerAssignor::Uniform)
    );
    assert_eq!(
        ServerAssignor::from_name("range"),
        Some(ServerAssignor::Range)
    );
    assert_eq!(ServerAssignor::from_name("sticky"), None);
    assert_eq!(ServerAssignor::Range.to_string(), "range");
}

// ---- target assignment builder ----

#[test]
fn target_builder_writes_only_changed_members_then_the_epoch() {
    let s = spec(
        &[(T1, 4)],
        &[
            ("a", None, &[T1], parts(&[(T1, &[0, 1])])),
            ("b", None, &[T1], parts(&[(T1, &[2, 3])])),
            ("c", None, &[T1], Assignment::new()),
        ],
    );
    let current: BTreeMap<String, Assignment> = [
        ("a".to_owned(), parts(&[(T1, &[0, 1])])),
        ("b".to_owned(), parts(&[(T1, &[2, 3])])),
    ]
    .into_iter()
    .collect();
    let result = build_target_assignment(ServerAssignor::Uniform, 7, &s, &current);
    // a gives one to c (ties go to the first member); b keeps its own.
    assert_eq!(result.assignment["b"], parts(&[(T1, &[2, 3])]));
    assert_eq!(
        result.records,
        vec![
            Record::TargetAssignmentMember {
                member_id: "a".into(),
                assignment: parts(&[(T1, &[0])]),
            },
            Record::TargetAssignmentMember {
                member_id: "c".into(),
                assignment: parts(&[(T1, &[1])]),
            },
            Record::TargetAssignmentMetadata {
                assignment_epoch: 7
            },
        ]
    );
}

// ---- properties of the uniform assignor ----

fn arb_spec() -> impl Strategy<Value = GroupSpec> {
    let topics = prop::collection::vec(0..12i32, 1..4);
    (topics, 1..6usize)
        .prop_flat_map(|(sizes, members)| {
            let n_topics = sizes.len();
            let member = (
                prop::collection::btree_set(0..n_topics, 0..=n_topics),
                prop::collection::vec((0..n_topics, 0..14i32), 0..8),
            );
            (Just(sizes), prop::collection::vec(member, members))
        })
        .prop_map(|(sizes, members)| {
            let mut claimed = BTreeSet::new();
            GroupSpec {
                topics: sizes
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        (
                            topic_id(i as u128 + 1),
                            TopicSpec {
                                name: format!("t{i}"),
                                partitions: *n,
                            },
                        )
                    })
                    .collect(),
                members: members
                    .into_iter()
                    .enumerate()
                    .map(|(i, (subscribed, owned))| {
                        // A target never gives a partition to two members: the
                        // first member to claim one keeps it.
                        let owned: Vec<(usize, i32)> =
                            owned.into_iter().filter(|tp| claimed.insert(*tp)).collect();
                        (
                            format!("m{i}"),
                            MemberSpec {
                                instance_id: None,
                                rack_id: None,
                                subscribed_topics: subscribed
                                    .into_iter()
                                    .map(|t| topic_id(t as u128 + 1))
                                    .collect(),
                                assignment: assignment_from(
                                    owned
                                        .into_iter()
                                        .map(|(t, p)| (topic_id(t as u128 + 1), [p])),
                                ),
                            },
                        )
                    })
                    .collect(),
            }
        })
}

proptest! {
    /// Complete, balanced among members with the same subscription, and, for
    /// a homogeneous group, as sticky as balance allows.
    #[test]
    fn uniform_is_complete_balanced_and_sticky(spec in arb_spec()) {
        let result = ServerAssignor::Uniform.assign(&spec);
        prop_assert_eq!(result.len(), spec.members.len());
        assert_complete(&spec, &result);

        let members: Vec<(&String, &MemberSpec)> = spec.members.iter().collect();
        for (a, ma) in &members {
            for (b, mb) in &members {
                if ma.subscribed_topics == mb.subscribed_topics {
                    let (ca, cb) = (partition_count(&result[*a]), partition_count(&result[*b]));
                    prop_assert!(ca <= cb + 1, "{} has {} and {} has {}", a, ca, b, cb);
                }
            }
        }

        let homogeneous = members.windows(2).all(|w| w[0].1.subscribed_topics == w[1].1.subscribed_topics);
        if homogeneous && !members.is_empty() {
            // What each member could keep: its valid, unclaimed partitions.
            let mut claimed = BTreeSet::new();
            let mut kept = Vec::new();
            for (_, m) in &members {
                let mut n = 0usize;
                for (topic, partitions) in &m.assignment {
                    let Some(size) = spec.topics.get(topic).map(|t| t.partitions) else { continue };
                    if !m.subscribed_topics.contains(topic) { continue; }
                    for p in partitions {
                        if (0..size).contains(p) && claimed.insert((*topic, *p)) { n += 1; }
                    }
                }
                kept.push(n);
            }
            let total: usize = members[0].1.subscribed_topics.iter()
                .filter_map(|t| spec.topics.get(t))
                .map(|t| t.partitions.max(0) as usize)
                .sum();
            let (q, r) = (total / members.len(), total % members.len());
            // The most partitions any balanced assignment keeps: the r members
            // that kept the most may hold q + 1.
            let mut sorted = kept.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            let best: usize = sorted.iter().enumerate()
                .map(|(i, k)| (*k).min(if i < r { q + 1 } else { q }))
                .sum();
            let actual: usize = members.iter().map(|(id, m)| {
                result[*id].iter().map(|(t, ps)| ps.iter().filter(|p| contains(&m.assignment, *t, **p)).count()).sum::<usize>()
            }).sum();
            prop_assert_eq!(actual, best, "kept {} partitions where {} could stay", actual, best);
        }
    }

    /// Range: complete, and each topic's subscribers get contiguous ranges
    /// whose sizes differ by at most one.
    #[test]
    fn range_is_complete_with_contiguous_ranges(spec in arb_spec()) {
        let result = ServerAssignor::Range.assign(&spec);
        assert_complete(&spec, &result);
        for topic in spec.topics.keys() {
            let sizes: Vec<usize> = result.values().filter_map(|a| a.get(topic)).map(|p| {
                let (first, last) = (*p.first().unwrap(), *p.last().unwrap());
                assert_eq!((last - first + 1) as usize, p.len(), "not contiguous");
                p.len()
            }).collect();
            if let (Some(min), Some(max)) = (sizes.iter().min(), sizes.iter().max()) {
                prop_assert!(max - min <= 1);
            }
        }
    }
}
