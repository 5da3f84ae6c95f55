package weir.interop;

import static weir.interop.Checks.expect;
import static weir.interop.Checks.expectEq;
import static weir.interop.Checks.expectThrows;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.stream.Collectors;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client (org.apache.kafka:kafka-clients) against weir's SASL_SSL listener.
 *
 * <p>Usage: {@code java -cp ... weir.interop.JavaSecurityCheck}, with the listener, CA and
 * credentials in the environment (tests/interop/run.sh sets them):
 *
 * <pre>
 * INTEROP_SASL_SSL_BOOTSTRAP  HOST:PORT of the SASL_SSL listener
 * INTEROP_CA_FILE             PEM of the CA that signed the broker's certificate
 * INTEROP_SCRAM_SHA512_USER   USER:PASSWORD of a SCRAM-SHA-512 user
 * INTEROP_SCRAM_SHA256_USER   USER:PASSWORD of a SCRAM-SHA-256 user
 * </pre>
 *
 * <ul>
 *   <li>SCRAM-SHA-512 (ScramLoginModule in sasl.jaas.config) over SASL_SSL, trusting the CA
 *       through a PEM truststore: the Admin creates a topic and describes the cluster (the broker
 *       at the SASL_SSL address); an idempotent producer writes keyed records, a consumer reads
 *       them back.
 *   <li>Admin describeUserScramCredentials: both users, each with its mechanism.
 *   <li>A wrong password: the Admin and the producer fail with SaslAuthenticationException.
 * </ul>
 */
public final class JavaSecurityCheck {
  private static final int TIMEOUT_MS = 15_000;
  private static final Duration TIMEOUT = Duration.ofMillis(TIMEOUT_MS);
  private static final int DEADLINE_S = 90;
  private static final String TOPIC = "java-sec-scram";
  private static final int N = 50;

  private final String bootstrap;
  private final String caFile;
  private final String[] sha512;
  private final String[] sha256;
  private final Checks checks = new Checks("java_security_check", DEADLINE_S);

  private JavaSecurityCheck(Map<String, String> env) {
    bootstrap = env.get("INTEROP_SASL_SSL_BOOTSTRAP");
    caFile = env.get("INTEROP_CA_FILE");
    sha512 = env.get("INTEROP_SCRAM_SHA512_USER").split(":", 2);
    sha256 = env.get("INTEROP_SCRAM_SHA256_USER").split(":", 2);
  }

  public static void main(String[] args) {
    List<String> missing = new ArrayList<>();
    for (String v :
        List.of("INTEROP_SASL_SSL_BOOTSTRAP", "INTEROP_CA_FILE", "INTEROP_SCRAM_SHA512_USER", "INTEROP_SCRAM_SHA256_USER")) {
      String value = System.getenv(v);
      if (value == null || value.isEmpty()) {
        missing.add(v);
      }
    }
    if (args.length != 0 || !missing.isEmpty()) {
      System.err.println("usage: JavaSecurityCheck, with " + String.join(", ", missing) + " set (tests/interop/run.sh does)");
      System.exit(64);
    }
    new JavaSecurityCheck(System.getenv()).runAll();
  }

  private void runAll() {
    boolean created =
        checks.run(
            "SASL_SSL SCRAM-SHA-512 (" + sha512[0] + "): admin createTopics and describeCluster",
            this::createTopic);
    if (created) {
      checks.run(
          "SASL_SSL SCRAM-SHA-512 (" + sha512[0] + "): idempotent producer and consumer",
          this::produceConsume);
    }
    checks.run("SASL_SSL admin: describeUserScramCredentials lists both users", this::describeScram);
    checks.run("SASL_SSL SCRAM-SHA-512 with a wrong password: SaslAuthenticationException", this::wrongPassword);
    checks.finish();
  }

  // ---------------------------------------------------------------- clients

  /** SASL_SSL with SCRAM-SHA-512 as user:password, the CA as a PEM truststore. */
  private Properties secured(String user, String password) {
    Properties p = new Properties();
    p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_SSL");
    p.put(SaslConfigs.SASL_MECHANISM, "SCRAM-SHA-512");
    p.put(
        SaslConfigs.SASL_JAAS_CONFIG,
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
            + user
            + "\" password=\""
            + password
            + "\";");
    p.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
    p.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, caFile);
    return p;
  }

  private Admin admin(String user, String password) {
    Properties p = secured(user, password);
    p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    return Admin.create(p);
  }

  private KafkaProducer<String, String> producer(String user, String password) {
    Properties p = secured(user, password);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 2 * TIMEOUT_MS);
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, TIMEOUT_MS);
    return new KafkaProducer<>(p);
  }

  private KafkaConsumer<String, String> consumer(String user, String password) {
    Properties p = secured(user, password);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    return new KafkaConsumer<>(p);
  }

  // ---------------------------------------------------------------- checks

  private void createTopic() throws Exception {
    try (Admin admin = admin(sha512[0], sha512[1])) {
      admin.createTopics(List.of(new NewTopic(TOPIC, 2, (short) 1))).all().get();
      List<Node> nodes = new ArrayList<>(admin.describeCluster().nodes().get());
      String want = bootstrap;
      expectEq(
          nodes.stream().map(n -> n.id() + "@" + n.host() + ":" + n.port()).collect(Collectors.toList()),
          List.of("1@" + want),
          "describeCluster nodes (the SASL_SSL listener's address)");
      expect(admin.listTopics().names().get().contains(TOPIC), TOPIC + " missing from listTopics");
    }
  }

  private void produceConsume() throws Exception {
    Map<Integer, List<String>> sent = new TreeMap<>();
    try (KafkaProducer<String, String> producer = producer(sha512[0], sha512[1])) {
      List<Future<RecordMetadata>> futures = new ArrayList<>();
      for (int i = 0; i < N; i++) {
        futures.add(producer.send(new ProducerRecord<>(TOPIC, "key-" + i, "value-" + i)));
      }
      producer.flush();
      for (int i = 0; i < N; i++) {
        RecordMetadata md = futures.get(i).get();
        sent.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add("value-" + i);
      }
    }
    Map<Integer, List<String>> got = new TreeMap<>();
    try (KafkaConsumer<String, String> consumer = consumer(sha512[0], sha512[1])) {
      List<TopicPartition> tps = List.of(new TopicPartition(TOPIC, 0), new TopicPartition(TOPIC, 1));
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      int count = 0;
      long deadline = System.nanoTime() + TIMEOUT.toNanos();
      while (count < N && System.nanoTime() < deadline) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
          count++;
        }
      }
    }
    expectEq(got, sent, "records read back per partition, in order");
  }

  private void describeScram() throws Exception {
    try (Admin admin = admin(sha512[0], sha512[1])) {
      Map<String, UserScramCredentialsDescription> all = admin.describeUserScramCredentials().all().get();
      Map<String, List<String>> mechanisms = new TreeMap<>();
      for (UserScramCredentialsDescription d : all.values()) {
        List<String> ms = new ArrayList<>();
        for (ScramCredentialInfo info : d.credentialInfos()) {
          expect(info.iterations() >= 4096, d.name() + " " + info.mechanism() + ": iterations " + info.iterations());
          ms.add(info.mechanism().mechanismName());
        }
        mechanisms.put(d.name(), ms);
      }
      expectEq(
          mechanisms,
          new TreeMap<>(Map.of(sha512[0], List.of("SCRAM-SHA-512"), sha256[0], List.of("SCRAM-SHA-256"))),
          "users and their mechanisms");
      // Asked by name, too.
      Map<String, UserScramCredentialsDescription> one =
          admin.describeUserScramCredentials(List.of(sha256[0])).all().get();
      expectEq(one.keySet(), java.util.Set.of(sha256[0]), "describeUserScramCredentials([" + sha256[0] + "])");
    }
  }

  private void wrongPassword() throws Exception {
    long started = System.nanoTime();
    try (Admin admin = admin(sha512[0], "not-the-password")) {
      expectThrows(
          SaslAuthenticationException.class, () -> admin.listTopics().names().get(), "admin listTopics");
    }
    try (KafkaProducer<String, String> producer = producer(sha512[0], "not-the-password")) {
      expectThrows(
          SaslAuthenticationException.class,
          () -> producer.send(new ProducerRecord<>(TOPIC, "never")).get(),
          "producer send");
    }
    double took = (System.nanoTime() - started) / 1e9;
    expect(took < TIMEOUT_MS / 1000.0, String.format("the refused clients took %.1f s", took));
  }
}
