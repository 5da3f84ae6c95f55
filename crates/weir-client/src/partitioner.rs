//! The Java client's default partitioner for keyed records, so that a key
//! lands on the same partition whichever client produced it.

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`): the
/// 32-bit MurmurHash2 with seed `0x9747b28c`, as a signed Java `int`.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java computes `seed ^ length` on ints: only the low 32 bits of the
    // length count.
    let mut h = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`).
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition the Java producer's default partitioner picks for a
/// record with this key: `toPositive(murmur2(key)) % partitions`.
///
/// # Panics
///
/// If `partitions` is not positive.
pub fn murmur2_partition(key: &[u8], partitions: i32) -> i32 {
    assert!(partitions > 0, "a topic has at least one partition");
    to_positive(murmur2(key)) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From Kafka's `UtilsTest.testMurmur2` (clients/src/test/java/org/
    /// apache/kafka/common/utils/UtilsTest.java), plus the Java values other
    /// clients test against, covering every tail length (0-3 bytes).
    const JAVA_MURMUR2: &[(&str, i32)] = &[
        ("21", -973_932_308),
        ("foobar", -790_332_482),
        ("a-little-bit-long-string", -985_981_536),
        ("a-little-bit-longer-string", -1_486_304_829),
        (
            "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            -58_897_971,
        ),
        ("abc", 479_470_107),
        ("1", -1_993_445_489),
        ("12", 126_087_238),
        ("123", -267_702_483),
        ("1234", -1_614_185_708),
        ("12345", -1_188_365_604),
        ("string-f-24-chars-length", 124_730_809),
        ("string-fo-25-chars-length", 1_269_511_650),
        ("string-foo-26-chars-length", 119_165_628),
        ("string-last-27-chars-length", 1_089_971_754),
        ("kafka", -798_503_068),
    ];

    #[test]
    fn murmur2_matches_the_java_client() {
        for &(input, expected) in JAVA_MURMUR2 {
            assert_eq!(murmur2(input.as_bytes()), expected, "murmur2({input:?})");
        }
    }

    #[test]
    fn to_positive_clears_the_sign_bit() {
        assert_eq!(to_positive(-973_932_308), 1_173_551_340);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(42), 42);
    }

    #[test]
    fn partition_is_to_positive_murmur2_modulo() {
        // toPositive(-790332482) = 1357151166; toPositive(479470107) is itself.
        assert_eq!(murmur2_partition(b"foobar", 10), 6);
        assert_eq!(murmur2_partition(b"foobar", 1), 0);
        assert_eq!(murmur2_partition(b"abc", 2), 1);
        assert_eq!(murmur2_partition(b"abc", 6), 3);
        assert_eq!(murmur2_partition(b"abc", 10), 7);
        assert_eq!(murmur2_partition(b"a-little-bit-long-string", 3), 2);
        assert_eq!(murmur2_partition(b"a-little-bit-long-string", 12), 8);
    }

    #[test]
    fn positive_hashes_match_librdkafka() {
        // librdkafka's murmur2 partitioner unit test (src/rdmurmur2.c)
        // checks toPositive(murmur2(key)) against the Java client.
        for (key, expected) in [
            ("kafka", 1_348_980_580),
            ("amqp", 767_747_138),
            ("giberish123456789", 257_239_820),
        ] {
            assert_eq!(to_positive(murmur2(key.as_bytes())), expected, "{key}");
        }
    }
}
