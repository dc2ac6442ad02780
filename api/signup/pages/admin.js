// The admin page (/cb/admin).
"use strict";
(() => {
  const { $, call, busy, button, clearErrors, showError, confirm, row, el, plain, when } = cb;
  const lists = (s) => s.split(",").map((x) => x.trim()).filter((x) => x);
  // dollars says micro-dollars as a person does: $2.50, $0.000001, -$1.00.
  const dollars = (micros) => (micros < 0 ? "-$" : "$") + (Math.abs(micros) / 1e6).toFixed(micros % 10000 ? 6 : 2).replace(/(\.\d\d\d*?)0+$/, "$1");
  const labels = { seats: ["Seats", "seats"], hourly_accounts: ["Accounts admitted per hour", "hourly_accounts"],
    daily_cap_micros: ["The daily cap", "daily_cap"], max_agent_boxes: ["Agent boxes", "max_agent_boxes"],
    allow_domains: ["Allowed email domains", "allow_domains"], allow_emails: ["Allowed email addresses", "allow_emails"] };
  // oops shows a refusal as a sentence: "seats is 0 to 1000000, not -1"
  // becomes "Seats: give 0 to 1000000, not -1.", beside its field.
  function oops(status, answer, what, field) {
    let text = plain(answer, status, what || "The change");
    let at = field;
    for (const [key, [label, id]] of Object.entries(labels)) {
      const m = text.match(new RegExp("\\b" + key + " is (\\d+) to (\\d+), not (-?\\d+)"));
      if (m) {
        text = key === "daily_cap_micros" ? label + ": give " + dollars(+m[1]) + " to " + dollars(+m[2]) + ", not " + dollars(+m[3]) + "."
                                          : label + ": give " + m[1] + " to " + m[2] + ", not " + m[3] + ".";
        at = $(id);
        break;
      }
      if (text.includes(key + ":")) { text = text.replace(/^.*?\b/, "").replace(key + ":", label + ":"); at = $(id); break; }
    }
    showError(text, at);
  }
  async function loadSettings() {
    const { status, answer } = await call("GET", "/cb/api/signup");
    if (status !== 200) return oops(status, answer, "Reading the settings");
    for (const k of ["enabled", "invite_only"]) $(k).checked = answer[k];
    for (const k of ["seats", "hourly_accounts", "max_agent_boxes"]) $(k).value = answer[k];
    $("daily_cap").value = answer.daily_cap_micros / 1e6;
    $("allow_domains").value = answer.allow_domains.join(", "); $("allow_emails").value = answer.allow_emails.join(", ");
  }
  $("settings").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy($("save"), async () => {
      clearErrors();
      $("saved").textContent = "";
      const body = { enabled: $("enabled").checked, invite_only: $("invite_only").checked,
        allow_domains: lists($("allow_domains").value), allow_emails: lists($("allow_emails").value),
        daily_cap_micros: Math.round(Number($("daily_cap").value) * 1e6) };
      for (const k of ["seats", "hourly_accounts", "max_agent_boxes"]) body[k] = Number($(k).value);
      const { status, answer } = await call("PUT", "/cb/api/signup", body);
      if (status !== 200) return oops(status, answer, "Saving the settings");
      $("saved").textContent = "Saved.";
      loadSettings(); loadQueue(); loadUsers();
    });
  });
  function seatsLine(a) {
    // A seat is any enabled account but an admin's, made by signup or by an admin.
    const accounts = a.seats_used === 1 ? "1 account holds a seat" : a.seats_used + " accounts hold seats";
    const seats = a.seats === 0 ? "No seats: the queue admits nobody by itself (" + accounts + ")" :
      a.seats_used + " of " + a.seats + " seats used";
    return seats + "; " + a.admitted_last_hour + " of at most " + a.hourly_accounts + " admitted in the last hour; signup is " +
      (a.enabled ? "open" : "closed") + ".";
  }
  const actionWords = { admit: "Admit", front: "Move to the front", reject: "Reject" };
  async function loadQueue() {
    const { status, answer } = await call("GET", "/cb/api/queue");
    if (status !== 200) return oops(status, answer, "Reading the queue");
    $("seats-line").textContent = seatsLine(answer);
    const tb = $("queue"); tb.replaceChildren();
    for (const e of answer.entries) {
      const act = el("div", null, { class: "row-actions" });
      if (e.status !== "admitted") {
        for (const a of ["admit", "front", "reject"]) {
          if (a === "front" && (e.status !== "waiting" || e.front)) continue;
          if (a === "reject" && e.status === "rejected") continue;
          act.append(button(actionWords[a], a === "reject" ? "danger" : "", async () => {
            clearErrors();
            if (a === "reject" && !await confirm("Reject " + e.login + "?", e.login + " (" + e.email + ") leaves the queue and is told an admin declined the signup.", "Reject")) return;
            const { status, answer } = await call("POST", `/cb/api/queue/${e.id}/${a}`, {});
            if (status !== 200) oops(status, answer, actionWords[a]);
            loadQueue(); loadUsers();
          }, { "data-action": a, "data-login": e.login, "aria-label": actionWords[a] + " " + e.login }));
        }
      }
      tb.append(row($("queue-table"), [e.position || "", e.login, e.email, when(e.since), e.status + (e.front ? " (front)" : ""), act]));
    }
  }
  async function loadInvites() {
    const { status, answer } = await call("GET", "/cb/api/invites");
    if (status !== 200) return oops(status, answer, "Reading the invites");
    const tb = $("invites"); tb.replaceChildren();
    for (const i of answer.invites) {
      tb.append(row($("invites-table"), [i.id, `${i.used} of ${i.uses}`, when(i.expires_at), i.created_by + (i.token_id ? " (" + i.token_id + ")" : ""), i.status,
        i.status === "live" ? button("Revoke", "danger", async () => {
          clearErrors();
          if (!await confirm("Revoke the invite " + i.id + "?", "Its link stops working at once; " + (i.uses - i.used) + " of its " + i.uses + " uses are left unused.", "Revoke")) return;
          const { status, answer } = await call("DELETE", `/cb/api/invites/${i.id}`);
          if (status !== 204) oops(status, answer, "Revoking the invite");
          loadInvites();
        }, { "aria-label": "Revoke the invite " + i.id }) : ""]));
    }
  }
  $("invite-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy($("invite-create"), async () => {
      clearErrors();
      const { status, answer } = await call("POST", "/cb/api/invites", { uses: Number($("invite-uses").value), days: Number($("invite-days").value) });
      if (status !== 201) return oops(status, answer, "Creating the invite");
      $("invite-link").textContent = location.origin + answer.link; $("invite-new").hidden = false;
      loadInvites();
    });
  });
  async function loadTokens() {
    const { status, answer } = await call("GET", "/cb/api/invite-tokens");
    if (status !== 200) return oops(status, answer, "Reading the tokens");
    const tb = $("tokens"); tb.replaceChildren();
    for (const t of answer.tokens) {
      tb.append(row($("tokens-table"), [t.id, t.label, t.admin, String(t.invites), when(t.used_at),
        t.alive ? button("Revoke", "danger", async () => {
          clearErrors();
          if (!await confirm("Revoke the token " + t.label + "?", "It makes no more invites; the invites it made stay.", "Revoke")) return;
          const { status, answer } = await call("DELETE", `/cb/api/invite-tokens/${t.id}`);
          if (status !== 204) oops(status, answer, "Revoking the token");
          loadTokens();
        }, { "aria-label": "Revoke the token " + t.label }) : "revoked"]));
    }
  }
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy($("token-create"), async () => {
      clearErrors();
      if (!$("token-label").value) { showError("Give the token a label, such as who gets it.", $("token-label")); return; }
      const { status, answer } = await call("POST", "/cb/api/invite-tokens", { label: $("token-label").value });
      if (status !== 201) return oops(status, answer, "Minting the token", $("token-label"));
      $("token-secret").textContent = answer.token; $("token-new").hidden = false;
      loadTokens();
    });
  });
  async function loadUsers() {
    const { status, answer } = await call("GET", "/cb/api/users");
    if (status !== 200) return oops(status, answer, "Reading the users");
    const tb = $("users"); tb.replaceChildren();
    for (const u of answer.users) {
      const id = "agent-boxes-" + u.id;
      const input = el("input", null, { type: "number", min: "0", max: "64", value: String(u.max_agent_boxes), id,
        "aria-label": "Agent boxes of " + u.name + " (0: no cap)" });
      const set = button("Set", "", async () => {
        clearErrors();
        const { status, answer } = await call("PATCH", `/cb/api/users/${u.id}`, { max_agent_boxes: Number(input.value) });
        if (status !== 200) { oops(status, answer, "Setting " + u.name + "'s agent boxes", input); return; }
        loadUsers();
      }, { "aria-label": "Set the agent boxes of " + u.name });
      const cell = el("div", null, { class: "row-actions" }); cell.append(input, set);
      tb.append(row($("users-table"), [u.name + (u.admin ? " (admin)" : "") + (u.disabled ? " (disabled)" : ""), u.idp || "an admin", cell]));
    }
  }
  loadSettings(); loadQueue(); loadInvites(); loadTokens(); loadUsers();
})();
