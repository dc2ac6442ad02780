// The share page (docs/screen.md, "Shares"): noVNC on the share's socket
// (/cb/api/share/screen), which takes the link's secret as its first
// message. The secret is the link's fragment, which the browser never
// sends to a server; the page sends it over the socket alone, and takes
// it out of the address bar so a screenshot of the window does not show
// it. The server decides view-only: it drops a view-only viewer's input
// from the RFB stream, whatever this page does; the page only says so.
//
// Contract: Idle user boxes ("The share page does the same while its tab
// is hidden, a tab hidden from the start included, so a screen open in
// the background keeps no box up"): the page holds a screen only while
// the tab is visible, closes it when hidden and opens it again when shown.
import RFB from './novnc/core/rfb.js';

const secret = location.hash.slice(1);
const state = document.getElementById('screen-state');
const target = document.getElementById('screen');
let rfb = null;
let ended = false;

// What each close code of the share's socket means (shares.Close*,
// session.Close*). One text for every link that opens nothing.
const closed = {
    4404: 'This share link does not work: it may be mistyped, expired or revoked. Ask its owner for a new one.',
    4410: 'This share has ended: its owner revoked it, it expired, or its owner signed out. Ask its owner for a new one.',
    4403: 'This share is view-only, and the viewer sent what it does not take: reload.',
    4409: 'The shared box is asleep: ask its owner to wake it, then reload.',
    4503: 'The shared box\'s desktop does not answer yet: reload in a moment.',
};
const final = new Set([4404, 4410]);

function say(text) {
    state.textContent = text;
    document.body.dataset.screen = text;
}

function socketURL() {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return scheme + '//' + location.host + '/cb/api/share/screen';
}

function open() {
    if (rfb || ended || document.visibilityState !== 'visible') {
        return;
    }
    const ws = new WebSocket(socketURL(), ['binary']);
    let code = 0;
    // First the secret, before noVNC reads anything: the server speaks
    // RFB only once the secret opened a share.
    ws.addEventListener('open', () => ws.send(secret));
    ws.addEventListener('close', (e) => { code = e.code; });
    const r = new RFB(target, ws, { shared: true });
    r.scaleViewport = true;
    r.addEventListener('connect', () => { say('A shared screen.'); document.body.dataset.connected = 'yes'; });
    r.addEventListener('disconnect', () => {
        document.body.dataset.connected = 'no';
        document.body.dataset.closeCode = String(code);
        if (rfb === r) {
            rfb = null;
            ended = final.has(code);
            say(closed[code] || 'The screen closed: reload to open it again.');
        }
    });
    rfb = r;
}

function close() {
    if (rfb) {
        const r = rfb;
        rfb = null;
        r.disconnect();
        say('Paused while this tab is hidden.');
    }
}

// Another link pasted into this tab changes the fragment alone, which
// loads no page: load it, so the new secret is the one sent.
window.addEventListener('hashchange', () => location.reload());

if (!/^cbs_[0-9a-f]{64}$/.test(secret)) {
    ended = true;
    say(closed[4404]);
} else {
    document.addEventListener('visibilitychange', () => {
        if (document.visibilityState === 'visible') {
            open();
        } else {
            close();
        }
    });
    if (document.visibilityState === 'visible') {
        open();
    } else {
        say('Opens when this tab is shown.');
    }
}
