// The Boxes page (/cb/boxes): the user's boxes, each with its screen,
// made, woken, hibernated, saved, upgraded and deleted through the console's
// calls to the Boxes service (docs/console.md, Boxes); its snapshots
// (snapshots.js) and the shares of its screen (shares.js), which load
// before this script, beside. While an operation
// is under way the page reads the list again every 2 s, so each box's
// state follows it.
"use strict";
(() => {
  const { $, call, busy, button, clearErrors, showError, fail, plain, confirm, row, el, when } = cb;
  const states = { running: "Running", hibernated: "Hibernated", starting: "Starting", saving: "Saving",
                   hibernating: "Hibernating", waking: "Waking", deleting: "Deleting", failed: "Failed" };
  const doing = { create: "Being made now", ensure: "Starting now", hibernate: "Hibernating now", save: "Saving now",
                  upgrade: "Upgrading now", delete: "Being deleted now" };
  let timer = 0;

  async function load() {
    clearTimeout(timer);
    const { status, answer } = await call("GET", "/cb/api/boxes");
    if (status !== 200) { $("state").textContent = "Your boxes could not be read; reload to try again."; return; }
    const table = $("boxes"), body = table.querySelector("tbody");
    body.replaceChildren();
    for (const b of answer.boxes) {
      const name = el("div");
      name.append(el("a", b.name, { class: "name", href: "/cb/boxes/" + encodeURIComponent(b.name) + "/screen", "aria-label": "Screen of " + b.name }));
      if (b.agent) name.append(el("span", "agent", { class: "badge" }));
      const state = el("div", null);
      state.append(el("span", states[b.state] || b.state, { class: "whole" }));
      if (b.operation) state.append(el("br"), el("span", doing[b.operation] || "Now: " + b.operation, { class: "small", "data-operation": b.operation }));
      const image = el("div", b.image);
      if (b.upgrade) image.append(el("p", "A newer image, " + b.upgrade + ", is out: Upgrade moves " + b.name + " onto it.", { class: "notice small" }));
      body.append(row(table, [name, state, image, b.saved_at ? when(b.saved_at) : "Never saved", actions(b)]));
    }
    table.hidden = answer.boxes.length === 0;
    $("make-section").hidden = !answer.available;
    cb.shareBoxes(answer.boxes.map((b) => b.name), answer.available);
    $("state").textContent = answer.boxes.length ? (answer.boxes.length === 1 ? "1 box." : answer.boxes.length + " boxes.")
      : (answer.available ? "You have no boxes yet. Make one below." : "Boxes are not available on this api.");
    // Follow each operation under way: its box's state changes as it goes.
    if (answer.boxes.some((b) => b.operation)) timer = setTimeout(load, 2000);
  }

  // actions are the buttons of box b that its state admits.
  function actions(b) {
    const div = el("div", null, { class: "buttons" });
    const label = (what) => ({ "aria-label": what + " " + b.name });
    if (b.state !== "running") div.append(button("Wake", "", () => act(b, "wake", "Waking"), label("Wake")));
    if (b.state === "running") div.append(button("Hibernate", "", () => act(b, "hibernate", "Hibernating"), label("Hibernate")));
    div.append(button("Save", "", () => act(b, "save", "Saving"), label("Save")));
    div.append(button("Snapshots", "", () => { clearErrors(); return cb.snapshots(b.name); }, label("Snapshots of")));
    if (b.upgrade) div.append(button("Upgrade", "danger", () => upgrade(b), label("Upgrade")));
    div.append(button("Delete", "danger", () => remove(b), label("Delete")));
    return div;
  }

  async function act(b, verb, what, confirmed) {
    clearErrors();
    const { status, answer } = await call("POST", "/cb/api/boxes/" + encodeURIComponent(b.name) + "/" + verb, { confirm: !!confirmed });
    if (status !== 202) fail(what + " " + b.name, status, answer);
    await load();
  }

  // Upgrade and Delete ask first, saying what the CLI's --confirm says.
  async function upgrade(b) {
    clearErrors();
    if (!await confirm("Upgrade " + b.name + "?", b.name + " moves onto " + b.upgrade + ", keeping /home/user and /workspace and dropping every other change.", "Upgrade")) return;
    await act(b, "upgrade", "Upgrading", true);
  }
  async function remove(b) {
    clearErrors();
    if (!await confirm("Delete " + b.name + "?", "It removes " + b.name + " for good, keeping only its newest save (cocoonbox box create " + b.name + " --restore brings that back).", "Delete")) return;
    await act(b, "delete", "Deleting", true);
  }

  $("make").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy($("make-submit"), async () => {
      clearErrors();
      const name = $("name").value.trim();
      if (!name) { showError("Name: give the new box a name.", $("name")); return; }
      const { status, answer } = await call("POST", "/cb/api/boxes", { name });
      if (status !== 202) { showError(plain(answer, status, "Making " + name), answer.field === "name" ? $("name") : undefined); return; }
      $("name").value = "";
      await load();
    });
  });

  load();
})();
