package offload

import (
	"fmt"
	"strings"
)

// HandoverHeadings are the headings every hand-over carries once each, as
// its own line (Contract: Offload, Hand-over).
var HandoverHeadings = []string{
	"## Goal and definition of done",
	"## User preferences and constraints",
	"## Current state",
	"## Decisions made",
	"## Files touched",
	"## Next steps",
	"## Commands",
	"## Environment facts",
	"## Gotchas learned",
	"## Open questions",
}

// MaxHandover is the hand-over's size limit, 256 KiB.
const MaxHandover = 256 << 10

// HandoverError is a hand-over that breaks the template; Missing and
// Repeated name the headings concerned.
type HandoverError struct {
	Reason   string
	Missing  []string
	Repeated []string
}

func (e *HandoverError) Error() string {
	var parts []string
	if e.Reason != "" {
		parts = append(parts, e.Reason)
	}
	if len(e.Missing) > 0 {
		parts = append(parts, "missing headings: "+strings.Join(e.Missing, ", "))
	}
	if len(e.Repeated) > 0 {
		parts = append(parts, "headings more than once: "+strings.Join(e.Repeated, ", "))
	}
	return "hand-over refused: " + strings.Join(parts, "; ")
}

// CheckHandover refuses a hand-over whose first line does not start with
// "# Hand-over: ", that lacks a heading or has one twice, or that is over
// 256 KiB; the error is a *HandoverError naming what is wrong.
func CheckHandover(body string) error {
	e := &HandoverError{}
	if len(body) > MaxHandover {
		e.Reason = fmt.Sprintf("%d bytes, over the limit of %d", len(body), MaxHandover)
	}
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	if !strings.HasPrefix(lines[0], "# Hand-over: ") {
		if e.Reason != "" {
			e.Reason += "; "
		}
		e.Reason += `the first line does not start with "# Hand-over: "`
	}
	count := map[string]int{}
	for _, l := range lines {
		count[strings.TrimRight(l, " \t")]++
	}
	for _, h := range HandoverHeadings {
		switch {
		case count[h] == 0:
			e.Missing = append(e.Missing, h)
		case count[h] > 1:
			e.Repeated = append(e.Repeated, h)
		}
	}
	if e.Reason == "" && e.Missing == nil && e.Repeated == nil {
		return nil
	}
	return e
}
