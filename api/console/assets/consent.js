// The consent page of GET /cb/oauth/authorize (api/console/consent.html),
// both flavors: "agent" (api/oauth's page) and "signin" (api/signin's).
"use strict";
(() => {
  const { $, call, busy, clearErrors, showError, plain, passwordSignIn } = cb;
  const data = $("consent-data");
  if (!data) return; // the request's own error: nothing to ask
  const query = data.dataset.query, flavor = data.dataset.flavor;
  const show = (id) => { for (const s of ["loading", "signin", "consent", "failed", "done"]) $(s).hidden = s !== id; };

  function fail(answer) {
    if (answer.redirect) { location.assign(answer.redirect); return; }
    $("failed-text").textContent = plain(answer, 0, "The request");
    show("failed");
  }

  // The sign-in form: a password sign-in (the console's session), then
  // check again; GitHub's, when the api offers it, comes back to this page
  // with its query and carries the invite (cocoonbox login --invite) of a
  // first-party sign-in, never an agent's (Contract: Sign-in with GitHub
  // and signup).
  const invite = flavor === "signin" ? (new URLSearchParams(query).get("invite") || "") : "";
  passwordSignIn(() => check());
  $("github-signin").addEventListener("click", () => busy($("github-signin"), async () => {
    clearErrors();
    const { status, answer } = await call("POST", "/cb/api/auth/github/begin", { return_to: location.pathname + location.search, invite });
    if (status === 200 && answer.url) { location.assign(answer.url); return; }
    showError(plain(answer, status, "Signing in with GitHub"));
  }));
  async function offerGitHub() {
    const { status, answer } = await call("GET", "/cb/api/auth/providers");
    $("github").hidden = !(status === 200 && answer.github);
  }
  function signIn() { show("signin"); $("user").focus(); offerGitHub(); }

  // The agent's question: an unverified client's name is its own claim,
  // so it is quoted and a warning box says so, with where it sends the
  // user; a verified one shows the host it was verified against.
  function askAgent(answer) {
    const name = answer.client_name || answer.client_id;
    $("question").textContent = answer.verified_host
      ? "Allow the agent " + name + " to manage boxes?"
      : "Allow an unverified agent calling itself \u201c" + name + "\u201d to manage boxes?";
    $("unverified").hidden = !!answer.verified_host;
    $("unverified-redirect").textContent = answer.redirect_host;
    $("verified").hidden = !answer.verified_host;
    $("verified-at").textContent = answer.verified_host || "";
    $("client-id").textContent = answer.client_id;
    $("verified-host").textContent = answer.verified_host || "unverified (a registered client: its name is its own claim)";
    $("redirect-host").textContent = answer.redirect_host;
    $("loopback").hidden = !answer.loopback;
    $("live-grant").hidden = !answer.live_grant;
    $("user-name").textContent = answer.user;
    $("max-boxes").value = answer.max_boxes;
    $("max-running").value = answer.max_running;
    $("days").value = String(answer.days);
  }
  function askSignIn(answer) {
    $("question").textContent = "Sign in the " + answer.client_name + " on " + answer.device_name + "?";
    $("user-name").textContent = answer.user;
  }

  async function check() {
    const { status, answer } = await call("POST", "/cb/api/oauth/check", { query });
    if (status === 401) {
      if (flavor === "signin") {
        $("signin-client").textContent = new URLSearchParams(query).get("client_id") === "cocoonbox-app" ? "CocoonBox app" : "cocoonbox CLI";
      }
      signIn();
      return;
    }
    if (status !== 200) { fail(answer); return; }
    $("who").textContent = answer.user;
    $("who").hidden = $("signout").hidden = false;
    (flavor === "agent" ? askAgent : askSignIn)(answer);
    show("consent");
  }

  async function decide(path, title, body) {
    clearErrors();
    $("allow").disabled = $("deny").disabled = true;
    const { status, answer } = await call("POST", path, body);
    $("allow").disabled = $("deny").disabled = false;
    if (status === 400 && !answer.redirect && path.endsWith("/approve") && flavor === "agent") {
      showError(plain(answer, status, "Allowing"));
      return;
    }
    if (status !== 200) { fail(answer); return; }
    $("done-title").textContent = title;
    show("done");
    location.assign(answer.redirect);
  }
  $("allow").addEventListener("click", () => decide("/cb/api/oauth/approve",
    flavor === "agent" ? "Allowed. Back to the agent…" : "Signed in. Back to the terminal…",
    flavor === "agent" ? { query, max_boxes: Number($("max-boxes").value), max_running: Number($("max-running").value), days: Number($("days").value) } : { query }));
  $("deny").addEventListener("click", () => decide("/cb/api/oauth/deny", flavor === "agent" ? "Denied." : "Sign-in denied.", { query }));
  check();
})();
