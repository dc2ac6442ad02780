// The sign-in page (/cb/ without a session).
"use strict";
(() => {
  const { $, call, busy, clearErrors, showError, plain, passwordSignIn } = cb;
  const returnTo = JSON.parse(document.body.dataset.page).return_to;
  const params = new URLSearchParams(location.search);
  // A GitHub sign-in's failure comes back as ?login_error=CODE: the text
  // is the page's, never the link's, so a link cannot put words here.
  const loginErrors = {
    signup_closed: "No cocoonbox account has this GitHub account, and signup is closed. Ask an admin for an account or an invite.",
    email_unverified: "Your GitHub account's primary email address is not verified. Verify it at GitHub, then sign in again.",
    email_not_allowed: "Signup is open to some email addresses only, and your GitHub account's primary address is not one of them.",
    invite_required: "Signup is by invite only: open the invite link you were sent, then sign in with GitHub from that page.",
    declined: "An admin declined your signup.",
    disabled: "This account is disabled; ask an admin.",
    github_taken: "That GitHub account is connected to another cocoonbox account already.",
    github_linked: "Your cocoonbox account is connected to another GitHub account already: disconnect that one first.",
    browser: "This sign-in did not start in this browser, or it was used already. Start it again here.",
    too_many: "Too many sign-ins from your address; try again in a few minutes.",
    github_denied: "You did not allow the sign-in at GitHub.",
    failed: "Signing in with GitHub failed; try again in a minute.",
  };
  if (params.has("login_error")) showError(loginErrors[params.get("login_error")] || "Signing in failed; try again.");
  const github = $("github-signin");
  if (github) {
    const invite = params.get("invite") || "";
    if (invite) $("invite-note").hidden = false;
    github.addEventListener("click", () => busy(github, async () => {
      clearErrors();
      const { status, answer } = await call("POST", "/cb/api/auth/github/begin", { return_to: returnTo, invite });
      if (status === 200) { location.assign(answer.url); return; }
      showError(answer.error === "too_many" ? loginErrors.too_many : plain(answer, status, "Sign-in with GitHub"));
    }));
  }
  passwordSignIn(() => location.assign(returnTo));
})();
