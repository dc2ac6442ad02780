// The console's shared script (docs/console.md): every page of /cb/ loads
// it before its own. It holds what each page did for itself before: the
// JSON call, the error summary and the errors beside their fields, the
// confirmation dialog, the Copy buttons, the busy buttons and sign-out.
"use strict";
const cb = (() => {
  const $ = (id) => document.getElementById(id);

  // call sends a JSON call of the console (JSON only, the session cookie
  // along) and answers {status, answer}; answer is {} for an empty body.
  async function call(method, path, body) {
    const opts = { method, credentials: "same-origin", headers: {} };
    if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
    let resp;
    try { resp = await fetch(path, opts); } catch (e) {
      return { status: 0, answer: { message: "The api could not be reached. Check your connection and try again." } };
    }
    let answer = {};
    try { answer = await resp.json(); } catch (e) { /* an empty answer */ }
    if (resp.status === 401 && location.pathname !== "/cb/" && !document.body.dataset.signedOut) {
      location.assign("/cb/?return_to=" + encodeURIComponent(location.pathname));
    }
    return { status: resp.status, answer: answer || {} };
  }

  // plain is the sentence a person reads for a refused call: the api's
  // message when it has one, else one by its status. The machine code
  // (answer.error) stays for programs.
  function plain(answer, status, what) {
    const text = answer.message || answer.error_description || (typeof answer.error === "string" && answer.error.includes(" ") ? answer.error : "");
    if (text) return text.charAt(0).toUpperCase() + text.slice(1);
    if (status === 0) return "The api could not be reached. Check your connection and try again.";
    if (status === 401) return "You are signed out. Sign in again.";
    if (status === 403) return "You may not do this.";
    if (status === 404) return what + ": it is gone already. Reload the page.";
    if (status === 429) return "Too many tries. Wait a minute, then try again.";
    return what + " did not work. Try again in a minute.";
  }

  const when = (t) => t ? new Date(t).toLocaleString([], { dateStyle: "medium", timeStyle: "short" }) : "never";

  // The error summary at the top of main (GOV.UK's pattern): every error
  // of the last action, each linking to its field, where the same sentence
  // stands beside it. Only the next action clears it; a list's reload
  // never does.
  function clearErrors() {
    const s = $("error-summary");
    s.hidden = true;
    s.querySelector("ul").replaceChildren();
    for (const e of document.querySelectorAll(".field-error")) e.remove();
    for (const i of document.querySelectorAll("[aria-invalid]")) { i.removeAttribute("aria-invalid"); i.removeAttribute("aria-describedby"); }
  }
  // showError adds text to the summary and, when field (an element) is
  // given, beside it.
  function showError(text, field) {
    const s = $("error-summary");
    const li = document.createElement("li");
    if (field && field.id) {
      const a = document.createElement("a");
      a.href = "#" + field.id;
      a.textContent = text;
      li.append(a);
      const beside = document.createElement("span");
      beside.className = "field-error";
      beside.id = field.id + "-error";
      beside.textContent = text;
      field.setAttribute("aria-invalid", "true");
      field.setAttribute("aria-describedby", beside.id);
      field.insertAdjacentElement("afterend", beside);
    } else {
      li.textContent = text;
    }
    s.querySelector("ul").append(li);
    s.hidden = false;
    s.focus();
  }
  // fail shows a refused call.
  function fail(what, status, answer, field) { showError(plain(answer, status, what), field); }

  // busy runs fn with button disabled, so a second click sends nothing;
  // it answers fn's answer, or undefined when the button was busy.
  async function busy(button, fn) {
    if (button.disabled) return undefined;
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    try { return await fn(); } finally { button.disabled = false; button.removeAttribute("aria-busy"); }
  }

  // confirm asks in the page's dialog: title names what goes, text says
  // what follows, action is the button's word. It answers true for the
  // action, false for Cancel or Escape. With field ({label, type}) the
  // dialog also takes a value, answered instead of true (Rotate's masked
  // field); an empty one is not taken.
  function confirm(title, text, action, field) {
    const d = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    $("confirm-ok").textContent = action;
    const input = $("confirm-input");
    $("confirm-field").hidden = !field;
    input.value = "";
    input.required = !!field;
    if (field) $("confirm-label").textContent = field.label;
    d.returnValue = "";
    d.showModal();
    (field ? input : $("confirm-cancel")).focus();
    return new Promise((resolve) => {
      d.addEventListener("close", () => {
        const ok = d.returnValue === "ok";
        resolve(ok ? (field ? input.value : true) : false);
        input.value = "";
      }, { once: true });
    });
  }

  // row makes a table row of cells (text or nodes), each labelled by its
  // column's heading for the stacked phone layout.
  function row(table, cells) {
    const heads = [...table.querySelectorAll("thead th")].map((th) => th.hasAttribute("data-label") ? th.dataset.label : th.textContent);
    const tr = document.createElement("tr");
    cells.forEach((c, i) => {
      const td = document.createElement("td");
      if (heads[i]) td.dataset.label = heads[i];
      if (c instanceof Node) td.append(c); else td.textContent = c;
      tr.append(td);
    });
    return tr;
  }
  function el(tag, text, attrs) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }
  function button(text, cls, fn, attrs) {
    const b = el("button", text, Object.assign({ type: "button", class: cls || "" }, attrs || {}));
    b.addEventListener("click", () => busy(b, fn));
    return b;
  }

  // A Copy button copies the text of the element its data-copy names.
  document.addEventListener("click", async (ev) => {
    const b = ev.target.closest("button[data-copy]");
    if (!b) return;
    const text = $(b.dataset.copy).textContent;
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = "Copied";
    } catch (e) {
      // No clipboard (a plain-http origin): select it for Ctrl+C.
      getSelection().selectAllChildren($(b.dataset.copy));
      b.textContent = "Selected: press Ctrl+C";
    }
    setTimeout(() => { b.textContent = "Copy"; }, 3000);
  });

  // passwordSignIn wires the page's password sign-in form (#signin with
  // #user, #password and #signin-submit): the console's session, then
  // signedIn().
  function passwordSignIn(signedIn) {
    $("signin").addEventListener("submit", (ev) => {
      ev.preventDefault();
      busy($("signin-submit"), async () => {
        clearErrors();
        const user = $("user").value, password = $("password").value;
        if (!user) showError("Enter your user name.", $("user"));
        if (!password) showError("Enter your password.", $("password"));
        if (!user || !password) return;
        const { status, answer } = await call("POST", "/cb/api/session", { user, password });
        if (status < 200 || status >= 300) { showError(plain(answer, status, "Signing in"), status === 401 ? $("password") : undefined); return; }
        $("password").value = "";
        signedIn();
      });
    });
  }

  const signout = $("signout");
  // A consent page (data-stay) asks again after a sign-out, so another
  // account can sign in and go on with the same request.
  if (signout) signout.addEventListener("click", () => busy(signout, async () => {
    await call("DELETE", "/cb/api/session");
    if (signout.dataset.stay) location.reload(); else location.assign("/cb/");
  }));

  return { $, call, plain, when, clearErrors, showError, fail, busy, confirm, row, el, button, passwordSignIn };
})();
