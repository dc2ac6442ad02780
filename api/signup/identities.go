package signup

import (
	_ "embed"
	"html/template"
	"net/http"
	"time"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// Identity is one of GET /cb/api/me/identities.
type Identity struct {
	IdP           string    `json:"idp"`
	Subject       string    `json:"subject"` // GitHub's numeric account id
	Login         string    `json:"login"`   // as at the last sign-in
	Email         string    `json:"email"`
	EmailVerified bool      `json:"email_verified"`
	CreatedAt     time.Time `json:"created_at"`
}

// IdentitiesAnswer is GET /cb/api/me/identities: the identities, whether
// the account was made through GitHub (then its identity cannot be
// disconnected), and whether GitHub sign-in is configured (connect).
type IdentitiesAnswer struct {
	Identities []Identity `json:"identities"`
	MadeBy     string     `json:"made_by"` // "" admin-made, "github"
	GitHub     bool       `json:"github"`
}

func (g *GitHub) listIdentities(w http.ResponseWriter, r *http.Request, u users.User) {
	ans := IdentitiesAnswer{Identities: []Identity{}, GitHub: g.on}
	var idp *string
	if err := g.pool.QueryRow(r.Context(), "SELECT idp FROM users WHERE id = $1", u.ID).Scan(&idp); err != nil {
		g.fail(w, r, "read the identities", err)
		return
	}
	if idp != nil {
		ans.MadeBy = *idp
	}
	rows, err := g.pool.Query(r.Context(), "SELECT idp, subject, login, email, email_verified, created_at FROM identities WHERE user_id = $1 ORDER BY idp", u.ID)
	if err != nil {
		g.fail(w, r, "read the identities", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var i Identity
		if err := rows.Scan(&i.IdP, &i.Subject, &i.Login, &i.Email, &i.EmailVerified, &i.CreatedAt); err != nil {
			g.fail(w, r, "read the identities", err)
			return
		}
		ans.Identities = append(ans.Identities, i)
	}
	if err := rows.Err(); err != nil {
		g.fail(w, r, "read the identities", err)
		return
	}
	server.WriteJSON(w, http.StatusOK, ans)
}

// disconnect is DELETE /cb/api/me/identities/github: 204; 404 when the
// user has none; 409 for an account made through GitHub (its identity is
// its only way in).
func (g *GitHub) disconnect(w http.ResponseWriter, r *http.Request, u users.User) {
	var madeByGitHub, had bool
	err := g.pool.QueryRow(r.Context(), `
		WITH u AS (SELECT coalesce(idp = 'github', false) AS made FROM users WHERE id = $1),
		     gone AS (DELETE FROM identities WHERE user_id = $1 AND idp = 'github' AND NOT (SELECT made FROM u) RETURNING 1)
		SELECT (SELECT made FROM u), EXISTS (SELECT 1 FROM gone) OR EXISTS (SELECT 1 FROM identities WHERE user_id = $1 AND idp = 'github')`,
		u.ID).Scan(&madeByGitHub, &had)
	switch {
	case err != nil:
		g.fail(w, r, "disconnect the identity", err)
	case madeByGitHub:
		server.WriteJSON(w, http.StatusConflict, apiError{"made_by_github", "this account was made through GitHub: its GitHub account is its way in and cannot be disconnected"})
	case !had:
		server.WriteJSON(w, http.StatusNotFound, apiError{"not_found", "no GitHub account is connected"})
	default:
		g.log.InfoContext(r.Context(), "GitHub identity disconnected", "user_id", u.ID)
		w.WriteHeader(http.StatusNoContent)
	}
}

var (
	//go:embed identities.html
	identitiesHTML string
	//go:embed identities.js
	identitiesJS []byte
)

// IdentitiesPage is /cb/identities, the user's connected accounts with
// Connect and Disconnect, which the console serves (console.Section.Page).
var IdentitiesPage = console.Page{Title: "Connected accounts", Main: template.HTML(identitiesHTML),
	Script: console.Asset{Name: "identities.js", Body: identitiesJS}}
