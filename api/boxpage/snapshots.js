// The Boxes page's snapshots of a box (issue 42, Deliver 4; docs/console.md,
// Boxes): Snapshots beside a box lists its snapshots; Browse opens one at
// /home/user, a directory's name opens it; Restore beside an entry puts
// its path in the restore form, which restores it into the running box,
// in place or under a directory, after asking.
"use strict";
(() => {
  const { $, call, busy, button, clearErrors, showError, fail, plain, confirm, row, el, when } = cb;
  const kinds = { file: "File", dir: "Directory", symlink: "Link" };
  let box = "", snapshot = "";

  // size says a count of bytes as a person does: "1.2 MB".
  function size(n) {
    if (n < 1000) return n + (n === 1 ? " byte" : " bytes");
    const units = ["kB", "MB", "GB", "TB"];
    let i = -1;
    do { n /= 1000; i++; } while (n >= 1000 && i < units.length - 1);
    return (n < 10 ? n.toFixed(1) : Math.round(n)) + " " + units[i];
  }
  const api = (...parts) => "/cb/api/boxes/" + parts.map(encodeURIComponent).join("/");

  // show lists the snapshots of box name (Snapshots beside it).
  async function show(name) {
    box = name;
    $("snapshots-box").textContent = name;
    $("restore-box").textContent = name;
    $("snapshots-section").hidden = false;
    $("browse").hidden = true;
    $("snapshots").hidden = true;
    $("snapshots-state").textContent = "Reading the snapshots of " + name + "…";
    $("snapshots-title").scrollIntoView();
    const { status, answer } = await call("GET", api(name, "snapshots"));
    if (status !== 200) {
      $("snapshots-state").textContent = "The snapshots of " + name + " could not be read.";
      fail("Reading the snapshots of " + name, status, answer);
      return;
    }
    const table = $("snapshots"), body = table.querySelector("tbody");
    body.replaceChildren();
    for (const s of answer.snapshots.slice().reverse()) { // newest first
      body.append(row(table, [el("code", s.name), when(s.created_ms), String(s.files), size(s.bytes),
        button("Browse", "", () => browse(s.name, "/home/user"), { "aria-label": "Browse snapshot " + s.name })]));
    }
    table.hidden = answer.snapshots.length === 0;
    const n = answer.snapshots.length;
    $("snapshots-state").textContent = n === 0 ? "No snapshot of " + name + " yet: Save makes one."
      : (n === 1 ? "1 snapshot, " : n + " snapshots, newest first, ") + "each of /home/user and /workspace.";
  }

  // browse shows directory dir of snapshot snap.
  async function browse(snap, dir) {
    const { status, answer } = await call("GET", api(box, "snapshots", snap) + "?path=" + encodeURIComponent(dir));
    if (status !== 200) { fail("Reading " + dir + " of the snapshot", status, answer); return; }
    snapshot = snap;
    $("browse").hidden = false;
    $("browse-title").textContent = answer.path + " in snapshot " + answer.snapshot;
    const places = $("browse-places");
    places.replaceChildren();
    const parent = answer.path.slice(0, answer.path.lastIndexOf("/"));
    if (answer.path !== "/home/user" && answer.path !== "/workspace") places.append(button("Up to " + parent, "", () => browse(snap, parent)));
    for (const p of ["/home/user", "/workspace"]) if (p !== answer.path) places.append(button(p, "", () => browse(snap, p), { "aria-label": "Browse " + p }));
    const table = $("entries"), body = table.querySelector("tbody");
    body.replaceChildren();
    for (const e of answer.entries) {
      const name = e.type === "dir" ? button(e.name + "/", "linkish", () => browse(snap, e.path), { "aria-label": "Open " + e.path }) : el("code", e.name);
      const kind = e.target ? (kinds[e.type] || e.type) + " to " + e.target : (kinds[e.type] || e.type);
      body.append(row(table, [name, kind, e.type === "file" ? size(e.size) : "", when(e.modified_ms),
        button("Restore…", "", () => pick(e.path), { "aria-label": "Restore " + e.path })]));
    }
    table.hidden = answer.entries.length === 0;
    $("entries-empty").hidden = answer.entries.length !== 0;
    $("restore-path").value = answer.path;
  }

  // pick puts path in the restore form.
  function pick(path) {
    clearErrors();
    $("restore-path").value = path;
    $("restore-path").focus();
  }

  $("restore").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy($("restore-submit"), async () => {
      clearErrors();
      $("restore-done").textContent = "";
      const path = $("restore-path").value.trim(), to = $("restore-to").value.trim();
      if (!path) { showError("Path: name the file or directory to restore.", $("restore-path")); return; }
      const asked = to
        ? confirm("Restore " + path + " under " + to + "?", "It writes " + path + " of snapshot " + snapshot + ", with all under it, into " + box + " under " + to + ", replacing what is there at the same paths.", "Restore")
        : confirm("Restore " + path + " in place?", "It replaces what " + box + " holds at " + path + " now with snapshot " + snapshot + "'s copy, with all under it.", "Restore");
      if (!await asked) return;
      const { status, answer } = await call("POST", api(box, "snapshots", snapshot, "restore"), { path, to, confirm: true });
      if (status !== 200) {
        showError(plain(answer, status, "Restoring " + path), answer.field === "to" ? $("restore-to") : answer.field === "path" ? $("restore-path") : undefined);
        return;
      }
      $("restore-done").textContent = "Restored " + answer.entries + (answer.entries === 1 ? " entry" : " entries") + " (" + size(answer.bytes) + ") of " + path +
        " into " + box + (to ? " under " + to : " in place") + ".";
    });
  });

  cb.snapshots = show;
})();
