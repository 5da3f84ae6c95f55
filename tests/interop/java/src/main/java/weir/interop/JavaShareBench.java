package weir.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Share-group consume throughput with the reference client (run through
 * scripts/bench-share-java.sh): RECORDS records of VALUE_BYTES bytes in one
 * partition, read by a classic KafkaConsumer assigned it, then by new share
 * groups of 1, 4 and 16 KafkaShareConsumers (a thread each, implicit
 * acknowledgement) until the group has every record. Prints records/s,
 * the ratio to the classic consumer, and how many records came twice.
 */
public final class JavaShareBench {
    private static final String TOPIC = "bench-share-java";

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int records = Integer.parseInt(System.getenv().getOrDefault("BENCH_RECORDS", "1000000"));
        int valueBytes = Integer.parseInt(System.getenv().getOrDefault("BENCH_VALUE_BYTES", "100"));
        String[] counts = System.getenv().getOrDefault("BENCH_CONSUMERS", "1,4,16").split(",");
        produce(bootstrap, records, valueBytes);
        double classic = classic(bootstrap, records);
        double mb = (double) records * valueBytes / 1e6;
        System.out.printf("records: %d x %d B, one partition%n", records, valueBytes);
        System.out.println("| reader | records/s | MB/s (values) | vs classic | delivered twice |");
        System.out.println("|---|---:|---:|---:|---:|");
        System.out.printf("| classic KafkaConsumer | %,.0f | %.1f | 1.00 | — |%n", records / classic, mb / classic);
        for (String count : counts) {
            int n = Integer.parseInt(count.trim());
            long[] twice = new long[1];
            double elapsed = share(bootstrap, records, n, twice);
            System.out.printf(
                    "| share group, %d KafkaShareConsumer%s | %,.0f | %.1f | %.2f | %d |%n",
                    n, n > 1 ? "s" : "", records / elapsed, mb / elapsed, classic / elapsed, twice[0]);
        }
    }

    private static Properties client(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return p;
    }

    private static void produce(String bootstrap, int records, int valueBytes) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(TOPIC, 1, (short) 1))).all().get();
        }
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("linger.ms", "5");
        p.put("batch.size", "262144");
        byte[] value = new byte[valueBytes];
        java.util.Arrays.fill(value, (byte) 'x');
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(TOPIC, 0, Integer.toString(i).getBytes(), value));
            }
            producer.flush();
        }
    }

    /** Seconds a classic consumer takes to read every record from the start. */
    private static double classic(String bootstrap, int records) {
        Properties p = client(bootstrap);
        p.put("group.id", "bench-" + UUID.randomUUID());
        p.put("enable.auto.commit", "false");
        TopicPartition partition = new TopicPartition(TOPIC, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long got = 0;
            long start = System.nanoTime();
            while (got < records) {
                got += consumer.poll(Duration.ofSeconds(1)).count();
            }
            return (System.nanoTime() - start) / 1e9;
        }
    }

    /** Seconds a new share group of `n` consumers takes to receive every record. */
    private static double share(String bootstrap, int records, int n, long[] twice) throws Exception {
        String group = "bench-share-" + n + "-" + UUID.randomUUID();
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp earliest = new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(earliest))).all().get();
        }
        Map<String, Boolean> seen = new ConcurrentHashMap<>();
        AtomicLong received = new AtomicLong();
        AtomicLong repeated = new AtomicLong();
        AtomicBoolean done = new AtomicBoolean();
        long start = System.nanoTime();
        List<Thread> members = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Thread member = new Thread(() -> {
                Properties c = client(bootstrap);
                c.put("group.id", group);
                try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(c)) {
                    consumer.subscribe(List.of(TOPIC));
                    while (!done.get()) {
                        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                            if (seen.putIfAbsent(new String(record.key()), Boolean.TRUE) != null) {
                                repeated.incrementAndGet();
                            } else if (received.incrementAndGet() >= records) {
                                done.set(true);
                            }
                        }
                    }
                    // close() releases what the last poll returned rather than
                    // accepting it, even in implicit mode: accept it first.
                    consumer.commitSync();
                }
            });
            member.start();
            members.add(member);
        }
        long deadline = start + Duration.ofMinutes(10).toNanos();
        while (!done.get() && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        double elapsed = (System.nanoTime() - start) / 1e9;
        done.set(true);
        for (Thread member : members) {
            member.join();
        }
        if (received.get() < records) {
            throw new IllegalStateException(n + " share consumers received " + received.get() + " of " + records);
        }
        twice[0] = repeated.get();
        return elapsed;
    }
}
