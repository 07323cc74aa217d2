// The town in a browser: its channels, the composer, the live feed. Plain JavaScript, no build
// step; every text goes in as textContent, so markup in anyone's words stays inert. The map
// (townmap.js), the resident cards (card.js) and the replay (replay.js) share `state`.
"use strict";

const NOW_EVERY_MS = 20000; // who is where and the clock, refreshed at least this often
const HISTORY = 100;

const state = {
  name: "",
  areas: [],
  places: [], // the map's blocks: {name, description, x, y, w, h}
  residents: [], // {name, avatar, area, action, action_emoji, awake}
  avatars: new Map(), // resident -> their own emoji
  current: null,
  messages: new Map(), // area -> Map(key -> entry); entry.order sorts the feed
  unread: new Map(),
  typing: new Map(), // author -> {area, emoji, timer}
  epoch: null, // the server's run; its message ids count from 1 in each run
  lastId: 0,
  local: 0,
  nowTimer: null,
  replay: null, // replay.js's player when the page plays a recorded run
};

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// -- remembered in this browser -------------------------------------------------------------

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
  channel.set(key, { ...message, order: message.id });
  if (message.author && state.typing.has(message.author)) stopTyping(message.author);
  if (message.area === state.current) {
    drawFeed(message.kind === "visitor");
  } else {
    state.unread.set(message.area, (state.unread.get(message.area) || 0) + 1);
    drawChannels();
  }
  if (message.kind !== "visitor") refreshSoon(1500);
}

function addLocal(area, entry) {
  state.local += 1;
  const order = state.lastId + state.local / 1e6;
  channelOf(area).set(`local-${state.local}`, { ...entry, area, order, id: `local-${state.local}` });
  if (area === state.current) drawFeed(true);
}

function entriesOf(area) {
  if (state.replay) return replayEntries(area);
  return [...channelOf(area).values()].sort((a, b) => a.order - b.order);
}

// -- places, who is where ------------------------------------------------------------------

function peopleIn(area) {
  return state.residents.filter((r) => r.area === area);
}

function drawChannels() {
  $("channels").replaceChildren(...state.areas.map((area) => {
    const item = el("li");
    const button = el("button", area === state.current ? "place current" : "place");
    button.type = "button";
    button.dataset.area = area;
    button.append(el("span", "place-name", area));
    const count = state.unread.get(area) || 0;
    if (count) button.append(el("span", "unread", String(count)));
    const people = peopleIn(area).map((r) => `${r.avatar} ${r.name}${r.awake ? "" : " (asleep)"}`);
    if (people.length) button.append(el("span", "place-people", people.join(", ")));
    button.addEventListener("click", () => openChannel(area, { push: true }));
    item.append(button);
    return item;
  }));
}

function drawPeople() {
  const line = $("channel-people");
  line.replaceChildren();
  if (!state.current) return;
  const here = peopleIn(state.current);
  line.append(el("span", "", here.length ? "Here: " : "Here: nobody"));
  for (const r of here) {
    const who = el("button", r.awake ? "person" : "person asleep", `${r.avatar} ${r.name}`);
    who.type = "button";
    who.title = r.awake ? r.action : "asleep";
    who.addEventListener("click", () => openCard(r.name));
    line.append(who);
  }
}

// Open a place's channel; the address names it, and a click adds a step the back button undoes.
async function openChannel(area, { push = false } = {}) {
  state.current = area;
  state.unread.delete(area);
  const hash = `#${encodeURIComponent(area)}`;
  if (location.hash !== hash) history[push ? "pushState" : "replaceState"](null, "", hash);
  $("channel-title").textContent = area;
  document.title = `${area} · ${state.name}`;
  showView("channel");
  closeDrawer();
  drawAll();
  if (state.replay) return;
  $("text").disabled = false;
  $("send").disabled = false;
  try {
    const data = await api(`/api/history?area=${encodeURIComponent(area)}&limit=${HISTORY}`);
    if (state.current !== area || !sameRun(data.epoch)) return;
    for (const message of data.messages) {
      state.lastId = Math.max(state.lastId, message.id);
      channelOf(area).set(`m${message.id}`, { ...message, order: message.id });
    }
    drawFeed(true);
  } catch (error) {
    setStatus(`Could not load ${area}: ${error.message}`, true);
  }
}

function fromAddress() {
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (state.areas.includes(wanted) && wanted !== state.current) openChannel(wanted);
}

function drawAll() {
  drawChannels();
  drawPeople();
  drawMap();
  drawFeed(true);
}

// -- who is where, the clock ---------------------------------------------------------------

function drawBrain(brain) {
  const badge = $("brain");
  badge.textContent = brain.behind ? `${brain.label} · ${brain.behind}` : brain.label;
  badge.title = "The residents are AI personas. Brain: " + brain.label;
  badge.dataset.offline = String(brain.offline);
  badge.hidden = false;
}

async function refreshNow() {
  try {
    const [now, seen] = await Promise.all([api("/api/now"), api("/api/map")]);
    $("clock").textContent = now.time;
    drawBrain(now.brain);
    state.places = seen.places;
    state.areas = seen.places.map((p) => p.name); // places a live update added or removed
    state.residents = seen.residents;
    for (const r of seen.residents) state.avatars.set(r.name, r.avatar);
    const first = seen.residents.length ? seen.residents[0].name.split(" ")[0] : "<name>";
    $("try-interview").textContent = `/interview ${first} How is your day going?`;
    drawChannels();
    drawPeople();
    drawMap();
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
  events.addEventListener("typing", startTyping);
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
      await api("/api/say", { area: state.current, name: nameNow(), visitor_id: visitorId(), text });
    }
    setStatus("", false);
  } catch (error) {
    setStatus(error.message, true);
    if (!input.value) input.value = text;
  }
}

async function main() {
  setUpPage();
  $("name").value = remembered("bottown.name") || "";
  $("name").addEventListener("change", () => remember("bottown.name", nameNow()));
  $("composer").addEventListener("submit", submit);
  $("text").disabled = true;
  $("send").disabled = true;
  let town;
  try {
    town = await api("/api/town");
  } catch (error) {
    setStatus(`The town is out of reach: ${error.message}`, true);
    return;
  }
  state.name = town.name;
  state.areas = town.areas;
  $("name").maxLength = town.max_name;
  $("text").maxLength = town.max_text;
  document.title = `${town.name} · bottown`;
  $("town-name").textContent = town.name;
  if (!town.live || location.pathname === "/replay") {
    $("live-link").hidden = !town.live;
    await startReplay();
  } else {
    $("replay-link").hidden = !town.replay;
    drawBrain(town.brain);
    welcome(town);
    connect();
    refreshNow();
  }
  window.addEventListener("popstate", fromAddress);
  window.addEventListener("hashchange", fromAddress);
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (state.areas.includes(wanted)) {
    openChannel(wanted);
  } else {
    drawAll();
    showView("map");
  }
}

document.addEventListener("DOMContentLoaded", main);
