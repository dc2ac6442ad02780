// The Boxes page's shares of the boxes' screens (issue 43, Deliver 4, "the
// console too"; docs/console.md, Boxes): the user's shares, newest first,
// each with its log and, while its link works, Revoke (asking first); a
// form makes one of a box, view-only or take-over, for 1 to 30 days, and
// shows its link once: the secret is the link's fragment, which the
// browser never sends, and the api keeps only its hash.
"use strict";
(() => {
  const { $, call, busy, button, clearErrors, showError, fail, plain, confirm, row, el, when } = cb;
  const events = { open: "Opened", close: "Closed" };

  async function load() {
    const { status, answer } = await call("GET", "/cb/api/shares");
    if (status !== 200) { $("shares-state").textContent = "Your shares could not be read; reload to try again."; return; }
    const table = $("shares"), body = table.querySelector("tbody");
    body.replaceChildren();
    for (const s of answer.shares) {
      const boxName = el("div", s.box);
      if (s.box_gone) boxName.append(el("span", " (deleted)", { class: "muted small" }));
      const until = s.revoked_ms ? "Revoked " + when(s.revoked_ms) : (s.expires_ms <= Date.now() ? "Expired " : "") + when(s.expires_ms);
      const div = el("div", null, { class: "buttons" });
      div.append(button("Log", "", () => log(s), { "aria-label": "Log of the share of " + s.box + " made " + when(s.created_ms) }));
      if (s.live) div.append(button("Revoke", "danger", () => revoke(s), { "aria-label": "Revoke the share of " + s.box + " made " + when(s.created_ms) }));
      body.append(row(table, [boxName, s.view_only ? "View only" : "Take over", when(s.created_ms), until, String(s.viewers), div]));
    }
    table.hidden = answer.shares.length === 0;
    const live = answer.shares.filter((s) => s.live).length;
    $("shares-state").textContent = answer.shares.length === 0 ? "You have shared no screen yet."
      : (live === 1 ? "1 link works" : live + " links work") + " now.";
  }

  async function revoke(s) {
    clearErrors();
    if (!await confirm("Revoke the share of " + s.box + "?", "Its link stops working at once, and whoever has its screen open loses it now. A new share makes a new link.", "Revoke")) return;
    const { status, answer } = await call("DELETE", "/cb/api/shares/" + encodeURIComponent(s.id));
    if (status !== 200) fail("Revoking the share of " + s.box, status, answer);
    await load();
  }

  // log shows the opens and closes of share s, newest first.
  async function log(s) {
    clearErrors();
    const { status, answer } = await call("GET", "/cb/api/shares/" + encodeURIComponent(s.id) + "/log");
    if (status !== 200) { fail("Reading the log of the share of " + s.box, status, answer); return; }
    $("share-log").hidden = false;
    $("share-log-title").textContent = "Log of the share of " + s.box + " made " + when(s.created_ms);
    const table = $("share-events"), body = table.querySelector("tbody");
    body.replaceChildren();
    for (const e of answer.events) {
      body.append(row(table, [when(e.at_ms), events[e.event] || e.event, e.viewer, e.address, e.reason || ""]));
    }
    table.hidden = answer.events.length === 0;
    $("share-log-state").textContent = answer.events.length === 0 ? "Nobody has opened this link yet." : "Newest first.";
  }

  $("share").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy($("share-submit"), async () => {
      clearErrors();
      $("share-new").hidden = true;
      $("share-link").textContent = "";
      const box = $("share-box").value, text = $("share-days").value.trim();
      if (text !== "" && !/^[0-9]+$/.test(text)) { showError("Days: give a whole number of days, 1 to 30.", $("share-days")); return; }
      const body = { box, view_only: $("share-view-only").checked, days: text === "" ? 0 : Number(text) };
      const { status, answer } = await call("POST", "/cb/api/shares", body);
      if (status !== 201) {
        const fields = { box: $("share-box"), days: $("share-days") };
        showError(plain(answer, status, "Sharing " + box), fields[answer.field]);
        return;
      }
      $("share-link").textContent = answer.link;
      $("share-new-box").textContent = answer.share.box;
      $("share-new").hidden = false;
      $("share-days").value = "";
      await load();
    });
  });

  // boxes puts the names of the user's boxes in the form's choice and
  // shows the section (the Boxes list calls it as it loads).
  cb.shareBoxes = (names, available) => {
    const sel = $("share-box"), chosen = sel.value;
    sel.replaceChildren(...names.map((n) => el("option", n, { value: n })));
    if (names.includes(chosen)) sel.value = chosen;
    $("share").hidden = names.length === 0;
    if (!available) return;
    if ($("shares-section").hidden) { $("shares-section").hidden = false; load(); }
  };
})();
