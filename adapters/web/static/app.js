// The town in a browser. Plain JavaScript, no build step; every text goes in as textContent,
// so markup in anyone's words stays inert.
"use strict";

const NOW_EVERY_MS = 20000; // who is where and the clock, refreshed at least this often
const HISTORY = 100;

const state = {
  areas: [],
  current: null,
  messages: new Map(), // area -> Map(key -> entry); entry.order sorts the feed
  unread: new Map(),
  where: new Map(), // area -> "Isabella Rodriguez, Klaus Mueller (asleep)"
  epoch: null, // the server's run; its message ids count from 1 in each run
  lastId: 0,
  local: 0,
  rendered: -Infinity, // the order of the last entry in the feed
  nowTimer: null,
};

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// -- who am I ----------------------------------------------------------------------------

const memory = {};
function remembered(key) {
  try {
    return window.localStorage.getItem(key);
  } catch {
    return memory[key] ?? null;
  }
}
function remember(key, value) {
  memory[key] = value;
  try {
    window.localStorage.setItem(key, value);
  } catch {
    /* private mode: remembered for this page only */
  }
}

function visitorId() {
  let id = remembered("bottown.visitor");
  if (!id || !/^[A-Za-z0-9_-]{1,64}$/.test(id)) {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    id = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    remember("bottown.visitor", id);
  }
  return id;
}

// -- talking to the town ------------------------------------------------------------------

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    throw new Error((data && data.error) || `${response.status} ${response.statusText}`);
  }
  return data;
}

function say(text) {
  const message = { area: state.current, name: nameNow(), visitor_id: visitorId(), text };
  return api("/api/say", message);
}

async function command(line) {
  const reply = await api("/api/command", {
    line, area: state.current, name: nameNow(), visitor_id: visitorId(),
  });
  if (!reply.published) {
    addLocal(state.current, { kind: "reply", line, text: reply.text, ok: reply.ok });
  }
  refreshSoon(300);
}

function nameNow() {
  return $("name").value.trim();
}

// -- messages -----------------------------------------------------------------------------

function channelOf(area) {
  if (!state.messages.has(area)) state.messages.set(area, new Map());
  return state.messages.get(area);
}

function receive(message) {
  const channel = channelOf(message.area);
  const key = `m${message.id}`;
  if (channel.has(key)) return;
  state.lastId = Math.max(state.lastId, message.id);
  const entry = { ...message, order: message.id };
  channel.set(key, entry);
  if (message.area === state.current) {
    show(entry);
  } else {
    state.unread.set(message.area, (state.unread.get(message.area) || 0) + 1);
    drawChannels();
  }
  if (message.kind !== "visitor") refreshSoon(1500);
}

function addLocal(area, entry) {
  state.local += 1;
  const order = state.lastId + state.local / 1e6;
  const full = { ...entry, area, order, id: `local-${state.local}` };
  channelOf(area).set(full.id, full);
  if (area === state.current) show(full);
}

function show(entry) {
  if (entry.order < state.rendered) {
    drawFeed();
    return;
  }
  const feed = $("feed");
  const atBottom = feed.scrollHeight - feed.scrollTop - feed.clientHeight < 80;
  feed.append(messageNode(entry));
  state.rendered = entry.order;
  if (atBottom || entry.kind === "reply" || entry.kind === "visitor") {
    feed.scrollTop = feed.scrollHeight;
  }
}

function drawFeed() {
  const feed = $("feed");
  const entries = [...channelOf(state.current).values()].sort((a, b) => a.order - b.order);
  feed.replaceChildren(...entries.map(messageNode));
  if (entries.length === 0) {
    feed.append(el("li", "empty", "Nothing has happened here yet. Say hello?"));
  }
  state.rendered = entries.length ? entries[entries.length - 1].order : -Infinity;
  feed.scrollTop = feed.scrollHeight;
}

function messageNode(entry) {
  if (entry.kind === "reply") return replyNode(entry);
  const item = el("li", `msg ${entry.kind}`);
  item.dataset.id = String(entry.id);
  if (entry.kind === "town") {
    item.append(el("p", "text", entry.text));
    if (entry.clock) item.append(el("span", "clock", entry.clock));
    return item;
  }
  item.dataset.author = entry.author;
  const avatar = entry.kind === "resident" && entry.emoji ? entry.emoji : initials(entry.author);
  item.append(el("span", "avatar", avatar));
  const body = el("div", "body");
  const meta = el("p", "meta");
  meta.append(el("span", "author", entry.author));
  if (entry.kind === "visitor") meta.append(el("span", "tag", "visitor"));
  if (entry.clock) meta.append(el("span", "clock", entry.clock));
  body.append(meta, el("p", "text", entry.text));
  item.append(body);
  return item;
}

function replyNode(entry) {
  const item = el("li", `msg reply${entry.ok ? "" : " error"}`);
  item.dataset.id = entry.id;
  const meta = el("p", "meta");
  meta.append(el("span", "tag", "only you see this"), el("span", "line", entry.line));
  item.append(meta, el("p", "text", entry.text));
  return item;
}

function initials(name) {
  const words = String(name || "?").trim().split(/\s+/);
  return words.slice(0, 2).map((w) => Array.from(w)[0] || "").join("").toUpperCase() || "?";
}

// -- channels -----------------------------------------------------------------------------

function drawChannels() {
  const list = $("channels");
  list.replaceChildren(...state.areas.map((area) => {
    const item = el("li");
    const button = el("button", area === state.current ? "place current" : "place");
    button.type = "button";
    button.dataset.area = area;
    const title = el("span", "place-name", area);
    button.append(title);
    const count = state.unread.get(area) || 0;
    if (count) button.append(el("span", "unread", String(count)));
    const people = state.where.get(area);
    if (people) button.append(el("span", "place-people", people));
    button.addEventListener("click", () => openChannel(area));
    item.append(button);
    return item;
  }));
}

async function openChannel(area) {
  state.current = area;
  state.unread.delete(area);
  if (decodeURIComponent(location.hash.slice(1)) !== area) {
    history.replaceState(null, "", `#${encodeURIComponent(area)}`);
  }
  $("channel-title").textContent = area;
  $("text").disabled = false;
  $("send").disabled = false;
  drawPeople();
  drawChannels();
  drawFeed();
  try {
    const url = `/api/history?area=${encodeURIComponent(area)}&limit=${HISTORY}`;
    const data = await api(url);
    if (state.current !== area || !sameRun(data.epoch)) return;
    for (const message of data.messages) {
      const key = `m${message.id}`;
      state.lastId = Math.max(state.lastId, message.id);
      channelOf(area).set(key, { ...message, order: message.id });
    }
    drawFeed();
  } catch (error) {
    setStatus(`Could not load ${area}: ${error.message}`, true);
  }
  $("text").focus();
}

function drawPeople() {
  const people = state.current ? state.where.get(state.current) : "";
  $("channel-people").textContent = state.current ? `Here: ${people || "nobody"}` : "";
}

// -- who is where, the clock ---------------------------------------------------------------

// Who thinks for the residents (the offline brain stands out: its answers come from no LLM).
function drawBrain(brain) {
  const badge = $("brain");
  badge.textContent = brain.label;
  badge.title = "The residents are AI personas. Brain: " + brain.label;
  badge.dataset.offline = String(brain.offline);
  badge.hidden = false;
}

async function refreshNow() {
  try {
    const now = await api("/api/now");
    $("clock").textContent = now.time;
    drawBrain(now.brain);
    state.where = new Map();
    for (const line of now.where.split("\n").slice(1)) {
      const cut = line.indexOf(": ");
      if (cut > 0) state.where.set(line.slice(0, cut), line.slice(cut + 2));
    }
    drawChannels();
    drawPeople();
  } catch (error) {
    $("clock").textContent = `the clock is out of reach (${error.message})`;
  }
  refreshSoon(NOW_EVERY_MS);
}

function refreshSoon(ms) {
  clearTimeout(state.nowTimer);
  state.nowTimer = setTimeout(refreshNow, ms);
}

// -- the live feed ------------------------------------------------------------------------

function connect() {
  const events = new EventSource("/api/events");
  const connection = $("connection");
  events.onopen = () => {
    connection.dataset.state = "live";
    connection.textContent = "live";
  };
  events.onerror = () => {
    connection.dataset.state = "lost";
    connection.textContent = "reconnecting…";
  };
  events.addEventListener("hello", (event) => sameRun(JSON.parse(event.data).epoch));
  events.onmessage = (event) => {
    try {
      receive(JSON.parse(event.data));
    } catch (error) {
      console.error("a message the page could not read", error);
    }
  };
}

// The server restarted: its numbers began again, so forget them and reload the channel.
function sameRun(epoch) {
  if (state.epoch === null || state.epoch === epoch) {
    state.epoch = epoch;
    return true;
  }
  state.epoch = epoch;
  state.messages.clear();
  state.unread.clear();
  state.lastId = 0;
  state.local = 0;
  drawChannels();
  if (state.current) openChannel(state.current);
  return false;
}

// -- writing ------------------------------------------------------------------------------

function setStatus(text, isError) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", Boolean(isError));
}

async function submit(event) {
  event.preventDefault();
  const input = $("text");
  const text = input.value.trim();
  if (!state.current || !text) return;
  if (!nameNow()) {
    setStatus("Tell the town your name first.", true);
    $("name").focus();
    return;
  }
  remember("bottown.name", nameNow());
  input.value = "";
  setStatus(text.startsWith("/") ? "Asking the town…" : "", false);
  try {
    if (text.startsWith("/")) {
      await command(text);
    } else {
      await say(text);
    }
    setStatus("", false);
  } catch (error) {
    setStatus(error.message, true);
    if (!input.value) input.value = text;
  }
}

async function main() {
  $("name").value = remembered("bottown.name") || "";
  $("name").addEventListener("change", () => remember("bottown.name", nameNow()));
  $("composer").addEventListener("submit", submit);
  $("text").disabled = true;
  $("send").disabled = true;
  connect();
  try {
    const town = await api("/api/town");
    state.areas = town.areas;
    document.title = `${town.name} · bottown`;
    $("town-name").textContent = town.name;
    drawBrain(town.brain);
  } catch (error) {
    setStatus(`The town is out of reach: ${error.message}`, true);
    return;
  }
  drawChannels();
  refreshNow();
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (state.areas.includes(wanted)) {
    openChannel(wanted);
  } else {
    $("feed").replaceChildren(el("li", "empty", "Pick a place on the left to see what happens there."));
  }
}

document.addEventListener("DOMContentLoaded", main);
