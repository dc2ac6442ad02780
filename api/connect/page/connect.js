// The Connect page (/cb/connect).
"use strict";
(() => {
  const { $, call, busy, button, clearErrors, showError, fail, confirm, row, el, plain, when } = cb;
  // A refusal names its field first ("url: ..."): its sentence goes
  // beside that field.
  const fields = { name: "connect-name", url: "connect-url", header: "connect-header", key: "connect-key" };
  function refused(what, status, answer) {
    const m = /^(\w+): /.exec(answer.error || "");
    const f = m && fields[m[1]];
    showError(plain(answer, status, what), f ? $(f) : undefined);
  }
  const policies = ["default", "allow", "ask", "off"];

  // The callback's answer: ?connected=<id> or ?error=<message>, shown once.
  const q = new URLSearchParams(location.search);
  if (q.has("connected")) {
    $("result").textContent = "Connected " + q.get("connected") + ".";
    $("result").hidden = false;
  } else if (q.has("error")) {
    showError("Connecting did not work: " + q.get("error"));
  }
  if (q.has("connected") || q.has("error")) history.replaceState(null, "", location.pathname);

  function connector(c) {
    const box = el("section", null, { class: "connector", id: "connector-" + c.id });
    const head = el("h3", c.id);
    if (c.needs_reconnect) head.append(el("span", "needs reconnecting", { class: "badge" }));
    box.append(head, el("p", c.url + " · " + (c.auth === "oauth" ? "signed in (OAuth)" : "key in " + c.header) + " · connected " + when(c.connected), { class: "muted small" }));
    const table = el("table", null, { id: "tools-" + c.id });
    const headings = el("tr");
    for (const h of ["Tool", "What it does", "Policy"]) headings.append(el("th", h));
    const thead = el("thead"), body = el("tbody");
    thead.append(headings);
    table.append(thead, body);
    for (const t of c.tools) {
      const sel = el("select", null, { "aria-label": "Policy of " + t.name, id: "policy-" + c.id + "-" + t.name });
      for (const p of policies) {
        const o = el("option", p === "default" ? "default (allow)" : p, { value: p });
        o.selected = p === t.policy;
        sel.append(o);
      }
      sel.addEventListener("change", async () => {
        clearErrors();
        const { status, answer } = await call("PUT", "/cb/api/connect/" + encodeURIComponent(c.id) + "/policy", { tool: t.name, policy: sel.value });
        if (status !== 204) fail("Setting the policy of " + t.name, status, answer);
        load();
      });
      body.append(row(table, [t.name, t.description || "", sel]));
    }
    const actions = el("div", null, { class: "buttons" });
    actions.append(button("Check", "", () => check(c), { "aria-label": "Check " + c.id }),
                   button("Disconnect", "danger", () => disconnect(c), { "aria-label": "Disconnect " + c.id }));
    box.append(table, actions);
    return box;
  }

  // load draws the whole page; approvals only the pending approvals,
  // which the page asks for again every few seconds while it is open.
  async function load() { await read(true); }
  async function read(all) {
    const { status, answer } = await call("GET", "/cb/api/connect");
    if (status !== 200) { if (all) fail("Reading your connectors", status, answer); return; }
    const { connectors, approvals, catalog } = answer;
    if (all) {
      $("connectors").replaceChildren(...connectors.map(connector));
      $("none").hidden = connectors.length !== 0;
      const soon = catalog.filter((e) => !e.available).map((e) => e.title);
      $("soon").textContent = soon.length ? "Not available yet: " + soon.join(", ") + "." : "";
    }
    const shown = [...$("approvals").querySelectorAll("tbody tr")].map((tr) => tr.dataset.id).join();
    if (!all && shown === approvals.map((a) => a.id).join()) return;
    const table = $("approvals"), body = table.querySelector("tbody");
    body.replaceChildren();
    for (const a of approvals) {
      const actions = el("div", null, { class: "row-actions" });
      const name = a.connector + " " + a.tool;
      actions.append(button("Allow once", "primary", () => answerIt(a, "once"), { "aria-label": "Allow " + name + " once" }),
                     button("Always allow", "", () => answerIt(a, "always"), { "aria-label": "Always allow " + name }),
                     button("Deny", "", () => answerIt(a, "deny"), { "aria-label": "Deny " + name }));
      const tr = row(table, [a.connector + " · " + a.tool, a.door, when(a.created), actions]);
      tr.dataset.id = a.id;
      body.append(tr);
    }
    $("approvals-section").hidden = approvals.length === 0;
  }

  async function answerIt(a, decision) {
    clearErrors();
    const { status, answer } = await call("POST", "/cb/api/connect/approvals/" + encodeURIComponent(a.id) + "/answer", { decision });
    if (status !== 204) fail("Answering " + a.tool, status, answer);
    load();
  }

  async function check(c) {
    clearErrors();
    const { status, answer } = await call("POST", "/cb/api/connect/" + encodeURIComponent(c.id) + "/check");
    if (status === 200) {
      $("result").textContent = c.id + " answers as " + answer.account + ".";
      $("result").hidden = false;
    } else fail("Checking " + c.id, status, answer);
    load();
  }

  async function disconnect(c) {
    clearErrors();
    if (!await confirm("Disconnect " + c.id + "?", "Its tools leave your agents at once, and calls open on it end. Its key or sign-in is forgotten.", "Disconnect")) return;
    const { status, answer } = await call("DELETE", "/cb/api/connect/" + encodeURIComponent(c.id));
    if (status !== 200) fail("Disconnecting " + c.id, status, answer);
    load();
  }

  $("add").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy($("connect-submit"), async () => {
      clearErrors();
      $("result").hidden = true;
      const f = new FormData($("add"));
      const body = { name: f.get("name"), url: f.get("url"), header: f.get("header"), key: f.get("key") };
      const { status, answer } = await call("POST", "/cb/api/connect/custom/begin", body);
      if (status === 200 && answer.url) { location.assign(answer.url); return; }
      if (status === 200) {
        $("add").reset();
        $("result").textContent = "Connected " + answer.connected + ".";
        $("result").hidden = false;
      } else refused("Connecting " + (body.name || "the server"), status, answer);
      await load();
    });
  });
  setInterval(() => read(false), 5000); // a call of an ask tool waits here
  load();
})();
