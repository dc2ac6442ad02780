package main

import (
	"fmt"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/guest/pathwatch"
)

// watch is `vault --watch`, what cocoonbox-vault.service runs (Contract:
// Box API keys, "on every change of /run/silkd.env"): it renders, calls
// ready (sd_notify READY=1: logins wait for the boot's render), and renders
// again after every change of the claim env file (package pathwatch says
// why resident). A bad claim env is logged and the last good render stays,
// as in a single run. It returns 0 when stop (a file descriptor, -1 for
// none; tests) becomes readable, and 75 when the watch cannot go on
// (systemd then starts the service again).
func watch(log *journal.Logger, envPath, dir string, ready func(), stop int) int {
	err := pathwatch.Run([]string{envPath}, func() { run(log, envPath, dir) }, ready, stop)
	if err != nil {
		log.Send(journal.Err, msgWatchEnded, fmt.Sprintf("cannot watch %s: %v", envPath, err), "COCOONBOX_PATH", envPath)
		return cli.TryLater
	}
	return cli.OK
}
