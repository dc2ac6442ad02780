// hold keeps a screen open on a page (the console's screen page, the
// share page; docs/screen.md): noVNC on the screen's WebSocket while the
// tab is visible, none while it is hidden, and again after a close that
// is not final, with backoff and a visible "Reconnecting" state: the api
// restarted (1001, or 1006 while it is away), the box's VNC restarted
// (1000, 4503), the viewer was cut as stalled (4408).
//
// Contract: Idle user boxes ("The share page does the same while its tab
// is hidden, a tab hidden from the start included, so a screen open in
// the background keeps no box up"): a tab opened hidden opens none until
// it shows, and a hidden tab does not reconnect.
import RFB from './novnc/core/rfb.js';

// The first retry waits 1 s, each next one twice as long, up to 10 s.
const firstRetry = 1000;
const lastRetry = 10000;

// hold opens the screen on target with o:
//   url: the socket's address; first: a message sent on open (the share's
//   secret), or ''; connected: what the state says while open;
//   closed: code → what it says; final: the codes after which the page
//   waits for a reload; say(text): shows the state; opened(rfb), when
//   given: called with each new noVNC connection.
export function hold(target, o) {
    let rfb = null;
    let ended = false;
    let tries = 0;
    let retry = null;

    function open() {
        if (rfb || ended || retry || document.visibilityState !== 'visible') {
            return;
        }
        const ws = new WebSocket(o.url, ['binary']);
        let code = 1006;
        if (o.first) {
            // First the secret, before noVNC reads anything.
            ws.addEventListener('open', () => ws.send(o.first));
        }
        ws.addEventListener('close', (e) => { code = e.code; });
        const r = new RFB(target, ws, { shared: true });
        r.scaleViewport = true;
        if (o.opened) {
            o.opened(r);
        }
        r.addEventListener('connect', () => {
            tries = 0;
            document.body.dataset.reconnecting = 'no';
            o.say(o.connected);
            document.body.dataset.connected = 'yes';
        });
        r.addEventListener('disconnect', () => {
            document.body.dataset.connected = 'no';
            document.body.dataset.closeCode = String(code);
            if (rfb !== r) {
                return; // closed by close(): the tab is hidden
            }
            rfb = null;
            if (o.final.has(code)) {
                ended = true;
                o.say(o.closed[code]);
                return;
            }
            const wait = Math.min(firstRetry * 2 ** tries, lastRetry);
            tries++;
            document.body.dataset.reconnecting = 'yes';
            o.say('Reconnecting in ' + Math.round(wait / 1000) + ' s (try ' + tries + '): ' +
                (o.closed[code] || 'the screen closed.'));
            retry = setTimeout(() => { retry = null; open(); }, wait);
        });
        rfb = r;
    }

    function close() {
        if (retry) {
            clearTimeout(retry);
            retry = null;
        }
        if (rfb) {
            const r = rfb;
            rfb = null;
            r.disconnect();
        }
        if (!ended) {
            o.say('Paused while this tab is hidden.');
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
        o.say('Opens when this tab is shown.');
    }
}
