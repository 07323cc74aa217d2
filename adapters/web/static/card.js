// A resident's card: who they are, what they are doing, today's plan, recent memories and
// reflections (the private ones never reach the page), and the people they know.
"use strict";

async function openCard(name) {
  const dialog = $("card");
  const body = $("card-body");
  body.replaceChildren(el("p", "card-loading", `${name}…`));
  if (!dialog.open) dialog.showModal();
  if (state.replay) {
    body.replaceChildren(...cardHead(replayResident(name)));
    return;
  }
  try {
    const card = await api(`/api/resident?name=${encodeURIComponent(name)}`);
    body.replaceChildren(...cardHead(card), ...cardSections(card));
  } catch (error) {
    body.replaceChildren(el("p", "error", `Could not open ${name}'s card: ${error.message}`));
  }
}

function cardHead(who) {
  const head = el("div", "card-head");
  head.append(el("span", "card-face", who.avatar || initials(who.name)));
  const words = el("div");
  words.append(el("h2", "", who.name));
  words.dataset.name = who.name;
  if (who.occupation) words.append(el("p", "card-job", `${who.occupation}, ${who.age}`));
  head.append(words);
  head.id = "card-name";
  const doing = el("p", "card-doing");
  doing.append(el("strong", "", who.awake ? "Now: " : "Now: asleep"));
  if (who.awake) doing.append(`${who.action_emoji || ""} ${who.action} · ${who.area}`);
  return [head, doing];
}

function cardSections(card) {
  const out = [section("Who", [el("p", "card-about", card.about), el("p", "card-summary", card.summary)])];
  const plan = card.plan.map((line) => {
    const item = el("li");
    item.append(el("span", "when", line.start), ` ${line.description}`);
    if (line.location) item.append(el("span", "where", ` · ${line.location}`));
    return item;
  });
  out.push(section("Today's plan", plan.length ? [list("plan", plan)] : [quiet("No plan yet today.")]));
  out.push(section("Recent memories", memories(card.memories, "memories")));
  out.push(section("Reflections", memories(card.reflections, "reflections")));
  const people = card.people.map((p) => {
    const item = el("li");
    const who = el("button", "person", `${p.avatar} ${p.name}`);
    who.type = "button";
    who.addEventListener("click", () => openCard(p.name));
    item.append(who, el("p", "how", p.how.join(" · ")));
    return item;
  });
  out.push(section("People they know", people.length ? [list("people", people)] : [quiet("Nobody yet.")]));
  return out;
}

function memories(found, kind) {
  if (!found.length) return [quiet(`No ${kind} yet.`)];
  return [list(kind, found.map((m) => {
    const item = el("li");
    item.append(el("span", "when", m.when), ` ${m.text}`);
    return item;
  }))];
}

function section(title, children) {
  const part = el("section", "card-part");
  part.append(el("h3", "", title), ...children);
  return part;
}

function list(className, items) {
  const node = el("ul", className);
  node.append(...items);
  return node;
}

function quiet(text) {
  return el("p", "quiet", text);
}
