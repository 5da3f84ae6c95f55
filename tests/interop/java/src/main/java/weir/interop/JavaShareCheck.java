package weir.interop;

import static weir.interop.Checks.expect;
import static weir.interop.Checks.expectEq;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share groups (KIP-932) with the Java client's KafkaShareConsumer and Admin against weir.
 *
 * <p>Usage: JavaShareCheck HOST:PORT
 *
 * <p>Checks: two KafkaShareConsumers of one partition get disjoint records and together all of
 * them; a consumer closed without a commit gives back only what it had not accepted; a rejected record lands in the group's dead-letter topic (KIP-1191); Admin lists and
 * describes the share group, lists its start offsets, alters them while it is empty (the records
 * come again) and deletes it.
 */
public final class JavaShareCheck {
  private static final String TOPIC = "java-share";
  private static final String GROUP = "java-share-group";
  private static final String CLOSING_GROUP = "java-share-closing";
  private static final String DLQ = "dlq.java-share";
  private static final int RECORDS = 200;
  private static final int TIMEOUT_MS = 30_000;

  private final String bootstrap;
  private final Admin admin;
  private final Checks checks = new Checks("JavaShareCheck", 150);

  private JavaShareCheck(String bootstrap) {
    this.bootstrap = bootstrap;
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    this.admin = Admin.create(p);
  }

  public static void main(String[] args) {
    if (args.length != 1 || !args[0].contains(":")) {
      System.err.println("usage: JavaShareCheck HOST:PORT");
      System.exit(64);
    }
    new JavaShareCheck(args[0]).runAll();
  }

  private void runAll() {
    boolean ready = checks.run("share group: topics, dead-letter topic and group configs", this::setUp);
    if (ready) {
      boolean shared =
          checks.run(
              "KafkaShareConsumer: two consumers of one partition get disjoint records, all of them",
              this::twoConsumersShareAPartition);
      checks.run(
          "KafkaShareConsumer: closed without a commit, it gives back only what it had not accepted",
          this::closeGivesBackOnlyWhatWasNotAccepted);
      checks.run(
          "KafkaShareConsumer: a rejected record lands in the dead-letter topic, with its headers",
          this::rejectedRecordIsDeadLettered);
      if (shared) {
        checks.run(
            "admin: listGroups, describeShareGroups and listShareGroupOffsets", this::describeGroup);
        checks.run(
            "admin: alterShareGroupOffsets on an empty group redelivers from the new offset",
            this::alterOffsets);
        checks.run("admin: deleteShareGroups", this::deleteGroup);
      }
    }
    admin.close(Duration.ofSeconds(5));
    checks.finish();
  }

  private void setUp() throws Exception {
    admin
        .createTopics(
            List.of(
                new NewTopic(TOPIC, 1, (short) 1),
                new NewTopic(DLQ, 1, (short) 1)
                    .configs(Map.of("errors.deadletterqueue.group.enable", "true"))))
        .all()
        .get();
    ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, GROUP);
    ConfigResource closing = new ConfigResource(ConfigResource.Type.GROUP, CLOSING_GROUP);
    AlterConfigOp earliest =
        new AlterConfigOp(
            new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
    List<AlterConfigOp> ops = new ArrayList<>();
    for (Map.Entry<String, String> e :
        Map.of(
                "share.auto.offset.reset", "earliest",
                "errors.deadletterqueue.topic.name", DLQ,
                "errors.deadletterqueue.copy.record.enable", "true")
            .entrySet()) {
      ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
    }
    admin.incrementalAlterConfigs(Map.of(group, ops, closing, List.of(earliest))).all().get();
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      // Batches of ten: a share fetch acquires whole batches (max.poll.records
      // is a soft limit), so one batch of all would go to one consumer.
      for (int i = 0; i < RECORDS; i++) {
        producer.send(new ProducerRecord<>(TOPIC, 0, "k" + i, "v" + i));
        if (i % 10 == 9) {
          producer.flush();
        }
      }
    }
  }

  private KafkaShareConsumer<String, String> shareConsumer(boolean explicit) {
    return shareConsumer(GROUP, explicit);
  }

  private KafkaShareConsumer<String, String> shareConsumer(String group, boolean explicit) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 20);
    if (explicit) {
      p.put("share.acknowledgement.mode", "explicit");
    }
    KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p);
    consumer.subscribe(List.of(TOPIC));
    return consumer;
  }

  /** Polls both consumers in turn until `wanted` records came, or the deadline. */
  private static List<List<String>> pollBoth(
      KafkaShareConsumer<String, String> a, KafkaShareConsumer<String, String> b, int wanted) {
    List<List<String>> got = List.of(new ArrayList<>(), new ArrayList<>());
    long deadline = System.currentTimeMillis() + 40_000;
    List<KafkaShareConsumer<String, String>> consumers = List.of(a, b);
    while (got.get(0).size() + got.get(1).size() < wanted && System.currentTimeMillis() < deadline) {
      for (int i = 0; i < 2; i++) {
        for (ConsumerRecord<String, String> r : consumers.get(i).poll(Duration.ofMillis(200))) {
          got.get(i).add(r.value());
        }
        consumers.get(i).commitSync();
      }
    }
    return got;
  }

  private void twoConsumersShareAPartition() {
    try (KafkaShareConsumer<String, String> a = shareConsumer(false);
        KafkaShareConsumer<String, String> b = shareConsumer(false)) {
      List<List<String>> got = pollBoth(a, b, RECORDS);
      Set<String> first = new HashSet<>(got.get(0));
      Set<String> both = new HashSet<>(first);
      both.retainAll(got.get(1));
      expect(both.isEmpty(), "records delivered to both consumers: " + both);
      Set<String> all = new TreeSet<>(got.get(0));
      all.addAll(got.get(1));
      expectEq(all.size(), RECORDS, "distinct records delivered");
      expectEq(got.get(0).size() + got.get(1).size(), RECORDS, "deliveries (none twice)");
      expect(!got.get(0).isEmpty() && !got.get(1).isEmpty(), "one consumer got nothing: " + got);
    }
  }

  /**
   * The client's close() sends no acknowledgement for the last poll, even in implicit mode: its
   * records go back to the group when the share session ends, at once (well before the 30 s
   * lock), each delivered once more. What a commit accepted before never comes again.
   */
  private void closeGivesBackOnlyWhatWasNotAccepted() {
    Set<String> accepted = new TreeSet<>();
    Set<String> unaccepted = new TreeSet<>();
    try (KafkaShareConsumer<String, String> a = shareConsumer(CLOSING_GROUP, false)) {
      pollUntilSome(a).forEach(r -> accepted.add(r.value()));
      a.commitSync();
      pollUntilSome(a).forEach(r -> unaccepted.add(r.value()));
    }
    expect(!accepted.isEmpty() && !unaccepted.isEmpty(), "the first consumer got too little");
    Map<String, Integer> deliveries = new HashMap<>();
    try (KafkaShareConsumer<String, String> b = shareConsumer(CLOSING_GROUP, false)) {
      long deadline = System.currentTimeMillis() + 20_000;
      while (!deliveries.keySet().containsAll(unaccepted)
          && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : b.poll(Duration.ofMillis(200))) {
          deliveries.put(r.value(), r.deliveryCount().orElse((short) 0).intValue());
        }
        b.commitSync();
      }
    }
    Set<String> again = new TreeSet<>(accepted);
    again.retainAll(deliveries.keySet());
    expect(again.isEmpty(), "accepted records delivered again: " + again);
    for (String value : unaccepted) {
      expectEq(deliveries.get(value), 2, "delivery count of unaccepted " + value);
    }
  }

  private static List<ConsumerRecord<String, String>> pollUntilSome(
      KafkaShareConsumer<String, String> consumer) {
    List<ConsumerRecord<String, String>> got = new ArrayList<>();
    long deadline = System.currentTimeMillis() + 20_000;
    while (got.isEmpty() && System.currentTimeMillis() < deadline) {
      consumer.poll(Duration.ofMillis(200)).forEach(got::add);
    }
    return got;
  }

  private void rejectedRecordIsDeadLettered() throws Exception {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      producer.send(new ProducerRecord<>(TOPIC, 0, "poison-key", "poison")).get();
    }
    try (KafkaShareConsumer<String, String> consumer = shareConsumer(true)) {
      boolean rejected = false;
      long deadline = System.currentTimeMillis() + 20_000;
      while (!rejected && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(300))) {
          consumer.acknowledge(r, "poison".equals(r.value()) ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT);
          rejected |= "poison".equals(r.value());
        }
        consumer.commitSync();
      }
      expect(rejected, "the poison record was never delivered");
    }
    Properties c = new Properties();
    c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    c.put(ConsumerConfig.GROUP_ID_CONFIG, "java-share-dlq-reader");
    c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    try (KafkaConsumer<String, String> reader = new KafkaConsumer<>(c)) {
      reader.assign(List.of(new TopicPartition(DLQ, 0)));
      List<ConsumerRecord<String, String>> letters = new ArrayList<>();
      long deadline = System.currentTimeMillis() + 20_000;
      while (letters.isEmpty() && System.currentTimeMillis() < deadline) {
        reader.poll(Duration.ofMillis(300)).forEach(letters::add);
      }
      expectEq(letters.size(), 1, "dead letters");
      ConsumerRecord<String, String> letter = letters.get(0);
      expectEq(letter.key(), "poison-key", "the dead letter's key");
      expectEq(letter.value(), "poison", "the dead letter's value");
      Map<String, String> headers = new HashMap<>();
      for (Header h : letter.headers()) {
        headers.put(h.key(), new String(h.value(), StandardCharsets.UTF_8));
      }
      expectEq(headers.get("__dlq.errors.topic"), TOPIC, "source topic header");
      expectEq(headers.get("__dlq.errors.offset"), String.valueOf(RECORDS), "source offset header");
      expectEq(headers.get("__dlq.errors.group.id"), GROUP, "group header");
      expectEq(headers.get("__dlq.errors.reason"), "REJECTED", "reason header");
    }
  }

  private void describeGroup() throws Exception {
    Collection<GroupListing> listed = admin.listGroups(ListGroupsOptions.forShareGroups()).all().get();
    expect(
        listed.stream().anyMatch(g -> g.groupId().equals(GROUP)),
        "listGroups(forShareGroups) lacks " + GROUP + ": " + listed);
    ShareGroupDescription described =
        admin.describeShareGroups(List.of(GROUP)).describedGroups().get(GROUP).get();
    expectEq(described.groupState(), GroupState.EMPTY, "state of the group with no consumers");
    // The rejected record is archived once its dead letter is written.
    long deadline = System.currentTimeMillis() + 10_000;
    SharePartitionOffsetInfo info;
    do {
      Map<TopicPartition, SharePartitionOffsetInfo> offsets =
          admin
              .listShareGroupOffsets(
                  Map.of(
                      GROUP,
                      new ListShareGroupOffsetsSpec()
                          .topicPartitions(List.of(new TopicPartition(TOPIC, 0)))))
              .partitionsToOffsetInfo(GROUP)
              .get();
      info = offsets.get(new TopicPartition(TOPIC, 0));
      expect(info != null, "no start offset of " + TOPIC + "-0: " + offsets);
    } while (info.startOffset() != RECORDS + 1 && System.currentTimeMillis() < deadline);
    expectEq(info.startOffset(), (long) RECORDS + 1, "start offset after every record settled");
  }

  private void alterOffsets() throws Exception {
    admin
        .alterShareGroupOffsets(GROUP, Map.of(new TopicPartition(TOPIC, 0), (long) RECORDS - 10))
        .all()
        .get();
    try (KafkaShareConsumer<String, String> a = shareConsumer(false);
        KafkaShareConsumer<String, String> b = shareConsumer(false)) {
      List<List<String>> got = pollBoth(a, b, 11);
      Set<String> all = new TreeSet<>(got.get(0));
      all.addAll(got.get(1));
      Set<String> wanted = new TreeSet<>();
      for (int i = RECORDS - 10; i < RECORDS; i++) {
        wanted.add("v" + i);
      }
      wanted.add("poison");
      expectEq(all, wanted, "records delivered again from the new start offset");
    }
  }

  private void deleteGroup() throws Exception {
    admin.deleteShareGroups(List.of(GROUP)).all().get();
    Collection<GroupListing> listed = admin.listGroups(ListGroupsOptions.forShareGroups()).all().get();
    expect(
        listed.stream().noneMatch(g -> g.groupId().equals(GROUP)),
        "the deleted group is still listed: " + listed);
  }
}
