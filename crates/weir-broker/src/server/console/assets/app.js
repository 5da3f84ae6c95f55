// The Weir console: one page, routed by the URL's fragment, drawn from the
// broker's JSON API. Text from the cluster only ever goes in as text
// (textContent), never as HTML.
"use strict";

const COLORS = ["#2f6fde", "#d97706", "#059669"];
const PARTITIONS_PER_PAGE = 100;
let refreshTimer = null;

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function svg(tag, attrs) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, value);
  return el;
}

async function getJson(path) {
  // From the origin: a page opened as http://user:password@host/ would
  // otherwise resolve `path` with the credentials in it, which fetch refuses.
  const response = await fetch(location.origin + path, { headers: { Accept: "application/json" } });
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

// A change: JSON in, JSON out; an error answer throws its message.
async function send(method, path, body) {
  const response = await fetch(location.origin + path, {
    method,
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
  return answer;
}

// What an action said before the page was drawn again, to be shown again.
let flash = null;
// `/v1/console`: whether the console may change anything, and the user.
let settings = { read_only: false, user: null };

// A form row whose button runs `action`; its outcome shows beside it (and
// stays when the action draws the page again).
function actionRow(name, fields, label, action) {
  if (settings.read_only) return document.createDocumentFragment();
  const outcome = h("span", { class: "outcome", "data-outcome": name });
  if (flash && flash.name === name) {
    outcome.className = "outcome ok";
    outcome.textContent = flash.text;
    flash = null;
  }
  const button = h("button", { name, onclick: async () => {
    button.disabled = true;
    outcome.className = "outcome muted";
    outcome.textContent = "…";
    try {
      const text = await action();
      outcome.className = "outcome ok";
      outcome.textContent = text || "Done.";
      flash = { name, text: outcome.textContent };
    } catch (error) {
      outcome.className = "outcome error";
      outcome.textContent = error.message;
    } finally {
      button.disabled = false;
    }
  } }, label);
  return h("div", { class: "toolbar" }, fields, button, outcome);
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

function duration(ms) {
  const n = Number(ms);
  if (!Number.isFinite(n) || n < 0) return "forever";
  const units = [["d", 86400000], ["h", 3600000], ["min", 60000], ["s", 1000]];
  for (const [unit, size] of units) if (n >= size && n % size === 0) return `${n / size} ${unit}`;
  return `${n} ms`;
}

function seconds(s) {
  if (!s) return "0 s";
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function table(headers, rows, numeric) {
  const num = new Set(numeric || []);
  return h("table", {},
    h("thead", {}, h("tr", {}, headers.map((name, i) => h("th", num.has(i) ? { class: "num" } : {}, name)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, row.map((cell, i) => h("td", num.has(i) ? { class: "num" } : {}, cell))))));
}

function card(label, value, bad) {
  return h("div", { class: "card" }, h("div", { class: bad ? "value bad" : "value" }, value), h("div", { class: "label" }, label));
}

// A line chart of `chart.series` over `chart.times` as SVG, with the value
// axis from 0 to the largest value.
function lineChart(title, chart, format) {
  const box = h("div", { class: "chart", "data-chart": title });
  box.append(h("div", {}, h("strong", {}, title)));
  if (!chart || chart.times.length === 0) {
    box.append(h("p", { class: "muted" }, "No samples yet: the broker takes one every 10 s."));
    return box;
  }
  const width = 800, height = 220, left = 70, bottom = 24;
  const max = Math.max(1, ...chart.series.flatMap(([, values]) => values));
  const t0 = chart.times[0], t1 = chart.times[chart.times.length - 1];
  const x = (t) => left + (t1 === t0 ? (width - left) / 2 : ((t - t0) / (t1 - t0)) * (width - left - 10));
  const y = (v) => 10 + (1 - v / max) * (height - bottom - 10);
  const plot = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img" });
  plot.append(svg("line", { x1: left, y1: y(0), x2: width, y2: y(0), stroke: "#e4e7ec" }));
  plot.append(svg("line", { x1: left, y1: y(max), x2: width, y2: y(max), stroke: "#e4e7ec" }));
  for (const [v, label] of [[0, format(0)], [max, format(max)]]) {
    const text = svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", "font-size": "11", fill: "#667085" });
    text.textContent = label;
    plot.append(text);
  }
  for (const [t, anchor] of t1 === t0 ? [[t0, "middle"]] : [[t0, "start"], [t1, "end"]]) {
    const text = svg("text", { x: x(t), y: height - 6, "text-anchor": anchor, "font-size": "11", fill: "#667085" });
    text.textContent = new Date(t).toLocaleTimeString();
    plot.append(text);
  }
  chart.series.forEach(([, values], i) => {
    const points = values.map((v, j) => `${x(chart.times[j]).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    plot.append(svg("polyline", { points, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": "2", "data-series": chart.series[i][0] }));
    if (values.length === 1) {
      plot.append(svg("circle", { cx: x(chart.times[0]), cy: y(values[0]), r: 3, fill: COLORS[i % COLORS.length] }));
    }
  });
  box.append(plot);
  box.append(h("div", { class: "legend" }, chart.series.map(([name, values], i) =>
    h("span", { class: `swatch${i % COLORS.length}` }, `■ ${name}: ${format(values[values.length - 1])} now`))));
  return box;
}

// ---------------------------------------------------------------- pages

async function overview(main) {
  const [cluster, throughput] = await Promise.all([getJson("/v1/cluster"), getJson("/v1/throughput")]);
  const live = cluster.brokers.filter((b) => !b.fenced).length;
  const fenced = cluster.brokers.length - live;
  main.append(h("h1", {}, `Cluster ${cluster.cluster_id}`));
  main.append(h("div", { class: "cards" },
    card("brokers live", `${live} of ${cluster.brokers.length}`, fenced > 0),
    card("active controller", cluster.controller_id >= 0 ? `node ${cluster.controller_id}` : "none", cluster.controller_id < 0),
    card("offline partitions", cluster.offline_partitions.length, cluster.offline_partitions.length > 0),
    card("under-replicated partitions", cluster.under_replicated_partitions.length, cluster.under_replicated_partitions.length > 0)));
  main.append(h("h2", {}, "Brokers"));
  main.append(table(["node", "address", "rack", "state", "role", "leaders"], cluster.brokers.map((b) => [
    b.id,
    `${b.host}:${b.port}`,
    b.rack || "–",
    b.fenced ? h("span", { class: "bad" }, "fenced") : h("span", { class: "ok" }, "live"),
    b.id === cluster.controller_id ? "active controller" : "",
    b.leaders,
  ]), [5]));
  const raft = cluster.controller;
  main.append(h("p", { class: "muted" },
    `This node (${cluster.node_id}): Raft ${raft.role}, term ${raft.term}, log ${raft.last_log_index ?? "–"}, applied ${raft.applied_index ?? "–"}.`));
  if (cluster.under_replicated_partitions.length + cluster.offline_partitions.length > 0) {
    main.append(h("h2", {}, "Partitions in trouble"));
    main.append(table(["partition", "problem"], [
      ...cluster.offline_partitions.map((p) => [`${p.topic}-${p.partition}`, h("span", { class: "bad" }, "offline")]),
      ...cluster.under_replicated_partitions.map((p) => [`${p.topic}-${p.partition}`, "under-replicated"]),
    ]));
  }
  main.append(h("p", { class: "muted" }, "Tiered storage: ",
    settings.remote_tier ? `on, remote tier ${settings.remote_tier}` : "off on this broker"));
  const mirrors = await getJson("/v1/mirrors").catch(() => null);
  if (mirrors && mirrors.length > 0) {
    main.append(h("h2", {}, "Mirrors"));
    main.append(table(["mirror", "source", "state", "topics", "failed over"], mirrors.map((m) => [
      m.name, m.source_bootstrap, m.paused ? "paused" : "running", m.mirror_topics.length,
      m.mirror_topics.filter((t) => t.state === "failed-over").length,
    ]), [3, 4]));
  }
  main.append(h("h2", {}, "Throughput of this broker"));
  const pick = (names) => throughput && { ...throughput, series: throughput.series.filter(([n]) => names.includes(n)) };
  main.append(lineChart("bytes per second", pick(["bytes_in", "bytes_out"]), (v) => `${bytes(v)}/s`));
  main.append(lineChart("records appended per second", pick(["records_in"]), (v) => `${Math.round(v)}/s`));
}

async function topicList(main, params) {
  const search = params.get("search") || "";
  const page = Number(params.get("page") || 0);
  const list = await getJson(`/v1/topics?search=${encodeURIComponent(search)}&page=${page}`);
  main.append(h("h1", {}, "Topics"));
  const input = h("input", { type: "search", placeholder: "Search topics", value: search, "aria-label": "Search topics" });
  const go = (p) => { location.hash = `#/topics?search=${encodeURIComponent(input.value)}&page=${p}`; };
  input.addEventListener("keydown", (e) => { if (e.key === "Enter") go(0); });
  const pages = Math.max(1, Math.ceil(list.total / list.page_size));
  main.append(h("div", { class: "toolbar" }, input, h("button", { onclick: () => go(0) }, "Search"),
    h("span", { class: "muted" }, `${list.total} topic(s), page ${page + 1} of ${pages}`),
    h("button", { onclick: () => go(page - 1), ...(page <= 0 ? { disabled: "" } : {}) }, "Previous"),
    h("button", { onclick: () => go(page + 1), ...(page + 1 >= pages ? { disabled: "" } : {}) }, "Next")));
  const newName = h("input", { type: "text", name: "new-topic", placeholder: "new topic name" });
  const newPartitions = h("input", { type: "number", name: "new-partitions", min: "1", value: "3", "aria-label": "Partitions" });
  const newReplicas = h("input", { type: "number", name: "new-replicas", min: "1", placeholder: "default", "aria-label": "Replication factor" });
  main.append(actionRow("create-topic", [newName, "partitions", newPartitions, "replicas", newReplicas], "Create topic", async () => {
    const body = { name: newName.value.trim(), partitions: Number(newPartitions.value) };
    if (newReplicas.value) body.replication_factor = Number(newReplicas.value);
    await send("POST", "/v1/topics", body);
    location.hash = `#/topics/${encodeURIComponent(body.name)}`;
    return `Created ${body.name}.`;
  }));
  main.append(table(["topic", "partitions", "replicas", "under-replicated", "offline", "size here", "retention", "cleanup policy"],
    list.topics.map((t) => [
      h("a", { href: `#/topics/${encodeURIComponent(t.name)}` }, t.name, t.internal ? " (internal)" : ""),
      t.partitions, t.replication_factor,
      t.under_replicated ? h("span", { class: "bad" }, t.under_replicated) : 0,
      t.offline ? h("span", { class: "bad" }, t.offline) : 0,
      bytes(t.local_size_bytes), duration(t.retention_ms), t.cleanup_policy,
    ]), [1, 2, 3, 4, 5]));
}

async function topicPage(main, name, params) {
  const topic = await getJson(`/v1/topics/${encodeURIComponent(name)}`);
  if (!topic) { main.append(h("p", { class: "error" }, `Topic ${name} does not exist.`)); return; }
  main.append(h("h1", {}, `Topic ${topic.name}`, topic.internal ? " (internal)" : ""));
  main.append(h("p", { class: "muted" }, `id ${topic.id} · ${topic.partitions.length} partition(s) · `,
    h("a", { href: `#/topics/${encodeURIComponent(topic.name)}/messages` }, "Browse messages")));
  const page = Number(params.get("page") || 0);
  const pages = Math.max(1, Math.ceil(topic.partitions.length / PARTITIONS_PER_PAGE));
  const go = (p) => { location.hash = `#/topics/${encodeURIComponent(name)}?page=${p}`; };
  main.append(h("h2", {}, "Partitions"));
  main.append(h("div", { class: "toolbar" }, h("span", { class: "muted" }, `page ${page + 1} of ${pages}`),
    h("button", { onclick: () => go(page - 1), ...(page <= 0 ? { disabled: "" } : {}) }, "Previous"),
    h("button", { onclick: () => go(page + 1), ...(page + 1 >= pages ? { disabled: "" } : {}) }, "Next")));
  const shown = topic.partitions.slice(page * PARTITIONS_PER_PAGE, (page + 1) * PARTITIONS_PER_PAGE);
  main.append(table(["partition", "leader", "replicas", "ISR", "log start", "high watermark", "log end", "size here"],
    shown.map((p) => [
      p.partition,
      p.leader >= 0 ? p.leader : h("span", { class: "bad" }, "none"),
      p.replicas.join(", "),
      p.isr.length < p.replicas.length ? h("span", { class: "bad" }, p.isr.join(", ")) : p.isr.join(", "),
      p.log_start_offset ?? "–", p.high_watermark ?? "–", p.log_end_offset ?? "–", bytes(p.size_bytes),
    ]), [0, 1, 4, 5, 6, 7]));
  const base = `/v1/topics/${encodeURIComponent(topic.name)}`;
  if (!topic.internal) {
    const total = h("input", { type: "number", name: "partition-count", min: String(topic.partitions.length + 1), value: String(topic.partitions.length + 1), "aria-label": "Partition count" });
    main.append(actionRow("add-partitions", ["partitions in all", total], "Add partitions", async () => {
      await send("POST", `${base}/partitions`, { total: Number(total.value) });
      setTimeout(route, 300);
      return `Now ${total.value} partitions.`;
    }));
  }
  main.append(h("h2", {}, "Configs"));
  const configName = h("select", { name: "config-name", "aria-label": "Config" }, topic.configs.map((c) => h("option", { value: c.name }, c.name)));
  const configValue = h("input", { type: "text", name: "config-value", placeholder: "value", "aria-label": "Value" });
  main.append(actionRow("set-config", [configName, configValue], "Set", async () => {
    await send("PATCH", `${base}/configs`, { set: { [configName.value]: configValue.value } });
    setTimeout(route, 300);
    return `${configName.value} set.`;
  }));
  main.append(table(["config", "value", "source", ""], topic.configs.map((c) => [
    c.name, c.value, c.source === "DEFAULT_CONFIG" ? h("span", { class: "muted" }, c.source) : c.source,
    c.source === "DYNAMIC_TOPIC_CONFIG" && !settings.read_only ? h("button", { name: `unset-${c.name}`, onclick: async () => {
      await send("PATCH", `${base}/configs`, { delete: [c.name] });
      route();
    } }, "Remove override") : "",
  ])));
  if (topic.internal) {
    main.append(h("p", { class: "muted" }, "An internal topic: the console does not delete it."));
    return;
  }
  if (settings.read_only) return;
  main.append(h("h2", {}, "Delete"));
  const confirmName = h("input", { type: "text", name: "confirm-delete", placeholder: `type ${topic.name} to confirm` });
  main.append(actionRow("delete-topic", [confirmName], "Delete topic", async () => {
    if (confirmName.value !== topic.name) throw new Error(`Type ${topic.name} to confirm.`);
    await send("DELETE", base);
    location.hash = "#/topics";
    return "Deleted.";
  }));
}

function decodeBase64(text) {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

// Bytes as the chosen view shows them: text, pretty JSON, or hex.
function showBytes(base64, view) {
  if (base64 === null || base64 === undefined) return h("span", { class: "muted" }, "null");
  const raw = decodeBase64(base64);
  if (view === "hex") return h("pre", {}, Array.from(raw, (b) => b.toString(16).padStart(2, "0")).join(" "));
  const text = new TextDecoder("utf-8").decode(raw);
  if (view === "json") {
    try {
      return h("pre", { class: "json" }, JSON.stringify(JSON.parse(text), null, 2));
    } catch (_) {
      return h("pre", {}, text, h("span", { class: "muted" }, "  (not JSON)"));
    }
  }
  return h("pre", {}, text);
}

async function messagesPage(main, name, params) {
  const topic = await getJson(`/v1/topics/${encodeURIComponent(name)}`);
  if (!topic) { main.append(h("p", { class: "error" }, `Topic ${name} does not exist.`)); return; }
  const from = params.get("from") || "latest";
  const view = params.get("view") || "text";
  main.append(h("h1", {}, `Messages of ${topic.name}`));
  const partition = h("select", { "aria-label": "Partition", name: "partition" },
    h("option", { value: "" }, "all partitions"),
    topic.partitions.map((p) => h("option", { value: p.partition }, `partition ${p.partition}`)));
  partition.value = params.get("partition") || "";
  const fromSelect = h("select", { "aria-label": "From", name: "from" },
    h("option", { value: "latest" }, "the latest"), h("option", { value: "offset" }, "from offset"), h("option", { value: "time" }, "from time"));
  fromSelect.value = from;
  const at = h("input", { type: "text", name: "at", placeholder: "offset, or 2026-12-01T10:00:00Z", value: params.get("at") || "" });
  const limit = h("input", { type: "number", name: "limit", min: "1", max: "500", value: params.get("limit") || "50" });
  const viewSelect = h("select", { "aria-label": "Show values as", name: "view" },
    h("option", { value: "text" }, "text"), h("option", { value: "json" }, "JSON"), h("option", { value: "hex" }, "hex"));
  viewSelect.value = view;
  const load = () => {
    const q = new URLSearchParams({ partition: partition.value, from: fromSelect.value, at: at.value, limit: limit.value, view: viewSelect.value });
    location.hash = `#/topics/${encodeURIComponent(name)}/messages?${q}`;
  };
  main.append(h("div", { class: "toolbar" }, partition, fromSelect, at, limit, "records as", viewSelect,
    h("button", { onclick: load, name: "load" }, "Load")));
  const query = new URLSearchParams({ from, limit: params.get("limit") || "50" });
  if (params.get("partition")) query.set("partition", params.get("partition"));
  if (from === "offset") query.set("offset", params.get("at") || "0");
  if (from === "time") query.set("time", String(Date.parse(params.get("at") || "") || 0));
  const testKey = h("input", { type: "text", name: "test-key", placeholder: "key (optional)" });
  const testValue = h("input", { type: "text", name: "test-value", placeholder: "value" });
  main.append(actionRow("produce", ["Produce a test record:", testKey, testValue], "Produce", async () => {
    const body = { value: testValue.value };
    if (testKey.value) body.key = testKey.value;
    const written = await send("POST", `/v1/topics/${encodeURIComponent(name)}/messages`, body);
    setTimeout(route, 300);
    return `Written to partition ${written.partition} at offset ${written.offset}.`;
  }));
  const found = await getJson(`/v1/topics/${encodeURIComponent(name)}/messages?${query}`);
  for (const note of found.skipped) main.append(h("p", { class: "muted" }, note));
  main.append(h("p", { class: "muted" }, `${found.records.length} record(s)`));
  main.append(table(["partition", "offset", "timestamp", "key", "value", "headers"], found.records.map((r) => [
    r.partition, r.offset, new Date(r.timestamp).toISOString(),
    showBytes(r.key, view === "hex" ? "hex" : "text"),
    h("div", {}, showBytes(r.value, view),
      r.truncated ? h("div", { class: "muted" }, `truncated: the value is ${bytes(r.value_size)}`) : null),
    h("div", {}, r.headers.map((hd) => h("div", {}, `${hd.key}=`, hd.value === null ? "null" : new TextDecoder().decode(decodeBase64(hd.value))))),
  ]), [0, 1]));
}

async function groupList(main) {
  const groups = await getJson("/v1/groups");
  main.append(h("h1", {}, "Consumer groups"));
  main.append(h("p", { class: "muted" }, "The groups this broker coordinates, and share groups whose partitions it leads."));
  main.append(table(["group", "type", "state", "members", "lag", "oldest unconsumed"], groups.map((g) => [
    h("a", { href: `#/groups/${encodeURIComponent(g.group)}` }, g.group),
    g.type, g.state, g.members,
    g.lag > 0 ? h("span", { class: "bad" }, g.lag) : 0,
    seconds(Math.max(0, ...g.partitions.map((p) => p.lag_seconds))),
  ]), [3, 4]));
}

async function groupPage(main, name) {
  const [group, history] = await Promise.all([
    getJson(`/v1/groups/${encodeURIComponent(name)}`),
    getJson(`/v1/groups/${encodeURIComponent(name)}/lag-history`),
  ]);
  if (!group) { main.append(h("p", { class: "error" }, `Group ${name} is not coordinated by this broker, or does not exist.`)); return; }
  main.append(h("h1", {}, `Group ${group.group}`));
  main.append(h("div", { class: "cards" },
    card("type", group.type), card("state", group.state), card("members", group.members),
    card("total lag", group.lag, group.lag > 0),
    card("oldest unconsumed record", seconds(Math.max(0, ...group.partitions.map((p) => p.lag_seconds))))));
  main.append(h("h2", {}, "Lag over time"));
  main.append(lineChart("records behind", history, (v) => `${Math.round(v)}`));
  if (group.type !== "share" && !settings.read_only) {
    main.append(h("h2", {}, "Reset offsets"));
    const topics = [...new Set(group.partitions.map((p) => p.topic))];
    const topicSelect = h("select", { name: "reset-topic", "aria-label": "Topic" }, topics.map((t) => h("option", { value: t }, t)));
    const to = h("select", { name: "reset-to", "aria-label": "To" },
      h("option", { value: "earliest" }, "to the earliest"), h("option", { value: "latest" }, "to the latest"),
      h("option", { value: "offset" }, "to offset"), h("option", { value: "time" }, "to time"));
    const at = h("input", { type: "text", name: "reset-at", placeholder: "offset, or 2026-12-01T10:00:00Z" });
    const preview = h("div", { "data-preview": "" });
    const body = (dryRun) => {
      const b = { topic: topicSelect.value, to: to.value, dry_run: dryRun };
      if (to.value === "offset") b.offset = Number(at.value);
      if (to.value === "time") b.time = Date.parse(at.value);
      return b;
    };
    const show = (answer) => {
      preview.replaceChildren(table(["partition", answer.dry_run ? "would start at" : "starts at"],
        answer.offsets.map((o) => [o.partition, o.offset]), [0, 1]));
    };
    main.append(actionRow("reset-dry-run", [topicSelect, to, at], "Preview (dry run)", async () => {
      show(await send("POST", `/v1/groups/${encodeURIComponent(name)}/reset-offsets`, body(true)));
      return "Nothing committed.";
    }));
    main.append(actionRow("reset-offsets", [], "Reset offsets", async () => {
      show(await send("POST", `/v1/groups/${encodeURIComponent(name)}/reset-offsets`, body(false)));
      setTimeout(route, 1500);
      return "Committed.";
    }));
    main.append(preview);
  }
  if (group.member_assignments && group.member_assignments.length > 0) {
    main.append(h("h2", {}, "Members"));
    main.append(table(["member", "client id", "host", "assigned partitions"], group.member_assignments.map((m) => [
      m.member_id, m.client_id, m.client_host, m.partitions.join(", ") || "none",
    ])));
  }
  if (group.share_partitions && group.share_partitions.length > 0) {
    main.append(h("h2", {}, "Share-partitions led here"));
    main.append(table(["topic", "partition", "start offset", "log end", "in flight", "available", "acquired", "oldest available"],
      group.share_partitions.map((p) => [p.topic, p.partition, p.start_offset, p.log_end_offset, p.in_flight,
        p.available, p.acquired, seconds(p.oldest_available_seconds)]), [1, 2, 3, 4, 5, 6]));
  }
  main.append(h("h2", {}, "Partitions"));
  main.append(table(["topic", "partition", "committed offset", "log end", "lag", "oldest unconsumed", "lost to retention"],
    group.partitions.map((p) => [
      h("a", { href: `#/topics/${encodeURIComponent(p.topic)}` }, p.topic), p.partition, p.committed_offset,
      p.log_end_offset, p.lag > 0 ? h("span", { class: "bad" }, p.lag) : 0, seconds(p.lag_seconds), p.lost_to_retention,
    ]), [1, 2, 3, 4, 6]));
}

// ---------------------------------------------------------------- routing

async function route() {
  clearTimeout(refreshTimer);
  const [path, query] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const section = parts[0] || "overview";
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.nav === section);
  const main = h("main", { id: "main" });
  try {
    if (section === "overview") {
      await overview(main);
      refreshTimer = setTimeout(route, 10000);
    } else if (section === "topics" && parts[2] === "messages") await messagesPage(main, parts[1], params);
    else if (section === "topics" && parts[1]) await topicPage(main, parts[1], params);
    else if (section === "topics") await topicList(main, params);
    else if (section === "groups" && parts[1]) await groupPage(main, parts[1]);
    else if (section === "groups") await groupList(main);
    else main.append(h("p", { class: "error" }, "No such page."));
  } catch (error) {
    main.append(h("p", { class: "error" }, `Cannot load this page: ${error.message}`));
  }
  document.getElementById("main").replaceWith(main);
  flash = null;
  document.title = `${main.querySelector("h1")?.textContent || "Weir"} · Weir console`;
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", async () => {
  try {
    settings = await getJson("/v1/console");
  } catch (_) {
    // Drawn as if writable; a change is refused by the broker all the same.
  }
  const who = [settings.user, settings.read_only ? "read-only" : null].filter(Boolean).join(" · ");
  document.getElementById("node").textContent = who;
  route();
});
