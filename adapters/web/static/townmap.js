// The map: each area a labelled block on a grid (town.toml's boxes, or the server's layout),
// each resident its emoji and first name on the area where it is. A resident that moves glides
// from its old block to its new one; sleepers are dimmed; the current action shows on hover.
"use strict";

const PHONE_COLUMNS = 3; // a wider map is drawn as a list of blocks on a phone
const phone = window.matchMedia("(max-width: 600px)");
phone.addEventListener("change", () => drawMap());

function drawMap() {
  const map = document.getElementById("map");
  const before = tokenPlaces(map);
  const columns = Math.max(1, ...state.places.map((p) => p.x + p.w));
  const placed = !(phone.matches && columns > PHONE_COLUMNS);
  map.style.gridTemplateColumns = `repeat(${placed ? columns : PHONE_COLUMNS}, minmax(0, 1fr))`;
  map.replaceChildren(...state.places.map((place) => placeNode(place, placed)));
  glide(map, before);
}

function placeNode(place, placed) {
  const block = el("div", place.name === state.current ? "area current" : "area");
  block.dataset.area = place.name;
  if (placed) {
    block.style.gridColumn = `${place.x + 1} / span ${place.w}`;
    block.style.gridRow = `${place.y + 1} / span ${place.h}`;
  }
  const label = el("button", "area-name", place.name);
  label.type = "button";
  if (place.description) label.title = place.description;
  const folk = el("div", "folk");
  folk.append(...peopleIn(place.name).map(residentToken));
  block.append(label, folk);
  block.addEventListener("click", () => openChannel(place.name, { push: true }));
  return block;
}

function residentToken(who) {
  const token = el("button", who.awake ? "token" : "token asleep");
  token.type = "button";
  token.dataset.name = who.name;
  token.dataset.action = who.awake ? `${who.action_emoji || ""} ${who.action}`.trim() : "😴 asleep";
  token.title = `${who.name}: ${token.dataset.action}`;
  token.append(el("span", "face", who.avatar || initials(who.name)), el("span", "who", who.name.split(" ")[0]));
  token.addEventListener("click", (event) => {
    event.stopPropagation();
    openCard(who.name);
  });
  return token;
}

function tokenPlaces(map) {
  const found = new Map();
  for (const token of map.querySelectorAll(".token")) {
    found.set(token.dataset.name, token.getBoundingClientRect());
  }
  return found;
}

// From where each token was to where it is now (FLIP), for the residents that moved.
function glide(map, before) {
  for (const token of map.querySelectorAll(".token")) {
    const was = before.get(token.dataset.name);
    if (!was) continue;
    const now = token.getBoundingClientRect();
    const dx = was.left - now.left;
    const dy = was.top - now.top;
    if (Math.abs(dx) < 1 && Math.abs(dy) < 1) continue;
    token.style.transition = "none";
    token.style.transform = `translate(${dx}px, ${dy}px)`;
    requestAnimationFrame(() => {
      token.style.transition = "transform 0.8s ease-in-out";
      token.style.transform = "";
    });
  }
}
