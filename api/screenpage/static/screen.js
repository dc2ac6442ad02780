// The console's screen page (docs/screen.md): noVNC on the screen's
// WebSocket form (/cb/api/boxes/NAME/screen, the console session's
// cookie), view and take-over input, scaled to the window.
//
// Contract: Idle user boxes ("The share page does the same while its tab
// is hidden, a tab hidden from the start included, so a screen open in
// the background keeps no box up"): the page holds a screen only while
// the tab is visible, closes it when the tab is hidden and opens it again
// when the tab shows; a tab opened hidden opens none until it shows.
import RFB from './novnc/core/rfb.js';

const box = decodeURIComponent(location.pathname.split('/')[3] || '');
const state = document.getElementById('screen-state');
const target = document.getElementById('screen');
let rfb = null;

// What each close code of the WebSocket means (session.Close*).
const closed = {
    4404: 'No such box of yours.',
    4409: 'The box is not running: wake it (cocoonbox box ensure ' + box + '), then reload.',
    4401: 'Your console session ended: sign in again.',
    4503: 'The box\'s desktop does not answer yet: reload in a moment.',
};

function say(text) {
    state.textContent = text;
    document.body.dataset.screen = text;
}

function socketURL() {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return scheme + '//' + location.host + '/cb/api/boxes/' + encodeURIComponent(box) + '/screen';
}

function open() {
    if (rfb || document.visibilityState !== 'visible') {
        return;
    }
    const ws = new WebSocket(socketURL(), ['binary']);
    let code = 0;
    ws.addEventListener('close', (e) => { code = e.code; });
    const r = new RFB(target, ws, { shared: true });
    r.scaleViewport = true;
    r.addEventListener('connect', () => { say('The screen of ' + box + '.'); document.body.dataset.connected = 'yes'; });
    r.addEventListener('disconnect', () => {
        document.body.dataset.connected = 'no';
        if (rfb === r) {
            rfb = null;
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
