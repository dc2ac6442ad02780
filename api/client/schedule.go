package client

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// The grammar of a box's schedule (Contract: Scheduled wake; docs/wake.md),
// shared so that cocoonbox box schedule refuses a bad --cron, --tz or
// --keep-up before any call with the rule api/wake checks with. Each
// rule is the end of a sentence after the caller's own name of the field
// (the proto's, or the flag).

// MaxKeepUp bounds a schedule's keep-up time: 0 to 168h.
const MaxKeepUp = 7 * 24 * time.Hour

// cronParser reads five fields (minute hour day-of-month month
// day-of-week) and the @daily-style descriptors: robfig/cron's standard
// parser.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron reads a cron expression; the error of a bad one is the
// parser's own words, CronRule the rule. Whether it ever fires depends on
// the time it is read from: api/wake judges that.
func ParseCron(expr string) (cron.Schedule, error) { return cronParser.Parse(expr) }

// CronRule is the rule a cron expression expr that ParseCron refused
// breaks, in words.
func CronRule(expr string) string {
	return fmt.Sprintf("%q is not five fields (minute hour day-of-month month day-of-week, such as 30 7 * * 1-5) nor a descriptor such as @daily", expr)
}

// TimeZone loads an IANA time zone; "" is UTC, and "Local" (the reader's
// own zone, which differs between the CLI and the api) is refused. The
// error is the rule.
func TimeZone(name string) (*time.Location, error) {
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return nil, fmt.Errorf("%q is not an IANA time zone, such as Europe/Berlin", name)
	}
	return loc, nil
}

// CheckKeepUp checks a keep-up time: 0 to MaxKeepUp. The error is the
// rule.
func CheckKeepUp(d time.Duration) error {
	if d < 0 || d > MaxKeepUp {
		return fmt.Errorf("%s is not 0 to %s", d, MaxKeepUp)
	}
	return nil
}
