// The screen's clipboard (docs/screen.md, "The console's screen page"):
// a text area under the desktop. The box's VNC sends its clipboard
// (ServerCutText; the box's server sends PRIMARY and CLIPBOARD changes),
// which noVNC gives as its 'clipboard' event: the area shows it, for the
// user to copy from. On the owner's page, text the user puts in the area
// goes to the box (noVNC's clipboardPasteFrom, a ClientCutText) when the
// area loses focus, as noVNC's own clipboard panel does. The share page
// never sends: its area is read-only (the api drops a view-only viewer's
// ClientCutText whatever a page sends; the page offers none at all).
const area = document.getElementById('clipboard');

// follow shows r's clipboard in the area and, when the area is not
// read-only, sends what the user puts there to r's box.
export function follow(r) {
    r.addEventListener('clipboard', (e) => { area.value = e.detail.text; });
    if (area.readOnly) {
        return;
    }
    const send = () => r.clipboardPasteFrom(area.value);
    area.addEventListener('change', send);
    r.addEventListener('disconnect', () => area.removeEventListener('change', send));
}
