// The Connected accounts page (/cb/identities).
"use strict";
(() => {
  const { $, call, busy, clearErrors, fail, confirm } = cb;
  let login = "";
  async function load() {
    const { status, answer } = await call("GET", "/cb/api/me/identities");
    if (status !== 200) { fail("Reading your connected accounts", status, answer); return; }
    const gh = answer.identities.find((i) => i.idp === "github");
    login = gh ? gh.login : "";
    $("github").textContent = gh ? ("GitHub: " + gh.login + " (account " + gh.subject + ")" + (answer.made_by === "github" ? ", the account this one was made with" : ""))
                                 : (answer.github ? "GitHub: not connected." : "GitHub sign-in is not configured on this service.");
    $("connect").hidden = !!gh || !answer.github;
    $("disconnect").hidden = !gh || answer.made_by === "github";
  }
  $("connect").addEventListener("click", () => busy($("connect"), async () => {
    clearErrors();
    const { status, answer } = await call("POST", "/cb/api/me/identities/github", { return_to: "/cb/identities" });
    if (status === 200) { location.assign(answer.url); return; }
    fail("Connecting GitHub", status, answer);
  }));
  $("disconnect").addEventListener("click", () => busy($("disconnect"), async () => {
    clearErrors();
    if (!await confirm("Disconnect the GitHub account " + login + "?", "Sign in with GitHub stops signing you in to this account; your password sign-in, if you have one, stays.", "Disconnect")) return;
    const { status, answer } = await call("DELETE", "/cb/api/me/identities/github");
    if (status !== 204) { fail("Disconnecting GitHub", status, answer); return; }
    load();
  }));
  load();
})();
