// The Agents page (/cb/agents).
"use strict";
(() => {
  const { $, call, button, clearErrors, fail, confirm, row, el, when } = cb;

  async function load() {
    const { status, answer } = await call("GET", "/cb/api/agents");
    if (status !== 200) { fail("Reading your agents", status, answer); return null; }
    const table = $("agents"), body = table.querySelector("tbody");
    body.replaceChildren();
    for (const a of answer) {
      const name = a.client_name || "(no name)";
      const who = el("span");
      who.append(el("span", name));
      if (a.new) who.append(el("span", "new", { class: "badge" }));
      who.append(el("br"), a.verified_host ? el("span", "verified: " + a.verified_host, { class: "verified small" })
                                           : el("span", "unverified: its name is its own claim", { class: "muted small" }));
      const boxes = a.boxes.length ? a.boxes.map((b) => b.name + " (" + b.state + ")").join(", ") : "none";
      const tr = row(table, [who, when(a.approved_at), when(a.expires_at), when(a.last_used_at),
        a.max_boxes + (a.max_boxes === 1 ? " box, " : " boxes, ") + a.max_running + " running", boxes,
        button("Revoke", "danger revoke", () => revoke(a, name), { "aria-label": "Revoke " + name })]);
      tr.id = "agent-" + a.id;
      body.append(tr);
    }
    table.hidden = answer.length === 0;
    $("none").hidden = answer.length !== 0;
    return answer;
  }

  async function revoke(a, name) {
    clearErrors();
    const boxes = a.boxes.length ? " The boxes it made (" + a.boxes.map((b) => b.name).join(", ") + ") stay yours." : "";
    if (!await confirm("Revoke the agent " + name + "?", "It loses its access at once and must ask you again." + boxes, "Revoke")) return;
    const { status, answer } = await call("DELETE", "/cb/api/agents/" + encodeURIComponent(a.id));
    if (status !== 204 && status !== 404) fail("Revoking " + name, status, answer);
    load();
  }

  // Opening the page marks every agent seen: the home page's notice ends,
  // and this list keeps showing which were new until it is reloaded.
  load().then((list) => {
    if (list && list.some((a) => a.new)) call("POST", "/cb/api/agents/seen", {});
  });
})();
