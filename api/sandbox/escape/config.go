package escape

// Config is what the test tells the probe: where the canaries are and
// what marks the processes outside the box.
type Config struct {
	// HostFiles are host canaries by their host path.
	HostFiles []string `json:"host_files"`
	// BoxFiles are another box's canary: its host paths (upper layer and
	// merged root), and, in the control run inside that box, its own path.
	BoxFiles []string `json:"box_files"`
	// BoxPath is the other box's canary as that box names it (/root/…),
	// tried under every visible process's /proc/PID/root.
	BoxPath string `json:"box_path"`
	// Disk is the host's disk holding the canaries, "major:minor"; Loop a
	// host loop device's.
	Disk string `json:"disk"`
	Loop string `json:"loop"`
	// HostMarker is in the command line of a host process; BoxMarker of a
	// process in the other box; SupervisorMarker of the supervisor's.
	HostMarker       string `json:"host_marker"`
	BoxMarker        string `json:"box_marker"`
	SupervisorMarker string `json:"supervisor_marker"`
	// Abstract is the name of an abstract unix socket the other box
	// listens on (without the leading NUL).
	Abstract string `json:"abstract"`
	// StateDir is the supervisor's state directory on the host.
	StateDir string `json:"state_dir"`
}

// Result is the probe's one line of output: the case, whether it
// reached what a box must not, and what it did (never what it read).
type Result struct {
	Case    string `json:"case"`
	Escaped bool   `json:"escaped"`
	Detail  string `json:"detail"`
}
