// The Keys page (/cb/keys).
"use strict";
(() => {
  const { $, call, busy, button, clearErrors, showError, fail, confirm, row, plain, when } = cb;
  // The api names the field of a refusal (field: "hosts", "value", ...):
  // its sentence goes beside that field.
  const fields = { name: "key-name", hosts: "key-hosts", header: "key-header", template: "key-template", query: "key-query", value: "key-value" };
  function refused(what, status, answer) {
    const f = fields[answer.field];
    showError(plain(answer, status, what), f ? $(f) : undefined);
  }

  async function load() {
    const { status, answer } = await call("GET", "/cb/api/keys");
    if (status !== 200) { fail("Reading your keys", status, answer); return; }
    const { keys, boxes_without_keys: old } = answer;
    const table = $("keys"), body = table.querySelector("tbody");
    body.replaceChildren();
    for (const k of keys) {
      const actions = document.createElement("div");
      actions.className = "row-actions";
      actions.append(button("Rotate", "rotate", () => rotate(k), { "aria-label": "Rotate " + k.name }),
                     button("Delete", "danger delete", () => remove(k), { "aria-label": "Delete " + k.name }));
      const tr = row(table, [k.name, k.hosts.join(", "), k.how, k.placeholder, when(k.created), when(k.rotated), actions]);
      tr.id = "key-" + k.name;
      body.append(tr);
    }
    table.hidden = keys.length === 0;
    $("none").hidden = keys.length !== 0;
    $("old").hidden = old.length === 0;
    $("old").textContent = "These boxes run an image older than v23 and get no keys until upgraded: " +
      old.map((b) => b.box + " (" + b.image + ")").join(", ");
  }

  async function rotate(k) {
    clearErrors();
    const value = await confirm("Rotate " + k.name + "?", "Boxes send the new value from now on; the old one is forgotten.",
      "Rotate", { label: "The new value of " + k.name });
    if (!value) return;
    const { status, answer } = await call("PUT", "/cb/api/keys/" + encodeURIComponent(k.name), { value });
    if (status !== 200) refused("Rotating " + k.name, status, answer);
    load();
  }

  async function remove(k) {
    clearErrors();
    if (!await confirm("Delete " + k.name + "?", "Boxes stop sending it to " + k.hosts.join(", ") + " at once. Its value cannot be brought back.", "Delete")) return;
    const { status, answer } = await call("DELETE", "/cb/api/keys/" + encodeURIComponent(k.name));
    if (status !== 204) fail("Deleting " + k.name, status, answer);
    load();
  }

  $("add").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy($("add-submit"), async () => {
      clearErrors();
      const f = new FormData($("add"));
      const body = { name: f.get("name"), hosts: f.get("hosts").split(/[\s,]+/).filter(Boolean),
                     header: f.get("header"), template: f.get("template"), query: f.get("query"), value: f.get("value") };
      const { status, answer } = await call("POST", "/cb/api/keys", body);
      if (status === 201) $("add").reset(); else refused("Adding the key", status, answer);
      await load();
    });
  });
  load();
})();
