package box

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// exposure is the last line of systemd-analyze security UNIT.
var exposure = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+) (\S+)`)

// Security runs `systemd-analyze security UNIT` in the box and returns the
// unit's overall exposure (0.0, the safest, to 10.0), systemd's word for it
// (SAFE, OK, MEDIUM, EXPOSED, UNSAFE) and the checks it did not pass (the
// lines marked ✗), for a failure message. The error says when the tool
// printed no exposure line.
func (b *Box) Security(unit string) (score float64, level string, open []string, err error) {
	res, err := b.Exec(Cmd{Args: []string{"systemd-analyze", "security", "--no-pager", unit}})
	if err != nil {
		return 0, "", nil, err
	}
	m := exposure.FindStringSubmatch(res.Stdout)
	if m == nil {
		return 0, "", nil, fmt.Errorf("systemd-analyze security %s: no exposure level (exit %d): %s", unit, res.ExitCode, res.Stderr)
	}
	score, _ = strconv.ParseFloat(m[2], 64)
	for _, line := range strings.Split(res.Stdout, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "✗") {
			open = append(open, l)
		}
	}
	return score, m[3], open, nil
}
