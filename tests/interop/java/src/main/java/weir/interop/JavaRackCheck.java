package weir.interop;

import static weir.interop.Checks.expect;
import static weir.interop.Checks.expectEq;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Fetch from follower (KIP-392) with the Java client against three weir nodes in racks a, b and c
 * whose replica.selector.class is Kafka's RackAwareReplicaSelector.
 *
 * <p>Usage: JavaRackCheck BOOTSTRAP HTTP1 HTTP2 HTTP3 (node i's HTTP address, for /metrics)
 *
 * <p>Checks: a KafkaConsumer with client.rack=b reads every record of a partition led by node 1
 * (rack a) from node 2, the follower in its rack, and none from the leader or node 3, as each
 * node's weir_consumer_bytes_out_total shows; with client.rack=a it reads from the leader.
 */
public final class JavaRackCheck {
  private static final String TOPIC = "java-rack";
  private static final int RECORDS = 500;
  private static final int TIMEOUT_MS = 30_000;

  private final String bootstrap;
  private final List<String> http;
  private final Admin admin;
  private final HttpClient client = HttpClient.newHttpClient();
  private final Checks checks = new Checks("JavaRackCheck", 150);
  private final List<String> produced = new ArrayList<>();

  private JavaRackCheck(String bootstrap, List<String> http) {
    this.bootstrap = bootstrap;
    this.http = http;
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    this.admin = Admin.create(p);
  }

  public static void main(String[] args) {
    if (args.length != 4) {
      System.err.println("usage: JavaRackCheck BOOTSTRAP HTTP1 HTTP2 HTTP3");
      System.exit(64);
    }
    new JavaRackCheck(args[0], List.of(args[1], args[2], args[3])).runAll();
  }

  private void runAll() {
    if (checks.run("a partition led by node 1 (rack a), replicated to nodes 2 and 3", this::setUp)) {
      checks.run(
          "KafkaConsumer with client.rack=b reads every record from the follower in rack b",
          () -> readsFrom("b", 2));
      checks.run(
          "KafkaConsumer with client.rack=a (the leader's) reads every record from the leader",
          () -> readsFrom("a", 1));
    }
    admin.close(Duration.ofSeconds(5));
    checks.finish();
  }

  private void setUp() throws Exception {
    admin.createTopics(List.of(new NewTopic(TOPIC, Map.of(0, List.of(1, 2, 3))))).all().get();
    awaitAllInSync();
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      for (int i = 0; i < RECORDS; i++) {
        String value = "rack-" + i;
        producer.send(new ProducerRecord<>(TOPIC, 0, value, value));
        produced.add(value);
      }
      producer.flush();
    }
    awaitAllInSync();
  }

  private void awaitAllInSync() throws Exception {
    long deadline = System.currentTimeMillis() + TIMEOUT_MS;
    while (true) {
      TopicDescription topic = admin.describeTopics(List.of(TOPIC)).allTopicNames().get().get(TOPIC);
      TopicPartitionInfo p = topic.partitions().get(0);
      if (p.leader() != null && p.leader().id() == 1 && p.isr().size() == 3) {
        return;
      }
      expect(System.currentTimeMillis() < deadline, "never led by node 1 with 3 in sync: " + p);
      Thread.sleep(200);
    }
  }

  /** Reads the partition with client.rack=rack; only node `server` may send it records. */
  private void readsFrom(String rack, int server) throws Exception {
    long[] before = servedByEachNode();
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.CLIENT_RACK_CONFIG, rack);
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    List<String> values = new ArrayList<>();
    try (KafkaConsumer<String, String> consumer =
        new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
      TopicPartition tp = new TopicPartition(TOPIC, 0);
      consumer.assign(List.of(tp));
      consumer.seekToBeginning(List.of(tp));
      long deadline = System.currentTimeMillis() + TIMEOUT_MS;
      while (values.size() < RECORDS && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          values.add(r.value());
        }
      }
    }
    expectEq(values, produced, "records read");
    long[] after = servedByEachNode();
    long[] served = new long[3];
    for (int i = 0; i < 3; i++) {
      served[i] = after[i] - before[i];
    }
    Checks.note(
        "client.rack=" + rack + ": record bytes served by nodes 1, 2, 3: "
            + served[0] + ", " + served[1] + ", " + served[2]);
    for (int node = 1; node <= 3; node++) {
      if (node == server) {
        expect(served[node - 1] > 0, "node " + node + " served nothing");
      } else {
        expectEq(served[node - 1], 0L, "record bytes node " + node + " served");
      }
    }
  }

  private long[] servedByEachNode() throws Exception {
    long[] served = new long[3];
    String series = "weir_consumer_bytes_out_total{topic=\"" + TOPIC + "\",partition=\"0\"} ";
    for (int i = 0; i < 3; i++) {
      HttpRequest request = HttpRequest.newBuilder(URI.create("http://" + http.get(i) + "/metrics")).build();
      String body = client.send(request, HttpResponse.BodyHandlers.ofString()).body();
      Optional<String> line = body.lines().filter(l -> l.startsWith(series)).findFirst();
      served[i] = line.map(l -> Long.parseLong(l.substring(series.length()).trim())).orElse(0L);
    }
    return served;
  }
}
