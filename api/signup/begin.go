package signup

import (
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/ratelimit"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// inviteShape is an invite code's grammar (cbi_ + 64 hex); whether it is
// usable is signup's to judge.
var inviteShape = regexp.MustCompile(`^cbi_[0-9a-f]{64}$`)

type beginRequest struct {
	ReturnTo string `json:"return_to"`
	Invite   string `json:"invite"`
}

// BeginAnswer is begin's and connect's answer: GitHub's authorize URL,
// where the page sends the browser.
type BeginAnswer struct {
	URL string `json:"url"`
}

// begin is POST /cb/api/auth/github/begin {return_to, invite}.
func (g *GitHub) begin(w http.ResponseWriter, r *http.Request) {
	var req beginRequest
	if !console.ReadJSON(w, r, &req) {
		return
	}
	if req.ReturnTo == "" {
		req.ReturnTo = "/cb/"
	}
	if req.Invite != "" && !inviteShape.MatchString(req.Invite) {
		server.WriteJSON(w, http.StatusBadRequest, apiError{"bad_invite", "the invite code is not cbi_ and 64 hex digits: copy the whole link again"})
		return
	}
	g.start(w, r, flow{Purpose: purposeSignIn, ReturnTo: req.ReturnTo, Invite: req.Invite})
}

// connect is POST /cb/api/me/identities/github {return_to}: begin for the
// signed-in user, whose callback links the GitHub account to them.
func (g *GitHub) connect(w http.ResponseWriter, r *http.Request, u users.User) {
	var req struct {
		ReturnTo string `json:"return_to"`
	}
	if !console.ReadJSON(w, r, &req) {
		return
	}
	if req.ReturnTo == "" {
		req.ReturnTo = "/cb/identities"
	}
	g.start(w, r, flow{Purpose: purposeConnect, UserID: u.ID, ReturnTo: req.ReturnTo})
}

// start stores f, sets the cb_login nonce cookie and answers GitHub's
// authorize URL; 404 with GitHub sign-in off, 400 a bad return_to, 429
// too_many past the address's limit.
func (g *GitHub) start(w http.ResponseWriter, r *http.Request, f flow) {
	if !g.on {
		server.WriteJSON(w, http.StatusNotFound, apiError{"not_configured", "sign-in with GitHub is not configured on this service"})
		return
	}
	if err := console.CheckReturnTo(f.ReturnTo); err != nil {
		server.WriteJSON(w, http.StatusBadRequest, apiError{"bad_return_to", err.Error()})
		return
	}
	addr := ratelimit.ClientKey(r, g.trusted)
	if _, wait, err := g.begins.Take(r.Context(), addr); err != nil {
		g.fail(w, r, "begin the GitHub sign-in", err)
		return
	} else if wait > 0 {
		g.log.WarnContext(r.Context(), "GitHub sign-in begin throttled", "address", addr, "retry_after", wait)
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		server.WriteJSON(w, http.StatusTooManyRequests, apiError{ErrTooMany, "too many sign-ins from this address; try again later"})
		return
	}
	state, nonce, err := g.storeFlow(r.Context(), &f)
	if err != nil {
		g.fail(w, r, "begin the GitHub sign-in", err)
		return
	}
	http.SetCookie(w, g.loginCookie(nonce, int(g.lifetime.Seconds())))
	server.WriteJSON(w, http.StatusOK, BeginAnswer{URL: g.gh.authorizeURL(g.callback, state, challenge(f.Verifier), f.Purpose == purposeConnect)})
}

func (g *GitHub) loginCookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: LoginCookie, Value: value, Path: "/cocoonbox.auth/", MaxAge: maxAge,
		HttpOnly: true, Secure: g.secure, SameSite: http.SameSiteLaxMode}
}
