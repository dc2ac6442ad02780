package offload

// Finding is one preflight finding (Contract: Offload, Preflight), the
// same record on both sides: begin's findings and the host packer's
// table.
type Finding struct {
	Check   string `json:"check"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

// The outcomes of a finding: block stops with nothing changed, warn goes
// on only with the user's yes (or a go-ahead given beforehand), confirm is
// a warn naming the size.
const (
	Block   = "block"
	Warn    = "warn"
	Confirm = "confirm"
)

// Found is the finding of a check with its outcome and detail.
func Found(check, outcome, detail string) Finding {
	return Finding{Check: check, Outcome: outcome, Detail: detail}
}
