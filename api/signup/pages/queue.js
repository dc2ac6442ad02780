// The signup queue's page (/cb/queue), for a queued person without an
// account (its cb_queue cookie), or anyone else who opens it.
"use strict";
(() => {
  const { $, call, busy, clearErrors, fail, confirm, when } = cb;
  const signedIn = !document.body.dataset.signedOut;
  const show = (id) => { for (const s of ["waiting", "admitted", "rejected", "none", "member"]) $(s).hidden = s !== id; };
  async function refresh() {
    const { status, answer } = await call("GET", "/cb/api/queue/me");
    if (status === 404) { show(signedIn ? "member" : "none"); return; }
    if (status !== 200) { fail("Reading your place in the queue", status, answer); return; }
    if (answer.status === "waiting") {
      $("position").textContent = answer.position; $("total").textContent = answer.waiting;
      $("since").textContent = when(answer.since); $("email").textContent = answer.email;
      show("waiting");
    } else show(answer.status);
  }
  $("leave").addEventListener("click", () => busy($("leave"), async () => {
    clearErrors();
    if (!await confirm("Leave the signup queue?", "Your place, " + $("position").textContent + " of " + $("total").textContent +
      ", is lost; joining again puts you at the back.", "Leave the queue")) return;
    const { status, answer } = await call("DELETE", "/cb/api/queue/me");
    if (status === 204 || status === 404) show("none"); else fail("Leaving the queue", status, answer);
  }));
  $("signin").addEventListener("click", () => busy($("signin"), async () => {
    const { status, answer } = await call("POST", "/cb/api/auth/github/begin", { return_to: "/cb/" });
    if (status === 200 && answer.url) { location.assign(answer.url); return; }
    location.assign("/cb/");
  }));
  refresh();
  setInterval(refresh, 15000);
})();
