// The Devices page (/cb/devices).
"use strict";
(() => {
  const { $, call, busy, button, clearErrors, fail, confirm, row, when } = cb;
  const clients = { "cocoonbox-cli": "cocoonbox CLI", "cocoonbox-app": "CocoonBox app" };

  async function load() {
    const { status, answer } = await call("GET", "/cb/api/devices");
    if (status !== 200) { fail("Reading your devices", status, answer); return; }
    const table = $("devices"), body = table.querySelector("tbody");
    body.replaceChildren();
    for (const d of answer) {
      const client = clients[d.client] || d.client;
      const tr = row(table, [d.label, client, when(d.created_at), when(d.used_at),
        button("Revoke", "danger revoke", () => revoke(d, client), { "aria-label": "Revoke " + d.label })]);
      tr.id = "device-" + d.id;
      body.append(tr);
    }
    table.hidden = answer.length === 0;
    $("none").hidden = answer.length !== 0;
  }

  async function revoke(d, client) {
    clearErrors();
    if (!await confirm("Revoke " + d.label + "?", "The " + client + " on " + d.label + " is signed out at once and must sign in again.", "Revoke")) return;
    const { status, answer } = await call("DELETE", "/cb/api/devices/" + encodeURIComponent(d.id));
    if (status !== 204 && status !== 404) fail("Revoking " + d.label, status, answer);
    load();
  }

  $("sign-out-everywhere").addEventListener("click", () => busy($("sign-out-everywhere"), async () => {
    clearErrors();
    if (!await confirm("Sign out everywhere?", "Every console session (this one too), your personal token and every device are signed out at once.",
      "Sign out everywhere")) return;
    const { status, answer } = await call("POST", "/cb/api/me/sign-out-everywhere", {});
    if (status === 204) location.assign("/cb/"); else fail("Signing out everywhere", status, answer);
  }));
  load();
})();
