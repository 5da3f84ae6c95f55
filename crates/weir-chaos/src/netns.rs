//! Network namespaces for network partitions: every node in a namespace of
//! its own, joined to a bridge in this process's namespace by a veth pair,
//! with its own address. Clients here reach every node over the bridge;
//! iptables rules inside a node's namespace cut it off from chosen peers.
//! The bridge has no uplink and nothing routes: traffic never leaves the
//! machine.

use std::process::Command;

/// Runs a command; its stderr on failure.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Why namespaces cannot be used here, if they cannot.
pub fn unavailable() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("network namespaces need root".to_owned());
    }
    if run("ip", &["-V"]).is_err() {
        return Some("the ip command (iproute2) is missing".to_owned());
    }
    if run("iptables", &["-V"]).is_err() {
        return Some("the iptables command is missing".to_owned());
    }
    None
}

/// Namespaces of one cluster; removed on drop.
#[derive(Debug)]
pub struct Netns {
    /// This process and the cluster's number in it: names are unique to
    /// both, so clusters of one test process (its threads) can coexist.
    pid: u32,
    seq: u32,
    subnet: String,
    nodes: usize,
    bridge: String,
}

fn namespace_name(pid: u32, seq: u32, node: usize) -> String {
    format!("wchaos-{pid}-{seq}-{node}")
}

/// Interface names are at most 15 bytes: the pid is cut short.
fn link_prefix(kind: &str, pid: u32) -> String {
    format!("{kind}{}x", pid % 1_000_000)
}

fn bridge_name(pid: u32, seq: u32) -> String {
    format!("{}{seq}", link_prefix("wcb", pid))
}

impl Netns {
    /// Namespaces for `nodes` nodes (numbered from 1), each with loopback
    /// and one address on a new bridge.
    pub fn create(nodes: usize) -> Result<Self, String> {
        if let Some(reason) = unavailable() {
            return Err(reason);
        }
        // One setup at a time in this process: two could pick one subnet.
        static SETUP: std::sync::Mutex<u32> = std::sync::Mutex::new(0);
        let mut next_seq = SETUP.lock().unwrap_or_else(|e| e.into_inner());
        let seq = *next_seq % 100;
        *next_seq += 1;
        remove_stale();
        let pid = std::process::id();
        let used = run("ip", &["-o", "-4", "addr", "show"]).unwrap_or_default();
        let subnet = (0..250u32)
            .map(|i| format!("10.{}.{}", 100 + (pid + i) % 100, (pid / 100 + i) % 250))
            .find(|s| !used.contains(&format!("{s}.")))
            .ok_or("no free subnet for the namespaces")?;
        let netns = Self {
            pid,
            seq,
            subnet,
            nodes,
            bridge: bridge_name(pid, seq),
        };
        netns.setup()?;
        Ok(netns)
    }

    fn setup(&self) -> Result<(), String> {
        run("ip", &["link", "add", &self.bridge, "type", "bridge"])?;
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}.1/24", self.subnet),
                "dev",
                &self.bridge,
            ],
        )?;
        run("ip", &["link", "set", &self.bridge, "up"])?;
        for node in 1..=self.nodes {
            let ns = self.namespace(node);
            let veth = format!("{}{}-{node}", link_prefix("wcv", self.pid), self.seq);
            run("ip", &["netns", "add", &ns])?;
            run(
                "ip",
                &[
                    "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
                ],
            )?;
            run("ip", &["link", "set", &veth, "master", &self.bridge, "up"])?;
            let addr = format!("{}/24", self.ip(node));
            run("ip", &["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            run("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
            // The tables must work in there before anything depends on it.
            run("ip", &["netns", "exec", &ns, "iptables", "-L", "-n"])?;
        }
        Ok(())
    }

    pub fn namespace(&self, node: usize) -> String {
        namespace_name(self.pid, self.seq, node)
    }

    /// Node `node`'s address.
    pub fn ip(&self, node: usize) -> String {
        format!("{}.{}", self.subnet, 10 + node)
    }

    /// Drops every packet between `node` and each of `peers` (both ways,
    /// in `node`'s namespace). Anyone else, clients included, still
    /// reaches it.
    pub fn cut(&self, node: usize, peers: &[usize]) -> Result<(), String> {
        let ns = self.namespace(node);
        for peer in peers {
            let ip = self.ip(*peer);
            run(
                "ip",
                &[
                    "netns", "exec", &ns, "iptables", "-I", "INPUT", "-s", &ip, "-j", "DROP",
                ],
            )?;
            run(
                "ip",
                &[
                    "netns", "exec", &ns, "iptables", "-I", "OUTPUT", "-d", &ip, "-j", "DROP",
                ],
            )?;
        }
        Ok(())
    }

    /// Removes every rule: the network is whole again.
    pub fn heal(&self) -> Result<(), String> {
        for node in 1..=self.nodes {
            run(
                "ip",
                &["netns", "exec", &self.namespace(node), "iptables", "-F"],
            )?;
        }
        Ok(())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for node in 1..=self.nodes {
            let _ = run("ip", &["netns", "del", &self.namespace(node)]);
        }
        let _ = run("ip", &["link", "del", &self.bridge]);
    }
}

/// Namespaces and bridges left by runs whose process is gone (killed
/// before it could clean up).
fn remove_stale() {
    let Ok(list) = run("ip", &["netns", "list"]) else {
        return;
    };
    for name in list.split_whitespace() {
        let Some(rest) = name.strip_prefix("wchaos-") else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let _ = run("ip", &["netns", "del", name]);
        if let Some(seq) = rest.split('-').nth(1).and_then(|s| s.parse::<u32>().ok()) {
            let _ = run("ip", &["link", "del", &bridge_name(pid, seq)]);
        }
    }
}
