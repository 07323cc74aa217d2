// A recorded run played on the page: the map and the channels as they were at the scrubber's
// moment; play, pause and speed move the moment on. The clock shows the game time.
"use strict";

const FRAME_MS = 250;
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

async function startReplay() {
  $("composer").hidden = true;
  $("connection").hidden = true;
  let data;
  try {
    data = await api("/api/replay");
  } catch (error) {
    setStatus(`No replay to play: ${error.message}`, true);
    return;
  }
  const events = data.events;
  state.replay = { events, t: events[0].ms, playing: null, seen: 0 };
  state.places = data.places;
  state.areas = data.places.map((p) => p.name);
  for (const [name, avatar] of Object.entries(data.avatars)) state.avatars.set(name, avatar);
  state.residents = data.residents.map((name) => ({ name }));
  const scrubber = $("scrubber");
  scrubber.min = String(events[0].ms);
  scrubber.max = String(events[events.length - 1].ms);
  scrubber.value = scrubber.min;
  scrubber.addEventListener("input", () => {
    pause();
    replayAt(Number(scrubber.value));
  });
  $("play").addEventListener("click", () => (state.replay.playing ? pause() : play()));
  $("replay-bar").hidden = false;
  replayAt(state.replay.t);
}

function play() {
  const replay = state.replay;
  if (replay.t >= Number($("scrubber").max)) replay.t = Number($("scrubber").min);
  $("play").textContent = "⏸";
  $("play").setAttribute("aria-label", "Pause");
  replay.playing = setInterval(() => {
    const minutes = Number($("speed").value) * (FRAME_MS / 1000);
    const next = Math.min(replay.t + minutes * 60000, Number($("scrubber").max));
    replayAt(next);
    if (next >= Number($("scrubber").max)) pause();
  }, FRAME_MS);
}

function pause() {
  clearInterval(state.replay.playing);
  state.replay.playing = null;
  $("play").textContent = "▶";
  $("play").setAttribute("aria-label", "Play");
}

// The town at moment `t`: who is where, awake or not, doing what; then draw it all.
function replayAt(t) {
  const replay = state.replay;
  replay.t = t;
  $("scrubber").value = String(t);
  const events = replay.events;
  let seen = 0;
  while (seen < events.length && events[seen].ms <= t) seen += 1;
  replay.seen = seen;
  const now = new Map();
  for (const e of events) { // before its first event a resident sleeps where that event is
    if (e.resident && !now.has(e.resident)) {
      const awake = e.kind !== "woke"; // acting first: up before the recording began
      now.set(e.resident, { name: e.resident, area: e.area, action: "", action_emoji: "", awake });
    }
  }
  for (const e of events.slice(0, seen)) {
    const who = now.get(e.resident);
    if (!who) continue;
    who.area = e.area;
    who.awake = e.kind !== "slept";
    if (e.action) {
      who.action = e.action;
      who.action_emoji = e.emoji;
    }
  }
  state.residents = [...now.values()].map((who) => ({ ...who, avatar: avatarOf(who.name) }));
  const at = new Date(t);
  const hh = String(at.getUTCHours()).padStart(2, "0");
  const mm = String(at.getUTCMinutes()).padStart(2, "0");
  $("clock").textContent = `Replay · ${DAYS[at.getUTCDay()]} ${hh}:${mm}`;
  $("clock").dataset.time = `${hh}:${mm}`;
  drawAll();
}

function replayEntries(area) {
  const shown = [];
  const events = state.replay.events;
  for (let i = 0; i < state.replay.seen; i += 1) {
    const e = events[i];
    if (!e.shown || e.shown.channel !== area) continue;
    const kind = e.shown.author ? "resident" : "town";
    shown.push({ id: i, order: i, area, kind, author: e.shown.author, text: e.shown.text, emoji: e.emoji, clock: e.clock });
  }
  return shown.slice(-200);
}

function replayResident(name) {
  return state.residents.find((r) => r.name === name) || { name, awake: false };
}
