// The Usage page (/cb/usage): today's spend against the daily cap, this
// month's, per model (docs/usage.md). Every figure is the api's, in the
// words it answers (said): the page computes none.
"use strict";
(() => {
  const { $, call, fail, row } = cb;
  async function load() {
    const { status, answer } = await call("GET", "/cb/api/usage");
    if (status !== 200) { $("state").textContent = "Your usage could not be read; reload to try again."; fail("Reading your usage", status, answer); return; }
    const said = answer.said;
    $("today").textContent = said.today;
    $("cap").textContent = said.daily_cap + (answer.default_cap ? " (the default)" : "");
    $("remaining").textContent = said.remaining_today;
    $("month").textContent = said.month;
    const meter = $("today-meter");
    meter.max = answer.daily_cap_micros;
    meter.value = answer.today_micros;
    meter.textContent = said.today + " of " + said.daily_cap;
    $("over").hidden = !answer.over_cap;
    $("over").textContent = "You have spent today's cap of " + said.daily_cap + ": the gateway refuses your boxes' model calls until it resets at 00:00 UTC. An admin can raise your cap.";
    const table = $("models"), body = table.querySelector("tbody");
    body.replaceChildren();
    for (const m of answer.models) body.append(row(table, [m.model, m.said.today, m.said.month, m.said.requests, m.said.tokens]));
    table.hidden = answer.models.length === 0;
    $("no-models").hidden = answer.models.length !== 0;
    $("state").textContent = answer.over_cap ? "Over today's cap." : said.remaining_today + " remaining today.";
    $("figures").hidden = false;
  }
  load();
})();
