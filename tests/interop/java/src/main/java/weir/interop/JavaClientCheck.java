package weir.interop;

import static weir.interop.Checks.expect;
import static weir.interop.Checks.expectEq;
import static weir.interop.Checks.expectThrows;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.errors.InvalidUpdateVersionException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client (org.apache.kafka:kafka-clients) against a running weir broker.
 *
 * <p>Usage: {@code java -cp ... weir.interop.JavaClientCheck HOST:PORT}
 *
 * <ul>
 *   <li>Admin: describeCluster; describeFeatures, and updateFeatures (the finalized level
 *       accepted, group.version 1 refused); createTopics with configs, with replication factor -1
 *       and with both counts left to the broker, and an existing topic; listTopics; describeTopics
 *       by name and by id; listConfigResources; describeConfigs and incrementalAlterConfigs (SET,
 *       DELETE, APPEND, SUBTRACT); createPartitions; alterClientQuotas and describeClientQuotas,
 *       with a producer over its byte rate seeing throttle times.
 *   <li>An idempotent producer (acks=all) writes keyed records to a multi-partition topic; a
 *       classic consumer group reads exactly those records, each partition in order, and commits;
 *       a new consumer of the group resumes from the commits; describeConsumerGroups while it is a
 *       member, and deleteConsumerGroups refused meanwhile.
 *   <li>A classic group with the CooperativeStickyAssignor: three members split six partitions
 *       2/2/2, a fourth joins and gets what the others give up; no partition has two owners or
 *       none, and only what moves is revoked. The same with the consumer protocol (KIP-848).
 *   <li>Online migration (KIP-848): three classic members, then one of the consumer protocol
 *       joins and the group becomes a consumer group, the classic members giving up only what it
 *       gets; it leaves and the group is classic again, the three sharing everything.
 *   <li>Transactions, on transactions v2 (KIP-890: the epoch bumped at every end): one committed,
 *       one aborted; read_committed sees only the committed records,
 *       read_uncommitted all of them; consume-transform-produce with sendOffsetsToTransaction, from
 *       a classic and from a consumer-protocol group, whose offsets count only when the transaction
 *       commits.
 *   <li>Admin on the data: listOffsets (earliest, latest, by timestamp, max timestamp),
 *       deleteRecords; listConsumerGroups, describeConsumerGroups, listConsumerGroupOffsets,
 *       alterConsumerGroupOffsets, deleteConsumerGroups; listTransactions, describeTransactions;
 *       deleteTopics (and an unknown topic).
 * </ul>
 */
public final class JavaClientCheck {
  private static final int TIMEOUT_MS = 15_000;
  private static final Duration TIMEOUT = Duration.ofMillis(TIMEOUT_MS);
  private static final int DEADLINE_S = 150;

  private static final String ADMIN_TOPIC = "java-admin";
  private static final String DEFAULTS_TOPIC = "java-admin-defaults";
  private static final String ORDERS = "java-orders";
  private static final int ORDERS_PARTITIONS = 4;
  private static final String TXN_TOPIC = "java-txn";
  private static final String EOS_OUT = "java-eos-out";
  private static final String MODERN_EOS_OUT = "java-modern-eos-out";
  private static final String GROUP = "java-group";
  private static final String COOP_TOPIC = "java-coop";
  private static final String COOP_GROUP = "java-coop-group";
  private static final String MODERN_TOPIC = "java-modern";
  private static final String MODERN_GROUP = "java-modern-group";
  private static final String MIGRATING_TOPIC = "java-migrating";
  private static final String MIGRATING_GROUP = "java-migrating-group";
  private static final String EOS_GROUP = "java-eos-group";
  private static final String MODERN_EOS_GROUP = "java-modern-eos-group";
  private static final String TXN_ID = "java-txn-writer";
  private static final int TXN_TIMEOUT_MS = 20_000;
  private static final int N = 200; // first batch of keyed records
  private static final int M = 40; // written after the group committed

  private final String bootstrap;
  private final Admin admin;
  private final Checks checks = new Checks("java_client_check", DEADLINE_S);

  /** ORDERS as produced: per partition, the values in offset order. */
  private final Map<Integer, List<String>> produced = new TreeMap<>();
  /** The producer id the transactional producer got, for describeTransactions. */
  private long txnProducerId = -1;

  private JavaClientCheck(String bootstrap) {
    this.bootstrap = bootstrap;
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    this.admin = Admin.create(p);
  }

  public static void main(String[] args) {
    if (args.length != 1 || !args[0].contains(":")) {
      System.err.println("usage: JavaClientCheck HOST:PORT");
      System.exit(64);
    }
    new JavaClientCheck(args[0]).runAll();
  }

  private void runAll() {
    Checks.note("kafka-clients " + clientVersion());
    checks.run("admin: describeCluster", this::describeCluster);
    checks.run("admin: describeFeatures and updateFeatures", this::features);
    boolean created = checks.run("admin: createTopics", this::createTopics);
    if (created) {
      checks.run("admin: listTopics", this::listTopics);
      checks.run("admin: describeTopics", this::describeTopics);
      checks.run("admin: listConfigResources", this::listConfigResources);
      checks.run("admin: describeConfigs", this::describeConfigs);
      checks.run("admin: incrementalAlterConfigs", this::incrementalAlterConfigs);
      checks.run("admin: createPartitions", this::createPartitions);
      checks.run("admin: listOffsets and deleteRecords", this::listOffsetsAndDeleteRecords);
      checks.run("admin: client quotas, and a producer over its quota throttled", this::clientQuotas);
      boolean wrote = checks.run("idempotent producer: keyed records, acks=all", this::produceOrders);
      if (wrote) {
        boolean read = checks.run("consumer group: reads every record once, in order, commits", this::consumeOrders);
        if (read) {
          checks.run("consumer group: a new consumer resumes from the commits", this::resumeOrders);
          checks.run("admin: consumer group offsets and state", this::groupAdmin);
        }
      }
      checks.run(
          "consumer group: CooperativeStickyAssignor, a fourth member gets what the others give up",
          () -> incrementalRebalance(COOP_TOPIC, COOP_GROUP, false));
      checks.run(
          "consumer group protocol (KIP-848, group.protocol=consumer): a fourth member gets what the others give up",
          () -> incrementalRebalance(MODERN_TOPIC, MODERN_GROUP, true));
      checks.run(
          "consumer group protocol migration (KIP-848): classic members upgraded online to a consumer group and back",
          this::onlineMigration);
      checks.run("transactions: committed and aborted, read_committed", this::transactions);
      if (wrote) {
        checks.run(
            "transactions: sendOffsetsToTransaction",
            () -> consumeTransformProduce("classic", EOS_GROUP, EOS_OUT));
        checks.run(
            "transactions: sendOffsetsToTransaction from a consumer group (KIP-848, group.protocol=consumer)",
            () -> consumeTransformProduce("consumer", MODERN_EOS_GROUP, MODERN_EOS_OUT));
      }
      checks.run("admin: listTransactions and describeTransactions", this::describeTransactions);
      checks.run("admin: deleteConsumerGroups", this::deleteGroups);
      checks.run("admin: deleteTopics", this::deleteTopics);
    }
    admin.close(Duration.ofSeconds(5));
    checks.finish();
  }

  /** The client's version, from the properties file its jar carries. */
  private static String clientVersion() {
    Properties p = new Properties();
    try (java.io.InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
      if (in != null) {
        p.load(in);
      }
    } catch (java.io.IOException e) {
      return "unknown";
    }
    return p.getProperty("version", "unknown");
  }

  // ---------------------------------------------------------------- clients

  private Properties producerProps() {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 2 * TIMEOUT_MS);
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, TIMEOUT_MS);
    return p;
  }

  private KafkaConsumer<String, String> consumer(String group, IsolationLevel isolation) {
    return new KafkaConsumer<>(consumerProps(group, isolation));
  }

  private Properties consumerProps(String group, IsolationLevel isolation) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    if (group != null) {
      p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
      p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
    }
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation.toString());
    p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
    return p;
  }

  /** Polls until count records arrived (then briefly more, to catch extras) or the timeout. */
  private static List<ConsumerRecord<String, String>> pollFor(KafkaConsumer<String, String> c, int count) {
    List<ConsumerRecord<String, String>> got = new ArrayList<>();
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (got.size() < count && System.nanoTime() < deadline) {
      c.poll(Duration.ofMillis(200)).forEach(got::add);
    }
    if (got.size() >= count) {
      c.poll(Duration.ofMillis(500)).forEach(got::add);
    }
    return got;
  }

  /** Reads the assigned partitions from the beginning up to their end offsets (the LSO for read_committed). */
  private static List<ConsumerRecord<String, String>> readToEnd(KafkaConsumer<String, String> c, Collection<TopicPartition> tps) {
    c.assign(tps);
    c.seekToBeginning(tps);
    Map<TopicPartition, Long> ends = c.endOffsets(tps);
    List<ConsumerRecord<String, String>> got = new ArrayList<>();
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (tps.stream().anyMatch(tp -> c.position(tp) < ends.get(tp))) {
      expect(System.nanoTime() < deadline, "positions " + positions(c, tps) + " did not reach the end offsets " + ends);
      c.poll(Duration.ofMillis(200)).forEach(got::add);
    }
    return got;
  }

  private static Map<TopicPartition, Long> positions(KafkaConsumer<String, String> c, Collection<TopicPartition> tps) {
    return tps.stream().collect(Collectors.toMap(tp -> tp, c::position));
  }

  private static Map<Integer, List<String>> byPartition(List<ConsumerRecord<String, String>> records) {
    Map<Integer, List<String>> out = new TreeMap<>();
    for (ConsumerRecord<String, String> r : records) {
      out.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
    }
    return out;
  }

  private static List<TopicPartition> partitions(String topic, int count) {
    return IntStream.range(0, count).mapToObj(i -> new TopicPartition(topic, i)).collect(Collectors.toList());
  }

  private Map<TopicPartition, Long> listOffsets(Collection<TopicPartition> tps, OffsetSpec spec) throws Exception {
    Map<TopicPartition, OffsetSpec> req = new HashMap<>();
    tps.forEach(tp -> req.put(tp, spec));
    Map<TopicPartition, ListOffsetsResultInfo> res = admin.listOffsets(req).all().get();
    Map<TopicPartition, Long> out = new HashMap<>();
    res.forEach((tp, info) -> out.put(tp, info.offset()));
    return out;
  }

  private Map<TopicPartition, Long> committedOffsets(String group) throws Exception {
    Map<TopicPartition, OffsetAndMetadata> got =
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    Map<TopicPartition, Long> out = new HashMap<>();
    got.forEach((tp, om) -> out.put(tp, om == null ? null : om.offset()));
    return out;
  }

  /** What a read_committed consumer sees as committed: OffsetFetch with require_stable. */
  private static Map<TopicPartition, Long> stableCommitted(KafkaConsumer<?, ?> c, List<TopicPartition> tps) {
    Map<TopicPartition, Long> out = new HashMap<>();
    c.committed(Set.copyOf(tps), TIMEOUT).forEach((tp, om) -> out.put(tp, om == null ? null : om.offset()));
    return out;
  }

  private Map<String, ConfigEntry> topicConfig(String topic) throws Exception {
    ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
    return cfg.entries().stream().collect(Collectors.toMap(ConfigEntry::name, e -> e));
  }

  // ---------------------------------------------------------------- admin: cluster and topics

  private void describeCluster() throws Exception {
    DescribeClusterResult res = admin.describeCluster();
    String clusterId = res.clusterId().get();
    expect(clusterId != null && !clusterId.isEmpty(), "empty cluster id: " + clusterId);
    Collection<Node> nodes = res.nodes().get();
    String host = bootstrap.substring(0, bootstrap.lastIndexOf(':'));
    int port = Integer.parseInt(bootstrap.substring(bootstrap.lastIndexOf(':') + 1));
    expectEq(
        nodes.stream().map(n -> n.id() + "@" + n.host() + ":" + n.port()).collect(Collectors.toList()),
        List.of("1@" + host + ":" + port),
        "describeCluster nodes");
    expectEq(res.controller().get().id(), 1, "describeCluster controller id");
  }

  /**
   * The broker supports and finalizes metadata.version 4.0-IV3 (25) alone; features at level 0
   * are left out, as Kafka does. The finalized level is accepted as a no-op; group.version 1
   * (KIP-848's consumer groups) is refused.
   */
  private void features() throws Exception {
    FeatureMetadata md = admin.describeFeatures().featureMetadata().get();
    expectEq(
        md.supportedFeatures(),
        Map.of(
            "metadata.version", new SupportedVersionRange((short) 25, (short) 25),
            "transaction.version", new SupportedVersionRange((short) 0, (short) 2),
            "eligible.leader.replicas.version", new SupportedVersionRange((short) 0, (short) 1)),
        "supported features");
    expectEq(
        md.finalizedFeatures(),
        Map.of(
            "metadata.version", new FinalizedVersionRange((short) 25, (short) 25),
            "transaction.version", new FinalizedVersionRange((short) 2, (short) 2),
            "eligible.leader.replicas.version", new FinalizedVersionRange((short) 1, (short) 1)),
        "finalized features");
    expect(
        md.finalizedFeaturesEpoch().isPresent() && md.finalizedFeaturesEpoch().get() >= 0,
        "finalized features epoch: " + md.finalizedFeaturesEpoch());
    for (boolean validateOnly : List.of(true, false)) {
      admin
          .updateFeatures(
              Map.of("metadata.version", new FeatureUpdate((short) 25, FeatureUpdate.UpgradeType.UPGRADE)),
              new UpdateFeaturesOptions().validateOnly(validateOnly))
          .all()
          .get();
    }
    Map<String, FeatureUpdate> groupV1 =
        Map.of("group.version", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE));
    try {
      admin.updateFeatures(groupV1, new UpdateFeaturesOptions()).all().get();
      throw new Checks.CheckFailed("group.version 1 was accepted");
    } catch (ExecutionException e) {
      expect(
          e.getCause() instanceof InvalidUpdateVersionException,
          "group.version 1: expected InvalidUpdateVersionException, got " + e.getCause());
      String message = e.getCause().getMessage();
      expect(
          message.contains("Invalid update version 1 for feature group.version")
              && message.contains("does not support this feature"),
          "group.version 1: " + message);
    }
    expectEq(
        admin.describeFeatures().featureMetadata().get().finalizedFeatures(),
        md.finalizedFeatures(),
        "finalized features after the updates");
  }

  private void createTopics() throws Exception {
    NewTopic withConfigs =
        new NewTopic(ADMIN_TOPIC, Optional.of(3), Optional.empty()) // replication factor -1: the broker's default
            .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete", "retention.bytes", "1048576"));
    NewTopic defaults = new NewTopic(DEFAULTS_TOPIC, Optional.empty(), Optional.empty());
    List<NewTopic> others =
        List.of(
            new NewTopic(ORDERS, ORDERS_PARTITIONS, (short) 1),
            new NewTopic(TXN_TOPIC, 2, (short) 1),
            new NewTopic(EOS_OUT, 1, (short) 1),
            new NewTopic(MODERN_EOS_OUT, 1, (short) 1));
    List<NewTopic> all = new ArrayList<>(List.of(withConfigs, defaults));
    all.addAll(others);
    CreateTopicsResult res = admin.createTopics(all);
    res.all().get();
    expectEq(res.numPartitions(ADMIN_TOPIC).get(), 3, ADMIN_TOPIC + " partitions in the CreateTopics response");
    expectEq(res.replicationFactor(ADMIN_TOPIC).get(), 1, ADMIN_TOPIC + " replication factor (-1 asked) in the response");
    Map<String, String> echoed =
        res.config(ADMIN_TOPIC).get().entries().stream()
            .filter(e -> e.value() != null)
            .collect(Collectors.toMap(ConfigEntry::name, ConfigEntry::value));
    expectEq(echoed.get("retention.ms"), "3600000", ADMIN_TOPIC + " retention.ms in the CreateTopics response");
    expectEq(res.numPartitions(DEFAULTS_TOPIC).get(), 1, DEFAULTS_TOPIC + " partitions (num.partitions)");
    expectEq(res.replicationFactor(DEFAULTS_TOPIC).get(), 1, DEFAULTS_TOPIC + " replication factor");
    expectEq(res.topicId(ADMIN_TOPIC).get().equals(Uuid.ZERO_UUID), false, ADMIN_TOPIC + " has a topic id");
    expectThrows(
        TopicExistsException.class,
        () -> admin.createTopics(List.of(new NewTopic(ADMIN_TOPIC, 3, (short) 1))).all().get(),
        "creating an existing topic");
  }

  /**
   * Every type (none given): the broker and every topic; CLIENT_METRICS and GROUP: none, as Weir has
   * no client-metrics subscriptions or group configs; BROKER_LOGGER refused.
   */
  /**
   * A client-id quota set, described and removed; meanwhile a producer of that client id that
   * sends half again its quota's burst allowance (ten windows' worth) is throttled.
   */
  private void clientQuotas() throws Exception {
    String clientId = "java-throttled";
    ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, clientId));
    ClientQuotaFilter filter =
        ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, clientId)));
    admin
        .alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 10_000.0)))))
        .all()
        .get();
    expectEq(
        admin.describeClientQuotas(filter).entities().get(),
        Map.of(entity, Map.of("producer_byte_rate", 10_000.0)),
        "described quotas");
    Properties props = producerProps();
    props.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
      String value = "x".repeat(1000);
      for (int i = 0; i < 150; i++) {
        producer.send(new ProducerRecord<>(DEFAULTS_TOPIC, value));
      }
      producer.flush();
      double throttled =
          producer.metrics().entrySet().stream()
              .filter(e -> e.getKey().name().equals("produce-throttle-time-max"))
              .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue())
              .max()
              .orElse(0);
      expect(throttled > 0, "produce-throttle-time-max " + throttled);
    }
    admin
        .alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", null)))))
        .all()
        .get();
    expect(admin.describeClientQuotas(filter).entities().get().isEmpty(), "the quota is removed");
  }

  private void listConfigResources() throws Exception {
    // Other checks give groups configs (share groups): brokers and topics here.
    Collection<ConfigResource> all =
        admin
            .listConfigResources(
                Set.of(ConfigResource.Type.BROKER, ConfigResource.Type.TOPIC),
                new ListConfigResourcesOptions())
            .all()
            .get();
    Set<String> topics =
        admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get();
    Set<ConfigResource> expected = new HashSet<>();
    expected.add(new ConfigResource(ConfigResource.Type.BROKER, "1"));
    topics.forEach(t -> expected.add(new ConfigResource(ConfigResource.Type.TOPIC, t)));
    expect(topics.contains(ADMIN_TOPIC), "listTopics lacks " + ADMIN_TOPIC);
    expectEq(new HashSet<>(all), expected, "listConfigResources()");
    expectEq(all.size(), expected.size(), "listConfigResources() size");
    Collection<ConfigResource> none =
        admin
            .listConfigResources(
                Set.of(ConfigResource.Type.CLIENT_METRICS), new ListConfigResourcesOptions())
            .all()
            .get();
    expect(none.isEmpty(), "client metrics resources: " + none);
    expectThrows(
        UnsupportedVersionException.class,
        () ->
            admin
                .listConfigResources(
                    Set.of(ConfigResource.Type.BROKER_LOGGER),
                    new ListConfigResourcesOptions())
                .all()
                .get(),
        "broker loggers");
  }

  private void listTopics() throws Exception {
    Set<String> names = admin.listTopics().names().get();
    for (String t : List.of(ADMIN_TOPIC, DEFAULTS_TOPIC, ORDERS, TXN_TOPIC, EOS_OUT)) {
      expect(names.contains(t), t + " missing from listTopics: " + names);
    }
    expect(names.stream().noneMatch(n -> n.startsWith("__")), "listTopics without listInternal shows internal topics: " + names);
  }

  private void describeTopics() throws Exception {
    TopicDescription d = admin.describeTopics(List.of(ADMIN_TOPIC)).allTopicNames().get().get(ADMIN_TOPIC);
    expectEq(d.name(), ADMIN_TOPIC, "name");
    expectEq(d.isInternal(), false, "isInternal");
    expect(!d.topicId().equals(Uuid.ZERO_UUID), "no topic id");
    expectEq(d.partitions().size(), 3, "partition count");
    for (TopicPartitionInfo p : d.partitions()) {
      expectEq(
          List.of(p.leader().id(), ids(p.replicas()), ids(p.isr())),
          List.of(1, List.of(1), List.of(1)),
          "partition " + p.partition() + " leader, replicas, isr");
    }
    TopicDescription byId =
        admin.describeTopics(TopicCollection.ofTopicIds(List.of(d.topicId()))).allTopicIds().get().get(d.topicId());
    expectEq(byId.name(), ADMIN_TOPIC, "describeTopics by topic id: name");
    expectThrows(
        UnknownTopicOrPartitionException.class,
        () -> admin.describeTopics(List.of("java-never-created")).allTopicNames().get(),
        "describing a topic that does not exist");
  }

  private static List<Integer> ids(List<Node> nodes) {
    return nodes.stream().map(Node::id).collect(Collectors.toList());
  }

  private void describeConfigs() throws Exception {
    Map<String, ConfigEntry> cfg = topicConfig(ADMIN_TOPIC);
    for (String[] kv : new String[][] {{"retention.ms", "3600000"}, {"retention.bytes", "1048576"}, {"cleanup.policy", "delete"}}) {
      ConfigEntry e = cfg.get(kv[0]);
      expect(e != null, kv[0] + " missing from the topic's configs: " + cfg.keySet());
      expectEq(e.value(), kv[1], kv[0] + " value");
      expectEq(e.source(), ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, kv[0] + " source");
    }
    ConfigEntry seg = cfg.get("segment.bytes");
    expect(seg != null, "segment.bytes missing from the topic's configs");
    expectEq(seg.source(), ConfigEntry.ConfigSource.DEFAULT_CONFIG, "segment.bytes (not set on the topic) source");
    ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
    Config bcfg = admin.describeConfigs(List.of(broker)).all().get().get(broker);
    for (String name : List.of("log.retention.ms", "log.segment.bytes", "num.partitions")) {
      expect(bcfg.get(name) != null, name + " missing from broker 1's configs");
    }
    expectEq(bcfg.get("num.partitions").value(), "1", "broker num.partitions");
  }

  private void incrementalAlterConfigs() throws Exception {
    ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, ADMIN_TOPIC);
    List<AlterConfigOp> ops =
        List.of(
            new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
            new AlterConfigOp(new ConfigEntry("retention.bytes", null), AlterConfigOp.OpType.DELETE),
            new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND));
    admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
    Map<String, ConfigEntry> cfg = topicConfig(ADMIN_TOPIC);
    expectEq(cfg.get("retention.ms").value(), "7200000", "retention.ms after SET");
    expectEq(cfg.get("retention.bytes").source(), ConfigEntry.ConfigSource.DEFAULT_CONFIG, "retention.bytes source after DELETE");
    expectEq(cfg.get("cleanup.policy").value(), "delete,compact", "cleanup.policy after APPEND compact");
    // And back, for deleteRecords below (it needs cleanup.policy to include delete: it still does).
    admin
        .incrementalAlterConfigs(
            Map.of(res, List.of(new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SUBTRACT))))
        .all()
        .get();
    expectEq(topicConfig(ADMIN_TOPIC).get("cleanup.policy").value(), "delete", "cleanup.policy after SUBTRACT compact");
  }

  private void createPartitions() throws Exception {
    admin.createPartitions(Map.of(ADMIN_TOPIC, NewPartitions.increaseTo(5))).all().get();
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    int count;
    do {
      count = admin.describeTopics(List.of(ADMIN_TOPIC)).allTopicNames().get().get(ADMIN_TOPIC).partitions().size();
    } while (count != 5 && System.nanoTime() < deadline);
    expectEq(count, 5, ADMIN_TOPIC + " partitions after createPartitions(5)");
  }

  private void listOffsetsAndDeleteRecords() throws Exception {
    TopicPartition tp = new TopicPartition(ADMIN_TOPIC, 0);
    long base = System.currentTimeMillis() - 60_000;
    try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps())) {
      for (int i = 0; i < 10; i++) {
        p.send(new ProducerRecord<>(ADMIN_TOPIC, 0, base + i * 1000L, "k" + i, "v" + i)).get();
      }
    }
    List<TopicPartition> one = List.of(tp);
    expectEq(listOffsets(one, OffsetSpec.earliest()).get(tp), 0L, "earliest");
    expectEq(listOffsets(one, OffsetSpec.latest()).get(tp), 10L, "latest");
    expectEq(listOffsets(one, OffsetSpec.forTimestamp(base + 6000)).get(tp), 6L, "first offset at or after record 6's timestamp");
    expectEq(listOffsets(one, OffsetSpec.forTimestamp(base + 5500)).get(tp), 6L, "first offset after a timestamp between records 5 and 6");
    expectEq(listOffsets(one, OffsetSpec.forTimestamp(base + 60_000)).get(tp), -1L, "a timestamp after every record");
    ListOffsetsResultInfo max = admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).all().get().get(tp);
    expectEq(List.of(max.offset(), max.timestamp()), List.of(9L, base + 9000), "max timestamp: offset and timestamp");
    long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp).get().lowWatermark();
    expectEq(low, 4L, "deleteRecords(before 4) low watermark");
    expectEq(listOffsets(one, OffsetSpec.earliest()).get(tp), 4L, "earliest after deleteRecords");
    try (KafkaConsumer<String, String> c = consumer(null, IsolationLevel.READ_UNCOMMITTED)) {
      List<ConsumerRecord<String, String>> got = readToEnd(c, one);
      expectEq(got.stream().map(ConsumerRecord::value).collect(Collectors.toList()), List.of("v4", "v5", "v6", "v7", "v8", "v9"), "records left after deleteRecords");
    }
  }

  // ---------------------------------------------------------------- producer and consumer group

  private void produceOrders() throws Exception {
    produceOrders(0, N);
  }

  private void produceOrders(int from, int to) throws Exception {
    try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps())) {
      List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
      for (int i = from; i < to; i++) {
        sent.add(p.send(new ProducerRecord<>(ORDERS, "customer-" + (i % 17), "order-" + i)));
      }
      p.flush();
      for (int i = from; i < to; i++) {
        RecordMetadata md = sent.get(i - from).get();
        List<String> part = produced.computeIfAbsent(md.partition(), k -> new ArrayList<>());
        expectEq(md.offset(), (long) part.size(), "offset of order-" + i + " on partition " + md.partition());
        part.add("order-" + i);
      }
    }
    expect(produced.size() == ORDERS_PARTITIONS, "keys did not spread over all partitions: " + produced.keySet());
    Map<TopicPartition, Long> ends = listOffsets(partitions(ORDERS, ORDERS_PARTITIONS), OffsetSpec.latest());
    for (int p = 0; p < ORDERS_PARTITIONS; p++) {
      expectEq(ends.get(new TopicPartition(ORDERS, p)), (long) produced.get(p).size(), "log end offset of partition " + p);
    }
  }

  private void consumeOrders() throws Exception {
    try (KafkaConsumer<String, String> c = consumer(GROUP, IsolationLevel.READ_UNCOMMITTED)) {
      c.subscribe(List.of(ORDERS));
      List<ConsumerRecord<String, String>> got = pollFor(c, N);
      expectEq(byPartition(got), produced, "records per partition, in order");
      for (ConsumerRecord<String, String> r : got) {
        String i = r.value().substring("order-".length());
        expectEq(r.key(), "customer-" + (Integer.parseInt(i) % 17), "key of " + r.value());
      }
      c.commitSync();
      Map<TopicPartition, OffsetAndMetadata> committed = c.committed(Set.copyOf(partitions(ORDERS, ORDERS_PARTITIONS)));
      for (int p = 0; p < ORDERS_PARTITIONS; p++) {
        OffsetAndMetadata om = committed.get(new TopicPartition(ORDERS, p));
        expect(om != null, "no committed offset for partition " + p);
        expectEq(om.offset(), (long) produced.get(p).size(), "committed offset of partition " + p);
      }
    }
  }

  /**
   * Three members split six partitions 2/2/2; a fourth joins and gets the partitions the others
   * give up. No partition ever has two owners, none is left without one, and the three give up
   * only what moves. A classic group with the CooperativeStickyAssignor (KIP-429), or a group of
   * the consumer protocol (KIP-848), whose broker-side assignor moves partitions the same way and
   * which the admin client describes as a consumer group.
   */
  private void incrementalRebalance(String topic, String group, boolean consumerProtocol) throws Exception {
    admin.createTopics(List.of(new NewTopic(topic, 6, (short) 1))).all().get();
    Ownership ownership = new Ownership();
    List<Member> members = new ArrayList<>();
    try {
      for (int id = 0; id < 3; id++) {
        members.add(new Member(topic, group, id, consumerProtocol, ownership));
      }
      waitFor(() -> sizes(ownership.owned).equals(List.of(2, 2, 2)), () -> "three members at 2/2/2: " + ownership.owned);
      ownership.split.set(true);
      members.add(new Member(topic, group, 3, consumerProtocol, ownership));
      waitFor(
          () -> !ownership.owned.get(3).isEmpty() && ownedOnce(ownership.owned),
          () -> "every partition owned once, the fourth member with a share: " + ownership.owned);
      // A moment more: nothing else moves once the group settled.
      Thread.sleep(2_000);
      expect(ownedOnce(ownership.owned), "every partition owned once after the rebalances: " + ownership.owned);
      expectEq(ownership.revokedAfterSplit.get(), ownership.owned.get(3).size(), "partitions given up (only those that moved)");
      expectEq(ownership.problems, List.of(), "ownership problems");
      if (consumerProtocol) {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        expectEq(d.type(), GroupType.CONSUMER, "group type");
        expectEq(d.partitionAssignor(), "uniform", "the broker's assignor");
        expectEq(d.members().size(), 4, "members: " + d.members());
        Set<Integer> described = new HashSet<>();
        for (MemberDescription m : d.members()) {
          m.assignment().topicPartitions().forEach(tp -> described.add(tp.partition()));
        }
        expectEq(described, Set.of(0, 1, 2, 3, 4, 5), "partitions of the described members");
      }
    } finally {
      for (Member m : members) {
        m.close();
      }
    }
  }

  /**
   * KIP-848's online migration: three classic members (CooperativeStickyAssignor) split six
   * partitions; a member of the consumer protocol joins and the group becomes a consumer group
   * at once, the classic members in it giving up only what the newcomer gets; when it leaves, the
   * group is classic again and the three share everything. No partition ever has two owners.
   */
  private void onlineMigration() throws Exception {
    admin.createTopics(List.of(new NewTopic(MIGRATING_TOPIC, 6, (short) 1))).all().get();
    Ownership ownership = new Ownership();
    List<Member> members = new ArrayList<>();
    try {
      for (int id = 0; id < 3; id++) {
        members.add(new Member(MIGRATING_TOPIC, MIGRATING_GROUP, id, false, ownership));
      }
      waitFor(() -> sizes(ownership.owned).equals(List.of(2, 2, 2)), () -> "three classic members at 2/2/2: " + ownership.owned);
      expectEq(describeGroup(MIGRATING_GROUP).type(), GroupType.CLASSIC, "group type before the upgrade");
      ownership.split.set(true);
      Member modern = new Member(MIGRATING_TOPIC, MIGRATING_GROUP, 3, true, ownership);
      members.add(modern);
      waitFor(
          () -> !ownership.owned.get(3).isEmpty() && ownedOnce(ownership.owned),
          () -> "every partition owned once, the consumer-protocol member with a share: " + ownership.owned);
      Thread.sleep(2_000);
      expect(ownedOnce(ownership.owned), "every partition owned once after the upgrade: " + ownership.owned);
      expectEq(ownership.revokedAfterSplit.get(), ownership.owned.get(3).size(), "partitions the classic members gave up (only those that moved)");
      ConsumerGroupDescription upgraded = describeGroup(MIGRATING_GROUP);
      expectEq(upgraded.type(), GroupType.CONSUMER, "group type after a consumer-protocol member joined");
      expectEq(upgraded.members().size(), 4, "members of the upgraded group: " + upgraded.members());

      modern.close();
      waitFor(
          () -> sizes(ownership.owned).equals(List.of(0, 2, 2, 2)),
          () -> "the three classic members at 2/2/2 again: " + ownership.owned);
      ConsumerGroupDescription downgraded = describeGroup(MIGRATING_GROUP);
      expectEq(downgraded.type(), GroupType.CLASSIC, "group type after the consumer-protocol member left");
      expectEq(downgraded.members().size(), 3, "members of the downgraded group: " + downgraded.members());
      expectEq(ownership.problems, List.of(), "ownership problems");
    } finally {
      for (Member m : members) {
        m.close();
      }
    }
  }

  private ConsumerGroupDescription describeGroup(String group) throws Exception {
    return admin.describeConsumerGroups(List.of(group)).all().get().get(group);
  }

  /** Who owns which partition, as the members' rebalance listeners see it. */
  private static final class Ownership {
    final Map<Integer, Set<Integer>> owned = new java.util.concurrent.ConcurrentHashMap<>();
    final List<String> problems = java.util.Collections.synchronizedList(new ArrayList<>());
    final java.util.concurrent.atomic.AtomicInteger revokedAfterSplit = new java.util.concurrent.atomic.AtomicInteger();
    final java.util.concurrent.atomic.AtomicBoolean split = new java.util.concurrent.atomic.AtomicBoolean();
  }

  /**
   * A group member polling on its own thread: a classic one with the CooperativeStickyAssignor,
   * or one of the consumer protocol. It notes what it is assigned and gives up in `ownership`, and
   * any partition assigned to it while another member owns it.
   */
  private final class Member implements AutoCloseable {
    private final java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
    private final Thread thread;

    Member(String topic, String group, int id, boolean consumerProtocol, Ownership ownership) {
      ownership.owned.put(id, java.util.concurrent.ConcurrentHashMap.newKeySet());
      Properties p = consumerProps(group, IsolationLevel.READ_UNCOMMITTED);
      if (consumerProtocol) {
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
      } else {
        p.put(
            ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
            org.apache.kafka.clients.consumer.CooperativeStickyAssignor.class.getName());
      }
      p.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-" + id);
      thread =
          new Thread(
              () -> {
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                  c.subscribe(
                      List.of(topic),
                      new org.apache.kafka.clients.consumer.ConsumerRebalanceListener() {
                        @Override
                        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                          for (TopicPartition tp : parts) {
                            ownership.owned.forEach(
                                (other, theirs) -> {
                                  if (other != id && theirs.contains(tp.partition())) {
                                    ownership.problems.add(tp + " assigned to " + id + " while " + other + " owns it");
                                  }
                                });
                            ownership.owned.get(id).add(tp.partition());
                          }
                        }

                        @Override
                        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                          if (ownership.split.get() && !stop.get()) {
                            ownership.revokedAfterSplit.addAndGet(parts.size());
                          }
                          parts.forEach(tp -> ownership.owned.get(id).remove(tp.partition()));
                        }

                        @Override
                        public void onPartitionsLost(Collection<TopicPartition> parts) {
                          ownership.problems.add("member " + id + " lost " + parts);
                          parts.forEach(tp -> ownership.owned.get(id).remove(tp.partition()));
                        }
                      });
                  while (!stop.get()) {
                    c.poll(Duration.ofMillis(100));
                  }
                }
              },
              group + "-member-" + id);
      thread.start();
    }

    @Override
    public void close() throws InterruptedException {
      stop.set(true);
      thread.join(TIMEOUT_MS);
    }
  }

  private static List<Integer> sizes(Map<Integer, Set<Integer>> owned) {
    return owned.values().stream().map(Set::size).sorted().collect(Collectors.toList());
  }

  /** Whether each of the six partitions has exactly one owner. */
  private static boolean ownedOnce(Map<Integer, Set<Integer>> owned) {
    List<Integer> all = owned.values().stream().flatMap(Set::stream).sorted().collect(Collectors.toList());
    return all.equals(List.of(0, 1, 2, 3, 4, 5));
  }

  /** Waits up to 30 s for the condition. */
  private static void waitFor(java.util.function.BooleanSupplier condition, java.util.function.Supplier<String> what)
      throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new Checks.CheckFailed("timed out waiting for " + what.get());
      }
      Thread.sleep(100);
    }
  }

  private void resumeOrders() throws Exception {
    Map<Integer, Integer> before = new TreeMap<>();
    produced.forEach((p, l) -> before.put(p, l.size()));
    produceOrders(N, N + M);
    Map<Integer, List<String>> fresh = new TreeMap<>();
    produced.forEach((p, l) -> {
      if (l.size() > before.get(p)) {
        fresh.put(p, l.subList(before.get(p), l.size()));
      }
    });
    try (KafkaConsumer<String, String> c = consumer(GROUP, IsolationLevel.READ_UNCOMMITTED)) {
      c.subscribe(List.of(ORDERS));
      List<ConsumerRecord<String, String>> got = pollFor(c, M);
      expectEq(byPartition(got), fresh, "records read after the restart (only those after the commits)");
      c.commitSync();

      // While it is a member: the group is stable, with this member owning every partition.
      ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(GROUP)).all().get().get(GROUP);
      expectEq(d.groupState(), GroupState.STABLE, "group state with a member");
      expectEq(d.type(), GroupType.CLASSIC, "group type");
      expectEq(d.members().size(), 1, "members: " + d.members());
      MemberDescription m = d.members().iterator().next();
      expectEq(
          m.assignment().topicPartitions().stream().sorted(java.util.Comparator.comparingInt(TopicPartition::partition)).collect(Collectors.toList()),
          partitions(ORDERS, ORDERS_PARTITIONS),
          "the member's assignment");
      expectEq(d.coordinator().id(), 1, "coordinator");
      expectThrows(
          GroupNotEmptyException.class,
          () -> admin.deleteConsumerGroups(List.of(GROUP)).all().get(),
          "deleteConsumerGroups of a group with a member");
    }
  }

  private void groupAdmin() throws Exception {
    Collection<ConsumerGroupListing> listed = admin.listConsumerGroups().all().get();
    Map<String, Optional<GroupState>> states =
        listed.stream().collect(Collectors.toMap(ConsumerGroupListing::groupId, ConsumerGroupListing::groupState));
    expectEq(states.get(GROUP), Optional.of(GroupState.EMPTY), GROUP + " in listConsumerGroups " + states);
    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(GROUP)).all().get().get(GROUP);
    expectEq(d.groupState(), GroupState.EMPTY, "group state after its consumers closed");
    expectEq(d.members().size(), 0, "members after its consumers closed");

    Map<TopicPartition, Long> want = new HashMap<>();
    produced.forEach((p, l) -> want.put(new TopicPartition(ORDERS, p), (long) l.size()));
    expectEq(committedOffsets(GROUP), want, "listConsumerGroupOffsets");

    TopicPartition p0 = new TopicPartition(ORDERS, 0);
    admin.alterConsumerGroupOffsets(GROUP, Map.of(p0, new OffsetAndMetadata(1, "rewound"))).all().get();
    want.put(p0, 1L);
    expectEq(committedOffsets(GROUP), want, "listConsumerGroupOffsets after alterConsumerGroupOffsets");
    OffsetAndMetadata om = admin.listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata().get().get(p0);
    expectEq(om.metadata(), "rewound", "committed metadata");
    // A consumer of the group starts where the altered offset says.
    try (KafkaConsumer<String, String> c = consumer(GROUP, IsolationLevel.READ_UNCOMMITTED)) {
      c.assign(List.of(p0));
      List<ConsumerRecord<String, String>> got = pollFor(c, produced.get(0).size() - 1);
      expectEq(
          got.stream().map(ConsumerRecord::value).collect(Collectors.toList()),
          produced.get(0).subList(1, produced.get(0).size()),
          "records read from the altered offset");
    }
  }

  // ---------------------------------------------------------------- transactions

  private KafkaProducer<String, String> transactionalProducer() {
    Properties p = producerProps();
    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, TXN_ID);
    p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, TXN_TIMEOUT_MS);
    return new KafkaProducer<>(p);
  }

  private void transactions() throws Exception {
    List<String> committed = new ArrayList<>();
    List<String> all = new ArrayList<>();
    int initialEpoch;
    try (KafkaProducer<String, String> p = transactionalProducer()) {
      p.initTransactions();
      initialEpoch = admin.describeTransactions(List.of(TXN_ID)).all().get().get(TXN_ID).producerEpoch();
      p.beginTransaction();
      for (int i = 0; i < 6; i++) {
        p.send(new ProducerRecord<>(TXN_TOPIC, "k" + i, "committed-" + i));
        committed.add("committed-" + i);
      }
      p.commitTransaction();
      p.beginTransaction();
      for (int i = 0; i < 4; i++) {
        p.send(new ProducerRecord<>(TXN_TOPIC, "k" + i, "aborted-" + i));
      }
      p.flush();
      p.abortTransaction();
      p.beginTransaction();
      for (int i = 0; i < 3; i++) {
        p.send(new ProducerRecord<>(TXN_TOPIC, "k" + i, "committed-again-" + i));
        committed.add("committed-again-" + i);
      }
      p.commitTransaction();
    }
    // Transactions v2 (KIP-890, transaction.version 2): every end bumps the producer epoch, so
    // the three transactions leave it three above the one initTransactions gave.
    int endEpoch = admin.describeTransactions(List.of(TXN_ID)).all().get().get(TXN_ID).producerEpoch();
    expectEq(endEpoch, initialEpoch + 3, "producer epoch after three transactions (transactions v2)");
    all.addAll(committed);
    for (int i = 0; i < 4; i++) {
      all.add("aborted-" + i);
    }
    List<TopicPartition> tps = partitions(TXN_TOPIC, 2);
    try (KafkaConsumer<String, String> c = consumer(null, IsolationLevel.READ_COMMITTED)) {
      List<String> got = readToEnd(c, tps).stream().map(ConsumerRecord::value).sorted().collect(Collectors.toList());
      expectEq(got, committed.stream().sorted().collect(Collectors.toList()), "read_committed records");
    }
    try (KafkaConsumer<String, String> c = consumer(null, IsolationLevel.READ_UNCOMMITTED)) {
      List<String> got = readToEnd(c, tps).stream().map(ConsumerRecord::value).sorted().collect(Collectors.toList());
      expectEq(got, all.stream().sorted().collect(Collectors.toList()), "read_uncommitted records");
    }
  }

  /**
   * Consume-transform-produce: ORDERS → out, the consumed offsets committed in the transaction, by
   * a consumer of the group protocol given (with "consumer", TxnOffsetCommit carries the member
   * epoch).
   */
  private void consumeTransformProduce(String protocol, String group, String out) throws Exception {
    List<TopicPartition> tps = partitions(ORDERS, ORDERS_PARTITIONS);
    Map<TopicPartition, Long> ends = listOffsets(tps, OffsetSpec.latest());
    int total = produced.values().stream().mapToInt(List::size).sum();
    Properties props = consumerProps(group, IsolationLevel.READ_COMMITTED);
    props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(props);
        KafkaProducer<String, String> p = transactionalProducer()) {
      p.initTransactions();
      c.subscribe(List.of(ORDERS));
      List<ConsumerRecord<String, String>> in = pollFor(c, total);
      expectEq(in.size(), total, "records consumed from " + ORDERS);
      p.beginTransaction();
      for (ConsumerRecord<String, String> r : in) {
        p.send(new ProducerRecord<>(out, r.key(), "seen-" + r.value()));
      }
      Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
      tps.forEach(tp -> offsets.put(tp, new OffsetAndMetadata(c.position(tp))));
      p.sendOffsetsToTransaction(offsets, c.groupMetadata());
      p.commitTransaction();
      // The markers that end the transaction's offset commits follow EndTxn
      // in the background, as in Kafka: a read_committed consumer asks for
      // stable offsets (UNSTABLE_OFFSET_COMMIT until the marker is in), and
      // once it has them the admin listing shows the same.
      expectEq(stableCommitted(c, tps), ends, "the group's stable offsets after the committed transaction");
      expectEq(committedOffsets(group), ends, "the group's offsets after the committed transaction");

      // An aborted transaction's offsets do not count.
      p.beginTransaction();
      p.send(new ProducerRecord<>(out, "x", "never"));
      Map<TopicPartition, OffsetAndMetadata> rewind = new HashMap<>();
      tps.forEach(tp -> rewind.put(tp, new OffsetAndMetadata(0)));
      p.sendOffsetsToTransaction(rewind, c.groupMetadata());
      p.abortTransaction();
      expectEq(stableCommitted(c, tps), ends, "the group's stable offsets after the aborted transaction");
      expectEq(committedOffsets(group), ends, "the group's offsets after the aborted transaction");
    }
    try (KafkaConsumer<String, String> c = consumer(null, IsolationLevel.READ_COMMITTED)) {
      List<ConsumerRecord<String, String>> written = readToEnd(c, partitions(out, 1));
      expectEq(written.size(), total, "records in " + out + " for read_committed");
      expect(written.stream().allMatch(r -> r.value().startsWith("seen-order-")), "unexpected records in " + out);
    }
  }

  private void describeTransactions() throws Exception {
    Collection<TransactionListing> listed = admin.listTransactions().all().get();
    TransactionListing mine =
        listed.stream().filter(t -> t.transactionalId().equals(TXN_ID)).findFirst().orElse(null);
    expect(mine != null, TXN_ID + " missing from listTransactions: " + listed);
    expectEq(mine.state(), TransactionState.COMPLETE_ABORT, "listed state (the last transaction aborted)");
    expect(mine.producerId() >= 0, "listed producer id " + mine.producerId());
    txnProducerId = mine.producerId();
    TransactionDescription d = admin.describeTransactions(List.of(TXN_ID)).all().get().get(TXN_ID);
    expectEq(d.state(), TransactionState.COMPLETE_ABORT, "described state");
    expectEq(d.producerId(), txnProducerId, "described producer id");
    expectEq(d.transactionTimeoutMs(), (long) TXN_TIMEOUT_MS, "transaction timeout");
    expectEq(d.coordinatorId(), 1, "coordinator id");
    expectEq(d.topicPartitions(), Set.of(), "partitions of a completed transaction");
  }

  // ---------------------------------------------------------------- clean up

  private void deleteGroups() throws Exception {
    admin
        .deleteConsumerGroups(List.of(GROUP, EOS_GROUP, MODERN_EOS_GROUP, COOP_GROUP, MODERN_GROUP, MIGRATING_GROUP))
        .all()
        .get();
    Set<String> left =
        admin.listConsumerGroups().all().get().stream().map(ConsumerGroupListing::groupId).collect(Collectors.toSet());
    expect(
        !left.contains(GROUP) && !left.contains(EOS_GROUP) && !left.contains(MODERN_GROUP),
        "deleted groups still listed: " + left);
    expectEq(committedOffsets(GROUP), Map.of(), "offsets of a deleted group");
  }

  private void deleteTopics() throws Exception {
    List<String> topics =
        List.of(
            ADMIN_TOPIC,
            DEFAULTS_TOPIC,
            ORDERS,
            TXN_TOPIC,
            EOS_OUT,
            MODERN_EOS_OUT,
            COOP_TOPIC,
            MODERN_TOPIC,
            MIGRATING_TOPIC);
    admin.deleteTopics(topics).all().get();
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    Set<String> left;
    do {
      left = admin.listTopics().names().get();
      left.retainAll(topics);
    } while (!left.isEmpty() && System.nanoTime() < deadline);
    expectEq(left, Set.of(), "deleted topics still listed");
    expectThrows(
        UnknownTopicOrPartitionException.class,
        () -> admin.deleteTopics(List.of("java-never-created")).all().get(),
        "deleting a topic that does not exist");
  }
}
