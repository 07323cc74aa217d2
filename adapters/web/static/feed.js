// A channel's feed: speech as messages with each resident's own emoji, narration as quiet
// lines that open, "X is typing…" under them.
"use strict";

const TYPING_MS = 15000; // "X is typing…" goes after this long without their message

// Speech as messages; each run of narration between them as one quiet line that opens.
function drawFeed(toBottom) {
  const feed = $("feed");
  const atBottom = feed.scrollHeight - feed.scrollTop - feed.clientHeight < 80;
  const entries = state.current ? entriesOf(state.current) : [];
  const nodes = [];
  let told = [];
  const flush = () => {
    if (told.length) nodes.push(narrationNode(told));
    told = [];
  };
  for (const entry of entries) {
    if (entry.kind === "town") {
      told.push(entry);
    } else {
      flush();
      nodes.push(entry.kind === "reply" ? replyNode(entry) : messageNode(entry));
    }
  }
  flush();
  if (entries.length === 0) {
    nodes.push(el("li", "empty", state.current
      ? "Nothing has happened here yet. Say hello?" : "Pick a place to see what happens there."));
  }
  feed.replaceChildren(...nodes);
  if (toBottom || atBottom) feed.scrollTop = feed.scrollHeight;
  drawTyping();
}

function townLine(entry) {
  const item = el("li", "msg town");
  item.dataset.id = String(entry.id);
  item.append(el("p", "text", entry.text));
  if (entry.clock) item.append(el("span", "clock", entry.clock));
  return item;
}

function narrationNode(told) {
  const item = el("li", "narration");
  const lines = el("ol", "told");
  lines.append(...told.map(townLine));
  if (told.length === 1) {
    item.append(lines);
    return item;
  }
  const more = el("details");
  const last = told[told.length - 1];
  more.append(el("summary", "", `${told.length} things happened · ${last.text}`), lines);
  item.append(more);
  return item;
}

function avatarOf(name, fallback) {
  return state.avatars.get(name) || fallback || initials(name);
}

function messageNode(entry) {
  const item = el("li", `msg ${entry.kind}`);
  item.dataset.id = String(entry.id);
  item.dataset.author = entry.author;
  const resident = entry.kind === "resident";
  item.append(el("span", "avatar", resident ? avatarOf(entry.author, entry.emoji) : initials(entry.author)));
  const body = el("div", "body");
  const meta = el("p", "meta");
  const author = el(resident ? "button" : "span", "author", entry.author);
  if (resident) {
    author.type = "button";
    author.addEventListener("click", () => openCard(entry.author));
  }
  meta.append(author);
  if (entry.kind === "visitor") {
    const platform = entry.platform === "cli" ? "the shell" : entry.platform;
    const where = platform && platform !== "web" ? ` on ${platform}` : "";
    meta.append(el("span", "tag", `visitor${where}`));
  }
  if (entry.clock) meta.append(el("span", "clock", entry.clock));
  body.append(meta, el("p", "text", entry.text));
  if (resident && !state.replay && state.epoch) body.append(ratingNode(entry));
  item.append(body);
  return item;
}

// A small 👍/👎 under a resident's message: the live ratings (`bottown eval live`).
const rated = new Map(); // "epoch.id" -> the emoji this page gave
function ratingNode(entry) {
  const key = `${state.epoch}.${entry.id}`;
  const row = el("p", "rate");
  for (const [emoji, label] of [["👍", "rate up"], ["👎", "rate down"]]) {
    const button = el("button", "rating", emoji);
    button.type = "button";
    button.setAttribute("aria-label", `${label}: ${entry.author}`);
    button.setAttribute("aria-pressed", String(rated.get(key) === emoji));
    button.addEventListener("click", () => rate(entry, emoji, key));
    row.append(button);
  }
  return row;
}

async function rate(entry, emoji, key) {
  const before = rated.get(key);
  const body = { epoch: state.epoch, id: entry.id, name: nameNow(), visitor_id: visitorId() };
  try {
    if (before) await api("/api/react", { ...body, emoji: before, removed: true });
    if (before !== emoji) await api("/api/react", { ...body, emoji });
    if (before === emoji) rated.delete(key); else rated.set(key, emoji);
  } catch (error) {
    setStatus(error.message, true);
  }
  drawFeed(false);
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

// -- "X is typing…" ---------------------------------------------------------------------

function startTyping(event) {
  const data = JSON.parse(event.data);
  stopTyping(data.author);
  const timer = setTimeout(() => stopTyping(data.author), TYPING_MS);
  state.typing.set(data.author, { area: data.area, emoji: data.emoji, timer });
  drawTyping();
}

function stopTyping(author) {
  const was = state.typing.get(author);
  if (!was) return;
  clearTimeout(was.timer);
  state.typing.delete(author);
  drawTyping();
}

function drawTyping() {
  const here = [...state.typing].filter(([, t]) => t.area === state.current);
  $("typing").textContent = here.map(([author, t]) => `${t.emoji || "💬"} ${author} is typing…`).join("  ");
}
