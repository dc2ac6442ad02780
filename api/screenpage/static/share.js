// The share page (docs/screen.md, "Shares"): noVNC on the share's socket
// (/cb/api/share/screen), which takes the link's secret as its first
// message. The secret is the link's fragment, which the browser never
// sends to a server; the page sends it over the socket alone. The server
// decides view-only: it drops a view-only viewer's input from the RFB
// stream, whatever this page does; the page only says so. hold.js keeps
// the screen open while the tab is visible (Contract: Idle user boxes:
// "The share page does the same while its tab is hidden, a tab hidden from
// the start included") and reconnects after the api restarts.
import { hold } from './hold.js';
import { follow } from './clipboard.js';

const secret = location.hash.slice(1);
const state = document.getElementById('screen-state');
const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';

// What each close code of the share's socket means (shares.Close*,
// session.Close*). One text for every link that opens nothing.
const closed = {
    4404: 'This share link does not work: it may be mistyped, expired or revoked. Ask its owner for a new one.',
    4410: 'This share has ended: its owner revoked it, it expired, or its owner signed out. Ask its owner for a new one.',
    4403: 'This share is view-only, and the viewer sent what it does not take: reload.',
    4409: 'The shared box is asleep: ask its owner to wake it, then reload.',
    4503: 'The shared box\'s desktop does not answer yet.',
    4408: 'This page took none of the screen for too long.',
    1001: 'The server restarted.',
    1006: 'The server is out of reach.',
};

function say(text) {
    state.textContent = text;
    document.body.dataset.screen = text;
}

// Another link pasted into this tab changes the fragment alone, which
// loads no page: load it, so the new secret is the one sent.
window.addEventListener('hashchange', () => location.reload());

if (!/^cbs_[0-9a-f]{64}$/.test(secret)) {
    say(closed[4404]);
} else {
    hold(document.getElementById('screen'), {
        url: scheme + '//' + location.host + '/cb/api/share/screen',
        first: secret,
        connected: 'A shared screen.',
        closed: closed,
        final: new Set([4404, 4410, 4403, 4409]),
        say: say,
    // The box's clipboard in the page's area (clipboard.js).
    opened: follow,
    });
}
