// The account page (/cb/account).
"use strict";
(() => {
  const { $, call, busy, clearErrors, showError, fail, confirm, plain } = cb;
  (async () => {
    const { status, answer } = await call("GET", "/cb/api/me");
    if (status !== 200) { fail("Reading your account", status, answer); return; }
    $("account-name").textContent = answer.name;
    $("account-admin").hidden = !answer.admin;
    $("admin-note").hidden = !answer.admin;
    $("delete-section").hidden = answer.admin;
  })();
  $("delete").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy($("delete-submit"), async () => {
      clearErrors();
      const name = $("name").value;
      if (name !== $("account-name").textContent) { showError("To delete it, type your own user name (" + $("account-name").textContent + ").", $("name")); return; }
      if (!await confirm("Delete the account " + name + " for good?", "Your boxes, their saves, your keys, devices and connections are deleted at once. This cannot be undone.",
        "Delete my account")) return;
      const { status, answer } = await call("POST", "/cb/api/me/delete", { name });
      if (status === 204) { location.assign("/cb/"); return; }
      showError(plain(answer, status, "Deleting your account"), $("name"));
    });
  });
})();
