// The console's screen page (docs/screen.md): noVNC on the screen's
// WebSocket form (/cb/api/boxes/NAME/screen, the console session's
// cookie), view and take-over input, scaled to the window, held open by
// hold.js: only while the tab is visible (Contract: Idle user boxes), and
// reconnecting by itself after the api restarts.
import { hold } from './hold.js';
import { follow } from './clipboard.js';

const box = decodeURIComponent(location.pathname.split('/')[3] || '');
const state = document.getElementById('screen-state');
const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';

function say(text) {
    state.textContent = text;
    document.body.dataset.screen = text;
}

hold(document.getElementById('screen'), {
    url: scheme + '//' + location.host + '/cb/api/boxes/' + encodeURIComponent(box) + '/screen',
    connected: 'The screen of ' + box + '.',
    // What each close code of the WebSocket means (session.Close*).
    closed: {
        4404: 'No such box of yours.',
        4409: 'The box is not running (hibernated or gone): wake it (cocoonbox box ensure ' + box + '), then reload.',
        4401: 'Your console session ended: sign in again.',
        4503: 'The box\'s desktop does not answer yet.',
        4408: 'This page took none of the screen for too long.',
        1001: 'The api restarted.',
        1006: 'The api is out of reach.',
    },
    final: new Set([4404, 4409, 4401]),
    say: say,
    // The box's clipboard in the page's area (clipboard.js).
    opened: follow,
});
