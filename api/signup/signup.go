// Package signup is how people join and sign in without an admin typing
// their passwords: GitHub as the one identity provider (identities, the
// GitHub sign-in's begin and callback, connecting and disconnecting an
// identity from the console) and signup behind a queue with seats, an
// hourly brake, allowlists and invites.
//
// Its tables live in the users database under signup_schema_migrations,
// after users.Schema: identities, signup_settings (one row), signup_queue,
// invites and github_login_flows (migration 0001), invite_tokens (0002).
//
// The GitHub sign-in (github*.go, begin.go, callback.go, identities.go)
// hands an identity no user has to the signup side through Arrive
// (arrive.go's Arrival and Outcome).
//
// Contract: Sign-in with GitHub and signup. docs/signup.md.
package signup

import (
	"embed"

	"github.com/cocoonbox/cocoonbox/api/database"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the signup package's migrations (signup_schema_migrations);
// its tables refer to users, so it migrates after users.Schema.
var Schema = database.NewSchema("signup_schema_migrations", migrations, "migrations")
