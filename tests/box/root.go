package box

import (
	"os/exec"
)

// InRoot runs the shell line in the root directory root under
// systemd-nspawn without booting it: an image build's view (apt and dpkg,
// no systemd as PID 1), as image/build installs the packages. Each of
// bindRO ("HOST:PATH") is mounted read-only. It answers stdout and stderr
// together; a non-zero exit is the error.
func InRoot(root string, bindRO []string, line string) (string, error) {
	args := []string{"-q", "-D", root, "--register=no", "--keep-unit", "--pipe",
		"-E", "DEBIAN_FRONTEND=noninteractive", "-E", "LC_ALL=C.UTF-8"}
	for _, b := range bindRO {
		args = append(args, "--bind-ro="+b)
	}
	out, err := exec.Command("systemd-nspawn", append(args, "sh", "-c", line)...).CombinedOutput()
	return string(out), err
}
