// The Schedules page (/cb/schedules): each box's scheduled wakes, set and
// cleared (docs/wake.md). The api says every time as a person reads it.
"use strict";
(() => {
  const { $, call, busy, button, clearErrors, showError, fail, confirm, row, el, plain } = cb;
  // The api names the field of a refusal: its sentence goes beside it.
  const fields = { box: "box", at: "at", cron: "cron", time_zone: "time_zone", keep_up_minutes: "keep_up_minutes" };

  async function load() {
    const { status, answer } = await call("GET", "/cb/api/schedules");
    if (status !== 200) { $("state").textContent = "Your schedules could not be read; reload to try again."; fail("Reading your schedules", status, answer); return; }
    const list = $("boxes"), select = $("box");
    const chosen = select.value;
    list.replaceChildren();
    select.replaceChildren();
    for (const b of answer.boxes) {
      select.append(el("option", b.name, { value: b.name }));
      const section = el("section", null, { "aria-labelledby": "box-" + b.id });
      section.append(el("h2", b.name, { id: "box-" + b.id }));
      if (!b.schedules.length) {
        section.append(el("p", "No schedules: " + b.name + " wakes only when it is used.", { class: "muted" }));
      } else {
        const table = el("table", null, { id: "schedules-" + b.name });
        const head = el("thead"), tr = el("tr");
        for (const h of ["Wakes", "Next wake", "Kept up after", "Up until"]) tr.append(el("th", h));
        const th = el("th", null, { "data-label": "" });
        th.append(el("span", "Actions", { class: "visually-hidden" }));
        tr.append(th);
        head.append(tr);
        const body = el("tbody");
        table.append(head, body);
        for (const s of b.schedules) {
          const clearButton = button("Clear", "danger", () => clear(b, s), { "aria-label": "Clear the wake " + s.wakes + " of " + b.name });
          body.append(row(table, [s.wakes, s.next, s.keep_up, s.up_until || "Not kept up now", clearButton]));
        }
        section.append(table);
      }
      list.append(section);
    }
    if (chosen) select.value = chosen;
    $("add-section").hidden = answer.boxes.length === 0;
    $("state").textContent = answer.boxes.length ? "" : "You have no boxes yet. Make one with the cocoonbox CLI or app, then schedule its wakes here.";
  }

  async function clear(b, s) {
    clearErrors();
    $("added").textContent = "";
    if (!await confirm("Clear this wake of " + b.name + "?", b.name + " will no longer wake at " + s.wakes + ". Idle hibernate may take it as usual.", "Clear")) return;
    const { status, answer } = await call("DELETE", "/cb/api/schedules/" + encodeURIComponent(b.name) + "/" + s.id);
    if (status !== 204) fail("Clearing the wake", status, answer);
    load();
  }

  function kind() {
    const once = $("kind-once").checked;
    $("at-label").hidden = !once;
    $("cron-label").hidden = once;
    $("cron-hint").hidden = once;
  }
  $("kind-once").addEventListener("change", kind);
  $("kind-cron").addEventListener("change", kind);
  try { $("time_zone").value = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; } catch (e) { $("time_zone").value = "UTC"; }

  $("add").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy($("add-submit"), async () => {
      clearErrors();
      $("added").textContent = "";
      const once = $("kind-once").checked;
      const body = { box: $("box").value, at: once ? $("at").value : "", cron: once ? "" : $("cron").value,
                     time_zone: $("time_zone").value, keep_up_minutes: $("keep_up_minutes").value };
      if (once && !body.at) { showError("Wake at: choose a date and time.", $("at")); return; }
      if (!once && !body.cron.trim()) { showError("Cron expression: give one, such as 30 7 * * 1-5.", $("cron")); return; }
      const { status, answer } = await call("POST", "/cb/api/schedules", body);
      if (status !== 201) { const f = fields[answer.field]; showError(plain(answer, status, "Adding the wake"), f ? $(f) : undefined); return; }
      $("added").textContent = "Added: " + body.box + " wakes next at " + answer.next + ".";
      $("at").value = ""; $("cron").value = "";
      load();
    });
  });
  load();
})();
