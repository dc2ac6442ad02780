// The personal token page (/cb/token).
"use strict";
(() => {
  const { $, call, busy, clearErrors, fail, confirm, when } = cb;
  async function refresh() {
    const { status, answer } = await call("GET", "/cb/api/me/token");
    if (status !== 200) { fail("Reading the token", status, answer); return; }
    $("state").textContent = answer.exists
      ? "You have a personal token, made " + when(answer.created_at) + ", last used " + when(answer.used_at) + "."
      : "You have no personal token.";
    $("token-generate").textContent = answer.exists ? "Make a new token" : "Make a token";
    $("token-revoke").hidden = !answer.exists;
  }
  $("token-generate").addEventListener("click", () => busy($("token-generate"), async () => {
    clearErrors();
    if (!$("token-revoke").hidden && !await confirm("Replace your personal token?",
      "The token you have now stops working at once, in every script that uses it.", "Make a new token")) return;
    const { status, answer } = await call("POST", "/cb/api/me/token", {});
    if (status !== 200) { fail("Making the token", status, answer); return; }
    $("token-value").textContent = answer.token;
    $("shown").hidden = false;
    refresh();
  }));
  $("token-revoke").addEventListener("click", () => busy($("token-revoke"), async () => {
    clearErrors();
    if (!await confirm("Revoke your personal token?", "Every script that uses it is signed out at once.", "Revoke the token")) return;
    const { status, answer } = await call("DELETE", "/cb/api/me/token");
    if (status !== 204) { fail("Revoking the token", status, answer); return; }
    $("shown").hidden = true;
    refresh();
  }));
  refresh();
})();
