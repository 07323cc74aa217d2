// The page's frame: the welcome, map and channel as tabs on a phone, the places drawer, the
// speech-only filter.
"use strict";

function setUpPage() {
  for (const tab of document.querySelectorAll(".tabs button")) {
    tab.addEventListener("click", () => showView(tab.dataset.view));
  }
  const toggle = $("places-toggle");
  toggle.addEventListener("click", () => {
    const open = !$("sidebar").classList.contains("open");
    $("sidebar").classList.toggle("open", open);
    toggle.setAttribute("aria-expanded", String(open));
  });
  const filter = $("speech-only");
  filter.checked = remembered("bottown.speech-only") === "1";
  $("feed").classList.toggle("speech-only", filter.checked);
  filter.addEventListener("change", () => {
    remember("bottown.speech-only", filter.checked ? "1" : "0");
    $("feed").classList.toggle("speech-only", filter.checked);
  });
  $("welcome-close").addEventListener("click", () => {
    remember("bottown.welcomed", "1");
    $("welcome").hidden = true;
  });
  $("about").addEventListener("click", () => {
    $("welcome").hidden = !$("welcome").hidden;
  });
  $("card-close").addEventListener("click", () => $("card").close());
  $("card").addEventListener("click", (event) => {
    if (event.target === $("card")) $("card").close(); // a click on the backdrop
  });
}

function showView(view) {
  $("layout").dataset.view = view;
  for (const tab of document.querySelectorAll(".tabs button")) {
    tab.setAttribute("aria-pressed", String(tab.dataset.view === view));
  }
}

function closeDrawer() {
  $("sidebar").classList.remove("open");
  $("places-toggle").setAttribute("aria-expanded", "false");
}

// What this is, who thinks for the residents, how to speak: until the visitor says "Got it".
function welcome(town) {
  $("welcome-title").textContent = `Welcome to ${town.name}`;
  $("welcome-what").textContent = `${town.name} is a small town whose residents are AI ` +
    "personas (generative agents): they wake, plan their day, work, talk with each other " +
    "and remember, each on their own. Each place is a channel.";
  $("welcome-brain").textContent = town.brain.offline
    ? `Thinking for them: the ${town.brain.label}; their words come from a stand-in, not an LLM.`
    : `Thinking for them: ${town.brain.label}.`;
  $("about").hidden = false;
  $("welcome").hidden = remembered("bottown.welcomed") === "1";
}
