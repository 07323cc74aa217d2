"use strict";
// The rating page: every text is written with textContent, never as HTML.
(() => {
  const $ = (id) => document.getElementById(id);
  let current = null;

  function cell(row, text) {
    const td = document.createElement("td");
    td.textContent = text;
    row.appendChild(td);
  }

  function showRatings(data) {
    const body = $("ratings").querySelector("tbody");
    body.replaceChildren();
    for (const r of data.table) {
      const row = document.createElement("tr");
      row.dataset.condition = r.condition;
      cell(row, r.condition);
      cell(row, r.mu.toFixed(2));
      cell(row, r.sigma.toFixed(2));
      cell(row, String(r.rankings));
      cell(row, r.paper_mu === null ? "-" : r.paper_mu.toFixed(2));
      body.appendChild(row);
    }
    $("count").textContent = `${data.rankings} ranking(s) stored`;
  }

  function move(li, step) {
    const list = $("answers");
    if (step < 0 && li.previousElementSibling) list.insertBefore(li, li.previousElementSibling);
    if (step > 0 && li.nextElementSibling) list.insertBefore(li.nextElementSibling, li);
  }

  function showItem(data) {
    current = data.done ? null : data;
    $("answers").replaceChildren();
    $("submit").disabled = data.done;
    if (data.done) {
      $("progress").textContent = `All ${data.total} questions ranked by this rater. Thank you!`;
      $("who").textContent = "";
      $("question").textContent = "";
      return;
    }
    $("progress").textContent = `${data.left} of ${data.total} questions left`;
    $("who").textContent = `${data.resident} was asked (${data.category}):`;
    $("question").textContent = data.question;
    for (const a of data.answers) {
      const li = document.createElement("li");
      li.dataset.id = a.id;
      const text = document.createElement("span");
      text.className = "text";
      text.textContent = a.text;
      const up = document.createElement("button");
      up.type = "button"; up.textContent = "↑"; up.title = "more believable";
      up.addEventListener("click", () => move(li, -1));
      const down = document.createElement("button");
      down.type = "button"; down.textContent = "↓"; down.title = "less believable";
      down.addEventListener("click", () => move(li, 1));
      li.append(up, down, text);
      $("answers").appendChild(li);
    }
  }

  async function json(response) {
    const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
    return data;
  }

  async function loadNext() {
    const rater = encodeURIComponent($("rater").value);
    try {
      showItem(await json(await fetch(`/api/next?rater=${rater}`)));
    } catch (error) {
      $("status").textContent = `Could not load a question: ${error.message}`;
    }
  }

  async function submit() {
    if (!current) return;
    const order = [...$("answers").children].map((li) => li.dataset.id);
    $("submit").disabled = true;
    try {
      const data = await json(await fetch("/api/rank", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ token: current.token, order, rater: $("rater").value }),
      }));
      showRatings(data);
      $("status").textContent = "Saved.";
      await loadNext();
    } catch (error) {
      $("status").textContent = `Not saved: ${error.message}`;
      $("submit").disabled = false;
    }
  }

  $("submit").addEventListener("click", submit);
  $("rater").addEventListener("change", loadNext);
  fetch("/api/ratings").then(json).then(showRatings).catch(() => {});
  loadNext();
})();
