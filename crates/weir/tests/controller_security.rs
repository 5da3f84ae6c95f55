//! The controller listener against the real binary: every request on it is
//! authorized on its own (Kafka's `ControllerApis`), and it never lets an
//! unauthenticated peer write metadata that the Kafka listeners would only
//! let an authenticated client write.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::cluster::free_port;
use common::Weir;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use weir_meta::{AclBinding, AclOperation, AclPermissionType, Command, PatternType, ResourceType};

/// Sends one controller RPC frame carrying `request` (JSON) and returns
/// what came back before the connection closed or went quiet.
fn controller_call(addr: &str, request: &serde_json::Value) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let body = serde_json::to_vec(request).unwrap();
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).unwrap();
    let mut length = [0u8; 4];
    if stream.read_exact(&mut length).is_err() {
        return String::new();
    }
    let mut reply = vec![0u8; u32::from_be_bytes(length) as usize];
    stream.read_exact(&mut reply).unwrap();
    String::from_utf8_lossy(&reply).into_owned()
}

fn submit(command: &Command) -> serde_json::Value {
    serde_json::json!({ "Submit": command })
}

/// Whether `user` can log in with SCRAM-SHA-512 on `bootstrap`.
fn logs_in(bootstrap: &str, user: &str, password: &str) -> bool {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.username", user)
        .set("sasl.password", password)
        .create()
        .unwrap();
    consumer
        .fetch_metadata(None, Duration::from_secs(5))
        .is_ok()
}

fn mallory_scram() -> Command {
    Command::AlterUserScramCredentials {
        deletions: Vec::new(),
        upsertions: vec![weir_meta::ScramUpsertion {
            user: "mallory".into(),
            mechanism: weir_meta::ScramMechanism::Sha512,
            credential: weir_meta::ScramCredential::from_password(
                weir_meta::ScramMechanism::Sha512,
                "mallory-secret",
                4096,
            ),
        }],
    }
}

#[test]
fn an_unauthenticated_peer_writes_no_metadata_when_every_kafka_listener_authenticates() {
    let controller = format!("127.0.0.1:{}", free_port());
    let weir = Weir::start(&[
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--controller-listen",
        &controller,
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
    ]);
    let bootstrap = weir.listener("SASL_PLAINTEXT").to_owned();
    assert!(logs_in(&bootstrap, "admin", "admin-secret"));
    // One frame from nobody in particular, as a forwarding broker sends it.
    let reply = controller_call(&controller, &submit(&mallory_scram()));
    assert!(
        reply.is_empty(),
        "an anonymous peer gets no answer: {reply}"
    );
    // Nor can it vote or append to the quorum's log.
    let heartbeat = serde_json::json!({"Heartbeat": {"broker_id": 1, "incarnation": "00000000-0000-0000-0000-000000000000"}});
    assert!(controller_call(&controller, &heartbeat).is_empty());
    assert!(
        !logs_in(&bootstrap, "mallory", "mallory-secret"),
        "the user was never created"
    );
}

#[test]
fn a_peer_allowed_only_cluster_action_cannot_grant_itself_rights() {
    let controller = format!("127.0.0.1:{}", free_port());
    let weir = Weir::start(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--controller-listen",
        &controller,
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--authorizer-class-name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--super-users",
        "User:admin",
    ]);
    let admin_config = weir.data_dir.parent().unwrap().join("admin.properties");
    std::fs::write(
        &admin_config,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
         sasl.username=admin\nsasl.password=admin-secret\n",
    )
    .unwrap();
    let admin_config = admin_config.display().to_string();
    let bootstrap = weir.listener("SASL_PLAINTEXT").to_owned();
    let acl = |args: &[&str]| {
        let mut all = vec![
            "acl",
            "--bootstrap",
            &bootstrap,
            "--command-config",
            &admin_config,
        ];
        all.extend_from_slice(args);
        common::cli::run(&all, b"").ok()
    };
    // The anonymous principal may act as a node of the cluster, and no more.
    acl(&[
        "create",
        "--cluster",
        "--allow-principal",
        "User:ANONYMOUS",
        "--operation",
        "ClusterAction",
    ]);
    let heartbeat = serde_json::json!({"Heartbeat": {"broker_id": 1, "incarnation": "00000000-0000-0000-0000-000000000000"}});
    assert!(
        controller_call(&controller, &heartbeat).contains("Heartbeat"),
        "ClusterAction covers the broker lifecycle"
    );
    let grab = Command::CreateAcls {
        bindings: vec![AclBinding {
            resource_type: ResourceType::Cluster,
            resource_name: "kafka-cluster".into(),
            pattern_type: PatternType::Literal,
            principal: "User:mallory".into(),
            host: "*".into(),
            operation: AclOperation::All,
            permission: AclPermissionType::Allow,
        }],
    };
    let reply = controller_call(&controller, &submit(&grab));
    assert!(
        reply.contains("Denied") && reply.contains("User:ANONYMOUS"),
        "CreateAcls needs ALTER on the cluster, which ClusterAction is not: {reply}"
    );
    let reply = controller_call(&controller, &submit(&mallory_scram()));
    assert!(reply.contains("Denied"), "nor may it add users: {reply}");
    let listed = acl(&["list", "--principal", "User:mallory"]);
    assert!(
        !listed.stdout.contains("Current ACLs"),
        "no ACL was created: {}",
        listed.stdout
    );
    // The check above would see one: ANONYMOUS's own grant is listed.
    let anonymous = acl(&["list", "--principal", "User:ANONYMOUS"]);
    assert!(
        anonymous.stdout.contains("Current ACLs"),
        "{}",
        anonymous.stdout
    );
    assert!(!logs_in(&bootstrap, "mallory", "mallory-secret"));
}

/// One frame out, one frame back (`None` once the connection is closed).
fn exchange(stream: &mut TcpStream, message: &serde_json::Value) -> Option<serde_json::Value> {
    let body = serde_json::to_vec(message).unwrap();
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).ok()?;
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).ok()?;
    let mut reply = vec![0u8; u32::from_be_bytes(length) as usize];
    stream.read_exact(&mut reply).ok()?;
    serde_json::from_slice(&reply).ok()
}

fn bytes_of(value: &serde_json::Value) -> Vec<u8> {
    serde_json::from_value(value.clone()).unwrap()
}

/// A SCRAM-SHA-512 login on the controller listener as `user`; the
/// connection, if the controller took the login.
fn controller_login(addr: &str, user: &str, password: &str) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mechanism = weir_meta::ScramMechanism::Sha512;
    let mut client = weir_auth::ScramClient::new(mechanism, user, password);
    let first = serde_json::json!({"ClientFirst": {"mechanism": "SCRAM-SHA-512", "message": client.client_first()}});
    let server_first = exchange(&mut stream, &first)?;
    let proof = client
        .receive_server_first(&bytes_of(server_first.get("ServerFirst")?))
        .ok()?;
    let server_final = exchange(&mut stream, &serde_json::json!({ "ClientFinal": proof }))?;
    client
        .receive_server_final(&bytes_of(server_final.get("ServerFinal")?))
        .ok()?;
    Some(stream)
}

#[test]
fn a_sasl_controller_listener_serves_only_peers_that_prove_their_password() {
    let controller = format!("127.0.0.1:{}", free_port());
    let _weir = Weir::start(&[
        "--listeners",
        &format!("SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://{controller}"),
        "--listener-security-protocol-map",
        "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "--add-scram",
        "SCRAM-SHA-512=[name=broker,password=broker-secret]",
        "--sasl-jaas-config",
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" password=\"broker-secret\";",
    ]);
    let heartbeat = serde_json::json!({"Heartbeat": {"broker_id": 1, "incarnation": "00000000-0000-0000-0000-000000000000"}});
    assert!(
        controller_call(&controller, &submit(&mallory_scram())).is_empty(),
        "a request without a login is not served"
    );
    assert!(
        controller_login(&controller, "broker", "a guess").is_none(),
        "a wrong password is refused"
    );
    assert!(controller_login(&controller, "mallory", "mallory-secret").is_none());
    let mut stream =
        controller_login(&controller, "broker", "broker-secret").expect("the node's user logs in");
    let answer = exchange(&mut stream, &heartbeat).expect("answered once logged in");
    assert!(answer.get("Heartbeat").is_some(), "{answer}");
}
