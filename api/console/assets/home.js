// The home page (/cb/ signed in): the user's boxes and the counts of the
// account's sections.
"use strict";
(() => {
  const { $, call, el, when } = cb;
  const states = { running: "Running", hibernated: "Hibernated", starting: "Starting", saving: "Saving",
                   hibernating: "Hibernating", waking: "Waking", deleting: "Deleting", failed: "Failed" };
  // The operation under way, as a person says it (boxes' operation kinds).
  const doing = { create: "Being made now", ensure: "Starting now", hibernate: "Hibernating now", save: "Saving now",
                  upgrade: "Upgrading now", delete: "Being deleted now" };
  async function boxes() {
    const { status, answer } = await call("GET", "/cb/api/boxes");
    if (status !== 200) { $("boxes-state").textContent = "Your boxes could not be read; reload to try again."; return; }
    const list = $("boxes");
    list.replaceChildren();
    for (const b of answer.boxes) {
      const li = el("li");
      li.append(el("span", b.name, { class: "name" }), el("br"),
        el("span", (states[b.state] || b.state) + " · " + b.image), el("br"),
        el("span", b.saved_at ? "Last saved " + when(b.saved_at) : "Never saved", { class: "muted small" }));
      if (b.operation) li.append(el("br"), el("span", doing[b.operation] || "Now: " + b.operation, { class: "small" }));
      if (b.agent) li.append(el("span", "agent", { class: "badge" }));
      list.append(li);
    }
    $("boxes-state").textContent = answer.boxes.length ? (answer.boxes.length === 1 ? "1 box." : answer.boxes.length + " boxes.")
      : (answer.available ? "You have no boxes yet." : "Boxes are not available on this api.");
  }
  // Each section with a list of its own shows how many it holds.
  const counts = {
    "/cb/devices": ["/cb/api/devices", (a) => a.length, "device", "devices"],
    "/cb/agents": ["/cb/api/agents", (a) => a.length, "agent", "agents"],
    "/cb/keys": ["/cb/api/keys", (a) => a.keys.length, "key", "keys"],
  };
  async function count(link) {
    const c = counts[link.dataset.count];
    if (!c) { link.parentElement.remove(); return; }
    const { status, answer } = await call("GET", c[0]);
    if (status !== 200) return;
    const n = c[1](answer);
    link.textContent = n + " " + (n === 1 ? c[2] : c[3]);
  }
  boxes();
  for (const a of document.querySelectorAll("[data-count]")) count(a);
})();
