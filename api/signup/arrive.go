package signup

// Arrival is a GitHub sign-in of an identity no user has, as the callback
// hands it to signup's Arrive (docs/signup.md).
type Arrival struct {
	IdP, Subject, Login, Email string
	EmailVerified              bool
	// Invite is the cbi_ code the sign-in carried (begin's invite), or "".
	Invite string
}

// Outcome is Arrive's answer: exactly one of its fields is set.
type Outcome struct {
	// UserID: admitted, now or before: the callback signs them in.
	UserID string
	// QueueID: queued: the callback sets the cb_queue cookie and goes to /cb/queue.
	QueueID string
	// Refusal is a login_error code of the contract (signup_closed,
	// email_unverified, email_not_allowed, invite_required, declined, ...).
	Refusal string
}
