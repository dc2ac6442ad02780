package branchbox

import (
	"path"
	"strings"
)

// maxPath bounds every path in an assignment, in bytes.
const maxPath = 1024

// ambientPrefixes are supervisor-authority and secret places no source,
// target, workspace or repository may be or lie below (Contract: Security
// contract, "ambient supervisor-authority or secret paths"): the kernel's
// views, the container engines, systemd and D-Bus, cocoonbox's own agent
// and secret files, host configuration and root's home.
var ambientPrefixes = []string{
	"/proc", "/sys", "/dev", "/boot", "/etc", "/root",
	"/var/run", "/run/docker", "/run/docker.sock", "/run/containerd", "/run/systemd",
	"/run/dbus", "/run/user", "/run/secrets", "/run/credentials",
	"/run/cocoonbox", "/run/cocoonbox-identity", "/run/cocoonbox-x", "/run/silkd.env",
	"/var/lib/docker", "/var/lib/containerd", "/var/lib/cocoonbox",
}

// ambientNames are path components that name an authority or a secret
// wherever they appear.
var ambientNames = map[string]bool{
	"docker.sock": true, "containerd.sock": true, "podman.sock": true, "buildkitd.sock": true,
	".ssh": true, ".gnupg": true, ".aws": true, ".docker": true, ".kube": true, ".azure": true,
	".git-credentials": true, ".netrc": true, ".npmrc": true, ".pypirc": true,
}

// AmbientReason says why p is an ambient authority or secret path, or "".
func AmbientReason(p string) string {
	for _, pre := range ambientPrefixes {
		if within(p, pre) {
			return "is or lies below " + pre + ", a supervisor-authority or secret path"
		}
	}
	for _, c := range strings.Split(p, "/") {
		if ambientNames[c] {
			return "has the component " + c + ", which names a supervisor authority or a secret"
		}
	}
	return ""
}

// pathReason checks the syntax shared by every path: absolute, clean (no
// "." or ".." and no doubled or trailing slash), bounded, no NUL or
// control character.
func pathReason(p string) string {
	switch {
	case p == "":
		return "is missing"
	case len(p) > maxPath:
		return "is longer than 1024 bytes"
	case p[0] != '/':
		return "must be absolute"
	case path.Clean(p) != p:
		return "must be clean (no '.', '..', '//' or trailing '/')"
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return "has a control character"
		}
	}
	return ""
}

func checkHostPath(where, p string) error {
	if r := pathReason(p); r != "" {
		return Refuse(RuleSyntax, where, "%q %s", p, r)
	}
	if p == "/" {
		return Refuse(RuleSyntax, where, "must not be /")
	}
	if r := AmbientReason(p); r != "" {
		return Refuse(RuleAmbientPath, where, "%s %s", p, r)
	}
	return nil
}

// checkSource: Contract: Security contract. Every source lies strictly
// below the run directory; a file materialization is directly in its
// materializations/ ("siblings below the assignment's materializations
// directory"), a directory or socket is elsewhere in the run directory.
func checkSource(where, p, runDir string, file bool) error {
	if r := pathReason(p); r != "" {
		return Refuse(RuleSourceOutsideRun, where, "%q %s", p, r)
	}
	if !within(p, runDir) || p == runDir {
		return Refuse(RuleSourceOutsideRun, where, "%s is not below the run directory %s", p, runDir)
	}
	rel := p[len(runDir)+1:]
	if rel == AssignmentFile {
		return Refuse(RuleSourceOutsideRun, where, "%s is the assignment itself", p)
	}
	inMat := within(rel, MaterializationsDir)
	if file {
		name, ok := strings.CutPrefix(rel, MaterializationsDir+"/")
		if !ok || strings.Contains(name, "/") || !fileNameRe.MatchString(name) {
			return Refuse(RuleSibling, where, "%s must be %s/%s/NAME, NAME matching %s", p, runDir, MaterializationsDir, fileNameRe)
		}
	} else if inMat {
		return Refuse(RuleSibling, where, "%s: directories and sockets do not go in %s/", p, MaterializationsDir)
	}
	for _, c := range strings.Split(rel, "/") {
		if !fileNameRe.MatchString(c) {
			return Refuse(RuleSourceOutsideRun, where, "%s: component %q must match %s", p, c, fileNameRe)
		}
	}
	if r := AmbientReason(rel); r != "" {
		return Refuse(RuleAmbientPath, where, "%s %s", p, r)
	}
	return nil
}

// checkTarget: Contract: Security contract, "targets outside the
// scope-specific BranchBox lease namespace".
func checkTarget(where, p string, s Scope) error {
	ns := TargetNamespace(s)
	if r := pathReason(p); r != "" {
		return Refuse(RuleTargetNamespace, where, "%q %s", p, r)
	}
	if ns == "" || !within(p, ns) || p == ns {
		return Refuse(RuleTargetNamespace, where, "%s is not below %s, the %s lease namespace", p, ns, s)
	}
	if r := AmbientReason(p); r != "" {
		return Refuse(RuleAmbientPath, where, "%s %s", p, r)
	}
	return nil
}
